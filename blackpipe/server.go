package blackpipe

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Options configures a Server. The zero value is a plain standalone server on
// an ephemeral loopback port with the built-in responders on.
type Options struct {
	Addr           string        // listen address; default "127.0.0.1:0"
	TLS            *tls.Config   // optional TLS
	ReceiveTimeout time.Duration // default timeout of Receive when ctx has no deadline; default 10s
	MaxWireVersion int32         // default 25 (MongoDB 8.0)
	// Compressors lists the compressors this server accepts in hello
	// negotiation ("zstd", "zlib", "snappy"); default none.
	Compressors []string
	// MaxAwaitTime caps how long the built-in hello holds an awaitable hello
	// (a streaming monitor's check) before answering; default 500ms. A real
	// server holds it for the client's maxAwaitTimeMS (the heartbeat
	// frequency, 10s by default), but the official Go driver's Disconnect can
	// then wait that long for its monitor, so a short hold keeps tests fast
	// while monitors still do not spin.
	MaxAwaitTime time.Duration
	// NoDefaults turns off the built-in responders (hello, isMaster, the
	// legacy OP_QUERY hello, buildInfo, ping, endSessions).
	NoDefaults bool
	// Hello fields are merged over (replacing) the default hello reply, e.g.
	// setName and hosts for a replica set member.
	Hello bson.D
	// Handler is consulted after the autoresponders and before the built-in
	// defaults.
	Handler Handler
	// AcceptConn, if set and it returns false, closes a new connection at once
	// (connection shedding).
	AcceptConn  func(c *Conn) bool
	OnConnClose func(c *Conn)
	// PartialMessageTimeout bounds how long the rest of a message may take
	// once its first byte has arrived; a client that stalls mid-message
	// (slowloris, a half-sent message) is disconnected. Default 30s;
	// negative means no limit.
	PartialMessageTimeout time.Duration
	// IdleTimeout, if positive, disconnects a client that sends nothing for
	// that long between messages. Default 0: no limit, as mongod.
	IdleTimeout time.Duration
	// OnBadRequest is called for a request whose framing is intact but
	// whose command cannot be decoded because a document nests deeper than
	// wire.MaxDocumentNesting (r.Command is nil, r.Name empty). It must
	// resolve r. When nil, the request is answered with mongod's error
	// (15 Overflow); either way the connection stays open, as with mongod.
	OnBadRequest func(r *Request, err error)
	Logf         func(format string, args ...any)
}

// DefaultPartialMessageTimeout is Options.PartialMessageTimeout's default.
const DefaultPartialMessageTimeout = 30 * time.Second

// Handler handles a request; it returns false to pass it on (to the built-in
// defaults, then to the Receive queue). A handler that returns true must
// resolve the request (reply, fault or NoReply), possibly later from another
// goroutine: the connection reads its next message only after that.
type Handler func(r *Request) bool

// DefaultReceiveTimeout is how long Receive waits when its context has no
// deadline, so a test that expects a request it never gets fails instead of
// hanging.
const DefaultReceiveTimeout = 10 * time.Second

// DefaultMaxAwaitTime is the default Options.MaxAwaitTime.
const DefaultMaxAwaitTime = 500 * time.Millisecond

// DefaultMaxWireVersion is the wire version the server claims by default
// (MongoDB 8.0).
const DefaultMaxWireVersion = 25

// Errors returned by Server and Request methods.
var (
	ErrServerClosed   = errors.New("blackpipe: server closed")
	ErrConnClosed     = errors.New("blackpipe: connection closed")
	ErrAlreadyReplied = errors.New("blackpipe: request already resolved")
)

// ReceiveError is returned by Receive when no matching request arrives in
// time or the server closes. It unwraps to the context error or
// ErrServerClosed.
type ReceiveError struct {
	Matcher string   // description of the matcher
	Queued  []string // names of the requests still queued that did not match
	Err     error
}

func (e *ReceiveError) Error() string {
	msg := fmt.Sprintf("blackpipe: Receive(%s): no matching request: %v", e.Matcher, e.Err)
	if len(e.Queued) > 0 {
		msg += fmt.Sprintf(" (%d unmatched queued: %v)", len(e.Queued), e.Queued)
	}
	return msg
}

func (e *ReceiveError) Unwrap() error { return e.Err }

// Server is a scriptable MongoDB wire-protocol server.
type Server struct {
	opts     Options
	ln       net.Listener
	addr     string
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	closeErr error
	once     sync.Once

	nextConnID  atomic.Int64
	nextReplyID atomic.Int32
	requests    atomic.Int64
	shed        atomic.Bool
	// bytesIn and bytesOut count the wire messages read and written.
	bytesIn, bytesOut atomic.Int64

	mu        sync.Mutex
	closed    bool
	conns     map[int64]*Conn
	queue     []*Request
	queueWake chan struct{} // closed and replaced whenever the queue grows
	autos     []*autoresponder
	nextAuto  int64

	helloMu      sync.Mutex
	hello        bson.D // Options.Hello plus UpdateHello changes
	processID    bson.ObjectID
	topoCounter  int64
	helloChanged chan struct{} // closed and replaced on UpdateHello
}

type autoresponder struct {
	id int64
	m  Matcher
	h  Handler
}

// Start starts a server on an ephemeral loopback port and closes it when the
// test ends. It logs through t.Logf.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWithOptions(t, Options{})
}

// StartWithOptions is Start with options; it fails the test if the server
// cannot listen.
func StartWithOptions(t testing.TB, o Options) *Server {
	t.Helper()
	if o.Logf == nil {
		o.Logf = t.Logf
	}
	s, err := Listen(o)
	if err != nil {
		t.Fatalf("blackpipe: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Listen starts a server outside of a test (mongosim, the CLI). Call Close to
// stop it.
func Listen(o Options) (*Server, error) {
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	if o.ReceiveTimeout <= 0 {
		o.ReceiveTimeout = DefaultReceiveTimeout
	}
	if o.MaxAwaitTime <= 0 {
		o.MaxAwaitTime = DefaultMaxAwaitTime
	}
	if o.MaxWireVersion == 0 {
		o.MaxWireVersion = DefaultMaxWireVersion
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", o.Addr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		opts:         o,
		ln:           ln,
		addr:         ln.Addr().String(),
		ctx:          ctx,
		cancel:       cancel,
		conns:        make(map[int64]*Conn),
		queueWake:    make(chan struct{}),
		hello:        append(bson.D(nil), o.Hello...),
		processID:    bson.NewObjectID(),
		helloChanged: make(chan struct{}),
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

func (s *Server) logf(format string, args ...any) {
	if s.opts.Logf != nil {
		s.opts.Logf("blackpipe %s: "+format, append([]any{s.addr}, args...)...)
	}
}

// Addr returns the listen address, "127.0.0.1:port".
func (s *Server) Addr() string { return s.addr }

// URI returns a connection string for a direct connection to this server.
func (s *Server) URI() string {
	u := "mongodb://" + s.addr + "/?directConnection=true"
	if s.opts.TLS != nil {
		u += "&tls=true"
	}
	return u
}

// Close closes the listener and every connection, unblocks pending
// NoReply/ReplyAfter/awaitable hellos and Receive calls, and waits for every
// goroutine the server started. It is idempotent.
func (s *Server) Close() error {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		conns := make([]*Conn, 0, len(s.conns))
		for _, c := range s.conns {
			conns = append(conns, c)
		}
		close(s.queueWake)
		s.queueWake = make(chan struct{})
		s.mu.Unlock()

		s.cancel()
		if err := s.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			s.closeErr = err
		}
		for _, c := range conns {
			_ = c.Close()
		}
		s.wg.Wait()
	})
	return s.closeErr
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		raw, err := s.ln.Accept()
		if err != nil {
			if s.ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				s.logf("accept: %v", err)
			}
			return
		}
		if s.shed.Load() {
			_ = raw.Close()
			continue
		}
		c := newConn(s, raw)
		if s.opts.AcceptConn != nil && !s.opts.AcceptConn(c) {
			c.cancel()
			_ = raw.Close()
			continue
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.cancel()
			_ = raw.Close()
			return
		}
		s.conns[c.id] = c
		s.wg.Add(1)
		s.mu.Unlock()
		go c.serve()
	}
}

func (s *Server) removeConn(c *Conn) {
	s.mu.Lock()
	delete(s.conns, c.id)
	s.mu.Unlock()
}

// CloseNewConnections, while on, makes the server accept new connections and
// close them immediately. Existing connections are not affected.
func (s *Server) CloseNewConnections(on bool) { s.shed.Store(on) }

// Connections returns the open connections, oldest first.
func (s *Server) Connections() []*Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Conn, 0, len(s.conns))
	for _, c := range s.conns {
		out = append(out, c)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].id < out[j-1].id; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// NetworkBytes returns the bytes of the wire messages read, and written or
// being written, so far (compressed as sent), for serverStatus.network.
func (s *Server) NetworkBytes() (in, out int64) { return s.bytesIn.Load(), s.bytesOut.Load() }

// Requests returns the total number of requests the server has read.
func (s *Server) Requests() int64 { return s.requests.Load() }

// Autorespond installs a responder consulted before Options.Handler; newer
// autoresponders are consulted first. If h returns false the request passes
// on. cancel removes it.
func (s *Server) Autorespond(m Matcher, h Handler) (cancel func()) {
	if m == nil {
		m = Any
	}
	s.mu.Lock()
	s.nextAuto++
	id := s.nextAuto
	s.autos = append(s.autos, &autoresponder{id: id, m: m, h: h})
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for i, a := range s.autos {
			if a.id == id {
				s.autos = append(s.autos[:i:i], s.autos[i+1:]...)
				return
			}
		}
	}
}

func (s *Server) autoresponders() []*autoresponder {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*autoresponder, len(s.autos))
	for i, a := range s.autos {
		out[len(s.autos)-1-i] = a // newest first
	}
	return out
}

func (s *Server) enqueue(r *Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, r)
	close(s.queueWake)
	s.queueWake = make(chan struct{})
}

// Receive pops the oldest queued request that m matches; requests it does not
// match stay queued. A request reaches the queue when no autoresponder,
// Handler or built-in default took it. If ctx has no deadline,
// Options.ReceiveTimeout applies.
func (s *Server) Receive(ctx context.Context, m Matcher) (*Request, error) {
	if m == nil {
		m = Any
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.opts.ReceiveTimeout)
		defer cancel()
	}
	for {
		s.mu.Lock()
		for i, r := range s.queue {
			if m.Match(r) {
				s.queue = append(s.queue[:i:i], s.queue[i+1:]...)
				s.mu.Unlock()
				return r, nil
			}
		}
		closed := s.closed
		wake := s.queueWake
		s.mu.Unlock()
		if closed {
			return nil, s.receiveError(m, ErrServerClosed)
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, s.receiveError(m, ctx.Err())
		}
	}
}

func (s *Server) receiveError(m Matcher, err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := &ReceiveError{Matcher: describe(m), Err: err}
	for _, r := range s.queue {
		e.Queued = append(e.Queued, r.Name)
	}
	return e
}

// UpdateHello merges fields over the hello reply (like Options.Hello), bumps
// the topologyVersion counter and answers pending awaitable hellos, as a
// server does on a state change (for example a step-down).
func (s *Server) UpdateHello(fields bson.D) {
	s.helloMu.Lock()
	defer s.helloMu.Unlock()
	s.hello = mergeDoc(s.hello, fields)
	s.topoCounter++
	close(s.helloChanged)
	s.helloChanged = make(chan struct{})
}

func (s *Server) helloState() (fields bson.D, counter int64, changed <-chan struct{}) {
	s.helloMu.Lock()
	defer s.helloMu.Unlock()
	return append(bson.D(nil), s.hello...), s.topoCounter, s.helloChanged
}

// mergeDoc returns base with each field of over replacing the field of the
// same name, or appended.
func mergeDoc(base, over bson.D) bson.D {
	out := append(bson.D(nil), base...)
	for _, e := range over {
		out = setInPlace(out, e.Key, e.Value)
	}
	return out
}
