package topology

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/event"
	"github.com/sturdy-go/sturdy/internal/conn"
	"github.com/sturdy-go/sturdy/internal/connstring"
	"github.com/sturdy-go/sturdy/internal/pool"
	"github.com/sturdy-go/sturdy/internal/testhook"
	"github.com/sturdy-go/sturdy/mongoerr"
	"github.com/sturdy-go/sturdy/readpref"
)

// Options configures a Topology. Values are taken literally (zero means
// none); OptionsFrom applies the client's defaults.
type Options struct {
	Hosts   []string // seed list, "host:port"; the port defaults to 27017
	SetName string   // required replica set name, if any
	Direct  bool     // talk to the single host only, whatever it is

	HeartbeatInterval      time.Duration // required, positive
	MinHeartbeatInterval   time.Duration // 0: checks may follow each other at once
	ServerSelectionTimeout time.Duration // 0: only the caller's context bounds selection
	// SocketTimeout bounds each round trip on the pools' connections (not
	// the monitors') whose context has no earlier deadline; 0 means none.
	SocketTimeout time.Duration
	// LocalThreshold is the latency window; 0 means 0.
	LocalThreshold time.Duration
	// ServerMonitoringMode is "stream", "poll" or "auto" ("" means auto:
	// stream unless running on a FaaS platform).
	ServerMonitoringMode string

	// Pool configures each server's pool. Its Conn and Monitor are replaced
	// by the fields below.
	Pool pool.Options
	// Conn configures data connections and (without credentials) monitoring
	// connections.
	Conn conn.Options
	// Monitor receives SDAM events, published outside the topology's lock
	// (a handler may read the Description), and is handed to every pool.
	// Pool events of a clear are published while the lock is held.
	Monitor *event.Monitor
	Logger  *slog.Logger
	// Now is the clock used for lastUpdateTime; nil means time.Now.
	Now func() time.Time
}

// OptionsFrom is the topology options a client's settings ask for, with
// the defaults of connstring.Defaults applied, including those of the
// pools and connections it creates.
func OptionsFrom(s connstring.Settings) Options {
	return Options{
		Hosts:                  s.Hosts,
		SetName:                s.ReplicaSet,
		Direct:                 s.Direct,
		HeartbeatInterval:      cmp.Or(s.HeartbeatInterval, connstring.Defaults.HeartbeatInterval),
		MinHeartbeatInterval:   cmp.Or(testhook.MinHeartbeatInterval(), connstring.Defaults.MinHeartbeatInterval),
		ServerSelectionTimeout: cmp.Or(s.ServerSelectionTimeout, connstring.Defaults.ServerSelectionTimeout),
		SocketTimeout:          s.SocketTimeout,
		LocalThreshold:         connstring.OrDefault(s.LocalThreshold, connstring.Defaults.LocalThreshold),
		ServerMonitoringMode:   s.ServerMonitoringMode,
		Pool:                   pool.OptionsFrom(s),
		Conn:                   conn.OptionsFrom(s),
		Monitor:                s.Monitor,
		Logger:                 s.Logger,
	}
}

// normalized derives the internal fields: nil clock and logger, seed
// addresses, and the pools' connection options. It supplies no defaults.
func (o Options) normalized() Options {
	if o.LocalThreshold < 0 {
		o.LocalThreshold = 0
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	hosts := make([]string, 0, len(o.Hosts))
	for _, h := range o.Hosts {
		if a := NormalizeAddr(h); a != "" && !contains(hosts, a) {
			hosts = append(hosts, a)
		}
	}
	o.Hosts = hosts
	o.Pool.Conn = o.Conn
	// Monitors wait in hello as long as a heartbeat needs; only the pools'
	// application connections get the socket timeout.
	o.Pool.Conn.SocketTimeout = o.SocketTimeout
	o.Pool.Monitor = o.Monitor
	o.Pool.LoadBalanced = o.Conn.LoadBalanced
	return o
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// Topology monitors a deployment and selects servers from it. It is safe
// for concurrent use.
type Topology struct {
	o Options

	// mu guards what follows. Readers take it shared: every operation
	// reads the description and the servers map to select a server.
	mu        sync.RWMutex
	desc      Description
	servers   map[string]*Server
	changed   chan struct{} // closed and replaced whenever desc is replaced
	connected bool
	closed    bool
	events    []func() // SDAM events queued under mu, published in order by flush

	eventMu sync.Mutex // keeps event order across concurrent updates
	wg      sync.WaitGroup

	randMu sync.Mutex
	rand   *rand.Rand
}

// New validates o and builds a Topology with one Unknown server per seed.
// Nothing is dialled until Connect.
func New(o Options) (*Topology, error) {
	o = o.normalized()
	if len(o.Hosts) == 0 {
		return nil, errors.New("no hosts given")
	}
	if o.HeartbeatInterval <= 0 {
		return nil, fmt.Errorf("HeartbeatInterval must be positive, got %v", o.HeartbeatInterval)
	}
	if o.Direct && len(o.Hosts) > 1 {
		return nil, fmt.Errorf("a direct connection takes exactly one host, got %d", len(o.Hosts))
	}
	switch o.ServerMonitoringMode {
	case "", "auto", "stream", "poll":
	default:
		return nil, fmt.Errorf("serverMonitoringMode must be auto, stream or poll, got %q", o.ServerMonitoringMode)
	}
	if o.Conn.LoadBalanced && (len(o.Hosts) != 1 || o.Direct || o.SetName != "") {
		return nil, errors.New("load-balanced mode takes exactly one host, no direct connection and no replica set name")
	}
	t := &Topology{
		o:       o,
		desc:    initialDescription(o),
		servers: map[string]*Server{},
		changed: make(chan struct{}),
		rand:    rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
	}
	for _, sd := range t.desc.Servers {
		t.servers[sd.Addr] = t.newServer(sd.Addr)
	}
	return t, nil
}

// Options returns the options in effect, defaults resolved.
func (t *Topology) Options() Options { return t.o }

// Connect starts monitoring every known server. It does not wait for any
// server to be discovered: SelectServer does that.
func (t *Topology) Connect(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return ErrTopologyClosed
	}
	if t.connected {
		t.mu.Unlock()
		return errors.New("already connected")
	}
	t.connected = true
	m := t.o.Monitor
	t.queue(func() {
		if m != nil && m.TopologyOpening != nil {
			m.TopologyOpening(&event.TopologyOpeningEvent{})
		}
	})
	for _, sd := range t.desc.Servers {
		t.queueServerOpening(sd.Addr)
	}
	prev := Description{Kind: TopologyUnknown}
	cur := t.desc
	t.queue(func() {
		if m != nil && m.TopologyDescriptionChanged != nil {
			m.TopologyDescriptionChanged(&event.TopologyDescriptionChangedEvent{Previous: prev.Event(), New: cur.Event()})
		}
	})
	if t.o.Conn.LoadBalanced {
		t.connectLoadBalancedLocked()
		t.unlockAndFlush()
		return nil
	}
	for _, s := range t.servers {
		t.startMonitorLocked(s)
	}
	t.unlockAndFlush()
	return nil
}

// connectLoadBalancedLocked makes the one server a LoadBalancer without
// checking it (load-balanced mode has no monitoring), publishing the
// events the load balancer specification lists, and readies its pool.
func (t *Topology) connectLoadBalancedLocked() {
	m := t.o.Monitor
	prev := t.desc
	ps := prev.Servers[0]
	ns := ServerDescription{Addr: ps.Addr, Kind: LoadBalancer, LastUpdateTime: t.o.Now()}
	t.desc = Description{Kind: LoadBalanced, Servers: []ServerDescription{ns}}
	close(t.changed)
	t.changed = make(chan struct{})
	p, n := ps.Event(), ns.Event()
	pd, nd := prev.Event(), t.desc.Event()
	t.queue(func() {
		if m != nil && m.ServerDescriptionChanged != nil {
			m.ServerDescriptionChanged(&event.ServerDescriptionChangedEvent{Address: n.Address, Previous: p, New: n})
		}
		if m != nil && m.TopologyDescriptionChanged != nil {
			m.TopologyDescriptionChanged(&event.TopologyDescriptionChangedEvent{Previous: pd, New: nd})
		}
	})
	s := t.servers[ns.Addr]
	s.writable.Store(true)
	s.pool.Ready()
}

// Disconnect stops every monitor and closes every pool. It waits for the
// monitor goroutines to end, or for ctx.
func (t *Topology) Disconnect(ctx context.Context) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	servers := make([]*Server, 0, len(t.servers))
	for _, s := range t.servers {
		servers = append(servers, s)
	}
	t.servers = map[string]*Server{}
	close(t.changed)
	t.changed = make(chan struct{})
	wasConnected := t.connected
	m := t.o.Monitor
	for _, s := range servers {
		s.stopMonitor()
		if wasConnected {
			t.queueServerClosed(s.addr)
		}
	}
	if wasConnected {
		// SDAM "Client closing": every server is removed and the type
		// becomes Unknown, announced before TopologyClosed.
		prev := t.desc
		t.desc = Description{Kind: TopologyUnknown}
		if !descEqual(prev, t.desc) {
			p, n := prev.Event(), t.desc.Event()
			t.queue(func() {
				if m != nil && m.TopologyDescriptionChanged != nil {
					m.TopologyDescriptionChanged(&event.TopologyDescriptionChangedEvent{Previous: p, New: n})
				}
			})
		}
		t.queue(func() {
			if m != nil && m.TopologyClosed != nil {
				m.TopologyClosed(&event.TopologyClosedEvent{})
			}
		})
	}
	t.mu.Unlock()

	var errs []error
	for _, s := range servers {
		if err := s.pool.Close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	done := make(chan struct{})
	go func() { t.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("waiting for monitors to stop: %w", ctx.Err()))
		<-done // monitors were cancelled; they end promptly
	}
	t.mu.Lock()
	t.unlockAndFlush()
	return errors.Join(errs...)
}

// Description returns the current description.
func (t *Topology) Description() Description {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.desc
}

// Kind is the topology's current kind: Description().Kind without copying
// the description.
func (t *Topology) Kind() TopologyKind {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.desc.Kind
}

// RequestImmediateCheck asks every monitor to check its server now (no
// sooner than MinHeartbeatInterval after its previous check).
func (t *Topology) RequestImmediateCheck() {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, s := range t.servers {
		s.requestCheck()
	}
}

// Closed reports whether Disconnect was called.
func (t *Topology) Closed() bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.closed
}

// Server returns the server at addr, if it is part of the topology.
func (t *Topology) Server(addr string) (*Server, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	s, ok := t.servers[NormalizeAddr(addr)]
	return s, ok
}

// SelectServer returns a server suitable for sel, preferring servers not in
// deprioritized. It waits, asking for immediate checks, until one appears,
// ServerSelectionTimeout passes or ctx ends; it then returns a
// *mongoerr.ServerSelectionError. The returned server's operation count is
// incremented: the caller must call Dec when the operation ends.
func (t *Topology) SelectServer(ctx context.Context, sel Selector, deprioritized []string) (*Server, error) {
	if sel == nil {
		sel = WriteSelector()
	}
	// The timer starts with the first wait: most selections succeed on
	// their first try and need none.
	var timeout <-chan time.Time
	for {
		t.mu.RLock()
		if t.closed {
			t.mu.RUnlock()
			return nil, ErrTopologyClosed
		}
		desc, changed := t.desc, t.changed
		t.mu.RUnlock()

		if desc.CompatibilityErr != nil {
			return nil, t.selectionError(sel, desc, desc.CompatibilityErr)
		}
		s, err := t.trySelect(desc, sel, deprioritized)
		if err != nil {
			return nil, err
		}
		if s != nil {
			return s, nil
		}
		if timeout == nil && t.o.ServerSelectionTimeout > 0 {
			timer := time.NewTimer(t.o.ServerSelectionTimeout)
			defer timer.Stop()
			timeout = timer.C
		}
		t.RequestImmediateCheck()
		select {
		case <-changed:
		case <-timeout:
			return nil, t.selectionError(sel, t.Description(), context.DeadlineExceeded)
		case <-ctx.Done():
			return nil, t.selectionError(sel, t.Description(), ctx.Err())
		}
	}
}

// trySelect runs one selection pass over desc; nil, nil means no server.
func (t *Topology) trySelect(desc Description, sel Selector, deprioritized []string) (*Server, error) {
	if s := t.selectOnly(desc, sel, deprioritized); s != nil {
		return s, nil
	}
	depri := make([]string, len(deprioritized))
	for i, a := range deprioritized {
		depri[i] = NormalizeAddr(a)
	}
	cands, err := suitable(desc, sel, depri)
	if err != nil {
		return nil, err
	}
	window := inLatencyWindow(cands, t.o.LocalThreshold)
	t.mu.RLock()
	defer t.mu.RUnlock()
	// Servers removed since desc was read are skipped.
	live := filter(window, func(sd ServerDescription) bool { return t.servers[sd.Addr] != nil })
	if len(live) == 0 {
		return nil, nil
	}
	t.randMu.Lock()
	pick := pickTwoChoices(live, func(addr string) int64 { return t.servers[addr].opCount.Load() }, t.rand)
	t.randMu.Unlock()
	s := t.servers[pick.Addr]
	s.Inc()
	return s, nil
}

func (t *Topology) selectionError(sel Selector, desc Description, cause error) error {
	// The most telling cause is a server's own error, when there is one.
	if cause == nil || errors.Is(cause, context.DeadlineExceeded) {
		for _, s := range desc.Servers {
			if s.Err != nil {
				cause = fmt.Errorf("%w; last server error: %v", cause, s.Err)
				break
			}
		}
	}
	return &mongoerr.ServerSelectionError{Reason: selectorName(sel), Topology: desc.String(), Err: cause}
}

// newServer builds the Server for addr and its (paused) pool.
func (t *Topology) newServer(addr string) *Server {
	po := t.o.Pool
	// Errors establishing connections nobody checked out (minPoolSize) still
	// tell SDAM the server is unreachable.
	po.EstablishError = func(err error, generation uint64) { t.handleAppError(addr, err, generation, true) }
	if t.o.Conn.LoadBalanced {
		po.EstablishError = func(err error, _ uint64) { t.handleEstablishErrorLB(addr, err) }
	}
	return &Server{addr: addr, t: t, pool: pool.New(addr, po)}
}

// apply feeds one check outcome into the description; the caller holds
// t.mu. It adds and removes servers to match, marks pools ready and
// publishes change events.
func (t *Topology) applyLocked(sd ServerDescription) {
	if t.closed {
		return
	}
	sd.LastUpdateTime = t.o.Now()
	prev := t.desc
	next := prev.Apply(t.o, sd)
	t.desc = next
	close(t.changed)
	t.changed = make(chan struct{})

	m := t.o.Monitor
	for _, ns := range next.Servers {
		ps, existed := prev.Server(ns.Addr)
		if !existed {
			s := t.newServer(ns.Addr)
			t.servers[ns.Addr] = s
			if t.connected {
				t.queueServerOpening(ns.Addr)
				t.startMonitorLocked(s)
			}
			continue
		}
		if ns.Kind == ServerUnknown && ps.Kind == RSPrimary && ns.Addr != sd.Addr {
			// Superseded by a newer primary: find out what it is now.
			t.servers[ns.Addr].requestCheck()
		}
		if !ps.Equal(ns) && t.connected {
			p, n := ps.Event(), ns.Event()
			t.queue(func() {
				if m != nil && m.ServerDescriptionChanged != nil {
					m.ServerDescriptionChanged(&event.ServerDescriptionChangedEvent{Address: n.Address, Previous: p, New: n})
				}
			})
		}
	}
	if ns, ok := next.Server(sd.Addr); ok && (ns.Kind.DataBearing() || (t.o.Direct && ns.Available())) {
		t.servers[sd.Addr].pool.Ready()
	}
	for _, ns := range next.Servers {
		if s := t.servers[ns.Addr]; s != nil {
			s.writable.Store(acceptsWrites(next.Kind, ns))
		}
	}
	for _, ps := range prev.Servers {
		if next.contains(ps.Addr) {
			continue
		}
		if s := t.servers[ps.Addr]; s != nil {
			delete(t.servers, ps.Addr)
			s.writable.Store(false)
			s.stopMonitor()
			t.wg.Add(1)
			go func() {
				defer t.wg.Done()
				ctx, cancel := withTimeout(context.Background(), t.o.ServerSelectionTimeout)
				defer cancel()
				_ = s.pool.Close(ctx)
			}()
			if t.connected {
				t.queueServerClosed(ps.Addr)
			}
		}
	}
	if t.connected && !descEqual(prev, next) {
		p, n := prev.Event(), next.Event()
		t.queue(func() {
			if m != nil && m.TopologyDescriptionChanged != nil {
				m.TopologyDescriptionChanged(&event.TopologyDescriptionChangedEvent{Previous: p, New: n})
			}
		})
	}
	if len(next.Servers) == 0 && len(prev.Servers) > 0 {
		t.o.Logger.Warn("topology: the last server was removed from the topology", "setName", next.SetName)
	}
}

func descEqual(a, b Description) bool {
	if a.Kind != b.Kind || a.SetName != b.SetName || len(a.Servers) != len(b.Servers) ||
		errString(a.CompatibilityErr) != errString(b.CompatibilityErr) {
		return false
	}
	for i := range a.Servers {
		if !a.Servers[i].Equal(b.Servers[i]) {
			return false
		}
	}
	return true
}

// queue records an event to publish once t.mu is released.
func (t *Topology) queue(f func()) { t.events = append(t.events, f) }

func (t *Topology) queueServerOpening(addr string) {
	m := t.o.Monitor
	t.queue(func() {
		if m != nil && m.ServerOpening != nil {
			m.ServerOpening(&event.ServerOpeningEvent{Address: addr})
		}
	})
}

func (t *Topology) queueServerClosed(addr string) {
	m := t.o.Monitor
	t.queue(func() {
		if m != nil && m.ServerClosed != nil {
			m.ServerClosed(&event.ServerClosedEvent{Address: addr})
		}
	})
}

// unlockAndFlush releases t.mu and then publishes queued events, in order
// and outside the lock so a handler may call back into the Topology.
func (t *Topology) unlockAndFlush() {
	evs := t.events
	t.events = nil
	t.eventMu.Lock()
	t.mu.Unlock()
	defer t.eventMu.Unlock()
	for _, f := range evs {
		f()
	}
}

// applyCheck records the outcome of a monitor check: a failed check marks
// the server Unknown and clears its pool, as one step.
func (t *Topology) applyCheck(sd ServerDescription) {
	t.mu.Lock()
	t.applyCheckLocked(sd)
	t.unlockAndFlush()
}

func (t *Topology) applyCheckLocked(sd ServerDescription) {
	s := t.servers[sd.Addr]
	if s == nil || t.closed {
		return
	}
	t.applyLocked(sd)
	if sd.Err != nil {
		s.pool.Clear(sd.Err, isNetworkTimeout(sd.Err))
	}
}

// handleAppError applies the SDAM rules for an error met by an
// application operation on the server at addr over a connection of the
// given pool generation.
func (t *Topology) handleAppError(addr string, err error, generation uint64, beforeHandshake bool) {
	if err == nil || poolSideError(err) {
		return
	}
	if t.o.Conn.LoadBalanced {
		// Establishment errors come through handleEstablishErrorLB,
		// the others through handleConnErrorLB, with the serviceId.
		return
	}
	t.mu.Lock()
	defer t.unlockAndFlush()
	s := t.servers[addr]
	if s == nil || t.closed {
		return
	}
	if generation < s.pool.Generation() {
		return // the pool was cleared since this connection was made
	}
	cur, _ := t.desc.Server(addr)
	if sc, ok := classifyStateChange(err); ok {
		if compareTopologyVersion(cur.TopologyVersion, sc.topologyVersion) >= 0 {
			return // we already know of a state at least this new
		}
		t.applyLocked(ServerDescription{Addr: addr, Kind: ServerUnknown, Err: err, Description: conn.Description{TopologyVersion: sc.topologyVersion}})
		if sc.shutdown {
			s.pool.Clear(err, false)
		}
		s.recheckAfterStateChange()
		return
	}
	if mongoerr.HasErrorLabel(err, mongoerr.LabelSystemOverloaded) {
		return // backpressure: the server is busy, not gone
	}
	network := mongoerr.IsNetworkError(err)
	if network && !beforeHandshake && (isNetworkTimeout(err) || errors.Is(err, context.Canceled)) {
		return // a slow operation, not a dead server
	}
	if network || beforeHandshake {
		t.applyLocked(ServerDescription{Addr: addr, Kind: ServerUnknown, Err: err})
		s.pool.Clear(err, false)
		s.cancelCheck() // and rediscover it now: see monitor.rediscoverNow
	}
}

// selectOnly is trySelect's shortcut for the common case, without
// allocating: a selector that wants the primary (writes, primary reads)
// of a replica set with exactly one primary, or any server of a
// single-server topology, with nothing deprioritized. The one suitable
// server is then the whole latency window and the pick, so the result is
// what the general path would return. Otherwise it returns nil and the
// general path decides.
func (t *Topology) selectOnly(desc Description, sel Selector, deprioritized []string) *Server {
	if len(deprioritized) > 0 {
		return nil
	}
	switch x := sel.(type) {
	case writeSelector:
	case readPrefSelector:
		if x.rp.Mode != readpref.Primary || len(x.rp.TagSets) > 0 || x.rp.MaxStaleness != 0 {
			return nil
		}
	default:
		return nil
	}
	only := -1
	switch desc.Kind {
	case ReplicaSetWithPrimary:
		for i := range desc.Servers {
			if desc.Servers[i].Kind == RSPrimary {
				if only >= 0 {
					return nil
				}
				only = i
			}
		}
	case Single, LoadBalanced:
		if len(desc.Servers) != 1 || !desc.Servers[0].Available() {
			return nil
		}
		only = 0
	default:
		return nil
	}
	if only < 0 {
		return nil
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	s := t.servers[desc.Servers[only].Addr]
	if s != nil {
		s.Inc()
	}
	return s
}

// handleEstablishErrorLB is SDAM error handling, in load-balanced mode, for
// an error establishing a connection: errors before the handshake
// completed are ignored; an authentication error (after it) clears the
// connections of the handshake's service if it would clear a pool. The
// load balancer is never marked Unknown.
func (t *Topology) handleEstablishErrorLB(addr string, err error) {
	var ae *mongoerr.AuthError
	if !errors.As(err, &ae) || ae.ServiceID == nil {
		return
	}
	t.clearServiceIfNeeded(addr, err, *ae.ServiceID)
}

// handleConnErrorLB is SDAM error handling, in load-balanced mode, for an
// error on an established connection of the given service and generation.
func (t *Topology) handleConnErrorLB(addr string, err error, generation uint64, sid *bson.ObjectID) {
	if err == nil || sid == nil || poolSideError(err) {
		return
	}
	t.mu.RLock()
	s := t.servers[addr]
	closed := t.closed
	t.mu.RUnlock()
	if s == nil || closed || generation < s.pool.ServiceGeneration(*sid) {
		return // cleared since this connection was made
	}
	t.clearServiceIfNeeded(addr, err, *sid)
}

// clearServiceIfNeeded clears one service's connections for the errors
// that clear a whole pool otherwise: a network error other than a
// timeout, or a shutdown state change.
func (t *Topology) clearServiceIfNeeded(addr string, err error, sid bson.ObjectID) {
	t.mu.RLock()
	s := t.servers[addr]
	t.mu.RUnlock()
	if s == nil {
		return
	}
	if sc, ok := classifyStateChange(err); ok {
		if sc.shutdown {
			s.pool.ClearService(sid, err)
		}
		return
	}
	if mongoerr.HasErrorLabel(err, mongoerr.LabelSystemOverloaded) {
		return
	}
	if mongoerr.IsNetworkError(err) && !isNetworkTimeout(err) && !errors.Is(err, context.Canceled) {
		s.pool.ClearService(sid, err)
	}
}

// withTimeout is context.WithTimeout where d <= 0 means no timeout (a
// literal zero option), not an expired context.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}
