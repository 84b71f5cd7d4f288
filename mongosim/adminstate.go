package mongosim

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// adminState is what the monitoring commands report and act on:
// serverStatus's opcounters, the operations in
// progress (currentOp, killOp), the recent log lines (getLog) and the users
// (usersInfo, createUser...).
type adminState struct {
	ops   opRegistry
	opc   opCounters
	lat   latencyRegistry
	log   logRing
	users *authenticator // always set: users authenticate even when auth is not required
}

// opCounters are serverStatus.opcounters, counted as mongod does: insert
// per document, update and delete per statement, query per find, getmore
// per getMore, command for everything else.
type opCounters struct {
	insert, query, update, delete, getmore, command atomic.Int64
}

// count records a request in the opcounters.
func (o *opCounters) count(r *request) {
	n := func(key string) int64 {
		if v, ok := r.get(key); ok {
			if a, ok := v.(bson.A); ok {
				return int64(len(a))
			}
		}
		return 0
	}
	switch r.name {
	case "insert":
		o.insert.Add(n("documents"))
	case "update":
		o.update.Add(n("updates"))
	case "delete":
		o.delete.Add(n("deletes"))
	case "find":
		o.query.Add(1)
	case "getMore":
		o.getmore.Add(1)
	default:
		o.command.Add(1)
	}
}

func (o *opCounters) doc() bson.D {
	return bson.D{
		{Key: "insert", Value: o.insert.Load()},
		{Key: "query", Value: o.query.Load()},
		{Key: "update", Value: o.update.Load()},
		{Key: "delete", Value: o.delete.Load()},
		{Key: "getmore", Value: o.getmore.Load()},
		{Key: "command", Value: o.command.Load()},
	}
}

// errKilled is the cancellation cause of an operation killOp ended.
var errKilled = errors.New("mongosim: operation killed")

// activeOp is an operation in progress, as currentOp lists it.
type activeOp struct {
	id      int32
	r       *request
	started time.Time
	ctx     *opContext // what killOp cancels
}

// opRegistry holds the operations in progress on every member.
type opRegistry struct {
	mu   sync.Mutex
	next int32
	ops  map[int32]*activeOp
}

// begin registers r (making its context cancellable by killOp); end
// unregisters it.
func (g *opRegistry) begin(r *request) {
	ctx := r.opCtx // allocated with the request (memberRequest)
	if ctx == nil {
		ctx = new(opContext)
	}
	*ctx = opContext{parent: r.ctx}
	r.ctx = ctx
	g.mu.Lock()
	if g.ops == nil {
		g.ops = make(map[int32]*activeOp)
	}
	g.next++
	// The request holds its entry: not an allocation of its own.
	op := &r.opEntry
	*op = activeOp{id: g.next, r: r, started: time.Now(), ctx: ctx}
	g.ops[op.id] = op
	g.mu.Unlock()
	r.op, r.ops = op, g
}

// unlist takes r out of the operations in progress: an operation leaves
// currentOp when it answers (a client that has its reply no longer sees
// it), its context when the handler returns (end).
func (r *request) unlist() {
	if r.op == nil {
		return
	}
	g := r.ops
	g.mu.Lock()
	delete(g.ops, r.op.id)
	g.mu.Unlock()
}

// end unregisters r and releases its context.
func (g *opRegistry) end(r *request) {
	r.unlist()
	r.op.ctx.cancel(context.Canceled, nil)
}

func (g *opRegistry) active() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.ops)
}

// kill interrupts operation id; it reports whether it was running.
func (g *opRegistry) kill(id int32) bool {
	g.mu.Lock()
	op := g.ops[id]
	g.mu.Unlock()
	if op == nil {
		return false
	}
	op.ctx.cancel(context.Canceled, errKilled)
	return true
}

// snapshot returns the operations in progress, oldest first.
func (g *opRegistry) snapshot() []*activeOp {
	g.mu.Lock()
	out := make([]*activeOp, 0, len(g.ops))
	for _, op := range g.ops {
		out = append(out, op)
	}
	g.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// killed reports whether killOp interrupted r.
func (r *request) killed() bool { return killedCtx(r.ctx) }

// killedCtx reports whether killOp interrupted the operation whose
// context is ctx.
func killedCtx(ctx context.Context) bool {
	c, _ := ctx.Value(opContextKey{}).(*opContext)
	return c != nil && c.killed()
}

// errWaitEnded is the answer of an operation whose wait ctx ended: as
// mongod, 11601 Interrupted when killOp ended it, else expired (its
// maxTimeMS; a closed connection reads no answer).
func errWaitEnded(ctx context.Context, expired error) error {
	if killedCtx(ctx) {
		return errInterrupted()
	}
	return expired
}

// errInterrupted is mongod's answer for an operation killOp ended.
func errInterrupted() error {
	return cmderr.New(cmderr.Interrupted, "operation was interrupted")
}

// logRing keeps the last lines of the server log for getLog, in mongod's
// structured (JSON) log format.
type logRing struct {
	mu    sync.Mutex
	lines []string
	total int64
}

const logRingSize = 1024

func (l *logRing) add(now time.Time, severity, component, msg string, args ...any) {
	attr := bson.D{}
	for i := 0; i+1 < len(args); i += 2 {
		attr = append(attr, bson.E{Key: fmt.Sprint(args[i]), Value: fmt.Sprint(args[i+1])})
	}
	line := bson.D{
		{Key: "t", Value: bson.D{{Key: "$date", Value: now.UTC().Format("2006-01-02T15:04:05.000+00:00")}}},
		{Key: "s", Value: severity},
		{Key: "c", Value: component},
		{Key: "id", Value: 0},
		{Key: "ctx", Value: "mongosim"},
		{Key: "msg", Value: msg},
	}
	if len(attr) > 0 {
		line = append(line, bson.E{Key: "attr", Value: attr})
	}
	b, err := bson.MarshalExtJSON(line, false, false)
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total++
	if len(l.lines) == logRingSize {
		l.lines = append(l.lines[:0], l.lines[1:]...)
	}
	l.lines = append(l.lines, string(b))
}

func (l *logRing) get() (lines []string, total int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...), l.total
}

// getLogCmd: {getLog: "global" | "startupWarnings" | "*"}.
func getLogCmd(r *request) (bson.D, error) {
	if err := adminOnly(r); err != nil {
		return nil, err
	}
	v, _ := r.get("getLog")
	name, ok := v.(string)
	if !ok {
		return nil, typeErr("getLog", "string", v)
	}
	switch name {
	case "*":
		return bson.D{{Key: "names", Value: bson.A{"global", "startupWarnings"}}, {Key: "ok", Value: 1.0}}, nil
	case "global":
		lines, total := r.cluster.adm.log.get()
		return bson.D{{Key: "totalLinesWritten", Value: int32(total)}, {Key: "log", Value: lines}, {Key: "ok", Value: 1.0}}, nil
	case "startupWarnings":
		return bson.D{{Key: "totalLinesWritten", Value: int32(0)}, {Key: "log", Value: []string{}}, {Key: "ok", Value: 1.0}}, nil
	}
	return nil, cmderr.New(cmderr.OperationFailed, "No log named '%s'", strings.TrimSpace(name))
}

// latencyStats are a collection's operation latencies, as $collStats
// latencyStats reports them: total microseconds and count per kind, and a
// histogram of power-of-two microsecond buckets.
type latencyStats struct {
	kinds [4]latencyKind // reads, writes, commands, transactions
}

type latencyKind struct {
	micros, ops int64
	buckets     [40]int64 // bucket i counts latencies in [2^i, 2^(i+1)) µs (0: under 2 µs)
}

var latencyKindNames = [4]string{"reads", "writes", "commands", "transactions"}

// latencyRegistry holds the latencies of every collection used.
type latencyRegistry struct {
	mu   sync.Mutex
	byNS map[string]*latencyStats
}

// record adds r's latency to its collection's stats; commands without a
// collection are not recorded.
func (g *latencyRegistry) record(r *request, d time.Duration) {
	coll := ""
	if s, ok := r.cmd[0].Value.(string); ok && isCollectionCommand(r.name) {
		coll = s
	} else if r.name == "getMore" {
		if v, ok := r.get("collection"); ok {
			if s, ok := v.(string); ok {
				coll = s
			}
		}
	}
	if coll == "" {
		return
	}
	// The namespace is looked up from a buffer on the stack: the string
	// is made only for a collection's first operation.
	var buf [128]byte
	ns := append(append(append(buf[:0], r.db...), '.'), coll...)
	kind := 2
	switch {
	case r.tx != nil:
		kind = 3
	case r.name == "find" || r.name == "getMore" || r.name == "aggregate" || r.name == "count" || r.name == "distinct":
		kind = 0
	case r.name == "insert" || r.name == "update" || r.name == "delete" || r.name == "findAndModify":
		kind = 1
	}
	us := d.Microseconds()
	b := 0
	for v := us; v >= 2 && b < 39; v >>= 1 {
		b++
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.byNS == nil {
		g.byNS = make(map[string]*latencyStats)
	}
	st := g.byNS[string(ns)]
	if st == nil {
		st = &latencyStats{}
		g.byNS[string(ns)] = st
	}
	k := &st.kinds[kind]
	k.micros += us
	k.ops++
	k.buckets[b]++
}

// doc renders ns's latencies; histograms adds the non-empty buckets.
func (g *latencyRegistry) doc(ns string, histograms bool) bson.D {
	g.mu.Lock()
	defer g.mu.Unlock()
	var st latencyStats
	if p := g.byNS[ns]; p != nil {
		st = *p
	}
	out := bson.D{}
	for i, k := range st.kinds {
		d := bson.D{}
		if histograms {
			h := bson.A{}
			for b, n := range k.buckets {
				if n > 0 {
					lo := int64(0)
					if b > 0 {
						lo = 1 << b
					}
					h = append(h, bson.D{{Key: "micros", Value: lo}, {Key: "count", Value: n}})
				}
			}
			d = append(d, bson.E{Key: "histogram", Value: h})
		}
		d = append(d, bson.E{Key: "latency", Value: k.micros}, bson.E{Key: "ops", Value: k.ops})
		out = append(out, bson.E{Key: latencyKindNames[i], Value: d})
	}
	return out
}
