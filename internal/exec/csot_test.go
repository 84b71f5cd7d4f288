package exec_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/blackpipe"
	"github.com/sturdy-go/sturdy/event"
	"github.com/sturdy-go/sturdy/internal/csot"
	"github.com/sturdy-go/sturdy/internal/exec"
	"github.com/sturdy-go/sturdy/internal/topology"
	"github.com/sturdy-go/sturdy/mongoerr"
)

// slowHelloReplicaSet starts a one-member blackpipe replica set whose hellos
// take rtt, and waits until the client's RTT monitor knows the server's
// minimum round trip is at least rtt.
func slowHelloReplicaSet(t *testing.T, rtt time.Duration) (*blackpipe.Server, *env) {
	t.Helper()
	srv := blackpipe.StartReplicaSet(t, "rs0", 1, blackpipe.Options{})[0]
	srv.Autorespond(blackpipe.Func(func(r *blackpipe.Request) bool { return r.Name == "hello" || r.Name == "isMaster" }),
		func(r *blackpipe.Request) bool {
			select { // then the default responder answers
			case <-time.After(rtt):
			case <-r.Context().Done():
			}
			return false
		})
	e := newEnv(t, topology.Options{Hosts: []string{srv.Addr()}, SetName: "rs0",
		HeartbeatInterval: 50 * time.Millisecond, ServerMonitoringMode: "poll"})
	deadline := time.Now().Add(10 * time.Second)
	for {
		d := e.topo.Description()
		if len(d.Servers) == 1 && d.Servers[0].MinRTT >= rtt && d.Servers[0].Kind == topology.RSPrimary {
			return srv, e
		}
		if time.Now().After(deadline) {
			t.Fatalf("the minimum RTT never reached %v: %+v", rtt, d.Servers)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// CSOT "Command Execution": maxTimeMS is the time left less the server's
// minimum RTT, and a command the time left cannot carry to the server and
// back is not sent.
func TestCSOTMaxTimeMSIsTimeLeftLessMinRTT(t *testing.T) {
	const rtt = 80 * time.Millisecond
	srv, e := slowHelloReplicaSet(t, rtt)
	var maxTime atomic.Int64
	srv.Autorespond(blackpipe.Command("find"), func(r *blackpipe.Request) bool {
		doc, _ := r.Doc()
		for _, el := range doc {
			if el.Key == "maxTimeMS" {
				n, _ := el.Value.(int64)
				maxTime.Store(n)
			}
		}
		_ = r.ReplyCursor("db.c", 0, true)
		return true
	})

	const timeout = 2 * time.Second
	ctx, cancel := csot.StartWith(context.Background(), timeout, false)
	defer cancel()
	if _, err := e.exec.Execute(ctx, &exec.Operation{DB: "db", Command: bson.D{{Key: "find", Value: "c"}}}); err != nil {
		t.Fatal(err)
	}
	got := time.Duration(maxTime.Load()) * time.Millisecond
	if got > timeout-rtt || got < timeout-rtt-time.Second {
		t.Errorf("maxTimeMS %v; want the %v timeout less the %v minimum RTT (less the time spent before sending)", got, timeout, rtt)
	}

	// 50 ms left cannot cover an 80 ms round trip: nothing is sent.
	before := len(e.rec.all())
	ctx2, cancel2 := csot.StartWith(context.Background(), 50*time.Millisecond, false)
	defer cancel2()
	_, err := e.exec.Execute(ctx2, &exec.Operation{DB: "db", Command: bson.D{{Key: "find", Value: "c"}}})
	var te *mongoerr.TimeoutError
	if !errors.As(err, &te) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v (%T), want a TimeoutError that is a context.DeadlineExceeded", err, err)
	}
	for _, ev := range e.rec.all()[before:] {
		if s, ok := ev.(*event.CommandStartedEvent); ok && s.CommandName == "find" {
			t.Errorf("find was sent with 50 ms left and an 80 ms minimum RTT")
		}
	}
}

// CSOT "Retryability": under a timeout a retryable read is retried until it
// succeeds or the deadline passes; without one it is retried once.
func TestCSOTRetriesUntilTheDeadline(t *testing.T) {
	srv, e := replicaSet(t)
	var fails atomic.Int64
	srv.Autorespond(blackpipe.Command("find"), func(r *blackpipe.Request) bool {
		if fails.Add(-1) >= 0 {
			_ = r.ReplyError(262, "exceeded time limit") // ExceededTimeLimit: a retryable read error
			return true
		}
		_ = r.ReplyCursor("db.c", 0, true)
		return true
	})
	find := func() *exec.Operation {
		return &exec.Operation{DB: "db", Command: bson.D{{Key: "find", Value: "c"}}, Flags: exec.RetryableRead}
	}
	finds := func() int {
		n := 0
		for _, ev := range e.rec.all() {
			if s, ok := ev.(*event.CommandStartedEvent); ok && s.CommandName == "find" {
				n++
			}
		}
		return n
	}

	// Without a timeout: one retry, then the error.
	fails.Store(5)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.exec.Execute(ctx, find()); err == nil {
		t.Fatal("five failures overcame with one retry")
	}
	if n := finds(); n != 2 {
		t.Fatalf("%d attempts without a timeout, want 2", n)
	}

	// With one: five failures, then success on the sixth attempt.
	fails.Store(5)
	cctx, ccancel := csot.StartWith(context.Background(), 5*time.Second, false)
	defer ccancel()
	if _, err := e.exec.Execute(cctx, find()); err != nil {
		t.Fatalf("under a 5 s timeout: %v", err)
	}
	if n := finds() - 2; n != 6 {
		t.Fatalf("%d attempts under a timeout, want 6", n)
	}

	// Failing for ever: retried until the deadline, then a timeout error
	// wrapping the last error met: the server's ExceededTimeLimit, or the
	// read the deadline cut short.
	fails.Store(1 << 40)
	start := time.Now()
	tctx, tcancel := csot.StartWith(context.Background(), 300*time.Millisecond, false)
	defer tcancel()
	_, err := e.exec.Execute(tctx, find())
	var ce *mongoerr.CommandError
	var te *mongoerr.TimeoutError
	if !errors.As(err, &te) || !errors.Is(err, context.DeadlineExceeded) ||
		!(errors.As(err, &ce) && ce.Code == 262 || mongoerr.IsNetworkError(err)) {
		t.Fatalf("got %v, want a timeout wrapping the last ExceededTimeLimit or network timeout", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the 300 ms operation took %v", took)
	}
	if n := finds() - 8; n < 3 {
		t.Errorf("only %d attempts in 300 ms", n)
	}
}
