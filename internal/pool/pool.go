package pool

import (
	"cmp"
	"container/list"
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/event"
	"github.com/sturdy-go/sturdy/internal/backoff"
	"github.com/sturdy-go/sturdy/internal/conn"
	"github.com/sturdy-go/sturdy/internal/connstring"
	"github.com/sturdy-go/sturdy/mongoerr"
)

// Options configures a Pool. Values are taken literally (OptionsFrom
// applies the client's defaults): the zero value is an unlimited pool with no
// minimum, no cap on concurrent dials and no idle timeout.
type Options struct {
	// MaxPoolSize caps the connections (pending, idle and in use); 0 means
	// unlimited.
	MaxPoolSize int
	// MinPoolSize is kept established by a background goroutine while the
	// pool is ready.
	MinPoolSize int
	// MaxConnecting caps concurrent connection establishments; 0 means
	// no cap.
	MaxConnecting int
	// MaxIdleTime closes connections idle for longer; 0 means never.
	MaxIdleTime time.Duration
	// WaitQueueTimeout bounds how long a check-out waits in the queue for a
	// connection or for permission to dial (not the dial itself); 0 means
	// only the check-out's context bounds it.
	WaitQueueTimeout time.Duration
	// Conn configures each new connection.
	Conn conn.Options
	// Monitor receives the pool's events; nil means none.
	Monitor *event.Monitor
	// BackgroundInterval is the pause between runs of the background
	// goroutine that keeps MinPoolSize and closes idle connections; 0 means
	// no background goroutine (the client's default is in
	// connstring.Defaults).
	BackgroundInterval time.Duration
	// EstablishError, if set, is called (without the pool's lock held) with
	// an error establishing a connection, before the connection is
	// reported closed: whether a check-out waits for it, it populates
	// MinPoolSize, or its check-out gave up waiting. The topology passes it
	// to SDAM error handling (a pre-handshake error of the given
	// connection generation).
	EstablishError func(err error, generation uint64)
	// NoEstablishBackoff turns off the establishment backoff: by default,
	// after a connection attempt fails in a way overload can cause (the
	// error gets the SystemOverloadedError label), the pool starts no new
	// connection for jitter × min(10 s, 100 ms × 2^(failures-1)), so that
	// a server shedding connections is not met by a stampede of redials
	// from every waiting check-out. A successful connection ends it.
	NoEstablishBackoff bool
	// Jitter returns the backoff's jitter in [0, 1); nil means
	// math/rand/v2.Float64. Tests inject it.
	Jitter func() float64
	// LoadBalanced is load-balanced mode: connections reach different
	// services behind one address, so each connection's generation is its
	// service's (ClearService clears one service), the pool starts ready
	// and is never paused, and wait-queue timeouts count pinned
	// connections (Pin).
	LoadBalanced bool
}

// OptionsFrom is the pool options a client's settings ask for, with the
// defaults of connstring.Defaults applied (a negative MaxPoolSize is
// unlimited) and the background goroutine on.
func OptionsFrom(s connstring.Settings) Options {
	maxPool := cmp.Or(s.MaxPoolSize, connstring.Defaults.MaxPoolSize)
	if maxPool < 0 {
		maxPool = 0 // unlimited
	}
	return Options{
		MaxPoolSize:   maxPool,
		MinPoolSize:   s.MinPoolSize,
		MaxConnecting: cmp.Or(s.MaxConnecting, connstring.Defaults.MaxConnecting),
		MaxIdleTime:   s.MaxIdleTime,
		// CMAP's background thread; 0 would be none.
		BackgroundInterval: connstring.Defaults.PoolBackgroundInterval,
		Conn:               conn.OptionsFrom(s),
		Monitor:            s.Monitor,
		LoadBalanced:       s.LoadBalanced,
	}
}

// PinKind is why a load-balanced connection stays checked out across
// operations.
type PinKind int

// Pin kinds.
const (
	PinNone PinKind = iota
	PinCursor
	PinTransaction
)

// Stats is a snapshot of the pool's connection counts.
type Stats struct {
	Total   int // Pending + Idle + InUse
	Idle    int
	InUse   int
	Pending int // being established
	Waiting int // check-outs in the wait queue
}

type poolState int

const (
	statePaused poolState = iota
	stateReady
	stateClosed
)

type connState int

const (
	connPending connState = iota
	connIdle
	connInUse
	connClosed
)

// member is the pool's record of one connection.
type member struct {
	c         *conn.Conn // nil while pending
	id        int64
	gen       uint64
	state     connState
	created   time.Time
	idleSince time.Time
	cancel    context.CancelFunc // aborts the dial while pending
	w         *waiter            // the check-out waiting for this dial; nil for background dials or an abandoned wait
	sid       bson.ObjectID      // load-balanced mode: the connection's service
	pin       PinKind
}

// waiter is one check-out in progress.
type waiter struct {
	start   time.Time
	elem    *list.Element // set while in the wait queue
	dialing *member       // set while waiting for its own dial
	done    bool
	ready   chan struct{} // closed when done
	m       *member
	err     error
}

// Pool is the connection pool for one server. It is safe for concurrent use.
type Pool struct {
	addr          string
	opts          Options
	maxConnecting int
	mon           *event.Monitor

	ctx    context.Context // canceled by Close; parent of every dial
	cancel context.CancelFunc
	wake   chan struct{} // nudges the background goroutine
	stop   chan struct{} // closed by Close
	wg     sync.WaitGroup

	mu         sync.Mutex
	state      poolState
	generation atomic.Uint64 // changed under mu; Generation reads it without
	clearCause error
	nextID     int64
	idle       []*member // LIFO: the end is the most recently checked in
	conns      map[*conn.Conn]*member
	pendingSet map[*member]struct{}
	pending    int
	inUse      int
	queue      list.List        // of *waiter, FIFO
	doomed     []*conn.Conn     // closed by unlock, outside the lock
	now        func() time.Time // time source; time.Now

	// The establishment backoff (Options.NoEstablishBackoff).
	establishFailures int         // consecutive overload-like dial failures
	backoffUntil      time.Time   // no new dial before this
	backoffTimer      *time.Timer // serves the queue when the backoff ends

	// Load-balanced mode: each service's generation, and the in-use
	// connections pinned to cursors and transactions.
	svcGen                    map[bson.ObjectID]uint64
	pinnedCursors, pinnedTxns int
	lastHello                 *conn.Description // load-balanced: the latest established connection's handshake
}

// New creates a paused pool for addr and publishes PoolCreated.
func New(addr string, o Options) *Pool {
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{
		addr:          addr,
		opts:          o,
		maxConnecting: o.MaxConnecting,
		mon:           o.Monitor,
		ctx:           ctx,
		cancel:        cancel,
		wake:          make(chan struct{}, 1),
		stop:          make(chan struct{}),
		conns:         make(map[*conn.Conn]*member),
		pendingSet:    make(map[*member]struct{}),
		now:           time.Now,
		svcGen:        make(map[bson.ObjectID]uint64),
	}
	p.publish(&event.PoolEvent{Type: event.PoolCreated, Options: &event.PoolOptions{
		MaxPoolSize:   o.MaxPoolSize,
		MinPoolSize:   o.MinPoolSize,
		MaxConnecting: p.maxConnecting,
		MaxIdleTime:   o.MaxIdleTime,
	}})
	if o.BackgroundInterval > 0 {
		p.wg.Add(1)
		go p.background(o.BackgroundInterval)
	}
	return p
}

// Addr is the server address the pool connects to.
func (p *Pool) Addr() string { return p.addr }

func (p *Pool) publish(e *event.PoolEvent) {
	e.Address = p.addr
	p.mon.PublishPool(e)
}

// listening reports whether pool events have a receiver. The hot paths
// check it before building an event, which would otherwise be allocated
// on every check-out and check-in for nobody.
func (p *Pool) listening() bool { return p.mon != nil && p.mon.Pool != nil }

// unlock releases the lock, then closes the sockets doomed while it was
// held: closing may block, and must not hold up the pool.
func (p *Pool) unlock() {
	doomed := p.doomed
	p.doomed = nil
	p.mu.Unlock()
	for _, c := range doomed {
		_ = c.Close()
	}
}

// Ready marks a paused pool ready: check-outs are served and the background
// goroutine may establish connections. It does nothing on a ready or closed
// pool.
func (p *Pool) Ready() {
	p.mu.Lock()
	if p.state != statePaused {
		p.mu.Unlock()
		return
	}
	p.state = stateReady
	p.publish(&event.PoolEvent{Type: event.PoolReady})
	p.unlock()
	p.nudge()
}

func (p *Pool) nudge() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Generation is the pool's current generation: the number of clears.
func (p *Pool) Generation() uint64 {
	return p.generation.Load() // every operation asks: no lock
}

// Stats returns the current connection counts.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Stats{
		Total:   p.pending + len(p.idle) + p.inUse,
		Idle:    len(p.idle),
		InUse:   p.inUse,
		Pending: p.pending,
		Waiting: p.queue.Len(),
	}
}

// CheckOut returns an established connection, reusing an idle one or
// dialling a new one. It waits in a FIFO queue while the pool is at
// MaxPoolSize or MaxConnecting dials are in progress. Errors:
// *PoolClearedError while the pool is paused or when it is cleared during
// the wait, ErrPoolClosed, *WaitQueueTimeoutError when ctx ends (or
// WaitQueueTimeout passes) first, or the dial's own error (a
// *mongoerr.NetworkError, a command error from the handshake, an
// authentication error).
func (p *Pool) CheckOut(ctx context.Context) (*conn.Conn, error) {
	p.mu.Lock()
	// The clock is read only when a duration is reported: to a listener,
	// or for a check-out that has to wait (below).
	var start time.Time
	if p.listening() {
		start = p.now()
		p.publish(&event.PoolEvent{Type: event.ConnectionCheckOutStarted})
	}
	// Fast path: nobody is queued ahead and an idle connection is at hand,
	// so no waiter is needed. The outcome and events are those of the
	// queue serving this check-out at once.
	if p.state == stateReady && p.queue.Len() == 0 && ctx.Err() == nil {
		if m := p.takeIdleLocked(); m != nil {
			m.state = connInUse
			p.inUse++
			if p.listening() {
				p.publish(&event.PoolEvent{Type: event.ConnectionCheckedOut, ConnectionID: m.id, Duration: p.now().Sub(start)})
			}
			p.unlock()
			return m.c, nil
		}
	}
	if start.IsZero() {
		start = p.now()
	}
	w := &waiter{start: start, ready: make(chan struct{})}
	switch {
	case p.state == stateClosed:
		p.resolveLocked(w, nil, ErrPoolClosed)
	case p.state == statePaused:
		p.resolveLocked(w, nil, p.clearedErrLocked())
	case ctx.Err() != nil:
		p.failTimeoutLocked(w)
		inUse := p.inUseLocked()
		p.unlock()
		return nil, &mongoerr.WaitQueueTimeoutError{Addr: p.addr, Wait: p.now().Sub(start), Err: ctx.Err(), InUse: inUse}
	default:
		w.elem = p.queue.PushBack(w)
		p.serveLocked()
	}
	p.unlock()

	var timeout <-chan time.Time
	if p.opts.WaitQueueTimeout > 0 {
		t := time.NewTimer(p.opts.WaitQueueTimeout)
		defer t.Stop()
		timeout = t.C
	}
	for {
		select {
		case <-w.ready:
			return w.result()
		case <-ctx.Done():
			return p.giveUp(w, ctx.Err(), false)
		case <-timeout:
			timeout = nil
			if c, err := p.giveUp(w, context.DeadlineExceeded, true); c != nil || err != nil {
				return c, err
			}
			// Dialling already: the wait-queue timeout no longer applies.
		}
	}
}

func (w *waiter) result() (*conn.Conn, error) {
	if w.err != nil {
		return nil, w.err
	}
	return w.m.c, nil
}

// giveUp ends a check-out whose wait ran out, unless it was resolved in the
// meantime (then its result stands). With onlyQueued, a check-out that is
// waiting for its own dial is left alone and (nil, nil) returned.
func (p *Pool) giveUp(w *waiter, cause error, onlyQueued bool) (*conn.Conn, error) {
	p.mu.Lock()
	if w.done {
		p.mu.Unlock()
		return w.result()
	}
	if onlyQueued && w.elem == nil {
		p.mu.Unlock()
		return nil, nil
	}
	if w.elem != nil {
		p.queue.Remove(w.elem)
		w.elem = nil
	}
	if w.dialing != nil {
		// The dial goes on; its connection will join the pool.
		w.dialing.w = nil
		w.dialing = nil
	}
	p.failTimeoutLocked(w)
	p.serveLocked()
	inUse := p.inUseLocked()
	p.unlock()
	return nil, &mongoerr.WaitQueueTimeoutError{Addr: p.addr, Wait: p.now().Sub(w.start), Err: cause, InUse: inUse}
}

func (p *Pool) failTimeoutLocked(w *waiter) {
	w.done = true
	p.publish(&event.PoolEvent{Type: event.ConnectionCheckOutFailed, Reason: event.ReasonTimeout,
		Duration: p.now().Sub(w.start)})
	close(w.ready)
}

// resolveLocked completes a check-out with a connection or an error and
// publishes ConnectionCheckedOut or ConnectionCheckOutFailed.
func (p *Pool) resolveLocked(w *waiter, m *member, err error) {
	if w.elem != nil {
		p.queue.Remove(w.elem)
		w.elem = nil
	}
	w.dialing = nil
	w.done = true
	w.m, w.err = m, err
	// The event goes out before the check-out returns.
	defer close(w.ready)
	d := p.now().Sub(w.start)
	if err != nil {
		reason := event.ReasonConnectionError
		if err == ErrPoolClosed {
			reason = event.ReasonPoolClosed
		}
		p.publish(&event.PoolEvent{Type: event.ConnectionCheckOutFailed, Reason: reason, Error: err, Duration: d})
		return
	}
	m.state = connInUse
	p.inUse++
	if p.listening() {
		p.publish(&event.PoolEvent{Type: event.ConnectionCheckedOut, ConnectionID: m.id, Duration: d})
	}
}

func (p *Pool) clearedErrLocked() error {
	return &mongoerr.PoolClearedError{Addr: p.addr, Cause: p.clearCause}
}

func (p *Pool) totalLocked() int { return p.pending + len(p.idle) + p.inUse }

func (p *Pool) canDialLocked() bool {
	return p.state == stateReady && (p.maxConnecting <= 0 || p.pending < p.maxConnecting) &&
		(p.opts.MaxPoolSize <= 0 || p.totalLocked() < p.opts.MaxPoolSize) &&
		!p.backingOffLocked()
}

func (p *Pool) backingOffLocked() bool {
	return !p.backoffUntil.IsZero() && p.now().Before(p.backoffUntil)
}

// establishFailedLocked starts or extends the establishment backoff after
// a dial error that overload can cause.
func (p *Pool) establishFailedLocked(err error) {
	if p.opts.NoEstablishBackoff || p.state == stateClosed || !mongoerr.HasErrorLabel(err, mongoerr.LabelSystemOverloaded) {
		return
	}
	p.establishFailures++
	jitter := rand.Float64
	if p.opts.Jitter != nil {
		jitter = p.opts.Jitter
	}
	d := backoff.Delay(backoff.Base, p.establishFailures-1, jitter())
	p.backoffUntil = p.now().Add(d)
	if p.backoffTimer != nil {
		p.backoffTimer.Stop()
	}
	p.backoffTimer = time.AfterFunc(d, func() {
		p.mu.Lock()
		p.serveLocked()
		p.unlock()
		p.nudge() // and let the background goroutine refill MinPoolSize
	})
}

// establishSucceededLocked ends the establishment backoff.
func (p *Pool) establishSucceededLocked() {
	p.establishFailures = 0
	p.backoffUntil = time.Time{}
	if p.backoffTimer != nil {
		p.backoffTimer.Stop()
		p.backoffTimer = nil
	}
}

// serveLocked hands idle connections, or permission to dial, to the
// check-outs at the head of the queue, in order.
func (p *Pool) serveLocked() {
	for p.queue.Len() > 0 && p.state == stateReady {
		w := p.queue.Front().Value.(*waiter)
		if m := p.takeIdleLocked(); m != nil {
			p.resolveLocked(w, m, nil)
			continue
		}
		if !p.canDialLocked() {
			return
		}
		p.queue.Remove(w.elem)
		w.elem = nil
		w.dialing = p.startDialLocked(w)
	}
}

// takeIdleLocked pops the most recently used idle connection that has not
// perished, closing the perished ones it meets.
func (p *Pool) takeIdleLocked() *member {
	for len(p.idle) > 0 {
		m := p.idle[len(p.idle)-1]
		p.idle[len(p.idle)-1] = nil
		p.idle = p.idle[:len(p.idle)-1]
		if reason := p.perishedLocked(m); reason != "" {
			p.closeLocked(m, reason)
			continue
		}
		return m
	}
	return nil
}

// perishedLocked says why an idle connection must not be used, or "".
func (p *Pool) perishedLocked(m *member) string {
	switch {
	case m.gen != p.genLocked(m):
		return event.ReasonStale
	case m.c.Closed():
		return event.ReasonError
	case p.opts.MaxIdleTime > 0 && p.now().Sub(m.idleSince) > p.opts.MaxIdleTime:
		return event.ReasonIdle
	}
	return ""
}

// closeLocked removes an established connection (already taken off the idle
// list or in use) from the pool and schedules its socket to be closed.
func (p *Pool) closeLocked(m *member, reason string) {
	m.state = connClosed
	delete(p.conns, m.c)
	p.doomed = append(p.doomed, m.c)
	p.publish(&event.PoolEvent{Type: event.ConnectionClosed, ConnectionID: m.id, Reason: reason})
}

// startDialLocked creates a pending connection and dials it in a new
// goroutine; w, if not nil, is the check-out that will get it.
func (p *Pool) startDialLocked(w *waiter) *member {
	p.nextID++
	ctx, cancel := context.WithCancel(p.ctx)
	m := &member{id: p.nextID, gen: p.generation.Load(), state: connPending, created: p.now(), cancel: cancel, w: w}
	p.pending++
	p.pendingSet[m] = struct{}{}
	p.publish(&event.PoolEvent{Type: event.ConnectionCreated, ConnectionID: m.id})
	p.wg.Add(1)
	go p.dial(ctx, m)
	return m
}

func (p *Pool) dial(ctx context.Context, m *member) {
	defer p.wg.Done()
	o := p.opts.Conn
	o.ID = m.id // command events then name the connection as pool events do
	c, err := conn.Dial(ctx, p.addr, o)
	m.cancel()
	if err != nil {
		err = addBackpressureLabels(err)
	}

	p.mu.Lock()
	p.pending--
	delete(p.pendingSet, m)
	w := m.w
	m.w = nil
	switch {
	case err == nil && p.state == stateClosed:
		m.c = c
		p.closeLocked(m, event.ReasonPoolClosed)
		if w != nil {
			p.resolveLocked(w, nil, ErrPoolClosed)
		}
	case err == nil && m.gen != p.generation.Load():
		// Made before a clear: as stale as the rest of its generation.
		m.c = c
		p.closeLocked(m, event.ReasonStale)
		if w != nil {
			p.resolveLocked(w, nil, p.clearedErrLocked())
		}
	case err == nil:
		p.readyLocked(m, c, w)
	default:
		p.dialFailedLocked(m, w, err)
	}
	p.serveLocked()
	p.unlock()
}

// readyLocked adds m, whose connection c was just established, to the
// pool: to waiter w if there is one, else to the idle connections.
func (p *Pool) readyLocked(m *member, c *conn.Conn, w *waiter) {
	p.establishSucceededLocked()
	m.c = c
	if p.opts.LoadBalanced {
		// The handshake named the service: the connection belongs to
		// its current generation.
		if sid := c.ServiceID(); sid != nil {
			m.sid = *sid
		}
		m.gen = p.svcGen[m.sid]
	}
	c.SetGeneration(m.gen)
	if p.opts.LoadBalanced {
		d := c.Description()
		p.lastHello = &d
	}
	p.conns[c] = m
	p.publish(&event.PoolEvent{Type: event.ConnectionReady, ConnectionID: m.id, Duration: p.now().Sub(m.created)})
	if w != nil {
		p.resolveLocked(w, m, nil)
	} else {
		m.state = connIdle
		m.idleSince = p.now()
		p.idle = append(p.idle, m)
	}
}

// dialFailedLocked reports m's failed establishment: to the establishment
// backoff, to SDAM (EstablishError, called with the lock released), in a
// ConnectionClosed event, and to waiter w.
func (p *Pool) dialFailedLocked(m *member, w *waiter, err error) {
	m.state = connClosed
	if m.gen == p.generation.Load() {
		p.establishFailedLocked(err)
	}
	reason, fail := event.ReasonError, err
	switch {
	case p.state == stateClosed:
		reason, fail = event.ReasonPoolClosed, ErrPoolClosed
	case m.gen != p.generation.Load():
		// Interrupted by a clear, or failed after one.
		reason, fail = event.ReasonStale, p.clearedErrLocked()
	case p.opts.EstablishError != nil:
		// SDAM sees the error before the connection is reported
		// closed, so the pool is cleared first (CMAP/SDAM event
		// order); a check-out's caller that reports it again is
		// ignored, its connection's generation being older.
		p.mu.Unlock()
		p.opts.EstablishError(err, m.gen)
		p.mu.Lock()
	}
	p.publish(&event.PoolEvent{Type: event.ConnectionClosed, ConnectionID: m.id, Reason: reason, Error: err})
	if w != nil && !w.done {
		p.resolveLocked(w, nil, fail)
	}
}

// CheckIn returns a connection checked out of this pool. A closed or stale
// connection, or any connection once the pool is closed, is closed instead
// of pooled. Connections from other pools, and repeated check-ins, are
// ignored.
func (p *Pool) CheckIn(c *conn.Conn) {
	if c == nil {
		return
	}
	p.mu.Lock()
	m := p.conns[c]
	if m == nil || (m.state != connInUse && m.state != connClosed) {
		p.mu.Unlock()
		return
	}
	if p.listening() {
		p.publish(&event.PoolEvent{Type: event.ConnectionCheckedIn, ConnectionID: m.id})
	}
	p.setPinLocked(m, PinNone)
	if m.state == connClosed {
		// Interrupted by a clear; already closed and counted out.
		delete(p.conns, c)
		p.unlock()
		return
	}
	p.inUse--
	switch {
	case p.state == stateClosed:
		p.closeLocked(m, event.ReasonPoolClosed)
	case c.Closed():
		p.closeLocked(m, event.ReasonError)
	case m.gen != p.genLocked(m):
		p.closeLocked(m, event.ReasonStale)
	default:
		m.state = connIdle
		m.idleSince = p.now()
		p.idle = append(p.idle, m)
		p.serveLocked()
	}
	p.unlock()
}

// genLocked is the generation m must have to be current: its service's
// in load-balanced mode, the pool's otherwise.
func (p *Pool) genLocked(m *member) uint64 {
	if p.opts.LoadBalanced {
		return p.svcGen[m.sid]
	}
	return p.generation.Load()
}

// LastHello is, in load-balanced mode, the handshake reply of the latest
// connection established: a load balancer's server description has no
// wire version or limits of its own, so they come from the services.
func (p *Pool) LastHello() (conn.Description, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lastHello == nil {
		return conn.Description{}, false
	}
	return *p.lastHello, true
}

// ServiceGeneration is the generation of a load-balanced service: the
// number of times ClearService cleared it.
func (p *Pool) ServiceGeneration(sid bson.ObjectID) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.svcGen[sid]
}

// ClearService clears, in load-balanced mode, the connections to one
// service: they become stale (its generation++), idle ones are closed now
// and in-use ones when checked in. Other services' connections are kept,
// the pool is not paused and queued check-outs go on waiting. It publishes
// PoolCleared with the serviceId.
func (p *Pool) ClearService(sid bson.ObjectID, cause error) {
	p.mu.Lock()
	if p.state == stateClosed {
		p.mu.Unlock()
		return
	}
	p.svcGen[sid]++
	p.publish(&event.PoolEvent{Type: event.PoolCleared, Error: cause, ServiceID: &sid})
	keep := p.idle[:0]
	for _, m := range p.idle {
		if m.sid == sid {
			p.closeLocked(m, event.ReasonStale)
			continue
		}
		keep = append(keep, m)
	}
	clear(p.idle[len(keep):])
	p.idle = keep
	p.serveLocked()
	p.unlock()
}

// Pin records why a checked-out connection of a load-balanced pool stays
// checked out (a cursor's or a transaction's); CheckIn unpins it. The
// counts appear in wait-queue timeout errors.
func (p *Pool) Pin(c *conn.Conn, kind PinKind) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m := p.conns[c]; m != nil && m.state == connInUse {
		p.setPinLocked(m, kind)
	}
}

func (p *Pool) setPinLocked(m *member, kind PinKind) {
	switch m.pin {
	case PinCursor:
		p.pinnedCursors--
	case PinTransaction:
		p.pinnedTxns--
	}
	m.pin = kind
	switch kind {
	case PinCursor:
		p.pinnedCursors++
	case PinTransaction:
		p.pinnedTxns++
	}
}

// inUseLocked is the wait-queue timeout's breakdown in load-balanced mode.
func (p *Pool) inUseLocked() *mongoerr.InUseCounts {
	if !p.opts.LoadBalanced {
		return nil
	}
	return &mongoerr.InUseCounts{MaxPoolSize: p.opts.MaxPoolSize, Cursors: p.pinnedCursors, Transactions: p.pinnedTxns,
		Other: p.inUse - p.pinnedCursors - p.pinnedTxns}
}

// Clear marks every existing connection stale (generation++), pauses the
// pool and fails every queued check-out with a *PoolClearedError carrying
// cause. Idle connections are closed now, in-use ones when checked in, or
// now if interruptInUse (their operations then fail with network errors),
// which also aborts connections being established. It does nothing on a
// closed pool; on a paused one it publishes no PoolCleared.
func (p *Pool) Clear(cause error, interruptInUse bool) {
	p.mu.Lock()
	if p.state == stateClosed {
		p.mu.Unlock()
		return
	}
	wasPaused := p.state == statePaused
	p.establishSucceededLocked() // a new generation starts without backoff
	p.generation.Add(1)
	p.state = statePaused
	p.clearCause = cause
	if !wasPaused {
		p.publish(&event.PoolEvent{Type: event.PoolCleared, Interruptible: interruptInUse, Error: cause})
	}
	for p.queue.Len() > 0 {
		p.resolveLocked(p.queue.Front().Value.(*waiter), nil, p.clearedErrLocked())
	}
	for _, m := range p.idle {
		p.closeLocked(m, event.ReasonStale)
	}
	clear(p.idle)
	p.idle = p.idle[:0]
	if interruptInUse {
		for _, m := range p.conns {
			if m.state == connInUse && m.gen < p.generation.Load() {
				p.inUse--
				m.state = connClosed
				p.doomed = append(p.doomed, m.c)
				// Stays in conns until checked in, so CheckIn recognises it.
				p.publish(&event.PoolEvent{Type: event.ConnectionClosed, ConnectionID: m.id, Reason: event.ReasonStale})
			}
		}
		for m := range p.pendingSet {
			if m.gen < p.generation.Load() {
				m.cancel()
			}
		}
	}
	p.unlock()
}

// Close closes the pool: queued check-outs fail with ErrPoolClosed, idle
// connections are closed, dials in progress are aborted and in-use
// connections are closed when checked in. It waits for the pool's
// goroutines to end, or for ctx. Closing a closed pool only waits.
func (p *Pool) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.state != stateClosed {
		p.state = stateClosed
		for p.queue.Len() > 0 {
			p.resolveLocked(p.queue.Front().Value.(*waiter), nil, ErrPoolClosed)
		}
		for _, m := range p.idle {
			p.closeLocked(m, event.ReasonPoolClosed)
		}
		clear(p.idle)
		p.idle = nil
		p.publish(&event.PoolEvent{Type: event.PoolClosed})
		p.establishSucceededLocked() // stops the backoff timer
		p.cancel()
		close(p.stop)
	}
	p.unlock()

	done := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// background keeps MinPoolSize established and closes perished idle
// connections, once per interval or when nudged.
func (p *Pool) background(interval time.Duration) {
	defer p.wg.Done()
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-p.wake:
		case <-t.C:
		}
		p.maintain()
		t.Reset(interval)
	}
}

// maintain is one background run: it does the work available now and
// returns, never waiting for a dial slot.
func (p *Pool) maintain() {
	p.mu.Lock()
	if p.state == stateClosed {
		p.mu.Unlock()
		return
	}
	keep := p.idle[:0]
	for _, m := range p.idle {
		if reason := p.perishedLocked(m); reason != "" {
			p.closeLocked(m, reason)
			continue
		}
		keep = append(keep, m)
	}
	clear(p.idle[len(keep):])
	p.idle = keep
	for p.totalLocked() < p.opts.MinPoolSize && p.canDialLocked() {
		p.startDialLocked(nil)
	}
	p.unlock()
}
