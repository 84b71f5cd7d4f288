package exec_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/blackpipe"
	"github.com/sturdy-go/sturdy/event"
	"github.com/sturdy-go/sturdy/internal/backoff"
	"github.com/sturdy-go/sturdy/internal/exec"
	"github.com/sturdy-go/sturdy/internal/topology"
	"github.com/sturdy-go/sturdy/mongoerr"
	"github.com/sturdy-go/sturdy/readpref"
)

// clock is an injected sleep and jitter: sleeps are recorded, not slept.
type clock struct {
	mu     sync.Mutex
	sleeps []time.Duration
	jitter float64
	onWake func(n int) // called after the n-th sleep (1-based)
}

func (c *clock) install(e *exec.Executor) {
	e.Sleep = c.sleep
	e.Jitter = func() float64 { return c.jitter }
}

func (c *clock) sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	n := len(c.sleeps)
	f := c.onWake
	c.mu.Unlock()
	if f != nil {
		f(n)
	}
	return ctx.Err()
}

func (c *clock) recorded() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// retries records RetryEvents.
type retries struct {
	mu  sync.Mutex
	evs []*event.RetryEvent
}

func (r *retries) attach(e *exec.Executor) {
	e.Monitor.Retry = func(_ context.Context, ev *event.RetryEvent) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.evs = append(r.evs, ev)
	}
}

func (r *retries) all() []*event.RetryEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*event.RetryEvent(nil), r.evs...)
}

func overloadReply(r *blackpipe.Request, baseBackoffMS int32) error {
	d := bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: "Rate limiter 'ingressRequestRateLimiter' rate exceeded"},
		{Key: "code", Value: int32(462)}, {Key: "codeName", Value: "IngressRequestRateLimitExceeded"},
		{Key: "errorLabels", Value: bson.A{mongoerr.LabelSystemOverloaded, mongoerr.LabelRetryable}}}
	if baseBackoffMS > 0 {
		d = append(d, bson.E{Key: "baseBackoffMS", Value: baseBackoffMS})
	}
	return r.Reply(d)
}

// alwaysOverloaded answers every command called name with an overload
// error and counts them.
func alwaysOverloaded(srv *blackpipe.Server, name string, baseBackoffMS int32) *atomic.Int64 {
	var n atomic.Int64
	srv.Autorespond(blackpipe.Command(name), func(r *blackpipe.Request) bool {
		n.Add(1)
		return overloadReply(r, baseBackoffMS) == nil
	})
	return &n
}

func commandEvents[T any](env *env) []T {
	var out []T
	for _, e := range env.rec.all() {
		if v, ok := e.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

func findOp() *exec.Operation {
	return &exec.Operation{DB: "db", Command: bson.D{{Key: "find", Value: "c"}}, Flags: exec.RetryableRead}
}

func codeOf(err error) int32 {
	var ce *mongoerr.CommandError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return -1
}

// --- retryable writes ---------------------------------------------------

func TestRetryableWriteRetriedOnceAfterNetworkError(t *testing.T) {
	srv, env := replicaSet(t)
	var rs retries
	rs.attach(env.exec)
	ch := executeAsync(env.exec, insertOp())
	first := receive(t, srv, "insert")
	_ = first.Hangup()
	second := receive(t, srv, "insert")
	if !bytes.Equal(first.Command.Lookup("lsid").Document(), second.Command.Lookup("lsid").Document()) {
		t.Error("the retry has another lsid")
	}
	if a, b := first.Command.Lookup("txnNumber"), second.Command.Lookup("txnNumber"); a.Int64() != 1 || !a.Equal(b) {
		t.Errorf("txnNumbers %v then %v, want 1 both times", a, b)
	}
	if first.Conn == second.Conn {
		t.Error("the retry used the hung-up connection")
	}
	_ = second.Reply(bson.D{{Key: "n", Value: 1}})
	if o := wait(t, ch); o.err != nil {
		t.Fatal(o.err)
	}

	evs := env.rec.all()
	if len(evs) != 4 {
		t.Fatalf("%d events, want started, failed, started, succeeded", len(evs))
	}
	s1, ok1 := evs[0].(*event.CommandStartedEvent)
	f1, ok2 := evs[1].(*event.CommandFailedEvent)
	s2, ok3 := evs[2].(*event.CommandStartedEvent)
	ok, ok4 := evs[3].(*event.CommandSucceededEvent)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		t.Fatalf("events %T %T %T %T", evs[0], evs[1], evs[2], evs[3])
	}
	if s1.OperationID != s2.OperationID || f1.OperationID != s1.OperationID || ok.OperationID != s1.OperationID {
		t.Error("attempts do not share the operation id")
	}
	if s1.RequestID == s2.RequestID || f1.RequestID != s1.RequestID || ok.RequestID != s2.RequestID {
		t.Errorf("request ids %d/%d then %d/%d", s1.RequestID, f1.RequestID, s2.RequestID, ok.RequestID)
	}
	for _, txn := range []*int64{s1.TxnNumber, f1.TxnNumber, s2.TxnNumber, ok.TxnNumber} {
		if txn == nil || *txn != 1 {
			t.Errorf("event without txnNumber 1: %v", txn)
		}
	}
	re := rs.all()
	if len(re) != 1 {
		t.Fatalf("%d retry events, want 1", len(re))
	}
	r := re[0]
	if r.Attempt != 1 || r.OperationID != s1.OperationID || r.CommandName != "insert" || r.Backoff != 0 ||
		r.ServerAddress != srv.Addr() || r.TxnNumber == nil || *r.TxnNumber != 1 || r.TokensLeft != 999 {
		t.Errorf("retry event %+v", r)
	}
	if !mongoerr.IsNetworkError(r.Reason) || !mongoerr.HasErrorLabel(r.Reason, mongoerr.LabelRetryableWrite) {
		t.Errorf("retry reason %v: want the network error labelled RetryableWriteError", r.Reason)
	}
	// The failed retry's token came back with the success: full again.
	if got := env.exec.RetryTokens().Tokens(); got != 1000 {
		t.Errorf("tokens %v after a successful retry, want 1000", got)
	}
}

func TestRetryableWriteNotRetriedTwice(t *testing.T) {
	srv, env := replicaSet(t)
	var n atomic.Int64
	srv.Autorespond(blackpipe.Command("insert"), func(r *blackpipe.Request) bool {
		n.Add(1)
		return r.Hangup() == nil
	})
	_, err := env.exec.Execute(ctx10(t), insertOp())
	if !mongoerr.IsNetworkError(err) || !mongoerr.HasErrorLabel(err, mongoerr.LabelRetryableWrite) {
		t.Fatalf("error %v, want a labelled network error", err)
	}
	if n.Load() != 2 {
		t.Fatalf("%d attempts, want 2", n.Load())
	}
}

func TestIneligibleWritesNotRetried(t *testing.T) {
	cases := map[string]func(*exec.Executor, *exec.Operation){
		"updateMany":      func(_ *exec.Executor, op *exec.Operation) { op.Flags &^= exec.RetryableWrite },
		"runCommand":      func(_ *exec.Executor, op *exec.Operation) { op.Flags = op.Flags&^exec.RetryableWrite | exec.RunCommand },
		"retryWrites off": func(e *exec.Executor, _ *exec.Operation) { e.RetryWrites = false },
	}
	for name, edit := range cases {
		t.Run(name, func(t *testing.T) {
			srv, env := replicaSet(t)
			var n atomic.Int64
			srv.Autorespond(blackpipe.Command("update"), func(r *blackpipe.Request) bool {
				n.Add(1)
				return r.Hangup() == nil
			})
			op := &exec.Operation{DB: "db", Command: bson.D{{Key: "update", Value: "c"}}, Flags: exec.Write | exec.RetryableWrite}
			edit(env.exec, op)
			_, err := env.exec.Execute(ctx10(t), op)
			if !mongoerr.IsNetworkError(err) {
				t.Fatalf("error %v", err)
			}
			if mongoerr.HasErrorLabel(err, mongoerr.LabelRetryableWrite) {
				t.Error("an ineligible write's network error is labelled RetryableWriteError")
			}
			if n.Load() != 1 {
				t.Fatalf("%d attempts, want 1", n.Load())
			}
		})
	}
}

func TestUnacknowledgedWriteNotRetried(t *testing.T) {
	srv, env := replicaSet(t)
	var rs retries
	rs.attach(env.exec)
	// Wait for discovery so the failure is the write's own.
	if _, err := env.topo.SelectServer(ctx10(t), topology.WriteSelector(), nil); err != nil {
		t.Fatal(err)
	} else {
		// SelectServer counted an operation in progress.
		s, _ := env.topo.Server(srv.Addr())
		s.Dec()
	}
	srv.CloseNewConnections(true) // the write's connection is refused (an overload-labelled error)
	op := insertOp()
	op.Flags |= exec.Unacknowledged
	_, err := env.exec.Execute(ctx10(t), op)
	if !mongoerr.IsNetworkError(err) {
		t.Fatalf("error %v, want the connection failure", err)
	}
	if len(rs.all()) != 0 {
		t.Fatal("an unacknowledged write was retried")
	}
}

func TestRetryErrorPrecedence(t *testing.T) {
	t.Run("retry error with NoWritesPerformed returns the first", func(t *testing.T) {
		srv, env := replicaSet(t)
		var n atomic.Int64
		srv.Autorespond(blackpipe.Command("insert"), func(r *blackpipe.Request) bool {
			if n.Add(1) == 1 {
				return r.ReplyError(91, "shutting down", mongoerr.LabelRetryableWrite) == nil
			}
			return r.ReplyError(10107, "not primary", mongoerr.LabelRetryableWrite, mongoerr.LabelNoWritesPerformed) == nil
		})
		_, err := env.exec.Execute(ctx10(t), insertOp())
		if codeOf(err) != 91 || n.Load() != 2 {
			t.Fatalf("error %v after %d attempts; want the first (91) after 2", err, n.Load())
		}
	})
	t.Run("retry error without NoWritesPerformed is returned", func(t *testing.T) {
		srv, env := replicaSet(t)
		var n atomic.Int64
		srv.Autorespond(blackpipe.Command("insert"), func(r *blackpipe.Request) bool {
			if n.Add(1) == 1 {
				return r.ReplyError(91, "shutting down", mongoerr.LabelRetryableWrite) == nil
			}
			return r.ReplyError(11602, "interrupted", mongoerr.LabelRetryableWrite) == nil
		})
		_, err := env.exec.Execute(ctx10(t), insertOp())
		if codeOf(err) != 11602 {
			t.Fatalf("error %v; want the retry's (11602)", err)
		}
	})
	t.Run("selection failure on retry returns the original", func(t *testing.T) {
		srv := blackpipe.StartReplicaSet(t, "rs0", 1, blackpipe.Options{})[0]
		env := newEnv(t, topology.Options{Hosts: []string{srv.Addr()}, SetName: "rs0", ServerSelectionTimeout: 300 * time.Millisecond})
		srv.Autorespond(blackpipe.Command("insert"), func(r *blackpipe.Request) bool {
			// No longer primary from now on, and the reply is lost.
			srv.UpdateHello(bson.D{{Key: "isWritablePrimary", Value: false}, {Key: "secondary", Value: true}})
			return r.Hangup() == nil
		})
		_, err := env.exec.Execute(ctx10(t), insertOp())
		var ne *mongoerr.NetworkError
		if !errors.As(err, &ne) || ne.Op == "dial" || ne.Op == "handshake" {
			t.Fatalf("error %v; want the first attempt's network error", err)
		}
		if n := len(commandEvents[*event.CommandStartedEvent](env)); n != 1 {
			t.Errorf("%d attempts started, want 1", n)
		}
	})
	t.Run("driver-side failure on retry returns the original", func(t *testing.T) {
		srv, env := replicaSet(t)
		c := &clock{jitter: 0}
		c.install(env.exec)
		srv.Autorespond(blackpipe.Command("insert"), func(r *blackpipe.Request) bool {
			srv.CloseNewConnections(true) // every later connection attempt fails
			return r.ReplyError(91, "shutting down", mongoerr.LabelRetryableWrite) == nil
		})
		_, err := env.exec.Execute(ctx10(t), insertOp())
		if codeOf(err) != 91 {
			t.Fatalf("error %v; want the server's 91 from the only attempt that reached it", err)
		}
		if n := len(commandEvents[*event.CommandStartedEvent](env)); n != 1 {
			t.Errorf("%d attempts started, want 1", n)
		}
	})
}

func TestRetryableWriteCodesForModernServers(t *testing.T) {
	cases := []struct {
		name  string
		reply func(r *blackpipe.Request) error
		retry bool
	}{
		{"91 labelled", func(r *blackpipe.Request) error {
			return r.ReplyError(91, "shutting down", mongoerr.LabelRetryableWrite)
		}, true},
		{"91 unlabelled", func(r *blackpipe.Request) error { return r.ReplyError(91, "shutting down") }, false},
		{"not master message unlabelled", func(r *blackpipe.Request) error { return r.ReplyError(2, "not master") }, false},
		{"WriteConcernFailed", func(r *blackpipe.Request) error {
			return r.ReplyWriteConcernError(1, blackpipe.WriteConcernError{Code: 64, Message: "waiting for replication timed out"})
		}, false},
		{"writeConcernError labelled", func(r *blackpipe.Request) error {
			return r.ReplyWriteConcernError(1, blackpipe.WriteConcernError{Code: 91, Message: "shutting down", Labels: []string{mongoerr.LabelRetryableWrite}})
		}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv, env := replicaSet(t)
			var n atomic.Int64
			srv.Autorespond(blackpipe.Command("insert"), func(r *blackpipe.Request) bool {
				if n.Add(1) == 1 {
					return c.reply(r) == nil
				}
				return r.Reply(bson.D{{Key: "n", Value: 1}}) == nil
			})
			_, err := env.exec.Execute(ctx10(t), insertOp())
			if c.retry && (err != nil || n.Load() != 2) {
				t.Fatalf("error %v after %d attempts; want success on the retry", err, n.Load())
			}
			if !c.retry && (err == nil || n.Load() != 1) {
				t.Fatalf("error %v after %d attempts; want the first error, no retry", err, n.Load())
			}
		})
	}
}

func TestTransactionNumbersRejectedGetsActionableMessage(t *testing.T) {
	srv, env := replicaSet(t)
	autoReplyError := func(r *blackpipe.Request) bool {
		return r.ReplyError(20, "Transaction numbers are only allowed on storage engines that support document-level locking") == nil
	}
	srv.Autorespond(blackpipe.Command("insert"), autoReplyError)
	_, err := env.exec.Execute(ctx10(t), insertOp())
	var unsupported *mongoerr.RetryableWritesUnsupportedError
	if !errors.As(err, &unsupported) || err.Error() != mongoerr.RetryableWritesUnsupportedMessage {
		t.Fatalf("error %v", err)
	}
	if codeOf(err) != 20 {
		t.Errorf("code %d, want 20", codeOf(err))
	}
}

// --- retryable reads ----------------------------------------------------

func TestRetryableReadsRetriedOnce(t *testing.T) {
	for _, name := range []string{"find", "aggregate", "distinct", "count", "listCollections"} {
		t.Run(name, func(t *testing.T) {
			srv, env := replicaSet(t)
			var n atomic.Int64
			srv.Autorespond(blackpipe.Command(name), func(r *blackpipe.Request) bool {
				switch n.Add(1) {
				case 1:
					return r.Hangup() == nil
				case 2:
					return r.Reply(bson.D{{Key: "n", Value: 1}}) == nil
				}
				return r.ReplyError(2, "unexpected third attempt") == nil
			})
			op := &exec.Operation{DB: "db", Command: bson.D{{Key: name, Value: "c"}}, Flags: exec.RetryableRead}
			if _, err := env.exec.Execute(ctx10(t), op); err != nil || n.Load() != 2 {
				t.Fatalf("error %v after %d attempts", err, n.Load())
			}
		})
	}
}

func TestReadRetryLimitsAndIneligibleReads(t *testing.T) {
	cases := []struct {
		name     string
		op       func() *exec.Operation
		reply    func(r *blackpipe.Request) error
		attempts int64
	}{
		{"find twice network", findOp, (*blackpipe.Request).Hangup, 2},
		{"find retryable code", findOp, func(r *blackpipe.Request) error { return r.ReplyError(134, "read concern majority not available yet") }, 2},
		{"find other code", findOp, func(r *blackpipe.Request) error { return r.ReplyError(2, "bad value") }, 1},
		{"aggregate with $out", func() *exec.Operation {
			return &exec.Operation{DB: "db", Command: bson.D{{Key: "aggregate", Value: "c"}}, Flags: exec.Write}
		}, (*blackpipe.Request).Hangup, 1},
		{"getMore", func() *exec.Operation {
			return &exec.Operation{DB: "db", Command: bson.D{{Key: "getMore", Value: int64(7)}}}
		}, (*blackpipe.Request).Hangup, 1},
		{"runCommand read", func() *exec.Operation {
			return &exec.Operation{DB: "db", Command: bson.D{{Key: "find", Value: "c"}}, Flags: exec.RunCommand}
		}, (*blackpipe.Request).Hangup, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv, env := replicaSet(t)
			var n atomic.Int64
			op := c.op()
			srv.Autorespond(blackpipe.Command(op.Command[0].Key), func(r *blackpipe.Request) bool {
				n.Add(1)
				return c.reply(r) == nil
			})
			if _, err := env.exec.Execute(ctx10(t), op); err == nil {
				t.Fatal("want an error")
			}
			if n.Load() != c.attempts {
				t.Fatalf("%d attempts, want %d", n.Load(), c.attempts)
			}
		})
	}
	t.Run("retryReads off", func(t *testing.T) {
		srv, env := replicaSet(t)
		env.exec.RetryReads = false
		var n atomic.Int64
		srv.Autorespond(blackpipe.Command("find"), func(r *blackpipe.Request) bool { n.Add(1); return r.Hangup() == nil })
		if _, err := env.exec.Execute(ctx10(t), findOp()); err == nil || n.Load() != 1 {
			t.Fatalf("error %v after %d attempts, want one failed attempt", err, n.Load())
		}
	})
}

// --- overload -----------------------------------------------------------

func TestOverloadBackoffSchedule(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name        string
		jitter      float64
		maxRetries  int
		baseBackoff int32
		want        []time.Duration
	}{
		{"default", 0.5, 5, 0, []time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms, 800 * ms}},
		{"capped at 10s", 1, 9, 0, []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 6400 * ms, 10 * time.Second, 10 * time.Second}},
		{"baseBackoffMS", 1, 3, 50, []time.Duration{50 * ms, 100 * ms, 200 * ms}},
		{"one retry", 0.5, 1, 0, []time.Duration{50 * ms}},
		{"no overload retries", 0.5, 0, 0, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv, env := replicaSet(t)
			clk := &clock{jitter: c.jitter}
			clk.install(env.exec)
			env.exec.MaxAdaptiveRetries = c.maxRetries
			var rs retries
			rs.attach(env.exec)
			n := alwaysOverloaded(srv, "insert", c.baseBackoff)
			// A deadline beyond the whole (injected) schedule.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := env.exec.Execute(ctx, insertOp())
			if codeOf(err) != 462 || !mongoerr.HasErrorLabel(err, mongoerr.LabelSystemOverloaded) || !mongoerr.HasErrorLabel(err, mongoerr.LabelRetryable) {
				t.Fatalf("error %v, want the overload error", err)
			}
			got := clk.recorded()
			if len(got) != len(c.want) {
				t.Fatalf("slept %v, want %v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("slept %v, want %v", got, c.want)
				}
			}
			if int(n.Load()) != len(c.want)+1 {
				t.Errorf("%d attempts, want %d", n.Load(), len(c.want)+1)
			}
			evs := rs.all()
			if len(evs) != len(c.want) {
				t.Fatalf("%d retry events", len(evs))
			}
			for i, e := range evs {
				if e.Attempt != i+1 || e.Backoff != c.want[i] || e.TokensLeft != float64(1000-i-1) || e.TxnNumber == nil || *e.TxnNumber != 1 {
					t.Errorf("retry event %d: %+v", i, e)
				}
			}
			// Every overload retry failed with the overload label: nothing
			// comes back.
			if got := env.exec.RetryTokens().Tokens(); got != float64(1000-len(c.want)) {
				t.Errorf("tokens %v", got)
			}
			// Every attempt of the write carried the same txnNumber.
			for _, s := range commandEvents[*event.CommandStartedEvent](env) {
				if s.TxnNumber == nil || *s.TxnNumber != 1 {
					t.Errorf("attempt with txnNumber %v", s.TxnNumber)
				}
			}
		})
	}
}

func TestOverloadRetriesGatedByRetryOptions(t *testing.T) {
	cases := []struct {
		name                    string
		write, runCommand       bool
		retryWrites, retryReads bool
		attempts                int64
	}{
		{"write, retryWrites", true, false, true, false, 6},
		{"write, no retryWrites", true, false, false, true, 1},
		{"read, retryReads", false, false, false, true, 6},
		{"read, no retryReads", false, false, true, false, 1},
		{"runCommand, both", false, true, true, true, 6},
		{"runCommand, writes only", false, true, true, false, 1},
		{"runCommand, reads only", false, true, false, true, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv, env := replicaSet(t)
			(&clock{jitter: 0}).install(env.exec)
			env.exec.RetryWrites, env.exec.RetryReads = c.retryWrites, c.retryReads
			// An updateMany-like write and a plain command: neither is a
			// retryable write or read.
			op := &exec.Operation{DB: "db", Command: bson.D{{Key: "update", Value: "c"}}, Flags: exec.Write.If(c.write) | exec.RunCommand.If(c.runCommand)}
			n := alwaysOverloaded(srv, "update", 0)
			if _, err := env.exec.Execute(ctx10(t), op); codeOf(err) != 462 {
				t.Fatalf("error %v", err)
			}
			if n.Load() != c.attempts {
				t.Fatalf("%d attempts, want %d", n.Load(), c.attempts)
			}
			for _, s := range commandEvents[*event.CommandStartedEvent](env) {
				if s.TxnNumber != nil {
					t.Error("a non-retryable write carries a txnNumber")
				}
			}
		})
	}
}

func TestOverloadTokenBucket(t *testing.T) {
	t.Run("exhaustion stops retries", func(t *testing.T) {
		srv, env := replicaSet(t)
		(&clock{jitter: 0}).install(env.exec)
		env.exec.Tokens = backoff.NewTokenBucket(2)
		n := alwaysOverloaded(srv, "insert", 0)
		if _, err := env.exec.Execute(ctx10(t), insertOp()); codeOf(err) != 462 {
			t.Fatalf("error %v", err)
		}
		if n.Load() != 3 || env.exec.RetryTokens().Tokens() != 0 {
			t.Fatalf("%d attempts, %v tokens left; want 3 attempts (2 retries) and 0", n.Load(), env.exec.RetryTokens().Tokens())
		}
		// An empty bucket refuses even the first retry.
		if _, err := env.exec.Execute(ctx10(t), insertOp()); codeOf(err) != 462 || n.Load() != 4 {
			t.Fatalf("error %v, %d attempts in all; want one more attempt, no retry", err, n.Load())
		}
	})
	t.Run("deposits", func(t *testing.T) {
		srv, env := replicaSet(t)
		(&clock{jitter: 0}).install(env.exec)
		env.exec.Tokens = backoff.NewTokenBucket(10)
		env.exec.Tokens.Consume(5) // 5 left
		var script atomic.Value
		script.Store([]string{})
		srv.Autorespond(blackpipe.Command("insert"), func(r *blackpipe.Request) bool {
			s := script.Load().([]string)
			next := "ok"
			if len(s) > 0 {
				next = s[0]
				script.Store(s[1:])
			}
			switch next {
			case "overload":
				return overloadReply(r, 0) == nil
			case "network":
				return r.Hangup() == nil
			case "fail":
				return r.ReplyError(2, "bad value") == nil
			}
			return r.Reply(bson.D{{Key: "n", Value: 1}}) == nil
		})
		steps := []struct {
			script []string
			fails  bool
			want   float64
		}{
			{nil, false, 5.1},                                     // first-try success: +0.1
			{[]string{"overload"}, false, 5.2},                    // retry -1, success on retry +1.1
			{[]string{"overload", "overload"}, false, 4.3},        // -1 -1 +1.1
			{[]string{"overload", "fail"}, true, 4.3},             // -1, failed retry without the label +1
			{[]string{"network", "network"}, true, 4.3},           // a retryable-write retry costs and refunds alike
			{[]string{"overload", "overload", "fail"}, true, 3.3}, // -1 -1 +1
		}
		for i, s := range steps {
			script.Store(s.script)
			_, err := env.exec.Execute(ctx10(t), insertOp())
			if (err != nil) != s.fails {
				t.Fatalf("step %d: error %v", i, err)
			}
			if got := env.exec.RetryTokens().Tokens(); got != s.want {
				t.Fatalf("step %d: %v tokens, want %v", i, got, s.want)
			}
		}
	})
	t.Run("adaptive retries off", func(t *testing.T) {
		srv, env := replicaSet(t)
		(&clock{jitter: 0}).install(env.exec)
		env.exec.DisableRetryTokens = true
		var rs retries
		rs.attach(env.exec)
		n := alwaysOverloaded(srv, "insert", 0)
		_, _ = env.exec.Execute(ctx10(t), insertOp())
		if n.Load() != 6 || env.exec.RetryTokens() != nil {
			t.Fatalf("%d attempts; want 6 without a bucket", n.Load())
		}
		for _, e := range rs.all() {
			if e.TokensLeft != 0 {
				t.Errorf("TokensLeft %v without a bucket", e.TokensLeft)
			}
		}
	})
}

// Concurrent operations share the bucket; its balance must equal the sum
// of what every operation took and gave back.
func TestOverloadTokenBucketConcurrent(t *testing.T) {
	srv, env := replicaSet(t)
	(&clock{jitter: 0}).install(env.exec)
	var rs retries
	rs.attach(env.exec)
	env.exec.Tokens = backoff.NewTokenBucket(1000)
	env.exec.Tokens.Consume(500)
	// Each write fails txnNumber % 3 times before it succeeds; the
	// transaction id tells the attempts of one write apart from others.
	var mu sync.Mutex
	seen := map[string]int64{}
	srv.Autorespond(blackpipe.Command("insert"), func(r *blackpipe.Request) bool {
		txn := r.Command.Lookup("txnNumber").Int64()
		key := r.Command.Lookup("lsid").String() + "/" + r.Command.Lookup("txnNumber").String()
		mu.Lock()
		seen[key]++
		n := seen[key]
		mu.Unlock()
		if n <= txn%3 {
			return overloadReply(r, 0) == nil
		}
		return r.Reply(bson.D{{Key: "n", Value: 1}}) == nil
	})
	const ops = 60
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range 12 {
		wg.Go(func() {
			for range ops / 12 {
				if _, err := env.exec.Execute(ctx10(t), insertOp()); err != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d operations failed", failed.Load())
	}
	evs := rs.all()
	if len(evs) < ops/2 {
		t.Fatalf("only %d retries", len(evs))
	}
	retried := map[int64]bool{}
	for _, e := range evs {
		retried[e.OperationID] = true
	}
	// 500 - retries + 0.1 per operation + 1 per operation that succeeded
	// on a retry.
	want := 500 - float64(len(evs)) + 0.1*ops + float64(len(retried))
	if got := env.exec.RetryTokens().Tokens(); got < want-1e-9 || got > want+1e-9 {
		t.Fatalf("tokens %v, want %v (%d retries, %d retried operations)", got, want, len(evs), len(retried))
	}
}

func TestOverloadDeadlineShorterThanBackoff(t *testing.T) {
	srv, env := replicaSet(t)
	clk := &clock{jitter: 1}
	clk.install(env.exec)
	base := time.Now()
	env.exec.Now = func() time.Time { return base }
	n := alwaysOverloaded(srv, "insert", 0)
	// 150 ms left: the first backoff (100 ms) fits, the second (200 ms)
	// does not.
	env.exec.Jitter = func() float64 { return 1 }
	ctx, cancel := context.WithDeadline(context.Background(), base.Add(150*time.Millisecond))
	defer cancel()
	if time.Until(base.Add(150*time.Millisecond)) < 100*time.Millisecond {
		t.Skip("machine too slow for the deadline arithmetic")
	}
	_, err := env.exec.Execute(ctx, insertOp())
	if codeOf(err) != 462 || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want the overload error (not a timeout)", err)
	}
	if got := clk.recorded(); len(got) != 1 || got[0] != 100*time.Millisecond || n.Load() != 2 {
		t.Fatalf("slept %v with %d attempts; want one 100ms backoff, then give up", got, n.Load())
	}
	if env.exec.RetryTokens().Tokens() != 999 {
		t.Errorf("tokens %v: the refused retry must not take a token", env.exec.RetryTokens().Tokens())
	}
}

func TestOverloadDeprioritizesServerForReads(t *testing.T) {
	for _, mode := range []readpref.Mode{readpref.SecondaryPreferred, readpref.Nearest, readpref.Secondary} {
		t.Run(mode.String(), func(t *testing.T) {
			members := blackpipe.StartReplicaSet(t, "rs0", 3, blackpipe.Options{})
			env := newEnv(t, topology.Options{Hosts: []string{members[0].Addr()}, SetName: "rs0", LocalThreshold: time.Hour})
			(&clock{jitter: 0}).install(env.exec)
			// Wait until all three are known.
			deadline := time.Now().Add(5 * time.Second)
			for {
				d := env.topo.Description()
				known := 0
				for _, s := range d.Servers {
					if s.Kind == topology.RSPrimary || s.Kind == topology.RSSecondary {
						known++
					}
				}
				if known == 3 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("topology %v", d)
				}
				time.Sleep(10 * time.Millisecond)
			}
			for round := range 10 {
				var mu sync.Mutex
				var got []string
				cancels := make([]func(), 0, 3)
				for _, m := range members {
					addr := m.Addr()
					cancels = append(cancels, m.Autorespond(blackpipe.Command("find"), func(r *blackpipe.Request) bool {
						mu.Lock()
						got = append(got, addr)
						first := len(got) == 1
						mu.Unlock()
						if first {
							return overloadReply(r, 0) == nil
						}
						return r.ReplyCursor("db.c", 0, true) == nil
					}))
				}
				op := findOp()
				op.ReadPref = &readpref.ReadPref{Mode: mode}
				if _, err := env.exec.Execute(ctx10(t), op); err != nil {
					t.Fatal(err)
				}
				for _, c := range cancels {
					c()
				}
				if len(got) != 2 || got[0] == got[1] {
					t.Fatalf("round %d: attempts went to %v; the retry must avoid the overloaded server", round, got)
				}
			}
		})
	}
}

func TestOverloadRetryKeepsPinnedGetMore(t *testing.T) {
	srv, env := replicaSet(t)
	(&clock{jitter: 0}).install(env.exec)
	var n atomic.Int64
	srv.Autorespond(blackpipe.Command("getMore"), func(r *blackpipe.Request) bool {
		if n.Add(1) < 3 {
			return overloadReply(r, 0) == nil
		}
		id, _ := r.Command.Lookup("getMore").AsInt64OK()
		return r.ReplyCursor("db.c", id, false, bson.D{{Key: "x", Value: 1}}) == nil
	})
	server, err := env.topo.SelectServer(ctx10(t), topology.WriteSelector(), nil)
	if err != nil {
		t.Fatal(err)
	}
	server.Dec()
	op := &exec.Operation{DB: "db", Command: bson.D{{Key: "getMore", Value: int64(42)}, {Key: "collection", Value: "c"}}, Server: server}
	res, err := env.exec.Execute(ctx10(t), op)
	if err != nil {
		t.Fatal(err)
	}
	if id := res.Reply.Lookup("cursor", "id").Int64(); id != 42 || n.Load() != 3 || res.Server != server {
		t.Fatalf("cursor %d after %d getMores on %v", id, n.Load(), res.Server)
	}
	for _, s := range commandEvents[*event.CommandStartedEvent](env) {
		if s.Command.Lookup("getMore").Int64() != 42 {
			t.Errorf("getMore for cursor %v", s.Command.Lookup("getMore"))
		}
	}
}

// A server shedding new connections closes them before the handshake: the
// client sees an overload-labelled network error, backs off and retries,
// and neither marks the server Unknown nor clears its pool.
func TestConnectionEstablishmentOverloadRetried(t *testing.T) {
	srv, env := replicaSet(t)
	clk := &clock{jitter: 0.5}
	clk.install(env.exec)
	var rs retries
	rs.attach(env.exec)
	s, err := env.topo.SelectServer(ctx10(t), topology.WriteSelector(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Dec()
	srv.CloseNewConnections(true)
	clk.onWake = func(n int) {
		if n == 2 {
			srv.CloseNewConnections(false)
		}
	}
	autoReply(srv, "insert", bson.D{{Key: "n", Value: 1}})
	if _, err := env.exec.Execute(ctx10(t), insertOp()); err != nil {
		t.Fatal(err)
	}
	evs := rs.all()
	if len(evs) != 2 {
		t.Fatalf("%d retries, want 2", len(evs))
	}
	for _, e := range evs {
		if !mongoerr.IsNetworkError(e.Reason) || !mongoerr.HasErrorLabel(e.Reason, mongoerr.LabelSystemOverloaded) ||
			!mongoerr.HasErrorLabel(e.Reason, mongoerr.LabelRetryable) {
			t.Errorf("retry reason %v, want an overload-labelled network error", e.Reason)
		}
	}
	if got := clk.recorded(); len(got) != 2 || got[0] != 50*time.Millisecond || got[1] != 100*time.Millisecond {
		t.Errorf("backoffs %v", got)
	}
	if g := s.Pool().Generation(); g != 0 {
		t.Errorf("pool cleared (generation %d) by connection shedding", g)
	}
	if k := s.Description().Kind; k != topology.RSPrimary {
		t.Errorf("server marked %v by connection shedding", k)
	}
	if n := len(commandEvents[*event.CommandStartedEvent](env)); n != 1 {
		t.Errorf("%d commands started, want 1 (the failed attempts never sent)", n)
	}
}

// Retryable Writes 1.0 and the Client Backpressure spec: once an overload
// error was seen, retryable write errors are retried up to MaxAdaptiveRetries
// too, without backoff.
func TestOverloadThenRetryableWriteErrors(t *testing.T) {
	srv, env := replicaSet(t)
	clk := &clock{jitter: 1}
	clk.install(env.exec)
	var n atomic.Int64
	srv.Autorespond(blackpipe.Command("insert"), func(r *blackpipe.Request) bool {
		if n.Add(1) == 1 {
			return r.ReplyError(91, "shutting down", mongoerr.LabelRetryable, mongoerr.LabelSystemOverloaded) == nil
		}
		return r.ReplyError(91, "shutting down", mongoerr.LabelRetryable, mongoerr.LabelRetryableWrite) == nil
	})
	_, err := env.exec.Execute(ctx10(t), insertOp())
	if codeOf(err) != 91 || n.Load() != 6 {
		t.Fatalf("error %v after %d attempts, want 6", err, n.Load())
	}
	if got := clk.recorded(); len(got) != 1 || got[0] != 100*time.Millisecond {
		t.Fatalf("backoffs %v: only the overload error backs off", got)
	}
}

// A network error first: the Retryable Writes spec's one retry, which then
// meets an overload error, after which the overload policy governs.
func TestRetryableWriteRetryThenOverload(t *testing.T) {
	srv, env := replicaSet(t)
	clk := &clock{jitter: 1}
	clk.install(env.exec)
	var n atomic.Int64
	srv.Autorespond(blackpipe.Command("insert"), func(r *blackpipe.Request) bool {
		switch n.Add(1) {
		case 1:
			return r.Hangup() == nil
		case 2, 3:
			return overloadReply(r, 0) == nil
		}
		return r.Reply(bson.D{{Key: "n", Value: 1}}) == nil
	})
	if _, err := env.exec.Execute(ctx10(t), insertOp()); err != nil {
		t.Fatal(err)
	}
	// Backoff exponents count every retry: the network retry was i = 0.
	if got := clk.recorded(); n.Load() != 4 || len(got) != 2 || got[0] != 200*time.Millisecond || got[1] != 400*time.Millisecond {
		t.Fatalf("%d attempts, backoffs %v", n.Load(), got)
	}
	txns := map[int64]bool{}
	for _, s := range commandEvents[*event.CommandStartedEvent](env) {
		txns[*s.TxnNumber] = true
	}
	if len(txns) != 1 {
		t.Errorf("txnNumbers %v, want one for all attempts", txns)
	}
}

// MaxAdaptiveRetries 0 disables overload retries but not the one
// retryable-write retry.
func TestNoOverloadRetriesKeepsRetryableWrites(t *testing.T) {
	srv, env := replicaSet(t)
	env.exec.MaxAdaptiveRetries = 0
	var n atomic.Int64
	srv.Autorespond(blackpipe.Command("insert"), func(r *blackpipe.Request) bool {
		if n.Add(1) == 1 {
			return r.Hangup() == nil
		}
		return r.Reply(bson.D{{Key: "n", Value: 1}}) == nil
	})
	if _, err := env.exec.Execute(ctx10(t), insertOp()); err != nil || n.Load() != 2 {
		t.Fatalf("error %v after %d attempts", err, n.Load())
	}
}

func TestOverloadSleepHonoursContext(t *testing.T) {
	srv, env := replicaSet(t)
	env.exec.Jitter = func() float64 { return 1 }
	env.exec.Tokens = backoff.NewTokenBucket(10)
	alwaysOverloaded(srv, "insert", 10_000) // 10 s backoffs
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(50 * time.Millisecond)
		cancel()
	}()
	start := time.Now()
	_, err := env.exec.Execute(ctx, insertOp())
	if codeOf(err) != 462 || time.Since(start) > 5*time.Second {
		t.Fatalf("error %v after %v", err, time.Since(start))
	}
	if got := env.exec.RetryTokens().Tokens(); got != 10 {
		t.Errorf("tokens %v: a retry cancelled during its backoff gives its token back", got)
	}
}

// Retryable writes prose tests 4 and 5: in a sharded cluster the retry of
// any retryable error avoids the mongos that failed, when another exists,
// and goes back to it when it is the only one.
func TestShardedRetryDeprioritizesFailedMongos(t *testing.T) {
	mongos := func() *blackpipe.Server {
		return blackpipe.StartWithOptions(t, blackpipe.Options{Hello: bson.D{{Key: "msg", Value: "isdbgrid"}}})
	}
	failOnce := func(srvs ...*blackpipe.Server) *sync.Map {
		var seen sync.Map // addr → attempts
		var n atomic.Int64
		for _, s := range srvs {
			addr := s.Addr()
			s.Autorespond(blackpipe.Command("insert"), func(r *blackpipe.Request) bool {
				v, _ := seen.LoadOrStore(addr, new(atomic.Int64))
				v.(*atomic.Int64).Add(1)
				if n.Add(1) == 1 {
					return r.ReplyError(6, "host unreachable", mongoerr.LabelRetryableWrite) == nil
				}
				return r.Reply(bson.D{{Key: "n", Value: 1}}) == nil
			})
		}
		return &seen
	}
	waitSharded := func(env *env, n int) {
		deadline := time.Now().Add(5 * time.Second)
		for {
			d := env.topo.Description()
			known := 0
			for _, s := range d.Servers {
				if s.Kind == topology.Mongos {
					known++
				}
			}
			if d.Kind == topology.Sharded && known == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("topology %v", d)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	t.Run("two mongoses", func(t *testing.T) {
		for range 5 {
			a, b := mongos(), mongos()
			env := newEnv(t, topology.Options{Hosts: []string{a.Addr(), b.Addr()}, LocalThreshold: time.Hour})
			waitSharded(env, 2)
			seen := failOnce(a, b)
			if _, err := env.exec.Execute(ctx10(t), insertOp()); err != nil {
				t.Fatal(err)
			}
			started := commandEvents[*event.CommandStartedEvent](env)
			if len(started) != 2 || started[0].ServerAddress == started[1].ServerAddress {
				t.Fatalf("attempts on %v", started)
			}
			n := 0
			seen.Range(func(_, v any) bool { n += int(v.(*atomic.Int64).Load()); return true })
			if n != 2 {
				t.Fatalf("%d inserts", n)
			}
		}
	})
	t.Run("one mongos", func(t *testing.T) {
		a := mongos()
		env := newEnv(t, topology.Options{Hosts: []string{a.Addr()}})
		waitSharded(env, 1)
		failOnce(a)
		if _, err := env.exec.Execute(ctx10(t), insertOp()); err != nil {
			t.Fatal(err)
		}
		started := commandEvents[*event.CommandStartedEvent](env)
		if len(started) != 2 || started[0].ServerAddress != a.Addr() || started[1].ServerAddress != a.Addr() {
			t.Fatalf("attempts %d", len(started))
		}
	})
}

// Retryable Writes spec: when the server selected for the retry no longer
// supports retryable writes, the original error is returned and nothing is
// resent.
func TestRetryServerNoLongerSupportsRetryableWrites(t *testing.T) {
	srv, env := replicaSet(t)
	srv.Autorespond(blackpipe.Command("insert"), func(r *blackpipe.Request) bool {
		// A downgrade: from now on the server reports no sessions.
		srv.UpdateHello(bson.D{{Key: "logicalSessionTimeoutMinutes", Value: nil}})
		return r.ReplyError(91, "shutting down", mongoerr.LabelRetryableWrite) == nil
	})
	_, err := env.exec.Execute(ctx10(t), insertOp())
	if codeOf(err) != 91 {
		t.Fatalf("error %v, want the original 91", err)
	}
	if n := len(commandEvents[*event.CommandStartedEvent](env)); n != 1 {
		t.Fatalf("%d attempts, want 1", n)
	}
}
