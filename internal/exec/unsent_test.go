package exec_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/blackpipe"
	"github.com/sturdy-go/sturdy/event"
	"github.com/sturdy-go/sturdy/internal/exec"
	"github.com/sturdy-go/sturdy/internal/pool"
	"github.com/sturdy-go/sturdy/internal/topology"
	"github.com/sturdy-go/sturdy/mongoerr"
)

// unsentEnv is a one-member blackpipe replica set, discovered, whose
// monitor would not check again for a minute on its own: what happens to
// the pool is up to the test and to the executor.
func unsentEnv(t *testing.T) (*blackpipe.Server, *env, *topology.Server) {
	t.Helper()
	srv := blackpipe.StartReplicaSet(t, "rs0", 1, blackpipe.Options{})[0]
	env := newEnv(t, topology.Options{Hosts: []string{srv.Addr()}, SetName: "rs0",
		HeartbeatInterval: time.Minute, MinHeartbeatInterval: time.Minute})
	s, err := env.topo.SelectServer(ctx10(t), topology.WriteSelector(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Dec()
	return srv, env, s
}

// An attempt whose check-out met a cleared pool never reached the server:
// it does not use up the write's one retry. Here the first attempt meets
// the cleared pool, the second is sent and its connection is closed (the
// one retry), and the third succeeds; the server saw two inserts with the
// same txnNumber. The pool is made ready again by the server being
// rediscovered after the network error, without waiting the minute of
// minHeartbeatFrequency the test configured.
func TestAttemptThatNeverReachedTheServerDoesNotUseTheRetry(t *testing.T) {
	srv, env, s := unsentEnv(t)
	var (
		mu  sync.Mutex
		evs []*event.RetryEvent
	)
	env.exec.Monitor.Retry = func(_ context.Context, e *event.RetryEvent) {
		mu.Lock()
		evs = append(evs, e)
		first := len(evs) == 1
		mu.Unlock()
		if first {
			s.Pool().Ready() // as a monitor check would: the next check-out succeeds
		}
	}
	s.Pool().Clear(errors.New("cleared by the test"), false)

	ch := executeAsync(env.exec, insertOp())
	first := receive(t, srv, "insert")
	_ = first.Hangup()
	second := receive(t, srv, "insert")
	if a, b := first.Command.Lookup("txnNumber"), second.Command.Lookup("txnNumber"); !a.Equal(b) {
		t.Errorf("txnNumbers %v then %v", a, b)
	}
	_ = second.Reply(bson.D{{Key: "n", Value: 1}})
	if o := wait(t, ch); o.err != nil {
		t.Fatalf("the write failed: %v", o.err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(evs) != 2 {
		t.Fatalf("%d retry events, want 2", len(evs))
	}
	var cleared *mongoerr.PoolClearedError
	if !errors.As(evs[0].Reason, &cleared) || evs[0].Attempt != 1 || evs[0].TxnNumber != nil {
		t.Errorf("first retry %+v: want attempt 1 after the cleared pool, before any txnNumber", evs[0])
	}
	if !mongoerr.IsNetworkError(evs[1].Reason) || evs[1].Attempt != 2 {
		t.Errorf("second retry %+v: want attempt 2 after the network error", evs[1])
	}
	// The free retry took no token; the counted one took one and gave it
	// back with the success (+0.1, capped at the capacity).
	if got := env.exec.RetryTokens().Tokens(); got != 1000 {
		t.Errorf("tokens %v, want 1000", got)
	}
}

// Free retries are bounded by MaxUnsentRetries: a pool that stays paused
// while its server still looks selectable fails the operation after that
// many, with the pool's error, and nothing is sent.
func TestUnsentRetriesBounded(t *testing.T) {
	srv, env, s := unsentEnv(t)
	inserts := autoReply(srv, "insert", bson.D{{Key: "n", Value: 1}})
	var rs retries
	rs.attach(env.exec)
	s.Pool().Clear(errors.New("cleared by the test"), false)

	_, err := env.exec.Execute(ctx10(t), insertOp())
	var cleared *mongoerr.PoolClearedError
	if !errors.As(err, &cleared) {
		t.Fatalf("error %v, want the PoolClearedError", err)
	}
	if n := len(rs.all()); n != exec.MaxUnsentRetries {
		t.Errorf("%d retries, want MaxUnsentRetries = %d", n, exec.MaxUnsentRetries)
	}
	if inserts.len() != 0 {
		t.Errorf("%d inserts reached the server", inserts.len())
	}
}

// Without a deadline, free retries stop once ServerSelectionTimeout has
// passed since the operation started, by the injected clock.
func TestUnsentRetriesStopAfterServerSelectionTimeout(t *testing.T) {
	_, env, s := unsentEnv(t)
	var rs retries
	rs.attach(env.exec)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	calls := 0
	env.exec.Now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls <= 3 {
			return start // the operation's start and the first two retries
		}
		return start.Add(env.topo.Options().ServerSelectionTimeout)
	}
	s.Pool().Clear(errors.New("cleared by the test"), false)

	_, err := env.exec.Execute(context.Background(), insertOp())
	var cleared *mongoerr.PoolClearedError
	if !errors.As(err, &cleared) {
		t.Fatalf("error %v, want the PoolClearedError", err)
	}
	if n := len(rs.all()); n != 2 {
		t.Errorf("%d retries, want 2 before the clock reached ServerSelectionTimeout", n)
	}
}

// A read with retryReads off gets no free retry either: the option turns
// every retry off.
func TestUnsentRetryNeedsRetryOption(t *testing.T) {
	_, env, s := unsentEnv(t)
	env.exec.RetryReads = false
	var rs retries
	rs.attach(env.exec)
	s.Pool().Clear(errors.New("cleared by the test"), false)
	_, err := env.exec.Execute(ctx10(t), findOp())
	var cleared *mongoerr.PoolClearedError
	if !errors.As(err, &cleared) {
		t.Fatalf("error %v, want the PoolClearedError", err)
	}
	if n := len(rs.all()); n != 0 {
		t.Errorf("%d retries with retryReads off", n)
	}
}

// A retryable write whose server is marked Unknown after selection (here:
// a NotWritablePrimary another operation met) is not sent there: it
// selects again, for free, and is sent once the server is rediscovered.
// The write waits for the pool's only connection, held by the test, while
// the error arrives; the server's rediscovery (its next hello) is held
// back until the write has found the server no longer writable.
func TestWriteNotSentToServerThatStoppedBeingWritable(t *testing.T) {
	srv := blackpipe.StartReplicaSet(t, "rs0", 1, blackpipe.Options{})[0]
	env := newEnv(t, topology.Options{Hosts: []string{srv.Addr()}, SetName: "rs0",
		HeartbeatInterval: time.Minute, MinHeartbeatInterval: time.Minute, Pool: pool.Options{MaxPoolSize: 1, MaxConnecting: 2}})
	s, err := env.topo.SelectServer(ctx10(t), topology.WriteSelector(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Dec()
	var rs retries
	rs.attach(env.exec)
	held, err := s.Pool().CheckOut(ctx10(t))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	writableWhenSent := []bool{}
	srv.Autorespond(blackpipe.Command("insert"), func(r *blackpipe.Request) bool {
		mu.Lock()
		writableWhenSent = append(writableWhenSent, s.Writable())
		mu.Unlock()
		return r.Reply(bson.D{{Key: "n", Value: 1}}) == nil
	})

	gate := make(chan struct{})
	var openGate sync.Once
	t.Cleanup(func() { openGate.Do(func() { close(gate) }) })
	srv.Autorespond(blackpipe.Command("hello"), func(*blackpipe.Request) bool {
		<-gate
		return false // answered by the replica set's hello
	})

	ch := executeAsync(env.exec, insertOp())
	deadline := time.Now().Add(10 * time.Second)
	for s.Pool().Stats().Waiting != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the write never waited for a connection")
		}
		time.Sleep(time.Millisecond)
	}
	s.ProcessError(&mongoerr.CommandError{Code: 10107, Name: "NotWritablePrimary", Message: "not primary"}, s.Pool().Generation(), false)
	if s.Writable() {
		t.Fatal("the server is still writable after NotWritablePrimary")
	}
	s.Pool().CheckIn(held)
	for len(rs.all()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the write was not retried")
		}
		time.Sleep(time.Millisecond)
	}
	openGate.Do(func() { close(gate) })
	if o := wait(t, ch); o.err != nil {
		t.Fatalf("the write failed: %v", o.err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(writableWhenSent) != 1 || !writableWhenSent[0] {
		t.Errorf("inserts sent while the server was writable: %v, want [true]", writableWhenSent)
	}
	evs := rs.all()
	if len(evs) != 1 || !errors.Is(evs[0].Reason, exec.ErrServerNoLongerWritable) {
		t.Fatalf("retries %+v, want one after ErrServerNoLongerWritable", evs)
	}
}
