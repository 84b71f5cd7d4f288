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
	"github.com/sturdy-go/sturdy/blackpipe"
	"github.com/sturdy-go/sturdy/event"
	"github.com/sturdy-go/sturdy/mongosim"
)

// retryWatch records what a client's retries did: retry events, pool
// events, and the backoffs (injected, not slept).
type retryWatch struct {
	mu      sync.Mutex
	retries []*event.RetryEvent
	pool    []*event.PoolEvent
	sleeps  []time.Duration
}

// watchRetries connects to uri with command, retry and pool monitoring, and
// an injected backoff sleep and jitter.
func watchRetries(t *testing.T, uri string, jitter float64, edit func(*sturdy.Options)) (*sturdy.Client, *recorder, *retryWatch) {
	t.Helper()
	rec := &recorder{}
	w := &retryWatch{}
	c := connect(t, uri, func(o *sturdy.Options) {
		m := rec.monitor()
		m.Retry = func(_ context.Context, e *event.RetryEvent) {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.retries = append(w.retries, e)
		}
		m.Pool = func(e *event.PoolEvent) {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.pool = append(w.pool, e)
		}
		o.Monitor = m
		if edit != nil {
			edit(o)
		}
	})
	ex := sturdy.ExecutorOf(c)
	ex.Jitter = func() float64 { return jitter }
	ex.Sleep = func(ctx context.Context, d time.Duration) error {
		w.mu.Lock()
		w.sleeps = append(w.sleeps, d)
		w.mu.Unlock()
		return ctx.Err()
	}
	return c, rec, w
}

func (w *retryWatch) retryEvents() []*event.RetryEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*event.RetryEvent(nil), w.retries...)
}

func (w *retryWatch) backoffs() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.sleeps...)
}

func (w *retryWatch) poolEvents() []*event.PoolEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*event.PoolEvent(nil), w.pool...)
}

func setFailPoint(t *testing.T, cluster *mongosim.Cluster, fp bson.D) {
	t.Helper()
	if err := cluster.SetFailPoint(fp); err != nil {
		t.Fatalf("SetFailPoint: %v", err)
	}
}

func failPointOff(name string) bson.D {
	return d("configureFailPoint", name, "mode", "off")
}

func errCode(err error) int32 {
	var ce *sturdy.CommandError
	if errors.As(err, &ce) {
		return ce.Code
	}
	var we *sturdy.WriteException
	if errors.As(err, &we) && we.WriteConcernError != nil {
		return we.WriteConcernError.Code
	}
	return -1
}

// The Retryable Writes spec's promise, end to end: lost replies after the
// commit on a random fifth of the writes; the driver's single retry with
// the same transaction id must make every increment count exactly once.
func TestAtMostOnceIncrementsUnderLostReplies(t *testing.T) {
	cluster := mongosim.StartWithOptions(t, mongosim.Options{Seed: 7})
	// Each lost reply marks the primary Unknown until the next check;
	// checks 20 ms apart instead of 500 ms keep the test short.
	defer sturdy.SetMinHeartbeatIntervalForTest(20 * time.Millisecond)()
	c, rec, w := watchRetries(t, cluster.URI(), 0, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	coll := c.Database("db").Collection("counters")
	if _, err := coll.InsertOne(ctx, d("_id", "c", "n", 0)); err != nil {
		t.Fatal(err)
	}
	setFailPoint(t, cluster, d("configureFailPoint", "onPrimaryTransactionalWrite",
		"mode", d("activationProbability", 0.2), "data", d("closeConnection", true)))

	// One writer: concurrent writers would also see check-outs fail while
	// the pool is cleared after another writer's lost reply, and a write
	// gets one retry in all.
	const total, workers = 1000, 1
	var wg sync.WaitGroup
	var failed atomic.Int64
	var errMu sync.Mutex
	var firstErr error
	for range workers {
		wg.Go(func() {
			for range total / workers {
				_, err := coll.UpdateOne(ctx, d("_id", "c"), d("$inc", d("n", 1)))
				if err != nil {
					failed.Add(1)
					errMu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					errMu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	setFailPoint(t, cluster, failPointOff("onPrimaryTransactionalWrite"))
	// A retry is answered from the transaction table without writing, so
	// the fail point (entered only where a write commits) never drops its
	// reply: every increment reports success.
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d increments failed, first: %v", n, firstErr)
	}
	var doc struct {
		N int64 `bson:"n"`
	}
	if err := coll.FindOne(ctx, d("_id", "c")).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if doc.N != total {
		t.Fatalf("counter %d after %d increments", doc.N, total)
	}
	retries := w.retryEvents()
	if len(retries) < total/10 || len(retries) > total/3 {
		t.Fatalf("%d retries; the fail point fires on about a fifth of %d writes", len(retries), total)
	}
	// Each retry resent the original transaction id.
	byOp := map[int64][]*event.CommandStartedEvent{}
	for _, s := range rec.startedNamed("update") {
		byOp[s.OperationID] = append(byOp[s.OperationID], s)
	}
	if len(byOp) != total {
		t.Fatalf("%d update operations, want %d", len(byOp), total)
	}
	for _, r := range retries {
		att := byOp[r.OperationID]
		if len(att) != 2 || *att[0].TxnNumber != *att[1].TxnNumber || !bytesEqual(att[0].LSID, att[1].LSID) ||
			r.TxnNumber == nil || *r.TxnNumber != *att[0].TxnNumber {
			t.Fatalf("operation %d: %d attempts, retry event %+v", r.OperationID, len(att), r)
		}
	}
}

func TestNonRetryableWritesNotRetriedEndToEnd(t *testing.T) {
	defer sturdy.SetMinHeartbeatIntervalForTest(20 * time.Millisecond)()
	cluster := mongosim.Start(t)
	ctx := testCtx(t)
	closeOn := func(cmd string) {
		setFailPoint(t, cluster, d("configureFailPoint", "failCommand", "mode", d("times", 1),
			"data", d("failCommands", bson.A{cmd}, "closeConnection", true)))
	}
	t.Run("updateMany", func(t *testing.T) {
		c, rec, _ := watchRetries(t, cluster.URI(), 0, nil)
		closeOn("update")
		_, err := c.Database("db").Collection("c").UpdateMany(ctx, d(), d("$set", d("x", 1)))
		if !sturdy.IsNetworkError(err) || len(rec.startedNamed("update")) != 1 {
			t.Fatalf("error %v after %d attempts", err, len(rec.startedNamed("update")))
		}
		if commandField(rec.startedNamed("update")[0], "txnNumber").Type != 0 {
			t.Error("updateMany carries a txnNumber")
		}
	})
	t.Run("runCommand", func(t *testing.T) {
		c, rec, _ := watchRetries(t, cluster.URI(), 0, nil)
		closeOn("insert")
		_, err := c.Database("db").RunCommand(ctx, d("insert", "c", "documents", bson.A{d("x", 1)}))
		if !sturdy.IsNetworkError(err) || len(rec.startedNamed("insert")) != 1 {
			t.Fatalf("error %v after %d attempts", err, len(rec.startedNamed("insert")))
		}
	})
	t.Run("retryWrites=false", func(t *testing.T) {
		c, rec, _ := watchRetries(t, cluster.URI()+"&retryWrites=false", 0, nil)
		closeOn("insert")
		_, err := c.Database("db").Collection("c").InsertOne(ctx, d("x", 1))
		if !sturdy.IsNetworkError(err) || len(rec.startedNamed("insert")) != 1 {
			t.Fatalf("error %v after %d attempts", err, len(rec.startedNamed("insert")))
		}
	})
	t.Run("w:0", func(t *testing.T) {
		c, rec, _ := watchRetries(t, cluster.URI()+"&w=0", 0, nil)
		closeOn("insert")
		_, _ = c.Database("db").Collection("c").InsertOne(ctx, d("x", 1))
		if n := len(rec.startedNamed("insert")); n != 1 || commandField(rec.startedNamed("insert")[0], "txnNumber").Type != 0 {
			t.Fatalf("%d attempts (want 1, without txnNumber)", n)
		}
	})
	t.Run("aggregate $out", func(t *testing.T) {
		c, rec, _ := watchRetries(t, cluster.URI(), 0, nil)
		closeOn("aggregate")
		_, err := c.Database("db").Collection("c").Aggregate(ctx, bson.A{d("$out", "other")})
		if !sturdy.IsNetworkError(err) || len(rec.startedNamed("aggregate")) != 1 {
			t.Fatalf("error %v after %d attempts", err, len(rec.startedNamed("aggregate")))
		}
	})
}

func TestRetryableReadsEndToEnd(t *testing.T) {
	defer sturdy.SetMinHeartbeatIntervalForTest(20 * time.Millisecond)()
	cluster := mongosim.Start(t)
	ctx := testCtx(t)
	c, rec, _ := watchRetries(t, cluster.URI(), 0, nil)
	coll := c.Database("db").Collection("c")
	if _, err := coll.InsertOne(ctx, d("_id", 1, "k", "a")); err != nil {
		t.Fatal(err)
	}
	for name, run := range map[string]func() error{
		"find": func() error {
			cur, err := coll.Find(ctx, d())
			if err == nil {
				err = cur.Close(ctx)
			}
			return err
		},
		"aggregate": func() error {
			cur, err := coll.Aggregate(ctx, bson.A{d("$match", d())})
			if err == nil {
				err = cur.Close(ctx)
			}
			return err
		},
		"distinct": func() error { _, err := coll.Distinct(ctx, "k", d()); return err },
	} {
		t.Run(name, func(t *testing.T) {
			rec.reset()
			setFailPoint(t, cluster, d("configureFailPoint", "failCommand", "mode", d("times", 1),
				"data", d("failCommands", bson.A{name}, "closeConnection", true)))
			if err := run(); err != nil {
				t.Fatal(err)
			}
			if n := len(rec.startedNamed(name)); n != 2 {
				t.Fatalf("%d attempts, want 2", n)
			}
		})
	}
}

// Retryable writes prose test 2: a PoolClearedError is retried.
func TestPoolClearedErrorIsRetried(t *testing.T) {
	cluster := mongosim.Start(t)
	c, rec, w := watchRetries(t, cluster.URI()+"&maxPoolSize=1", 0, nil)
	ctx := testCtx(t)
	coll := c.Database("db").Collection("c")
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	setFailPoint(t, cluster, d("configureFailPoint", "failCommand", "mode", d("times", 1),
		"data", d("failCommands", bson.A{"insert"}, "errorCode", 91, "blockConnection", true, "blockTimeMS", 1000,
			"errorLabels", bson.A{"RetryableWriteError"})))
	rec.reset()
	before := len(w.poolEvents())
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() { _, errs[i] = coll.InsertOne(ctx, d("i", i)) })
		if i == 0 {
			time.Sleep(100 * time.Millisecond) // the first takes the only connection
		}
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var seq []event.PoolEventType
	for _, e := range w.poolEvents()[before:] {
		switch e.Type {
		case event.ConnectionCheckedOut, event.PoolCleared, event.ConnectionCheckOutFailed:
			seq = append(seq, e.Type)
		}
	}
	if len(seq) < 3 || seq[0] != event.ConnectionCheckedOut || seq[1] != event.PoolCleared || seq[2] != event.ConnectionCheckOutFailed {
		t.Fatalf("pool events %v; want checked out, cleared, check-out failed first", seq)
	}
	if n := len(rec.startedNamed("insert")); n != 3 {
		t.Fatalf("%d inserts started, want 3", n)
	}
}

// Retryable writes prose test 3: a writeConcernError with the
// RetryableWriteError label, then a NoWritesPerformed error: the first
// error is returned.
func TestWriteConcernErrorThenNoWritesPerformed(t *testing.T) {
	defer sturdy.SetMinHeartbeatIntervalForTest(20 * time.Millisecond)()
	cluster := mongosim.Start(t)
	var armed atomic.Bool
	c, _, _ := watchRetries(t, cluster.URI(), 0, func(o *sturdy.Options) {
		o.Monitor.CommandSucceeded = func(_ context.Context, e *event.CommandSucceededEvent) {
			if e.CommandName != "insert" || !armed.CompareAndSwap(true, false) {
				return
			}
			if v, err := e.Reply.LookupErr("writeConcernError", "code"); err == nil && v.AsInt64() == 91 {
				_ = cluster.SetFailPoint(d("configureFailPoint", "failCommand", "mode", d("times", 1),
					"data", d("failCommands", bson.A{"insert"}, "errorCode", 10107,
						"errorLabels", bson.A{"RetryableWriteError", "NoWritesPerformed"})))
			}
		}
	})
	setFailPoint(t, cluster, d("configureFailPoint", "failCommand", "mode", d("times", 1),
		"data", d("failCommands", bson.A{"insert"}, "errorLabels", bson.A{"RetryableWriteError"},
			"writeConcernError", d("code", 91, "errmsg", "Replication is being shut down"))))
	armed.Store(true)
	_, err := c.Database("db").Collection("c").InsertOne(testCtx(t), d("x", 1))
	setFailPoint(t, cluster, failPointOff("failCommand"))
	if errCode(err) != 91 {
		t.Fatalf("error %v, want the writeConcernError 91", err)
	}
}

// A cursor whose getMore the server keeps refusing with overload errors
// is killed on the server once the client gives up.
func TestCursorKilledWhenGetMoreGivesUp(t *testing.T) {
	srv := blackpipe.StartReplicaSet(t, "rs0", 1, blackpipe.Options{})[0]
	var killed atomic.Int64
	var getMores atomic.Int64
	srv.Autorespond(blackpipe.Command("find"), func(r *blackpipe.Request) bool {
		return r.ReplyCursor("db.c", 42, true, d("_id", 1)) == nil
	})
	srv.Autorespond(blackpipe.Command("getMore"), func(r *blackpipe.Request) bool {
		getMores.Add(1)
		if r.Command.Lookup("getMore").Int64() != 42 {
			return r.ReplyError(43, "cursor not found") == nil
		}
		return r.ReplyError(462, "Rate limiter 'ingressRequestRateLimiter' rate exceeded", "SystemOverloadedError", "RetryableError") == nil
	})
	srv.Autorespond(blackpipe.Command("killCursors"), func(r *blackpipe.Request) bool {
		ids, _ := r.Command.Lookup("cursors").Array().Values()
		if len(ids) == 1 && ids[0].AsInt64() == 42 {
			killed.Add(1)
		}
		return r.Reply(d("cursorsKilled", bson.A{int64(42)})) == nil
	})
	c, _, w := watchRetries(t, blackpipe.ReplicaSetURI("rs0", []*blackpipe.Server{srv}), 0.5, nil)
	ctx := testCtx(t)
	cur, err := c.Database("db").Collection("c").Find(ctx, d())
	if err != nil {
		t.Fatal(err)
	}
	if !cur.Next(ctx) {
		t.Fatal(cur.Err())
	}
	if cur.Next(ctx) || errCode(cur.Err()) != 462 {
		t.Fatalf("Next after the refused getMores: err %v", cur.Err())
	}
	if getMores.Load() != 6 || len(w.backoffs()) != 5 {
		t.Fatalf("%d getMores, %d backoffs; want 6 and 5", getMores.Load(), len(w.backoffs()))
	}
	if killed.Load() != 1 || cur.ID() != 0 {
		t.Fatalf("killCursors for 42 sent %d times, cursor id %d", killed.Load(), cur.ID())
	}
	if err := cur.Close(ctx); err != nil || killed.Load() != 1 {
		t.Fatalf("Close: %v, killCursors %d times", err, killed.Load())
	}
}

// The URI and Options knobs reach the executor.
func TestRetryOptionsReachTheExecutor(t *testing.T) {
	cluster := mongosim.Start(t)
	c := connect(t, cluster.URI()+"&maxAdaptiveRetries=0&adaptiveRetries=false&enableOverloadRetargeting=false&retryReads=false", nil)
	ex := sturdy.ExecutorOf(c)
	if ex.MaxAdaptiveRetries != 0 || !ex.DisableRetryTokens || !ex.DisableOverloadRetargeting || ex.RetryReads || !ex.RetryWrites {
		t.Fatalf("executor %+v", ex)
	}
	c = connect(t, cluster.URI(), func(o *sturdy.Options) { o.MaxAdaptiveRetries = ptr(2) })
	ex = sturdy.ExecutorOf(c)
	if ex.MaxAdaptiveRetries != 2 || ex.DisableRetryTokens || ex.DisableOverloadRetargeting || !ex.RetryReads {
		t.Fatalf("executor %+v", ex)
	}
	c = connect(t, cluster.URI(), nil)
	if ex := sturdy.ExecutorOf(c); ex.MaxAdaptiveRetries != 5 { // the documented default
		t.Fatalf("default MaxAdaptiveRetries %d", ex.MaxAdaptiveRetries)
	}
}
