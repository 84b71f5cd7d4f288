package sturdy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/internal/exec"
	"github.com/sturdy-go/sturdy/internal/topology"
	"github.com/sturdy-go/sturdy/mongoerr"
	"github.com/sturdy-go/sturdy/wire"
)

// stmtKind is the write command a statement belongs to.
type stmtKind int

const (
	kindInsert stmtKind = iota
	kindUpdate
	kindDelete
)

func (k stmtKind) command() string { return [...]string{"insert", "update", "delete"}[k] }

// sequence is the OP_MSG document-sequence identifier of the statements.
func (k stmtKind) sequence() string { return [...]string{"documents", "updates", "deletes"}[k] }

// writeStmt is one statement of a write command.
type writeStmt struct {
	doc   bson.Raw
	index int  // position in the caller's slice
	multi bool // update with multi: true or delete with limit: 0: not retryable
}

// writeGroup is a run of statements sent as commands of one kind.
type writeGroup struct {
	kind  stmtKind
	stmts []writeStmt
}

// writeOpts are the command-level options of a write.
type writeOpts struct {
	ordered bool
	bypass  *bool
	let     any
	comment any
	session *Session
}

// Server limits used when the selected server does not report them.
const (
	defaultMaxWriteBatchSize   = 100_000
	defaultMaxMessageSizeBytes = 48_000_000
	defaultMaxBSONObjectSize   = 16 * 1024 * 1024
	// commandReserve is left free in every message for the fields the
	// executor adds to the command (lsid, txnNumber, $db, $clusterTime,
	// $readPreference) and the OP_MSG framing.
	commandReserve = 16 * 1024
)

// writeLimits are the batch limits of the server writes go to, and its
// maxWireVersion.
type writeLimits struct {
	maxCount, maxMessage, maxDoc int
	wire                         int32
}

// limits selects a writable server and reads its hello limits.
func (c *Client) limits(ctx context.Context) (writeLimits, error) {
	l := writeLimits{maxCount: defaultMaxWriteBatchSize, maxMessage: defaultMaxMessageSizeBytes, maxDoc: defaultMaxBSONObjectSize}
	if c.closed.Load() {
		return l, ErrClientDisconnected
	}
	srv, err := c.topo.SelectServer(ctx, topology.WriteSelector(), nil)
	if err != nil {
		return l, err
	}
	srv.Dec() // selected only to read its limits: not an operation in progress
	d := srv.Description()
	l.wire = d.MaxWireVersion
	if !srv.WireVersionKnown() {
		// A load balancer before its first connection: the service decides.
		l.wire = math.MaxInt32
	}
	if d.MaxWriteBatchSize > 0 {
		l.maxCount = int(d.MaxWriteBatchSize)
	}
	if d.MaxMessageSizeBytes > 0 {
		l.maxMessage = int(d.MaxMessageSizeBytes)
	}
	if d.MaxBSONObjectSize > 0 {
		l.maxDoc = int(d.MaxBSONObjectSize)
	}
	return l, nil
}

// writeCommand is the command document of a write of kind, without its
// statements (they go in a document sequence), appended to dst.
func (coll *Collection) writeCommand(kind stmtKind, o *writeOpts, dst cmdBuilder) bson.D {
	cmd := dst
	cmd = append(cmd, bson.E{Key: kind.command(), Value: coll.nameValue()}, bson.E{Key: "ordered", Value: o.ordered})
	cmd.addIf("writeConcern", writeConcernDoc(coll.wc))
	if kind != kindDelete {
		cmd.addBoolPtr("bypassDocumentValidation", o.bypass)
	}
	if kind != kindInsert {
		cmd.addIf("let", o.let)
	}
	cmd.addIf("comment", o.comment)
	return bson.D(cmd)
}

// writeOp is a write command's operation with room for its command, its
// sequence and (for a single statement, the common case) the document
// list: one object, recycled through writeOps.
type writeOp struct {
	op  exec.Operation
	cmd [6]bson.E
	seq [1]wire.DocumentSequence
	one [1]bson.Raw
}

// writeOps recycles writeOps: nothing refers to one once the command has
// run (the executor keeps no reference to its operation, and the result
// holds only the reply).
var writeOps = sync.Pool{New: func() any { return new(writeOp) }}

// sendWrite sends one write command carrying stmts.
func (coll *Collection) sendWrite(ctx context.Context, kind stmtKind, stmts []writeStmt, o *writeOpts, opID int64) (exec.Result, error) {
	w := writeOps.Get().(*writeOp)
	defer func() {
		*w = writeOp{} // hold no documents in the pool
		writeOps.Put(w)
	}()
	docs := w.one[:]
	if len(stmts) != 1 {
		docs = make([]bson.Raw, len(stmts))
	}
	unack := coll.unacknowledged(o.session)
	retryable := !unack
	for i, s := range stmts {
		docs[i] = s.doc
		if s.multi {
			retryable = false
		}
	}
	w.seq[0] = wire.DocumentSequence{Identifier: kind.sequence(), Documents: docs}
	w.op = exec.Operation{
		Name:        kind.command(),
		DB:          coll.db,
		Command:     coll.writeCommand(kind, o, w.cmd[:0]),
		Sequences:   w.seq[:],
		Flags:       exec.Write | exec.RetryableWrite.If(retryable) | exec.Unacknowledged.If(unack),
		OperationID: opID,
	}
	return coll.client.execute(ctx, &w.op, o.session)
}

// writeOne sends a single-statement write and returns its reply (nil for an
// unacknowledged write). Write errors come back as a *WriteException.
func (coll *Collection) writeOne(ctx context.Context, kind stmtKind, stmt writeStmt, o *writeOpts) (bson.Raw, error) {
	if coll.unacknowledged(o.session) && o.session != nil {
		return nil, ErrUnacknowledgedSession
	}
	o.ordered = true
	res, err := coll.sendWrite(ctx, kind, []writeStmt{stmt}, o, 0)
	return res.Reply, err
}

// splitBatch returns how many of stmts fit in one command: at most maxCount
// statements, and a message no larger than maxMessage.
func splitBatch(stmts []writeStmt, kind stmtKind, cmdSize int, l writeLimits) int {
	budget := l.maxMessage - cmdSize - commandReserve - (1 + 4 + len(kind.sequence()) + 1)
	size, n := 0, 0
	for n < len(stmts) && n < l.maxCount {
		if n > 0 && size+len(stmts[n].doc) > budget {
			break
		}
		size += len(stmts[n].doc)
		n++
	}
	return n
}

// runWrites sends groups of statements as few commands as the server's
// limits allow, in order, and merges the replies. models (nil for
// InsertMany) are the caller's, for the errors' Model field.
func (coll *Collection) runWrites(ctx context.Context, groups []writeGroup, o *writeOpts, models []WriteModel) (*BulkWriteResult, error) {
	unack := coll.unacknowledged(o.session)
	if unack && o.session != nil {
		return nil, ErrUnacknowledgedSession
	}
	l, err := coll.client.limits(ctx)
	if err != nil {
		return nil, err
	}
	res := &BulkWriteResult{Acknowledged: !unack, UpsertedIDs: map[int64]any{}}
	for _, g := range groups {
		if g.kind != kindInsert {
			continue
		}
		for _, s := range g.stmts {
			if len(s.doc) > l.maxDoc {
				return res, argError("document at index %d is %d bytes, larger than the server's maxBsonObjectSize %d", s.index, len(s.doc), l.maxDoc)
			}
		}
	}
	var (
		bwe      BulkWriteException
		opID     int64
		answered bool // a command of this write got a reply
	)
	for _, g := range groups {
		cmd, err := wire.AppendDocument(nil, coll.writeCommand(g.kind, o, nil))
		if err != nil {
			return res, fmt.Errorf("sturdy: encoding %s command: %w", g.kind.command(), err)
		}
		for rest := g.stmts; len(rest) > 0; {
			n := splitBatch(rest, g.kind, len(cmd), l)
			batch := rest[:n]
			rest = rest[n:]
			r, err := coll.sendWrite(ctx, g.kind, batch, o, opID)
			if opID == 0 {
				opID = r.OperationID
			}
			if unack {
				if err != nil {
					return res, err
				}
				continue
			}
			reply := r.Reply
			if err != nil {
				var we *WriteException
				if !errors.As(err, &we) || we.Raw == nil {
					return res, bwe.stopped(res, err, answered)
				}
				reply = we.Raw
			}
			answered = true
			failed := mergeReply(reply, g.kind, batch, res, &bwe, models)
			if failed && o.ordered {
				return res, bwe.finish(res)
			}
		}
	}
	return res, bwe.finish(res)
}

// finish returns the exception if any write failed, else nil.
func (e *BulkWriteException) finish(res *BulkWriteResult) error {
	if len(e.WriteErrors) == 0 && e.WriteConcernError == nil {
		return nil
	}
	e.PartialResult = res
	return e
}

// stopped returns err, the top-level error (command, network, selection)
// that ended the write: inside the exception, with the partial result, when
// an earlier command of the write was answered or the server refused the
// command (a command error: that command wrote nothing, so the counts so
// far are exact, zero for the first); alone otherwise, as then nothing is
// known of what was written.
func (e *BulkWriteException) stopped(res *BulkWriteResult, err error, answered bool) error {
	var ce *CommandError
	if !answered && !errors.As(err, &ce) {
		return err
	}
	e.Err = err
	e.PartialResult = res
	return e
}

// mergeReply adds one command's reply to res and its errors to bwe, mapping
// statement indexes in the batch back to the caller's indexes. It reports
// whether the command had write errors.
func mergeReply(reply bson.Raw, kind stmtKind, batch []writeStmt, res *BulkWriteResult, bwe *BulkWriteException, models []WriteModel) bool {
	n := int64Of(reply, "n")
	switch kind {
	case kindInsert:
		res.InsertedCount += n
	case kindDelete:
		res.DeletedCount += n
	case kindUpdate:
		upserted := 0
		if v, err := reply.LookupErr("upserted"); err == nil {
			if arr, ok := v.ArrayOK(); ok {
				vals, _ := arr.Values()
				for _, u := range vals {
					ud, ok := u.DocumentOK()
					if !ok {
						continue
					}
					i := int(int64Of(ud, "index"))
					if i < 0 || i >= len(batch) {
						continue
					}
					var id any
					if idv, err := ud.LookupErr("_id"); err == nil {
						_ = idv.Unmarshal(&id)
					}
					res.UpsertedIDs[int64(batch[i].index)] = id
					upserted++
				}
			}
		}
		res.UpsertedCount += int64(upserted)
		res.MatchedCount += n - int64(upserted)
		res.ModifiedCount += int64Of(reply, "nModified")
	}
	var we *WriteException
	if !errors.As(mongoerr.FromReply(reply), &we) {
		return false
	}
	for _, e := range we.WriteErrors {
		if e.Index >= 0 && e.Index < len(batch) {
			e.Index = batch[e.Index].index
		}
		bw := BulkWriteError{WriteError: e}
		if models != nil && e.Index >= 0 && e.Index < len(models) {
			bw.Model = models[e.Index]
		}
		bwe.WriteErrors = append(bwe.WriteErrors, bw)
	}
	if we.WriteConcernError != nil {
		bwe.WriteConcernError = we.WriteConcernError
	}
	for _, lbl := range we.Labels {
		if !bwe.HasErrorLabel(lbl) {
			bwe.Labels = append(bwe.Labels, lbl)
		}
	}
	return len(we.WriteErrors) > 0
}

// BulkWrite runs models as insert, update and delete commands: consecutive
// models of one kind (all models of one kind when unordered) share commands,
// split to respect the server's maxWriteBatchSize and maxMessageSizeBytes.
// Ordered writes (the default) stop at the first error. Write errors and
// write concern errors are returned as a *BulkWriteException whose indexes
// are positions in models; so is a command error, and a network error after
// an earlier command was answered (its Err), with the partial result: an
// ordered write whose first model fails has one with every count zero.
func (coll *Collection) BulkWrite(ctx context.Context, models []WriteModel, optList ...*BulkWriteOptions) (*BulkWriteResult, error) {
	ctx, cancel := coll.begin(ctx)
	defer cancel()
	opts := lastOptions(optList)
	if opts == nil {
		opts = &BulkWriteOptions{}
	}
	if len(models) == 0 {
		return nil, ErrEmptySlice
	}
	o := &writeOpts{ordered: opts.Ordered == nil || *opts.Ordered, bypass: opts.BypassDocumentValidation, comment: opts.Comment, session: opts.Session}
	var err error
	if o.let, err = docOrNil(opts.Let); err != nil {
		return nil, err
	}
	var groups []writeGroup
	groupOf := map[stmtKind]int{} // unordered: one group per kind
	for i, m := range models {
		kind, doc, multi, err := modelStmt(m)
		if err != nil {
			return nil, fmt.Errorf("model %d: %w", i, err)
		}
		st := writeStmt{doc: doc, index: i, multi: multi}
		switch {
		case o.ordered && len(groups) > 0 && groups[len(groups)-1].kind == kind:
			groups[len(groups)-1].stmts = append(groups[len(groups)-1].stmts, st)
		case !o.ordered:
			if gi, ok := groupOf[kind]; ok {
				groups[gi].stmts = append(groups[gi].stmts, st)
				continue
			}
			groupOf[kind] = len(groups)
			fallthrough
		default:
			groups = append(groups, writeGroup{kind: kind, stmts: []writeStmt{st}})
		}
	}
	return coll.runWrites(ctx, groups, o, models)
}

// modelStmt turns a write model into a statement.
func modelStmt(model WriteModel) (stmtKind, bson.Raw, bool, error) {
	switch m := derefModel(model).(type) {
	case InsertOneModel:
		doc, _, err := toDocWithID(nil, m.Document)
		return kindInsert, doc, false, err
	case UpdateOneModel:
		doc, err := updateStmt(nil, m.Filter, m.Update, false, m.Upsert, m.ArrayFilters, m.Collation, m.Hint, m.Sort)
		return kindUpdate, doc, false, err
	case UpdateManyModel:
		doc, err := updateStmt(nil, m.Filter, m.Update, true, m.Upsert, m.ArrayFilters, m.Collation, m.Hint, nil)
		return kindUpdate, doc, true, err
	case ReplaceOneModel:
		doc, err := replaceStmt(m.Filter, m.Replacement, m.Upsert, m.Collation, m.Hint, m.Sort)
		return kindUpdate, doc, false, err
	case DeleteOneModel:
		doc, err := deleteStmt(m.Filter, 1, m.Collation, m.Hint)
		return kindDelete, doc, false, err
	case DeleteManyModel:
		doc, err := deleteStmt(m.Filter, 0, m.Collation, m.Hint)
		return kindDelete, doc, true, err
	}
	return 0, nil, false, argError("unsupported or nil write model %T", model)
}

// updateStmt builds an update statement {q, u, upsert, multi, ...}. The
// common statement, without array filters, collation, hint or sort, is
// appended to dst (nil: a buffer of its own), for a caller that recycles one.
func updateStmt(dst []byte, filter, update any, multi, upsert bool, arrayFilters []any, coll *Collation, hint, sort any) (bson.Raw, error) {
	if arrayFilters == nil && coll == nil && hint == nil && sort == nil {
		return appendPlainUpdate(dst, filter, update, multi, upsert)
	}
	q, err := toDoc(filter, true)
	if err != nil {
		return nil, err
	}
	u, err := updateValue(update)
	if err != nil {
		return nil, err
	}
	return stmtDoc(q, u, multi, upsert, arrayFilters, coll, hint, sort)
}

// replaceStmt builds a replacement statement.
func replaceStmt(filter, replacement any, upsert bool, coll *Collation, hint, sort any) (bson.Raw, error) {
	q, err := toDoc(filter, true)
	if err != nil {
		return nil, err
	}
	r, err := replacementDoc(replacement)
	if err != nil {
		return nil, err
	}
	return stmtDoc(q, r, false, upsert, nil, coll, hint, sort)
}

func stmtDoc(q bson.Raw, u any, multi, upsert bool, arrayFilters []any, coll *Collation, hint, sort any) (bson.Raw, error) {
	if arrayFilters == nil && coll == nil && hint == nil && sort == nil {
		switch u := u.(type) {
		case bson.RawValue:
			return plainStmt(q, u.Type, u.Value, multi, upsert), nil
		case bson.Raw:
			return plainStmt(q, bson.TypeEmbeddedDocument, u, multi, upsert), nil
		}
	}
	d := cmdBuilder{{Key: "q", Value: q}, {Key: "u", Value: u}}
	d.addTrue("upsert", upsert)
	d.addTrue("multi", multi)
	if arrayFilters != nil {
		d.add("arrayFilters", arrayFilters)
	}
	d.addCollation(coll)
	d.addIf("hint", hint)
	if err := d.addDoc("sort", sort); err != nil {
		return nil, err
	}
	size := docSizeHint(len(d)) + len(q)
	if rv, ok := u.(bson.RawValue); ok {
		size += len(rv.Value)
	} else if r, ok := u.(bson.Raw); ok {
		size += len(r)
	}
	b, err := wire.AppendDocument(make([]byte, 0, size), bson.D(d))
	if err != nil {
		return nil, fmt.Errorf("%w: encoding update statement: %v", ErrInvalidArgument, err)
	}
	return b, nil
}

const upsertElem, multiElem = "\x08upsert\x00\x01", "\x08multi\x00\x01"

// plainStmt encodes the common statement {q, u, upsert?, multi?} by hand:
// the same bytes as the general path, without boxing q and u into a
// bson.D. q is a document from toDoc; u is the update (of type ut) from
// updateValue or replacementDoc.
func plainStmt(q bson.Raw, ut bson.Type, u []byte, multi, upsert bool) bson.Raw {
	b := make([]byte, 4, 4+3+len(q)+3+len(u)+len(upsertElem)+len(multiElem)+1)
	b = append(b, byte(bson.TypeEmbeddedDocument), 'q', 0)
	b = append(b, q...)
	b = append(b, byte(ut), 'u', 0)
	b = append(b, u...)
	return endPlainStmt(b, 0, multi, upsert)
}

// endPlainStmt appends a plain statement's flags and end to b, where the
// statement starts at start, and sets its length.
func endPlainStmt(b []byte, start int, multi, upsert bool) []byte {
	if upsert {
		b = append(b, upsertElem...)
	}
	if multi {
		b = append(b, multiElem...)
	}
	b = append(b, 0)
	binary.LittleEndian.PutUint32(b[start:], uint32(len(b)-start))
	return b
}

// appendPlainUpdate is plainStmt for an update, with the filter and a bson.D
// update encoded straight into dst: no document is encoded on its own first.
// It checks what updateValue checks.
func appendPlainUpdate(dst []byte, filter, update any, multi, upsert bool) (bson.Raw, error) {
	start := len(dst)
	b := append(dst, 0, 0, 0, 0, byte(bson.TypeEmbeddedDocument), 'q', 0)
	b, err := appendDoc(b, filter, true)
	if err != nil {
		return nil, err
	}
	if d, ok := update.(bson.D); ok && d != nil {
		b = append(b, byte(bson.TypeEmbeddedDocument), 'u', 0)
		at := len(b)
		if b, err = wire.AppendDocument(b, d); err != nil {
			return nil, fmt.Errorf("%w: cannot marshal %T: %v", ErrInvalidArgument, update, err)
		}
		if err := checkUpdateDoc(b[at:]); err != nil {
			return nil, err
		}
	} else {
		u, err := updateValue(update)
		if err != nil {
			return nil, err
		}
		b = append(b, byte(u.Type), 'u', 0)
		b = append(b, u.Value...)
	}
	return endPlainStmt(b, start, multi, upsert)[start:], nil
}

// deleteStmt builds a delete statement {q, limit, ...}; limit 0 deletes all.
func deleteStmt(filter any, limit int32, coll *Collation, hint any) (bson.Raw, error) {
	q, err := toDoc(filter, true)
	if err != nil {
		return nil, err
	}
	d := cmdBuilder{{Key: "q", Value: q}, {Key: "limit", Value: limit}}
	d.addCollation(coll)
	d.addIf("hint", hint)
	b, err := wire.AppendDocument(make([]byte, 0, docSizeHint(len(d))+len(q)), bson.D(d))
	if err != nil {
		return nil, fmt.Errorf("%w: encoding delete statement: %v", ErrInvalidArgument, err)
	}
	return b, nil
}
