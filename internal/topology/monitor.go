package topology

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/event"
	"github.com/sturdy-go/sturdy/internal/conn"
	"github.com/sturdy-go/sturdy/mongoerr"
)

// monitor checks one server on its own connection. With the streaming
// protocol (server monitoring spec) it sends one awaitable hello with
// exhaustAllowed and then reads the replies the server pushes whenever its
// state changes, while a second goroutine (runRTT) measures latency on
// another connection. Otherwise it polls hello every heartbeat interval.
type monitor struct {
	t      *Topology
	s      *Server
	opts   conn.Options
	stream bool // the streaming protocol is allowed (serverMonitoringMode)

	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{} // an immediate check was requested
	// rediscover is signalled by rediscoverNow: an application's error
	// marked the server Unknown, and the minimum heartbeat interval no
	// longer holds back the next check (see wait).
	rediscover chan struct{}

	mu        sync.Mutex
	conn      *conn.Conn
	cancelled bool // the current check was cancelled by an application error
	awaiting  bool // the current check awaits a streamed reply
	restart   bool // the awaited check was cancelled to check again at once
	reconnect bool // the next check must not await: restartStream came between checks

	rtt rttStats
	// Owned by the monitor goroutine.
	legacy     bool             // the server does not know "hello": use isMaster
	rttStarted bool             // runRTT is running
	lastTV     *TopologyVersion // topologyVersion of the last successful check
}

func newMonitor(t *Topology, s *Server) *monitor {
	opts := t.o.Conn
	// Monitoring connections never authenticate (the spec forbids it) and
	// gain nothing from compression.
	opts.Credential = nil
	opts.Compressors = nil
	ctx, cancel := context.WithCancel(context.Background())
	return &monitor{t: t, s: s, opts: opts, stream: streamingEnabled(t.o.ServerMonitoringMode),
		ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1), rediscover: make(chan struct{}, 1)}
}

func (m *monitor) requestCheck() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// rediscoverNow requests a check that the minimum heartbeat interval does
// not hold back: an application error just marked the known server
// Unknown (a network error, or a state change with a newer
// topologyVersion), and no operation can select it until it is checked.
// Such checks need a fresh transition of the server to Unknown each, so
// they are bounded by application errors on healthy connections and by
// the server's own state changes, not by anything the monitor does.
func (m *monitor) rediscoverNow() {
	select {
	case m.rediscover <- struct{}{}:
	default:
	}
	m.requestCheck()
}

// cancelCheck aborts a check in progress and drops the connection: an
// application saw the server fail, so what the check would say is stale.
// Closing the connection also interrupts a streaming read.
func (m *monitor) cancelCheck() {
	m.mu.Lock()
	m.cancelled = true
	c := m.conn
	m.conn = nil
	m.mu.Unlock()
	m.rediscoverNow()
	if c != nil {
		_ = c.Close()
	}
}

// restartStream is how an application's state-change error requests a
// check. A streaming monitor would, as the spec says, ignore the request
// until the server's next reply, up to heartbeatFrequencyMS later; a real
// state change has been pushed already, but an error the server's state
// does not explain (failCommand, a proxy) would leave the server Unknown
// that long. So an awaited check is cancelled and a new connection's
// handshake checks the server at once.
func (m *monitor) restartStream() {
	m.mu.Lock()
	c := m.conn
	if c != nil && m.awaiting {
		m.restart = true
		m.conn = nil
	} else {
		c = nil
		m.reconnect = true
	}
	m.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
	m.rediscoverNow()
}

func (m *monitor) stop() {
	m.cancel()
	m.cancelCheck()
}

func (m *monitor) run() {
	defer m.cancelCheck() // closes the connection
	for m.ctx.Err() == nil {
		prev := m.s.Description().Kind
		sd, cancelled, restart := m.check()
		if m.ctx.Err() != nil {
			return
		}
		if restart {
			continue // the server is Unknown already; reconnect at once
		}
		if cancelled {
			m.wait()
			continue
		}
		m.t.applyCheck(sd)
		supportsStreaming := sd.Err == nil && sd.Kind != ServerUnknown && sd.TopologyVersion != nil
		if m.stream && supportsStreaming && !m.rttStarted {
			m.rttStarted = true
			m.t.wg.Add(1)
			go func() {
				defer m.t.wg.Done()
				m.runRTT()
			}()
		}
		// Streaming: the next check is the next awaited reply, no sleep.
		if m.stream && (supportsStreaming || m.streaming()) {
			continue
		}
		// A known server that fails with a network error gets one
		// immediate retry: a single dropped connection should not cost
		// a whole heartbeat of unavailability.
		if sd.Err != nil && mongoerr.IsNetworkError(sd.Err) && prev != ServerUnknown && prev != PossiblePrimary {
			continue
		}
		m.wait()
	}
}

// streaming reports that the monitoring connection has a streamed reply
// pending.
func (m *monitor) streaming() bool {
	m.mu.Lock()
	c := m.conn
	m.mu.Unlock()
	return c != nil && c.Streaming()
}

// wait sleeps until the heartbeat interval passes or a check is requested,
// but never less than the minimum heartbeat interval, unless an
// application error marked the server Unknown meanwhile (rediscoverNow).
func (m *monitor) wait() {
	start := time.Now()
	t := time.NewTimer(m.t.o.HeartbeatInterval)
	select {
	case <-m.ctx.Done():
	case <-t.C:
	case <-m.wake:
	}
	t.Stop()
	select {
	case <-m.rediscover:
		return
	default:
	}
	if rest := m.t.o.MinHeartbeatInterval - time.Since(start); rest > 0 {
		t := time.NewTimer(rest)
		select {
		case <-m.ctx.Done():
		case <-t.C:
		case <-m.rediscover:
		}
		t.Stop()
	}
}

// connectTimeout bounds each check (connectTimeoutMS); 0 means none.
func (m *monitor) connectTimeout() time.Duration { return m.opts.DialTimeout }

// check runs one hello, or reads the next streamed one, and returns the
// resulting description; cancelled reports that an application error
// cancelled it meanwhile.
// restart reports that restartStream cancelled it.
func (m *monitor) check() (sd ServerDescription, cancelled, restart bool) {
	c, fresh, awaited := m.beginCheck()
	addr := m.s.addr
	mon := m.t.o.Monitor
	mon.PublishServerHeartbeatStarted(&event.ServerHeartbeatStartedEvent{Address: addr, Awaited: awaited})
	start := time.Now()
	reply, hs, err := m.exchange(c, fresh, awaited, start)
	duration := time.Since(start)
	if err != nil {
		m.mu.Lock()
		cancelled, restart = m.cancelled, m.restart
		if m.conn != nil {
			_ = m.conn.Close()
			m.conn = nil
		}
		m.mu.Unlock()
		m.rtt.reset()
		m.lastTV = nil
		mon.PublishServerHeartbeatFailed(&event.ServerHeartbeatFailedEvent{Address: addr, Duration: duration, Failure: err, Awaited: awaited})
		return unknownServer(addr, err), cancelled, restart
	}
	avg, minRTT := m.rtt.get()
	if hs != nil {
		sd = fromHello(addr, *hs, avg)
	} else {
		sd = NewServerDescription(addr, reply, avg)
	}
	sd.MinRTT = minRTT
	m.lastTV = nil
	if sd.Err == nil {
		m.lastTV = sd.TopologyVersion
	}
	mon.PublishServerHeartbeatSucceeded(&event.ServerHeartbeatSucceededEvent{Address: addr, Duration: duration, Reply: reply, Awaited: awaited})
	return sd, false, false
}

// beginCheck consumes the requests this check satisfies and decides how
// it runs: on connection c, on a new connection (fresh), or by waiting
// for a streamed or awaitable reply (awaited).
func (m *monitor) beginCheck() (c *conn.Conn, fresh, awaited bool) {
	// A request made before this check starts is satisfied by it.
	select {
	case <-m.wake:
	default:
	}
	select {
	case <-m.rediscover:
	default:
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cancelled, m.restart = false, false
	c = m.conn
	if m.reconnect && c != nil && m.stream {
		// A streaming connection cannot send a plain hello while a reply
		// is pending: check with a new connection's handshake.
		_ = c.Close()
		m.conn, c = nil, nil
	}
	m.reconnect = false
	fresh = c == nil || c.Closed()
	// A check is awaited when the server may hold it until its state
	// changes: reading a streamed reply or starting a stream. It is marked
	// so under the same lock that consumed reconnect, so a state-change
	// error arriving from here on finds it awaiting and closes its
	// connection (restartStream), instead of being noted for a next check
	// that this one would hold back for up to the heartbeat interval.
	awaited = !fresh && (c.Streaming() || (m.stream && m.lastTV != nil))
	m.awaiting = awaited
	return c, fresh, awaited
}

// exchange gets the check's hello reply: from a new connection's
// handshake (hs, already parsed), from the stream, or from a hello on c.
// It feeds the RTT samples a check may take.
func (m *monitor) exchange(c *conn.Conn, fresh, awaited bool, start time.Time) (reply bson.Raw, hs *conn.Description, err error) {
	timeout := m.connectTimeout()
	switch {
	case fresh:
		return m.dialCheck(timeout)
	case awaited:
		// The server may wait up to maxAwaitTimeMS (the heartbeat
		// interval) before it replies.
		if timeout > 0 {
			timeout += m.t.o.HeartbeatInterval
		}
		reply, err = m.awaitHello(c, timeout)
		m.mu.Lock()
		m.awaiting = false
		m.mu.Unlock()
		return reply, nil, err
	default:
		reply, err = m.hello(c, timeout)
		if err == nil {
			m.rtt.add(time.Since(start))
		}
		return reply, nil, err
	}
}

// dialCheck opens the monitoring connection; its handshake is the check.
func (m *monitor) dialCheck(timeout time.Duration) (bson.Raw, *conn.Description, error) {
	addr := m.s.addr
	ctx, cancel := withTimeout(m.ctx, timeout)
	c, err := conn.Dial(ctx, addr, m.opts)
	cancel()
	if err != nil {
		return nil, nil, err
	}
	m.mu.Lock()
	if m.cancelled || m.ctx.Err() != nil {
		_ = c.Close()
		err = &mongoerr.NetworkError{Addr: addr, Op: "dial", Err: context.Canceled}
	} else {
		m.conn = c
	}
	m.mu.Unlock()
	d := c.Description()
	m.rtt.add(c.HandshakeRTT())
	return d.Raw, &d, err
}

func (m *monitor) helloName() string {
	if m.legacy {
		return "isMaster"
	}
	return "hello"
}

// hello runs hello (or legacy isMaster for servers that lack hello) on an
// established monitoring connection.
func (m *monitor) hello(c *conn.Conn, timeout time.Duration) (bson.Raw, error) {
	ctx, cancel := withTimeout(m.ctx, timeout)
	defer cancel()
	reply, err := c.RoundTrip(ctx, "admin", bson.D{{Key: m.helloName(), Value: int32(1)}, {Key: "helloOk", Value: true}})
	if !m.legacy && isCommandNotFound(err) {
		m.legacy = true
		return m.hello(c, timeout)
	}
	return reply, err
}

// awaitHello reads the next streamed reply, or starts the stream with an
// awaitable hello carrying the last topologyVersion and exhaustAllowed.
func (m *monitor) awaitHello(c *conn.Conn, timeout time.Duration) (bson.Raw, error) {
	ctx, cancel := withTimeout(m.ctx, timeout)
	defer cancel()
	var (
		r   *conn.Reply
		err error
	)
	if c.Streaming() {
		r, err = c.ReadReply(ctx)
	} else {
		tv := m.lastTV
		cmd, merr := bson.Marshal(bson.D{
			{Key: m.helloName(), Value: int32(1)},
			{Key: "helloOk", Value: true},
			{Key: "topologyVersion", Value: bson.D{{Key: "processId", Value: tv.ProcessID}, {Key: "counter", Value: tv.Counter}}},
			{Key: "maxAwaitTimeMS", Value: m.t.o.HeartbeatInterval.Milliseconds()},
		})
		if merr != nil {
			return nil, merr
		}
		r, err = c.Send(ctx, &conn.Request{DB: "admin", Command: cmd, ExhaustAllowed: true})
	}
	if r == nil {
		return nil, err
	}
	return r.Body, err
}

func isCommandNotFound(err error) bool {
	var ce *mongoerr.CommandError
	return errors.As(err, &ce) && ce.Code == mongoerr.CodeCommandNotFound
}
