package mongosim

import (
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/blackpipe"
	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/query"
)

// currentOp and killOp over the operations in progress on every member of
// the deployment (adminState.ops).

// opKind is currentOp's "op" field.
func opKind(name string) string {
	switch name {
	case "find":
		return "query"
	case "getMore":
		return "getmore"
	case "insert", "update":
		return name
	case "delete":
		return "remove"
	}
	return "command"
}

// opDoc renders an operation as mongod's currentOp lists it.
func opDoc(op *activeOp, now time.Time) bson.D {
	r := op.r
	running := now.Sub(op.started)
	ns := r.db + ".$cmd"
	if s, ok := r.cmd[0].Value.(string); ok && isCollectionCommand(r.name) {
		ns = r.db + "." + s
	}
	if r.name == "getMore" {
		if v, ok := r.get("collection"); ok {
			if s, ok := v.(string); ok {
				ns = r.db + "." + s
			}
		}
	}
	conn := r.raw.Conn
	d := bson.D{
		{Key: "type", Value: "op"},
		{Key: "host", Value: r.member.addr},
		{Key: "desc", Value: "conn" + strconv.FormatInt(conn.ID(), 10)},
		{Key: "connectionId", Value: int32(conn.ID())},
		{Key: "client", Value: conn.RemoteAddr().String()},
	}
	if app := conn.AppName(); app != "" {
		d = append(d, bson.E{Key: "appName", Value: app})
	}
	d = append(d,
		bson.E{Key: "active", Value: true},
		bson.E{Key: "currentOpTime", Value: now.UTC().Format("2006-01-02T15:04:05.000+00:00")},
		bson.E{Key: "threaded", Value: true},
		bson.E{Key: "opid", Value: op.id},
	)
	if v, ok := r.get("lsid"); ok {
		d = append(d, bson.E{Key: "lsid", Value: v})
	}
	d = append(d,
		bson.E{Key: "secs_running", Value: int64(running / time.Second)},
		bson.E{Key: "microsecs_running", Value: running.Microseconds()},
		bson.E{Key: "op", Value: opKind(r.name)},
		bson.E{Key: "ns", Value: ns},
		bson.E{Key: "redacted", Value: false},
		bson.E{Key: "command", Value: withDB(r.cmd, r.db)},
		bson.E{Key: "numYields", Value: int32(0)},
		bson.E{Key: "locks", Value: bson.D{}},
		bson.E{Key: "waitingForLock", Value: false},
		bson.E{Key: "lockStats", Value: bson.D{}},
		bson.E{Key: "waitingForFlowControl", Value: false},
		bson.E{Key: "flowControlStats", Value: bson.D{}},
	)
	return d
}

// isCollectionCommand reports commands whose first value names a collection.
func isCollectionCommand(name string) bool {
	switch name {
	case "find", "insert", "update", "delete", "findAndModify", "aggregate", "count", "distinct",
		"create", "drop", "createIndexes", "dropIndexes", "listIndexes", "collMod", "collStats":
		return true
	}
	return false
}

func withDB(cmd bson.D, db string) bson.D {
	if _, ok := lookupD(cmd, "$db"); ok {
		return cmd
	}
	return append(append(bson.D(nil), cmd...), bson.E{Key: "$db", Value: db})
}

// currentOps lists the operations in progress and, with idle, the
// connections doing nothing (mongod's $all / idleConnections). Idle
// cursors and sessions are not listed.
func currentOps(r *request, idle bool) []bson.D {
	now := time.Now()
	var out []bson.D
	busy := map[*blackpipe.Conn]bool{}
	for _, op := range r.cluster.adm.ops.snapshot() {
		busy[op.r.raw.Conn] = true
		if isHelloName(op.r.name) && op.r != r {
			// Awaitable hellos (exhaust streams among them) are
			// monitoring, not user operations; mongod lists them, but
			// they churn every few seconds and only clutter
			// db.currentOp(). Only the name is read: it never changes,
			// while a hello's own goroutine sets its stream and context
			// as it starts waiting (awaitLater).
			continue
		}
		out = append(out, opDoc(op, now))
	}
	if !idle {
		return out
	}
	for _, m := range r.cluster.Members() {
		for _, conn := range m.srv.Connections() {
			if busy[conn] {
				continue
			}
			d := bson.D{
				{Key: "type", Value: "op"},
				{Key: "host", Value: m.addr},
				{Key: "desc", Value: "conn" + strconv.FormatInt(conn.ID(), 10)},
				{Key: "connectionId", Value: int32(conn.ID())},
				{Key: "client", Value: conn.RemoteAddr().String()},
			}
			if app := conn.AppName(); app != "" {
				d = append(d, bson.E{Key: "appName", Value: app})
			}
			out = append(out, append(d,
				bson.E{Key: "active", Value: false},
				bson.E{Key: "currentOpTime", Value: now.UTC().Format("2006-01-02T15:04:05.000+00:00")},
			))
		}
	}
	return out
}

// currentOpCmd: {currentOp: 1, $all, $ownOps, <filter fields>}. Fields
// other than the options filter the operations, as a query.
func currentOpCmd(r *request) (bson.D, error) {
	if err := adminOnly(r); err != nil {
		return nil, err
	}
	var filter bson.D
	all := false
	for _, e := range r.cmd[1:] {
		if e.Key == "$all" {
			all = asBool(e.Value)
		}
		if isGenericArg(e.Key) || e.Key == "$all" || e.Key == "$ownOps" || e.Key == "$truncateOps" {
			continue
		}
		filter = append(filter, e)
	}
	f, err := query.CompileFilter(filter)
	if err != nil {
		return nil, err
	}
	inprog := bson.A{}
	for _, d := range currentOps(r, all) {
		if f.Match(d) {
			inprog = append(inprog, d)
		}
	}
	return bson.D{{Key: "inprog", Value: inprog}, {Key: "ok", Value: 1.0}}, nil
}

// currentOpStage answers a leading {$currentOp: {...}} of aggregate: 1 on
// admin: the documents the rest of the pipeline reads.
func currentOpStage(r *request, spec any) ([]bson.D, error) {
	if r.db != "admin" {
		return nil, cmderr.New(cmderr.InvalidNamespace, "$currentOp must be run against the 'admin' database with {aggregate: 1}")
	}
	d, ok := spec.(bson.D)
	if !ok {
		return nil, cmderr.New(cmderr.FailedToParse, "$currentOp options must be specified in an object, but found: %s", bsonTypeName(spec))
	}
	idle := false
	for _, e := range d {
		if e.Key == "idleConnections" {
			idle, _ = e.Value.(bool)
		}
		switch e.Key {
		case "allUsers", "idleConnections", "idleCursors", "idleSessions", "localOps", "truncateOps", "backtrace", "targetAllNodes":
			if _, isBool := e.Value.(bool); !isBool {
				return nil, cmderr.New(cmderr.FailedToParse, "The '%s' parameter of the $currentOp stage must be a boolean value, but found: %s", e.Key, bsonTypeName(e.Value))
			}
		default:
			return nil, cmderr.New(cmderr.FailedToParse, "Unrecognized option '%s' in $currentOp stage.", e.Key)
		}
	}
	return currentOps(r, idle), nil
}

// killOpCmd: {killOp: 1, op: <opid>}. The operation ends with 11601
// Interrupted; killing an operation that has finished is not an error.
func killOpCmd(r *request) (bson.D, error) {
	if err := adminOnly(r); err != nil {
		return nil, err
	}
	v, ok := r.get("op")
	if !ok {
		return nil, cmderr.New(cmderr.NoSuchKey, "Did not provide \"op\" field")
	}
	id, isNum := asInt64(v)
	if !isNum {
		return nil, cmderr.New(cmderr.TypeMismatch, "\"op\" field was not of type int or long")
	}
	r.cluster.adm.ops.kill(int32(id))
	return bson.D{{Key: "info", Value: "attempting to kill op"}, {Key: "ok", Value: 1.0}}, nil
}

func init() {
	register(
		&command{name: "currentOp", run: currentOpCmd},
		&command{name: "killOp", run: killOpCmd},
	)
}
