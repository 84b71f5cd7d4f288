package spectest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
)

// runnerError is a problem with the test or the runner (a missing entity, a
// malformed argument), as opposed to an error the operation returned.
type runnerError struct{ err error }

func (e *runnerError) Error() string { return e.err.Error() }
func (e *runnerError) Unwrap() error { return e.err }

// opResult is what an operation returned: nothing (v.Type == 0), a value,
// or an iterable of documents (each matched as a root-level document).
type opResult struct {
	v        bson.RawValue
	iterable bool
	entity   any // an object (a change stream) for saveResultAsEntity
}

// args gives typed access to an operation's arguments and remembers which
// were used, so that an argument the runner does not handle is reported
// instead of silently ignored.
type args struct {
	op   string
	d    bson.Raw
	used map[string]bool
	tr   *testRun
	sess *sessionEntity
}

func (a *args) get(k string) (bson.RawValue, bool) {
	a.used[k] = true
	v, err := a.d.LookupErr(k)
	return v, err == nil
}

func (a *args) has(k string) bool { _, ok := a.get(k); return ok }

func (a *args) str(k string) string { v, _ := a.get(k); s, _ := v.StringValueOK(); return s }

func (a *args) boolean(k string) bool { v, _ := a.get(k); b, _ := v.BooleanOK(); return b }

func (a *args) boolPtr(k string) *bool {
	v, ok := a.get(k)
	if !ok {
		return nil
	}
	b := v.Boolean()
	return &b
}

func (a *args) int64(k string) int64 { v, _ := a.get(k); n, _ := asInt(v); return n }

// any returns an argument as the Go value sturdy expects, or nil if absent.
func (a *args) any(k string) any {
	v, ok := a.get(k)
	if !ok {
		return nil
	}
	return native(v)
}

// doc returns a document argument (nil if absent).
func (a *args) doc(k string) (bson.Raw, error) {
	v, ok := a.get(k)
	if !ok {
		return nil, nil
	}
	d, ok := v.DocumentOK()
	if !ok {
		return nil, &runnerError{fmt.Errorf("argument %s must be a document, got %s", k, v.Type)}
	}
	return d, nil
}

// filter returns the filter argument, an empty document if absent.
func (a *args) filter() (any, error) {
	d, err := a.doc("filter")
	if err != nil {
		return nil, err
	}
	if d == nil {
		return bson.D{}, nil
	}
	return d, nil
}

func (a *args) maxTime() time.Duration {
	return time.Duration(a.int64("maxTimeMS")) * time.Millisecond
}

func (a *args) collation() (*sturdy.Collation, error) {
	v, ok := a.get("collation")
	if !ok {
		return nil, nil
	}
	var c sturdy.Collation
	if err := v.Unmarshal(&c); err != nil {
		return nil, &runnerError{fmt.Errorf("collation: %w", err)}
	}
	return &c, nil
}

// session resolves the session argument (nil if absent).
func (a *args) session() (*sturdy.Session, error) {
	v, ok := a.get("session")
	if !ok {
		return nil, nil
	}
	s, err := lookup[*sessionEntity](a.tr.entities, v.StringValue())
	if err != nil {
		return nil, &runnerError{err}
	}
	a.sess = s
	return s.sess, nil
}

// readPreference reads the readPreference argument (nil if absent).
func (a *args) readPreference() (*sturdy.ReadPreference, error) {
	v, ok := a.get("readPreference")
	if !ok {
		return nil, nil
	}
	return readPreference(v)
}

// collationAndSession reads the collation and session arguments that most
// operations take.
func (a *args) collationAndSession() (*sturdy.Collation, *sturdy.Session, error) {
	c, err := a.collation()
	if err != nil {
		return nil, nil, err
	}
	s, err := a.session()
	if err != nil {
		return nil, nil, err
	}
	return c, s, nil
}

// arrayFilters returns the arrayFilters argument (nil if absent).
func (a *args) arrayFilters() ([]any, error) {
	af, err := a.array("arrayFilters")
	if err != nil || af == nil {
		return nil, err
	}
	return af, nil
}

// array returns an array argument's elements as Go values.
func (a *args) array(k string) (bson.A, error) {
	v, ok := a.get(k)
	if !ok {
		return nil, nil
	}
	if _, ok := v.ArrayOK(); !ok {
		return nil, &runnerError{fmt.Errorf("argument %s must be an array, got %s", k, v.Type)}
	}
	return native(v).(bson.A), nil
}

// check reports arguments nothing used: the runner (or sturdy) does not
// support them, so the test is skipped rather than run half-configured.
func (a *args) check() error {
	elems, _ := a.d.Elements()
	var extra []string
	for _, e := range elems {
		if !a.used[e.Key()] {
			extra = append(extra, e.Key())
		}
	}
	if len(extra) > 0 {
		return unsupportedf("argument(s) %s of %s", strings.Join(extra, ", "), a.op)
	}
	return nil
}

// runOperation runs one operation and checks its expectations.
func (tr *testRun) runOperation(ctx context.Context, op bson.Raw) error {
	_, err := tr.runOperationErr(ctx, op)
	return err
}

// runOperationErr runs one operation and checks its expectations; it also
// returns the error the driver returned (withTransaction's callback hands
// it on, whatever the expectations said).
func (tr *testRun) runOperationErr(ctx context.Context, op bson.Raw) (driverErr error, _ error) {
	err := tr.runOperationInto(ctx, op, &driverErr)
	return driverErr, err
}

func (tr *testRun) runOperationInto(ctx context.Context, op bson.Raw, driverErr *error) error {
	name, object := lookupString(op, "name"), lookupString(op, "object")
	argsDoc, _ := op.Lookup("arguments").DocumentOK()
	if argsDoc == nil {
		argsDoc = bson.Raw{5, 0, 0, 0, 0}
	}
	a := &args{op: name, d: argsDoc, used: map[string]bool{}, tr: tr}
	if object == "testRunner" {
		return tr.special(ctx, name, a)
	}
	res, err := tr.runEntityOperation(ctx, object, name, a)
	*driverErr = err
	if a.sess != nil {
		a.sess.id()
	}
	var re *runnerError
	var ue *unsupportedError
	if errors.As(err, &re) || errors.As(err, &ue) {
		return err
	}
	return tr.checkExpectations(op, res, err)
}

// runEntityOperation runs an entity operation under its timeoutMS.
func (tr *testRun) runEntityOperation(ctx context.Context, object, name string, a *args) (opResult, error) {
	// A safety net against a hung operation, without a context deadline:
	// a deadline would be the operation's timeout (sent as maxTimeMS).
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := time.AfterFunc(60*time.Second, cancel)
	defer stop.Stop()
	if v, ok := a.get("timeoutMS"); ok {
		n, _ := asInt(v)
		octx = sturdy.WithTimeout(octx, time.Duration(n)*time.Millisecond)
	}
	return tr.dispatch(octx, object, name, a)
}

// checkExpectations checks what operation op returned (res or err) against its
// expectError or expectResult, and saves the result as saveResultAsEntity
// says.
func (tr *testRun) checkExpectations(op bson.Raw, res opResult, err error) error {
	if ignore, _ := op.Lookup("ignoreResultAndError").BooleanOK(); ignore {
		return nil
	}
	if exp, ok := op.Lookup("expectError").DocumentOK(); ok {
		if err == nil {
			return fmt.Errorf("expected an error, got result %s", shortJSON(res.v))
		}
		return tr.checkError(exp, err)
	}
	if err != nil {
		return fmt.Errorf("unexpected error: %w", err)
	}
	if exp, err2 := op.LookupErr("expectResult"); err2 == nil {
		var merr error
		if res.iterable {
			merr = tr.m.matchIterable(exp, res.v)
		} else {
			merr = tr.m.matchRoot(exp, res.v)
		}
		if merr != nil {
			return fmt.Errorf("expectResult: %w\nactual: %s", merr, shortJSON(res.v))
		}
	}
	if save, ok := op.Lookup("saveResultAsEntity").StringValueOK(); ok {
		return tr.saveResult(save, res)
	}
	return nil
}

// saveResult saves an operation's result as entity id.
func (tr *testRun) saveResult(id string, res opResult) error {
	if res.entity != nil {
		return tr.entities.add(id, res.entity)
	}
	if res.v.Type == 0 {
		return fmt.Errorf("saveResultAsEntity %s: the operation returned no result", id)
	}
	return tr.entities.add(id, res.v)
}

// dispatch runs an entity operation.
func (tr *testRun) dispatch(ctx context.Context, object, name string, a *args) (opResult, error) {
	ent, ok := tr.entities.m[object]
	if !ok {
		return opResult{}, &runnerError{fmt.Errorf("entity %q is not defined", object)}
	}
	run := entityOperation(ent, name)
	if run == nil {
		return opResult{}, unsupportedOperation(ent, name)
	}
	return run(ctx, a)
}

// entityOperation looks the operation name up in the table of ent's kind;
// nil if the runner has no such operation.
func entityOperation(ent any, name string) opFunc {
	switch e := ent.(type) {
	case *collectionEntity:
		return collectionOperations.bind(e, name)
	case *databaseEntity:
		return databaseOperations.bind(e, name)
	case *clientEntity:
		return clientOperations.bind(e, name)
	case *sessionEntity:
		return sessionOperations.bind(e, name)
	case *cursorEntity:
		return cursorOperations.bind(e, name)
	case *changeStreamEntity:
		return changeStreamOperations.bind(e, name)
	case *bucketEntity:
		return bucketOperations.bind(e, name)
	}
	return nil
}

// unsupportedOperation is the error of an operation no table has.
func unsupportedOperation(ent any, name string) error {
	switch name {
	case "createSearchIndex", "createSearchIndexes", "dropSearchIndex", "listSearchIndexes", "updateSearchIndex":
		// The tests expect the error of a mongod without Atlas Search
		// ("... Atlas ..."); mongosim has no search index commands, so
		// sturdy has no API to prove against it.
		return unsupportedf("Atlas Search index management (%s): mongosim does not implement the search index commands, so sturdy has no search index API yet", name)
	case "count":
		// The CRUD spec deprecated count() in 2018 for countDocuments
		// and estimatedDocumentCount, which sturdy provides; a new
		// driver has no callers to keep the helper for.
		return unsupportedf("the deprecated count helper (CRUD spec): sturdy provides CountDocuments and EstimatedDocumentCount instead")
	}
	return unsupportedf("operation %s on a %s entity", name, entityKind(ent))
}

// checked runs the driver call f after all arguments were read: an argument
// nobody read makes the test skip instead of running without it.
func checked(a *args, f func() (opResult, error)) (opResult, error) {
	if err := a.check(); err != nil {
		return opResult{}, err
	}
	return f()
}

func value(x any) (opResult, error) {
	v, err := toRawValue(x)
	if err != nil {
		return opResult{}, &runnerError{err}
	}
	return opResult{v: v}, nil
}

// valueResult is value(x) for a driver call that returned x and err.
func valueResult(x any, err error) (opResult, error) {
	if err != nil {
		return opResult{}, err
	}
	return value(x)
}

// ackValue is the result of a write: nothing when it was unacknowledged
// (w: 0), else the value doc builds.
func ackValue(acknowledged bool, doc func() any) (opResult, error) {
	if !acknowledged {
		return opResult{}, nil
	}
	return value(doc())
}

func cursorResult(ctx context.Context, cur *sturdy.Cursor, err error) (opResult, error) {
	if err != nil {
		return opResult{}, err
	}
	docs := bson.A{}
	var all []bson.Raw
	if err := cur.All(ctx, &all); err != nil {
		return opResult{}, err
	}
	for _, d := range all {
		docs = append(docs, d)
	}
	return iterableValue(docs)
}

// iterableValue is the result of an operation that returns documents.
func iterableValue(docs bson.A) (opResult, error) {
	r, err := value(docs)
	r.iterable = true
	return r, err
}

func singleResult(sr *sturdy.SingleResult) (opResult, error) {
	raw, err := sr.Raw()
	if errors.Is(err, sturdy.ErrUnacknowledgedWrite) {
		return opResult{}, nil // w: 0: no result
	}
	if errors.Is(err, sturdy.ErrNoDocuments) {
		return opResult{v: bson.RawValue{Type: bson.TypeNull}}, nil
	}
	if err != nil {
		return opResult{}, err
	}
	return opResult{v: bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: raw}}, nil
}

func updateResult(r *sturdy.UpdateResult, err error) (opResult, error) {
	if err != nil {
		return opResult{}, err
	}
	if !r.Acknowledged {
		return opResult{}, nil
	}
	d := bson.D{{Key: "matchedCount", Value: r.MatchedCount}, {Key: "modifiedCount", Value: r.ModifiedCount}, {Key: "upsertedCount", Value: r.UpsertedCount}}
	if r.UpsertedID != nil {
		d = append(d, bson.E{Key: "upsertedId", Value: r.UpsertedID})
	}
	return value(d)
}

func deleteResult(r *sturdy.DeleteResult, err error) (opResult, error) {
	if err != nil {
		return opResult{}, err
	}
	return ackValue(r.Acknowledged, func() any { return bson.D{{Key: "deletedCount", Value: r.DeletedCount}} })
}

// bulkResultDoc converts a BulkWriteResult to the document the tests
// expect. sturdy does not report inserted ids for BulkWrite, which the tests
// allow ($$unsetOrMatches).
func bulkResultDoc(r *sturdy.BulkWriteResult) bson.D {
	idx := make([]int64, 0, len(r.UpsertedIDs))
	for i := range r.UpsertedIDs {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(i, j int) bool { return idx[i] < idx[j] })
	ups := bson.D{}
	for _, i := range idx {
		ups = append(ups, bson.E{Key: strconv.FormatInt(i, 10), Value: r.UpsertedIDs[i]})
	}
	return bson.D{
		{Key: "deletedCount", Value: r.DeletedCount}, {Key: "insertedCount", Value: r.InsertedCount},
		{Key: "matchedCount", Value: r.MatchedCount}, {Key: "modifiedCount", Value: r.ModifiedCount},
		{Key: "upsertedCount", Value: r.UpsertedCount}, {Key: "upsertedIds", Value: ups},
	}
}

// clientBulkResultDoc converts a ClientBulkWriteResult to the document the
// tests expect; the per-model results only when they were asked for.
func clientBulkResultDoc(r *sturdy.ClientBulkWriteResult) bson.D {
	d := bson.D{
		{Key: "insertedCount", Value: r.InsertedCount}, {Key: "upsertedCount", Value: r.UpsertedCount},
		{Key: "matchedCount", Value: r.MatchedCount}, {Key: "modifiedCount", Value: r.ModifiedCount},
		{Key: "deletedCount", Value: r.DeletedCount},
	}
	if !r.HasVerboseResults {
		return d
	}
	byIndex := func(n int, at func(i int) (bson.D, bool)) bson.D {
		out := bson.D{}
		for i := range n {
			if v, ok := at(i); ok {
				out = append(out, bson.E{Key: strconv.Itoa(i), Value: v})
			}
		}
		return out
	}
	n := 0
	for _, m := range []int{maxKey(r.InsertResults), maxKey(r.UpdateResults), maxKey(r.DeleteResults)} {
		n = max(n, m+1)
	}
	ins := byIndex(n, func(i int) (bson.D, bool) {
		v, ok := r.InsertResults[i]
		return bson.D{{Key: "insertedId", Value: v.InsertedID}}, ok
	})
	upd := byIndex(n, func(i int) (bson.D, bool) {
		v, ok := r.UpdateResults[i]
		out := bson.D{{Key: "matchedCount", Value: v.MatchedCount}, {Key: "modifiedCount", Value: v.ModifiedCount}}
		if v.UpsertedID != nil {
			out = append(out, bson.E{Key: "upsertedId", Value: v.UpsertedID})
		}
		return out, ok
	})
	del := byIndex(n, func(i int) (bson.D, bool) {
		v, ok := r.DeleteResults[i]
		return bson.D{{Key: "deletedCount", Value: v.DeletedCount}}, ok
	})
	return append(d, bson.E{Key: "insertResults", Value: ins}, bson.E{Key: "updateResults", Value: upd}, bson.E{Key: "deleteResults", Value: del})
}

// maxKey returns the largest key of m, -1 if it is empty.
func maxKey[V any](m map[int]V) int {
	out := -1
	for k := range m {
		out = max(out, k)
	}
	return out
}

// pipeline returns the pipeline argument as a bson.A of documents.
func (a *args) pipeline() (bson.A, error) {
	p, err := a.array("pipeline")
	if err != nil {
		return nil, err
	}
	if p == nil {
		p = bson.A{}
	}
	return p, nil
}

// opFunc is an operation bound to its entity.
type opFunc = func(context.Context, *args) (opResult, error)

// opTable maps the names of the operations on entities of type E to their
// handlers.
type opTable[E any] map[string]func(context.Context, E, *args) (opResult, error)

// bind returns the operation name on e, or nil if the table has none.
func (t opTable[E]) bind(e E, name string) opFunc {
	h, ok := t[name]
	if !ok {
		return nil
	}
	return func(ctx context.Context, a *args) (opResult, error) { return h(ctx, e, a) }
}

// dropIndexOptions reads the options of dropIndex and dropIndexes.
func dropIndexOptions(a *args) (*sturdy.DropIndexOptions, error) {
	o := &sturdy.DropIndexOptions{Comment: a.any("comment"), MaxTime: a.maxTime()}
	var err error
	o.Session, err = a.session()
	return o, err
}

func returnDocument(a *args) (sturdy.ReturnDocument, error) {
	switch s := a.str("returnDocument"); strings.ToLower(s) {
	case "", "before":
		return sturdy.Before, nil
	case "after":
		return sturdy.After, nil
	default:
		return 0, &runnerError{fmt.Errorf("returnDocument %q", s)}
	}
}

// aggregate runs the aggregate operation of a collection or a database.
func aggregate(ctx context.Context, a *args, run func(context.Context, any, ...*sturdy.AggregateOptions) (*sturdy.Cursor, error)) (opResult, error) {
	p, err := a.pipeline()
	if err != nil {
		return opResult{}, err
	}
	o, err := aggregateOptions(a)
	if err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) {
		cur, err := run(ctx, p, o)
		return cursorResult(ctx, cur, err)
	})
}

func aggregateOptions(a *args) (*sturdy.AggregateOptions, error) {
	o := &sturdy.AggregateOptions{BatchSize: int32(a.int64("batchSize")), AllowDiskUse: a.boolPtr("allowDiskUse"), Hint: a.any("hint"),
		Let: a.any("let"), Comment: a.any("comment"), MaxTime: a.maxTime(), BypassDocumentValidation: a.boolPtr("bypassDocumentValidation")}
	var err error
	if o.Collation, o.Session, err = a.collationAndSession(); err != nil {
		return nil, err
	}
	o.TimeoutMode = sturdy.TimeoutMode(a.str("timeoutMode"))
	o.MaxAwaitTime = time.Duration(a.int64("maxAwaitTimeMS")) * time.Millisecond
	return o, nil
}

// cursorType reads a cursorType argument.
func cursorType(a *args) (sturdy.CursorType, error) {
	switch ct := a.str("cursorType"); ct {
	case "", "nonTailable":
		return sturdy.NonTailable, nil
	case "tailable":
		return sturdy.Tailable, nil
	case "tailableAwait":
		return sturdy.TailableAwait, nil
	default:
		return 0, &runnerError{fmt.Errorf("unknown cursorType %q", ct)}
	}
}

func findOptions(a *args) (*sturdy.FindOptions, error) {
	o := &sturdy.FindOptions{Sort: a.any("sort"), Projection: a.any("projection"), Skip: a.int64("skip"), Limit: a.int64("limit"),
		BatchSize: int32(a.int64("batchSize")), Hint: a.any("hint"), Min: a.any("min"), Max: a.any("max"), Let: a.any("let"),
		Comment: a.any("comment"), MaxTime: a.maxTime(), AllowDiskUse: a.boolPtr("allowDiskUse"),
		AllowPartialResults: a.boolean("allowPartialResults"), NoCursorTimeout: a.boolean("noCursorTimeout"),
		ReturnKey: a.boolean("returnKey"), ShowRecordID: a.boolean("showRecordId"),
		TimeoutMode: sturdy.TimeoutMode(a.str("timeoutMode")), MaxAwaitTime: time.Duration(a.int64("maxAwaitTimeMS")) * time.Millisecond}
	var err error
	if o.CursorType, err = cursorType(a); err != nil {
		return nil, err
	}
	if o.Collation, o.Session, err = a.collationAndSession(); err != nil {
		return nil, err
	}
	return o, nil
}

// writeModels converts bulkWrite's requests argument.
func writeModels(a *args) ([]sturdy.WriteModel, error) {
	vals, err := modelList(a, "requests")
	if err != nil {
		return nil, err
	}
	models := []sturdy.WriteModel{}
	for _, rv := range vals {
		model, _, err := writeModel(a, rv, false)
		if err != nil {
			return nil, err
		}
		models = append(models, model)
	}
	return models, nil
}

// clientWriteModels converts clientBulkWrite's models argument.
func clientWriteModels(a *args) ([]sturdy.ClientWriteModel, error) {
	vals, err := modelList(a, "models")
	if err != nil {
		return nil, err
	}
	models := []sturdy.ClientWriteModel{}
	for _, rv := range vals {
		model, ns, err := writeModel(a, rv, true)
		if err != nil {
			return nil, err
		}
		db, coll, ok := strings.Cut(ns, ".")
		if !ok {
			return nil, &runnerError{fmt.Errorf("namespace %q has no collection", ns)}
		}
		models = append(models, sturdy.ClientWriteModel{Database: db, Collection: coll, Model: model})
	}
	return models, nil
}

// modelList returns the array argument k of write models.
func modelList(a *args, k string) ([]bson.RawValue, error) {
	v, ok := a.get(k)
	if !ok {
		return nil, &runnerError{fmt.Errorf("%s without %s", a.op, k)}
	}
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, &runnerError{fmt.Errorf("%s must be an array", k)}
	}
	vals, _ := arr.Values()
	return vals, nil
}

// writeModel converts one {insertOne: {...}}-style request; namespaced
// requests (clientBulkWrite's) also carry the namespace it returns.
func writeModel(a *args, rv bson.RawValue, namespaced bool) (sturdy.WriteModel, string, error) {
	d, ok := rv.DocumentOK()
	if !ok {
		return nil, "", &runnerError{errors.New("a request must be a document")}
	}
	elems, _ := d.Elements()
	if len(elems) != 1 {
		return nil, "", &runnerError{fmt.Errorf("request %s must have one key", docJSON(d))}
	}
	kind := elems[0].Key()
	spec, ok := elems[0].Value().DocumentOK()
	if !ok {
		return nil, "", &runnerError{fmt.Errorf("request %s must be a document", kind)}
	}
	m := &args{op: a.op + " " + kind, d: spec, used: map[string]bool{}, tr: a.tr}
	var ns string
	if namespaced {
		ns = m.str("namespace")
	}
	coll, err := m.collation()
	if err != nil {
		return nil, "", err
	}
	build, ok := writeModelBuilders[kind]
	if !ok {
		return nil, "", &runnerError{fmt.Errorf("unknown write model %q", kind)}
	}
	model, err := build(m, coll)
	if err != nil {
		return nil, "", err
	}
	if err := m.check(); err != nil {
		return nil, "", err
	}
	return model, ns, nil
}

// writeModelBuilders build the write model of each kind of request from
// its fields and collation.
var writeModelBuilders = map[string]func(m *args, c *sturdy.Collation) (sturdy.WriteModel, error){
	"insertOne":  insertOneModel,
	"updateOne":  updateOneModel,
	"updateMany": updateManyModel,
	"replaceOne": replaceOneModel,
	"deleteOne":  deleteOneModel,
	"deleteMany": deleteManyModel,
}

func insertOneModel(m *args, _ *sturdy.Collation) (sturdy.WriteModel, error) {
	doc, err := m.doc("document")
	if err != nil {
		return nil, err
	}
	return &sturdy.InsertOneModel{Document: doc}, nil
}

// updateModelArgs reads the filter and arrayFilters of an update request.
func updateModelArgs(m *args) (any, []any, error) {
	f, err := m.filter()
	if err != nil {
		return nil, nil, err
	}
	afs, err := m.arrayFilters()
	if err != nil {
		return nil, nil, err
	}
	return f, afs, nil
}

func updateOneModel(m *args, c *sturdy.Collation) (sturdy.WriteModel, error) {
	f, afs, err := updateModelArgs(m)
	if err != nil {
		return nil, err
	}
	return &sturdy.UpdateOneModel{Filter: f, Update: m.any("update"), Upsert: m.boolean("upsert"), ArrayFilters: afs,
		Collation: c, Hint: m.any("hint"), Sort: m.any("sort")}, nil
}

func updateManyModel(m *args, c *sturdy.Collation) (sturdy.WriteModel, error) {
	f, afs, err := updateModelArgs(m)
	if err != nil {
		return nil, err
	}
	return &sturdy.UpdateManyModel{Filter: f, Update: m.any("update"), Upsert: m.boolean("upsert"), ArrayFilters: afs,
		Collation: c, Hint: m.any("hint")}, nil
}

func replaceOneModel(m *args, c *sturdy.Collation) (sturdy.WriteModel, error) {
	f, err := m.filter()
	if err != nil {
		return nil, err
	}
	return &sturdy.ReplaceOneModel{Filter: f, Replacement: m.any("replacement"), Upsert: m.boolean("upsert"),
		Collation: c, Hint: m.any("hint"), Sort: m.any("sort")}, nil
}

func deleteOneModel(m *args, c *sturdy.Collation) (sturdy.WriteModel, error) {
	f, err := m.filter()
	if err != nil {
		return nil, err
	}
	return &sturdy.DeleteOneModel{Filter: f, Collation: c, Hint: m.any("hint")}, nil
}

func deleteManyModel(m *args, c *sturdy.Collation) (sturdy.WriteModel, error) {
	f, err := m.filter()
	if err != nil {
		return nil, err
	}
	return &sturdy.DeleteManyModel{Filter: f, Collation: c, Hint: m.any("hint")}, nil
}

func entityKind(e any) string {
	switch e.(type) {
	case *clientEntity:
		return "client"
	case *databaseEntity:
		return "database"
	case *collectionEntity:
		return "collection"
	case *sessionEntity:
		return "session"
	}
	return fmt.Sprintf("%T", e)
}
