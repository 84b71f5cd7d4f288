package sturdy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/internal/bsonnum"
	"github.com/sturdy-go/sturdy/internal/csot"
	"github.com/sturdy-go/sturdy/internal/exec"
	"github.com/sturdy-go/sturdy/internal/rawdoc"
	"github.com/sturdy-go/sturdy/internal/topology"
	"github.com/sturdy-go/sturdy/mongoerr"
)

// Collection is a handle to a collection. It is cheap to create and safe for
// concurrent use. Every method takes a context first and an optional options
// struct last (nil: defaults). Documents and filters are anything
// bson.Marshal accepts: bson.D, bson.M, bson.Raw or a tagged struct; a nil
// filter matches every document.
type Collection struct {
	client *Client
	db     string
	name   string
	nameV  any // name as an interface value, boxed once for every command
	wc     *WriteConcern
	rp     *ReadPreference
	rc     string
	// timeout is the collection's timeoutMS (nil: none set at any level).
	timeout *time.Duration
}

// begin starts an operation under the collection's timeoutMS (see csot).
func (coll *Collection) begin(ctx context.Context) (context.Context, context.CancelFunc) {
	return csot.Start(ctx, coll.timeout)
}

// nameValue is the collection's name as a command field value.
func (coll *Collection) nameValue() any {
	if coll.nameV != nil {
		return coll.nameV
	}
	return coll.name
}

// Name returns the collection's name.
func (coll *Collection) Name() string { return coll.name }

// Database returns the collection's database.
func (coll *Collection) Database() *Database {
	return &Database{client: coll.client, name: coll.db, wc: coll.wc, rp: coll.rp, rc: coll.rc}
}

// unacknowledged reports whether a write with session s is unacknowledged:
// the collection's write concern is w: 0 and s has no active transaction.
// Inside a transaction the transaction's write concern applies, at commit
// (transactions spec), so the write runs as an ordinary statement.
func (coll *Collection) unacknowledged(s *Session) bool {
	return coll.wc.Unacknowledged() && !s.inTransaction()
}

// readConcern is the readConcern field of a read command, or nil.
func (coll *Collection) readConcern() any {
	if coll.rc == "" {
		return nil
	}
	return bson.D{{Key: "level", Value: coll.rc}}
}

// InsertOne inserts doc. If doc has no _id, an ObjectID is generated and
// placed first; InsertedID reports it either way.
func (coll *Collection) InsertOne(ctx context.Context, doc any, optList ...*InsertOneOptions) (*InsertOneResult, error) {
	ctx, cancel := coll.begin(ctx)
	defer cancel()
	opts := lastOptions(optList)
	if opts == nil {
		opts = &InsertOneOptions{}
	}
	buf := stmtBufs.Get().(*[]byte)
	defer stmtBufs.Put(buf)
	raw, id, err := toDocWithID((*buf)[:0], doc)
	if err != nil {
		return nil, err
	}
	o := &writeOpts{bypass: opts.BypassDocumentValidation, comment: opts.Comment, session: opts.Session}
	ack := !coll.unacknowledged(opts.Session)
	if _, err := coll.writeOne(ctx, kindInsert, writeStmt{doc: raw}, o); err != nil {
		return nil, err
	}
	return &InsertOneResult{InsertedID: id, Acknowledged: ack}, nil
}

// InsertMany inserts docs, split into as few insert commands as the server's
// limits allow. Ordered (the default) stops at the first error. Write
// errors, and a command or network error after an earlier command was
// answered, are returned as a *BulkWriteException indexed by position in
// docs, with the partial result.
func (coll *Collection) InsertMany(ctx context.Context, docs []any, optList ...*InsertManyOptions) (*InsertManyResult, error) {
	ctx, cancel := coll.begin(ctx)
	defer cancel()
	opts := lastOptions(optList)
	if opts == nil {
		opts = &InsertManyOptions{}
	}
	if len(docs) == 0 {
		return nil, ErrEmptySlice
	}
	stmts := make([]writeStmt, len(docs))
	ids := make([]any, len(docs))
	for i, d := range docs {
		var err error
		if stmts[i].doc, ids[i], err = toDocWithID(nil, d); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		stmts[i].index = i
	}
	o := &writeOpts{ordered: opts.Ordered == nil || *opts.Ordered, bypass: opts.BypassDocumentValidation, comment: opts.Comment, session: opts.Session}
	ack := !coll.unacknowledged(opts.Session)
	_, err := coll.runWrites(ctx, []writeGroup{{kind: kindInsert, stmts: stmts}}, o, nil)
	var bwe *BulkWriteException
	if err != nil && !errors.As(err, &bwe) {
		return nil, err
	}
	return &InsertManyResult{InsertedIDs: ids, Acknowledged: ack}, err
}

// UpdateOne applies update (a document of $-operators, or a pipeline) to
// the first document matching filter.
func (coll *Collection) UpdateOne(ctx context.Context, filter, update any, optList ...*UpdateOptions) (*UpdateResult, error) {
	ctx, cancel := coll.begin(ctx)
	defer cancel()
	opts := lastOptions(optList)
	return coll.update(ctx, filter, update, false, opts)
}

// UpdateMany applies update to every document matching filter.
func (coll *Collection) UpdateMany(ctx context.Context, filter, update any, optList ...*UpdateOptions) (*UpdateResult, error) {
	ctx, cancel := coll.begin(ctx)
	defer cancel()
	opts := lastOptions(optList)
	if opts != nil && opts.Sort != nil {
		return nil, argError("UpdateMany does not take a sort")
	}
	return coll.update(ctx, filter, update, true, opts)
}

func (coll *Collection) update(ctx context.Context, filter, update any, multi bool, opts *UpdateOptions) (*UpdateResult, error) {
	if opts == nil {
		opts = &UpdateOptions{}
	}
	buf := stmtBufs.Get().(*[]byte)
	defer stmtBufs.Put(buf)
	stmt, err := updateStmt((*buf)[:0], filter, update, multi, opts.Upsert, opts.ArrayFilters, opts.Collation, opts.Hint, opts.Sort)
	if err != nil {
		return nil, err
	}
	return coll.runUpdate(ctx, stmt, multi, opts.BypassDocumentValidation, opts.Let, opts.Comment, opts.Session)
}

// stmtBufs recycles the buffers single-document writes encode their
// statement or document in: nothing refers to it once its command has run
// (command events carry copies). The pool holds only the buffers it made: a
// statement that outgrows one is encoded into a new array, which is not kept,
// and a caller's own document (a bson.Raw) never lands in the pool.
var stmtBufs = sync.Pool{New: func() any {
	b := make([]byte, 0, stmtBufSize)
	return &b
}}

// stmtBufSize fits the usual single statement.
const stmtBufSize = 512

// ReplaceOne replaces the first document matching filter with replacement,
// which must not contain $-operators.
func (coll *Collection) ReplaceOne(ctx context.Context, filter, replacement any, optList ...*ReplaceOptions) (*UpdateResult, error) {
	ctx, cancel := coll.begin(ctx)
	defer cancel()
	opts := lastOptions(optList)
	if opts == nil {
		opts = &ReplaceOptions{}
	}
	stmt, err := replaceStmt(filter, replacement, opts.Upsert, opts.Collation, opts.Hint, opts.Sort)
	if err != nil {
		return nil, err
	}
	return coll.runUpdate(ctx, stmt, false, opts.BypassDocumentValidation, opts.Let, opts.Comment, opts.Session)
}

// updateReplyKeys are the fields of an update's reply runUpdate reads.
var updateReplyKeys = [...]string{"n", "nModified", "upserted"}

func (coll *Collection) runUpdate(ctx context.Context, stmt bson.Raw, multi bool, bypass *bool, let, comment any, s *Session) (*UpdateResult, error) {
	o := &writeOpts{bypass: bypass, comment: comment, session: s}
	var err error
	if o.let, err = docOrNil(let); err != nil {
		return nil, err
	}
	reply, err := coll.writeOne(ctx, kindUpdate, writeStmt{doc: stmt, multi: multi}, o)
	if err != nil {
		return nil, err
	}
	if reply == nil {
		return &UpdateResult{}, nil
	}
	var f [3]bson.RawValue // n, nModified, upserted
	rawdoc.FirstFields(reply, updateReplyKeys[:], f[:])
	n, _ := bsonnum.Int64(f[0])
	modified, _ := bsonnum.Int64(f[1])
	res := &UpdateResult{Acknowledged: true, ModifiedCount: modified}
	if v := f[2]; v.Type != 0 {
		if arr, ok := v.ArrayOK(); ok {
			if vals, _ := arr.Values(); len(vals) > 0 {
				if d, ok := vals[0].DocumentOK(); ok {
					if idv, err := d.LookupErr("_id"); err == nil {
						_ = idv.Unmarshal(&res.UpsertedID)
					}
				}
				res.UpsertedCount = int64(len(vals))
			}
		}
	}
	res.MatchedCount = n - res.UpsertedCount
	return res, nil
}

// DeleteOne deletes the first document matching filter.
func (coll *Collection) DeleteOne(ctx context.Context, filter any, optList ...*DeleteOptions) (*DeleteResult, error) {
	ctx, cancel := coll.begin(ctx)
	defer cancel()
	opts := lastOptions(optList)
	return coll.delete(ctx, filter, 1, opts)
}

// DeleteMany deletes every document matching filter.
func (coll *Collection) DeleteMany(ctx context.Context, filter any, optList ...*DeleteOptions) (*DeleteResult, error) {
	ctx, cancel := coll.begin(ctx)
	defer cancel()
	opts := lastOptions(optList)
	return coll.delete(ctx, filter, 0, opts)
}

func (coll *Collection) delete(ctx context.Context, filter any, limit int32, opts *DeleteOptions) (*DeleteResult, error) {
	if opts == nil {
		opts = &DeleteOptions{}
	}
	stmt, err := deleteStmt(filter, limit, opts.Collation, opts.Hint)
	if err != nil {
		return nil, err
	}
	o := &writeOpts{comment: opts.Comment, session: opts.Session}
	if o.let, err = docOrNil(opts.Let); err != nil {
		return nil, err
	}
	reply, err := coll.writeOne(ctx, kindDelete, writeStmt{doc: stmt, multi: limit == 0}, o)
	if err != nil {
		return nil, err
	}
	if reply == nil {
		return &DeleteResult{}, nil
	}
	return &DeleteResult{DeletedCount: int64Of(reply, "n"), Acknowledged: true}, nil
}

// findAndModify runs a findAndModify command and wraps its value.
func (coll *Collection) findAndModify(ctx context.Context, cmd cmdBuilder, s *Session) *SingleResult {
	unack := coll.unacknowledged(s)
	if unack && hasKey(cmd, "hint") {
		// Servers before 4.4 (wire version 9) reject hint silently under
		// w: 0, so the CRUD spec wants the error raised client-side.
		if err := coll.client.requireWireVersion(ctx, 9, "hint with an unacknowledged findAndModify"); err != nil {
			return &SingleResult{err: err}
		}
	}
	cmd.addIf("writeConcern", writeConcernDoc(coll.wc))
	op := &exec.Operation{Name: "findAndModify", DB: coll.db, Command: bson.D(cmd), Flags: exec.Write | exec.RetryableWrite.If(!unack) | exec.Unacknowledged.If(unack)}
	res, err := coll.client.execute(ctx, op, s)
	if err != nil {
		return &SingleResult{err: err}
	}
	if unack {
		// Sent with moreToCome: the server's document never comes back.
		return &SingleResult{err: ErrUnacknowledgedWrite}
	}
	v, lerr := res.Reply.LookupErr("value")
	if lerr != nil || v.Type == bson.TypeNull {
		return &SingleResult{err: ErrNoDocuments}
	}
	doc, ok := v.DocumentOK()
	if !ok {
		return &SingleResult{err: fmt.Errorf("sturdy: findAndModify value is a %v, not a document", v.Type)}
	}
	return &SingleResult{raw: doc}
}

// hasKey reports whether the command has a field named key.
func hasKey(cmd cmdBuilder, key string) bool {
	for _, e := range cmd {
		if e.Key == key {
			return true
		}
	}
	return false
}

// requireWireVersion selects a writable server and returns an
// ErrInvalidArgument error naming feature if its maxWireVersion is below
// min.
func (c *Client) requireWireVersion(ctx context.Context, min int32, feature string) error {
	if c.closed.Load() {
		return ErrClientDisconnected
	}
	srv, err := c.topo.SelectServer(ctx, topology.WriteSelector(), nil)
	if err != nil {
		return err
	}
	srv.Dec() // selected only to read its description
	// A load balancer before its first connection: the service decides.
	if v := srv.Description().MaxWireVersion; v < min && srv.WireVersionKnown() {
		return argError("%s needs a server with wire version %d or later, the server has %d", feature, min, v)
	}
	return nil
}

// famBase is the part of a findAndModify command common to all three forms.
func (coll *Collection) famBase(filter, sort, projection any, coll2 *Collation, hint, let, comment any) (cmdBuilder, error) {
	q, err := toDoc(filter, true)
	if err != nil {
		return nil, err
	}
	cmd := cmdBuilder{{Key: "findAndModify", Value: coll.name}, {Key: "query", Value: q}}
	if err := cmd.addDoc("sort", sort); err != nil {
		return nil, err
	}
	if err := cmd.addDoc("fields", projection); err != nil {
		return nil, err
	}
	cmd.addCollation(coll2)
	cmd.addIf("hint", hint)
	l, err := docOrNil(let)
	if err != nil {
		return nil, err
	}
	cmd.addIf("let", l)
	cmd.addIf("comment", comment)
	return cmd, nil
}

// FindOneAndUpdate updates the first document matching filter (in Sort
// order) and returns it as it was before the update, or after with
// ReturnDocument: After. It returns ErrNoDocuments if nothing matched and
// nothing was upserted.
func (coll *Collection) FindOneAndUpdate(ctx context.Context, filter, update any, optList ...*FindOneAndUpdateOptions) *SingleResult {
	opts := lastOptions(optList)
	if opts == nil {
		opts = &FindOneAndUpdateOptions{}
	}
	u, err := updateValue(update)
	if err != nil {
		return &SingleResult{err: err}
	}
	return coll.findOneAndWrite(ctx, filter, u, opts)
}

// FindOneAndReplace replaces the first document matching filter and returns
// it as it was before (or after, with ReturnDocument: After).
func (coll *Collection) FindOneAndReplace(ctx context.Context, filter, replacement any, optList ...*FindOneAndReplaceOptions) *SingleResult {
	opts := lastOptions(optList)
	if opts == nil {
		opts = &FindOneAndReplaceOptions{}
	}
	r, err := replacementDoc(replacement)
	if err != nil {
		return &SingleResult{err: err}
	}
	// A replacement takes every update option but ArrayFilters.
	return coll.findOneAndWrite(ctx, filter, r, &FindOneAndUpdateOptions{
		ReturnDocument: opts.ReturnDocument, Upsert: opts.Upsert, Sort: opts.Sort, Projection: opts.Projection,
		Collation: opts.Collation, Hint: opts.Hint, Let: opts.Let, Comment: opts.Comment, MaxTime: opts.MaxTime,
		BypassDocumentValidation: opts.BypassDocumentValidation, Session: opts.Session,
	})
}

// findOneAndWrite runs the findAndModify of FindOneAndUpdate or
// FindOneAndReplace; u is the update or the replacement document.
func (coll *Collection) findOneAndWrite(ctx context.Context, filter, u any, opts *FindOneAndUpdateOptions) *SingleResult {
	ctx, cancel := coll.begin(ctx)
	defer cancel()
	cmd, err := coll.famBase(filter, opts.Sort, opts.Projection, opts.Collation, opts.Hint, opts.Let, opts.Comment)
	if err != nil {
		return &SingleResult{err: err}
	}
	cmd.add("update", u)
	cmd.addTrue("new", opts.ReturnDocument == After)
	cmd.addTrue("upsert", opts.Upsert)
	if opts.ArrayFilters != nil {
		cmd.add("arrayFilters", opts.ArrayFilters)
	}
	cmd.addBoolPtr("bypassDocumentValidation", opts.BypassDocumentValidation)
	cmd.addMaxTime(opts.MaxTime)
	return coll.findAndModify(ctx, cmd, opts.Session)
}

// FindOneAndDelete deletes the first document matching filter and returns it.
func (coll *Collection) FindOneAndDelete(ctx context.Context, filter any, optList ...*FindOneAndDeleteOptions) *SingleResult {
	ctx, cancel := coll.begin(ctx)
	defer cancel()
	opts := lastOptions(optList)
	if opts == nil {
		opts = &FindOneAndDeleteOptions{}
	}
	cmd, err := coll.famBase(filter, opts.Sort, opts.Projection, opts.Collation, opts.Hint, opts.Let, opts.Comment)
	if err != nil {
		return &SingleResult{err: err}
	}
	cmd.add("remove", true)
	cmd.addMaxTime(opts.MaxTime)
	return coll.findAndModify(ctx, cmd, opts.Session)
}

// Find returns a cursor over the documents matching filter.
func (coll *Collection) Find(ctx context.Context, filter any, optList ...*FindOptions) (*Cursor, error) {
	ctx, cancel := coll.begin(ctx)
	defer cancel()
	opts := lastOptions(optList)
	if opts == nil {
		opts = &FindOptions{}
	}
	return coll.find(ctx, filter, opts, nil)
}

// find is Find with the cursor made in into (nil: allocated).
func (coll *Collection) find(ctx context.Context, filter any, opts *FindOptions, into *Cursor) (*Cursor, error) {
	w := findOps.Get().(*findOp)
	defer w.recycle()
	cmd, err := coll.findCommand(filter, opts, w)
	if err != nil {
		return nil, err
	}
	op := &w.op
	*op = exec.Operation{Name: "find", DB: coll.db, Command: bson.D(cmd), ReadPref: readPref(coll.rp), Flags: exec.RetryableRead}
	var maxAwait time.Duration
	if opts.CursorType == TailableAwait {
		maxAwait = opts.MaxAwaitTime // mongod ignores getMore's maxTimeMS on other cursors
	}
	return openCursor(ctx, coll.client, op, cursorSpec{session: opts.Session, batchSize: opts.BatchSize, comment: opts.Comment, mode: opts.TimeoutMode,
		cursorType: opts.CursorType, maxAwait: maxAwait, into: into})
}

// findOp is a find's operation with room for its command and its encoded
// filter: one object, recycled through findOps (the cursor keeps nothing of
// the operation).
type findOp struct {
	op     exec.Operation
	cmd    [8]bson.E
	filter bson.Raw // the command's filter, which points here: no boxing
	buf    []byte   // where the filter is encoded
}

var findOps = sync.Pool{New: func() any { return new(findOp) }}

// recycle clears w, so that the pool holds no caller's data alive, and
// returns it to the pool with its filter buffer (one of its own: appendDoc
// copies a caller's bson.Raw into it).
func (w *findOp) recycle() {
	buf := w.buf[:0]
	if cap(buf) > maxPooledFilter {
		buf = nil
	}
	*w = findOp{buf: buf}
	findOps.Put(w)
}

// maxPooledFilter bounds the filter buffer a findOp keeps in the pool.
const maxPooledFilter = 4 << 10

// findCommand is the find command, built in w.
func (coll *Collection) findCommand(filter any, opts *FindOptions, w *findOp) (cmdBuilder, error) {
	f, err := appendDoc(w.buf[:0], filter, true)
	if err != nil {
		return nil, err
	}
	w.buf, w.filter = f, f
	cmd := cmdBuilder(w.cmd[:0])
	cmd = append(cmd, bson.E{Key: "find", Value: coll.nameValue()}, bson.E{Key: "filter", Value: &w.filter})
	for _, field := range []struct {
		key string
		v   any
	}{{"sort", opts.Sort}, {"projection", opts.Projection}, {"min", opts.Min}, {"max", opts.Max}, {"let", opts.Let}} {
		d, err := docOrNil(field.v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", field.key, err)
		}
		cmd.addIf(field.key, d)
	}
	cmd.addIf("hint", opts.Hint)
	if opts.Skip < 0 {
		return nil, argError("negative skip %d", opts.Skip)
	}
	if opts.Skip > 0 {
		cmd.add("skip", opts.Skip)
	}
	switch {
	case opts.Limit > 0:
		cmd.add("limit", opts.Limit)
	case opts.Limit < 0:
		cmd.add("limit", -opts.Limit)
		cmd.add("singleBatch", true)
	}
	if opts.BatchSize < 0 {
		return nil, argError("negative batch size %d", opts.BatchSize)
	}
	switch {
	case opts.BatchSize > 0 && int64(opts.BatchSize) == opts.Limit && opts.BatchSize < math.MaxInt32:
		// The server would fill the one batch yet leave the cursor open;
		// one more makes it close the cursor (CRUD spec).
		cmd.add("batchSize", opts.BatchSize+1)
	case opts.BatchSize > 0:
		cmd.add("batchSize", opts.BatchSize)
	}
	cmd.addCollation(opts.Collation)
	cmd.addIf("comment", opts.Comment)
	cmd.addMaxTime(opts.MaxTime)
	cmd.addBoolPtr("allowDiskUse", opts.AllowDiskUse)
	cmd.addTrue("allowPartialResults", opts.AllowPartialResults)
	cmd.addTrue("noCursorTimeout", opts.NoCursorTimeout)
	switch opts.CursorType {
	case NonTailable:
	case Tailable:
		cmd.add("tailable", true)
	case TailableAwait:
		cmd.add("tailable", true)
		cmd.add("awaitData", true)
	default:
		return nil, argError("unknown CursorType %d", opts.CursorType)
	}
	cmd.addTrue("returnKey", opts.ReturnKey)
	cmd.addTrue("showRecordId", opts.ShowRecordID)
	cmd.addIf("readConcern", coll.readConcern())
	return cmd, nil
}

// findOneCursors recycles FindOne's cursors, which never leave it.
var findOneCursors = sync.Pool{New: func() any { return new(Cursor) }}

// FindOne returns the first document matching filter (in Sort order), or
// ErrNoDocuments through the result's Err and Decode.
func (coll *Collection) FindOne(ctx context.Context, filter any, optList ...*FindOneOptions) *SingleResult {
	ctx, cancel := coll.begin(ctx)
	defer cancel()
	opts := lastOptions(optList)
	if opts == nil {
		opts = &FindOneOptions{}
	}
	fo := &FindOptions{Sort: opts.Sort, Projection: opts.Projection, Skip: opts.Skip, Hint: opts.Hint, Collation: opts.Collation,
		Let: opts.Let, Comment: opts.Comment, MaxTime: opts.MaxTime, ReturnKey: opts.ReturnKey, ShowRecordID: opts.ShowRecordID,
		Session: opts.Session, Limit: -1}
	cur, err := coll.find(ctx, filter, fo, findOneCursors.Get().(*Cursor))
	if err != nil {
		return &SingleResult{err: err}
	}
	defer func() {
		if cur.ID() == 0 {
			cur.Close(ctx) // nothing to send: no context to detach
		} else {
			cur.Close(context.WithoutCancel(ctx))
		}
		// Nothing refers to the closed cursor (the result keeps only
		// Current, which lies in the reply).
		*cur = Cursor{}
		findOneCursors.Put(cur)
	}()
	if !cur.Next(ctx) {
		if err := cur.Err(); err != nil {
			return &SingleResult{err: err}
		}
		return &SingleResult{err: ErrNoDocuments}
	}
	return &SingleResult{raw: cur.Current}
}

// Aggregate runs an aggregation pipeline (e.g. []bson.D or bson.A) and
// returns a cursor over its results. A pipeline ending in $out or $merge
// is a write: it goes to the primary with the collection's write concern.
func (coll *Collection) Aggregate(ctx context.Context, pipeline any, optList ...*AggregateOptions) (*Cursor, error) {
	ctx, cancel := coll.begin(ctx)
	defer cancel()
	opts := lastOptions(optList)
	return aggregate(ctx, coll.client, coll.db, coll.name, coll.rp, coll.rc, coll.wc, pipeline, opts)
}

// aggregate runs a collection aggregation, or a database one when coll is "".
func aggregate(ctx context.Context, client *Client, db, coll string, rp *ReadPreference, rc string, wc *WriteConcern, pipeline any, opts *AggregateOptions) (*Cursor, error) {
	if opts == nil {
		opts = &AggregateOptions{}
	}
	pv, err := pipelineValue(pipeline)
	if err != nil {
		return nil, err
	}
	write := hasWriteStage(pv)
	var target any = coll
	if coll == "" {
		target = int32(1)
	}
	cmd := cmdBuilder{{Key: "aggregate", Value: target}, {Key: "pipeline", Value: pv}}
	cursor := bson.D{}
	if opts.BatchSize > 0 && !write {
		cursor = append(cursor, bson.E{Key: "batchSize", Value: opts.BatchSize})
	}
	cmd.add("cursor", cursor)
	cmd.addBoolPtr("allowDiskUse", opts.AllowDiskUse)
	cmd.addCollation(opts.Collation)
	cmd.addIf("hint", opts.Hint)
	l, err := docOrNil(opts.Let)
	if err != nil {
		return nil, err
	}
	cmd.addIf("let", l)
	cmd.addIf("comment", opts.Comment)
	cmd.addMaxTime(opts.MaxTime)
	if write {
		cmd.addBoolPtr("bypassDocumentValidation", opts.BypassDocumentValidation)
	}
	if rc != "" {
		cmd.add("readConcern", bson.D{{Key: "level", Value: rc}})
	}
	op := &exec.Operation{Name: "aggregate", DB: db, Command: nil}
	if write {
		cmd.addIf("writeConcern", writeConcernDoc(wc))
		// 5.0+ secondaries run $out and $merge: the executor selects by
		// the read preference when every server is that recent.
		op.Flags |= exec.Write | exec.WriteStage
		op.ReadPref = readPref(rp)
	} else {
		op.ReadPref = readPref(rp)
		op.Flags |= exec.RetryableRead
	}
	op.Command = bson.D(cmd)
	if write && opts.TimeoutMode == TimeoutIteration {
		return nil, argError("timeoutMode iteration cannot be used with an aggregate with $out or $merge")
	}
	return openCursor(ctx, client, op, cursorSpec{session: opts.Session, batchSize: opts.BatchSize, comment: opts.Comment, mode: opts.TimeoutMode,
		maxAwait: opts.MaxAwaitTime})
}

// pipelineValue marshals a pipeline and checks it is an array of documents.
func pipelineValue(pipeline any) (bson.RawValue, error) {
	if pipeline == nil {
		return toValue(bson.A{})
	}
	pv, err := toValue(pipeline)
	if err != nil {
		return pv, err
	}
	arr, ok := pv.ArrayOK()
	if !ok {
		return pv, argError("pipeline must be an array of stages, not %T", pipeline)
	}
	vals, err := arr.Values()
	if err != nil {
		return pv, argError("invalid pipeline: %v", err)
	}
	for i, v := range vals {
		if _, ok := v.DocumentOK(); !ok {
			return pv, argError("pipeline stage %d is not a document", i)
		}
	}
	return pv, nil
}

// hasWriteStage reports whether the pipeline's last stage is $out or $merge.
func hasWriteStage(pv bson.RawValue) bool {
	vals, _ := pv.Array().Values()
	if len(vals) == 0 {
		return false
	}
	k := firstKey(vals[len(vals)-1].Document())
	return k == "$out" || k == "$merge"
}

// CountDocuments counts the documents matching filter exactly, with an
// aggregation ($match, $skip, $limit, $group).
func (coll *Collection) CountDocuments(ctx context.Context, filter any, optList ...*CountOptions) (int64, error) {
	ctx, cancel := coll.begin(ctx)
	defer cancel()
	opts := lastOptions(optList)
	if opts == nil {
		opts = &CountOptions{}
	}
	f, err := toDoc(filter, true)
	if err != nil {
		return 0, err
	}
	pipeline := bson.A{bson.D{{Key: "$match", Value: f}}}
	if opts.Skip > 0 {
		pipeline = append(pipeline, bson.D{{Key: "$skip", Value: opts.Skip}})
	}
	if opts.Limit > 0 {
		pipeline = append(pipeline, bson.D{{Key: "$limit", Value: opts.Limit}})
	}
	pipeline = append(pipeline, bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: int32(1)}, {Key: "n", Value: bson.D{{Key: "$sum", Value: int32(1)}}}}}})
	cur, err := coll.Aggregate(ctx, pipeline, &AggregateOptions{Hint: opts.Hint, Collation: opts.Collation, Comment: opts.Comment, MaxTime: opts.MaxTime, Session: opts.Session})
	if err != nil {
		return 0, err
	}
	defer cur.Close(context.WithoutCancel(ctx))
	if !cur.Next(ctx) {
		return 0, cur.Err()
	}
	return int64Of(cur.Current, "n"), nil
}

// EstimatedDocumentCount returns the collection's document count from its
// metadata (the count command), without scanning.
func (coll *Collection) EstimatedDocumentCount(ctx context.Context, optList ...*EstimatedDocumentCountOptions) (int64, error) {
	ctx, cancel := coll.begin(ctx)
	defer cancel()
	opts := lastOptions(optList)
	if opts == nil {
		opts = &EstimatedDocumentCountOptions{}
	}
	cmd := cmdBuilder{{Key: "count", Value: coll.name}}
	cmd.addIf("comment", opts.Comment)
	cmd.addMaxTime(opts.MaxTime)
	cmd.addIf("readConcern", coll.readConcern())
	res, err := coll.client.execute(ctx, &exec.Operation{Name: "count", DB: coll.db, Command: bson.D(cmd), ReadPref: readPref(coll.rp), Flags: exec.RetryableRead}, opts.Session)
	if err != nil {
		var ce *CommandError
		if errors.As(err, &ce) && ce.Code == mongoerr.CodeNamespaceNotFound { // NamespaceNotFound: no collection, no documents
			return 0, nil
		}
		return 0, err
	}
	return int64Of(res.Reply, "n"), nil
}

// Distinct returns the distinct values of field among the documents
// matching filter.
func (coll *Collection) Distinct(ctx context.Context, field string, filter any, optList ...*DistinctOptions) ([]any, error) {
	ctx, cancel := coll.begin(ctx)
	defer cancel()
	opts := lastOptions(optList)
	if opts == nil {
		opts = &DistinctOptions{}
	}
	f, err := toDoc(filter, true)
	if err != nil {
		return nil, err
	}
	cmd := cmdBuilder{{Key: "distinct", Value: coll.name}, {Key: "key", Value: field}, {Key: "query", Value: f}}
	cmd.addCollation(opts.Collation)
	cmd.addIf("hint", opts.Hint)
	cmd.addIf("comment", opts.Comment)
	cmd.addMaxTime(opts.MaxTime)
	cmd.addIf("readConcern", coll.readConcern())
	res, err := coll.client.execute(ctx, &exec.Operation{Name: "distinct", DB: coll.db, Command: bson.D(cmd), ReadPref: readPref(coll.rp), Flags: exec.RetryableRead}, opts.Session)
	if err != nil {
		return nil, err
	}
	var out struct {
		Values []any `bson:"values"`
	}
	if err := bson.Unmarshal(res.Reply, &out); err != nil {
		return nil, fmt.Errorf("sturdy: decoding distinct reply: %w", err)
	}
	return out.Values, nil
}

// CreateIndex creates an index and returns its name.
func (coll *Collection) CreateIndex(ctx context.Context, model IndexModel, optList ...*CreateIndexOptions) (string, error) {
	ctx, cancel := coll.begin(ctx)
	defer cancel()
	names, err := coll.CreateIndexes(ctx, []IndexModel{model}, optList...)
	if err != nil {
		return "", err
	}
	return names[0], nil
}

// ListIndexes returns a cursor over the collection's index specifications.
func (coll *Collection) ListIndexes(ctx context.Context, optList ...*ListOptions) (*Cursor, error) {
	ctx, cancel := coll.begin(ctx)
	defer cancel()
	opts := lastOptions(optList)
	if opts == nil {
		opts = &ListOptions{}
	}
	cmd := cmdBuilder{{Key: "listIndexes", Value: coll.name}}
	cmd.addIf("comment", opts.Comment)
	op := &exec.Operation{Name: "listIndexes", DB: coll.db, Command: bson.D(cmd), Flags: exec.RetryableRead}
	return openCursor(ctx, coll.client, op, cursorSpec{session: opts.Session, comment: opts.Comment, mode: opts.TimeoutMode})
}

// DropIndex drops the named index.
func (coll *Collection) DropIndex(ctx context.Context, name string, optList ...*DropIndexOptions) error {
	ctx, cancel := coll.begin(ctx)
	defer cancel()
	return coll.dropIndexes(ctx, name, lastOptions(optList))
}

// Rename renames the collection to to in the same database
// (renameCollection). The Collection keeps its old name: use
// Database.Collection(to) afterwards.
func (coll *Collection) Rename(ctx context.Context, to string, optList ...*RenameOptions) error {
	opts := lastOptions(optList)
	if opts == nil {
		opts = &RenameOptions{}
	}
	cmd := cmdBuilder{{Key: "renameCollection", Value: coll.db + "." + coll.name}, {Key: "to", Value: coll.db + "." + to}}
	cmd.addTrue("dropTarget", opts.DropTarget)
	cmd.addIf("writeConcern", writeConcernDoc(coll.wc))
	cmd.addIf("comment", opts.Comment)
	_, err := coll.client.execute(ctx, &exec.Operation{Name: "renameCollection", DB: "admin", Command: bson.D(cmd), Flags: exec.Write}, opts.Session)
	return err
}

// Drop drops the collection; dropping a collection that does not exist is
// not an error.
func (coll *Collection) Drop(ctx context.Context, optList ...*DropCollectionOptions) error {
	ctx, cancel := coll.begin(ctx)
	defer cancel()
	var s *Session
	if o := lastOptions(optList); o != nil {
		s = o.Session
	}
	cmd := cmdBuilder{{Key: "drop", Value: coll.name}}
	cmd.addIf("writeConcern", writeConcernDoc(coll.wc))
	_, err := coll.client.execute(ctx, &exec.Operation{Name: "drop", DB: coll.db, Command: bson.D(cmd), Flags: exec.Write}, s)
	var ce *CommandError
	if errors.As(err, &ce) && ce.Code == mongoerr.CodeNamespaceNotFound { // NamespaceNotFound
		return nil
	}
	return err
}
