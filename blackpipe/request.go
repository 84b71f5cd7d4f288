package blackpipe

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/sturdy-go/sturdy/internal/bsond"
	"github.com/sturdy-go/sturdy/wire"
)

// Request is one command a client sent.
type Request struct {
	Conn       *Conn
	RequestID  int32
	OpCode     wire.OpCode // wire.OpMsg or wire.OpQuery (legacy hello)
	Flags      wire.MsgFlags
	Compressor wire.Compressor // replies are compressed the same way
	// Command is the OP_MSG body, or the OP_QUERY query document (unwrapped
	// from $query if present).
	Command bson.Raw
	Name    string // first key of Command, as sent
	// DB is $db, or the database part of the OP_QUERY fullCollectionName.
	DB        string
	Sequences []wire.DocumentSequence

	queryFlags int32

	docOnce sync.Once // matchDoc's cache
	doc     bson.D
	docErr  error

	mu       sync.Mutex
	resolved bool
	// finished is set once the reply is written (finish), watched by
	// WatchClose (and Stream). done and watch are the channels closed
	// then, made only when the connection has to wait on them (doneChan,
	// watchChan): most requests are finished when their handler returns.
	finished, watched bool
	done, watch       chan struct{}
}

// WatchClose lets the connection's reader go on reading while r is
// pending, as a server does: a client that closes the connection then
// cancels Context at once, instead of when a reply fails to be written.
// Call it from a handler that returns before answering a request that may
// wait long (an awaitable hello). A message the client sends meanwhile is
// held until r is resolved.
func (r *Request) WatchClose() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.watchLocked()
}

// watchLocked is WatchClose with r.mu held.
func (r *Request) watchLocked() {
	if !r.watched {
		r.watched = true
		if r.watch != nil {
			close(r.watch)
		}
	}
}

// doneChan is closed once r is finished.
func (r *Request) doneChan() <-chan struct{} { return r.lazyChan(&r.done, &r.finished) }

// watchChan is closed once r is watched (WatchClose).
func (r *Request) watchChan() <-chan struct{} { return r.lazyChan(&r.watch, &r.watched) }

// lazyChan returns *ch, made on first use (few requests are waited on),
// already closed if *happened.
func (r *Request) lazyChan(ch *chan struct{}, happened *bool) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if *ch == nil {
		*ch = make(chan struct{})
		if *happened {
			close(*ch)
		}
	}
	return *ch
}

// isFinished reports whether finish has run.
func (r *Request) isFinished() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.finished
}

// Context is canceled when the request's connection or the server closes.
func (r *Request) Context() context.Context { return r.Conn.Context() }

// Replied reports whether the request has been resolved: replied to or
// faulted (NoReply does not count).
func (r *Request) Replied() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.resolved
}

func (r *Request) moreToCome() bool {
	return r.OpCode == wire.OpMsg && r.Flags&wire.MoreToCome != 0
}

// String describes the request for logs and error messages.
func (r *Request) String() string {
	return fmt.Sprintf("%s (conn %d, request %d, db %q)", r.Name, r.Conn.id, r.RequestID, r.DB)
}

// Doc decodes Command, with each document sequence appended as an array
// field named by its identifier (replacing a field of that name), so that an
// insert's documents appear as "documents" whichever way they were sent.
func (r *Request) Doc() (bson.D, error) {
	// Decoded with room for the sequences' fields, which go into d in
	// place (d is this call's own; mergeDoc would copy it for each).
	d, err := bsond.UnmarshalCommand(r.Command, len(r.Sequences))
	if err != nil {
		return nil, fmt.Errorf("blackpipe: decode %s: %w", r.Name, err)
	}
	if len(r.Sequences) > 0 {
		d = slices.Grow(d, len(r.Sequences)) // when the decoder made no room
	}
	for _, seq := range r.Sequences {
		arr := make(bson.A, 0, len(seq.Documents))
		for _, raw := range seq.Documents {
			e, err := bsond.Unmarshal(raw)
			if err != nil {
				return nil, fmt.Errorf("blackpipe: decode %s sequence %q: %w", r.Name, seq.Identifier, err)
			}
			arr = append(arr, e)
		}
		d = setInPlace(d, seq.Identifier, arr)
	}
	return d, nil
}

// setInPlace sets one field of d itself: the value of the first field
// named key is replaced, or the field appended.
func setInPlace(d bson.D, key string, v any) bson.D {
	for i := range d {
		if d[i].Key == key {
			d[i].Value = v
			return d
		}
	}
	return append(d, bson.E{Key: key, Value: v})
}

// matchDoc is Doc, decoded once and shared by every matcher; matchers must
// not modify it.
func (r *Request) matchDoc() (bson.D, error) {
	r.docOnce.Do(func() { r.doc, r.docErr = r.Doc() })
	return r.doc, r.docErr
}

// resolve marks the request resolved; it returns ErrAlreadyReplied if it
// already was. The caller calls finish once its reply is written (or the
// connection closed), so that the connection serves a request read ahead
// (WatchClose) only after this reply is on the wire.
func (r *Request) resolve() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.resolved {
		return ErrAlreadyReplied
	}
	r.resolved = true
	return nil
}

// finish lets the connection read and serve the next request.
func (r *Request) finish() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.finished = true
	if r.done != nil {
		close(r.done)
	}
}

// marshalReply converts doc to a BSON document with "ok": 1 appended when
// it has no "ok" field.
func marshalReply(doc any) (bson.Raw, error) {
	var raw bson.Raw
	switch d := doc.(type) {
	case nil:
		raw = bson.Raw(bsoncore.NewDocumentBuilder().Build())
	case bson.Raw:
		if err := d.Validate(); err != nil {
			return nil, fmt.Errorf("blackpipe: reply document: %w", err)
		}
		raw = d
	case []byte:
		return marshalReply(bson.Raw(d))
	case bson.D:
		if !hasKey(d, "ok") {
			// Encoded with "ok" at its end rather than appended to the
			// encoding: a large reply would be copied whole once more.
			d = append(d[:len(d):len(d)], bson.E{Key: "ok", Value: 1.0})
		}
		b, err := bsond.Marshal(d)
		if err != nil {
			return nil, fmt.Errorf("blackpipe: marshal reply: %w", err)
		}
		return b, nil // it has "ok": no need to look it up
	default:
		b, err := bson.Marshal(doc)
		if err != nil {
			return nil, fmt.Errorf("blackpipe: marshal reply: %w", err)
		}
		raw = b
	}
	if _, err := raw.LookupErr("ok"); err == nil {
		return raw, nil
	}
	out := make([]byte, 0, len(raw)+16)
	out = append(out, raw[:len(raw)-1]...)
	out = bsoncore.AppendDoubleElement(out, "ok", 1)
	out = append(out, 0)
	binary.LittleEndian.PutUint32(out, uint32(len(out)))
	return out, nil
}

func hasKey(d bson.D, key string) bool {
	for _, e := range d {
		if e.Key == key {
			return true
		}
	}
	return false
}

// encodeReply builds the wire bytes of a reply to r, compressed as the
// request was.
func (r *Request) encodeReply(body bson.Raw) ([]byte, error) {
	id := r.Conn.s.nextReplyID.Add(1)
	// Room for the header, flags or reply fields and the body: the
	// message is built without regrowing its buffer.
	b := make([]byte, 0, wire.HeaderLen+20+len(body))
	if r.OpCode == wire.OpQuery {
		b = wire.AppendReply(b, id, r.RequestID, &wire.Reply{Documents: []bson.Raw{body}})
	} else {
		b = wire.AppendMsg(b, id, r.RequestID, &wire.Msg{Body: body})
	}
	if r.Compressor != wire.CompressorNoop {
		return wire.AppendCompressed(nil, b, r.Compressor, -1)
	}
	return b, nil
}

// Reply answers the request with doc (bson.D, bson.M, bson.Raw or a struct);
// "ok": 1 is added if absent. OP_QUERY requests get an OP_REPLY. A request
// sent with moreToCome gets nothing.
//
// A doc that cannot be encoded (a key holding NUL, a value BSON has no type
// for) is answered with InternalError naming the failure, so the client is
// never left waiting for a reply; Reply returns the encoding error.
func (r *Request) Reply(doc any) error {
	if d, ok := doc.(bson.D); ok && r.OpCode == wire.OpMsg {
		return r.replyMsgD(d)
	}
	body, err := marshalReply(doc)
	if err != nil {
		return r.replyEncodeError(err)
	}
	return r.replyRaw(body)
}

// replyEncodeError answers a reply that could not be encoded with
// InternalError naming err, and returns err.
func (r *Request) replyEncodeError(err error) error {
	if eb, e := marshalReply(bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: "reply could not be encoded: " + err.Error()},
		{Key: "code", Value: int32(1)}, {Key: "codeName", Value: "InternalError"}}); e == nil {
		_ = r.replyRaw(eb)
	}
	return err
}

// ReplyD is Reply for a bson.D, which it takes without boxing it in an
// interface: for a server that answers every request with one.
func (r *Request) ReplyD(d bson.D) error {
	if r.OpCode != wire.OpMsg {
		return r.Reply(d)
	}
	return r.replyMsgD(d)
}

// replyMsgD answers an OP_MSG with d ("ok": 1 added if absent, as
// marshalReply adds it), encoded straight into the message, after room for
// its header, in a buffer reused from reply to reply: the body and the
// message were two allocations of its size per reply, and a copy.
func (r *Request) replyMsgD(d bson.D) error {
	if !hasKey(d, "ok") {
		d = append(d[:len(d):len(d)], bson.E{Key: "ok", Value: 1.0})
	}
	buf := replyBufs.Get().(*[]byte)
	defer putReplyBuf(buf)
	b, err := bsond.AppendMarshal(append((*buf)[:0], make([]byte, msgBodyOffset)...), d)
	*buf = b
	if err != nil {
		return r.replyEncodeError(fmt.Errorf("blackpipe: marshal reply: %w", err))
	}
	if err := r.resolve(); err != nil {
		return err
	}
	defer r.finish()
	if r.moreToCome() {
		return nil
	}
	id := r.Conn.s.nextReplyID.Add(1)
	wire.AppendMsgStart(b[:0], id, r.RequestID, 0, len(b)-msgBodyOffset) // the header, in the room left for it
	if r.Compressor != wire.CompressorNoop {
		if b, err = wire.AppendCompressed(nil, b, r.Compressor, -1); err != nil {
			return err
		}
	}
	return r.Conn.write(b, nil)
}

// msgBodyOffset is where an OP_MSG's body starts: after the header, the
// flags and the section's kind (what wire.AppendMsgStart writes).
const msgBodyOffset = wire.HeaderLen + 4 + 1

// replyBufs holds the buffers replyMsgD encodes replies in; the connection's
// write is done with a buffer when it returns.
var replyBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledReply is the largest reply buffer kept for reuse: a large
// reply's buffer (a find's batch) is left to the GC.
const maxPooledReply = 64 << 10

func putReplyBuf(buf *[]byte) {
	if cap(*buf) <= maxPooledReply {
		replyBufs.Put(buf)
	}
}

func (r *Request) replyRaw(body bson.Raw) error {
	if err := r.resolve(); err != nil {
		return err
	}
	defer r.finish()
	if r.moreToCome() {
		return nil
	}
	if r.OpCode == wire.OpMsg && r.Compressor == wire.CompressorNoop && len(body) >= writevReplySize {
		id := r.Conn.s.nextReplyID.Add(1)
		return r.Conn.write(wire.AppendMsgStart(nil, id, r.RequestID, 0, len(body)), body)
	}
	b, err := r.encodeReply(body)
	if err != nil {
		return err
	}
	return r.Conn.write(b, nil)
}

// writevReplySize is the body size from which an uncompressed OP_MSG reply
// is written as its header and its body, with one writev, instead of being
// copied into one message: a find's batch of 10 000 documents spent 6% of
// the server's CPU on that copy.
const writevReplySize = 16 << 10

// ReplyError answers with a command error:
// {ok: 0, errmsg, code, codeName, errorLabels}.
func (r *Request) ReplyError(code int32, msg string, labels ...string) error {
	d := bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: msg}, {Key: "code", Value: code}}
	if name := CodeName(code); name != "" {
		d = append(d, bson.E{Key: "codeName", Value: name})
	}
	if len(labels) > 0 {
		d = append(d, bson.E{Key: "errorLabels", Value: labels})
	}
	return r.Reply(d)
}

// WriteError is one entry of a write command's writeErrors.
type WriteError struct {
	Index   int32
	Code    int32
	Message string
}

// WriteConcernError is a write command's writeConcernError. Labels go to the
// reply's top-level errorLabels, as 4.4+ servers send them; Details becomes
// errInfo.
type WriteConcernError struct {
	Code    int32
	Message string
	Labels  []string
	Details bson.D
}

// ReplyWriteErrors answers a write command that applied n writes and failed
// the others with errs: {ok: 1, n, writeErrors}.
func (r *Request) ReplyWriteErrors(n int32, errs ...WriteError) error {
	arr := make(bson.A, 0, len(errs))
	for _, e := range errs {
		we := bson.D{{Key: "index", Value: e.Index}, {Key: "code", Value: e.Code}}
		if name := CodeName(e.Code); name != "" {
			we = append(we, bson.E{Key: "codeName", Value: name})
		}
		we = append(we, bson.E{Key: "errmsg", Value: e.Message})
		arr = append(arr, we)
	}
	return r.Reply(bson.D{{Key: "n", Value: n}, {Key: "writeErrors", Value: arr}, {Key: "ok", Value: 1.0}})
}

// ReplyWriteConcernError answers a write command that applied n writes but
// whose write concern failed: {ok: 1, n, writeConcernError, errorLabels}.
func (r *Request) ReplyWriteConcernError(n int32, wce WriteConcernError) error {
	w := bson.D{{Key: "code", Value: wce.Code}}
	if name := CodeName(wce.Code); name != "" {
		w = append(w, bson.E{Key: "codeName", Value: name})
	}
	w = append(w, bson.E{Key: "errmsg", Value: wce.Message})
	if len(wce.Details) > 0 {
		w = append(w, bson.E{Key: "errInfo", Value: wce.Details})
	}
	d := bson.D{{Key: "n", Value: n}, {Key: "writeConcernError", Value: w}}
	if len(wce.Labels) > 0 {
		d = append(d, bson.E{Key: "errorLabels", Value: wce.Labels})
	}
	d = append(d, bson.E{Key: "ok", Value: 1.0})
	return r.Reply(d)
}

// ReplyCursor answers a find/aggregate (firstBatch true) or getMore
// (firstBatch false) with a cursor on namespace ns ("db.coll").
func (r *Request) ReplyCursor(ns string, cursorID int64, firstBatch bool, docs ...any) error {
	batch := make(bson.A, 0, len(docs))
	batch = append(batch, docs...)
	key := "nextBatch"
	if firstBatch {
		key = "firstBatch"
	}
	return r.Reply(bson.D{
		{Key: "cursor", Value: bson.D{
			{Key: "id", Value: cursorID},
			{Key: "ns", Value: ns},
			{Key: key, Value: batch},
		}},
		{Key: "ok", Value: 1.0},
	})
}

// ReplyAfter waits d, then replies with doc. It returns ErrConnClosed at once
// if the connection or server closes first.
func (r *Request) ReplyAfter(d time.Duration, doc any) error {
	body, err := marshalReply(doc)
	if err != nil {
		return err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
		return ErrConnClosed
	}
	return r.replyRaw(body)
}

// Hangup closes the connection with a FIN and sends no reply.
func (r *Request) Hangup() error {
	if err := r.resolve(); err != nil {
		return err
	}
	defer r.finish()
	return r.Conn.hangup()
}

// Reset closes the connection with a TCP RST and sends no reply.
func (r *Request) Reset() error {
	if err := r.resolve(); err != nil {
		return err
	}
	defer r.finish()
	return r.Conn.reset()
}

// NoReply never replies: the connection stays open, reading nothing more,
// until the client, the test or the server closes it.
func (r *Request) NoReply() {}

// ReplyPartial writes only the first n bytes of the reply to doc, then hangs
// up, as when a connection drops mid-reply.
func (r *Request) ReplyPartial(doc any, n int) error {
	body, err := marshalReply(doc)
	if err != nil {
		return err
	}
	if err := r.resolve(); err != nil {
		return err
	}
	defer r.finish()
	b, err := r.encodeReply(body)
	if err != nil {
		return err
	}
	n = max(0, min(n, len(b)))
	werr := r.Conn.write(b[:n], nil)
	herr := r.Conn.hangup()
	if werr != nil {
		return werr
	}
	return herr
}

// Malformation is a kind of malformed reply for ReplyMalformed.
type Malformation int

const (
	// BadLength declares a messageLength smaller than the header.
	BadLength Malformation = iota + 1
	// TooLarge declares a messageLength far beyond maxMessageSizeBytes.
	TooLarge
	// BadBSON sends an OP_MSG whose body is not valid BSON.
	BadBSON
	// TruncatedSection sends an OP_MSG whose body document claims to be
	// longer than the message that holds it.
	TruncatedSection
	// UnknownOpCode sends a well-formed body under an opCode no server uses.
	UnknownOpCode
	// EmptyMsg sends an OP_MSG with flags but no sections.
	EmptyMsg
)

func (k Malformation) String() string {
	switch k {
	case BadLength:
		return "BadLength"
	case TooLarge:
		return "TooLarge"
	case BadBSON:
		return "BadBSON"
	case TruncatedSection:
		return "TruncatedSection"
	case UnknownOpCode:
		return "UnknownOpCode"
	case EmptyMsg:
		return "EmptyMsg"
	}
	return fmt.Sprintf("Malformation(%d)", int(k))
}

// ReplyMalformed sends a malformed reply of the given kind, then hangs up
// (FIN) so that a client that does not notice cannot reuse a stream that is
// out of step. The reply is never compressed, so the malformation is exactly
// the one asked for.
func (r *Request) ReplyMalformed(kind Malformation) error {
	body, _ := marshalReply(bson.D{{Key: "ok", Value: 1.0}})
	id := r.Conn.s.nextReplyID.Add(1)
	msg := wire.AppendMsg(nil, id, r.RequestID, &wire.Msg{Body: body})
	put := func(off int, v uint32) { binary.LittleEndian.PutUint32(msg[off:], v) }
	switch kind {
	case BadLength:
		put(0, 8)
	case TooLarge:
		put(0, 1<<30)
	case BadBSON:
		// Body starts after header(16) + flags(4) + kind byte(1); corrupt
		// the first element's type byte.
		msg[21+4] = 0x7f
	case TruncatedSection:
		put(21, uint32(len(body)+64))
	case UnknownOpCode:
		put(12, 9999)
	case EmptyMsg:
		msg = msg[:20]
		put(0, 20)
	default:
		return fmt.Errorf("blackpipe: unknown malformation %d", int(kind))
	}
	if err := r.resolve(); err != nil {
		return err
	}
	defer r.finish()
	werr := r.Conn.write(msg, nil)
	herr := r.Conn.hangup()
	if werr != nil {
		return werr
	}
	return herr
}
