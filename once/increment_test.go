package once

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/sturdy-go/sturdy"
)

var one = bson.D{{Key: "counter", Value: 1}}

// stepTwo matches the update of step two (and of Reconcile's fold).
func stepTwo(name string, cmd bson.Raw) bool { return name == "update" && hasOperator(cmd, "$pull") }

// stepOne matches the update of step one.
func stepOne(name string, cmd bson.Raw) bool {
	return name == "update" && hasOperator(cmd, "$addToSet")
}

// pendingLen returns the number of pending entries of the document.
func pendingLen(t *testing.T, coll *sturdy.Collection, id any) int {
	t.Helper()
	doc := findDoc(t, coll, id)
	p, _ := doc["pending"].(bson.A)
	return len(p)
}

func counterOf(t *testing.T, coll *sturdy.Collection, id any) int64 {
	t.Helper()
	switch v := findDoc(t, coll, id)["counter"].(type) {
	case int32:
		return int64(v)
	case int64:
		return v
	case nil:
		return 0
	default:
		t.Fatalf("counter is %T", v)
	}
	return 0
}

func TestIncrementNoFault(t *testing.T) {
	eachDriver(t, func(t *testing.T, d driver) {
		e := newEnv(t, d, false)
		ctx := testCtx(t)
		c := New(e.target)
		res, err := c.Increment(ctx, "2016-06-28", one)
		mustNoErr(t, err)
		if !res.Upserted || res.AlreadyApplied || res.Retries != 0 || res.Token.IsZero() {
			t.Fatalf("first %+v", res)
		}
		res, err = c.Increment(ctx, "2016-06-28", bson.D{{Key: "counter", Value: 2}, {Key: "stats.bytes", Value: int64(1500)}, {Key: "avg", Value: 0.5}})
		mustNoErr(t, err)
		if res.Upserted || res.AlreadyApplied {
			t.Fatalf("second %+v", res)
		}
		doc := findDoc(t, e.coll, "2016-06-28")
		if doc["counter"] != int32(3) || doc["stats"].(bson.D)[0].Value != int64(1500) || doc["avg"] != 0.5 || len(doc["pending"].(bson.A)) != 0 {
			t.Fatalf("document %v", doc)
		}
	})
}

func TestIncrementValidation(t *testing.T) {
	eachDriver(t, func(t *testing.T, d driver) {
		e := newEnv(t, d, false)
		c := New(e.target)
		for _, fields := range []any{
			nil, bson.D{}, bson.D{{Key: "counter", Value: "1"}}, bson.D{{Key: "_id", Value: 1}},
			bson.D{{Key: "pending", Value: 1}}, bson.D{{Key: "pending.t", Value: 1}}, bson.D{{Key: "pendingCutoff", Value: 1}},
			bson.D{{Key: "$x", Value: 1}}, bson.D{{Key: "a..b", Value: 1}}, bson.D{{Key: "n", Value: bson.NewDecimal128(0, 1)}},
		} {
			if _, err := c.Increment(testCtx(t), 1, fields); !errors.Is(err, ErrInvalidIncrement) {
				t.Errorf("%v: %v", fields, err)
			}
		}
		if n := count(t, e.coll, nil); n != 0 {
			t.Fatalf("%d documents written", n)
		}
	})
}

// Each fault, placed deterministically, with the client's retryable writes
// off and on: the counter ends exactly right, after Reconcile where the
// increment was left pending.
func TestIncrementFaultsOneByOne(t *testing.T) {
	t.Parallel()
	type want struct {
		err       bool
		step      int
		outcome   Outcome
		counted   bool // counted once Reconcile has run
		settled   bool // already counted when Increment returns
		replyLost bool
	}
	cases := []struct {
		name   string
		decide func() func(string, bson.Raw) action
		want   want
	}{
		{"step one reply lost", func() func(string, bson.Raw) action { return nthWhere(stepOne, 0, dropReply) },
			want{counted: true, settled: true}},
		{"step two reply lost", func() func(string, bson.Raw) action { return nthWhere(stepTwo, 0, dropReply) },
			want{counted: true, settled: true, replyLost: true}},
		{"step two lost twice", func() func(string, bson.Raw) action { return allWhere(stepTwo, dropRequest) },
			want{err: true, step: 2, outcome: Pending, counted: true}},
		{"step two replies lost twice", func() func(string, bson.Raw) action { return allWhere(stepTwo, dropReply) },
			want{err: true, step: 2, outcome: Pending, counted: true, settled: true}},
		{"step one lost twice", func() func(string, bson.Raw) action { return allWhere(stepOne, dropRequest) },
			want{err: true, step: 1, outcome: Unknown}},
		{"step one replies lost twice", func() func(string, bson.Raw) action { return allWhere(stepOne, dropReply) },
			want{err: true, step: 1, outcome: Unknown, counted: true}},
	}
	bothRetryModes(t, func(t *testing.T, e *env) {
		c := New(e.target)
		for i, tc := range cases {
			ctx := testCtx(t) // each case gets the whole budget: the official driver may take 10 s to see the server again
			id := fmt.Sprint("doc", i)
			// The document exists with counter 10 before the faulty increment.
			_, err := c.Increment(ctx, id, bson.D{{Key: "counter", Value: 10}})
			mustNoErr(t, err)
			e.faults.set(tc.decide())
			opCtx, cancel := ctx, context.CancelFunc(func() {})
			if e.driver == officialDriver && e.retryWrites && tc.want.err {
				// The official driver retries a retryable write for as long
				// as the context allows: bound it, or a fault that never
				// clears holds the call until the test's deadline.
				opCtx, cancel = context.WithTimeout(ctx, 3*time.Second)
			}
			res, err := c.Increment(opCtx, id, one)
			cancel()
			e.faults.set(nil)
			var ie *IncrementError
			if tc.want.err {
				if !errors.As(err, &ie) || ie.Step != tc.want.step || ie.Outcome != tc.want.outcome || ie.ID != id {
					t.Fatalf("%s: err %v, want step %d %s", tc.name, err, tc.want.step, tc.want.outcome)
				}
				// The official driver with retryable writes retries until the
				// 3 s deadline; it may then report its own deadline error
				// (ErrDeadlineWouldBeExceeded) rather than the last network
				// error. The outcome above is what the application acts on.
				timedOut := e.driver == officialDriver && e.retryWrites && mongo.IsTimeout(err)
				if !sturdy.IsNetworkError(err) && !timedOut {
					t.Fatalf("%s: %v does not wrap the network error", tc.name, err)
				}
			} else {
				mustNoErr(t, err)
				if !e.retryWrites && res.AlreadyApplied != tc.want.replyLost {
					t.Fatalf("%s: %+v", tc.name, res)
				}
			}
			before := counterOf(t, e.coll, id)
			if wantBefore := map[bool]int64{true: 11, false: 10}[tc.want.settled]; before != wantBefore {
				t.Fatalf("%s: counter %d before Reconcile, want %d", tc.name, before, wantBefore)
			}
			_, err = c.Reconcile(ctx)
			mustNoErr(t, err)
			wantAfter := int64(10)
			if tc.want.counted {
				wantAfter = 11
			}
			if got := counterOf(t, e.coll, id); got != wantAfter || pendingLen(t, e.coll, id) != 0 {
				t.Fatalf("%s: counter %d (pending %d) after Reconcile, want %d", tc.name, got, pendingLen(t, e.coll, id), wantAfter)
			}
		}
	})
}

// nthWhere applies act to the k-th command matching match.
func nthWhere(match func(string, bson.Raw) bool, k int, act action) func(string, bson.Raw) action {
	i := 0
	return func(name string, cmd bson.Raw) action {
		if !match(name, cmd) {
			return pass
		}
		i++
		if i-1 == k {
			return act
		}
		return pass
	}
}

// allWhere applies act to every command matching match.
func allWhere(match func(string, bson.Raw) bool, act action) func(string, bson.Raw) action {
	return func(name string, cmd bson.Raw) action {
		if match(name, cmd) {
			return act
		}
		return pass
	}
}

// call is the outcome of one Increment.
type call struct {
	tok bson.ObjectID
	err *IncrementError // nil on success
}

// runIncrementers runs workers goroutines doing perWorker increments of
// counter on one document.
func runIncrementers(t *testing.T, c *Collection, id any, workers, perWorker int) []call {
	t.Helper()
	ctx := testCtx(t)
	var mu sync.Mutex
	var calls []call
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWorker; i++ {
				res, err := c.Increment(ctx, id, one)
				var cl call
				if err == nil {
					cl.tok = res.Token
				} else if errors.As(err, &cl.err) {
					cl.tok = cl.err.Token
				} else {
					t.Errorf("increment: %v", err)
					return
				}
				mu.Lock()
				calls = append(calls, cl)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return calls
}

// checkExact compares what the incrementers were told with the ground truth
// the fault injector saw — the tokens the server accepted in step one —
// then runs Reconcile and checks the counter is exactly the number of
// recorded tokens: no increment lost, none counted twice.
func checkExact(t *testing.T, e *env, c *Collection, id any, calls []call, reconcilersRan bool) {
	t.Helper()
	recorded := e.faults.recordedTokens()
	failed := 0
	for _, cl := range calls {
		switch {
		case cl.err == nil, cl.err.Outcome == Pending:
			if !recorded[cl.tok] {
				t.Errorf("token %v reported %v but never recorded", cl.tok, cl.err)
			}
		case cl.err.Outcome == NotApplied:
			if recorded[cl.tok] {
				t.Errorf("token %v reported not applied but recorded: %v", cl.tok, cl.err)
			}
		}
		if cl.err != nil {
			failed++
		}
	}
	if len(recorded) > len(calls) {
		t.Fatalf("%d tokens recorded by %d calls", len(recorded), len(calls))
	}
	if !reconcilersRan {
		// Before the clean-up, the counter plus the pending tokens is exact.
		if got := counterOf(t, e.coll, id) + int64(pendingLen(t, e.coll, id)); got != int64(len(recorded)) {
			t.Fatalf("counter + pending = %d, want %d", got, len(recorded))
		}
	}
	res, err := c.Reconcile(testCtx(t))
	mustNoErr(t, err)
	if got := counterOf(t, e.coll, id); got != int64(len(recorded)) {
		t.Fatalf("counter %d after Reconcile (%+v), want %d", got, res, len(recorded))
	}
	if n := pendingLen(t, e.coll, id); n != 0 {
		t.Fatalf("%d tokens left", n)
	}
	replies, requests := e.faults.counts()
	fired := e.sim.Stats().FailPointsFired
	t.Logf("%d calls, %d failed, %d recorded; %d replies and %d requests dropped, %d fail points fired",
		len(calls), failed, len(recorded), replies, requests, fired)
	if replies+requests == 0 && fired == 0 {
		t.Fatal("no fault injected: the test is not exercising faults")
	}
	if !e.retryWrites && failed == 0 {
		t.Fatal("no increment failed without the client's retries: the faults are too rare")
	}
}

// Concurrent incrementers lose replies after the server applied their
// writes (seeded, 15% of updates). After Reconcile the counter is exactly
// the number of increments step one recorded, and every increment reported
// successful was recorded.
func TestConcurrentIncrementersReplyLoss(t *testing.T) {
	t.Parallel()
	bothRetryModes(t, func(t *testing.T, e *env) {
		c := New(e.target)
		e.faults.set(seeded(42, 0.15, dropReply, "update"))
		calls := runIncrementers(t, c, "day", 6, 12)
		e.faults.set(nil)
		checkExact(t, e, c, "day", calls, false)
	})
}

// Concurrent incrementers lose requests before the server executes them
// (mongosim's failCommand closeConnection, seeded activationProbability).
func TestConcurrentIncrementersRequestLoss(t *testing.T) {
	t.Parallel()
	bothRetryModes(t, func(t *testing.T, e *env) {
		c := New(e.target)
		mustNoErr(t, e.sim.SetFailPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"},
			{Key: "mode", Value: bson.D{{Key: "activationProbability", Value: 0.2}}},
			{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"update"}}, {Key: "closeConnection", Value: true}}}}))
		calls := runIncrementers(t, c, "day", 6, 12)
		mustNoErr(t, e.sim.SetFailPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}}))
		checkExact(t, e, c, "day", calls, false)
	})
}

// Incrementers, with replies lost, race two reconcilers folding every
// token at once (MinAge 0). The per-token fold and the cutoff keep the
// count exact.
func TestIncrementersRaceReconcilers(t *testing.T) {
	t.Parallel()
	bothRetryModes(t, func(t *testing.T, e *env) {
		c := New(e.target)
		e.faults.set(seeded(9, 0.15, dropReply, "update"))
		ctx, cancel := context.WithCancel(testCtx(t))
		var wg sync.WaitGroup
		var mu sync.Mutex
		folded := 0
		for r := 0; r < 2; r++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					res, err := c.Reconcile(ctx)
					if err != nil && ctx.Err() == nil && !IsTransient(err) {
						t.Errorf("Reconcile: %v", err)
						return
					}
					if res != nil {
						mu.Lock()
						folded += res.Folded
						mu.Unlock()
					}
				}
			}()
		}
		calls := runIncrementers(t, c, "day", 6, 12)
		cancel()
		wg.Wait()
		e.faults.set(nil)
		t.Logf("reconcilers folded %d tokens", folded)
		checkExact(t, e, c, "day", calls, true)
	})
}

// The race the cutoff exists for: step one's first attempt records the token
// but its reply is lost; Reconcile folds the token before the retry
// arrives. Without the cutoff the retry would record the token again and it
// would be counted twice.
func TestStepOneRetryAfterFoldIsRefused(t *testing.T) {
	bothRetryModes(t, func(t *testing.T, e *env) {
		ctx := testCtx(t)
		c := New(e.target)
		var reconciled *ReconcileResult
		var reconcileErr error
		e.faults.mu.Lock()
		e.faults.applied = func(name string, cmd bson.Raw) {
			// Runs on a connection of its own while the incrementer waits.
			reconciled, reconcileErr = c.Reconcile(ctx)
		}
		e.faults.mu.Unlock()
		e.faults.set(nthWhere(stepOne, 0, dropReply))
		_, err := c.Increment(ctx, "day", one)
		mustNoErr(t, reconcileErr)
		if reconciled == nil || reconciled.Folded != 1 {
			t.Fatalf("reconcile %+v", reconciled)
		}
		// Without the client's retryable writes, the package's retry of step
		// one is refused. With them, the client's retry carries the same
		// transaction number and is answered from the server's transaction
		// table instead; step two then finds the token already applied.
		var ie *IncrementError
		switch {
		case err == nil && e.retryWrites:
		case errors.As(err, &ie) && errors.Is(err, ErrTokenRejected) && ie.Step == 1 && ie.Outcome == Unknown:
		default:
			t.Fatalf("Increment: %v", err)
		}
		e.faults.set(nil)
		e.faults.mu.Lock()
		e.faults.applied = nil
		e.faults.mu.Unlock()
		_, err = c.Reconcile(ctx)
		mustNoErr(t, err)
		if got := counterOf(t, e.coll, "day"); got != 1 {
			t.Fatalf("counter %d, want 1", got)
		}
		// Later increments, with newer tokens, are accepted.
		_, err = c.Increment(ctx, "day", one)
		mustNoErr(t, err)
		if got := counterOf(t, e.coll, "day"); got != 2 {
			t.Fatalf("counter %d, want 2", got)
		}
	})
}
