package mongosim

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	mevent "go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// routedClient starts a cluster with two routers and connects the official
// driver to them.
func routedClient(t *testing.T, o Options, co *options.ClientOptions) (*mongo.Client, *Cluster) {
	t.Helper()
	if o.Routers == 0 {
		o.Routers = 2
	}
	c := StartWithOptions(t, o)
	if co == nil {
		co = options.Client()
	}
	client, err := mongo.Connect(co.ApplyURI(c.URI()).SetHeartbeatInterval(500 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	return client, c
}

func TestRouterOptionsRejected(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Shards: 2}, "needs Routers"},
		{Options{Shards: 1}, "needs Routers"},
		{Options{Routers: 1, Standalone: true}, "Standalone"},
		{Options{Routers: -1}, "must not be negative"},
	} {
		c, err := Launch(tc.o)
		if err == nil {
			_ = c.Close()
			t.Fatalf("Launch(%+v) succeeded", tc.o)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Launch(%+v) = %v, want it to mention %q", tc.o, err, tc.want)
		}
	}
}

func TestRouterHelloAndURI(t *testing.T) {
	c := StartWithOptions(t, Options{Routers: 2, Members: 3})
	rs := c.Routers()
	if len(rs) != 2 {
		t.Fatalf("Routers() = %d routers, want 2", len(rs))
	}
	want := "mongodb://" + rs[0].Addr() + "," + rs[1].Addr() + "/"
	if c.URI() != want {
		t.Fatalf("URI() = %q, want %q", c.URI(), want)
	}
	var pids []any
	for _, r := range rs {
		rc := dialRaw(t, r.Addr())
		reply, err := rc.msg(bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}, {Key: "compression", Value: bson.A{"snappy"}}})
		if err != nil {
			t.Fatal(err)
		}
		if v := reply.Lookup("msg").StringValue(); v != "isdbgrid" {
			t.Errorf("msg = %q, want isdbgrid", v)
		}
		if !reply.Lookup("isWritablePrimary").Boolean() {
			t.Error("isWritablePrimary is not true")
		}
		for _, k := range []string{"setName", "hosts", "primary", "secondary"} {
			if _, err := reply.LookupErr(k); err == nil {
				t.Errorf("router hello has %s: %s", k, reply)
			}
		}
		if reply.Lookup("maxWireVersion").Int32() != maxWireVersion || reply.Lookup("logicalSessionTimeoutMinutes").Int32() != sessionTimeoutMins {
			t.Errorf("hello limits: %s", reply)
		}
		if vs, _ := reply.Lookup("compression").Array().Values(); len(vs) != 1 || vs[0].StringValue() != "snappy" {
			t.Errorf("compression not negotiated: %s", reply)
		}
		pids = append(pids, reply.Lookup("topologyVersion", "processId").ObjectID())
	}
	if pids[0] == pids[1] {
		t.Error("routers share a processId")
	}
}

func TestRouterDriverCRUDAndCursors(t *testing.T) {
	var mu sync.Mutex
	var kinds []string
	co := options.Client().SetServerMonitor(&mevent.ServerMonitor{TopologyDescriptionChanged: func(e *mevent.TopologyDescriptionChangedEvent) {
		mu.Lock()
		kinds = append(kinds, e.NewDescription.Kind)
		mu.Unlock()
	}})
	client, _ := routedClient(t, Options{Members: 3}, co)
	ctx := sdCtx(t)
	coll := client.Database("db").Collection("c")
	var docs []any
	for i := 0; i < 250; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "x", Value: i % 7}})
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	all := sdFindAll(t, ctx, coll, bson.D{}, options.Find().SetBatchSize(20).SetSort(bson.D{{Key: "_id", Value: 1}}))
	if len(all) != 250 {
		t.Fatalf("found %d documents through the routers, want 250", len(all))
	}
	if _, err := coll.UpdateMany(ctx, bson.D{{Key: "x", Value: 3}}, bson.D{{Key: "$set", Value: bson.D{{Key: "y", Value: true}}}}); err != nil {
		t.Fatal(err)
	}
	n, err := coll.CountDocuments(ctx, bson.D{{Key: "y", Value: true}})
	if err != nil || n != 36 {
		t.Fatalf("count = %d, %v; want 36", n, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(kinds) == 0 || kinds[len(kinds)-1] != "Sharded" {
		t.Fatalf("topology kinds seen: %v, want Sharded last", kinds)
	}
}

func TestRouterFailPointIsLocalAndRetried(t *testing.T) {
	c := StartWithOptions(t, Options{Routers: 2, Members: 3})
	r0, r1 := c.Routers()[0], c.Routers()[1]
	// A fail point on router 0, set with the command, does not apply to
	// router 1.
	rc := dialRaw(t, r0.Addr())
	if _, err := rc.msg(bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "alwaysOn"},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "errorCode", Value: int32(91)}}}, {Key: "$db", Value: "admin"}}); err != nil {
		t.Fatal(err)
	}
	for i, r := range []*Router{r0, r1} {
		reply, err := dialRaw(t, r.Addr()).msg(bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})
		if err != nil {
			t.Fatal(err)
		}
		code, _ := reply.Lookup("code").Int32OK()
		if want := []int32{91, 0}[i]; code != want {
			t.Errorf("router %d ping code = %d, want %d (%s)", i, code, want, reply)
		}
	}

	// A shard step-down during a retryable write through a router is
	// retried by the router: the client sees success, once.
	client, err := mongo.Connect(options.Client().ApplyURI(r1.URI()).SetHeartbeatInterval(500 * time.Millisecond).SetRetryWrites(false))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Disconnect(context.Background()) }()
	ctx := sdCtx(t)
	if err := c.SetFailPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"insert"}}, {Key: "errorCode", Value: int32(189)}}}}); err != nil {
		t.Fatal(err)
	}
	// Without a session's txnNumber (retryWrites off) mongos does not
	// retry a write: the shard's error surfaces.
	_, err = client.Database("db").Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
	if sdCode(err) != 189 {
		t.Fatalf("insert without txnNumber: %v, want code 189 passed through", err)
	}
	// With it, the router retries on the shard.
	if err := c.SetFailPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"insert"}}, {Key: "closeConnection", Value: true}}}}); err != nil {
		t.Fatal(err)
	}
	var inserts sync.Map // count of insert attempts the driver made
	mon := &mevent.CommandMonitor{Started: func(_ context.Context, e *mevent.CommandStartedEvent) {
		if e.CommandName == "insert" {
			n, _ := inserts.LoadOrStore("n", new(int))
			*n.(*int)++
		}
	}}
	rw, err := mongo.Connect(options.Client().ApplyURI(r1.URI()).SetHeartbeatInterval(500 * time.Millisecond).SetMonitor(mon))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rw.Disconnect(context.Background()) }()
	if _, err := rw.Database("db").Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatalf("retryable insert through the router: %v", err)
	}
	n, err := rw.Database("db").Collection("c").CountDocuments(ctx, bson.D{{Key: "_id", Value: 2}})
	if err != nil || n != 1 {
		t.Fatalf("count = %d, %v; want 1", n, err)
	}
	if n, _ := inserts.Load("n"); *n.(*int) != 1 {
		t.Errorf("the driver sent insert %d times; the retry should be inside the router", *n.(*int))
	}
}

func TestRouterStopStartAndOverload(t *testing.T) {
	c := StartWithOptions(t, Options{Routers: 2})
	r0, r1 := c.Routers()[0], c.Routers()[1]
	r0.SetLimiter(LimiterOptions{RequestsPerSecond: 0.001, Burst: 1, BaseBackoffMS: 7})
	rc := dialRaw(t, r0.Addr())
	var last bson.Raw
	for i := 0; i < 3; i++ {
		reply, err := rc.msg(bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})
		if err != nil {
			t.Fatal(err)
		}
		last = reply
	}
	if code, _ := last.Lookup("code").Int32OK(); code != 462 || last.Lookup("baseBackoffMS").Int32() != 7 {
		t.Fatalf("overloaded router replied %s, want 462 with baseBackoffMS 7", last)
	}
	if reply, _ := dialRaw(t, r1.Addr()).msg(bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}); reply.Lookup("ok").Double() != 1 {
		t.Fatalf("healthy router replied %s", reply)
	}
	if err := r1.Stop(); err != nil {
		t.Fatal(err)
	}
	if nc, err := net.DialTimeout("tcp", r1.Addr(), time.Second); err == nil {
		_ = nc.Close()
		t.Fatal("stopped router accepted a connection")
	}
	if err := r1.Start(); err != nil {
		t.Fatal(err)
	}
	if reply, err := dialRaw(t, r1.Addr()).msg(bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}); err != nil || reply.Lookup("ok").Double() != 1 {
		t.Fatalf("restarted router: %s, %v", reply, err)
	}
}

func TestRouterAuth(t *testing.T) {
	c := StartWithOptions(t, Options{Routers: 2, Auth: AuthOptions{Username: "u", Password: "p"}})
	ctx := sdCtx(t)
	uri := strings.Replace(c.URI(), "mongodb://", "mongodb://u:p@", 1)
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetHeartbeatInterval(500 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Disconnect(context.Background()) }()
	coll := client.Database("db").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatalf("authenticated insert through a router: %v", err)
	}
	// Without credentials the router refuses, and so does a member: the
	// members trust only the routers' own connections.
	for _, addr := range []string{c.Routers()[0].Addr(), c.Members()[0].Addr()} {
		reply, err := dialRaw(t, addr).msg(bson.D{{Key: "find", Value: "c"}, {Key: "$db", Value: "db"}})
		if err != nil {
			t.Fatal(err)
		}
		if code, _ := reply.Lookup("code").Int32OK(); code != 13 {
			t.Errorf("unauthenticated find on %s: %s, want code 13", addr, reply)
		}
	}
}

func TestRouterMaxConnections(t *testing.T) {
	c := StartWithOptions(t, Options{Routers: 2})
	r0 := c.Routers()[0]
	r0.SetLimiter(LimiterOptions{MaxConnections: 1})
	first := dialRaw(t, r0.Addr())
	if _, err := first.msg(bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := dialRaw(t, r0.Addr()).msg(bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}); err == nil {
		t.Fatal("a second connection to a router capped at one was served")
	}
	if _, err := dialRaw(t, c.Routers()[1].Addr()).msg(bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}); err != nil {
		t.Fatalf("the other router: %v", err)
	}
}

// A shard primary stepping down under a retryable write: the router
// retries on the new primary; a write without txnNumber gets the shard's
// error, as from mongos.
func TestRouterRetriesShardStepDown(t *testing.T) {
	c := StartWithOptions(t, Options{Routers: 1, Members: 3})
	ctx := sdCtx(t)
	var mu sync.Mutex
	inserts := 0
	mon := &mevent.CommandMonitor{Started: func(_ context.Context, e *mevent.CommandStartedEvent) {
		if e.CommandName == "insert" {
			mu.Lock()
			inserts++
			mu.Unlock()
		}
	}}
	rw, err := mongo.Connect(options.Client().ApplyURI(c.URI()).SetHeartbeatInterval(500 * time.Millisecond).SetMonitor(mon))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rw.Disconnect(context.Background()) }()
	coll := rw.Database("db").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	old := c.Primary()
	// The primary answers NotWritablePrimary once, as a member that just
	// stepped down does, and the set elects another member.
	if err := c.SetFailPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"insert"}}, {Key: "errorCode", Value: int32(10107)}}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.StepDown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatalf("retryable insert across a shard step-down: %v", err)
	}
	if c.Primary() == old {
		t.Fatal("no new primary")
	}
	if st := c.Stats(); st.FailPointsFired != 1 {
		t.Fatalf("fail point fired %d times, want 1", st.FailPointsFired)
	}
	mu.Lock()
	defer mu.Unlock()
	if inserts != 2 {
		t.Fatalf("the driver sent %d inserts for 2 InsertOne calls: the router should have retried", inserts)
	}
}

// The official driver's retryable write through a router that closes the
// connection: the driver retries (on either router) and the write happens
// once.
func TestRouterCloseConnectionDriverRetry(t *testing.T) {
	var mu sync.Mutex
	var attempts []string
	co := options.Client().SetMonitor(&mevent.CommandMonitor{Started: func(_ context.Context, e *mevent.CommandStartedEvent) {
		if e.CommandName == "update" {
			mu.Lock()
			attempts = append(attempts, e.ConnectionID)
			mu.Unlock()
		}
	}})
	client, c := routedClient(t, Options{Members: 3}, co)
	ctx := sdCtx(t)
	coll := client.Database("db").Collection("counter")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	for _, r := range c.Routers() {
		if err := r.SetFailPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
			{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"update"}}, {Key: "closeConnection", Value: true}}}}); err != nil {
			t.Fatal(err)
		}
	}
	// Each router closes the first update it sees; with both armed, the
	// first attempt and its retry may both be closed, so allow one more
	// call, but never a double increment.
	var err error
	for i := 0; i < 2; i++ {
		if _, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("update through routers closing the connection: %v", err)
	}
	var doc bson.M
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(attempts) < 2 {
		t.Fatalf("%d update attempts; the router's closeConnection should have forced a retry", len(attempts))
	}
	if doc["n"] != int32(1) {
		t.Fatalf("n = %v, want 1: the retried write executed once", doc["n"])
	}
}

// The router targets a shard member by $readPreference, and answers 133
// when none matches, as mongos.
func TestRouterReadPreferenceAndNoPrimary(t *testing.T) {
	c := StartWithOptions(t, Options{Routers: 1, Members: 2})
	// The primary fails every find; a secondary read avoids it.
	primary := dialRaw(t, c.Primary().Addr())
	if _, err := primary.msg(bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "alwaysOn"},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"find"}}, {Key: "errorCode", Value: int32(2)}}}, {Key: "$db", Value: "admin"}}); err != nil {
		t.Fatal(err)
	}
	rc := dialRaw(t, c.Routers()[0].Addr())
	for _, tc := range []struct {
		mode string
		code int32
	}{{"primary", 2}, {"secondary", 0}, {"secondaryPreferred", 0}, {"primaryPreferred", 2}} {
		reply, err := rc.msg(bson.D{{Key: "find", Value: "c"}, {Key: "$readPreference", Value: bson.D{{Key: "mode", Value: tc.mode}}}, {Key: "$db", Value: "db"}})
		if err != nil {
			t.Fatal(err)
		}
		if code, _ := reply.Lookup("code").Int32OK(); code != tc.code {
			t.Errorf("find with %s: %s, want code %d", tc.mode, reply, tc.code)
		}
	}
	// A one-member shard whose member stepped down has no primary for
	// stepDownSecs: a write (not retried: no txnNumber) gets 133.
	c1 := StartWithOptions(t, Options{Routers: 1})
	if _, err := dialRaw(t, c1.Members()[0].Addr()).msg(bson.D{{Key: "replSetStepDown", Value: 60}, {Key: "force", Value: true}, {Key: "$db", Value: "admin"}}); err != nil {
		t.Fatal(err)
	}
	if c1.Primary() != nil {
		t.Fatal("the one-member set still has a primary after replSetStepDown")
	}
	rc = dialRaw(t, c1.Routers()[0].Addr())
	reply, err := rc.msg(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}, {Key: "$db", Value: "db"}})
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := reply.Lookup("code").Int32OK(); code != codeFailedToSatisfyReadPreference || reply.Lookup("codeName").StringValue() != "FailedToSatisfyReadPreference" {
		t.Fatalf("insert with no shard primary: %s, want 133 FailedToSatisfyReadPreference", reply)
	}
}

func TestRouterBlockConnectionHonoursMaxTimeMS(t *testing.T) {
	c := StartWithOptions(t, Options{Routers: 1})
	r := c.Routers()[0]
	if err := r.SetFailPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "alwaysOn"},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "blockConnection", Value: true}, {Key: "blockTimeMS", Value: int32(5000)}}}}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	reply, err := dialRaw(t, r.Addr()).msg(bson.D{{Key: "ping", Value: 1}, {Key: "maxTimeMS", Value: int32(50)}, {Key: "$db", Value: "admin"}})
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := reply.Lookup("code").Int32OK(); code != 50 {
		t.Fatalf("blocked ping with maxTimeMS 50: %s, want 50 MaxTimeMSExpired", reply)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the block lasted %v despite maxTimeMS 50", d)
	}
}
