package mongosim

import (
	"errors"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// How a router answers a command on a multi-shard deployment: a
// transaction's statements go to the transaction's shards (shard_txn.go);
// the commands in routerCommands mongos answers itself or splits across
// shards; a command on a sharded collection is targeted by its shard key
// (shard_read.go, shard_write.go); everything else is relayed to the
// database's primary shard.

// routerCommand is a command a router answers itself instead of relaying
// it by namespace. The table has the shape of the member's (command.go):
// entries keyed by lower-cased name, registered in init.
type routerCommand struct {
	name string
	run  func(r *Router, rq *request, cmd *command, out *outcome) (bson.D, error)
}

var routerCommands = map[string]*routerCommand{}

func registerRouted(cs ...*routerCommand) {
	for _, c := range cs {
		routerCommands[strings.ToLower(c.name)] = c
	}
}

func lookupRouterCommand(name string) *routerCommand { return routerCommands[strings.ToLower(name)] }

// adminRun adapts a router command that needs only the request.
func adminRun(run func(r *Router, rq *request) (bson.D, error)) func(*Router, *request, *command, *outcome) (bson.D, error) {
	return func(r *Router, rq *request, _ *command, _ *outcome) (bson.D, error) { return run(r, rq) }
}

func init() {
	registerRouted(
		&routerCommand{name: "enableSharding", run: adminRun((*Router).enableSharding)},
		&routerCommand{name: "shardCollection", run: adminRun((*Router).shardCollection)},
		&routerCommand{name: "listShards", run: adminRun((*Router).listShards)},
		&routerCommand{name: "split", run: adminRun((*Router).splitChunk)},
		&routerCommand{name: "moveChunk", run: adminRun((*Router).moveChunk)},
		&routerCommand{name: "getMore", run: adminRun((*Router).getMore)},
		&routerCommand{name: "killCursors", run: adminRun((*Router).killCursors)},
		&routerCommand{name: "listDatabases", run: adminRun((*Router).listDatabases)},
		&routerCommand{name: "dropDatabase", run: adminRun((*Router).dropDatabase)},
		&routerCommand{name: "bulkWrite", run: (*Router).bulkWrite},
		&routerCommand{name: "renameCollection", run: (*Router).renameCollection},
	)
	for _, name := range []string{"endSessions", "killSessions", "killAllSessions", "killAllSessionsByPattern", "refreshSessions"} {
		registerRouted(&routerCommand{name: name, run: adminRun((*Router).broadcastAdmin)})
	}
}

// routeSharded answers one command on a multi-shard deployment.
func (r *Router) routeSharded(rq *request, cmd *command, out *outcome, wce bson.D) {
	defer func() {
		if p := recover(); p != nil {
			r.cluster.logf("mongosim router %s: routing %s panicked: %v\n%s", r.addr, rq.name, p, debug.Stack())
			if !rq.raw.Replied() {
				_ = rq.send(errorDoc(cmderr.New(codeInternalError, "mongosim internal error in %s: %v", rq.name, p), nil))
			}
		}
	}()
	r.finishRouted(rq, out, wce)(r.route(rq, cmd, out))
}

// finishRouted returns the function that sends a routed command's reply
// or error: a shard's error reply as it came, the router's own errors
// labelled, a client gone away hung up.
func (r *Router) finishRouted(rq *request, out *outcome, wce bson.D) func(bson.D, error) {
	return func(reply bson.D, err error) { r.sendRouted(rq, out, wce, reply, err) }
}

func (r *Router) sendRouted(rq *request, out *outcome, wce, reply bson.D, err error) {
	if err != nil {
		var se *shardError
		switch {
		case errors.As(err, &se):
			reply = se.reply
		case rq.ctx.Err() != nil:
			_ = rq.hangup()
			return
		default:
			r.replyErr(rq, out, err)
			return
		}
	}
	if _, ok := lookupD(reply, "ok"); !ok {
		reply = append(reply, bson.E{Key: "ok", Value: 1.0})
	}
	if _, ok := lookupD(reply, "operationTime"); !ok {
		reply = r.cluster.sharding.withClusterTime(reply)
	}
	r.reply(rq, out, reply, wce, r.shardedRecoveryToken(rq))
}

// route runs rq and returns the reply to send.
func (r *Router) route(rq *request, cmd *command, out *outcome) (bson.D, error) {
	if len(rq.cmd) == 0 {
		return r.forwardTo(rq, cmd, out, 0) // the shard answers the empty command
	}
	if _, ok := rq.get("autocommit"); ok || rq.name == "commitTransaction" || rq.name == "abortTransaction" {
		return r.routeTxn(rq, cmd, out) // shard_txn.go
	}
	return r.routeStatement(rq, cmd, out)
}

// routeStatement routes a command by what it names: the router's own
// commands, a sharded collection by shard key, anything else to the
// database's primary shard.
func (r *Router) routeStatement(rq *request, cmd *command, out *outcome) (bson.D, error) {
	ss := r.cluster.sharding
	if rc := lookupRouterCommand(rq.name); rc != nil {
		return rc.run(r, rq, cmd, out)
	}
	if rq.db == "config" && rq.name == "find" {
		if reply, ok, err := r.configFind(rq); ok {
			return reply, err
		}
	}
	coll, _ := rq.cmd[0].Value.(string)
	if coll != "" && cmd != nil {
		if sc := ss.coll(rq.db + "." + coll); sc != nil {
			return r.routeShardedColl(rq, cmd, out, sc)
		}
	}
	if rq.name == "aggregate" && coll != "" && !isChangeStream(pipelineOf(rq)) && ss.needsRouter(pipelineOf(rq)) {
		return r.routerAggregate(rq, cmd, out, ss.unshardedColl(rq.db, coll), true)
	}
	if rq.name == "aggregate" && isChangeStream(pipelineOf(rq)) && coll == "" {
		return r.openMergedStream(rq) // shard_changestream.go
	}
	create := cmd != nil && (cmd.write || rq.name == "create" || rq.name == "createIndexes")
	return r.forwardTo(rq, cmd, out, ss.primaryOf(rq.db, create))
}

// forwardTo relays the command as received to shard i, remembering a
// cursor it opens so getMore finds its shard.
func (r *Router) forwardTo(rq *request, cmd *command, out *outcome, i int) (bson.D, error) {
	write := cmd == nil || cmd.write
	reply, err := r.shardRaw(rq, i, rq.raw.Command, rq.raw.Sequences, write, routerRetries(rq.name, cmd, out.hasTxnNumber))
	if err != nil {
		return nil, err
	}
	r.trackCursor(reply, i)
	return reply, nil
}

// trackCursor records a shard cursor opened by a relayed reply.
func (r *Router) trackCursor(reply bson.D, shard int) {
	cur, ok := lookupD(reply, "cursor")
	if !ok {
		return
	}
	d, _ := cur.(bson.D)
	idv, _ := lookupD(d, "id")
	id, _ := asInt64(idv)
	if id == 0 {
		return
	}
	ns, _ := lookupD(d, "ns")
	s, _ := ns.(string)
	ss := r.cluster.sharding
	c := &routerCursor{router: r.index, shard: shard, ns: s}
	c.lastUsed.Store(time.Now().UnixNano())
	ss.mu.Lock()
	ss.sweepCursors()
	ss.cursors[id] = c
	ss.mu.Unlock()
}

func pipelineOf(rq *request) bson.A {
	v, _ := rq.get("pipeline")
	a, _ := v.(bson.A)
	return a
}

// withField returns a copy of d with key set to v (appended if absent).
func withField(d bson.D, key string, v any) bson.D {
	out := slices.Clone(d)
	for i := range out {
		if out[i].Key == key {
			out[i].Value = v
			return out
		}
	}
	return append(out, bson.E{Key: key, Value: v})
}

// without returns a copy of d without the named fields.
func without(d bson.D, keys ...string) bson.D {
	out := make(bson.D, 0, len(d))
	for _, e := range d {
		if !slices.Contains(keys, e.Key) {
			out = append(out, e)
		}
	}
	return out
}

// bulkWrite (the client-level command) is relayed whole when its
// namespaces are unsharded and on one primary shard, else split by shard.
func (r *Router) bulkWrite(rq *request, cmd *command, out *outcome) (bson.D, error) {
	ss := r.cluster.sharding
	v, _ := rq.get("nsInfo")
	arr, _ := v.(bson.A)
	target := -1
	for _, x := range arr {
		d, _ := x.(bson.D)
		nsv, _ := lookupD(d, "ns")
		ns, _ := nsv.(string)
		db, _, _ := strings.Cut(ns, ".")
		p := ss.primaryOf(db, true)
		if ss.coll(ns) != nil || (target >= 0 && p != target) {
			return r.shardedBulkWrite(rq) // shard_bulk.go
		}
		target = p
	}
	if target < 0 {
		target = 0
	}
	return r.forwardTo(rq, cmd, out, target)
}

// renameCollection is an admin command naming its namespaces: it runs on
// the source database's primary shard, which must also be the target's.
func (r *Router) renameCollection(rq *request, cmd *command, out *outcome) (bson.D, error) {
	ss := r.cluster.sharding
	from, _ := rq.cmd[0].Value.(string)
	tov, _ := rq.get("to")
	to, _ := tov.(string)
	if ss.coll(from) != nil || ss.coll(to) != nil {
		return nil, cmderr.Unsupported("renameCollection of a sharded collection")
	}
	fromDB, _, _ := strings.Cut(from, ".")
	toDB, _, _ := strings.Cut(to, ".")
	p := ss.primaryOf(fromDB, false)
	ss.mu.Lock()
	if ss.dbs[toDB] == nil && toDB != "admin" && toDB != "config" && toDB != "local" {
		ss.dbs[toDB] = &shardedDB{primary: p, uuid: newUUID(), ts: bson.Timestamp{T: uint32(time.Now().Unix()), I: 1}}
	}
	ss.mu.Unlock()
	if ss.primaryOf(toDB, false) != p {
		return nil, cmderr.Unsupported("renameCollection between databases on different primary shards")
	}
	return r.forwardTo(rq, cmd, out, p)
}

// withClusterTime adds to a reply the router built itself the
// $clusterTime and operationTime mongos puts on every reply: the latest
// of the shards' cluster times.
func (ss *shardSet) withClusterTime(reply bson.D) bson.D {
	var now bson.Timestamp
	for _, sc := range ss.shards {
		if ts := sc.data.clusterClock.current(); now.Before(ts) {
			now = ts
		}
	}
	return append(reply,
		bson.E{Key: "$clusterTime", Value: bson.D{{Key: "clusterTime", Value: now}, {Key: "signature", Value: zeroSignatureValue}}},
		bson.E{Key: "operationTime", Value: now})
}
