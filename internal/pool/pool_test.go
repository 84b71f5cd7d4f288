package pool

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/blackpipe"
	"github.com/sturdy-go/sturdy/event"
	"github.com/sturdy-go/sturdy/internal/conn"
	"github.com/sturdy-go/sturdy/mongoerr"
)

// newPool starts a pool against addr, recording its events, and closes it
// when the test ends.
func newPool(t *testing.T, addr string, o Options) (*Pool, *recorder) {
	t.Helper()
	rec := newRecorder()
	o.Monitor = &event.Monitor{Pool: rec.add}
	if o.MaxConnecting == 0 {
		o.MaxConnecting = 2 // the client's default; New takes 0 as no cap
	}
	p := New(addr, o)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("close pool: %v", err)
		}
	})
	return p, rec
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func mustCheckOut(t *testing.T, p *Pool) *conn.Conn {
	t.Helper()
	c, err := p.CheckOut(ctxFor(t, 5*time.Second))
	if err != nil {
		t.Fatalf("CheckOut: %v", err)
	}
	return c
}

// eventsOf returns the recorded events of type typ.
func eventsOf(r *recorder, typ event.PoolEventType) []event.PoolEvent {
	var out []event.PoolEvent
	for _, e := range r.snapshot() {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// eventually polls cond until it holds or 5 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// helloDelay makes every hello wait d before the default answer, and
// reports the most hellos in progress at once.
func helloDelay(d time.Duration) (blackpipe.Handler, *atomic.Int64) {
	var cur, peak atomic.Int64
	return func(r *blackpipe.Request) bool {
		if !strings.EqualFold(r.Name, "hello") && !strings.EqualFold(r.Name, "isMaster") {
			return false
		}
		n := cur.Add(1)
		for {
			old := peak.Load()
			if n <= old || peak.CompareAndSwap(old, n) {
				break
			}
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
		}
		t.Stop()
		cur.Add(-1)
		return false
	}, &peak
}

func TestCheckOutPausedPoolFailsWithRetryableClearedError(t *testing.T) {
	srv := blackpipe.Start(t)
	p, rec := newPool(t, srv.Addr(), Options{})

	_, err := p.CheckOut(ctxFor(t, time.Second))
	var pce *mongoerr.PoolClearedError
	if !errors.As(err, &pce) {
		t.Fatalf("CheckOut on a new (paused) pool: %v, want *PoolClearedError", err)
	}
	if !mongoerr.HasErrorLabel(err, mongoerr.LabelRetryableWrite) {
		t.Error("PoolClearedError lacks RetryableWriteError")
	}

	p.Ready()
	c := mustCheckOut(t, p)
	cause := &mongoerr.NetworkError{Addr: srv.Addr(), Op: "read", Err: errors.New("connection reset")}
	p.Clear(cause, false)
	_, err = p.CheckOut(ctxFor(t, time.Second))
	if !errors.As(err, &pce) || pce.Cause != cause || !errors.Is(err, cause) {
		t.Fatalf("CheckOut after Clear: %v, want *PoolClearedError wrapping the cause", err)
	}
	if !mongoerr.HasErrorLabel(err, mongoerr.LabelRetryableWrite) {
		t.Error("PoolClearedError lacks RetryableWriteError")
	}
	fails := eventsOf(rec, event.ConnectionCheckOutFailed)
	if len(fails) != 2 || fails[0].Reason != event.ReasonConnectionError || fails[1].Reason != event.ReasonConnectionError {
		t.Errorf("CheckOutFailed events %+v, want two with reason connectionError", fails)
	}
	if cleared := eventsOf(rec, event.PoolCleared); len(cleared) != 1 || cleared[0].Error != cause {
		t.Errorf("PoolCleared events %+v, want one carrying the cause", cleared)
	}
	p.CheckIn(c)
}

func TestWaitQueueIsFIFO(t *testing.T) {
	srv := blackpipe.Start(t)
	p, _ := newPool(t, srv.Addr(), Options{MaxPoolSize: 1})
	p.Ready()
	held := mustCheckOut(t, p)

	const n = 8
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := p.CheckOut(context.Background())
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			p.CheckIn(c)
		}()
		// Enqueue strictly one after another.
		eventually(t, "waiter to queue", func() bool { return p.Stats().Waiting == i+1 })
	}
	p.CheckIn(held)
	wg.Wait()
	for i, got := range order {
		if got != i {
			t.Fatalf("served in order %v, want 0..%d", order, n-1)
		}
	}
	if len(order) != n {
		t.Fatalf("served %d waiters, want %d", len(order), n)
	}
}

func TestCheckOutContextTimeout(t *testing.T) {
	srv := blackpipe.Start(t)
	p, rec := newPool(t, srv.Addr(), Options{MaxPoolSize: 1})
	p.Ready()
	held := mustCheckOut(t, p)
	defer p.CheckIn(held)

	start := time.Now()
	_, err := p.CheckOut(ctxFor(t, 50*time.Millisecond))
	var wqe *mongoerr.WaitQueueTimeoutError
	if !errors.As(err, &wqe) || !errors.Is(err, context.DeadlineExceeded) || !mongoerr.IsTimeout(err) {
		t.Fatalf("CheckOut: %v, want *WaitQueueTimeoutError wrapping DeadlineExceeded", err)
	}
	if el := time.Since(start); el < 45*time.Millisecond || el > 2*time.Second {
		t.Errorf("CheckOut gave up after %v, want about 50ms", el)
	}
	if st := p.Stats(); st.Waiting != 0 {
		t.Errorf("timed-out waiter still queued: %+v", st)
	}
	fails := eventsOf(rec, event.ConnectionCheckOutFailed)
	if len(fails) != 1 || fails[0].Reason != event.ReasonTimeout || fails[0].Duration < 45*time.Millisecond {
		t.Errorf("CheckOutFailed events %+v, want one with reason timeout and its duration", fails)
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	_, err = p.CheckOut(ctx)
	if !errors.As(err, &wqe) || !errors.Is(err, context.Canceled) || wqe.Timeout() {
		t.Fatalf("CheckOut with canceled ctx: %v, want *WaitQueueTimeoutError wrapping Canceled", err)
	}
}

func TestCheckOutTimeoutDuringDialKeepsTheConnection(t *testing.T) {
	h, _ := helloDelay(300 * time.Millisecond)
	srv := blackpipe.StartWithOptions(t, blackpipe.Options{Handler: h})
	p, rec := newPool(t, srv.Addr(), Options{})
	p.Ready()

	start := time.Now()
	_, err := p.CheckOut(ctxFor(t, 50*time.Millisecond))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("CheckOut: %v, want a deadline error", err)
	}
	if el := time.Since(start); el > 250*time.Millisecond {
		t.Errorf("CheckOut waited %v for a slow handshake despite a 50ms deadline", el)
	}
	// The handshake completes in the background and the connection is pooled.
	eventually(t, "connection to become idle", func() bool { return p.Stats().Idle == 1 })
	c := mustCheckOut(t, p)
	defer p.CheckIn(c)
	if n := len(eventsOf(rec, event.ConnectionCreated)); n != 1 {
		t.Errorf("%d connections created, want the first one reused", n)
	}
}

func TestMaxConnectingLimitsConcurrentHandshakes(t *testing.T) {
	for _, maxConnecting := range []int{-1, 2, 3} { // -1: no cap (0 in Options)
		want := maxConnecting
		if want < 0 {
			want = 8 // every check-out below dials at once
		}
		h, peak := helloDelay(80 * time.Millisecond)
		srv := blackpipe.StartWithOptions(t, blackpipe.Options{Handler: h})
		p, _ := newPool(t, srv.Addr(), Options{MaxConnecting: maxConnecting})
		p.Ready()
		var wg sync.WaitGroup
		conns := make(chan *conn.Conn, 8)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := p.CheckOut(ctxFor(t, 5*time.Second))
				if err != nil {
					t.Error(err)
					return
				}
				conns <- c
			}()
		}
		eventually(t, "handshakes to start", func() bool { return peak.Load() >= int64(want) })
		if st := p.Stats(); st.Pending > want {
			t.Errorf("maxConnecting %d: %d pending", maxConnecting, st.Pending)
		}
		wg.Wait()
		close(conns)
		for c := range conns {
			p.CheckIn(c)
		}
		if got := peak.Load(); got != int64(want) {
			t.Errorf("maxConnecting %d: %d handshakes at once, want %d", maxConnecting, got, want)
		}
	}
}

func TestClearDiscardsOlderGenerations(t *testing.T) {
	srv := blackpipe.Start(t)
	p, rec := newPool(t, srv.Addr(), Options{})
	p.Ready()
	a := mustCheckOut(t, p)
	b := mustCheckOut(t, p)
	p.CheckIn(b)
	if a.Generation() != 0 || p.Generation() != 0 {
		t.Fatalf("generations before clear: conn %d, pool %d", a.Generation(), p.Generation())
	}

	p.Clear(errors.New("boom"), false)
	if p.Generation() != 1 {
		t.Fatalf("pool generation %d after one clear, want 1", p.Generation())
	}
	// The idle connection is closed at once, the in-use one is left alone.
	eventually(t, "idle connection closed", func() bool { return b.Closed() })
	if a.Closed() {
		t.Fatal("Clear without interrupt closed an in-use connection")
	}
	p.Ready()
	p.CheckIn(a)
	if !a.Closed() {
		t.Fatal("stale connection was pooled on check-in")
	}
	c := mustCheckOut(t, p)
	defer p.CheckIn(c)
	if c == a || c == b || c.Generation() != 1 {
		t.Fatalf("checked out %p gen %d, want a new connection of generation 1", c, c.Generation())
	}
	var stale int
	for _, e := range eventsOf(rec, event.ConnectionClosed) {
		if e.Reason == event.ReasonStale {
			stale++
		}
	}
	if stale != 2 {
		t.Errorf("%d ConnectionClosed(stale) events, want 2", stale)
	}
	if st := p.Stats(); st.Total != 1 || st.InUse != 1 {
		t.Errorf("stats %+v, want one connection in use", st)
	}
}

func TestClearInterruptsInUseConnections(t *testing.T) {
	srv := blackpipe.Start(t)
	p, rec := newPool(t, srv.Addr(), Options{})
	p.Ready()
	c := mustCheckOut(t, p)

	// A round trip blocked on the server is aborted by the interrupting clear.
	errc := make(chan error, 1)
	go func() {
		_, err := c.RoundTrip(context.Background(), "admin", bson.D{{Key: "slow", Value: 1}})
		errc <- err
	}()
	r, err := srv.Receive(ctxFor(t, 5*time.Second), blackpipe.Command("slow"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.NoReply()
	p.Clear(errors.New("monitor timed out"), true)
	select {
	case err := <-errc:
		if !mongoerr.IsNetworkError(err) {
			t.Errorf("interrupted round trip: %v, want a network error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("in-use connection not interrupted")
	}
	if st := p.Stats(); st.Total != 0 {
		t.Errorf("stats after interrupt %+v, want no connections", st)
	}
	p.CheckIn(c)
	if n := len(eventsOf(rec, event.ConnectionClosed)); n != 1 {
		t.Errorf("%d ConnectionClosed events, want exactly 1 (none again on check-in)", n)
	}
	if n := len(eventsOf(rec, event.ConnectionCheckedIn)); n != 1 {
		t.Errorf("%d ConnectionCheckedIn events, want 1", n)
	}
	if cl := eventsOf(rec, event.PoolCleared); len(cl) != 1 || !cl[0].Interruptible {
		t.Errorf("PoolCleared events %+v, want one with Interruptible", cl)
	}
}

func TestIdleConnectionsExpire(t *testing.T) {
	srv := blackpipe.Start(t)
	p, rec := newPool(t, srv.Addr(), Options{MaxIdleTime: 30 * time.Millisecond, BackgroundInterval: 5 * time.Millisecond})
	p.Ready()
	c := mustCheckOut(t, p)
	p.CheckIn(c)
	// The background goroutine closes it without any check-out.
	eventually(t, "idle connection to be closed", func() bool { return c.Closed() })
	closed := eventsOf(rec, event.ConnectionClosed)
	if len(closed) != 1 || closed[0].Reason != event.ReasonIdle {
		t.Fatalf("ConnectionClosed events %+v, want one with reason idle", closed)
	}
	if st := p.Stats(); st.Total != 0 {
		t.Errorf("stats %+v, want empty", st)
	}

	// Without the background goroutine, check-out discards it.
	p2, rec2 := newPool(t, srv.Addr(), Options{MaxIdleTime: 20 * time.Millisecond, BackgroundInterval: 0})
	p2.Ready()
	c1 := mustCheckOut(t, p2)
	p2.CheckIn(c1)
	c2 := mustCheckOut(t, p2)
	if c2 != c1 {
		t.Fatal("a fresh idle connection was not reused")
	}
	p2.CheckIn(c2)
	time.Sleep(40 * time.Millisecond)
	c3 := mustCheckOut(t, p2)
	defer p2.CheckIn(c3)
	if c3 == c1 || !c1.Closed() {
		t.Fatal("an expired idle connection was reused")
	}
	closed = eventsOf(rec2, event.ConnectionClosed)
	if len(closed) != 1 || closed[0].Reason != event.ReasonIdle {
		t.Fatalf("ConnectionClosed events %+v, want one with reason idle", closed)
	}
}

func TestIdleConnectionsReusedLIFO(t *testing.T) {
	srv := blackpipe.Start(t)
	p, _ := newPool(t, srv.Addr(), Options{})
	p.Ready()
	a, b, c := mustCheckOut(t, p), mustCheckOut(t, p), mustCheckOut(t, p)
	p.CheckIn(a)
	p.CheckIn(c)
	p.CheckIn(b)
	for _, want := range []*conn.Conn{b, c, a} {
		if got := mustCheckOut(t, p); got != want {
			t.Fatalf("checked out conn %d, want %d (last in, first out)", got.ID(), want.ID())
		}
	}
}

func TestMinPoolSizeIsMaintained(t *testing.T) {
	srv := blackpipe.Start(t)
	p, _ := newPool(t, srv.Addr(), Options{MinPoolSize: 3, BackgroundInterval: 5 * time.Millisecond})
	time.Sleep(50 * time.Millisecond)
	if st := p.Stats(); st.Total != 0 || len(srv.Connections()) != 0 {
		t.Fatalf("paused pool populated: %+v", st)
	}
	p.Ready()
	eventually(t, "3 idle connections", func() bool { return p.Stats().Idle == 3 })
	if n := len(srv.Connections()); n != 3 {
		t.Errorf("server sees %d connections, want 3", n)
	}

	// A connection lost while in use is replaced.
	c := mustCheckOut(t, p)
	_ = c.Close()
	p.CheckIn(c)
	eventually(t, "pool back to 3", func() bool { st := p.Stats(); return st.Idle == 3 && st.Total == 3 })

	// Clearing pauses population; Ready resumes it.
	p.Clear(errors.New("boom"), false)
	time.Sleep(30 * time.Millisecond)
	if st := p.Stats(); st.Total != 0 {
		t.Fatalf("paused pool after clear: %+v, want empty", st)
	}
	p.Ready()
	eventually(t, "3 new idle connections", func() bool { return p.Stats().Idle == 3 })
}

func TestPopulateErrorGoesToEstablishError(t *testing.T) {
	srv := blackpipe.StartWithOptions(t, blackpipe.Options{Handler: func(r *blackpipe.Request) bool {
		if !strings.EqualFold(r.Name, "hello") {
			return false
		}
		_ = r.Hangup()
		return true
	}})
	got := make(chan uint64, 10)
	p, rec := newPool(t, srv.Addr(), Options{MinPoolSize: 1, BackgroundInterval: 5 * time.Millisecond,
		EstablishError: func(err error, gen uint64) {
			if !mongoerr.IsNetworkError(err) {
				t.Errorf("EstablishError got %v, want a network error", err)
			}
			select {
			case got <- gen:
			default:
			}
		}})
	p.Ready()
	select {
	case gen := <-got:
		if gen != 0 {
			t.Errorf("generation %d, want 0", gen)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("EstablishError not called")
	}
	eventually(t, "ConnectionClosed event", func() bool { return len(eventsOf(rec, event.ConnectionClosed)) > 0 })
	if e := eventsOf(rec, event.ConnectionClosed)[0]; e.Reason != event.ReasonError {
		t.Errorf("ConnectionClosed reason %q, want error", e.Reason)
	}
}

func TestDialErrorIsReturnedWithBackpressureLabels(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now

	p, rec := newPool(t, addr, Options{})
	p.Ready()
	_, err = p.CheckOut(ctxFor(t, 5*time.Second))
	var ne *mongoerr.NetworkError
	if !errors.As(err, &ne) {
		t.Fatalf("CheckOut: %v, want a *NetworkError", err)
	}
	if !mongoerr.HasErrorLabel(err, mongoerr.LabelSystemOverloaded) || !mongoerr.HasErrorLabel(err, mongoerr.LabelRetryable) {
		t.Errorf("connect error labels %v, want SystemOverloadedError and RetryableError", ne.Labels)
	}
	var types []event.PoolEventType
	var reasons []string
	for _, e := range rec.snapshot() {
		switch e.Type {
		case event.ConnectionClosed, event.ConnectionCheckOutFailed:
			types = append(types, e.Type)
			reasons = append(reasons, e.Reason)
		}
	}
	if len(types) != 2 || types[0] != event.ConnectionClosed || reasons[0] != event.ReasonError ||
		types[1] != event.ConnectionCheckOutFailed || reasons[1] != event.ReasonConnectionError {
		t.Errorf("events %v %v, want ConnectionClosed(error) then ConnectionCheckOutFailed(connectionError)", types, reasons)
	}
	if p.Generation() != 0 {
		t.Error("the pool cleared itself; that is SDAM's decision")
	}
	if st := p.Stats(); st.Total != 0 {
		t.Errorf("stats %+v, want empty", st)
	}
}

func TestHandshakeCommandErrorIsNotLabeledOverload(t *testing.T) {
	srv := blackpipe.StartWithOptions(t, blackpipe.Options{Handler: func(r *blackpipe.Request) bool {
		if !strings.EqualFold(r.Name, "hello") {
			return false
		}
		_ = r.ReplyError(91, "shutting down")
		return true
	}})
	p, _ := newPool(t, srv.Addr(), Options{})
	p.Ready()
	_, err := p.CheckOut(ctxFor(t, 5*time.Second))
	if err == nil {
		t.Fatal("CheckOut succeeded despite a failing hello")
	}
	if mongoerr.HasErrorLabel(err, mongoerr.LabelSystemOverloaded) {
		t.Errorf("a command error from hello was labeled as overload: %v", err)
	}
}

func TestCloseWithConnectionsInUse(t *testing.T) {
	srv := blackpipe.Start(t)
	rec := newRecorder()
	p := New(srv.Addr(), Options{MaxConnecting: 2, Monitor: &event.Monitor{Pool: rec.add}})
	p.Ready()
	a, b := mustCheckOut(t, p), mustCheckOut(t, p)
	p.CheckIn(b)

	if err := p.Close(ctxFor(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if !b.Closed() {
		t.Error("Close left an idle connection open")
	}
	if a.Closed() {
		t.Fatal("Close closed an in-use connection")
	}
	if _, err := p.CheckOut(context.Background()); !errors.Is(err, ErrPoolClosed) {
		t.Errorf("CheckOut after Close: %v, want ErrPoolClosed", err)
	}
	p.CheckIn(a)
	if !a.Closed() {
		t.Fatal("a connection checked in to a closed pool stays open")
	}
	var poolClosed int
	for _, e := range eventsOf(rec, event.ConnectionClosed) {
		if e.Reason == event.ReasonPoolClosed {
			poolClosed++
		}
	}
	if poolClosed != 2 {
		t.Errorf("%d ConnectionClosed(poolClosed) events, want 2", poolClosed)
	}
	if err := p.Close(ctxFor(t, time.Second)); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if n := len(eventsOf(rec, event.PoolClosed)); n != 1 {
		t.Errorf("%d PoolClosed events after two Closes, want 1", n)
	}
	if fails := eventsOf(rec, event.ConnectionCheckOutFailed); len(fails) != 1 || fails[0].Reason != event.ReasonPoolClosed {
		t.Errorf("CheckOutFailed events %+v, want one with reason poolClosed", fails)
	}
}

func TestCloseFailsQueuedAndDialingCheckOuts(t *testing.T) {
	h, _ := helloDelay(10 * time.Second)
	srv := blackpipe.StartWithOptions(t, blackpipe.Options{Handler: h})
	p := New(srv.Addr(), Options{MaxPoolSize: 1})
	p.Ready()
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := p.CheckOut(context.Background())
			errs <- err
		}()
	}
	// One check-out dials (its handshake hangs), the other queues.
	eventually(t, "one dialling, one queued", func() bool { st := p.Stats(); return st.Pending == 1 && st.Waiting == 1 })
	start := time.Now()
	if err := p.Close(ctxFor(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("Close took %v: the pending dial was not aborted", el)
	}
	for range 2 {
		if err := <-errs; !errors.Is(err, ErrPoolClosed) {
			t.Errorf("check-out during Close: %v, want ErrPoolClosed", err)
		}
	}
	if st := p.Stats(); st.Total != 0 {
		t.Errorf("stats after Close %+v, want empty", st)
	}
}

func TestCheckInClosedConnection(t *testing.T) {
	srv := blackpipe.Start(t)
	p, rec := newPool(t, srv.Addr(), Options{})
	p.Ready()
	c := mustCheckOut(t, p)
	_ = c.Close()
	p.CheckIn(c)
	p.CheckIn(c) // a second check-in is ignored
	closed := eventsOf(rec, event.ConnectionClosed)
	if len(closed) != 1 || closed[0].Reason != event.ReasonError {
		t.Fatalf("ConnectionClosed events %+v, want one with reason error", closed)
	}
	if n := len(eventsOf(rec, event.ConnectionCheckedIn)); n != 1 {
		t.Errorf("%d CheckedIn events, want 1", n)
	}
	if st := p.Stats(); st.Total != 0 {
		t.Errorf("stats %+v, want empty", st)
	}
}

func TestConcurrentCheckOutCheckIn(t *testing.T) {
	srv := blackpipe.Start(t)
	const maxSize = 5
	var mu sync.Mutex
	live, peak := 0, 0
	mon := &event.Monitor{Pool: func(e *event.PoolEvent) {
		mu.Lock()
		defer mu.Unlock()
		switch e.Type {
		case event.ConnectionCreated:
			live++
			peak = max(peak, live)
		case event.ConnectionClosed:
			live--
		}
	}}
	p := New(srv.Addr(), Options{MaxPoolSize: maxSize, MaxConnecting: 2, MinPoolSize: 2, BackgroundInterval: time.Millisecond, Monitor: mon})
	p.Ready()

	var wg sync.WaitGroup
	var ok, cleared atomic.Int64
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				c, err := p.CheckOut(ctx)
				if err != nil {
					cancel()
					var pce *mongoerr.PoolClearedError
					if !errors.As(err, &pce) {
						t.Errorf("CheckOut: %v", err)
						return
					}
					cleared.Add(1)
					p.Ready()
					continue
				}
				if _, err := c.RoundTrip(ctx, "admin", bson.D{{Key: "ping", Value: 1}}); err != nil && !mongoerr.IsNetworkError(err) {
					// Network errors are expected: interrupting clears close in-use connections.
					t.Errorf("ping: %v", err)
				}
				cancel()
				if g == 0 && i%10 == 5 {
					p.Clear(errors.New("chaos"), i%20 == 5)
				}
				p.CheckIn(c)
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	if err := p.Close(ctxFor(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if peak > maxSize {
		t.Errorf("%d connections at once, more than maxPoolSize %d", peak, maxSize)
	}
	if live != 0 {
		t.Errorf("%d connections not closed after Close", live)
	}
	if ok.Load() == 0 {
		t.Error("no check-out succeeded")
	}
	t.Logf("%d check-outs, %d failed on a cleared pool, peak %d connections", ok.Load(), cleared.Load(), peak)
}
