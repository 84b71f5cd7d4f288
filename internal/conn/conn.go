package conn

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/internal/bufpool"
	"github.com/sturdy-go/sturdy/internal/csot"
	"github.com/sturdy-go/sturdy/mongoerr"
	"github.com/sturdy-go/sturdy/wire"
)

var (
	// ErrClosed is returned (wrapped in a *NetworkError) for round trips on
	// a closed connection.
	ErrClosed = errors.New("connection closed")
	// ErrStreaming is returned by Send while the server is still streaming
	// replies (exhaust): the caller must drain them with ReadReply first.
	ErrStreaming = errors.New("connection is streaming replies; call ReadReply")
	// ErrNotStreaming is returned by ReadReply when no reply is pending.
	ErrNotStreaming = errors.New("no streamed reply is pending")
)

// Request is one command to send.
type Request struct {
	DB string
	// Command is the command document without $db; Send appends $db.
	Command bson.Raw
	// Sequences are sent as OP_MSG kind-1 sections (e.g. insert's documents).
	Sequences []wire.DocumentSequence
	// MoreToCome asks for no reply (unacknowledged writes): Send writes the
	// message and returns (nil, nil) without reading.
	MoreToCome bool
	// ExhaustAllowed lets the server stream replies (awaitable hello).
	ExhaustAllowed bool
	// PooledReply reads a reply of a size bufpool pools into a pooled
	// buffer (Reply.Buffer), for a caller that will recycle it.
	PooledReply bool
	// RequestID is set by Send to the wire request id, for events.
	RequestID int32
	// OnSend, if set, is told the request id just before the message is
	// written, so a command-started event precedes the send.
	OnSend SendObserver
}

// SendObserver is told the request id of a message about to be written. An
// interface rather than a func, so that a caller can pass state it already
// holds on the heap instead of a closure allocated per round trip.
type SendObserver interface {
	Sending(requestID int32)
}

// Reply is a server reply.
type Reply struct {
	Body bson.Raw // owned by the caller
	// Buffer is the pooled buffer Body lies in (nil if it has none of
	// its own). Whoever can prove nothing refers into Body any more may
	// hand it back with bufpool.Put; anyone else just drops it.
	Buffer *[]byte
	// MoreToCome means the server will send another reply without a
	// request; read it with ReadReply.
	MoreToCome bool
}

// Conn is one connection. Its methods may be called from any goroutine, but
// round trips are serialized: a connection carries one command at a time.
type Conn struct {
	nc           net.Conn
	rd           *bufio.Reader // reads nc; see readBufferSize
	addr         string
	id           int64
	desc         Description
	serverConnID *int64
	createdAt    time.Time
	handshakeRTT time.Duration

	msg wire.Msg // what read decodes each reply into (guarded by mu)

	compressor wire.Compressor
	compress   bool
	zlibLevel  int

	closed     atomic.Bool
	generation atomic.Uint64
	lastUsed   atomic.Int64 // unix nanoseconds

	mu          sync.Mutex           // serializes round trips; guards the fields below
	wbuf        []byte               // outgoing message
	cbuf        []byte               // outgoing compressed message
	rbuf        []byte               // incoming message (compressed or large)
	hdr         [wire.HeaderLen]byte // incoming header, read before the body
	cmd         []byte               // command body with $db
	deadlineSet bool                 // a deadline is set on nc
	streaming   bool                 // the last reply had moreToCome
	lastReplyID int32                // requestID of the last streamed reply
	maxMsgSize  int32                // largest reply accepted
	maxSendSize int32                // largest message sent (server's maxMessageSizeBytes)
	abortFn     func()               // sets a past deadline; allocated once

	socketTimeout time.Duration // bounds round trips without an earlier ctx deadline
}

// Process-wide counters: request ids must be unique per process so that
// events and server logs can be correlated.
var (
	requestIDs atomic.Int32
	connIDs    atomic.Int64
)

// nextRequestID returns a positive id; after 2^31 ids it wraps around.
func nextRequestID() int32 {
	for {
		if id := requestIDs.Add(1) & 0x7fffffff; id != 0 {
			return id
		}
	}
}

// readBufferSize is the size of the buffer in front of the socket. A reply
// of up to this size (every single-document reply) then costs one read
// system call instead of two (header, then body); larger reads bypass the
// buffer once it is empty.
const readBufferSize = 4096

// Buffers that grew beyond this are released after use so that one huge
// reply does not pin memory for the life of a pooled connection.
const keepBufferMax = 4 << 20

// ID is the client-side connection id, unique per process and > 0.
func (c *Conn) ID() int64 { return c.id }

// ServerConnectionID is hello's connectionId, nil if the server sent none.
func (c *Conn) ServerConnectionID() *int64 { return c.serverConnID }

// Description returns what the handshake learned.
func (c *Conn) Description() Description { return c.desc }

// ServiceID is the serviceId of a load-balanced connection's handshake,
// nil otherwise.
func (c *Conn) ServiceID() *bson.ObjectID { return c.desc.ServiceID }

// Addr is the server address as dialed.
func (c *Conn) Addr() string { return c.addr }

// Generation is the pool generation the connection belongs to.
func (c *Conn) Generation() uint64 { return c.generation.Load() }

// SetGeneration is called by the pool when it creates the connection.
func (c *Conn) SetGeneration(g uint64) { c.generation.Store(g) }

// CreatedAt is when the connection was established.
func (c *Conn) CreatedAt() time.Time { return c.createdAt }

// LastUsed is when the last round trip finished (CreatedAt before any).
func (c *Conn) LastUsed() time.Time { return time.Unix(0, c.lastUsed.Load()) }

// Close closes the connection; it is safe to call more than once and
// concurrently with a round trip, which then fails.
func (c *Conn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	return c.nc.Close()
}

// Closed reports whether the connection was closed (by Close or a network error).
func (c *Conn) Closed() bool { return c.closed.Load() }

// RoundTrip sends cmd to database db and returns the reply, which the
// caller owns. An {ok: 0} reply gives a *CommandError (and the reply); an
// I/O failure closes the connection and gives a *NetworkError.
func (c *Conn) RoundTrip(ctx context.Context, db string, cmd bson.D) (bson.Raw, error) {
	body, err := bson.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("encoding command: %w", err)
	}
	r, err := c.Send(ctx, &Request{DB: db, Command: body})
	if r == nil {
		return nil, err
	}
	return r.Body, err
}

// Send sends req and reads its reply. The message is compressed when a
// compressor was negotiated, except for the handshake and authentication
// commands. A reply reporting a server error is returned together with the
// error from mongoerr.FromReply. Network and protocol failures close the
// connection and return a *NetworkError.
func (c *Conn) Send(ctx context.Context, req *Request) (*Reply, error) {
	r := new(Reply)
	ok, err := c.SendTo(ctx, req, r)
	if !ok {
		return nil, err
	}
	return r, err
}

// SendTo is Send with the reply stored in *dst, which the caller provides
// so that a round trip allocates no Reply: ok says whether a reply came
// (Send's non-nil reply).
func (c *Conn) SendTo(ctx context.Context, req *Request, dst *Reply) (ok bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return false, &mongoerr.NetworkError{Addr: c.addr, Op: "write", Err: ErrClosed}
	}
	if c.streaming {
		return false, ErrStreaming
	}
	if err := ctx.Err(); err != nil {
		// Nothing was written, but the caller gave up: treat it as the
		// timeout it is, and keep the invariant that a NetworkError means
		// a closed connection.
		return false, c.fail(ctx, "write", err)
	}
	body, err := appendDB(c.cmd[:0], req.Command, req.DB)
	if err != nil {
		return false, err
	}
	c.cmd = body
	id := nextRequestID()
	req.RequestID = id
	if req.OnSend != nil {
		req.OnSend.Sending(id)
	}
	var flags wire.MsgFlags
	if req.MoreToCome {
		flags |= wire.MoreToCome
	}
	if req.ExhaustAllowed {
		flags |= wire.ExhaustAllowed
	}
	m := wire.Msg{Flags: flags, Body: body, Sequences: req.Sequences}
	c.wbuf = wire.AppendMsg(c.wbuf[:0], id, 0, &m)
	out := c.wbuf
	if c.compress && compressible(body) {
		c.cbuf, err = wire.AppendCompressed(c.cbuf[:0], c.wbuf, c.compressor, c.zlibLevel)
		if err != nil {
			return false, fmt.Errorf("compressing with %s: %w", c.compressor, err)
		}
		out = c.cbuf
	}
	if len(out) > int(c.maxSendSize) {
		return false, fmt.Errorf("message of %d bytes exceeds the server's maxMessageSizeBytes %d", len(out), c.maxSendSize)
	}

	stop := c.arm(ctx)
	_, err = c.nc.Write(out)
	if err != nil {
		err = c.fail(ctx, "write", err)
	} else if req.MoreToCome {
		c.lastUsed.Store(time.Now().UnixNano())
	} else {
		ok, err = c.read(ctx, id, req.PooledReply, dst)
	}
	c.disarm(stop)
	c.trimBuffers()
	return ok, err
}

// ReadReply reads the next reply the server streams after a reply that had
// moreToCome set (exhaust, e.g. a streaming awaitable hello).
func (c *Conn) ReadReply(ctx context.Context) (*Reply, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return nil, &mongoerr.NetworkError{Addr: c.addr, Op: "read", Err: ErrClosed}
	}
	if !c.streaming {
		return nil, ErrNotStreaming
	}
	if err := ctx.Err(); err != nil {
		return nil, c.fail(ctx, "read", err)
	}
	stop := c.arm(ctx)
	reply := new(Reply)
	ok, err := c.read(ctx, c.lastReplyID, false, reply)
	c.disarm(stop)
	c.trimBuffers()
	if !ok {
		return nil, err
	}
	return reply, err
}

// Streaming reports that the last reply had moreToCome set: the server
// will send another reply, to be read with ReadReply.
func (c *Conn) Streaming() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.streaming && !c.closed.Load()
}

// read reads one reply that must answer responseTo into *dst; ok says
// whether there was one (with or without a server error). The caller holds
// c.mu.
func (c *Conn) read(ctx context.Context, responseTo int32, pool bool, dst *Reply) (ok bool, err error) {
	msg, own, pooled, err := c.readMessage(pool)
	if err != nil {
		if errors.Is(err, wire.ErrMalformed) || errors.Is(err, wire.ErrMessageTooLarge) {
			return false, c.fail(ctx, "decode", err)
		}
		return false, c.fail(ctx, "read", err)
	}
	m, err := wire.DecodeInto(msg, c.maxMsgSize, &c.msg)
	if err != nil {
		bufpool.Put(pooled) // nothing decoded refers into it
		return false, c.fail(ctx, "decode", err)
	}
	if m.Header.ResponseTo != responseTo {
		return false, c.fail(ctx, "decode", fmt.Errorf("reply answers request %d, expected %d", m.Header.ResponseTo, responseTo))
	}
	if m.Msg == nil {
		return false, c.fail(ctx, "decode", fmt.Errorf("reply is %s, expected OP_MSG", m.Header.OpCode))
	}
	body, moreToCome := m.Msg.Body, m.Msg.Flags&wire.MoreToCome != 0
	c.msg = wire.Msg{} // holds nothing of the reply past this read
	if !own && m.Compressor == wire.CompressorNoop {
		// It lies in c.rbuf, which the next read overwrites. (A
		// decompressed body is a fresh allocation already.)
		body, pooled = ownBody(body, pool)
	}
	*dst = Reply{Body: body, Buffer: pooled, MoreToCome: moreToCome}
	c.streaming = moreToCome
	c.lastReplyID = m.Header.RequestID
	c.lastUsed.Store(time.Now().UnixNano())
	return true, mongoerr.FromReply(body)
}

// ownReadMax is the largest uncompressed message readMessage reads into a
// buffer it allocates for it. Larger ones grow c.rbuf step by step as they
// arrive (wire.ReadMessage), so a peer cannot make the client allocate a
// huge buffer by sending nothing but a header.
const ownReadMax = 1 << 20

// readMessage reads one whole message. An uncompressed message is read
// into a buffer of its own (own), which the reply body then aliases, with
// no copy: with pool, a pooled buffer (any size up to bufpool.Max, pooled
// already if beyond ownReadMax), else one of exactly its size up to
// ownReadMax. Anything else is read into c.rbuf. Errors are
// wire.ReadMessage's.
func (c *Conn) readMessage(pool bool) (msg []byte, own bool, pooled *[]byte, err error) {
	if n, err := io.ReadFull(c.rd, c.hdr[:]); err != nil {
		if err == io.EOF && n == 0 {
			return nil, false, nil, io.EOF
		}
		return nil, false, nil, fmt.Errorf("reading message header: %w", err)
	}
	h, err := wire.ParseHeader(c.hdr[:])
	if err == nil && h.MessageLength <= c.maxMsgSize && h.OpCode != wire.OpCompressed {
		msg, pooled = ownBuffer(int(h.MessageLength), pool)
	}
	if msg == nil {
		// wire.ReadMessage judges the header again and reports as before.
		c.rbuf, err = wire.ReadMessage(&headerReader{hdr: c.hdr[:], r: c.rd}, c.rbuf[:0], c.maxMsgSize)
		return c.rbuf, false, nil, err
	}
	copy(msg, c.hdr[:])
	if n, err := io.ReadFull(c.rd, msg[wire.HeaderLen:]); err != nil {
		bufpool.Put(pooled)
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, false, nil, fmt.Errorf("reading %s body (%d of %d bytes): %w", h.OpCode, wire.HeaderLen+n, len(msg), err)
	}
	return msg, true, pooled, nil
}

// ownBuffer returns the buffer of its own a message of n bytes is read
// into (pooled with pool), or nil when it is to be read into c.rbuf.
func ownBuffer(n int, pool bool) (msg []byte, pooled *[]byte) {
	switch {
	case pool && n <= ownReadMax:
		pooled = bufpool.Get(n)
	case pool:
		// Only a buffer the pool holds already: allocating n bytes on
		// the word of a header alone is what ownReadMax prevents.
		pooled = bufpool.TryGet(n)
	}
	switch {
	case pooled != nil:
		return *pooled, pooled
	case n <= ownReadMax:
		return make([]byte, n), nil
	}
	return nil, nil
}

// ownBody returns a copy of body, which lies in c.rbuf: in a pooled buffer
// with pool (when bufpool pools its size), else in one of its own.
func ownBody(body bson.Raw, pool bool) (bson.Raw, *[]byte) {
	if pool {
		if p := bufpool.Get(len(body)); p != nil {
			copy(*p, body)
			return *p, p
		}
	}
	return append(bson.Raw(nil), body...), nil
}

// headerReader replays a header already read, then reads on from r.
type headerReader struct {
	hdr []byte
	r   io.Reader
}

func (h *headerReader) Read(p []byte) (int, error) {
	if len(h.hdr) > 0 {
		n := copy(p, h.hdr)
		h.hdr = h.hdr[n:]
		return n, nil
	}
	return h.r.Read(p)
}

// arm applies ctx to the socket: its deadline, and an abort on cancellation.
// It returns the function that stops the abort, or nil.
func (c *Conn) arm(ctx context.Context) func() bool {
	dl, ok := ctx.Deadline()
	if c.socketTimeout > 0 && !csot.Active(ctx) { // timeoutMS replaces socketTimeoutMS
		if st := time.Now().Add(c.socketTimeout); !ok || st.Before(dl) {
			dl, ok = st, true
		}
	}
	if ok {
		_ = c.nc.SetDeadline(dl)
		c.deadlineSet = true
	} else if c.deadlineSet {
		_ = c.nc.SetDeadline(time.Time{})
		c.deadlineSet = false
	}
	if ctx.Done() == nil {
		return nil // never canceled: spare the allocation
	}
	return context.AfterFunc(ctx, c.abortFn)
}

// disarm stops the cancellation abort. If it already fired, the socket has a
// deadline in the past (possibly set after the round trip finished), so the
// connection cannot be trusted and is closed.
func (c *Conn) disarm(stop func() bool) {
	if stop != nil && !stop() {
		c.Close()
	}
}

func (c *Conn) abort() { _ = c.nc.SetDeadline(time.Unix(1, 0)) }

func (c *Conn) trimBuffers() {
	if cap(c.rbuf) > keepBufferMax {
		c.rbuf = nil
	}
	if cap(c.wbuf) > keepBufferMax {
		c.wbuf = nil
	}
	if cap(c.cbuf) > keepBufferMax {
		c.cbuf = nil
	}
	if cap(c.cmd) > keepBufferMax {
		c.cmd = nil
	}
}

// fail closes the connection and builds the NetworkError for err. When the
// context caused the failure (deadline or cancellation), the error wraps the
// context's error too, so errors.Is(err, context.DeadlineExceeded) holds.
func (c *Conn) fail(ctx context.Context, op string, err error) error {
	c.Close()
	return netError(ctx, c.addr, op, err)
}

func netError(ctx context.Context, addr, op string, err error) *mongoerr.NetworkError {
	ctxErr := ctx.Err()
	if ctxErr == nil {
		// The socket deadline fires a moment before the context's timer.
		var ne net.Error
		if dl, ok := ctx.Deadline(); ok && errors.As(err, &ne) && ne.Timeout() && !time.Now().Before(dl.Add(-time.Millisecond)) {
			ctxErr = context.DeadlineExceeded
		}
	}
	if ctxErr != nil && !errors.Is(err, ctxErr) {
		err = fmt.Errorf("%w: %w", ctxErr, err)
	}
	return &mongoerr.NetworkError{Addr: addr, Op: op, Err: err}
}

// appendDB appends cmd with a trailing $db element to dst.
func appendDB(dst []byte, cmd bson.Raw, db string) ([]byte, error) {
	if len(cmd) < 5 || int(binary.LittleEndian.Uint32(cmd)) != len(cmd) || cmd[len(cmd)-1] != 0 {
		return dst, errors.New("command is not a BSON document")
	}
	if db == "" {
		return dst, errors.New("command has no database")
	}
	start := len(dst)
	dst = append(dst, cmd[:len(cmd)-1]...)
	dst = append(dst, byte(bson.TypeString))
	dst = append(dst, "$db"...)
	dst = append(dst, 0)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(db)+1))
	dst = append(dst, db...)
	dst = append(dst, 0, 0)
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start))
	return dst, nil
}

// uncompressedCommands must never be compressed (compression spec): the
// handshake and everything that carries credentials.
var uncompressedCommands = [][]byte{
	[]byte("hello"), []byte("isMaster"), []byte("saslStart"), []byte("saslContinue"),
	[]byte("getnonce"), []byte("authenticate"), []byte("createUser"), []byte("updateUser"),
	[]byte("copydbSaslStart"), []byte("copydbgetnonce"), []byte("copydb"),
}

// compressible reports whether the command in body may be compressed.
func compressible(body []byte) bool {
	if len(body) < 6 {
		return true
	}
	end := bytes.IndexByte(body[5:], 0)
	if end < 0 {
		return true
	}
	name := body[5 : 5+end]
	for _, n := range uncompressedCommands {
		if bytes.EqualFold(name, n) {
			return false
		}
	}
	return true
}
