package pool

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sturdy-go/sturdy/blackpipe"
	"github.com/sturdy-go/sturdy/mongoerr"
)

// A server that drops new connections (as an overloaded server sheds
// them) makes the pool wait before dialing again: with jitter 1 the second
// dial starts no sooner than 100 ms after the first failed, the third no
// sooner than 200 ms after the second, and a success ends the backoff.
func TestEstablishBackoffAfterOverloadLikeFailures(t *testing.T) {
	var (
		mu       sync.Mutex
		accepted []time.Time
		drop     atomic.Int32
	)
	drop.Store(2)
	srv := blackpipe.StartWithOptions(t, blackpipe.Options{AcceptConn: func(*blackpipe.Conn) bool {
		mu.Lock()
		accepted = append(accepted, time.Now())
		mu.Unlock()
		return drop.Add(-1) < 0
	}})
	p, _ := newPool(t, srv.Addr(), Options{Jitter: func() float64 { return 1 }})
	p.Ready()

	for i := 0; i < 2; i++ {
		_, err := p.CheckOut(ctxFor(t, 5*time.Second))
		if err == nil || !mongoerr.HasErrorLabel(err, mongoerr.LabelSystemOverloaded) {
			t.Fatalf("check-out %d against a shedding server: %v, want an error labelled SystemOverloadedError", i, err)
		}
	}
	c := mustCheckOut(t, p) // waits out the second backoff, then connects
	p.CheckIn(c)

	mu.Lock()
	at := append([]time.Time(nil), accepted...)
	mu.Unlock()
	if len(at) != 3 {
		t.Fatalf("%d connections reached the server, want 3", len(at))
	}
	// Failures are noticed after the accept; the gaps can only be longer.
	if gap := at[1].Sub(at[0]); gap < 100*time.Millisecond {
		t.Errorf("second dial %v after the first; the backoff is 100 ms", gap)
	}
	if gap := at[2].Sub(at[1]); gap < 200*time.Millisecond {
		t.Errorf("third dial %v after the second; the backoff is 200 ms", gap)
	}
	p.mu.Lock()
	failures, backingOff := p.establishFailures, p.backingOffLocked()
	p.mu.Unlock()
	if failures != 0 || backingOff {
		t.Errorf("after a success: %d failures, backing off %v", failures, backingOff)
	}
}

// Errors overload cannot cause do not start a backoff, and the option
// turns it off.
func TestEstablishBackoffOnlyForOverloadLikeErrors(t *testing.T) {
	srv := blackpipe.StartWithOptions(t, blackpipe.Options{AcceptConn: func(*blackpipe.Conn) bool { return false }})
	p, _ := newPool(t, srv.Addr(), Options{NoEstablishBackoff: true})
	p.Ready()
	for i := 0; i < 3; i++ {
		if _, err := p.CheckOut(ctxFor(t, 5*time.Second)); err == nil {
			t.Fatal("check-out against a server that drops connections succeeded")
		}
	}
	p.mu.Lock()
	backingOff := p.backingOffLocked()
	p.mu.Unlock()
	if backingOff {
		t.Error("NoEstablishBackoff: the pool backs off")
	}

	q, _ := newPool(t, "127.0.0.1:1", Options{}) // connection refused: not overload
	q.Ready()
	_, err := q.CheckOut(ctxFor(t, 5*time.Second))
	if err == nil {
		t.Fatal("check-out to a closed port succeeded")
	}
	q.mu.Lock()
	backingOff = q.backingOffLocked()
	q.mu.Unlock()
	if mongoerr.HasErrorLabel(err, mongoerr.LabelSystemOverloaded) != backingOff {
		t.Errorf("backing off %v after %v", backingOff, err)
	}
	var ne *mongoerr.NetworkError
	if !errors.As(err, &ne) {
		t.Errorf("dial error %T: %v", err, err)
	}
}
