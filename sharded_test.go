package sturdy_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
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

// txnKey identifies a transaction's commands in started events.
func txnKey(e *event.CommandStartedEvent) string {
	if e.TxnNumber == nil || e.Command.Lookup("autocommit").Type == 0 {
		return ""
	}
	return string(e.LSID) + "/" + strconv.FormatInt(*e.TxnNumber, 10)
}

// Transactions spec, mongos pinning: every command of a transaction, the
// commit included, goes to the mongos its first command went to, and the
// commit carries the recoveryToken the routers returned. Transactions as a
// whole spread over both routers (the latency window holds both).
func TestShardedTransactionPinnedToMongos(t *testing.T) {
	cluster := shardedCluster(t)
	ctx := testCtx(t)
	c, rec := shardedClient(t, withParams(cluster.URI(), "localThresholdMS=1000"), 2)
	coll := c.Database("db").Collection("c")
	for i := 0; i < 20; i++ {
		s, err := c.StartSession(ctx)
		if err != nil {
			t.Fatal(err)
		}
		err = s.WithTransaction(ctx, func(ctx context.Context) error {
			if _, err := coll.InsertOne(ctx, d("_id", i), &sturdy.InsertOneOptions{Session: s}); err != nil {
				return err
			}
			if _, err := coll.UpdateOne(ctx, d("_id", i), d("$set", d("n", i)), &sturdy.UpdateOptions{Session: s}); err != nil {
				return err
			}
			return coll.FindOne(ctx, d("_id", i), &sturdy.FindOneOptions{Session: s}).Err()
		}, nil)
		if err != nil {
			t.Fatalf("transaction %d: %v", i, err)
		}
		if s.PinnedServer() == "" {
			t.Fatalf("transaction %d: the session is not pinned after its commit", i)
		}
		s.EndSession(ctx)
		if s.PinnedServer() != "" {
			t.Fatalf("transaction %d: an ended session is still pinned", i)
		}
	}
	byTxn := map[string][]*event.CommandStartedEvent{}
	rec.mu.Lock()
	started := slices.Clone(rec.started)
	rec.mu.Unlock()
	for _, e := range started {
		if k := txnKey(e); k != "" {
			byTxn[k] = append(byTxn[k], e)
		}
	}
	if len(byTxn) != 20 {
		t.Fatalf("%d transactions observed, want 20", len(byTxn))
	}
	used := map[string]bool{}
	for _, evs := range byTxn {
		if len(evs) != 4 {
			t.Fatalf("%d commands in a transaction, want insert, update, find, commit", len(evs))
		}
		for _, e := range evs {
			if e.ServerAddress != evs[0].ServerAddress {
				t.Fatalf("%s went to %s, the transaction is pinned to %s", e.CommandName, e.ServerAddress, evs[0].ServerAddress)
			}
		}
		commit := evs[3]
		if commit.CommandName != "commitTransaction" || commit.Command.Lookup("recoveryToken", "recoveryShardId").Type == 0 {
			t.Fatalf("last command %s without the router's recoveryToken: %s", commit.CommandName, commit.Command)
		}
		used[evs[0].ServerAddress] = true
	}
	if len(used) != 2 {
		t.Fatalf("20 transactions used routers %v, want both", used)
	}
}

// A commit whose pinned mongos fails is retried unpinned on the other
// mongos with the recoveryToken: when the first attempt committed (the
// reply lost to a writeConcernError), the new mongos reports the commit;
// when it never reached the shard (connection closed), the new mongos
// aborts it and the convenient API runs the transaction again. Either way
// the document is written exactly once.
func TestShardedCommitRecoveredOnOtherMongos(t *testing.T) {
	for _, tc := range []struct {
		name string
		data bson.D
	}{
		{"committed", d("failCommands", bson.A{"commitTransaction"}, "errorLabels", bson.A{"RetryableWriteError"},
			"writeConcernError", d("code", int32(91), "errmsg", "Replication is being shut down"))},
		{"not committed", d("failCommands", bson.A{"commitTransaction"}, "closeConnection", true)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cluster := shardedCluster(t)
			ctx := testCtx(t)
			c, rec := shardedClient(t, withParams(cluster.URI(), "localThresholdMS=1000"), 2)
			coll := c.Database("db").Collection("c")
			s, err := c.StartSession(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer s.EndSession(ctx)
			var pinned string
			runs := 0
			err = s.WithTransaction(ctx, func(ctx context.Context) error {
				runs++
				if _, err := coll.UpdateOne(ctx, d("_id", 1), d("$inc", d("n", 1)), &sturdy.UpdateOptions{Session: s, Upsert: true}); err != nil {
					return err
				}
				if runs == 1 {
					pinned = s.PinnedServer()
					for _, r := range cluster.Routers() {
						if r.Addr() == pinned {
							routerFailPoint(t, r, d("configureFailPoint", "failCommand", "mode", d("times", 1), "data", tc.data))
						}
					}
				}
				return nil
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			var doc bson.M
			if err := coll.FindOne(ctx, d("_id", 1)).Decode(&doc); err != nil {
				t.Fatal(err)
			}
			if doc["n"] != int32(1) {
				t.Fatalf("n = %v, want 1: the transaction must apply exactly once", doc["n"])
			}
			commits := rec.startedNamed("commitTransaction")
			if len(commits) < 2 || commits[0].ServerAddress != pinned || commits[1].ServerAddress == pinned {
				t.Fatalf("commits on %v; the first must go to the pinned %s, the retry elsewhere", addrsOf(commits), pinned)
			}
			if commits[1].Command.Lookup("recoveryToken").Type == 0 {
				t.Fatalf("the retried commit has no recoveryToken: %s", commits[1].Command)
			}
			wantRuns := 1
			if tc.name == "not committed" {
				wantRuns = 2 // NoSuchTransaction from the new mongos is transient
			}
			if runs != wantRuns {
				t.Fatalf("the transaction ran %d times, want %d", runs, wantRuns)
			}
		})
	}
}

func addrsOf(evs []*event.CommandStartedEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ServerAddress
	}
	return out
}

// Overload signalled by failCommand (462 with the SystemOverloadedError and
// RetryableError labels) on one router: each retry leaves it for the other
// router, as with its ingress limiter.
func TestShardedOverloadFailCommandDeprioritizesRouter(t *testing.T) {
	cluster := shardedCluster(t)
	ctx := testCtx(t)
	busy := cluster.Routers()[0]
	routerFailPoint(t, busy, d("configureFailPoint", "failCommand", "mode", "alwaysOn",
		"data", d("failCommands", bson.A{"insert"}, "errorCode", int32(462),
			"errorLabels", bson.A{"SystemOverloadedError", "RetryableError"})))
	c, rec := shardedClient(t, withParams(cluster.URI(), "localThresholdMS=1000"), 2)
	coll := c.Database("db").Collection("c")
	for i := 0; i < 30; i++ {
		if _, err := coll.InsertOne(ctx, d("_id", i)); err != nil {
			t.Fatalf("insert %d: %v", i, err)
		}
	}
	byOp := map[int64][]string{}
	for _, s := range rec.startedNamed("insert") {
		byOp[s.OperationID] = append(byOp[s.OperationID], s.ServerAddress)
	}
	retried := 0
	for _, addrs := range byOp {
		switch {
		case len(addrs) == 1 && addrs[0] == busy.Addr():
			t.Fatalf("an insert succeeded on the overloaded router")
		case len(addrs) == 2:
			retried++
			if addrs[0] != busy.Addr() || addrs[1] == busy.Addr() {
				t.Fatalf("attempts %v: the retry must leave the overloaded router %s", addrs, busy.Addr())
			}
		case len(addrs) > 2:
			t.Fatalf("attempts %v: one retry on the healthy router is enough", addrs)
		}
	}
	if retried == 0 {
		t.Fatal("no insert met the overloaded router")
	}
	if n, err := coll.CountDocuments(ctx, d()); err != nil || n != 30 {
		t.Fatalf("%d documents (%v), want 30", n, err)
	}
}

// Server selection's latency window across routers: a router whose hello
// takes 150 ms more than the other's is outside the default 15 ms window
// and gets no operations; with a wide window both routers get them.
func TestShardedLatencyWindow(t *testing.T) {
	cluster := shardedCluster(t)
	ctx := testCtx(t)
	slow := cluster.Routers()[0]
	routerFailPoint(t, slow, d("configureFailPoint", "failCommand", "mode", "alwaysOn",
		"data", d("failCommands", bson.A{"hello", "isMaster"}, "blockConnection", true, "blockTimeMS", int32(150), "appName", "latencyWindow")))
	for _, tc := range []struct {
		threshold string
		wantSlow  bool
	}{{"", false}, {"&localThresholdMS=1000", true}} {
		c, rec := shardedClient(t, withParams(cluster.URI(), "appName=latencyWindow"+tc.threshold), 2)
		coll := c.Database("db").Collection("c")
		for i := 0; i < 40; i++ {
			if err := coll.FindOne(ctx, d()).Err(); err != nil && !errors.Is(err, sturdy.ErrNoDocuments) {
				t.Fatal(err)
			}
		}
		onSlow := 0
		for _, e := range rec.startedNamed("find") {
			if e.ServerAddress == slow.Addr() {
				onSlow++
			}
		}
		if (onSlow > 0) != tc.wantSlow {
			t.Fatalf("localThresholdMS%q: %d of 40 finds on the slow router, want some: %v", tc.threshold, onSlow, tc.wantSlow)
		}
	}
}

// A cursor closed early is killed on the mongos that opened it, and its
// getMores went there too.
func TestShardedKillCursorsOnItsMongos(t *testing.T) {
	cluster := shardedCluster(t)
	ctx := testCtx(t)
	c, rec := shardedClient(t, withParams(cluster.URI(), "localThresholdMS=1000"), 2)
	coll := c.Database("db").Collection("c")
	docs := make([]any, 50)
	for i := range docs {
		docs[i] = d("_id", i)
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		cur, err := coll.Find(ctx, d(), &sturdy.FindOptions{BatchSize: 5})
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 7 && cur.Next(ctx); j++ { // one getMore, then close with the cursor open
		}
		if err := cur.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	finds, gms, kills := rec.startedNamed("find"), rec.startedNamed("getMore"), rec.startedNamed("killCursors")
	if len(finds) != 10 || len(gms) != 10 || len(kills) != 10 {
		t.Fatalf("%d finds, %d getMores, %d killCursors; want 10 each", len(finds), len(gms), len(kills))
	}
	used := map[string]bool{}
	for i := range finds {
		if gms[i].ServerAddress != finds[i].ServerAddress || kills[i].ServerAddress != finds[i].ServerAddress {
			t.Fatalf("cursor %d: find on %s, getMore on %s, killCursors on %s", i, finds[i].ServerAddress, gms[i].ServerAddress, kills[i].ServerAddress)
		}
		used[finds[i].ServerAddress] = true
	}
	if len(used) != 2 {
		t.Logf("all 10 cursors opened on %v (selection is random)", used)
	}
}

// An overload error inside a pinned transaction is retried on the pinned
// mongos: deprioritizing the router would break the transaction.
func TestShardedOverloadInTransactionStaysPinned(t *testing.T) {
	cluster := shardedCluster(t)
	ctx := testCtx(t)
	c, rec := shardedClient(t, withParams(cluster.URI(), "localThresholdMS=1000"), 2)
	coll := c.Database("db").Collection("c")
	s, err := c.StartSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.EndSession(ctx)
	if err := s.StartTransaction(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, d("_id", 1), &sturdy.InsertOneOptions{Session: s}); err != nil {
		t.Fatal(err)
	}
	pinned := s.PinnedServer()
	overload := func(cmd string) {
		for _, r := range cluster.Routers() {
			if r.Addr() == pinned {
				routerFailPoint(t, r, d("configureFailPoint", "failCommand", "mode", d("times", 1),
					"data", d("failCommands", bson.A{cmd}, "errorCode", int32(462),
						"errorLabels", bson.A{"SystemOverloadedError", "RetryableError"})))
			}
		}
	}
	overload("insert")
	if _, err := coll.InsertOne(ctx, d("_id", 2), &sturdy.InsertOneOptions{Session: s}); err != nil {
		t.Fatalf("insert after an overload error in the transaction: %v", err)
	}
	overload("commitTransaction")
	if err := s.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.startedNamed("commitTransaction")); n != 2 {
		t.Fatalf("%d commit attempts, want 2 (one retried)", n)
	}
	for _, name := range []string{"insert", "commitTransaction"} {
		for _, e := range rec.startedNamed(name) {
			if txnKey(e) != "" && e.ServerAddress != pinned {
				t.Fatalf("%s retried on %s, the transaction is pinned to %s", name, e.ServerAddress, pinned)
			}
		}
	}
	if n := len(rec.startedNamed("insert")); n != 3 {
		t.Fatalf("%d insert attempts, want 3 (one retried)", n)
	}
	if n, err := coll.CountDocuments(ctx, d()); err != nil || n != 2 {
		t.Fatalf("%d documents (%v), want 2", n, err)
	}
}
