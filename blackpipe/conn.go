package blackpipe

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/internal/bsond"
	"github.com/sturdy-go/sturdy/internal/rawdoc"
	"github.com/sturdy-go/sturdy/wire"
)

// Conn is one client connection to a Server.
type Conn struct {
	s      *Server
	id     int64
	nc     net.Conn // what we read and write (TLS-wrapped if TLS is on)
	tcp    net.Conn // the underlying TCP connection, for Reset
	ctx    context.Context
	cancel context.CancelFunc

	writeMu sync.Mutex

	mu      sync.Mutex
	appName string
	helloed bool
	values  map[any]any

	closeOnce sync.Once
	closeErr  error
}

func newConn(s *Server, raw net.Conn) *Conn {
	c := &Conn{s: s, id: s.nextConnID.Add(1), tcp: raw, nc: raw}
	if s.opts.TLS != nil {
		c.nc = tls.Server(raw, s.opts.TLS)
	}
	c.ctx, c.cancel = context.WithCancel(s.ctx)
	return c
}

// ID returns the connection's id, also reported as connectionId in hello.
func (c *Conn) ID() int64 { return c.id }

// RemoteAddr returns the client's address.
func (c *Conn) RemoteAddr() net.Addr { return c.tcp.RemoteAddr() }

// AppName returns client.application.name from this connection's first
// hello, or "".
func (c *Conn) AppName() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.appName
}

// Context is canceled when the connection or the server closes.
func (c *Conn) Context() context.Context { return c.ctx }

// Value returns per-connection state stored with SetValue.
func (c *Conn) Value(key any) any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.values[key]
}

// SetValue stores per-connection state for handlers (for example
// authentication state).
func (c *Conn) SetValue(key, v any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.values == nil {
		c.values = make(map[any]any)
	}
	c.values[key] = v
}

// Close closes the connection (FIN). It is idempotent.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		c.cancel()
		err := c.nc.Close()
		if err != nil && !errors.Is(err, net.ErrClosed) {
			c.closeErr = err
		}
	})
	return c.closeErr
}

// reset closes the connection with a TCP RST instead of a FIN.
func (c *Conn) reset() error {
	if tc, ok := c.tcp.(*net.TCPConn); ok {
		if err := tc.SetLinger(0); err != nil {
			return err
		}
	}
	c.closeOnce.Do(func() {
		c.cancel()
		// Close the TCP connection itself: closing a TLS conn would first try
		// to send close_notify.
		if err := c.tcp.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			c.closeErr = err
		}
	})
	return c.closeErr
}

// hangup closes with FIN, first shutting down the write side so the FIN goes
// out even if the client has sent more data we never read.
func (c *Conn) hangup() error {
	if tc, ok := c.tcp.(*net.TCPConn); ok && c.nc == c.tcp {
		_ = tc.CloseWrite()
	}
	return c.Close()
}

// write writes msg, then body if it is not nil (one writev: a large
// reply's header and its body, which is not copied after the header).
func (c *Conn) write(msg, body []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if c.ctx.Err() != nil {
		return ErrConnClosed
	}
	// Counted before the write, so a client that has read the reply sees
	// it counted.
	c.s.bytesOut.Add(int64(len(msg) + len(body)))
	var err error
	if body == nil {
		_, err = c.nc.Write(msg)
	} else {
		bufs := net.Buffers{msg, body}
		_, err = bufs.WriteTo(c.nc)
	}
	if err != nil {
		return fmt.Errorf("blackpipe: write to conn %d: %w", c.id, err)
	}
	return nil
}

// serve is the connection's one reader goroutine. It reads the next message
// only after the current request is resolved.
func (c *Conn) serve() {
	s := c.s
	defer s.wg.Done()
	defer func() {
		_ = c.Close()
		s.removeConn(c)
		if s.opts.OnConnClose != nil {
			s.opts.OnConnClose(c)
		}
	}()
	partial := s.opts.PartialMessageTimeout
	if partial == 0 {
		partial = DefaultPartialMessageTimeout
	}
	mr := newMessageReader(c.nc, partial, s.opts.IdleTimeout)
	var next []byte // a message read while the previous request was pending
	for {
		b := next
		next = nil
		if b == nil {
			var ok bool
			if b, ok = c.read(mr, true); !ok {
				return
			}
		}
		s.bytesIn.Add(int64(len(b)))
		r, err := c.decodeRequest(b)
		if err != nil {
			if r := c.badRequest(b, err); r != nil {
				s.logf("conn %d: refused request %d: %v", c.id, r.RequestID, err)
				c.answerBad(r, err)
				continue
			}
			if c.answerLegacy(b, err) {
				continue
			}
			s.logf("conn %d: malformed request: %v; closing", c.id, err)
			return
		}
		s.requests.Add(1)
		if !c.dispatch(r) {
			return
		}
		if r.moreToCome() || r.isFinished() {
			continue // answered already, as most requests are
		}
		select {
		case <-r.doneChan():
			continue
		case <-r.watchChan():
		case <-c.ctx.Done():
			return
		}
		// r is streaming or waiting long (WatchClose): read on, so that a
		// client closing the connection ends the wait at once. A client
		// may not send while its request is pending; whatever it sends
		// waits until r is resolved.
		var ok bool
		if next, ok = c.read(mr, false); !ok {
			return
		}
		select {
		case <-r.doneChan():
		case <-c.ctx.Done():
			return
		}
	}
}

// read reads the next message; false means the connection is done. idle
// says the client may be idle (IdleTimeout applies); a client whose
// request is still pending is not idle, it is waiting for us.
func (c *Conn) read(mr *messageReader, idle bool) ([]byte, bool) {
	mr.start(idle)
	// The header is read into mr's own buffer: the message then gets one
	// allocation of its size instead of two.
	b, err := wire.ReadMessage(mr, mr.hdr[:0], 0)
	mr.stop()
	if err == nil && len(b) <= wire.HeaderLen {
		b = bytes.Clone(b) // a header alone (malformed): not mr's buffer
	}
	if err != nil {
		if c.ctx.Err() == nil && !isClosedErr(err) {
			c.s.logf("conn %d: read: %v; closing", c.id, err)
		}
		return nil, false
	}
	return b, true
}

// messageReader reads messages through a buffer and sets the read
// deadlines of one message: IdleTimeout until its first byte, then
// PartialMessageTimeout for the rest, so a stalled client cannot hold a
// connection and its buffer forever. The buffer usually holds a whole small
// message after one read, so the partial deadline is set only when a
// message needs another read from the connection: the common case costs
// one read and no deadline changes.
type messageReader struct {
	nc            net.Conn
	br            *bufio.Reader
	partial, idle time.Duration
	started       bool // the current message has begun
	deadline      bool // a read deadline is set
	hdr           [wire.HeaderLen]byte
}

func newMessageReader(nc net.Conn, partial, idle time.Duration) *messageReader {
	m := &messageReader{nc: nc, partial: partial, idle: idle}
	m.br = bufio.NewReader(connReader{m})
	return m
}

func (m *messageReader) start(idle bool) {
	m.started = false
	if idle && m.idle > 0 && m.br.Buffered() == 0 {
		m.setDeadline(time.Now().Add(m.idle))
	}
}

func (m *messageReader) stop() {
	if m.deadline {
		m.setDeadline(time.Time{})
	}
}

func (m *messageReader) setDeadline(t time.Time) {
	_ = m.nc.SetReadDeadline(t)
	m.deadline = !t.IsZero()
}

func (m *messageReader) Read(p []byte) (int, error) {
	n, err := m.br.Read(p)
	if n > 0 && !m.started {
		m.started = true
		if m.deadline {
			m.setDeadline(time.Time{}) // the idle deadline is over
		}
	}
	return n, err
}

// connReader is what the buffer reads from: the connection, under the
// partial-message deadline once a message has begun.
type connReader struct{ m *messageReader }

func (r connReader) Read(p []byte) (int, error) {
	m := r.m
	if m.started && !m.deadline && m.partial > 0 {
		m.setDeadline(time.Now().Add(m.partial))
	}
	return m.nc.Read(p)
}

// MaxNestingErrmsg is mongod's message for a command nested too deeply.
const MaxNestingErrmsg = "BSONObj exceeds maximum nested object depth"

// badRequest returns a Request to answer with an error when a message
// failed to decode only because a document nests too deeply (mongod
// answers those), or nil when the connection must close.
func (c *Conn) badRequest(b []byte, err error) *Request {
	if !errors.Is(err, wire.ErrTooDeep) {
		return nil
	}
	h, herr := wire.ParseHeader(b)
	if herr != nil {
		return nil
	}
	r := &Request{Conn: c, RequestID: h.RequestID, OpCode: h.OpCode}
	switch h.OpCode {
	case wire.OpMsg:
		if len(b) >= wire.HeaderLen+4 {
			r.Flags = wire.MsgFlags(binary.LittleEndian.Uint32(b[wire.HeaderLen:]))
		}
	case wire.OpQuery:
	case wire.OpCompressed:
		// Answered uncompressed, in the original op code's reply form.
		if len(b) < wire.HeaderLen+4 {
			return nil
		}
		r.OpCode = wire.OpCode(int32(binary.LittleEndian.Uint32(b[wire.HeaderLen:])))
		if r.OpCode != wire.OpMsg && r.OpCode != wire.OpQuery {
			return nil
		}
	default:
		return nil
	}
	return r
}

// answerBad answers a badRequest through Options.OnBadRequest or with
// mongod's error, and waits until the request is resolved.
func (c *Conn) answerBad(r *Request, err error) {
	if h := c.s.opts.OnBadRequest; h != nil {
		h(r, err)
	} else {
		_ = r.Reply(bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: MaxNestingErrmsg},
			{Key: "code", Value: int32(15)}, {Key: "codeName", Value: "Overflow"}})
	}
	select {
	case <-r.doneChan():
	case <-c.ctx.Done():
	}
}

func isClosedErr(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET)
}

func (c *Conn) decodeRequest(b []byte) (*Request, error) {
	var msg wire.Msg // its fields are copied into the Request: no need to allocate it
	m, err := wire.DecodeInto(b, 0, &msg)
	if err != nil {
		return nil, err
	}
	r := &Request{
		Conn:       c,
		RequestID:  m.Header.RequestID,
		OpCode:     m.Header.OpCode,
		Compressor: m.Compressor,
	}
	switch {
	case m.Msg != nil:
		r.OpCode = wire.OpMsg
		r.Flags = m.Msg.Flags
		r.Command = m.Msg.Body
		r.Sequences = m.Msg.Sequences
		r.DB = stringField(r.Command, "$db")
	case m.Query != nil:
		if !isCommandNamespace(m.Query.FullCollectionName) {
			return nil, errLegacyQuery
		}
		r.OpCode = wire.OpQuery
		r.queryFlags = m.Query.Flags
		r.Command = m.Query.Query
		if v, err := r.Command.LookupErr("$query"); err == nil {
			if d, ok := v.DocumentOK(); ok {
				r.Command = d
			}
		}
		r.DB, _, _ = strings.Cut(m.Query.FullCollectionName, ".")
	default:
		return nil, fmt.Errorf("unexpected opcode %d from a client", m.Header.OpCode)
	}
	r.Name = commandName(r.Command)
	if r.Name == "" {
		return nil, fmt.Errorf("empty command document")
	}
	return r, nil
}

// stringField returns the string value of doc's first top-level field
// named key ("" if there is none or it is not a string), as LookupErr and
// StringValueOK would, in rawdoc's walk: finding $db, usually the last
// field, with LookupErr took 1.5% of mongosim's CPU per single-document
// command.
func stringField(doc bson.Raw, key string) string {
	var v [1]bson.RawValue
	rawdoc.FirstFields(doc, []string{key}, v[:])
	s, _ := v[0].StringValueOK()
	return s
}

// commandName is wire.CommandName, as one of bsond's shared strings for
// the commands drivers send most: not an allocation per request.
func commandName(cmd bson.Raw) string {
	if len(cmd) < 5 || cmd[4] == 0 {
		return ""
	}
	if i := bytes.IndexByte(cmd[5:], 0); i >= 0 {
		return bsond.Key(cmd[5 : 5+i])
	}
	return ""
}

// dispatch offers r to the autoresponders, the Handler, the built-in
// defaults and finally the Receive queue. It returns false if the connection
// must close (a handler panicked).
func (c *Conn) dispatch(r *Request) (ok bool) {
	s := c.s
	defer func() {
		if p := recover(); p != nil {
			s.logf("conn %d: handler panicked on %q: %v\n%s", c.id, r.Name, p, debug.Stack())
			ok = false
		}
	}()
	if isHello(r.Name) {
		c.noteHello(r)
	}
	for _, a := range s.autoresponders() {
		if a.m.Match(r) && a.h(r) {
			return true
		}
	}
	if s.opts.Handler != nil && s.opts.Handler(r) {
		return true
	}
	if !s.opts.NoDefaults && s.defaultRespond(r) {
		return true
	}
	s.enqueue(r)
	return true
}

func (c *Conn) noteHello(r *Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.helloed {
		return
	}
	c.helloed = true
	if v, err := r.Command.LookupErr("client", "application", "name"); err == nil {
		c.appName, _ = v.StringValueOK()
	}
}
