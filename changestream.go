package sturdy

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/internal/csot"
	"github.com/sturdy-go/sturdy/internal/exec"
	"github.com/sturdy-go/sturdy/mongoerr"
)

// LabelResumableChangeStream marks a getMore error after which a change
// stream may resume (servers 4.4+ attach it).
const LabelResumableChangeStream = mongoerr.LabelResumableChangeStream

// ErrMissingResumeToken is returned when a change event has no _id (a
// pipeline projected it out): the stream could not resume after it.
var ErrMissingResumeToken = errors.New("sturdy: change event has no _id resume token (do not project out _id)")

// ChangeStreamOptions are the options of Watch. The zero value watches from
// now, with the server's defaults.
type ChangeStreamOptions struct {
	// FullDocument is "" (the server's default), "default", "updateLookup",
	// "whenAvailable" or "required".
	FullDocument string
	// FullDocumentBeforeChange is "" (not sent), "off", "whenAvailable" or
	// "required".
	FullDocumentBeforeChange string
	// ResumeAfter and StartAfter are resume tokens (ResumeToken of an
	// earlier stream); at most one may be set.
	ResumeAfter, StartAfter any
	// StartAtOperationTime starts at a cluster time.
	StartAtOperationTime *bson.Timestamp
	// BatchSize limits the documents of each batch (0: server default).
	BatchSize int32
	// MaxAwaitTime is how long each getMore waits for new events (0: the
	// server's default, one second).
	MaxAwaitTime time.Duration
	// ShowExpandedEvents asks for DDL events (MongoDB 6.0+).
	ShowExpandedEvents *bool
	Collation          *Collation
	Comment            any
	Session            *Session
}

// ChangeStream iterates over change events of a collection, a database or
// the whole deployment. Each event's _id is its resume token. After a
// network error or a resumable server error on getMore it reopens once,
// resuming after the last token it saw. A ChangeStream is for one
// goroutine at a time; Close it when done.
type ChangeStream struct {
	// Current is the event Next or TryNext moved to; valid until the next
	// call.
	Current bson.Raw

	client    *Client
	db, coll  string // coll "" with cluster false: the database
	cluster   bool
	pipeline  bson.A
	rp        *ReadPreference
	rc        string
	opts      ChangeStreamOptions
	cursor    *Cursor
	token     bson.Raw // resume token after Current (or the batch)
	postBatch bson.Raw // the last batch's postBatchResumeToken
	sawEvent  bool
	err       error
	closed    bool
	// timeout is the timeoutMS of the Watch that opened the stream, applied
	// afresh to each Next; timedOut makes the Next after a timeout resume.
	timeout  *time.Duration
	timedOut bool
}

// Watch opens a change stream on every non-system collection of the
// deployment (MongoDB replica sets and sharded clusters).
func (c *Client) Watch(ctx context.Context, pipeline any, optList ...*ChangeStreamOptions) (*ChangeStream, error) {
	ctx, cancel := c.begin(ctx)
	defer cancel()
	db := c.Database("admin")
	return newChangeStream(ctx, c, "admin", "", true, db.rp, db.rc, pipeline, lastOptions(optList))
}

// Watch opens a change stream on the database's collections.
func (db *Database) Watch(ctx context.Context, pipeline any, optList ...*ChangeStreamOptions) (*ChangeStream, error) {
	ctx, cancel := db.begin(ctx)
	defer cancel()
	return newChangeStream(ctx, db.client, db.name, "", false, db.rp, db.rc, pipeline, lastOptions(optList))
}

// Watch opens a change stream on the collection.
func (coll *Collection) Watch(ctx context.Context, pipeline any, optList ...*ChangeStreamOptions) (*ChangeStream, error) {
	ctx, cancel := coll.begin(ctx)
	defer cancel()
	return newChangeStream(ctx, coll.client, coll.db, coll.name, false, coll.rp, coll.rc, pipeline, lastOptions(optList))
}

func newChangeStream(ctx context.Context, client *Client, db, coll string, cluster bool, rp *ReadPreference, rc string, pipeline any, opts *ChangeStreamOptions) (*ChangeStream, error) {
	cs := &ChangeStream{client: client, db: db, coll: coll, cluster: cluster, rp: rp, rc: rc}
	if opts != nil {
		cs.opts = *opts
	}
	if cs.opts.ResumeAfter != nil && cs.opts.StartAfter != nil {
		return nil, argError("ResumeAfter and StartAfter are exclusive")
	}
	pv, err := pipelineValue(pipeline)
	if err != nil {
		return nil, err
	}
	if d, ok := csot.Timeout(ctx); ok {
		cs.timeout = &d
		if d > 0 && cs.opts.MaxAwaitTime >= d {
			return nil, argError("MaxAwaitTime %v must be less than the timeoutMS %v", cs.opts.MaxAwaitTime, d)
		}
	}
	vals, _ := pv.Array().Values()
	for _, v := range vals {
		cs.pipeline = append(cs.pipeline, v.Document())
	}
	if err := cs.open(ctx, nil); err != nil {
		return nil, err
	}
	return cs, nil
}

// stage builds the $changeStream stage; resume is the token to resume
// after (nil: the options' starting point).
func (cs *ChangeStream) stage(resume bson.Raw) bson.D {
	s := bson.D{}
	if cs.cluster {
		s = append(s, bson.E{Key: "allChangesForCluster", Value: true})
	}
	if cs.opts.FullDocument != "" {
		s = append(s, bson.E{Key: "fullDocument", Value: cs.opts.FullDocument})
	}
	if cs.opts.FullDocumentBeforeChange != "" {
		s = append(s, bson.E{Key: "fullDocumentBeforeChange", Value: cs.opts.FullDocumentBeforeChange})
	}
	if cs.opts.ShowExpandedEvents != nil {
		s = append(s, bson.E{Key: "showExpandedEvents", Value: *cs.opts.ShowExpandedEvents})
	}
	switch {
	case resume != nil && cs.opts.StartAfter != nil && !cs.sawEvent:
		// Nothing was returned yet: start after the same point again.
		s = append(s, bson.E{Key: "startAfter", Value: resume})
	case resume != nil:
		s = append(s, bson.E{Key: "resumeAfter", Value: resume})
	case cs.opts.ResumeAfter != nil:
		s = append(s, bson.E{Key: "resumeAfter", Value: cs.opts.ResumeAfter})
	case cs.opts.StartAfter != nil:
		s = append(s, bson.E{Key: "startAfter", Value: cs.opts.StartAfter})
	case cs.opts.StartAtOperationTime != nil:
		s = append(s, bson.E{Key: "startAtOperationTime", Value: *cs.opts.StartAtOperationTime})
	}
	return s
}

// open runs the aggregate that opens (or reopens) the server cursor; the
// aggregate is a retryable read.
func (cs *ChangeStream) open(ctx context.Context, resume bson.Raw) error {
	pipeline := append(bson.A{bson.D{{Key: "$changeStream", Value: cs.stage(resume)}}}, cs.pipeline...)
	var target any = cs.coll
	if cs.coll == "" {
		target = int32(1)
	}
	cmd := cmdBuilder{{Key: "aggregate", Value: target}, {Key: "pipeline", Value: pipeline}}
	cursorDoc := bson.D{}
	if cs.opts.BatchSize > 0 {
		cursorDoc = append(cursorDoc, bson.E{Key: "batchSize", Value: cs.opts.BatchSize})
	}
	cmd.add("cursor", cursorDoc)
	cmd.addCollation(cs.opts.Collation)
	cmd.addIf("comment", cs.opts.Comment)
	if cs.rc != "" {
		cmd.add("readConcern", bson.D{{Key: "level", Value: cs.rc}})
	}
	s := cs.opts.Session
	op := &exec.Operation{Name: "aggregate", DB: cs.db, Command: bson.D(cmd), ReadPref: readPref(cs.rp), Flags: exec.RetryableRead | exec.PinCursor | exec.KeepSession.If(s == nil)}
	res, err := cs.client.execute(ctx, op, s)
	if err != nil {
		if s == nil && res.Session != nil {
			res.Session.End()
		}
		return err
	}
	c := &Cursor{client: cs.client, server: res.Server, sess: res.Session, ownsSess: s == nil, batchSize: cs.opts.BatchSize, comment: cs.opts.Comment, pin: res.Pin}
	if err := c.load(res.Reply); err != nil {
		c.unpin()
		c.releaseSession()
		return err
	}
	if c.db == "" {
		c.db = cs.db
	}
	cs.cursor = c
	cs.notePostBatch(res.Reply)
	if cs.token == nil {
		// Before any event the stream resumes from where it started.
		switch {
		case cs.postBatch != nil && c.batch.n == 0:
			cs.token = cs.postBatch
		case cs.opts.StartAfter != nil:
			cs.token, _ = toDoc(cs.opts.StartAfter, false)
		case cs.opts.ResumeAfter != nil:
			cs.token, _ = toDoc(cs.opts.ResumeAfter, false)
		}
	}
	return nil
}

// notePostBatch remembers a reply's postBatchResumeToken.
func (cs *ChangeStream) notePostBatch(reply bson.Raw) {
	if d, ok := reply.Lookup("cursor", "postBatchResumeToken").DocumentOK(); ok {
		cs.postBatch = append(bson.Raw(nil), d...)
	}
}

// Next moves to the next event, waiting for one; it returns false when the
// stream ends (closed, invalidated, or an error: see Err) or ctx is done.
func (cs *ChangeStream) Next(ctx context.Context) bool { return cs.next(ctx, true) }

// TryNext moves to the next event if one is available after at most one
// getMore; it returns false without an error when none arrived in time.
func (cs *ChangeStream) TryNext(ctx context.Context) bool { return cs.next(ctx, false) }

func (cs *ChangeStream) next(ctx context.Context, wait bool) bool {
	cs.Current = nil
	if cs.timedOut && !cs.closed {
		// The last Next timed out: the stream is still valid, resumed now.
		cs.err, cs.timedOut = nil, false
		ctx, cancel := cs.nextContext(ctx)
		defer cancel()
		if err := cs.resume(ctx); err != nil {
			cs.fail(err)
			return false
		}
	}
	if cs.closed || cs.err != nil {
		return false
	}
	ctx, cancel := cs.nextContext(ctx)
	defer cancel()
	for {
		if doc, ok := cs.cursor.batch.next(); ok {
			id, ok := doc.Lookup("_id").DocumentOK()
			if !ok {
				cs.err = ErrMissingResumeToken
				_ = cs.Close(context.WithoutCancel(ctx))
				return false
			}
			cs.Current, cs.token, cs.sawEvent = doc, append(bson.Raw(nil), id...), true
			if cs.cursor.batch.n == 0 && cs.postBatch != nil {
				cs.token = cs.postBatch
			}
			return true
		}
		if cs.postBatch != nil {
			cs.token = cs.postBatch
		}
		if cs.cursor.id == 0 {
			// The server closed the cursor (an invalidate event ended it).
			return false
		}
		if err := ctx.Err(); err != nil {
			cs.fail(err)
			return false
		}
		if err := cs.getMore(ctx); err != nil {
			if !resumableChangeStreamError(err) {
				cs.fail(err)
				return false
			}
			if err := cs.resume(ctx); err != nil {
				cs.fail(err)
				return false
			}
			continue
		}
		if !wait && cs.cursor.batch.n == 0 {
			return false
		}
	}
}

// nextContext applies the stream's timeoutMS afresh to one Next: its
// getMores carry only MaxAwaitTime (capped by the time left) as maxTimeMS.
func (cs *ChangeStream) nextContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if cs.timeout == nil || csot.Active(ctx) {
		return ctx, func() {}
	}
	return csot.StartWith(ctx, *cs.timeout, true)
}

// fail records the error that ends a Next. A timeout under timeoutMS does
// not invalidate the stream: the next Next resumes it.
func (cs *ChangeStream) fail(err error) {
	cs.err = err
	if cs.timeout != nil && IsTimeout(err) {
		cs.timedOut = true
	}
}

// getMore fetches the next batch, waiting up to MaxAwaitTime on the server.
func (cs *ChangeStream) getMore(ctx context.Context) error {
	c := cs.cursor
	cmd := cmdBuilder{{Key: "getMore", Value: c.id}, {Key: "collection", Value: c.coll}}
	if c.batchSize > 0 {
		cmd.add("batchSize", c.batchSize)
	}
	cmd.addMaxTime(cs.opts.MaxAwaitTime)
	cmd.addIf("comment", c.comment)
	res, err := cs.client.execute(ctx, &exec.Operation{Name: "getMore", DB: c.db, Command: bson.D(cmd), Server: c.server, Session: c.sess, Pin: c.pin}, nil)
	if err != nil {
		var ce *CommandError
		if errors.As(err, &ce) && ce.Code == mongoerr.CodeCursorNotFound { // CursorNotFound: gone on the server
			c.id = 0
		}
		return err
	}
	if err := c.load(res.Reply); err != nil {
		return err
	}
	if c.id == 0 {
		c.unpin()
	}
	cs.notePostBatch(res.Reply)
	return nil
}

// resume closes the broken cursor and reopens the stream after the last
// resume token (server selection runs again).
func (cs *ChangeStream) resume(ctx context.Context) error {
	old := cs.cursor
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killCursorTimeout)
	_ = old.Close(kctx)
	cancel()
	return cs.open(csot.WithMaxTime(ctx), cs.token)
}

// resumableChangeStreamError reports whether a getMore error allows a
// resume: a network error (not a timeout of the caller's context), a
// server error labelled ResumableChangeStreamError, or CursorNotFound.
func resumableChangeStreamError(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if IsNetworkError(err) {
		return true
	}
	var ce *CommandError
	if !errors.As(err, &ce) {
		return false
	}
	return ce.HasErrorLabel(LabelResumableChangeStream) || ce.Code == mongoerr.CodeCursorNotFound
}

// Decode unmarshals Current into v.
func (cs *ChangeStream) Decode(v any) error {
	if cs.Current == nil {
		return errors.New("sturdy: Decode called without a current event (call Next first)")
	}
	return bson.Unmarshal(cs.Current, v)
}

// ResumeToken returns the token to resume after the last event returned
// (or after the last empty batch); pass it as ResumeAfter to a new stream.
func (cs *ChangeStream) ResumeToken() bson.Raw { return cs.token }

// Err returns the error that stopped the stream, if any.
func (cs *ChangeStream) Err() error { return cs.err }

// ID returns the server cursor's id; 0 once it is closed.
func (cs *ChangeStream) ID() int64 {
	if cs.cursor == nil {
		return 0
	}
	return cs.cursor.id
}

// Close kills the server cursor and releases the stream's implicit
// session. It is safe to call more than once.
func (cs *ChangeStream) Close(ctx context.Context) error {
	if cs.closed {
		return nil
	}
	cs.closed = true
	return cs.cursor.Close(ctx)
}
