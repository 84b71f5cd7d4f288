package topology

import (
	"sync"
	"sync/atomic"

	"github.com/sturdy-go/sturdy/internal/conn"
	"github.com/sturdy-go/sturdy/internal/pool"
)

// Server is one server of the topology: its pool, its monitor and its
// count of operations in progress.
type Server struct {
	addr    string
	t       *Topology
	pool    *pool.Pool
	opCount atomic.Int64
	// writable says whether the server, as last described, is one
	// WriteSelector would choose; set with every description change.
	writable atomic.Bool

	mu      sync.Mutex
	monitor *monitor // nil until the topology connects
}

// Addr is the server's normalized address.
func (s *Server) Addr() string { return s.addr }

// LoadBalanced reports whether the server is the load balancer of a
// load-balanced topology.
func (s *Server) LoadBalanced() bool { return s.t.o.Conn.LoadBalanced }

// Pool is the server's connection pool.
func (s *Server) Pool() *pool.Pool { return s.pool }

// Description returns the server's current description; a server no
// longer in the topology reads as Unknown.
func (s *Server) Description() ServerDescription {
	d := s.t.Description()
	if sd, ok := d.Server(s.addr); ok {
		if sd.Kind == LoadBalancer {
			sd = s.withServiceLimits(sd)
		}
		return sd
	}
	return unknownServer(s.addr, nil)
}

// withServiceLimits fills a load balancer's description, which has no
// wire version or limits (nothing checks it), with those of the latest
// connection's handshake; before any, the wire version is
// LoadBalancedMinWireVersion, the least a load-balanced deployment has.
// The topology's own description keeps them unset, as the load balancer
// specification says.
func (s *Server) withServiceLimits(sd ServerDescription) ServerDescription {
	h, ok := s.pool.LastHello()
	if !ok {
		sd.MaxWireVersion = LoadBalancedMinWireVersion
		return sd
	}
	sd.MinWireVersion, sd.MaxWireVersion = h.MinWireVersion, h.MaxWireVersion
	sd.MaxBSONObjectSize, sd.MaxMessageSizeBytes, sd.MaxWriteBatchSize = h.MaxBSONObjectSize, h.MaxMessageSizeBytes, h.MaxWriteBatchSize
	return sd
}

// LoadBalancedMinWireVersion is MongoDB 5.0's wire version, the first with
// load balancer support.
const LoadBalancedMinWireVersion = 13

// WireVersionKnown reports whether MaxWireVersion in Description comes
// from a server: false for a load balancer before its first connection.
func (s *Server) WireVersionKnown() bool {
	if !s.LoadBalanced() {
		return true
	}
	_, ok := s.pool.LastHello()
	return ok
}

// Writable reports whether the server, as currently described, accepts
// writes: WriteSelector would choose it. A write selected before the
// server was marked Unknown or seen to step down checks it before it is
// sent, so as not to send it to a server known to have stopped being
// primary. It reads an atomic, not the description.
func (s *Server) Writable() bool { return s.writable.Load() }

// OperationCount is the number of operations selected for this server and
// not yet finished.
func (s *Server) OperationCount() int { return int(s.opCount.Load()) }

// Inc counts one more operation in progress. SelectServer does it for the
// server it returns.
func (s *Server) Inc() { s.opCount.Add(1) }

// Dec counts one operation as finished.
func (s *Server) Dec() { s.opCount.Add(-1) }

// ProcessError applies the SDAM error-handling rules to an error an
// application operation met on this server. connGeneration is the pool
// generation of the connection used; beforeHandshakeComplete says the
// error happened while the connection was being established (dial, hello
// or authentication). Errors from a connection older than the pool's last
// clear are ignored, as are errors the pool raised by itself.
func (s *Server) ProcessError(err error, connGeneration uint64, beforeHandshakeComplete bool) {
	s.t.handleAppError(s.addr, err, connGeneration, beforeHandshakeComplete)
}

// ProcessConnError is ProcessError for an error met on an established
// connection c of this server; in load-balanced mode it scopes a clear to
// c's service and leaves the description alone.
func (s *Server) ProcessConnError(err error, c *conn.Conn) {
	if s.t.o.Conn.LoadBalanced {
		s.t.handleConnErrorLB(s.addr, err, c.Generation(), c.ServiceID())
		return
	}
	s.t.handleAppError(s.addr, err, c.Generation(), false)
}

// currentMonitor is the server's monitor, nil when it has none.
func (s *Server) currentMonitor() *monitor {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.monitor
}

// RequestImmediateCheck asks this server's monitor to check it now.
func (s *Server) RequestImmediateCheck() { s.requestCheck() }

func (s *Server) requestCheck() {
	if m := s.currentMonitor(); m != nil {
		m.requestCheck()
	}
}

// recheckAfterStateChange requests a check after a state-change error,
// cancelling an awaited streaming check (see monitor.restartStream).
func (s *Server) recheckAfterStateChange() {
	if m := s.currentMonitor(); m != nil {
		m.restartStream()
	}
}

func (s *Server) cancelCheck() {
	if m := s.currentMonitor(); m != nil {
		m.cancelCheck()
	}
}

func (s *Server) stopMonitor() {
	if m := s.currentMonitor(); m != nil {
		m.stop()
	}
}

// startMonitorLocked starts the monitor goroutine; t.mu is held.
func (t *Topology) startMonitorLocked(s *Server) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.monitor != nil {
		return
	}
	m := newMonitor(t, s)
	s.monitor = m
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		m.run()
	}()
}
