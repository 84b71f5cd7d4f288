package mongosim

import (
	"context"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/blackpipe"
	"github.com/sturdy-go/sturdy/mongosim/internal/js"
)

// request is one command as the handlers see it.
type request struct {
	ctx     context.Context
	cluster *Cluster
	member  *Member
	raw     *blackpipe.Request
	db      string
	name    string      // canonical (registered) command name
	cmd     bson.D      // the command, document sequences folded in as arrays
	txn     *txnContext // retryable write: the session's statement table
	// txnEntry is what txn points to for a retryable write (bindTxn):
	// not an allocation of its own.
	txnEntry txnContext
	tx       *transaction // multi-document transaction the command runs in
	now      time.Time
	// stream is set while an exhaust hello streams its replies.
	stream *blackpipe.Stream
	rc     readConcern // validated readConcern; rc.atClusterTime set for snapshot reads
	// opCtx is the context ops.begin makes the request's: a member
	// request's own (memberRequest).
	opCtx *opContext
	// op is the request in currentOp (ops.begin), until it answers.
	op      *activeOp
	ops     *opRegistry
	opEntry activeOp // what op points to
	// cursorNS, when set, is the namespace a cursor reply names instead
	// of the one read (an aggregate on a view reads its base collection).
	cursorNS string
	// stxn, on a router, is the multi-shard transaction a statement
	// belongs to: each shard it reaches becomes a participant.
	stxn *shardTxn
	// keys filters cmd's keys for get (member requests).
	keys cmdKeys
	// What the request holds for its handler, not allocations of their
	// own: its system variables once built (systemVars), its scripts'
	// env (scripts) and the text index its filters use (textIndexFor).
	sysVars   map[string]any
	scriptEnv js.Env
	textOn    textTarget
}

// send answers the request. In an exhaust stream a successful reply
// carries moreToCome and an error reply ends the stream, as the
// server-monitoring spec requires.
func (r *request) send(doc bson.D) error {
	r.unlist()
	if r.stream == nil {
		return r.raw.ReplyD(doc)
	}
	ok, _ := lookupD(doc, "ok")
	more := asBool(ok)
	return r.stream.Send(doc, more)
}

// hangup closes the connection without a reply.
func (r *request) hangup() error {
	if r.stream != nil {
		return r.raw.Conn.Close() // the request itself is already resolved
	}
	return r.raw.Hangup()
}

// command describes one registered command.
type command struct {
	name string
	run  func(r *request) (bson.D, error)
	// write commands need the primary; everything else may run on a
	// secondary (mongosim serves reads from secondaries as if secondaryOk).
	write bool
	// retryableWrite commands may carry lsid+txnNumber and use the
	// retryable-write table (insert, update, delete, findAndModify, bulkWrite).
	retryableWrite bool
	// noAuth commands run before authentication (hello, sasl*, ping...).
	noAuth bool
	// exempt commands bypass the ingress request limiter and fail points
	// that do not name them explicitly (hello, auth).
	exempt bool
}

var commands = map[string]*command{}

// register adds commands under their lower-cased names; aliases share one
// entry (isMaster/ismaster/hello are separate registrations of one run func).
func register(cs ...*command) {
	for _, c := range cs {
		commands[strings.ToLower(c.name)] = c
	}
}

func lookupCommand(name string) *command { return commands[strings.ToLower(name)] }

// stmtResult is what the retryable-write table stores per statement so a
// retried statement replays its original outcome instead of executing again.
type stmtResult struct {
	N         int32
	NModified int32
	Upserted  any    // upserted _id, nil when none
	Reply     bson.D // findAndModify: the whole reply
}

// stmt runs statement i of a write command at most once per (lsid,
// txnNumber): if this transaction already executed it, the stored result is
// returned and run is not called; otherwise run executes and, when it
// succeeds, its result is recorded. Outside a retryable write it just runs.
func (r *request) stmt(i int, run func() (stmtResult, error)) (stmtResult, error) {
	if r.txn == nil {
		return run()
	}
	return r.txn.stmt(r.stmtID(i), run)
}

// stmtID is statement i's id: its position, or the stmtIds entry a mongos
// router sends (a shard's statements keep their place in the client's
// batch, so a retry replays the same statements).
func (r *request) stmtID(i int) int {
	v, _ := r.get("stmtIds")
	if a, ok := v.(bson.A); ok && i < len(a) {
		if n, ok := asInt64(a[i]); ok {
			return int(n)
		}
	}
	return i
}

// get returns the top-level field of the command. A find or an update
// asks for 20 to 30 fields, most of them absent, each a walk of the whole
// command (0.7 µs per command in the server profile): r.keys answers most
// absent ones at once.
func (r *request) get(key string) (any, bool) {
	if r.keys.absent(r.cmd, key) {
		return nil, false
	}
	for _, e := range r.cmd {
		if e.Key == key {
			return e.Value, true
		}
	}
	return nil, false
}

// cmdKeys is a filter of the top-level keys of one command document: a
// key whose bit is not set is not in it. It holds for the slice it was
// made from (the same first element and length); a request whose cmd is
// another slice (explain's inner command) walks it. Nothing changes a
// command's keys in place.
type cmdKeys struct {
	first *bson.E
	n     int
	bits  uint64
}

func newCmdKeys(cmd bson.D) cmdKeys {
	k := cmdKeys{n: len(cmd)}
	if len(cmd) > 0 {
		k.first = &cmd[0]
	}
	for _, e := range cmd {
		k.bits |= keyBit(e.Key)
	}
	return k
}

// absent reports whether key is certainly not a top-level key of cmd.
func (k *cmdKeys) absent(cmd bson.D, key string) bool {
	return k.n > 0 && len(cmd) == k.n && &cmd[0] == k.first && k.bits&keyBit(key) == 0
}

// keyBit is key's bit in a cmdKeys filter.
func keyBit(key string) uint64 {
	h := uint(len(key))
	if len(key) > 0 {
		h = h*31 + uint(key[0])
		h = h*31 + uint(key[len(key)-1])
		h = h*31 + uint(key[len(key)/2])
	}
	return 1 << (h % 64)
}
