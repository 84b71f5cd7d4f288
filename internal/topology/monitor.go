package topology

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/event"
	"github.com/sturdy-go/sturdy/internal/conn"
	"github.com/sturdy-go/sturdy/internal/mongoerr"
)

// rttAverage is the exponentially weighted moving average of round trip
// times the server selection spec prescribes (alpha 0.2).
type rttAverage struct {
	avg time.Duration
	set bool
}

const rttAlpha = 0.2

// add records a sample and returns the new average. Negative samples (a
// clock step) are ignored.
func (r *rttAverage) add(sample time.Duration) time.Duration {
	if sample < 0 {
		return r.avg
	}
	if !r.set {
		r.avg, r.set = sample, true
		return r.avg
	}
	r.avg = time.Duration(rttAlpha*float64(sample) + (1-rttAlpha)*float64(r.avg))
	return r.avg
}

func (r *rttAverage) reset() { *r = rttAverage{} }

// monitor checks one server by polling hello on its own connection.
type monitor struct {
	t    *Topology
	s    *Server
	opts conn.Options

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

	rtt    rttAverage // owned by the monitor goroutine
	legacy bool       // the server does not know "hello": use isMaster
}

func newMonitor(t *Topology, s *Server) *monitor {
	opts := t.o.Conn
	// Monitoring connections never authenticate (the spec forbids it) and
	// gain nothing from compression.
	opts.Credential = nil
	opts.Compressors = nil
	ctx, cancel := context.WithCancel(context.Background())
	return &monitor{t: t, s: s, opts: opts, ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1), rediscover: make(chan struct{}, 1)}
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

func (m *monitor) stop() {
	m.cancel()
	m.cancelCheck()
}

func (m *monitor) run() {
	defer m.cancelCheck() // closes the connection
	for m.ctx.Err() == nil {
		prev := m.s.Description().Kind
		sd, cancelled := m.check()
		if m.ctx.Err() != nil {
			return
		}
		if !cancelled {
			m.t.applyCheck(sd)
			// A known server that fails with a network error gets one
			// immediate retry: a single dropped connection should not cost
			// a whole heartbeat of unavailability.
			if sd.Err != nil && mongoerr.IsNetworkError(sd.Err) && prev != ServerUnknown && prev != PossiblePrimary {
				continue
			}
		}
		m.wait()
	}
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

// check runs one hello and returns the resulting description; cancelled
// reports that an application error cancelled it meanwhile.
func (m *monitor) check() (sd ServerDescription, cancelled bool) {
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
	m.cancelled = false
	c := m.conn
	m.mu.Unlock()

	addr := m.s.addr
	mon := m.t.o.Monitor
	if mon != nil && mon.ServerHeartbeatStarted != nil {
		mon.ServerHeartbeatStarted(&event.ServerHeartbeatStartedEvent{Address: addr})
	}
	timeout := m.opts.DialTimeout
	if timeout <= 0 {
		timeout = defaultConnectTimeout
	}
	start := time.Now()
	var (
		reply  bson.Raw
		sample time.Duration
		err    error
	)
	if c == nil || c.Closed() {
		ctx, cancel := context.WithTimeout(m.ctx, timeout)
		c, err = conn.Dial(ctx, addr, m.opts)
		cancel()
		if err == nil {
			m.mu.Lock()
			if m.cancelled || m.ctx.Err() != nil {
				_ = c.Close()
				err = &mongoerr.NetworkError{Addr: addr, Op: "dial", Err: context.Canceled}
			} else {
				m.conn = c
			}
			m.mu.Unlock()
			reply, sample = c.Description().Raw, c.HandshakeRTT()
		}
	} else {
		reply, err = m.hello(c, timeout)
		sample = time.Since(start)
	}
	duration := time.Since(start)
	if err != nil {
		m.mu.Lock()
		cancelled = m.cancelled
		if m.conn != nil {
			_ = m.conn.Close()
			m.conn = nil
		}
		m.mu.Unlock()
		m.rtt.reset()
		if mon != nil && mon.ServerHeartbeatFailed != nil {
			mon.ServerHeartbeatFailed(&event.ServerHeartbeatFailedEvent{Address: addr, Duration: duration, Failure: err})
		}
		return unknownServer(addr, err), cancelled
	}
	sd = NewServerDescription(addr, reply, m.rtt.add(sample))
	if mon != nil && mon.ServerHeartbeatSucceeded != nil {
		mon.ServerHeartbeatSucceeded(&event.ServerHeartbeatSucceededEvent{Address: addr, Duration: duration, Reply: reply})
	}
	return sd, false
}

// hello runs hello (or legacy isMaster for servers that lack hello) on an
// established monitoring connection.
func (m *monitor) hello(c *conn.Conn, timeout time.Duration) (bson.Raw, error) {
	ctx, cancel := context.WithTimeout(m.ctx, timeout)
	defer cancel()
	name := "hello"
	if m.legacy {
		name = "isMaster"
	}
	reply, err := c.RoundTrip(ctx, "admin", bson.D{{Key: name, Value: int32(1)}, {Key: "helloOk", Value: true}})
	var ce *mongoerr.CommandError
	if !m.legacy && errors.As(err, &ce) && ce.Code == 59 { // CommandNotFound
		m.legacy = true
		return m.hello(c, timeout)
	}
	return reply, err
}
