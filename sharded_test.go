package sturdy_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/event"
	"github.com/sturdy-go/sturdy/mongosim"
)

// shardedCluster starts mongosim with two mongos routers in front of a
// three-member shard.
func shardedCluster(t *testing.T) *mongosim.Cluster {
	t.Helper()
	return mongosim.StartWithOptions(t, mongosim.Options{Members: 3, Routers: 2})
}

// withParams appends query parameters to a mongosim URI ("mongodb://h,h/").
func withParams(uri, params string) string {
	if strings.Contains(uri, "?") {
		return uri + "&" + params
	}
	return uri + "?" + params
}

// routerFailPoint sets a fail point on one router through a client
// connected to it alone, and turns it off when the test ends.
func routerFailPoint(t *testing.T, r *mongosim.Router, fp bson.D) {
	t.Helper()
	ctx := testCtx(t)
	s := connect(t, withParams(r.URI(), "directConnection=true"), nil)
	if _, err := s.Database("admin").RunCommand(ctx, fp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = s.Database("admin").RunCommand(context.Background(), failPointOff("failCommand"))
	})
}

func TestShardedTopologyCRUDAndCursors(t *testing.T) {
	cluster := shardedCluster(t)
	ctx := testCtx(t)
	rec := &recorder{}
	c := connect(t, withParams(cluster.URI(), "localThresholdMS=1000"), func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	coll := c.Database("db").Collection("c")
	docs := make([]any, 300)
	for i := range docs {
		docs[i] = d("_id", i, "k", i%10)
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.UpdateMany(ctx, d("k", 4), d("$inc", d("n", 1))); err != nil {
		t.Fatal(err)
	}
	cur, err := coll.Find(ctx, d("k", d("$lt", 5)), &sturdy.FindOptions{BatchSize: 7, Sort: d("_id", 1)})
	if err != nil {
		t.Fatal(err)
	}
	var got []bson.M
	if err := cur.All(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 150 {
		t.Fatalf("cursor through a router returned %d documents, want 150", len(got))
	}
	// Every getMore went to the router that opened its cursor.
	finds := rec.startedNamed("find")
	if len(finds) != 1 {
		t.Fatalf("%d finds", len(finds))
	}
	gms := rec.startedNamed("getMore")
	if len(gms) < 20 {
		t.Fatalf("only %d getMores", len(gms))
	}
	for _, g := range gms {
		if g.ServerAddress != finds[0].ServerAddress {
			t.Fatalf("getMore went to %s, the cursor was opened on %s", g.ServerAddress, finds[0].ServerAddress)
		}
	}
	for _, r := range cluster.Routers() {
		if r.Addr() == finds[0].ServerAddress {
			return
		}
	}
	t.Fatalf("find went to %s, which is not a router", finds[0].ServerAddress)
}

// A retryable write whose connection to the router is closed by the
// router's fail point is retried, and executes once.
func TestShardedRetryableWriteUnderRouterCloseConnection(t *testing.T) {
	cluster := shardedCluster(t)
	ctx := testCtx(t)
	r0 := cluster.Routers()[0]
	routerFailPoint(t, r0, d("configureFailPoint", "failCommand", "mode", d("times", 1),
		"data", d("failCommands", bson.A{"update"}, "closeConnection", true)))
	rec := &recorder{}
	c := connect(t, withParams(r0.URI(), "directConnection=false"), func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	coll := c.Database("db").Collection("counter")
	if _, err := coll.InsertOne(ctx, d("_id", 1, "n", 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.UpdateOne(ctx, d("_id", 1), d("$inc", d("n", 1))); err != nil {
		t.Fatalf("update through a router that closed the connection: %v", err)
	}
	var doc bson.M
	if err := coll.FindOne(ctx, d("_id", 1)).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if doc["n"] != int32(1) {
		t.Fatalf("n = %v after one retried $inc, want 1", doc["n"])
	}
	if ups := rec.startedNamed("update"); len(ups) != 2 {
		t.Fatalf("want 2 update attempts, got %d", len(ups))
	}
}

// shardedClient connects to uri with command events recorded and waits
// until the client knows n mongos routers, so that a retry has somewhere
// else to go.
func shardedClient(t *testing.T, uri string, n int) (*sturdy.Client, *recorder) {
	t.Helper()
	rec := &recorder{}
	var mu sync.Mutex
	var known int
	c := connect(t, uri, func(o *sturdy.Options) {
		m := rec.monitor()
		m.TopologyDescriptionChanged = func(e *event.TopologyDescriptionChangedEvent) {
			k := 0
			for _, s := range e.New.Servers {
				if s.Kind == "Mongos" {
					k++
				}
			}
			mu.Lock()
			known = k
			mu.Unlock()
		}
		o.Monitor = m
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		k := known
		mu.Unlock()
		if k >= n {
			return c, rec
		}
		if time.Now().After(deadline) {
			t.Fatalf("the client knows %d mongos routers after 10s, want %d", k, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// attemptAddrs lists the server address of each failed and succeeded
// attempt of the named command, in order.
func attemptAddrs(rec *recorder, name string) (failed, succeeded []string) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, e := range rec.failed {
		if e.CommandName == name {
			failed = append(failed, e.ServerAddress)
		}
	}
	for _, e := range rec.succeeded {
		if e.CommandName == name {
			succeeded = append(succeeded, e.ServerAddress)
		}
	}
	return failed, succeeded
}

// Retryable writes prose test 4 and retryable reads prose test 2.1: with a
// fail point on both routers, the retry goes to the other router (sturdy
// deprioritizes the mongos that failed), and both attempts fail.
func TestShardedRetryOnDifferentMongos(t *testing.T) {
	for _, tc := range []struct {
		name, cmd string
		data      bson.D
		op        func(ctx context.Context, coll *sturdy.Collection) error
	}{
		{"writes prose 4", "insert", d("failCommands", bson.A{"insert"}, "errorCode", int32(6), "errorLabels", bson.A{"RetryableWriteError"}),
			func(ctx context.Context, coll *sturdy.Collection) error {
				_, err := coll.InsertOne(ctx, d("x", 1))
				return err
			}},
		{"reads prose 2.1", "find", d("failCommands", bson.A{"find"}, "errorCode", int32(6)),
			func(ctx context.Context, coll *sturdy.Collection) error {
				cur, err := coll.Find(ctx, d())
				if err == nil {
					_ = cur.Close(ctx)
				}
				return err
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cluster := shardedCluster(t)
			ctx := testCtx(t)
			// Run the operation repeatedly so that a lucky random
			// selection cannot pass for deprioritization.
			for i := 0; i < 10; i++ {
				for _, r := range cluster.Routers() {
					routerFailPoint(t, r, d("configureFailPoint", "failCommand", "mode", d("times", 1), "data", tc.data))
				}
				c, rec := shardedClient(t, withParams(cluster.URI(), "retryWrites=true&retryReads=true&localThresholdMS=1000"), 2)
				if err := tc.op(ctx, c.Database("db").Collection("c")); err == nil || errCode(err) != 6 {
					t.Fatalf("attempt %d: %v, want the second HostUnreachable", i, err)
				}
				failed, _ := attemptAddrs(rec, tc.cmd)
				if len(failed) != 2 || failed[0] == failed[1] {
					t.Fatalf("attempt %d: failed %s attempts on %v, want two on different mongoses", i, tc.cmd, failed)
				}
			}
		})
	}
}

// Retryable writes prose test 5 and retryable reads prose test 2.2: with one
// mongos, the retry goes to it again and succeeds.
func TestShardedRetryOnSameMongos(t *testing.T) {
	for _, tc := range []struct {
		name, cmd string
		data      bson.D
		op        func(ctx context.Context, coll *sturdy.Collection) error
	}{
		{"writes prose 5", "insert", d("failCommands", bson.A{"insert"}, "errorCode", int32(6), "errorLabels", bson.A{"RetryableWriteError"}, "closeConnection", true),
			func(ctx context.Context, coll *sturdy.Collection) error {
				_, err := coll.InsertOne(ctx, d("x", 1))
				return err
			}},
		{"reads prose 2.2", "find", d("failCommands", bson.A{"find"}, "errorCode", int32(6)),
			func(ctx context.Context, coll *sturdy.Collection) error {
				cur, err := coll.Find(ctx, d())
				if err == nil {
					_ = cur.Close(ctx)
				}
				return err
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cluster := shardedCluster(t)
			ctx := testCtx(t)
			r0 := cluster.Routers()[0]
			routerFailPoint(t, r0, d("configureFailPoint", "failCommand", "mode", d("times", 1), "data", tc.data))
			rec := &recorder{}
			c := connect(t, withParams(r0.URI(), "directConnection=false&retryWrites=true&retryReads=true"), func(o *sturdy.Options) { o.Monitor = rec.monitor() })
			if err := tc.op(ctx, c.Database("db").Collection("c")); err != nil {
				t.Fatal(err)
			}
			failed, succeeded := attemptAddrs(rec, tc.cmd)
			if len(failed) != 1 || len(succeeded) != 1 || failed[0] != succeeded[0] || failed[0] != r0.Addr() {
				t.Fatalf("failed on %v, succeeded on %v; want one each on %s", failed, succeeded, r0.Addr())
			}
		})
	}
}

// Overload on one router: every operation whose first attempt met the
// router answering 462 is retried on the healthy one.
func TestShardedOverloadDeprioritizesRouter(t *testing.T) {
	defer sturdy.SetMinHeartbeatIntervalForTest(20 * time.Millisecond)()
	cluster := shardedCluster(t)
	ctx := testCtx(t)
	busy := cluster.Routers()[0]
	busy.SetLimiter(mongosim.LimiterOptions{RequestsPerSecond: 0.001, Burst: 1})
	c, rec := shardedClient(t, withParams(cluster.URI(), "localThresholdMS=1000"), 2)
	coll := c.Database("db").Collection("c")
	retried := 0
	for i := 0; i < 40; i++ {
		if err := coll.FindOne(ctx, d()).Err(); err != nil && !errors.Is(err, sturdy.ErrNoDocuments) {
			t.Fatalf("find %d: %v", i, err)
		}
	}
	byOp := map[int64][]string{}
	for _, s := range rec.startedNamed("find") {
		byOp[s.OperationID] = append(byOp[s.OperationID], s.ServerAddress)
	}
	for _, addrs := range byOp {
		if len(addrs) < 2 {
			continue
		}
		retried++
		if addrs[0] != busy.Addr() || addrs[1] == busy.Addr() {
			t.Fatalf("attempts %v: the retry must leave the overloaded router %s", addrs, busy.Addr())
		}
	}
	if retried == 0 || busy.Stats().Rejected == 0 {
		t.Fatalf("no find met the overloaded router (%d retried, %d rejected)", retried, busy.Stats().Rejected)
	}
}
