package sturdy

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/internal/bufpool"
	"github.com/sturdy-go/sturdy/internal/csot"
	"github.com/sturdy-go/sturdy/internal/exec"
	"github.com/sturdy-go/sturdy/internal/session"
	"github.com/sturdy-go/sturdy/internal/topology"
	"github.com/sturdy-go/sturdy/mongoerr"
)

// Cursor iterates over the results of Find, Aggregate and the list commands,
// fetching further batches with getMore from the server that opened it.
// Call Close when done before it is exhausted, so the server can free the
// cursor. A Cursor is for one goroutine at a time.
type Cursor struct {
	// Current is the document Next moved to. It is valid until the next
	// call to Next or TryNext, which may reuse its memory for the next
	// batch: copy it (or Decode it) to keep it longer.
	Current bson.Raw

	client    *Client
	db, coll  string
	id        int64
	batch     docBatch
	buf       *[]byte // the pooled buffer batch lies in (nil: none), recycled once it is consumed
	server    *topology.Server
	sess      *session.Client
	ownsSess  bool // the implicit session lives as long as the cursor
	batchSize int32
	comment   any
	err       error
	closed    bool
	src       CursorSource // set by NewCursor: documents come from src, not from a server
	tmo       cursorTimeout
	maxAwait  time.Duration // getMore's maxTimeMS (awaitData cursors, RunCursorCommand)
	tailable  bool          // Next waits through empty batches for new documents
	// pin is the connection the cursor is pinned to in load-balanced
	// mode: its getMores and killCursors must reach the same service.
	pin *exec.Pin
	// implicitSess is where sess lies when the cursor owns an implicit
	// session: kept in the cursor, it costs no allocation of its own.
	implicitSess session.Client
}

// CursorType says whether a Find cursor is tailable: on a capped
// collection a tailable cursor stays open after the last document and
// returns documents inserted later.
type CursorType int

const (
	// NonTailable (the default): the cursor ends after the last result.
	NonTailable CursorType = iota
	// Tailable: the cursor stays open; each getMore returns at once,
	// with the documents inserted since (maybe none), so Next polls with
	// back-to-back getMores until a document comes: prefer TailableAwait,
	// or TryNext with a pause of your own.
	Tailable
	// TailableAwait: like Tailable, but a getMore that finds nothing
	// waits on the server, up to MaxAwaitTime, for a new document.
	TailableAwait
)

// TimeoutMode says how an operation's timeoutMS bounds the cursor it opens.
type TimeoutMode string

const (
	// TimeoutCursorLifetime (the default): the opening command and every
	// getMore share one deadline, timeoutMS after the operation started.
	TimeoutCursorLifetime TimeoutMode = "cursorLifetime"
	// TimeoutIteration: the opening command and each Next get the whole
	// timeoutMS; no maxTimeMS is sent.
	TimeoutIteration TimeoutMode = "iteration"
)

// ErrTimeoutModeWithoutTimeout: a TimeoutMode was given without a timeoutMS
// at any level.
var ErrTimeoutModeWithoutTimeout = errors.New("sturdy: timeoutMode needs a timeoutMS (client, database, collection or WithTimeout)")

// cursorTimeout is how timeoutMS applies to a cursor's later commands.
type cursorTimeout struct {
	set       bool          // the opening operation ran under a timeoutMS
	timeout   time.Duration // its timeoutMS (0: no limit)
	deadline  time.Time     // cursorLifetime: the shared deadline (zero: none)
	iteration bool
}

// getMoreContext applies the cursor's timeout to one Next: the cursor's
// deadline (cursorLifetime) or a fresh timeoutMS (iteration). getMore never
// carries maxTimeMS of its own under timeoutMS.
func (t cursorTimeout) getMoreContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if csot.Active(ctx) { // iterated inside an operation (ListCollectionNames...)
		return csot.WithoutMaxTime(ctx), func() {}
	}
	switch {
	case !t.set:
		if d, ok := csot.OperationTimeout(ctx); ok {
			return csot.StartWith(ctx, d, true)
		}
		return ctx, func() {}
	case t.iteration || t.deadline.IsZero():
		return csot.StartWith(ctx, t.timeout, true)
	default:
		return csot.WithDeadline(ctx, t.deadline, true)
	}
}

// closeContext is the context of killCursors: a timeoutMS given to Close,
// else the cursor's timeoutMS afresh (even past a cursorLifetime deadline).
func (t cursorTimeout) closeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := csot.OperationTimeout(ctx); ok {
		return csot.StartWith(ctx, d, false)
	}
	if !t.set || csot.Active(ctx) {
		return ctx, func() {}
	}
	return csot.StartWith(ctx, t.timeout, false)
}

// startCursorOp checks mode against the operation's timeoutMS and returns
// the context of the opening command: under iteration it carries no
// maxTimeMS.
func startCursorOp(ctx context.Context, mode TimeoutMode) (context.Context, error) {
	switch mode {
	case "", TimeoutCursorLifetime:
	case TimeoutIteration:
		ctx = csot.WithoutMaxTime(ctx)
	default:
		return ctx, argError("unknown timeoutMode %q", mode)
	}
	if mode != "" && !csot.Active(ctx) {
		return ctx, ErrTimeoutModeWithoutTimeout
	}
	return ctx, nil
}

// startTailableOp is startCursorOp for a tailable cursor, whose only
// timeoutMode is iteration (the default): the opening command keeps its
// maxTimeMS only when the cursor awaits data, as the CSOT spec says, and a
// MaxAwaitTime must be less than the timeoutMS.
func startTailableOp(ctx context.Context, mode TimeoutMode, ct CursorType, maxAwait time.Duration) (context.Context, error) {
	switch mode {
	case "", TimeoutIteration:
	case TimeoutCursorLifetime:
		return ctx, argError("a tailable cursor's timeoutMode can only be iteration")
	default:
		return ctx, argError("unknown timeoutMode %q", mode)
	}
	if mode != "" && !csot.Active(ctx) {
		return ctx, ErrTimeoutModeWithoutTimeout
	}
	if err := checkMaxAwait(ctx, maxAwait); err != nil {
		return ctx, err
	}
	if ct == Tailable {
		ctx = csot.WithoutMaxTime(ctx)
	}
	return ctx, nil
}

// checkMaxAwait refuses a MaxAwaitTime not less than the operation's
// timeoutMS: each getMore would time out on the client before the server
// answered it with an empty batch.
func checkMaxAwait(ctx context.Context, maxAwait time.Duration) error {
	if d, ok := csot.Timeout(ctx); ok && d > 0 && maxAwait >= d {
		return argError("MaxAwaitTime %v must be less than the timeoutMS %v", maxAwait, d)
	}
	return nil
}

// cursorSpec is how a cursor-returning command's cursor behaves.
type cursorSpec struct {
	session    *Session
	batchSize  int32
	comment    any
	mode       TimeoutMode
	cursorType CursorType
	maxAwait   time.Duration // getMores' maxTimeMS (0: none)
	into       *Cursor       // storage for the cursor (nil: allocated)
}

// openCursor runs a cursor-returning command and wraps its first batch.
// Without an explicit session the implicit one is kept for the cursor's
// life, as getMore must use the lsid of the command that opened the cursor.
func openCursor(ctx context.Context, client *Client, op *exec.Operation, spec cursorSpec) (*Cursor, error) {
	s, mode, ct, maxAwait := spec.session, spec.mode, spec.cursorType, spec.maxAwait
	var err error
	if ct != NonTailable {
		ctx, err = startTailableOp(ctx, mode, ct, maxAwait)
		mode = TimeoutIteration
	} else if err = checkMaxAwait(ctx, maxAwait); err == nil {
		ctx, err = startCursorOp(ctx, mode)
	}
	if err != nil {
		return nil, err
	}
	if s == nil {
		op.Flags |= exec.KeepSession
	}
	op.Flags |= exec.PinCursor | exec.RecycleReply
	c := spec.into
	if c == nil {
		c = new(Cursor)
	}
	op.KeptSession = &c.implicitSess
	res, err := client.execute(ctx, op, s)
	if err != nil {
		if s == nil && res.Session != nil {
			res.Session.End()
		}
		return nil, err
	}
	c.client, c.server, c.sess, c.ownsSess, c.pin = client, res.Server, res.Session, s == nil, res.Pin
	c.batchSize, c.comment, c.tailable, c.maxAwait = spec.batchSize, spec.comment, ct != NonTailable, maxAwait
	if d, ok := csot.Timeout(ctx); ok {
		c.tmo = cursorTimeout{set: true, timeout: d, iteration: mode == TimeoutIteration}
		if dl, ok := csot.Deadline(ctx); ok && !c.tmo.iteration {
			c.tmo.deadline = dl
		}
	}
	if err := c.load(res.Reply); err != nil {
		c.unpin()
		c.releaseSession()
		return nil, err
	}
	c.buf = res.ReplyBuffer
	if c.db == "" {
		c.db = op.DB
	}
	if c.id == 0 {
		c.releaseSession()
	}
	return c, nil
}

// load takes the cursor id, namespace and batch from a reply.
func (c *Cursor) load(reply bson.Raw) error {
	id, ns, batch, err := cursorBatch(reply)
	if err != nil {
		return err
	}
	c.id, c.batch = id, batch
	if id != 0 && len(ns) > 0 {
		// Only getMore and killCursors need the namespace.
		if db, coll, ok := strings.Cut(string(ns), "."); ok {
			c.db, c.coll = db, coll
		}
	}
	return nil
}

// ID returns the server's cursor id; 0 once the cursor is exhausted or closed.
func (c *Cursor) ID() int64 { return c.id }

// RemainingBatchLength is the number of documents Next returns before it
// needs another getMore.
func (c *Cursor) RemainingBatchLength() int { return c.batch.n }

// Next moves to the next document, fetching the next batch if needed. It
// returns false when the cursor is exhausted or on error (see Err). On a
// tailable cursor Next waits for a document, sending getMores until one
// comes, the cursor dies or ctx ends; under timeoutMS the whole call (all
// its getMores) gets the cursor's timeoutMS afresh.
func (c *Cursor) Next(ctx context.Context) bool {
	if c.src != nil {
		return c.nextFromSource(ctx)
	}
	if c.tailable && c.batch.n == 0 {
		var cancel context.CancelFunc
		ctx, cancel = c.tmo.getMoreContext(ctx)
		defer cancel()
	}
	for {
		if doc, ok := c.batch.next(); ok {
			c.Current = doc
			return true
		}
		c.Current = nil
		c.recycleBatch()
		if c.id == 0 || c.err != nil || c.closed {
			return false
		}
		c.getMore(ctx)
	}
}

// TryNext moves to the next document if one is in hand or the next
// getMore returns one; unlike Next it returns false after one empty batch
// (a tailable cursor's "nothing new yet"), with Err nil and the cursor
// still open.
func (c *Cursor) TryNext(ctx context.Context) bool {
	if c.src != nil {
		return c.nextFromSource(ctx)
	}
	if doc, ok := c.batch.next(); ok {
		c.Current = doc
		return true
	}
	c.Current = nil
	c.recycleBatch()
	if c.id == 0 || c.err != nil || c.closed {
		return false
	}
	c.getMore(ctx)
	if doc, ok := c.batch.next(); ok {
		c.Current = doc
		return true
	}
	return false
}

func (c *Cursor) getMore(ctx context.Context) {
	ctx, cancel := c.tmo.getMoreContext(ctx)
	defer cancel()
	cmd := cmdBuilder{{Key: "getMore", Value: c.id}, {Key: "collection", Value: c.coll}}
	if c.batchSize > 0 {
		cmd.add("batchSize", c.batchSize)
	}
	cmd.addMaxTime(c.maxAwait)
	cmd.addIf("comment", c.comment)
	res, err := c.client.execute(ctx, &exec.Operation{Name: "getMore", DB: c.db, Command: bson.D(cmd), Server: c.server, Session: c.sess, Pin: c.pin,
		Flags: exec.RecycleReply}, nil)
	if err != nil {
		// A pinned connection stays pinned after a getMore error, until
		// Close (load balancer specification).
		c.err = err
		var ce *CommandError
		if errors.As(err, &ce) {
			if ce.HasErrorLabel(LabelRetryable) {
				// The server turned the getMore away at the door (overload)
				// and the client gave up retrying: the cursor is still
				// open there, so close it now rather than leave it to time
				// out.
				kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killCursorTimeout)
				_ = c.killCursor(kctx)
				cancel()
			}
			if c.pin != nil && ce.Code != mongoerr.CodeCursorNotFound && !ce.HasErrorLabel(LabelRetryable) {
				// Load-balanced: the cursor may live on; Close kills it on
				// the pinned connection (load balancer specification).
				return
			}
			// The server rejected the getMore (e.g. CursorNotFound); the
			// cursor is gone.
			c.id = 0
			c.releaseSession()
		}
		return
	}
	if err := c.load(res.Reply); err != nil {
		c.err = err
		return
	}
	c.buf = res.ReplyBuffer
	if c.id == 0 {
		c.unpin() // drained
		c.releaseSession()
	}
}

// recycleBatch hands the buffer of the consumed batch back for the next
// reply to be read into. Only an exhausted batch's buffer is recycled, once
// Current no longer points into it: Close leaves a buffer alone, as the
// Current it leaves may still be in use (FindOne returns it).
func (c *Cursor) recycleBatch() {
	bufpool.Put(c.buf)
	c.buf = nil
}

// unpin returns the cursor's pinned connection, if any.
func (c *Cursor) unpin() {
	if c.pin != nil {
		c.pin.UnpinCursor()
		c.pin = nil
	}
}

// Decode unmarshals Current into v.
func (c *Cursor) Decode(v any) error {
	if c.Current == nil {
		return errors.New("sturdy: Decode called without a current document (call Next first)")
	}
	return bson.Unmarshal(c.Current, v)
}

// Err returns the error that stopped Next, if any.
func (c *Cursor) Err() error {
	if c.src != nil && c.err == nil {
		return c.src.Err()
	}
	return c.err
}

// All decodes every remaining document into results, a pointer to a slice,
// and closes the cursor.
func (c *Cursor) All(ctx context.Context, results any) (err error) {
	defer func() {
		if cerr := c.Close(context.WithoutCancel(ctx)); err == nil {
			err = cerr
		}
	}()
	rv := reflect.ValueOf(results)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Slice {
		return argError("All needs a non-nil pointer to a slice, got %T", results)
	}
	slice := rv.Elem()
	slice.SetLen(0)
	elemType := slice.Type().Elem()
	for c.Next(ctx) {
		elem := reflect.New(elemType)
		if err := bson.Unmarshal(c.Current, elem.Interface()); err != nil {
			return fmt.Errorf("sturdy: decoding document %d: %w", slice.Len(), err)
		}
		slice = reflect.Append(slice, elem.Elem())
	}
	rv.Elem().Set(slice)
	return c.Err()
}

// Close kills the server cursor if it is not exhausted and releases the
// cursor's implicit session. It is safe to call more than once.
func (c *Cursor) Close(ctx context.Context) error {
	if c.closed {
		return nil
	}
	c.closed = true
	c.batch = docBatch{}
	if c.src != nil {
		return c.src.Close(ctx)
	}
	var err error
	// A pinned connection a network error closed cannot carry killCursors.
	if c.id != 0 && (c.pin == nil || !c.pin.Conn().Closed()) {
		kctx, cancel := c.tmo.closeContext(ctx)
		err = c.killCursor(kctx)
		cancel()
	}
	c.id = 0
	c.unpin()
	c.releaseSession()
	return err
}

// killCursorTimeout bounds the best-effort killCursors sent when a getMore
// gives up after overload retries.
const killCursorTimeout = 10 * time.Second

// killCursor asks the cursor's server to close the cursor.
func (c *Cursor) killCursor(ctx context.Context) error {
	cmd := bson.D{{Key: "killCursors", Value: c.coll}, {Key: "cursors", Value: bson.A{c.id}}}
	_, err := c.client.execute(ctx, &exec.Operation{Name: "killCursors", DB: c.db, Command: cmd, Server: c.server, Session: c.sess, Pin: c.pin}, nil)
	return err
}

func (c *Cursor) releaseSession() {
	if c.ownsSess && c.sess != nil {
		c.sess.End()
		c.sess = nil
	}
}
