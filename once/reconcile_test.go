package once

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// leaveTokens runs step one only of n increments on id, as if step two had
// never arrived, so their tokens stay pending. amount is added to counter
// and to "stats.n".
func leaveTokens(t *testing.T, e *env, c *Collection, id any, n int, amount any) {
	t.Helper()
	inc, err := c.parseIncrement(bson.D{{Key: "counter", Value: amount}, {Key: "stats.n", Value: amount}})
	mustNoErr(t, err)
	for i := 0; i < n; i++ {
		_, _, err := c.record(testCtx(t), id, c.newToken(), inc)
		mustNoErr(t, err)
	}
}

func TestReconcileModes(t *testing.T) {
	eachDriver(t, func(t *testing.T, d driver) {
		for _, mode := range []ReconcileMode{PerToken, SetUnset} {
			t.Run(map[ReconcileMode]string{PerToken: "PerToken", SetUnset: "SetUnset"}[mode], func(t *testing.T) {
				e := newEnv(t, d, false)
				ctx := testCtx(t)
				c := New(e.target)
				_, err := c.Increment(ctx, "a", bson.D{{Key: "counter", Value: int32(100)}, {Key: "stats.n", Value: 0.5}})
				mustNoErr(t, err)
				leaveTokens(t, e, c, "a", 3, int32(2))
				leaveTokens(t, e, c, "b", 2, int64(5))
				if counterOf(t, e.coll, "a") != 100 || pendingLen(t, e.coll, "a") != 3 {
					t.Fatalf("setup: %v", findDoc(t, e.coll, "a"))
				}
				res, err := c.Reconcile(ctx, &ReconcileOptions{Mode: mode})
				mustNoErr(t, err)
				if res.Documents != 2 || res.Folded != 5 || res.Changed != 0 {
					t.Fatalf("result %+v", res)
				}
				a := findDoc(t, e.coll, "a")
				if a["counter"] != int32(106) || a["stats"].(bson.D)[0].Value != 6.5 {
					t.Fatalf("a = %v", a)
				}
				b := findDoc(t, e.coll, "b")
				if b["counter"] != int64(10) || b["stats"].(bson.D)[0].Value != int64(10) {
					t.Fatalf("b = %v", b)
				}
				if pendingLen(t, e.coll, "a") != 0 || pendingLen(t, e.coll, "b") != 0 {
					t.Fatal("tokens left")
				}
				// Running it again changes nothing.
				res, err = c.Reconcile(ctx, &ReconcileOptions{Mode: mode})
				mustNoErr(t, err)
				if res.Folded != 0 || counterOf(t, e.coll, "a") != 106 {
					t.Fatalf("second pass %+v, counter %d", res, counterOf(t, e.coll, "a"))
				}
				// New increments still work after the cutoff was raised.
				_, err = c.Increment(ctx, "a", one)
				mustNoErr(t, err)
				if counterOf(t, e.coll, "a") != 107 {
					t.Fatalf("counter %d", counterOf(t, e.coll, "a"))
				}
			})
		}
	})
}

// Only tokens older than MinAge are folded; the age comes from the token.
func TestReconcileMinAge(t *testing.T) {
	eachDriver(t, func(t *testing.T, d driver) {
		for _, mode := range []ReconcileMode{PerToken, SetUnset} {
			e := newEnv(t, d, false)
			ctx := testCtx(t)
			c := New(e.target)
			c.newToken = func() bson.ObjectID { return bson.NewObjectIDFromTimestamp(time.Now().Add(-2 * time.Hour)) }
			leaveTokens(t, e, c, "day", 2, 1)
			c.newToken = bson.NewObjectID
			leaveTokens(t, e, c, "day", 3, 1)
			res, err := c.Reconcile(ctx, &ReconcileOptions{MinAge: time.Hour, Mode: mode})
			mustNoErr(t, err)
			if res.Folded != 2 || res.Young != 3 || counterOf(t, e.coll, "day") != 2 || pendingLen(t, e.coll, "day") != 3 {
				t.Fatalf("mode %d: %+v, doc %v", mode, res, findDoc(t, e.coll, "day"))
			}
			// A filter restricts the pass.
			res, err = c.Reconcile(ctx, &ReconcileOptions{Mode: mode, Filter: bson.D{{Key: "_id", Value: "other"}}})
			mustNoErr(t, err)
			if res.Documents != 0 || counterOf(t, e.coll, "day") != 2 {
				t.Fatalf("filtered pass %+v", res)
			}
			res, err = c.Reconcile(ctx, &ReconcileOptions{Mode: mode})
			mustNoErr(t, err)
			if res.Folded != 3 || counterOf(t, e.coll, "day") != 5 {
				t.Fatalf("mode %d: full pass %+v", mode, res)
			}
		}
	})
}

// SetUnset writes totals computed from what it read; the guard on the
// pending array and the field values makes the write miss if an increment
// lands in between, instead of overwriting it.
func TestReconcileSetUnsetGuard(t *testing.T) {
	eachDriver(t, func(t *testing.T, d driver) {
		e := newEnv(t, d, false)
		ctx := testCtx(t)
		c := New(e.target)
		leaveTokens(t, e, c, "day", 2, 1)
		c.beforeSetUnset = func(any) {
			if _, err := c.Increment(ctx, "day", one); err != nil {
				t.Errorf("concurrent increment: %v", err)
			}
		}
		res, err := c.Reconcile(ctx, &ReconcileOptions{Mode: SetUnset})
		mustNoErr(t, err)
		if res.Changed != 1 || res.Folded != 0 {
			t.Fatalf("result %+v", res)
		}
		c.beforeSetUnset = nil
		if counterOf(t, e.coll, "day") != 1 || pendingLen(t, e.coll, "day") != 2 {
			t.Fatalf("after the missed pass: %v", findDoc(t, e.coll, "day"))
		}
		res, err = c.Reconcile(ctx, &ReconcileOptions{Mode: SetUnset})
		mustNoErr(t, err)
		if res.Folded != 2 || counterOf(t, e.coll, "day") != 3 {
			t.Fatalf("second pass %+v, counter %d", res, counterOf(t, e.coll, "day"))
		}
	})
}

// Reconcilers of both modes race each other over many leftover tokens, with
// replies lost: each token is counted once.
func TestConcurrentReconcilers(t *testing.T) {
	eachDriver(t, func(t *testing.T, d driver) {
		e := newEnv(t, d, false)
		c := New(e.target)
		const docs, perDoc = 3, 5
		for d := 0; d < docs; d++ {
			leaveTokens(t, e, c, d, perDoc, 1)
		}
		e.faults.set(seeded(3, 0.1, dropReply, "update"))
		var wg sync.WaitGroup
		for r := 0; r < 4; r++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				mode := ReconcileMode(r % 2)
				for i := 0; i < 3; i++ {
					if _, err := c.Reconcile(testCtx(t), &ReconcileOptions{Mode: mode}); err != nil && !IsTransient(err) {
						t.Errorf("Reconcile: %v", err)
					}
				}
			}()
		}
		wg.Wait()
		e.faults.set(nil)
		_, err := c.Reconcile(testCtx(t))
		mustNoErr(t, err)
		for d := 0; d < docs; d++ {
			if got := counterOf(t, e.coll, d); got != perDoc || pendingLen(t, e.coll, d) != 0 {
				t.Fatalf("doc %d: counter %d, pending %d", d, got, pendingLen(t, e.coll, d))
			}
		}
	})
}

func TestReconcileLeavesForeignEntries(t *testing.T) {
	eachDriver(t, func(t *testing.T, d driver) {
		e := newEnv(t, d, false)
		ctx := testCtx(t)
		bad := bson.D{{Key: "t", Value: bson.NewObjectID()}, {Key: "inc", Value: bson.A{bson.D{{Key: "f", Value: "_id"}, {Key: "n", Value: 1}}}}}
		_, err := e.coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "counter", Value: 1}, {Key: "pending", Value: bson.A{"junk", bad}}})
		mustNoErr(t, err)
		for _, mode := range []ReconcileMode{PerToken, SetUnset} {
			res, err := New(e.target).Reconcile(ctx, &ReconcileOptions{Mode: mode})
			mustNoErr(t, err)
			if res.Invalid != 2 || res.Folded != 0 || pendingLen(t, e.coll, 1) != 2 {
				t.Fatalf("mode %d: %+v", mode, res)
			}
		}
		if _, err := New(e.target).Reconcile(context.Background(), &ReconcileOptions{Mode: 7}); err == nil {
			t.Fatal("unknown mode accepted")
		}
	})
}

func TestNumberAdd(t *testing.T) {
	i32 := func(v int32) number { return number{kind: bson.TypeInt32, i: int64(v)} }
	i64 := func(v int64) number { return number{kind: bson.TypeInt64, i: v} }
	f64 := func(v float64) number { return number{kind: bson.TypeDouble, f: v} }
	cases := []struct {
		a, b number
		want any
	}{
		{i32(1), i32(2), int32(3)},
		{i32(2147483647), i32(1), int64(2147483648)},
		{i32(1), i64(2), int64(3)},
		{i64(1), f64(0.5), 1.5},
	}
	for _, tc := range cases {
		got, err := tc.a.add(tc.b)
		if err != nil || got.value() != tc.want {
			t.Errorf("%v + %v = %v (%v), want %v", tc.a, tc.b, got.value(), err, tc.want)
		}
	}
	if _, err := i64(9223372036854775807).add(i32(1)); err == nil {
		t.Error("int64 overflow not reported")
	}
}
