package mongosim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"github.com/sturdy-go/sturdy/internal/testsupport"
	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// testWriteExecutions counts how often each statement key of the test-only
// write command really executed (not replayed).
var testWriteExecutions sync.Map // string → *atomic.Int64

// simcoreTestWrite is a retryable write command that only tests register:
// {simcoreTestWrite: 1, keys: ["a", "b"]} executes one statement per key,
// through the retryable-write table, and answers {n: statements}.
func simcoreTestWriteCmd(r *request) (bson.D, error) {
	v, _ := r.get("keys")
	keys, _ := v.(bson.A)
	var n int32
	for i, k := range keys {
		key, _ := k.(string)
		res, err := r.stmt(i, func() (stmtResult, error) {
			c, _ := testWriteExecutions.LoadOrStore(key, new(atomic.Int64))
			c.(*atomic.Int64).Add(1)
			return stmtResult{N: 1}, nil
		})
		if err != nil {
			return nil, err
		}
		n += res.N
	}
	return bson.D{{Key: "n", Value: n}, {Key: "ok", Value: 1.0}}, nil
}

func executions(key string) int64 {
	c, ok := testWriteExecutions.Load(key)
	if !ok {
		return 0
	}
	return c.(*atomic.Int64).Load()
}

func init() {
	register(&command{name: "simcoreTestWrite", run: simcoreTestWriteCmd, write: true, retryableWrite: true})
}

func testCtx(t *testing.T) context.Context { return testsupport.Context(t, 20*time.Second) }

// connect returns an official-driver client for uri, disconnected when the
// test ends.
func connect(t *testing.T, uri string, opts ...*options.ClientOptions) *mongo.Client {
	t.Helper()
	// A short heartbeat bounds how long Disconnect can wait for a monitor
	// that is in the middle of an awaitable hello (a driver-side race).
	o := options.Client().ApplyURI(uri).SetServerSelectionTimeout(5 * time.Second).SetHeartbeatInterval(500 * time.Millisecond)
	all := append([]*options.ClientOptions{o}, opts...)
	client, err := mongo.Connect(all...)
	if err != nil {
		t.Fatalf("connect %s: %v", uri, err)
	}
	testsupport.CloseOnCleanup(t, client.Disconnect)
	return client
}

func runCmd(ctx context.Context, db *mongo.Database, cmd bson.D) (bson.Raw, error) {
	return db.RunCommand(ctx, cmd).Raw()
}

func mustRun(t *testing.T, ctx context.Context, db *mongo.Database, cmd bson.D) bson.Raw {
	t.Helper()
	raw, err := runCmd(ctx, db, cmd)
	if err != nil {
		t.Fatalf("%v: %v", cmd[0].Key, err)
	}
	return raw
}

// commandError asserts err is a server command error with the code.
func commandError(t *testing.T, err error, code int32) mongo.CommandError {
	t.Helper()
	var ce mongo.CommandError
	if !errors.As(err, &ce) {
		t.Fatalf("want command error %d, got %T %v", code, err, err)
	}
	if ce.Code != code {
		t.Fatalf("want code %d, got %d (%v)", code, ce.Code, err)
	}
	return ce
}

func TestSingleMemberPingAndHello(t *testing.T) {
	c := Start(t)
	ctx := testCtx(t)
	if got := c.URI(); !strings.HasSuffix(got, "/?replicaSet=rs0") {
		t.Fatalf("URI %q lacks replicaSet", got)
	}
	client := connect(t, c.URI())
	if err := client.Ping(ctx, readpref.Primary()); err != nil {
		t.Fatalf("ping: %v", err)
	}
	hello := mustRun(t, ctx, client.Database("admin"), bson.D{{Key: "hello", Value: 1}})
	checks := map[string]any{
		"setName":                      "rs0",
		"isWritablePrimary":            true,
		"secondary":                    false,
		"maxWireVersion":               int32(25),
		"minWireVersion":               int32(0),
		"logicalSessionTimeoutMinutes": int32(30),
		"maxWriteBatchSize":            int32(100000),
		"readOnly":                     false,
		"me":                           c.Members()[0].Addr(),
		"primary":                      c.Members()[0].Addr(),
	}
	for k, want := range checks {
		v, err := hello.LookupErr(k)
		if err != nil {
			t.Errorf("hello lacks %s", k)
			continue
		}
		var got any
		if err := v.Unmarshal(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("hello %s = %v (%T), want %v", k, got, got, want)
		}
	}
	if _, err := hello.LookupErr("electionId"); err != nil {
		t.Error("primary's hello lacks electionId")
	}
	if _, err := hello.LookupErr("topologyVersion", "processId"); err != nil {
		t.Error("hello lacks topologyVersion.processId")
	}
	if !c.Members()[0].IsPrimary() || c.Primary() != c.Members()[0] {
		t.Fatal("member 0 should be primary")
	}
	_, err := runCmd(ctx, client.Database("test"), bson.D{{Key: "noSuchCommandX", Value: 1}})
	ce := commandError(t, err, cmderr.CommandNotFound)
	if ce.Message != "no such command: 'noSuchCommandX'" {
		t.Fatalf("message %q", ce.Message)
	}
}

// A mongod standalone supports sessions (logicalSessionTimeoutMinutes) but
// not retryable writes or transactions: txnNumber answers 20.
func TestStandaloneSessions(t *testing.T) {
	c := StartWithOptions(t, Options{Standalone: true})
	ctx := testCtx(t)
	if strings.Contains(c.URI(), "replicaSet") {
		t.Fatalf("standalone URI %q names a replica set", c.URI())
	}
	client := connect(t, c.URI())
	hello := mustRun(t, ctx, client.Database("admin"), bson.D{{Key: "hello", Value: 1}})
	for _, k := range []string{"setName", "hosts"} {
		if _, err := hello.LookupErr(k); err == nil {
			t.Errorf("standalone hello has %s", k)
		}
	}
	if v, err := hello.LookupErr("logicalSessionTimeoutMinutes"); err != nil || v.Int32() != 30 {
		t.Errorf("standalone logicalSessionTimeoutMinutes = %v (%v), want 30", v, err)
	}
	if !hello.Lookup("isWritablePrimary").Boolean() {
		t.Fatal("standalone is not writable")
	}
	if err := c.StepDown(ctx); err == nil {
		t.Fatal("StepDown on a standalone succeeded")
	}
	db := client.Database("test")
	// The driver sends its implicit session's lsid with both.
	mustRun(t, ctx, db, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}})
	_, err := runCmd(ctx, db, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 2}}}},
		{Key: "txnNumber", Value: int64(1)}})
	ce := commandError(t, err, cmderr.IllegalOperation)
	if ce.Message != "Transaction numbers are only allowed on a replica set member or mongos" {
		t.Fatalf("message %q", ce.Message)
	}
	// The driver uses (implicit) sessions but no retryable writes there.
	if _, err := db.Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: 3}}); err != nil {
		t.Fatalf("insert through the driver: %v", err)
	}
}

func TestReplicaSetStepDown(t *testing.T) {
	c := StartWithOptions(t, Options{Members: 3})
	ctx := testCtx(t)
	ms := c.Members()
	if len(ms) != 3 {
		t.Fatalf("%d members", len(ms))
	}
	// The default 10 s heartbeat: only the awaitable hello's wake-up can make
	// the driver see the new primary within the 3 s checked below. Closing
	// the cluster before the client disconnects avoids waiting out the
	// monitor's 10 s awaitable hello.
	client := connect(t, c.URI(), options.Client().SetHeartbeatInterval(10*time.Second))
	t.Cleanup(func() { _ = c.Close() })
	admin := client.Database("admin")
	hello := mustRun(t, ctx, admin, bson.D{{Key: "hello", Value: 1}})
	hosts, _ := hello.Lookup("hosts").Array().Values()
	if len(hosts) != 3 || hello.Lookup("me").StringValue() != ms[0].Addr() {
		t.Fatalf("hello from primary: %v", hello)
	}
	oldTV := hello.Lookup("topologyVersion", "counter").Int64()
	oldElection := hello.Lookup("electionId").ObjectID()

	// A write before the step-down lands on member 0.
	coll := client.Database("db").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatalf("insert before step-down: %v", err)
	}

	if err := c.StepDown(ctx); err != nil {
		t.Fatal(err)
	}
	if c.Primary() != ms[1] || ms[0].IsPrimary() || !ms[1].IsPrimary() {
		t.Fatalf("after StepDown primary is %v", c.Primary())
	}
	// The driver's streaming monitor learns the new primary well before its
	// 10 s heartbeat: the awaitable hello returns as soon as the topology changes.
	deadline := time.Now().Add(3 * time.Second)
	var me string
	for time.Now().Before(deadline) {
		raw, err := runCmd(ctx, admin, bson.D{{Key: "hello", Value: 1}})
		if err == nil {
			me = raw.Lookup("me").StringValue()
			if me == ms[1].Addr() {
				if raw.Lookup("topologyVersion", "counter").Int64() <= oldTV-1 {
					t.Fatal("topologyVersion did not advance")
				}
				if raw.Lookup("electionId").ObjectID() == oldElection {
					t.Fatal("electionId did not change")
				}
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if me != ms[1].Addr() {
		t.Fatalf("driver still selects %s as primary 3 s after step-down", me)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatalf("insert after step-down: %v", err)
	}
	if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != 2 {
		t.Fatalf("count = %d, %v", n, err)
	}

	// A direct write to the old primary is refused as a retryable error.
	direct := connect(t, ms[0].URI())
	_, err := runCmd(ctx, direct.Database("db"), bson.D{{Key: "simcoreTestWrite", Value: 1}, {Key: "keys", Value: bson.A{"stepdown-direct"}}})
	commandError(t, err, cmderr.NotWritablePrimary)
	if executions("stepdown-direct") != 0 {
		t.Fatal("write executed on a secondary")
	}

	// replSetStepDown on the new primary elects member 2; the catch-up
	// period is accepted and ignored.
	direct1 := connect(t, ms[1].URI())
	mustRun(t, ctx, direct1.Database("admin"), bson.D{
		{Key: "replSetStepDown", Value: 60}, {Key: "secondaryCatchUpPeriodSecs", Value: 10},
	})
	if c.Primary() != ms[2] {
		t.Fatal("replSetStepDown did not elect member 2")
	}
	// The driver's next write lands on the new primary, whether its monitor
	// has already seen the change or the write meets NotWritablePrimary
	// (labelled RetryableWriteError) and is retried after rediscovery.
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}}); err != nil {
		t.Fatalf("insert right after replSetStepDown: %v", err)
	}
	if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != 3 {
		t.Fatalf("count = %d, %v", n, err)
	}
	_, err = runCmd(ctx, direct1.Database("admin"), bson.D{{Key: "replSetStepDown", Value: 60}})
	commandError(t, err, cmderr.NotWritablePrimary)
	st := mustRun(t, ctx, direct1.Database("admin"), bson.D{{Key: "replSetGetStatus", Value: 1}})
	if st.Lookup("myState").Int32() != 2 {
		t.Fatalf("replSetGetStatus myState %v", st.Lookup("myState"))
	}
	if got := c.Stats().StepDowns; got != 2 {
		t.Fatalf("StepDowns = %d", got)
	}
}

// A one-member set steps down only with force, and then, as mongod, has
// no primary until its step-down period ends and it is elected again.
func TestSingleMemberStepDownNeedsForce(t *testing.T) {
	c := Start(t)
	ctx := testCtx(t)
	admin := connect(t, c.URI()).Database("admin")
	_, err := runCmd(ctx, admin, bson.D{{Key: "replSetStepDown", Value: 10}})
	commandError(t, err, cmderr.ExceededTimeLimit)
	mustRun(t, ctx, admin, bson.D{{Key: "replSetStepDown", Value: 1}, {Key: "force", Value: true}})
	if c.Primary() != nil || c.Stats().StepDowns != 1 {
		t.Fatal("a forced step-down of a one-member set must leave it without a primary")
	}
	waitFor(t, 5*time.Second, "re-election after the 1 s step-down period", func() bool { return c.Primary() == c.Members()[0] })
}

// replSetStepDown keeps the member from being elected for stepDownSecs,
// replSetFreeze does the same for a secondary, and the set waits without a
// primary when nobody is eligible, as mongod.
func TestStepDownPeriodAndFreeze(t *testing.T) {
	c := StartWithOptions(t, Options{Members: 2})
	ctx := testCtx(t)
	ms := c.Members()
	admin0 := connect(t, ms[0].URI()).Database("admin")
	admin1 := connect(t, ms[1].URI()).Database("admin")
	_, err := runCmd(ctx, admin0, bson.D{{Key: "replSetStepDown", Value: 5}, {Key: "secondaryCatchUpPeriodSecs", Value: 10}})
	commandError(t, err, cmderr.BadValue)
	mustRun(t, ctx, admin0, bson.D{{Key: "replSetStepDown", Value: 60}})
	if c.Primary() != ms[1] {
		t.Fatal("member 1 not elected")
	}
	// Member 0 is in its 60 s period: stepping member 1 down leaves no
	// primary until member 1's own 1 s period ends.
	mustRun(t, ctx, admin1, bson.D{{Key: "replSetStepDown", Value: 1}, {Key: "secondaryCatchUpPeriodSecs", Value: 0}})
	if p := c.Primary(); p != nil {
		t.Fatalf("primary %s elected during both step-down periods", p.Addr())
	}
	h := mustRun(t, ctx, admin0, bson.D{{Key: "hello", Value: 1}})
	if _, err := h.LookupErr("primary"); err == nil || h.Lookup("isWritablePrimary").Boolean() {
		t.Fatalf("hello without a primary: %v", h)
	}
	waitFor(t, 5*time.Second, "member 1 re-elected", func() bool { return c.Primary() == ms[1] })
	_, err = runCmd(ctx, admin1, bson.D{{Key: "replSetFreeze", Value: 30}})
	commandError(t, err, 95)
	// Unfreezing member 0 ends its step-down period: a step-down of
	// member 1 now elects it at once.
	if r := mustRun(t, ctx, admin0, bson.D{{Key: "replSetFreeze", Value: 0}}); r.Lookup("info").StringValue() != "unfreezing" {
		t.Fatalf("unfreeze: %v", r)
	}
	mustRun(t, ctx, admin1, bson.D{{Key: "replSetStepDown", Value: 60}})
	if c.Primary() != ms[0] {
		t.Fatal("unfrozen member 0 not elected")
	}
	// A frozen secondary is not elected either.
	mustRun(t, ctx, admin1, bson.D{{Key: "replSetFreeze", Value: 0}})
	mustRun(t, ctx, admin1, bson.D{{Key: "replSetFreeze", Value: 60}})
	mustRun(t, ctx, admin0, bson.D{{Key: "replSetStepDown", Value: 1}, {Key: "secondaryCatchUpPeriodSecs", Value: 0}})
	if c.Primary() != nil {
		t.Fatal("frozen member 1 elected")
	}
}

func setFailCommand(t *testing.T, ctx context.Context, admin *mongo.Database, mode any, data bson.D) {
	t.Helper()
	mustRun(t, ctx, admin, bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: mode}, {Key: "data", Value: data}})
}

func failPointOff(t *testing.T, ctx context.Context, admin *mongo.Database, name string) {
	t.Helper()
	mustRun(t, ctx, admin, bson.D{{Key: "configureFailPoint", Value: name}, {Key: "mode", Value: "off"}})
}

func TestFailCommand(t *testing.T) {
	c := Start(t)
	ctx := testCtx(t)
	client := connect(t, c.URI(), options.Client().SetAppName("main"))
	admin := client.Database("admin")
	ping := func(cl *mongo.Client) error {
		return cl.Database("admin").RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err()
	}

	t.Run("errorCodeLabelsTimes", func(t *testing.T) {
		setFailCommand(t, ctx, admin, bson.D{{Key: "times", Value: 2}}, bson.D{
			{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "errorCode", Value: 2}, {Key: "errorLabels", Value: bson.A{"Foo"}},
		})
		for i := 0; i < 2; i++ {
			ce := commandError(t, ping(client), 2)
			if !ce.HasErrorLabel("Foo") || ce.Name != "BadValue" {
				t.Fatalf("attempt %d: %+v", i, ce)
			}
		}
		if err := ping(client); err != nil {
			t.Fatalf("third ping: %v", err)
		}
	})
	t.Run("skip", func(t *testing.T) {
		setFailCommand(t, ctx, admin, bson.D{{Key: "skip", Value: 1}}, bson.D{
			{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "errorCode", Value: 8},
		})
		if err := ping(client); err != nil {
			t.Fatalf("skipped ping failed: %v", err)
		}
		commandError(t, ping(client), 8)
		commandError(t, ping(client), 8)
		failPointOff(t, ctx, admin, "failCommand")
		if err := ping(client); err != nil {
			t.Fatalf("ping after off: %v", err)
		}
	})
	t.Run("appName", func(t *testing.T) {
		other := connect(t, c.URI(), options.Client().SetAppName("other"))
		setFailCommand(t, ctx, admin, "alwaysOn", bson.D{
			{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "errorCode", Value: 8}, {Key: "appName", Value: "other"},
		})
		defer failPointOff(t, ctx, admin, "failCommand")
		if err := ping(client); err != nil {
			t.Fatalf("app main ping: %v", err)
		}
		commandError(t, ping(other), 8)
	})
	t.Run("closeConnection", func(t *testing.T) {
		before := c.Stats().Hangups
		setFailCommand(t, ctx, admin, bson.D{{Key: "times", Value: 1}}, bson.D{
			{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "closeConnection", Value: true},
		})
		err := ping(client)
		if !mongo.IsNetworkError(err) {
			t.Fatalf("want network error, got %v", err)
		}
		if err := ping(client); err != nil {
			t.Fatalf("ping after hangup: %v", err)
		}
		if got := c.Stats().Hangups - before; got != 1 {
			t.Fatalf("hangups %d", got)
		}
	})
	t.Run("blockConnection", func(t *testing.T) {
		setFailCommand(t, ctx, admin, bson.D{{Key: "times", Value: 1}}, bson.D{
			{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "blockConnection", Value: true}, {Key: "blockTimeMS", Value: 150},
		})
		start := time.Now()
		if err := ping(client); err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el < 150*time.Millisecond {
			t.Fatalf("blocked ping took only %v", el)
		}
	})
	t.Run("adminOnly", func(t *testing.T) {
		_, err := runCmd(ctx, client.Database("test"), bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}})
		commandError(t, err, cmderr.Unauthorized)
	})
	t.Run("retryableWriteErrorLabel", func(t *testing.T) {
		sess, err := client.StartSession()
		if err != nil {
			t.Fatal(err)
		}
		defer sess.EndSession(ctx)
		sctx := mongo.NewSessionContext(ctx, sess)
		db := client.Database("db")
		write := func(txn int64) error {
			cmd := bson.D{{Key: "simcoreTestWrite", Value: 1}, {Key: "keys", Value: bson.A{"labels"}}}
			if txn > 0 {
				cmd = append(cmd, bson.E{Key: "txnNumber", Value: txn})
			}
			return db.RunCommand(sctx, cmd).Err()
		}
		data := bson.D{{Key: "failCommands", Value: bson.A{"simcoreTestWrite"}}, {Key: "errorCode", Value: 189}}
		setFailCommand(t, ctx, admin, bson.D{{Key: "times", Value: 1}}, data)
		if ce := commandError(t, write(1), 189); !ce.HasErrorLabel("RetryableWriteError") {
			t.Fatalf("retryable write error lacks the label: %v", ce.Labels)
		}
		setFailCommand(t, ctx, admin, bson.D{{Key: "times", Value: 1}}, data)
		if ce := commandError(t, write(0), 189); ce.HasErrorLabel("RetryableWriteError") {
			t.Fatal("label added without txnNumber")
		}
		setFailCommand(t, ctx, admin, bson.D{{Key: "times", Value: 1}}, append(data, bson.E{Key: "errorLabels", Value: bson.A{}}))
		if ce := commandError(t, write(2), 189); len(ce.Labels) != 0 {
			t.Fatalf("explicit empty errorLabels still labelled: %v", ce.Labels)
		}
		// writeConcernError: the write runs, the reply carries the error and the label.
		setFailCommand(t, ctx, admin, bson.D{{Key: "times", Value: 1}}, bson.D{
			{Key: "failCommands", Value: bson.A{"simcoreTestWrite"}},
			{Key: "writeConcernError", Value: bson.D{{Key: "code", Value: 91}, {Key: "errmsg", Value: "Replication is being shut down"}}},
		})
		before := executions("labels")
		raw, err := db.RunCommand(sctx, bson.D{{Key: "simcoreTestWrite", Value: 1}, {Key: "keys", Value: bson.A{"labels"}}, {Key: "txnNumber", Value: int64(3)}}).Raw()
		if err != nil {
			var we mongo.WriteException
			if !errors.As(err, &we) {
				t.Fatalf("writeConcernError reply: %v", err)
			}
			raw = we.Raw
		}
		if executions("labels") != before+1 {
			t.Fatal("write with writeConcernError fail point did not execute")
		}
		if raw.Lookup("writeConcernError", "code").Int32() != 91 || raw.Lookup("writeConcernError", "errmsg").StringValue() != "Replication is being shut down" {
			t.Fatalf("reply %v", raw)
		}
		labels, _ := raw.Lookup("errorLabels").Array().Values()
		if len(labels) != 1 || labels[0].StringValue() != "RetryableWriteError" {
			t.Fatalf("labels %v", labels)
		}
	})
}

func TestFailCommandProbabilityIsSeeded(t *testing.T) {
	pattern := func(seed int64) string {
		c := StartWithOptions(t, Options{Seed: seed})
		ctx := testCtx(t)
		client := connect(t, c.URI())
		admin := client.Database("admin")
		mustRun(t, ctx, admin, bson.D{{Key: "configureFailPoint", Value: "failCommand"},
			{Key: "mode", Value: bson.D{{Key: "activationProbability", Value: 0.5}}},
			{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "errorCode", Value: 8}}}})
		var b strings.Builder
		for i := 0; i < 32; i++ {
			if admin.RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err() != nil {
				b.WriteByte('x')
			} else {
				b.WriteByte('.')
			}
		}
		return b.String()
	}
	a, b := pattern(42), pattern(42)
	if a != b {
		t.Fatalf("same seed, different activations:\n%s\n%s", a, b)
	}
	if !strings.Contains(a, "x") || !strings.Contains(a, ".") {
		t.Fatalf("probability 0.5 gave %s", a)
	}
}

func TestRetryableWritesReplay(t *testing.T) {
	c := Start(t)
	ctx := testCtx(t)
	client := connect(t, c.URI())
	admin := client.Database("admin")
	coll := client.Database("db").Collection("retry")

	t.Run("failCommandCloseConnectionBeforeExecution", func(t *testing.T) {
		setFailCommand(t, ctx, admin, bson.D{{Key: "times", Value: 1}}, bson.D{
			{Key: "failCommands", Value: bson.A{"insert"}}, {Key: "closeConnection", Value: true},
		})
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "a"}}); err != nil {
			t.Fatalf("insert with one dropped request: %v", err)
		}
		if n, err := coll.CountDocuments(ctx, bson.D{{Key: "_id", Value: "a"}}); err != nil || n != 1 {
			t.Fatalf("count %d, %v", n, err)
		}
	})
	t.Run("clusterSetFailPoint", func(t *testing.T) {
		before := c.Stats()
		err := c.SetFailPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
			{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"insert"}}, {Key: "closeConnection", Value: true}}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "s"}}); err != nil {
			t.Fatalf("insert: %v", err)
		}
		after := c.Stats()
		if after.FailPointsFired-before.FailPointsFired != 1 || after.Hangups-before.Hangups != 1 {
			t.Fatalf("stats before %+v after %+v", before, after)
		}
		if err := c.SetFailPoint(bson.D{{Key: "configureFailPoint", Value: "noSuchFailPoint"}, {Key: "mode", Value: "off"}}); err == nil {
			t.Fatal("unknown fail point accepted")
		}
	})
	t.Run("onPrimaryTransactionalWriteAfterCommit", func(t *testing.T) {
		before := c.Stats()
		mustRun(t, ctx, admin, bson.D{{Key: "configureFailPoint", Value: "onPrimaryTransactionalWrite"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 1}}}})
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "b"}, {Key: "n", Value: 0}}); err != nil {
			t.Fatalf("insert whose reply was lost: %v", err)
		}
		if n, err := coll.CountDocuments(ctx, bson.D{{Key: "_id", Value: "b"}}); err != nil || n != 1 {
			t.Fatalf("count %d, %v", n, err)
		}
		mustRun(t, ctx, admin, bson.D{{Key: "configureFailPoint", Value: "onPrimaryTransactionalWrite"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
			{Key: "data", Value: bson.D{{Key: "closeConnection", Value: true}}}})
		res, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: "b"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})
		if err != nil {
			t.Fatalf("update whose reply was lost: %v", err)
		}
		if res.MatchedCount != 1 || res.ModifiedCount != 1 {
			t.Fatalf("replayed update result %+v", res)
		}
		var doc struct{ N int32 }
		if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: "b"}}).Decode(&doc); err != nil {
			t.Fatal(err)
		}
		if doc.N != 1 {
			t.Fatalf("$inc applied %d times", doc.N)
		}
		after := c.Stats()
		if after.Replayed-before.Replayed != 2 || after.Hangups-before.Hangups != 2 {
			t.Fatalf("replayed %d, hangups %d", after.Replayed-before.Replayed, after.Hangups-before.Hangups)
		}
	})
	t.Run("failBeforeCommit", func(t *testing.T) {
		mustRun(t, ctx, admin, bson.D{{Key: "configureFailPoint", Value: "onPrimaryTransactionalWrite"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
			{Key: "data", Value: bson.D{{Key: "failBeforeCommitExceptionCode", Value: 1}, {Key: "closeConnection", Value: false}}}})
		_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "c"}})
		commandError(t, err, 1)
		if n, _ := coll.CountDocuments(ctx, bson.D{{Key: "_id", Value: "c"}}); n != 0 {
			t.Fatal("write failed before commit but exists")
		}
	})
}

func TestTransactionTable(t *testing.T) {
	// Keys are unique per run: the execution counter is process-wide.
	p := fmt.Sprintf("%d-", time.Now().UnixNano())
	c := StartWithOptions(t, Options{Members: 2})
	ctx := testCtx(t)
	client := connect(t, c.URI())
	sess, err := client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	sctx := mongo.NewSessionContext(ctx, sess)
	db := client.Database("db")
	write := func(txn int64, keys ...any) (bson.Raw, error) {
		return db.RunCommand(sctx, bson.D{{Key: "simcoreTestWrite", Value: 1}, {Key: "keys", Value: bson.A(keys)}, {Key: "txnNumber", Value: txn}}).Raw()
	}
	if _, err := write(5, p+"tt-a", p+"tt-b"); err != nil {
		t.Fatal(err)
	}
	// The same txnNumber replays both statements, even on a new primary.
	if err := c.StepDown(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	var raw bson.Raw
	for {
		raw, err = write(5, p+"tt-a", p+"tt-b")
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("replay on the new primary: %v", err)
	}
	if raw.Lookup("n").Int32() != 2 || executions(p+"tt-a") != 1 || executions(p+"tt-b") != 1 {
		t.Fatalf("replay executed again: a=%d b=%d reply %v", executions(p+"tt-a"), executions(p+"tt-b"), raw)
	}
	if c.Stats().Replayed != 2 {
		t.Fatalf("Replayed = %d", c.Stats().Replayed)
	}
	// An older txnNumber is refused.
	_, err = write(4, p+"tt-c")
	ce := commandError(t, err, cmderr.TransactionTooOld)
	if !strings.Contains(ce.Message, "txnNumber 4") || executions(p+"tt-c") != 0 {
		t.Fatalf("TransactionTooOld: %v", ce)
	}
	// A newer one starts afresh: statement 0 is executed, not replayed.
	if _, err := write(6, p+"tt-a"); err != nil || executions(p+"tt-a") != 2 {
		t.Fatalf("txnNumber 6: %v, executions %d", err, executions(p+"tt-a"))
	}
	// txnNumber on a command that is not a retryable write.
	_, err = db.RunCommand(sctx, bson.D{{Key: "ping", Value: 1}, {Key: "txnNumber", Value: int64(7)}}).Raw()
	commandError(t, err, codeTxnNumberNotAllowed)
	_, err = db.RunCommand(sctx, bson.D{{Key: "simcoreTestWrite", Value: 1}, {Key: "txnNumber", Value: int64(8)}, {Key: "startTransaction", Value: true}, {Key: "autocommit", Value: false}}).Raw()
	commandError(t, err, cmderr.OperationNotSupportedInTransaction)
}

// fakeClock is an injectable clock for the limiter.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeClock) Now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.t = f.t.Add(d)
}

func TestIngressRequestLimiter(t *testing.T) {
	clock := &fakeClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	c := StartWithOptions(t, Options{Now: clock.Now, Limiter: LimiterOptions{RequestsPerSecond: 1, Burst: 2, BaseBackoffMS: 7}})
	ctx := testCtx(t)
	client := connect(t, c.URI(), options.Client().SetMaxAdaptiveRetries(0))
	admin := client.Database("admin")
	ping := func() error { return admin.RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err() }
	for i := 0; i < 2; i++ {
		if err := ping(); err != nil {
			t.Fatalf("ping %d within burst: %v", i, err)
		}
	}
	ce := commandError(t, ping(), cmderr.IngressRequestRateLimitExceeded)
	if !ce.HasErrorLabel("SystemOverloadedError") || !ce.HasErrorLabel("RetryableError") || ce.Name != "IngressRequestRateLimitExceeded" {
		t.Fatalf("462 error %+v", ce)
	}
	if ms := ce.Raw.Lookup("baseBackoffMS").Int32(); ms != 7 {
		t.Fatalf("baseBackoffMS %d", ms)
	}
	clock.Advance(time.Second)
	if err := ping(); err != nil {
		t.Fatalf("ping after refill: %v", err)
	}
	st := c.Stats()
	if st.Admitted != 3 || st.Rejected < 1 {
		t.Fatalf("stats %+v", st)
	}

	// setParameter (exempt from the limiter) reconfigures it at run time.
	mustRun(t, ctx, admin, bson.D{{Key: "setParameter", Value: 1}, {Key: "ingressRequestRateLimiterEnabled", Value: false}})
	for i := 0; i < 5; i++ {
		if err := ping(); err != nil {
			t.Fatalf("ping with limiter disabled: %v", err)
		}
	}
	mustRun(t, ctx, admin, bson.D{{Key: "setParameter", Value: 1}, {Key: "ingressRequestRateLimiterEnabled", Value: true}})
	mustRun(t, ctx, admin, bson.D{{Key: "setParameter", Value: 1}, {Key: "ingressRequestAdmissionRatePerSec", Value: 10}})
	mustRun(t, ctx, admin, bson.D{{Key: "setParameter", Value: 1}, {Key: "ingressRequestAdmissionBurstCapacitySecs", Value: 0.3}})
	mustRun(t, ctx, admin, bson.D{{Key: "setParameter", Value: 1}, {Key: "externalClientBaseBackoffMS", Value: 0}})
	got := mustRun(t, ctx, admin, bson.D{{Key: "getParameter", Value: "*"}})
	if got.Lookup("ingressRequestAdmissionRatePerSec").Double() != 10 || got.Lookup("ingressRequestRateLimiterBurstCapacity").Int32() != 3 {
		t.Fatalf("getParameter %v", got)
	}
	for i := 0; i < 3; i++ {
		if err := ping(); err != nil {
			t.Fatalf("ping %d within new burst: %v", i, err)
		}
	}
	ce = commandError(t, ping(), cmderr.IngressRequestRateLimitExceeded)
	if _, err := ce.Raw.LookupErr("baseBackoffMS"); err == nil {
		t.Fatal("baseBackoffMS sent after it was set to 0")
	}
	_, err := runCmd(ctx, admin, bson.D{{Key: "setParameter", Value: 1}, {Key: "noSuchKnob", Value: 1}})
	commandError(t, err, cmderr.InvalidOptions)

	c.SetLimiter(LimiterOptions{})
	for i := 0; i < 5; i++ {
		if err := ping(); err != nil {
			t.Fatalf("ping after SetLimiter off: %v", err)
		}
	}
}

// With RejectCost each rejection takes capacity: a storm of rejected
// requests leaves the bucket in debt, so admission resumes later than the
// refill rate alone would allow.
func TestIngressRequestLimiterRejectCost(t *testing.T) {
	clock := &fakeClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	c := StartWithOptions(t, Options{Now: clock.Now, Limiter: LimiterOptions{RequestsPerSecond: 10, Burst: 2, RejectCost: 0.5}})
	ctx := testCtx(t)
	client := connect(t, c.URI(), options.Client().SetMaxAdaptiveRetries(0))
	admin := client.Database("admin")
	ping := func() error { return admin.RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err() }
	for i := 0; i < 2; i++ {
		if err := ping(); err != nil {
			t.Fatalf("ping %d within burst: %v", i, err)
		}
	}
	for i := 0; i < 5; i++ { // the debt stops at -Burst = -2 tokens
		commandError(t, ping(), cmderr.IngressRequestRateLimitExceeded)
	}
	clock.Advance(100 * time.Millisecond) // +1 token: -1, still in debt
	commandError(t, ping(), cmderr.IngressRequestRateLimitExceeded)
	clock.Advance(250 * time.Millisecond) // -1.5 + 2.5 = 1 token
	if err := ping(); err != nil {
		t.Fatalf("ping after the debt is repaid: %v", err)
	}
}

func TestSCRAMAuth(t *testing.T) {
	c := StartWithOptions(t, Options{Auth: AuthOptions{Username: "alice", Password: "s3cret"}})
	ctx := testCtx(t)

	anon := connect(t, c.URI())
	if err := anon.Ping(ctx, readpref.Primary()); err != nil {
		t.Fatalf("unauthenticated ping: %v", err)
	}
	_, err := runCmd(ctx, anon.Database("admin"), bson.D{{Key: "serverStatus", Value: 1}})
	ce := commandError(t, err, cmderr.Unauthorized)
	if ce.Message != "Command serverStatus requires authentication" {
		t.Fatalf("message %q", ce.Message)
	}

	for _, mech := range []string{"", "SCRAM-SHA-256", "SCRAM-SHA-1"} {
		t.Run("mech="+mech, func(t *testing.T) {
			cl := connect(t, c.URI(), options.Client().SetAuth(options.Credential{AuthMechanism: mech, Username: "alice", Password: "s3cret"}))
			raw := mustRun(t, ctx, cl.Database("admin"), bson.D{{Key: "connectionStatus", Value: 1}})
			users, _ := raw.Lookup("authInfo", "authenticatedUsers").Array().Values()
			if len(users) != 1 || users[0].Document().Lookup("user").StringValue() != "alice" {
				t.Fatalf("connectionStatus %v", raw)
			}
			mustRun(t, ctx, cl.Database("admin"), bson.D{{Key: "serverStatus", Value: 1}})
		})
	}
	bad := connect(t, c.URI(), options.Client().SetAuth(options.Credential{Username: "alice", Password: "wrong"}))
	err = bad.Ping(ctx, readpref.Primary())
	if err == nil || !strings.Contains(err.Error(), "Authentication failed") {
		t.Fatalf("wrong password: %v", err)
	}
	if st := c.Stats(); st.AuthFailures < 1 || st.AuthSuccesses < 3 {
		t.Fatalf("auth stats %+v", st)
	}
}

func BenchmarkStartReplicaSet(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(map[int]string{1: "members=1", 3: "members=3"}[n], func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				c, err := Launch(Options{Members: n})
				if err != nil {
					b.Fatal(err)
				}
				if err := c.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestTxnTableSerialisesASession(t *testing.T) {
	table := newTxnTable()
	lsid := make([]byte, 16)
	first, err := table.begin(context.Background(), lsid, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := table.begin(ctx, lsid, 1); err == nil {
		t.Fatal("a second command used the session while the first held it")
	}
	first.release()
	second, err := table.begin(context.Background(), lsid, 1)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	second.release()
}
