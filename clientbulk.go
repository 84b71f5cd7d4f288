package sturdy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/internal/exec"
	"github.com/sturdy-go/sturdy/wire"
)

// clientBulkWireVersion is MongoDB 8.0, the first server with the
// cross-namespace bulkWrite command.
const clientBulkWireVersion = 25

// clientOp is one model encoded as an op of the bulkWrite command.
type clientOp struct {
	doc   bson.Raw // {insert|update|delete: <nsInfo index>, ...}
	ns    string   // "db.coll"
	kind  stmtKind
	multi bool // updateMany or deleteMany: makes its batch not retryable
	id    any  // insert: the document's _id
	size  int  // len(doc) for inserts, the document alone
}

// nsIndexOffset is where the int32 nsInfo index of an op starts: after the
// document length, the element type and the key.
func (op *clientOp) nsIndexOffset() int { return 4 + 1 + len(op.kind.command()) + 1 }

// setNSIndex points the op at entry i of its batch's nsInfo. Every op is in
// exactly one batch, so it is patched in place.
func (op *clientOp) setNSIndex(i int) {
	binary.LittleEndian.PutUint32(op.doc[op.nsIndexOffset():], uint32(int32(i)))
}

// BulkWrite runs models, which may name any namespaces, with the bulkWrite
// command of MongoDB 8.0 (older servers get a client-side error). The
// models are sent in order in as few commands as the server's
// maxWriteBatchSize and maxMessageSizeBytes allow; each command is a
// retryable write unless it carries an UpdateManyModel or DeleteManyModel.
// Ordered writes (the default) stop at the first write error; write concern
// errors never stop the write.
//
// Write errors, write concern errors, and a command or network error after
// something was written come back as a *ClientBulkWriteException holding
// the partial result; a command or network error before anything was
// written comes back alone. Unacknowledged writes (w: 0) must be unordered
// and not verbose, and return a result with Acknowledged false. Inside a
// transaction the transaction's write concern applies at commit: an
// explicit opts.WriteConcern is refused with ErrTransactionWriteConcern
// before anything is sent, and the client's w: 0 does not apply.
func (c *Client) BulkWrite(ctx context.Context, models []ClientWriteModel, optList ...*ClientBulkWriteOptions) (*ClientBulkWriteResult, error) {
	ctx, cancel := c.begin(ctx)
	defer cancel()
	opts := lastOptions(optList)
	if opts == nil {
		opts = &ClientBulkWriteOptions{}
	}
	if len(models) == 0 {
		return nil, ErrEmptySlice
	}
	wc, unack, err := c.clientBulkWriteConcern(opts)
	if err != nil {
		return nil, err
	}
	ops := make([]clientOp, len(models))
	for i, m := range models {
		op, err := newClientOp(m)
		if err != nil {
			return nil, fmt.Errorf("model %d: %w", i, err)
		}
		ops[i] = op
	}
	cmd, err := clientBulkCommand(opts, wc)
	if err != nil {
		return nil, err
	}
	l, err := c.limits(ctx)
	if err != nil {
		return nil, err
	}
	if l.wire < clientBulkWireVersion {
		return nil, argError("Client.BulkWrite needs MongoDB 8.0 (wire version %d), the server has wire version %d", clientBulkWireVersion, l.wire)
	}
	cmdRaw, err := wire.AppendDocument(nil, cmd)
	if err != nil {
		return nil, fmt.Errorf("sturdy: encoding bulkWrite command: %w", err)
	}
	// The ops and nsInfo document sequences share what the command leaves
	// of the message.
	budget := l.maxMessage - len(cmdRaw) - commandReserve - (1 + 4 + len("ops") + 1) - (1 + 4 + len("nsInfo") + 1)
	nsDocs, err := clientNamespaces(ops, l, budget)
	if err != nil {
		return nil, err
	}
	w := newClientBulk(c, cmd, opts, unack)
	for start := 0; start < len(ops); {
		n := clientBatchLen(ops[start:], nsDocs, budget, l.maxCount)
		stop, err := w.send(ctx, ops[start:start+n], start, nsDocs)
		if err != nil {
			return nil, w.stopped(err)
		}
		if stop {
			break
		}
		start += n
	}
	if !unack && (len(w.exc.WriteErrors) > 0 || len(w.exc.WriteConcernErrors) > 0) {
		return nil, w.exception()
	}
	return w.res, nil
}

// clientBulkWriteConcern is the write concern a client bulk write runs
// with and whether it is unacknowledged, after the checks the CRUD spec
// asks for before anything is sent.
func (c *Client) clientBulkWriteConcern(opts *ClientBulkWriteOptions) (wc *WriteConcern, unack bool, err error) {
	wc = c.opts.WriteConcern
	inTxn := opts.Session.inTransaction()
	if opts.WriteConcern != nil {
		if inTxn {
			return nil, false, ErrTransactionWriteConcern
		}
		if err := opts.WriteConcern.validate(); err != nil {
			return nil, false, err
		}
		wc = opts.WriteConcern
	}
	// Inside a transaction the client's write concern gives way to the
	// transaction's, applied at commit.
	unack = wc.Unacknowledged() && !inTxn
	switch {
	case unack && opts.VerboseResults:
		return nil, false, argError("cannot request unacknowledged write concern and verbose results")
	case unack && opts.ordered():
		return nil, false, argError("cannot request unacknowledged write concern and ordered writes")
	case unack && opts.Session != nil:
		return nil, false, ErrUnacknowledgedSession
	}
	return wc, unack, nil
}

// ordered is Ordered with its default, true.
func (opts *ClientBulkWriteOptions) ordered() bool { return opts.Ordered == nil || *opts.Ordered }

// clientBulkCommand is the bulkWrite command document, without its ops and
// nsInfo (they go in document sequences).
func clientBulkCommand(opts *ClientBulkWriteOptions, wc *WriteConcern) (bson.D, error) {
	let, err := docOrNil(opts.Let)
	if err != nil {
		return nil, err
	}
	cmd := cmdBuilder{{Key: "bulkWrite", Value: int32(1)}, {Key: "errorsOnly", Value: !opts.VerboseResults}, {Key: "ordered", Value: opts.ordered()}}
	cmd.addBoolPtr("bypassDocumentValidation", opts.BypassDocumentValidation)
	cmd.addIf("comment", opts.Comment)
	cmd.addIf("let", let)
	cmd.addIf("writeConcern", writeConcernDoc(wc))
	return bson.D(cmd), nil
}

// clientNamespaces checks that every op fits the server's limits alone
// (with its nsInfo entry, within budget bytes) and returns the encoded
// nsInfo entry of each namespace.
func clientNamespaces(ops []clientOp, l writeLimits, budget int) (map[string]bson.Raw, error) {
	nsDocs := map[string]bson.Raw{}
	for i := range ops {
		op := &ops[i]
		if op.kind == kindInsert && op.size > l.maxDoc {
			return nil, argError("document of model %d is %d bytes, larger than the server's maxBsonObjectSize %d", i, op.size, l.maxDoc)
		}
		// The server takes each op as one document: at most
		// maxBsonObjectSize, plus the slack it allows for the op's own
		// fields around an insert's largest document.
		if len(op.doc) > l.maxDoc+commandReserve {
			return nil, argError("model %d is %d bytes as a bulkWrite op, larger than the server's maxBsonObjectSize %d", i, len(op.doc), l.maxDoc)
		}
		if nsDocs[op.ns] == nil {
			var err error
			if nsDocs[op.ns], err = wire.AppendDocument(nil, bson.D{{Key: "ns", Value: op.ns}}); err != nil {
				return nil, fmt.Errorf("sturdy: encoding namespace %q: %w", op.ns, err)
			}
		}
		if len(op.doc)+len(nsDocs[op.ns]) > budget {
			return nil, argError("model %d is %d bytes, too large for one bulkWrite command under the server's maxMessageSizeBytes %d", i, len(op.doc)+len(nsDocs[op.ns]), l.maxMessage)
		}
	}
	return nsDocs, nil
}

// clientBatchLen returns how many of ops fit in one command: at most
// maxCount, with their ops and the nsInfo entries they use within budget
// bytes. It is at least 1: BulkWrite checked every op fits alone.
func clientBatchLen(ops []clientOp, nsDocs map[string]bson.Raw, budget, maxCount int) int {
	seen := map[string]bool{}
	size, n := 0, 0
	for n < len(ops) && n < maxCount {
		add := len(ops[n].doc)
		if !seen[ops[n].ns] {
			add += len(nsDocs[ops[n].ns])
		}
		if n > 0 && size+add > budget {
			break
		}
		seen[ops[n].ns] = true
		size += add
		n++
	}
	return n
}

// clientBulk is the state of one Client.BulkWrite across its commands.
type clientBulk struct {
	client  *Client
	cmd     bson.D
	ordered bool
	unack   bool
	verbose bool
	session *Session
	opID    int64

	res *ClientBulkWriteResult
	exc ClientBulkWriteException
	// succeeded is set once any model is known to have succeeded (a
	// count, a result, or a batch's results read to the end): only then
	// does an error carry a partial result.
	succeeded bool
}

// newClientBulk starts the state of a bulk write running cmd.
func newClientBulk(c *Client, cmd bson.D, opts *ClientBulkWriteOptions, unack bool) *clientBulk {
	w := &clientBulk{client: c, cmd: cmd, ordered: opts.ordered(), unack: unack,
		verbose: opts.VerboseResults, session: opts.Session,
		res: &ClientBulkWriteResult{Acknowledged: !unack, HasVerboseResults: opts.VerboseResults}}
	if opts.VerboseResults {
		w.res.InsertResults = map[int]ClientInsertResult{}
		w.res.UpdateResults = map[int]ClientUpdateResult{}
		w.res.DeleteResults = map[int]ClientDeleteResult{}
	}
	return w
}

// send runs one command carrying batch, whose first op is model start, and
// merges its results. It reports whether an ordered write must stop (a
// write error); an error is the command's top-level error.
func (w *clientBulk) send(ctx context.Context, batch []clientOp, start int, nsDocs map[string]bson.Raw) (bool, error) {
	opDocs, nsList, retryable := clientSequences(batch, nsDocs)
	op := &exec.Operation{
		Name:      "bulkWrite",
		DB:        "admin",
		Command:   w.cmd,
		Sequences: []wire.DocumentSequence{{Identifier: "ops", Documents: opDocs}, {Identifier: "nsInfo", Documents: nsList}},
		// The results come back through a cursor, whose getMores must
		// carry the implicit session of the command.
		Flags: exec.Write | exec.RetryableWrite.If(retryable && !w.unack) | exec.Unacknowledged.If(w.unack) |
			exec.KeepSession | exec.PinCursor,
		OperationID: w.opID,
	}
	r, err := w.client.execute(ctx, op, w.session)
	if w.opID == 0 {
		w.opID = r.OperationID
	}
	if w.unack || (err != nil && !w.isWriteConcernError(err)) {
		if w.session == nil && r.Session != nil {
			r.Session.End()
		}
		return false, err
	}
	reply := r.Reply
	if err != nil {
		reply = w.addWriteConcernError(err)
	}
	w.addCounts(reply)
	return w.readResults(ctx, r, reply, batch, start)
}

// clientSequences numbers the namespaces batch uses, points each op at its
// nsInfo entry, and returns the ops and nsInfo document sequences and
// whether the batch may be retried (no multi-document op).
func clientSequences(batch []clientOp, nsDocs map[string]bson.Raw) (opDocs, nsList []bson.Raw, retryable bool) {
	nsIndex := map[string]int{}
	opDocs = make([]bson.Raw, len(batch))
	retryable = true
	for i := range batch {
		op := &batch[i]
		j, ok := nsIndex[op.ns]
		if !ok {
			j = len(nsList)
			nsIndex[op.ns] = j
			nsList = append(nsList, nsDocs[op.ns])
		}
		op.setNSIndex(j)
		opDocs[i] = op.doc
		if op.multi {
			retryable = false
		}
	}
	return opDocs, nsList, retryable
}

// addWriteConcernError records the write concern error (and its labels)
// of a command that otherwise succeeded, and returns the command's reply.
func (w *clientBulk) addWriteConcernError(err error) bson.Raw {
	var we *WriteException
	errors.As(err, &we)
	w.exc.WriteConcernErrors = append(w.exc.WriteConcernErrors, *we.WriteConcernError)
	for _, lbl := range we.Labels {
		if !w.exc.HasErrorLabel(lbl) {
			w.exc.Labels = append(w.exc.Labels, lbl)
		}
	}
	return we.Raw
}

// readResults reads the per-model results of the batch from the reply's
// cursor. It reports whether an ordered write must stop.
func (w *clientBulk) readResults(ctx context.Context, r exec.Result, reply bson.Raw, batch []clientOp, start int) (bool, error) {
	cur := &Cursor{client: w.client, server: r.Server, sess: r.Session, ownsSess: w.session == nil && r.Session != nil, pin: r.Pin}
	defer cur.Close(context.WithoutCancel(ctx))
	if err := cur.load(reply); err != nil {
		return false, err
	}
	firstError := len(batch)
	errorsSeen := 0
	for cur.Next(ctx) {
		i, failed, err := w.addItem(batch, start, cur.Current)
		if err != nil {
			return false, err
		}
		if failed {
			errorsSeen++
			firstError = min(firstError, i)
		}
	}
	if err := cur.Err(); err != nil {
		return false, err
	}
	// Ordered, the server stops at the first error; unordered, it runs
	// every op.
	if w.ordered && firstError > 0 || !w.ordered && errorsSeen < len(batch) {
		w.succeeded = true
	}
	return w.ordered && errorsSeen > 0, nil
}

// addCounts adds the summary counts of a reply to the result.
func (w *clientBulk) addCounts(reply bson.Raw) {
	n := [...]int64{int64Of(reply, "nInserted"), int64Of(reply, "nUpserted"), int64Of(reply, "nMatched"), int64Of(reply, "nModified"), int64Of(reply, "nDeleted")}
	w.res.InsertedCount += n[0]
	w.res.UpsertedCount += n[1]
	w.res.MatchedCount += n[2]
	w.res.ModifiedCount += n[3]
	w.res.DeletedCount += n[4]
	if n[0]+n[1]+n[2]+n[4] > 0 {
		w.succeeded = true
	}
}

// addItem records one document of the results cursor, the outcome of op
// idx of batch (model start+idx): a write error, or with verbose results a
// success. It returns idx and whether the op failed.
func (w *clientBulk) addItem(batch []clientOp, start int, item bson.Raw) (int, bool, error) {
	idx, ok := item.Lookup("idx").AsInt64OK()
	if !ok || idx < 0 || idx >= int64(len(batch)) {
		return 0, false, fmt.Errorf("sturdy: bulkWrite result %v names no op of the %d sent", item, len(batch))
	}
	i, model := int(idx), start+int(idx)
	if okv, _ := item.Lookup("ok").AsFloat64OK(); okv != 1 {
		we := WriteError{Index: model, Code: int32(int64Of(item, "code")), Raw: append(bson.Raw(nil), item...)}
		we.Message, _ = item.Lookup("errmsg").StringValueOK()
		we.Details, _ = we.Raw.Lookup("errInfo").DocumentOK()
		if w.exc.WriteErrors == nil {
			w.exc.WriteErrors = map[int]WriteError{}
		}
		w.exc.WriteErrors[model] = we
		return i, true, nil
	}
	w.succeeded = true
	if w.verbose {
		w.addResult(batch[i], model, item)
	}
	return i, false, nil
}

// isWriteConcernError reports whether err is a reply carrying a write
// concern error (the write was applied, the results are in the reply).
func (w *clientBulk) isWriteConcernError(err error) bool {
	var we *WriteException
	return errors.As(err, &we) && we.Raw != nil && we.WriteConcernError != nil
}

// addResult records the verbose result of a successful op.
func (w *clientBulk) addResult(op clientOp, model int, item bson.Raw) {
	n := int64Of(item, "n")
	switch op.kind {
	case kindInsert:
		w.res.InsertResults[model] = ClientInsertResult{InsertedID: op.id}
	case kindUpdate:
		ur := ClientUpdateResult{MatchedCount: n, ModifiedCount: int64Of(item, "nModified")}
		if v, err := item.LookupErr("upserted", "_id"); err == nil {
			_ = v.Unmarshal(&ur.UpsertedID)
		}
		w.res.UpdateResults[model] = ur
	case kindDelete:
		w.res.DeleteResults[model] = ClientDeleteResult{DeletedCount: n}
	}
}

// exception returns the write's exception with its partial result.
func (w *clientBulk) exception() *ClientBulkWriteException {
	if w.succeeded {
		w.exc.PartialResult = w.res
	}
	return &w.exc
}

// stopped returns the error for a top-level error that ended the write:
// alone if nothing had been learnt yet, else inside the exception.
func (w *clientBulk) stopped(err error) error {
	if !w.succeeded && len(w.exc.WriteErrors) == 0 && len(w.exc.WriteConcernErrors) == 0 {
		return err
	}
	w.exc.Err = err
	return w.exception()
}

// newClientOp encodes a model as an op with nsInfo index 0.
func newClientOp(cm ClientWriteModel) (clientOp, error) {
	if cm.Database == "" || cm.Collection == "" {
		return clientOp{}, argError("a client write model needs a Database and a Collection")
	}
	op := clientOp{ns: cm.Database + "." + cm.Collection}
	var d cmdBuilder
	var err error
	switch m := derefModel(cm.Model).(type) {
	case InsertOneModel:
		var doc bson.Raw
		if doc, op.id, err = toDocWithID(nil, m.Document); err != nil {
			return op, err
		}
		op.kind, op.size = kindInsert, len(doc)
		d = cmdBuilder{{Key: "insert", Value: int32(0)}, {Key: "document", Value: doc}}
	case UpdateOneModel:
		op.kind = kindUpdate
		d, err = clientUpdateOp(m.Filter, m.Update, false, m.Upsert, m.ArrayFilters, m.Collation, m.Hint, m.Sort, false)
	case UpdateManyModel:
		op.kind, op.multi = kindUpdate, true
		d, err = clientUpdateOp(m.Filter, m.Update, true, m.Upsert, m.ArrayFilters, m.Collation, m.Hint, nil, false)
	case ReplaceOneModel:
		op.kind = kindUpdate
		d, err = clientUpdateOp(m.Filter, m.Replacement, false, m.Upsert, nil, m.Collation, m.Hint, m.Sort, true)
	case DeleteOneModel:
		op.kind = kindDelete
		d, err = clientDeleteOp(m.Filter, false, m.Collation, m.Hint)
	case DeleteManyModel:
		op.kind, op.multi = kindDelete, true
		d, err = clientDeleteOp(m.Filter, true, m.Collation, m.Hint)
	default:
		return op, argError("unsupported or nil write model %T", cm.Model)
	}
	if err != nil {
		return op, err
	}
	if op.doc, err = wire.AppendDocument(nil, bson.D(d)); err != nil {
		return op, fmt.Errorf("%w: encoding bulkWrite op: %v", ErrInvalidArgument, err)
	}
	return op, nil
}

// clientUpdateOp is an update op: {update, filter, updateMods, ..., multi}.
func clientUpdateOp(filter, update any, multi, upsert bool, arrayFilters []any, coll *Collation, hint, sort any, replace bool) (cmdBuilder, error) {
	q, err := toDoc(filter, true)
	if err != nil {
		return nil, err
	}
	var mods any
	if replace {
		mods, err = replacementDoc(update)
	} else {
		mods, err = updateValue(update)
	}
	if err != nil {
		return nil, err
	}
	d := cmdBuilder{{Key: "update", Value: int32(0)}, {Key: "filter", Value: q}, {Key: "updateMods", Value: mods}}
	d.addTrue("upsert", upsert)
	if arrayFilters != nil {
		d.add("arrayFilters", arrayFilters)
	}
	d.addCollation(coll)
	d.addIf("hint", hint)
	if err := d.addDoc("sort", sort); err != nil {
		return nil, err
	}
	d.add("multi", multi)
	return d, nil
}

// clientDeleteOp is a delete op: {delete, filter, ..., multi}.
func clientDeleteOp(filter any, multi bool, coll *Collation, hint any) (cmdBuilder, error) {
	q, err := toDoc(filter, true)
	if err != nil {
		return nil, err
	}
	d := cmdBuilder{{Key: "delete", Value: int32(0)}, {Key: "filter", Value: q}}
	d.addCollation(coll)
	d.addIf("hint", hint)
	d.add("multi", multi)
	return d, nil
}

// derefModel returns the value form of a pointer model, nil for a nil
// pointer.
func derefModel(m WriteModel) WriteModel {
	switch m := m.(type) {
	case *InsertOneModel:
		if m != nil {
			return *m
		}
	case *UpdateOneModel:
		if m != nil {
			return *m
		}
	case *UpdateManyModel:
		if m != nil {
			return *m
		}
	case *ReplaceOneModel:
		if m != nil {
			return *m
		}
	case *DeleteOneModel:
		if m != nil {
			return *m
		}
	case *DeleteManyModel:
		if m != nil {
			return *m
		}
	default:
		return m
	}
	return nil
}
