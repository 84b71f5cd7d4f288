package mongosim

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	mevent "go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/wire"
)

// sdamEvents records what the official driver's monitors report.
type sdamEvents struct {
	mu          sync.Mutex
	awaited     map[string]int // streamed (Awaited) successful heartbeats per address
	failed      []error        // failed heartbeats
	poolCleared []string       // addresses whose pool was cleared
	primaryAt   map[string]time.Time
}

func newSDAMEvents() *sdamEvents {
	return &sdamEvents{awaited: map[string]int{}, primaryAt: map[string]time.Time{}}
}

func (e *sdamEvents) options() *options.ClientOptions {
	return options.Client().
		SetServerMonitor(&mevent.ServerMonitor{
			ServerHeartbeatSucceeded: func(ev *mevent.ServerHeartbeatSucceededEvent) {
				if ev.Awaited {
					e.mu.Lock()
					e.awaited[ev.ConnectionID]++
					e.mu.Unlock()
				}
			},
			ServerHeartbeatFailed: func(ev *mevent.ServerHeartbeatFailedEvent) {
				e.mu.Lock()
				e.failed = append(e.failed, ev.Failure)
				e.mu.Unlock()
			},
			ServerDescriptionChanged: func(ev *mevent.ServerDescriptionChangedEvent) {
				if ev.NewDescription.Kind == "RSPrimary" {
					e.mu.Lock()
					e.primaryAt[ev.Address.String()] = time.Now()
					e.mu.Unlock()
				}
			},
		}).
		SetPoolMonitor(&mevent.PoolMonitor{Event: func(ev *mevent.PoolEvent) {
			if ev.Type == mevent.ConnectionPoolCleared {
				e.mu.Lock()
				e.poolCleared = append(e.poolCleared, ev.Address)
				e.mu.Unlock()
			}
		}})
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The official driver's default monitoring streams hello replies: over an
// idle period of many heartbeats every member's heartbeats are Awaited
// replies pushed by the server (moreToCome), none fails and no pool is
// cleared.
func TestOfficialDriverStreamingMonitorIdle(t *testing.T) {
	c := StartWithOptions(t, Options{Members: 3})
	ev := newSDAMEvents()
	client := connect(t, c.URI(), ev.options().SetHeartbeatInterval(500*time.Millisecond))
	ctx := testCtx(t)
	if _, err := client.Database("test").Collection("c").InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	before := c.Stats().Streamed
	// Each member's topologyVersion stays put, so every reply waits the
	// full maxAwaitTimeMS (the 500 ms heartbeat, the driver's minimum): 4
	// per member are 2 s of idling.
	waitFor(t, 10*time.Second, "4 streamed heartbeats from each member", func() bool {
		ev.mu.Lock()
		defer ev.mu.Unlock()
		n := 0
		for _, k := range ev.awaited {
			if k >= 4 {
				n++
			}
		}
		return n >= 3
	})
	if got := c.Stats().Streamed - before; got < 9 {
		t.Errorf("server streamed %d replies, want at least 9", got)
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if len(ev.failed) > 0 || len(ev.poolCleared) > 0 {
		t.Fatalf("idle streaming: failed heartbeats %v, pools cleared %v", ev.failed, ev.poolCleared)
	}
}

// replSetStepDown wakes the streamed hellos: the official driver, with the
// default 10 s heartbeat, learns the new primary within a fraction of it,
// the next write succeeds there and no pool is cleared.
func TestOfficialDriverSeesStepDownByPush(t *testing.T) {
	c := StartWithOptions(t, Options{Members: 3})
	ev := newSDAMEvents()
	// Disconnect may wait out a 10 s heartbeat (a race in the driver
	// between Disconnect and its monitors): close the cluster first; the
	// 1 s server selection timeout bounds Disconnect's endSessions.
	client := connect(t, c.URI(), ev.options().SetHeartbeatInterval(10*time.Second).SetServerSelectionTimeout(time.Second))
	t.Cleanup(func() { _ = c.Close() })
	ctx := testCtx(t)
	coll := client.Database("test").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	ms := c.Members()
	waitFor(t, 5*time.Second, "streaming to start", func() bool { return c.Stats().Streamed > 0 || c.stats.awaiting.Load() >= 3 })
	start := time.Now()
	if err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "replSetStepDown", Value: 60}}).Err(); err != nil {
		t.Fatalf("replSetStepDown: %v", err)
	}
	newPrimary := ms[1].Addr()
	waitFor(t, 3*time.Second, "the driver to see the new primary", func() bool {
		ev.mu.Lock()
		defer ev.mu.Unlock()
		at, ok := ev.primaryAt[newPrimary]
		return ok && at.After(start)
	})
	ev.mu.Lock()
	took := ev.primaryAt[newPrimary].Sub(start)
	ev.mu.Unlock()
	t.Logf("driver saw the new primary %v after replSetStepDown", took)
	if took > time.Second {
		t.Errorf("took %v, want well under the 10 s heartbeat", took)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "x", Value: 2}}); err != nil {
		t.Fatalf("write after step-down: %v", err)
	}
	if !ms[1].IsPrimary() {
		t.Fatal("member 1 is not primary")
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if len(ev.poolCleared) > 0 || len(ev.failed) > 0 {
		t.Fatalf("pools cleared %v, failed heartbeats %v", ev.poolCleared, ev.failed)
	}
}

// The official driver's test harness sends mode {times: n, skip: 0}: times
// wins, as in mongod.
func TestOfficialDriverFailPointTimesAndSkip(t *testing.T) {
	c := Start(t)
	client := connect(t, c.URI(), options.Client().SetRetryWrites(false))
	ctx := testCtx(t)
	admin := client.Database("admin")
	mustRun(t, ctx, admin, bson.D{
		{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: int32(2)}, {Key: "skip", Value: int32(0)}}},
		{Key: "data", Value: bson.D{
			{Key: "failCommands", Value: bson.A{"insert"}},
			{Key: "errorCode", Value: int32(cmderr.NotPrimaryNoSecondaryOk)},
			{Key: "errorExtraInfo", Value: bson.D{{Key: "note", Value: "extra"}}},
		}},
	})
	coll := client.Database("test").Collection("c")
	for i := 0; i < 2; i++ {
		_, err := coll.InsertOne(ctx, bson.D{{Key: "i", Value: i}})
		var we mongo.WriteException
		var ce mongo.CommandError
		switch {
		case errors.As(err, &ce):
			if ce.Code != cmderr.NotPrimaryNoSecondaryOk {
				t.Fatalf("insert %d: %v", i, err)
			}
			raw := bson.Raw(ce.Raw)
			if v, err := raw.LookupErr("note"); err != nil || v.StringValue() != "extra" {
				t.Errorf("errorExtraInfo not merged: %v", raw)
			}
			if _, err := raw.LookupErr("topologyVersion", "processId"); err != nil {
				t.Errorf("13435 reply lacks topologyVersion: %v", raw)
			}
		case errors.As(err, &we):
			t.Fatalf("insert %d: unexpected write exception %v", i, err)
		default:
			t.Fatalf("insert %d: %v, want 13435", i, err)
		}
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "i", Value: 2}}); err != nil {
		t.Fatalf("third insert: %v", err)
	}
	// {skip: n} alone still skips.
	mustRun(t, ctx, admin, bson.D{
		{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: bson.D{{Key: "skip", Value: int32(1)}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "errorCode", Value: int32(2)}}},
	})
	if err := admin.RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
		t.Fatalf("skipped ping: %v", err)
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err(); err == nil {
		t.Fatal("second ping passed the fail point")
	}
	mustRun(t, ctx, admin, bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}})
}

// threadName names the connection ("conn<connectionId>"); blockConnection
// combines with errorCode; failInternalCommands is accepted.
func TestFailPointThreadNameAndBlockWithError(t *testing.T) {
	c := Start(t)
	ctx := testCtx(t)
	client := connect(t, c.URI(), options.Client().SetRetryWrites(false).SetMaxPoolSize(1))
	admin := client.Database("admin")
	// With one pooled connection every command uses the same server
	// connection: learn its id.
	st := mustRun(t, ctx, admin, bson.D{{Key: "hello", Value: 1}})
	connID := st.Lookup("connectionId").Int32()
	mustRun(t, ctx, admin, bson.D{
		{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: "alwaysOn"},
		{Key: "data", Value: bson.D{
			{Key: "failCommands", Value: bson.A{"ping"}},
			{Key: "threadName", Value: "conn" + strconv.FormatInt(int64(connID)+1000, 10)},
			{Key: "failInternalCommands", Value: true},
			{Key: "errorCode", Value: int32(2)},
		}},
	})
	if err := admin.RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
		t.Fatalf("ping on another thread failed: %v", err)
	}
	mustRun(t, ctx, admin, bson.D{
		{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: int32(1)}}},
		{Key: "data", Value: bson.D{
			{Key: "failCommands", Value: bson.A{"ping"}},
			{Key: "threadName", Value: "conn" + strconv.FormatInt(int64(connID), 10)},
			{Key: "blockConnection", Value: true},
			{Key: "blockTimeMS", Value: int32(150)},
			{Key: "errorCode", Value: int32(2)},
		}},
	})
	start := time.Now()
	err := admin.RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err()
	if took := time.Since(start); took < 150*time.Millisecond {
		t.Errorf("blocked ping answered after %v, want ≥ 150ms", took)
	}
	commandError(t, err, 2)
}

// A NotPrimaryError inside writeConcernError also brings the member's
// topologyVersion (top level, as mongod appends it).
func TestTopologyVersionOnWriteConcernNotPrimary(t *testing.T) {
	c := Start(t)
	ctx := testCtx(t)
	client := connect(t, c.URI(), options.Client().SetRetryWrites(false))
	mustRun(t, ctx, client.Database("admin"), bson.D{
		{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: int32(1)}}},
		{Key: "data", Value: bson.D{
			{Key: "failCommands", Value: bson.A{"insert"}},
			{Key: "writeConcernError", Value: bson.D{{Key: "code", Value: int32(cmderr.InterruptedDueToReplState)}, {Key: "errmsg", Value: "x"}}},
		}},
	})
	reply, err := runCmd(ctx, client.Database("test"), bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}}})
	if err != nil && reply == nil {
		t.Fatal(err)
	}
	if _, err := reply.LookupErr("topologyVersion", "counter"); err != nil {
		t.Fatalf("reply with writeConcernError 11602 lacks topologyVersion: %v", reply)
	}
}

// sendMsg sends one OP_MSG on a raw connection.
func (c *rawConn) sendMsg(flags wire.MsgFlags, cmd bson.D) {
	c.t.Helper()
	c.id++
	body, err := bson.Marshal(cmd)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.nc.Write(wire.AppendMsg(nil, c.id, 0, &wire.Msg{Flags: flags, Body: body})); err != nil {
		c.t.Fatal(err)
	}
}

// readMsg reads one OP_MSG reply within d.
func (c *rawConn) readMsg(d time.Duration) (*wire.Msg, error) {
	_ = c.nc.SetReadDeadline(time.Now().Add(d))
	b, err := wire.ReadMessage(c.nc, nil, 0)
	if err != nil {
		return nil, err
	}
	m, err := wire.Decode(b, 0)
	if err != nil {
		return nil, err
	}
	if m.Msg == nil {
		return nil, errors.New("not an OP_MSG reply")
	}
	return m.Msg, nil
}

func helloTV(t *testing.T, body bson.Raw) bson.D {
	t.Helper()
	var tv bson.D
	if err := body.Lookup("topologyVersion").Unmarshal(&tv); err != nil {
		t.Fatalf("reply %v: %v", body, err)
	}
	return tv
}

// At the wire: an exhaust hello streams replies with moreToCome, each after
// maxAwaitTimeMS or at once on a topology change; a client hanging up ends
// the server's wait without Close.
func TestExhaustHelloWire(t *testing.T) {
	c := StartWithOptions(t, Options{Members: 2})
	m := c.Members()[0]
	rc := dialRaw(t, m.Addr())
	first := rc.query(bson.D{{Key: "isMaster", Value: 1}})
	tv := helloTV(t, first)
	rc.sendMsg(wire.ExhaustAllowed, bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"},
		{Key: "topologyVersion", Value: tv}, {Key: "maxAwaitTimeMS", Value: int64(100)}})
	for i := 0; i < 3; i++ {
		start := time.Now()
		r, err := rc.readMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if r.Flags&wire.MoreToCome == 0 {
			t.Fatalf("reply %d lacks moreToCome: %v", i, r.Body)
		}
		if took := time.Since(start); took < 80*time.Millisecond {
			t.Errorf("reply %d came after %v, want about maxAwaitTimeMS", i, took)
		}
	}
	// A step-down answers at once with the new counter.
	errc := make(chan error, 1)
	go func() { errc <- c.StepDown(context.Background()) }()
	// Replies keep coming every 100 ms; the one after the step-down has
	// the bumped counter.
	want := helloTV(t, first)[1].Value.(int64) + 1
	for {
		r, err := rc.readMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if helloTV(t, r.Body)[1].Value.(int64) == want {
			if r.Body.Lookup("isWritablePrimary").Boolean() {
				t.Fatal("old primary still writable after step-down")
			}
			break
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Second, "the stream to be waiting", func() bool { return c.stats.awaiting.Load() == 1 })
	_ = rc.nc.Close()
	waitFor(t, 2*time.Second, "the server to notice the hang-up", func() bool { return c.stats.awaiting.Load() == 0 })
}

// An error in an exhaust stream's next invocation (here a failCommand on
// hello) ends the stream: the error reply has no moreToCome and the
// connection serves requests again.
func TestExhaustHelloErrorEndsStream(t *testing.T) {
	c := Start(t)
	m := c.Members()[0]
	rc := dialRaw(t, m.Addr())
	tv := helloTV(t, rc.query(bson.D{{Key: "isMaster", Value: 1}}))
	rc.sendMsg(wire.ExhaustAllowed, bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"},
		{Key: "topologyVersion", Value: tv}, {Key: "maxAwaitTimeMS", Value: int64(50)}})
	r, err := rc.readMsg(5 * time.Second)
	if err != nil || r.Flags&wire.MoreToCome == 0 {
		t.Fatalf("first reply %v, %v", r, err)
	}
	if err := c.SetFailPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: int32(1)}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"hello"}}, {Key: "errorCode", Value: int32(cmderr.NotPrimaryOrSecondary)}}}}); err != nil {
		t.Fatal(err)
	}
	for {
		r, err = rc.readMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if r.Flags&wire.MoreToCome == 0 {
			break
		}
	}
	if code := r.Body.Lookup("code").AsInt64(); code != cmderr.NotPrimaryOrSecondary {
		t.Fatalf("stream ended with %v", r.Body)
	}
	if _, err := r.Body.LookupErr("topologyVersion"); err != nil {
		t.Errorf("13436 lacks topologyVersion: %v", r.Body)
	}
	rc.sendMsg(0, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})
	if r, err := rc.readMsg(5 * time.Second); err != nil || r.Body.Lookup("ok").Double() != 1 {
		t.Fatalf("ping after the stream: %v, %v", r, err)
	}
}

// Awaitable hello arguments are checked as mongod checks them.
func TestAwaitableHelloArgumentErrors(t *testing.T) {
	c := Start(t)
	ctx := testCtx(t)
	client := connect(t, c.URI())
	admin := client.Database("admin")
	tv := helloTV(t, mustRun(t, ctx, admin, bson.D{{Key: "hello", Value: 1}}))
	pid := tv[0].Value
	counter := tv[1].Value.(int64)
	cases := []struct {
		name string
		cmd  bson.D
		code int32
	}{
		{"tv without maxAwait", bson.D{{Key: "topologyVersion", Value: tv}}, 31368},
		{"maxAwait without tv", bson.D{{Key: "maxAwaitTimeMS", Value: int64(0)}}, 31368},
		{"tv not an object", bson.D{{Key: "topologyVersion", Value: "x"}, {Key: "maxAwaitTimeMS", Value: int64(0)}}, 10065},
		{"processId not an ObjectId", bson.D{{Key: "topologyVersion", Value: bson.D{{Key: "processId", Value: "p"}, {Key: "counter", Value: counter}}}, {Key: "maxAwaitTimeMS", Value: int64(0)}}, cmderr.TypeMismatch},
		{"counter not a long", bson.D{{Key: "topologyVersion", Value: bson.D{{Key: "processId", Value: pid}, {Key: "counter", Value: int32(0)}}}, {Key: "maxAwaitTimeMS", Value: int64(0)}}, cmderr.TypeMismatch},
		{"counter missing", bson.D{{Key: "topologyVersion", Value: bson.D{{Key: "processId", Value: pid}}}, {Key: "maxAwaitTimeMS", Value: int64(0)}}, 40414},
		{"extra field", bson.D{{Key: "topologyVersion", Value: bson.D{{Key: "processId", Value: pid}, {Key: "counter", Value: counter}, {Key: "x", Value: 1}}}, {Key: "maxAwaitTimeMS", Value: int64(0)}}, 40415},
		{"negative counter", bson.D{{Key: "topologyVersion", Value: bson.D{{Key: "processId", Value: pid}, {Key: "counter", Value: int64(-1)}}}, {Key: "maxAwaitTimeMS", Value: int64(0)}}, 31372},
		{"higher counter", bson.D{{Key: "topologyVersion", Value: bson.D{{Key: "processId", Value: pid}, {Key: "counter", Value: counter + 1}}}, {Key: "maxAwaitTimeMS", Value: int64(0)}}, 31382},
		{"negative maxAwait", bson.D{{Key: "topologyVersion", Value: tv}, {Key: "maxAwaitTimeMS", Value: int64(-1)}}, 51024},
	}
	for _, tc := range cases {
		_, err := runCmd(ctx, admin, append(bson.D{{Key: "hello", Value: 1}}, tc.cmd...))
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != tc.code {
			t.Errorf("%s: %v, want code %d", tc.name, err, tc.code)
		}
	}
	// Another process's topologyVersion, even with a higher counter, and
	// an older counter are answered at once.
	for _, other := range []bson.D{
		{{Key: "processId", Value: bson.NewObjectID()}, {Key: "counter", Value: counter + 5}},
	} {
		start := time.Now()
		mustRun(t, ctx, admin, bson.D{{Key: "hello", Value: 1}, {Key: "topologyVersion", Value: other}, {Key: "maxAwaitTimeMS", Value: int64(5000)}})
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("hello with a foreign topologyVersion took %v", took)
		}
	}
	start := time.Now()
	mustRun(t, ctx, admin, bson.D{{Key: "hello", Value: 1}, {Key: "topologyVersion", Value: tv}, {Key: "maxAwaitTimeMS", Value: int64(100)}})
	if took := time.Since(start); took < 80*time.Millisecond {
		t.Errorf("awaitable hello with the current topologyVersion answered after %v", took)
	}
}

// A legacy OP_QUERY isMaster may be awaitable but, as with mongod, is
// never streamed: even with the OP_QUERY exhaust flag it gets one OP_REPLY,
// sent when the topology changes.
func TestLegacyAwaitableIsMasterWakesOnStepDown(t *testing.T) {
	c := StartWithOptions(t, Options{Members: 2})
	rc := dialRaw(t, c.Members()[1].Addr())
	tv := helloTV(t, rc.query(bson.D{{Key: "isMaster", Value: 1}}))
	q, err := bson.Marshal(bson.D{{Key: "isMaster", Value: 1}, {Key: "topologyVersion", Value: tv}, {Key: "maxAwaitTimeMS", Value: int64(10000)}})
	if err != nil {
		t.Fatal(err)
	}
	const queryExhaust = 1 << 6
	rc.id++
	if _, err := rc.nc.Write(wire.AppendQuery(nil, rc.id, 0, &wire.Query{Flags: queryExhaust, FullCollectionName: "admin.$cmd", NumberToReturn: -1, Query: q})); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Second, "the isMaster to wait", func() bool { return c.stats.awaiting.Load() == 1 })
	start := time.Now()
	if err := c.StepDown(context.Background()); err != nil {
		t.Fatal(err)
	}
	_ = rc.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := wire.ReadMessage(rc.nc, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	m, err := wire.Decode(b, 0)
	if err != nil || m.Reply == nil || len(m.Reply.Documents) != 1 {
		t.Fatalf("want one OP_REPLY, got %+v, %v", m, err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("answered %v after the step-down", took)
	}
	if !m.Reply.Documents[0].Lookup("ismaster").Boolean() {
		t.Fatalf("member 1 not primary after the step-down: %v", m.Reply.Documents[0])
	}
	// Nothing more is pushed: the next request is answered normally.
	if r := rc.query(bson.D{{Key: "isMaster", Value: 1}}); !r.Lookup("ismaster").Boolean() {
		t.Fatalf("isMaster after the awaited one: %v", r)
	}
}

// Close ends every awaiting hello at once, streamed or not, even with the
// clients still connected.
func TestCloseReleasesAwaitingHellos(t *testing.T) {
	c, err := Launch(Options{Members: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range c.Members() {
		rc := dialRaw(t, m.Addr())
		tv := helloTV(t, rc.query(bson.D{{Key: "isMaster", Value: 1}}))
		var flags wire.MsgFlags
		if i == 0 {
			flags = wire.ExhaustAllowed
		}
		rc.sendMsg(flags, bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"},
			{Key: "topologyVersion", Value: tv}, {Key: "maxAwaitTimeMS", Value: int64(60000)}})
	}
	waitFor(t, 2*time.Second, "both hellos to wait", func() bool { return c.stats.awaiting.Load() == 2 })
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Close took %v", took)
	}
	if n := c.stats.awaiting.Load(); n != 0 {
		t.Fatalf("%d hellos still waiting after Close", n)
	}
}
