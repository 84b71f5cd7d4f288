package sturdy_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/event"
	"github.com/sturdy-go/sturdy/mongosim"
)

func overloadFailPoint(cmd string, code int32, labels ...string) bson.D {
	if len(labels) == 0 {
		labels = []string{"SystemOverloadedError", "RetryableError"}
	}
	ls := make(bson.A, len(labels))
	for i, l := range labels {
		ls[i] = l
	}
	return d("configureFailPoint", "failCommand", "mode", "alwaysOn",
		"data", d("failCommands", bson.A{cmd}, "errorCode", code, "errorLabels", ls))
}

func sum(ds []time.Duration) time.Duration {
	var s time.Duration
	for _, d := range ds {
		s += d
	}
	return s
}

// Client backpressure prose test 1, with the backoffs injected rather than
// measured: jitter 0 means no backoff at all; jitter close to 1 means the
// full schedule, 100+200+400+800+1600 ms with sturdy's five retries.
func TestBackpressureProse1ExponentialBackoff(t *testing.T) {
	cluster := mongosim.Start(t)
	ctx := testCtx(t)
	setFailPoint(t, cluster, overloadFailPoint("insert", 2))
	defer setFailPoint(t, cluster, failPointOff("failCommand"))

	c, rec, w := watchRetries(t, cluster.URI(), 0, nil)
	if _, err := c.Database("db").Collection("c").InsertOne(ctx, d("a", 1)); errCode(err) != 2 {
		t.Fatalf("error %v", err)
	}
	if n := len(rec.startedNamed("insert")); n != 6 || sum(w.backoffs()) != 0 {
		t.Fatalf("%d attempts, backoffs %v; want 6 attempts without backoff", n, w.backoffs())
	}

	const nearlyOne = 1 - 1e-9
	c, _, w = watchRetries(t, cluster.URI(), nearlyOne, nil)
	if _, err := c.Database("db").Collection("c").InsertOne(ctx, d("a", 1)); errCode(err) != 2 {
		t.Fatalf("error %v", err)
	}
	want := 3100 * time.Millisecond
	if got := sum(w.backoffs()); got < want-time.Millisecond || got > want {
		t.Fatalf("backoffs %v (sum %v), want a sum just under %v", w.backoffs(), got, want)
	}
}

// Prose tests 3 and 4: overload errors are retried at most
// maxAdaptiveRetries times (sturdy's default 5; here also 1 and 0).
func TestBackpressureProse3And4RetryCap(t *testing.T) {
	cluster := mongosim.Start(t)
	setFailPoint(t, cluster, overloadFailPoint("find", 462))
	defer setFailPoint(t, cluster, failPointOff("failCommand"))
	for _, c := range []struct {
		uri      string
		attempts int
	}{{"", 6}, {"&maxAdaptiveRetries=1", 2}, {"&maxAdaptiveRetries=0", 1}} {
		t.Run("maxAdaptiveRetries"+c.uri, func(t *testing.T) {
			client, rec, _ := watchRetries(t, cluster.URI()+c.uri, 0, nil)
			ctx := testCtx(t)
			_, err := client.Database("db").Collection("c").Find(ctx, d())
			if !sturdy.HasErrorLabel(err, "RetryableError") || !sturdy.HasErrorLabel(err, "SystemOverloadedError") {
				t.Fatalf("error %v, want both overload labels", err)
			}
			if n := len(rec.startedNamed("find")); n != c.attempts {
				t.Fatalf("%d find commands started, want %d", n, c.attempts)
			}
		})
	}
}

// Prose test 5: the server's baseBackoffMS replaces the 100 ms base. The
// backoffs are injected for the exact schedule, then really slept for a
// lower bound on the elapsed time.
func TestBackpressureProse5BaseBackoffMS(t *testing.T) {
	cluster := mongosim.Start(t)
	ctx := testCtx(t)
	setFailPoint(t, cluster, overloadFailPoint("insert", 462))
	defer setFailPoint(t, cluster, failPointOff("failCommand"))

	c, _, w := watchRetries(t, cluster.URI(), 1, nil)
	coll := c.Database("db").Collection("c")
	if _, err := coll.InsertOne(ctx, d("a", 1)); errCode(err) != 462 {
		t.Fatalf("error %v", err)
	}
	if got := sum(w.backoffs()); got != 3100*time.Millisecond {
		t.Fatalf("default backoffs %v", w.backoffs())
	}
	if _, err := c.Database("admin").RunCommand(ctx, d("setParameter", 1, "externalClientBaseBackoffMS", 50)); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_, _ = c.Database("admin").RunCommand(context.Background(), d("setParameter", 1, "externalClientBaseBackoffMS", 0))
	}()
	c2, _, w2 := watchRetries(t, cluster.URI(), 1, nil)
	_, err := c2.Database("db").Collection("c").InsertOne(ctx, d("a", 1))
	var ce *sturdy.CommandError
	if !asCommandError(err, &ce) || ce.Code != 462 || ce.Raw.Lookup("baseBackoffMS").AsInt64() != 50 {
		t.Fatalf("error %v, want 462 carrying baseBackoffMS 50", err)
	}
	want := []time.Duration{50, 100, 200, 400, 800}
	got := w2.backoffs()
	for i := range want {
		if len(got) != len(want) || got[i] != want[i]*time.Millisecond {
			t.Fatalf("backoffs %v, want %v ms", got, want)
		}
	}

	// Real sleeps: baseBackoffMS 5 with jitter 1 sleeps 5+10+20+40+80 ms.
	if _, err := c.Database("admin").RunCommand(ctx, d("setParameter", 1, "externalClientBaseBackoffMS", 5)); err != nil {
		t.Fatal(err)
	}
	real := connect(t, cluster.URI(), nil)
	sturdy.ExecutorOf(real).Jitter = func() float64 { return 1 }
	start := time.Now()
	_, _ = real.Database("db").Collection("c").InsertOne(ctx, d("a", 1))
	if el := time.Since(start); el < 155*time.Millisecond {
		t.Fatalf("five retries took %v, less than their 155 ms of backoff", el)
	}
}

func asCommandError(err error, target **sturdy.CommandError) bool { return errors.As(err, target) }

// Retryable writes prose test 6 (cases 1–5): error propagation and retry
// counts when overload and non-overload errors mix. The second fail point
// is set from the CommandFailed event of the first error.
func TestRetryableWritesProse6MixedErrors(t *testing.T) {
	defer sturdy.SetMinHeartbeatIntervalForTest(20 * time.Millisecond)()
	overload := bson.A{"RetryableError", "SystemOverloadedError"}
	cases := []struct {
		name          string
		first, second bson.D // fail point data
		wantCode      int32
		wantNoWrites  bool
		wantAttempts  int
		wantBackoffs  int
	}{
		{"1 only errors without NoWritesPerformed",
			d("failCommands", bson.A{"insert"}, "errorLabels", overload, "errorCode", 91),
			d("failCommands", bson.A{"insert"}, "errorLabels", overload, "errorCode", 10107),
			10107, false, 6, 5},
		{"2 only errors with NoWritesPerformed",
			d("failCommands", bson.A{"insert"}, "errorLabels", bson.A{"RetryableError", "SystemOverloadedError", "NoWritesPerformed"}, "errorCode", 91),
			d("failCommands", bson.A{"insert"}, "errorLabels", bson.A{"RetryableError", "SystemOverloadedError", "NoWritesPerformed"}, "errorCode", 10107),
			91, true, 6, 5},
		{"3 some with NoWritesPerformed",
			d("failCommands", bson.A{"insert"}, "errorLabels", overload, "errorCode", 91),
			d("failCommands", bson.A{"insert"}, "errorLabels", bson.A{"RetryableError", "SystemOverloadedError", "NoWritesPerformed"}, "errorCode", 91),
			91, false, 6, 5},
		{"4 and 5 retryable write errors after an overload error",
			d("failCommands", bson.A{"insert"}, "errorLabels", overload, "errorCode", 91),
			d("failCommands", bson.A{"insert"}, "errorLabels", bson.A{"RetryableError", "RetryableWriteError"}, "errorCode", 91),
			91, false, 6, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cluster := mongosim.Start(t)
			var armed atomic.Bool
			client, rec, w := watchRetries(t, cluster.URI(), 1, func(o *sturdy.Options) {
				o.Monitor.CommandFailed = func(_ context.Context, e *event.CommandFailedEvent) {
					if e.CommandName == "insert" && errCode(e.Failure) == 91 && armed.CompareAndSwap(true, false) {
						_ = cluster.SetFailPoint(d("configureFailPoint", "failCommand", "mode", "alwaysOn", "data", c.second))
					}
				}
			})
			setFailPoint(t, cluster, d("configureFailPoint", "failCommand", "mode", d("times", 1), "data", c.first))
			armed.Store(true)
			_, err := client.Database("db").Collection("c").InsertOne(testCtx(t), d("x", 1))
			setFailPoint(t, cluster, failPointOff("failCommand"))
			if errCode(err) != c.wantCode || sturdy.HasErrorLabel(err, "NoWritesPerformed") != c.wantNoWrites {
				t.Fatalf("error %v, want code %d (NoWritesPerformed %v)", err, c.wantCode, c.wantNoWrites)
			}
			if n := len(rec.startedNamed("insert")); n != c.wantAttempts {
				t.Fatalf("%d attempts, want %d", n, c.wantAttempts)
			}
			if n := len(w.backoffs()); n != c.wantBackoffs {
				t.Fatalf("backoffs %v, want %d", w.backoffs(), c.wantBackoffs)
			}
		})
	}
}

// Overload retargeting across a three-member set: the member refusing
// finds with overload errors is avoided by the retry of a
// secondaryPreferred read, unless retargeting is off.
func TestOverloadRetargetingAcrossMembers(t *testing.T) {
	defer sturdy.SetMinHeartbeatIntervalForTest(20 * time.Millisecond)()
	cluster := mongosim.StartWithOptions(t, mongosim.Options{Members: 3})
	ctx := testCtx(t)
	busy := cluster.Members()[1]
	direct := connect(t, busy.URI(), nil)
	if _, err := direct.Database("admin").RunCommand(ctx, overloadFailPoint("find", 462)); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_, _ = direct.Database("admin").RunCommand(context.Background(), failPointOff("failCommand"))
	}()

	for _, retarget := range []bool{true, false} {
		t.Run(map[bool]string{true: "retargeting", false: "no retargeting"}[retarget], func(t *testing.T) {
			uri := cluster.URI() + "&readPreference=secondaryPreferred&localThresholdMS=1000"
			if !retarget {
				uri += "&enableOverloadRetargeting=false"
			}
			c, rec, w := watchRetries(t, uri, 0, nil)
			coll := c.Database("db").Collection("c")
			if err := c.Ping(ctx); err != nil {
				t.Fatal(err)
			}
			// Wait for both secondaries to be known.
			for i := 0; ; i++ {
				rec.reset()
				addrs := map[string]bool{}
				for range 20 {
					if cur, err := coll.Find(ctx, d()); err == nil {
						_ = cur.Close(ctx)
					}
				}
				for _, s := range rec.startedNamed("find") {
					addrs[s.ServerAddress] = true
				}
				if len(addrs) == 2 || i == 50 {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			rec.reset()
			before := len(w.retryEvents())
			var failures int
			for range 40 {
				cur, err := coll.Find(ctx, d())
				if err != nil {
					failures++
					continue
				}
				_ = cur.Close(ctx)
			}
			byOp := map[int64][]string{}
			for _, s := range rec.startedNamed("find") {
				byOp[s.OperationID] = append(byOp[s.OperationID], s.ServerAddress)
			}
			retried, sameAgain := 0, 0
			for _, addrs := range byOp {
				if len(addrs) < 2 {
					continue
				}
				retried++
				if addrs[0] != busy.Addr() {
					t.Fatalf("retry after a success? attempts %v", addrs)
				}
				if addrs[1] == busy.Addr() {
					sameAgain++
				}
			}
			if retried == 0 || len(w.retryEvents()) == before {
				t.Fatal("no find met the overloaded member")
			}
			if retarget && (sameAgain != 0 || failures != 0) {
				t.Fatalf("%d of %d retries went back to the overloaded member, %d finds failed", sameAgain, retried, failures)
			}
			if !retarget && sameAgain == 0 {
				t.Fatalf("none of %d retries went back to the overloaded member without retargeting", retried)
			}
		})
	}
}

// The ingress rate limiter end to end: a burst of concurrent inserts
// against a limiter admitting 200 requests a second all succeed by backing
// off (real jitter and sleeps), and the token bucket is charged for the
// retries.
func TestOverloadRateLimiterEndToEnd(t *testing.T) {
	cluster := mongosim.StartWithOptions(t, mongosim.Options{Limiter: mongosim.LimiterOptions{RequestsPerSecond: 200, Burst: 5}})
	rec := &recorder{}
	var mu sync.Mutex
	var retries []*event.RetryEvent
	c := connect(t, cluster.URI(), func(o *sturdy.Options) {
		m := rec.monitor()
		m.Retry = func(_ context.Context, e *event.RetryEvent) {
			mu.Lock()
			defer mu.Unlock()
			retries = append(retries, e)
		}
		o.Monitor = m
	})
	ctx := testCtx(t)
	coll := c.Database("db").Collection("c")
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	sturdy.ExecutorOf(c).RetryTokens().Consume(500)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := range 40 {
		wg.Go(func() {
			if _, err := coll.InsertOne(ctx, d("_id", i)); err != nil {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d inserts failed", failed.Load())
	}
	n, err := coll.CountDocuments(ctx, d())
	if err != nil || n != 40 {
		t.Fatalf("count %d, %v", n, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(retries) == 0 {
		t.Fatal("no overload retries against a 5-request burst")
	}
	for _, r := range retries {
		if !sturdy.HasErrorLabel(r.Reason, "SystemOverloadedError") || r.Backoff > 10*time.Second {
			t.Fatalf("retry event %+v", r)
		}
	}
	// Half-full bucket, so no deposit is clipped: 500 - one per retry +
	// 0.1 per insert + 1 per insert that succeeded on a retry.
	retried := map[int64]bool{}
	for _, r := range retries {
		retried[r.OperationID] = true
	}
	// (CountDocuments above added its own 0.1.)
	want := 500 - float64(len(retries)) + 0.1*41 + float64(len(retried))
	if tok := sturdy.ExecutorOf(c).RetryTokens().Tokens(); tok < want-1e-9 || tok > want+1e-9 {
		t.Fatalf("tokens %v, want %v", tok, want)
	}
}
