package mongosim

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/expr"
	"github.com/sturdy-go/sturdy/mongosim/internal/query"
	"github.com/sturdy-go/sturdy/mongosim/internal/update"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

func init() {
	register(
		&command{name: "insert", run: cmdInsert, write: true, retryableWrite: true},
		&command{name: "update", run: cmdUpdate, write: true, retryableWrite: true},
		&command{name: "delete", run: cmdDelete, write: true, retryableWrite: true},
		&command{name: "findAndModify", run: cmdFindAndModify, write: true, retryableWrite: true},
	)
}

// ---- argument helpers shared by the data commands ----

// genericFields are accepted by every command: session, transaction,
// cluster-time, read/write-concern and API-version plumbing.
var genericFields = map[string]bool{
	"$db": true, "lsid": true, "txnNumber": true, "$clusterTime": true, "$readPreference": true,
	"readConcern": true, "writeConcern": true, "comment": true, "maxTimeMS": true,
	"apiVersion": true, "apiStrict": true, "apiDeprecationErrors": true, "autocommit": true,
	"startTransaction": true, "stmtId": true, "stmtIds": true, "$audit": true,
	"mayBypassWriteBlocking": true, "$client": true, "clientOperationKey": true,
	"$configServerState": true, "$topologyTime": true, "$configTime": true,
	"databaseVersion": true, "shardVersion": true, "$queryOptions": true, "readOnce": true,
}

// checkFields rejects fields the command does not know, as the server's
// IDL parser does, so an option mongosim does not implement is never
// silently ignored.
func checkFields(r *request, allowed ...string) error {
	for i, e := range r.cmd {
		if i == 0 || genericFields[e.Key] {
			continue
		}
		known := false
		for _, a := range allowed {
			if a == e.Key {
				known = true
				break
			}
		}
		if !known {
			return cmderr.New(40415, "BSON field '%s.%s' is an unknown field.", r.name, e.Key)
		}
	}
	return nil
}

// collectionArg returns the collection named by the command's first field.
func collectionArg(r *request) (string, error) {
	if len(r.cmd) == 0 {
		return "", cmderr.New(cmderr.FailedToParse, "empty command")
	}
	s, ok := r.cmd[0].Value.(string)
	if !ok {
		return "", cmderr.New(cmderr.InvalidNamespace, "collection name has invalid type %s", typeNameOf(r.cmd[0].Value))
	}
	if err := validateNamespace(r.db, s); err != nil {
		return "", err
	}
	return s, nil
}

func typeNameOf(v any) string {
	if v == nil {
		return "missing"
	}
	return value.TypeName(v)
}

func int64Arg(v any) (int64, bool) {
	if !value.IsNumber(v) {
		return 0, false
	}
	return value.ToInt64(v)
}

// truthy is the server's coercion of option flags: bools, and numbers
// (non-zero is true).
func truthy(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case nil, bson.Null, bson.Undefined:
		return false
	}
	if f, ok := value.ToFloat(v); ok {
		return f != 0
	}
	return true
}

func docArg(r *request, key string) (bson.D, bool, error) {
	v, ok := r.get(key)
	if !ok || v == nil {
		return nil, false, nil
	}
	if _, isNull := v.(bson.Null); isNull {
		return nil, false, nil
	}
	d, isDoc := v.(bson.D)
	if !isDoc {
		return nil, false, cmderr.New(cmderr.TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type 'object'", r.name, key, typeNameOf(v))
	}
	return d, true, nil
}

func nonNegArg(r *request, key string) (int64, bool, error) {
	v, ok := r.get(key)
	if !ok {
		return 0, false, nil
	}
	n, isInt := int64Arg(v)
	if !isInt {
		return 0, false, cmderr.New(cmderr.TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected types '[long, int, decimal, double]'", r.name, key, typeNameOf(v))
	}
	if n < 0 {
		return 0, false, cmderr.New(51024, "BSON field '%s' value must be >= 0, actual value '%d'", key, n)
	}
	return n, true, nil
}

// optionalProjection compiles spec, or returns nil when there is none.
func optionalProjection(spec bson.D, env opEnv) (*query.Projection, error) {
	if len(spec) == 0 {
		return nil, nil
	}
	return query.CompileProjectionWith(spec, query.Options{Collator: env.collator(), Vars: env.variables()})
}

// commandArgs reads what most collection commands start with: the
// collection name and the check for unknown fields.
func commandArgs(r *request, allowed ...string) (string, error) {
	coll, err := collectionArg(r)
	if err != nil {
		return "", err
	}
	if err := checkFields(r, allowed...); err != nil {
		return "", err
	}
	return coll, nil
}

func orderedArg(r *request) bool {
	if v, ok := r.get("ordered"); ok {
		return truthy(v)
	}
	return true
}

func arrayFiltersArg(v any, present bool) ([]bson.D, error) {
	if !present {
		return nil, nil
	}
	a, ok := v.(bson.A)
	if !ok {
		return nil, cmderr.New(cmderr.TypeMismatch, "arrayFilters must be an array, but got %s", typeNameOf(v))
	}
	out := make([]bson.D, len(a))
	for i, e := range a {
		d, ok := e.(bson.D)
		if !ok {
			return nil, cmderr.New(cmderr.TypeMismatch, "arrayFilters entries must be objects, but got %s", typeNameOf(e))
		}
		out[i] = d
	}
	return out, nil
}

// writeErrorDoc renders a failed statement as a writeErrors entry.
func writeErrorDoc(i int, err error) bson.D {
	_, fields := errorFields(err)
	return append(bson.D{{Key: "index", Value: int32(i)}}, fields...)
}

// errorReply renders err as an {ok: 0} reply keeping the keyPattern and
// keyValue of duplicate-key errors, which a plain command error lacks.
func errorReply(err error) (bson.D, error) {
	var dk *dupKeyError
	var ve *validationError
	var kc *keyChangeError
	switch {
	case errors.As(err, &dk):
		err = dk
	case errors.As(err, &ve):
		err = ve
	case errors.As(err, &kc):
		err = kc
	default:
		return nil, err
	}
	code, fields := errorFields(err)
	out := bson.D{{Key: "ok", Value: 0.0}}
	for _, f := range fields {
		if f.Key == "errmsg" {
			out = append(out, f)
		}
	}
	out = append(out, bson.E{Key: "code", Value: code}, bson.E{Key: "codeName", Value: cmderr.Name(code)})
	for _, f := range fields {
		if f.Key == "keyPattern" || f.Key == "keyValue" || f.Key == "errInfo" {
			out = append(out, f)
		}
	}
	return out, nil
}

func statementsArg(r *request, key string) (bson.A, error) {
	v, ok := r.get(key)
	if !ok {
		return nil, cmderr.New(40414, "BSON field '%s.%s' is missing but a required field", r.name, key)
	}
	a, ok := v.(bson.A)
	if !ok {
		return nil, cmderr.New(cmderr.TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type 'array'", r.name, key, typeNameOf(v))
	}
	if len(a) == 0 {
		return nil, cmderr.New(cmderr.InvalidLength, "Write batch sizes must be between 1 and 100000. Got 0 operations.")
	}
	if len(a) > 100000 {
		return nil, cmderr.New(cmderr.InvalidLength, "Write batch sizes must be between 1 and 100000. Got %d operations.", len(a))
	}
	return a, nil
}

// statementDocs is statementsArg for statements that must all be documents.
func statementDocs(r *request, key string) ([]bson.D, error) {
	list, err := statementDocList(r, key)
	if err != nil {
		return nil, err
	}
	out := make([]bson.D, len(list))
	for i, v := range list {
		out[i] = v.(bson.D)
	}
	return out, nil
}

// statementDocList is statementDocs without the copy: every element of the
// list it returns is a bson.D.
func statementDocList(r *request, key string) (bson.A, error) {
	list, err := statementsArg(r, key)
	if err != nil {
		return nil, err
	}
	for i, v := range list {
		if _, ok := v.(bson.D); !ok {
			return nil, cmderr.New(cmderr.TypeMismatch, "BSON field '%s.%s.%d' is the wrong type '%s', expected type 'object'", r.name, key, i, typeNameOf(v))
		}
	}
	return list, nil
}

// runStatements runs n write statements in order through r.stmt, handing
// each success to add; a failure becomes a writeErrors entry and, when the
// command is ordered, stops the rest.
func runStatements(r *request, n int, exec func(i int) (stmtResult, error), add func(i int, res stmtResult)) bson.A {
	ordered := orderedArg(r)
	var writeErrors bson.A
	for i := 0; i < n; i++ {
		res, err := r.stmt(i, func() (stmtResult, error) { return exec(i) })
		if err != nil {
			writeErrors = append(writeErrors, writeErrorDoc(i, err))
			if ordered {
				break
			}
			continue
		}
		add(i, res)
	}
	return writeErrors
}

// ---- insert ----

func cmdInsert(r *request) (bson.D, error) {
	coll, err := collectionArg(r)
	if err != nil {
		return nil, err
	}
	if err := checkFields(r, "documents", "ordered", "bypassDocumentValidation", "bypassEmptyTsReplacement", "let"); err != nil {
		return nil, err
	}
	docs, err := statementsArg(r, "documents")
	if err != nil {
		return nil, err
	}
	bypassArg(r)
	ins := inserter{r: r, coll: coll, ordered: orderedArg(r)}
	for i := 0; i < len(docs) && !ins.stopped; {
		if _, ok := docs[i].(bson.D); !ok {
			return nil, cmderr.New(cmderr.TypeMismatch, "BSON field 'insert.documents.%d' is the wrong type '%s', expected type 'object'", i, typeNameOf(docs[i]))
		}
		if r.tx != nil {
			ins.one(i, docs[i].(bson.D))
			i++
			continue
		}
		i = ins.batch(docs, i)
	}
	return writeReply(ins.n, nil, nil, ins.writeErrors), nil
}

// inserter runs an insert command's documents: in a transaction one at a
// time, else in batches of up to insertBatchMax under one hold of the
// collection's lock, as mongod groups an insert's documents (its
// internalInsertMaxBatchSize is 64). Concurrent inserts of 1 000 documents
// took turns on the lock for every document: a mutex profile of 32 of them
// showed almost all their time waiting there. What needs no lock (copying,
// checking and keying the documents, allocating their records, recording
// results) is done before or after holding it.
type inserter struct {
	r           *request
	coll        string
	ordered     bool
	n           int32
	writeErrors bson.A
	stopped     bool // an ordered insert met an error
	// todo is one batch's documents and results, reused by the next
	// batch.
	todo []pendingInsert
	// warmed keeps idTable.warm's loads from being compiled away.
	warmed uint64
}

const insertBatchMax = 64

// one inserts document i by itself (as a retryable statement).
func (ins *inserter) one(i int, doc bson.D) {
	r := ins.r
	res, err := r.stmt(i, func() (stmtResult, error) {
		return r.data().insertOne(r.ctx, r.db, ins.coll, doc)
	})
	ins.done(i, res, err)
}

func (ins *inserter) done(i int, res stmtResult, err error) {
	if err != nil {
		ins.writeErrors = append(ins.writeErrors, writeErrorDoc(i, err))
		ins.stopped = ins.ordered
		return
	}
	ins.n += res.N
}

// batch inserts documents from docs[from] on, up to insertBatchMax of
// them, and returns where the next batch starts. It stops before a
// statement that is not a document or that fails before reaching the
// collection, unless that one comes first (then it is reported alone), so
// write errors stay in statement order. A statement a retry already applied
// is replayed. A document held by an uncommitted transaction is inserted
// by itself, waiting for the transaction as insertOne does.
func (ins *inserter) batch(docs bson.A, from int) int {
	r := ins.r
	todo := ins.todo[:0]
	next := from
	for ; next < len(docs) && len(todo) < insertBatchMax; next++ {
		doc, ok := docs[next].(bson.D)
		if !ok {
			break
		}
		if res, ok := r.txn.replay(r.stmtID(next)); ok {
			ins.n += res.N
			continue
		}
		prepared, err := prepareOwnedInsert(doc)
		if err != nil {
			if len(todo) == 0 {
				ins.done(next, stmtResult{}, err)
				next++
			}
			break
		}
		todo = append(todo, pendingInsert{i: next, doc: prepared})
	}
	ins.todo = todo
	if len(todo) == 0 {
		return next
	}
	keyPending(todo)
	applied, locked, err := ins.apply(todo)
	switch {
	case err != nil:
		// The collection refused the batch (a view, a bad namespace):
		// the first document's error, as insertOne reports it.
		ins.done(todo[0].i, stmtResult{}, err)
		return todo[0].i + 1
	case locked:
		i := todo[applied].i
		ins.one(i, docs[i].(bson.D))
		return i + 1
	}
	return next
}

// pendingInsert is statement i's document, ready to store, with its _id
// and the _id's simpleIDKey and its idHash, and then its result.
type pendingInsert struct {
	i     int
	doc   bson.D
	id    any
	idKey string
	hash  uint64
	err   error
}

// keyPending sets each document's _id (first in a prepared document) and
// its simpleIDKey, the keys of the batch sharing one string: a key each
// was three allocations per document.
func keyPending(todo []pendingInsert) {
	buf := make([]byte, 0, 16*len(todo))
	ends := make([]int, len(todo))
	for j := range todo {
		p := &todo[j]
		p.id = p.doc[0].Value
		buf = simpleIDKey(buf, p.id)
		ends[j] = len(buf)
	}
	keys, start := string(buf), 0
	for j := range todo {
		todo[j].idKey = keys[start:ends[j]]
		todo[j].hash = idHash(todo[j].idKey)
		start = ends[j]
	}
}

// apply stores todo under one hold of the collection's lock until a
// document is held by a transaction (locked) or an ordered insert fails,
// and reports how many it applied. The batch's records are allocated
// together, and its change log entries logged together, before the lock
// is released; results are recorded after.
func (ins *inserter) apply(todo []pendingInsert) (applied int, locked bool, err error) {
	r := ins.r
	recs := make([]record, len(todo))
	err = r.data().write(r.ctx, r.db, ins.coll, true, func(c *collection) error {
		c.beginChangeBatch()
		defer c.flushChanges()
		ins.warmed += c.byID.warm(todo) // kept: unused loads would be dropped
		for j := range todo {
			p := &todo[j]
			rec := &recs[j]
			rec.doc = p.doc
			k, h := c.keyFor(p.id, p.idKey, p.hash)
			err := c.insertRecord(rec, p.id, k, h)
			if docLocked(err) != nil {
				locked = true
				return nil
			}
			p.err = err
			applied++
			if err != nil && ins.ordered {
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return 0, false, err
	}
	for _, p := range todo[:applied] {
		if p.err == nil {
			r.txn.record(r.stmtID(p.i), stmtResult{N: 1})
		}
		ins.done(p.i, stmtResult{N: 1}, p.err)
	}
	return applied, locked, nil
}

func (s *storage) insertOne(ctx context.Context, db, coll string, doc bson.D) (stmtResult, error) {
	prepared, err := prepareInsert(doc)
	if err != nil {
		return stmtResult{}, err
	}
	err = s.write(ctx, db, coll, true, func(c *collection) error { return c.insert(prepared) })
	if err != nil {
		return stmtResult{}, err
	}
	return stmtResult{N: 1}, nil
}

func writeReply(n int32, nModified *int32, upserted bson.A, writeErrors bson.A) bson.D {
	// Room for the fields decorate adds (opTime, electionId, the cluster
	// time, ok, ...): the reply is not copied to grow.
	out := append(make(bson.D, 0, 10), bson.E{Key: "n", Value: n})
	if len(upserted) > 0 {
		out = append(out, bson.E{Key: "upserted", Value: upserted})
	}
	if nModified != nil {
		out = append(out, bson.E{Key: "nModified", Value: *nModified})
	}
	if len(writeErrors) > 0 {
		out = append(out, bson.E{Key: "writeErrors", Value: writeErrors})
	}
	return out
}

// ---- update ----

// updateStmt is one parsed update statement (update command or bulkWrite).
type updateStmt struct {
	filterDoc    bson.D
	updateSpec   any
	multi        bool
	upsert       bool
	arrayFilters []bson.D
	sort         bson.D
	hint         any
	collation    any // the statement's own collation, if hasCollation
	hasCollation bool
	constants    bson.D // "c": variables of a pipeline update
	hasConstants bool
}

// compiled filter, update and sort of a statement; compile errors are the
// statement's write error, as on the server.
type compiledUpdate struct {
	*updateStmt
	filter *query.Filter
	upd    *update.Update
	sorter *query.Sort
	env    opEnv
	// updVars are the variables the update pipeline sees: the command's
	// plus the statement's constants.
	updVars map[string]any
}

// updateEnv is the update.Env of applying cu at now.
func (cu *compiledUpdate) updateEnv(now time.Time) update.Env {
	return update.Env{Now: now, ArrayFilters: cu.arrayFilters, Vars: cu.updVars, Collator: cu.env.collator()}
}

// position is the array position the filter matched in doc, for the
// update's positional $; -1 when the update has none (matching again to
// find it costs an allocation).
func (cu *compiledUpdate) position(doc bson.D) int {
	if !cu.upd.UsesPosition() {
		return -1
	}
	_, pos := cu.filter.MatchPosition(doc)
	return pos
}

// compile returns the statement compiled; a value, which execUpdate keeps
// on its stack.
func (st *updateStmt) compile(env opEnv) (compiledUpdate, error) {
	f, err := env.compileNearFilter(st.filterDoc)
	if err != nil {
		return compiledUpdate{}, err
	}
	u, err := update.Compile(st.updateSpec)
	if err != nil {
		return compiledUpdate{}, err
	}
	if st.multi && u.IsReplacement() {
		return compiledUpdate{}, cmderr.New(cmderr.FailedToParse, "multi update is not supported for replacement-style update")
	}
	cu := compiledUpdate{updateStmt: st, filter: f, upd: u, env: env, updVars: env.vars}
	if st.hasConstants {
		if !u.IsPipeline() {
			return compiledUpdate{}, cmderr.New(51198, "Constant values may only be specified for pipeline updates")
		}
		cu.updVars = make(map[string]any, len(env.vars)+len(st.constants))
		for k, v := range env.vars {
			cu.updVars[k] = v
		}
		for _, e := range st.constants {
			if err := expr.CheckUserVarName(e.Key); err != nil {
				return compiledUpdate{}, err
			}
			cu.updVars[e.Key] = e.Value
		}
	}
	if u.IsPipeline() && cu.updVars != nil {
		// As the filter's $expr: an undefined variable fails at parse time.
		if err := expr.CheckVariables(st.updateSpec, cu.updVars); err != nil {
			return compiledUpdate{}, err
		}
	}
	if len(st.sort) > 0 {
		if st.multi {
			return compiledUpdate{}, cmderr.New(cmderr.FailedToParse, "Cannot specify sort with multi=true")
		}
		if cu.sorter, err = env.compileSort(st.sort); err != nil {
			return compiledUpdate{}, err
		}
		if cu.sorter.NeedsTextScore() {
			return compiledUpdate{}, errWriteTextScore
		}
	}
	return cu, nil
}

// parseUpdateStmt parses statement d into st.
func parseUpdateStmt(st *updateStmt, d bson.D, where, filterKey, updateKey string) error {
	var haveQ, haveU bool
	for _, e := range d {
		switch e.Key {
		case filterKey:
			q, ok := e.Value.(bson.D)
			if !ok {
				return cmderr.New(cmderr.TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type 'object'", where, filterKey, typeNameOf(e.Value))
			}
			st.filterDoc, haveQ = q, true
		case updateKey:
			switch e.Value.(type) {
			case bson.D, bson.A:
			default:
				return cmderr.New(cmderr.TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected types '[object, array]'", where, updateKey, typeNameOf(e.Value))
			}
			st.updateSpec, haveU = e.Value, true
		case "multi":
			st.multi = truthy(e.Value)
		case "upsert":
			st.upsert = truthy(e.Value)
		case "arrayFilters":
			af, err := arrayFiltersArg(e.Value, true)
			if err != nil {
				return err
			}
			st.arrayFilters = af
		case "collation":
			st.collation, st.hasCollation = e.Value, true
		case "hint":
			st.hint = e.Value
		case "sort":
			s, ok := e.Value.(bson.D)
			if !ok {
				return cmderr.New(cmderr.TypeMismatch, "BSON field '%s.sort' is the wrong type '%s', expected type 'object'", where, typeNameOf(e.Value))
			}
			st.sort = s
		case "c":
			c, ok := e.Value.(bson.D)
			if !ok {
				return cmderr.New(cmderr.TypeMismatch, "BSON field '%s.c' is the wrong type '%s', expected type 'object'", where, typeNameOf(e.Value))
			}
			st.constants, st.hasConstants = c, true
		case "upsertSupplied":
			if truthy(e.Value) {
				return cmderr.Unsupported("upsertSupplied")
			}
		default:
			return cmderr.New(40415, "BSON field '%s.%s' is an unknown field.", where, e.Key)
		}
	}
	if !haveQ {
		return cmderr.New(40414, "BSON field '%s.%s' is missing but a required field", where, filterKey)
	}
	if !haveU {
		return cmderr.New(40414, "BSON field '%s.%s' is missing but a required field", where, updateKey)
	}
	return nil
}

func cmdUpdate(r *request) (bson.D, error) {
	coll, err := commandArgs(r, "updates", "ordered", "bypassDocumentValidation", "bypassEmptyTsReplacement", "let")
	if err != nil {
		return nil, err
	}
	list, err := statementDocList(r, "updates")
	if err != nil {
		return nil, err
	}
	bypassArg(r)
	// The statements in one slice: one allocation for the command.
	stmts := make([]updateStmt, len(list))
	for i, d := range list {
		if err := parseUpdateStmt(&stmts[i], d.(bson.D), "update.updates", "q", "u"); err != nil {
			return nil, err
		}
	}
	vars, err := r.letVars()
	if err != nil {
		return nil, err
	}
	var n, nModified int32
	var upserted bson.A
	writeErrors := runStatements(r, len(stmts), func(i int) (stmtResult, error) {
		env, err := r.withStatement(opEnv{vars: vars}, r.db, coll, stmts[i].collation, stmts[i].hasCollation, "update.updates.collation")
		if err != nil {
			return stmtResult{}, err
		}
		return r.data().execUpdate(r.ctx, r.db, coll, &stmts[i], env, r.now)
	}, func(i int, res stmtResult) {
		n += res.N
		nModified += res.NModified
		if res.Upserted != nil {
			upserted = append(upserted, bson.D{{Key: "index", Value: int32(i)}, {Key: "_id", Value: res.Upserted}})
		}
	})
	return writeReply(n, &nModified, upserted, writeErrors), nil
}

// execUpdate runs one update statement atomically under the collection lock.
func (s *storage) execUpdate(ctx context.Context, db, coll string, st *updateStmt, env opEnv, now time.Time) (stmtResult, error) {
	cu, err := st.compile(env)
	if err != nil {
		return stmtResult{}, err
	}
	var res stmtResult
	err = s.write(ctx, db, coll, st.upsert, func(c *collection) error {
		if c == nil {
			return nil
		}
		if err := checkHint(c, st.hint); err != nil {
			return err
		}
		limit := 1
		if st.multi || cu.sorter != nil {
			limit = 0
		}
		matched, err := c.matchPlanned(cu.filter, st.filterDoc, limit, st.hint)
		if err != nil {
			return err
		}
		if cu.sorter != nil && len(matched) > 1 {
			matched = []*record{firstBySort(cu.sorter, matched)}
		}
		uenv := cu.updateEnv(now)
		for _, rec := range matched {
			uenv.Position = cu.position(rec.doc)
			out, modified, err := cu.upd.Apply(rec.doc, uenv)
			if err != nil {
				return err
			}
			if modified {
				// out is stored as it is: it shares only unchanged values
				// with rec.doc, and stored documents are never changed in
				// place (update.Update.Apply).
				if err := c.replace(rec, out, cu.upd.IsReplacement()); err != nil {
					return err
				}
				res.NModified++
			}
			res.N++
		}
		if len(matched) > 0 || !st.upsert {
			return nil
		}
		id, _, err := upsertInto(c, &cu, now)
		if err != nil {
			return err
		}
		res.N = 1
		res.Upserted = id
		return nil
	})
	return res, err
}

// upsertInto inserts the document an upsert builds from its filter and
// update; it returns the new _id and document.
func upsertInto(c *collection, cu *compiledUpdate, now time.Time) (any, bson.D, error) {
	seed, err := query.UpsertSeed(cu.filterDoc)
	if err != nil {
		return nil, nil, err
	}
	uenv := cu.updateEnv(now)
	uenv.Insert, uenv.Position = true, -1
	doc, err := cu.upd.Upsert(seed, uenv)
	if err != nil {
		return nil, nil, err
	}
	doc, err = prepareInsert(doc)
	if err != nil {
		return nil, nil, err
	}
	if err := c.insert(doc); err != nil {
		return nil, nil, err
	}
	id, _ := value.Get(doc, "_id")
	return value.Clone(id), doc, nil
}

// errWriteTextScore refuses the textScore in the sort or projection of a
// write, which reads the documents without their scores.
var errWriteTextScore = cmderr.Unsupported("{$meta: \"textScore\"} in the sort or fields of an update or findAndModify")

func firstBySort(s *query.Sort, recs []*record) *record {
	best := recs[0]
	for _, r := range recs[1:] {
		if s.Compare(r.doc, best.doc) < 0 {
			best = r
		}
	}
	return best
}

// ---- delete ----

type deleteStmt struct {
	filterDoc    bson.D
	multi        bool
	hint         any
	collation    any // the statement's own collation, if hasCollation
	hasCollation bool
}

func cmdDelete(r *request) (bson.D, error) {
	coll, err := commandArgs(r, "deletes", "ordered", "let")
	if err != nil {
		return nil, err
	}
	list, err := statementDocs(r, "deletes")
	if err != nil {
		return nil, err
	}
	stmts := make([]*deleteStmt, len(list))
	for i, d := range list {
		st := &deleteStmt{}
		var haveQ, haveLimit bool
		for _, e := range d {
			switch e.Key {
			case "q":
				q, ok := e.Value.(bson.D)
				if !ok {
					return nil, cmderr.New(cmderr.TypeMismatch, "BSON field 'delete.deletes.q' is the wrong type '%s', expected type 'object'", typeNameOf(e.Value))
				}
				st.filterDoc, haveQ = q, true
			case "limit":
				n, ok := int64Arg(e.Value)
				if !ok || (n != 0 && n != 1) {
					return nil, cmderr.New(cmderr.FailedToParse, "The limit field in delete objects must be 0 or 1. Got %s", shellString(e.Value))
				}
				st.multi, haveLimit = n == 0, true
			case "collation":
				st.collation, st.hasCollation = e.Value, true
			case "hint":
				st.hint = e.Value
			default:
				return nil, cmderr.New(40415, "BSON field 'delete.deletes.%s' is an unknown field.", e.Key)
			}
		}
		if !haveQ {
			return nil, cmderr.New(40414, "BSON field 'delete.deletes.q' is missing but a required field")
		}
		if !haveLimit {
			return nil, cmderr.New(40414, "BSON field 'delete.deletes.limit' is missing but a required field")
		}
		stmts[i] = st
	}
	vars, err := r.letVars()
	if err != nil {
		return nil, err
	}
	var n int32
	writeErrors := runStatements(r, len(stmts), func(i int) (stmtResult, error) {
		env, err := r.withStatement(opEnv{vars: vars}, r.db, coll, stmts[i].collation, stmts[i].hasCollation, "delete.deletes.collation")
		if err != nil {
			return stmtResult{}, err
		}
		return r.data().execDelete(r.ctx, r.db, coll, stmts[i], env)
	}, func(_ int, res stmtResult) { n += res.N })
	return writeReply(n, nil, nil, writeErrors), nil
}

func (s *storage) execDelete(ctx context.Context, db, coll string, st *deleteStmt, env opEnv) (stmtResult, error) {
	f, err := env.compileNearFilter(st.filterDoc)
	if err != nil {
		return stmtResult{}, err
	}
	var res stmtResult
	err = s.write(ctx, db, coll, false, func(c *collection) error {
		if c == nil {
			return nil
		}
		if err := checkHint(c, st.hint); err != nil {
			return err
		}
		limit := 1
		if st.multi {
			limit = 0
		}
		matched, err := c.matchPlanned(f, st.filterDoc, limit, st.hint)
		if err != nil {
			return err
		}
		for _, rec := range matched {
			if err := c.remove(rec); err != nil {
				return err
			}
			res.N++
		}
		return nil
	})
	return res, err
}

// ---- findAndModify ----

// famArgs is a findAndModify command's parsed arguments.
type famArgs struct {
	coll                      string
	filterDoc, sortDoc        bson.D
	fields                    bson.D
	remove, returnNew, upsert bool
	updateSpec                any
	hasUpdate                 bool
	hint                      any
}

// famPlan is a findAndModify compiled against its collection's environment.
type famPlan struct {
	famArgs
	f      *query.Filter
	sorter *query.Sort
	proj   *query.Projection
	cu     *compiledUpdate
}

func cmdFindAndModify(r *request) (bson.D, error) {
	a, err := parseFamArgs(r)
	if err != nil {
		return nil, err
	}
	p, err := compileFam(r, a)
	if err != nil {
		return nil, err
	}
	res, err := r.stmt(0, func() (stmtResult, error) {
		var reply bson.D
		err := r.data().write(r.ctx, r.db, p.coll, p.upsert, func(c *collection) error {
			var err error
			reply, err = p.apply(c, r.now)
			return err
		})
		return stmtResult{Reply: reply}, err
	})
	if err != nil {
		return errorReply(err)
	}
	return value.CloneDoc(res.Reply), nil
}

// parseFamArgs reads findAndModify's arguments and rejects contradictory
// remove/update/upsert/new combinations.
func parseFamArgs(r *request) (famArgs, error) {
	var a famArgs
	var err error
	a.coll, err = commandArgs(r, "query", "sort", "remove", "update", "new", "fields", "upsert",
		"bypassDocumentValidation", "bypassEmptyTsReplacement", "collation", "arrayFilters", "hint", "let")
	if err != nil {
		return a, err
	}
	if a.filterDoc, _, err = docArg(r, "query"); err != nil {
		return a, err
	}
	if a.filterDoc == nil {
		a.filterDoc = bson.D{}
	}
	bypassArg(r)
	if a.sortDoc, _, err = docArg(r, "sort"); err != nil {
		return a, err
	}
	if a.fields, _, err = docArg(r, "fields"); err != nil {
		return a, err
	}
	flag := func(k string) bool { v, ok := r.get(k); return ok && truthy(v) }
	a.remove, a.returnNew, a.upsert = flag("remove"), flag("new"), flag("upsert")
	a.updateSpec, a.hasUpdate = r.get("update")
	if a.hasUpdate {
		if _, isNull := a.updateSpec.(bson.Null); isNull || a.updateSpec == nil {
			a.hasUpdate = false
		}
	}
	switch {
	case a.remove && a.hasUpdate:
		return a, cmderr.New(cmderr.FailedToParse, "Cannot specify both an update and remove=true")
	case !a.remove && !a.hasUpdate:
		return a, cmderr.New(cmderr.FailedToParse, "Either an update or remove=true must be specified")
	case a.remove && a.upsert:
		return a, cmderr.New(cmderr.FailedToParse, "Cannot specify both upsert=true and remove=true ")
	case a.remove && a.returnNew:
		return a, cmderr.New(cmderr.FailedToParse, "Cannot specify both new=true and remove=true; 'remove' always returns the deleted document")
	}
	return a, nil
}

// compileFam compiles findAndModify's filter, sort, projection and update.
func compileFam(r *request, a famArgs) (*famPlan, error) {
	p := &famPlan{famArgs: a}
	env, err := r.opEnvFor(a.coll)
	if err != nil {
		return nil, err
	}
	af, hasAF := r.get("arrayFilters")
	arrayFilters, err := arrayFiltersArg(af, hasAF)
	if err != nil {
		return nil, err
	}
	p.hint, _ = r.get("hint")
	if p.f, err = env.compileNearFilter(a.filterDoc); err != nil {
		return nil, err
	}
	if len(a.sortDoc) > 0 {
		if p.sorter, err = env.compileSort(a.sortDoc); err != nil {
			return nil, err
		}
	}
	if p.proj, err = optionalProjection(a.fields, env); err != nil {
		return nil, err
	}
	if p.proj.NeedsTextScore() || (p.sorter != nil && p.sorter.NeedsTextScore()) {
		return nil, errWriteTextScore
	}
	if a.hasUpdate {
		switch a.updateSpec.(type) {
		case bson.D, bson.A:
		default:
			return nil, cmderr.New(cmderr.FailedToParse, "Update argument must be either an object or an array")
		}
		st := &updateStmt{filterDoc: a.filterDoc, updateSpec: a.updateSpec, upsert: a.upsert, arrayFilters: arrayFilters}
		cu, err := st.compile(env)
		if err != nil {
			return nil, err
		}
		cu.filter = p.f
		p.cu = &cu
	}
	return p, nil
}

// project returns a projected copy of d, or nil for no document.
func (p *famPlan) project(d bson.D) any {
	if d == nil {
		return nil
	}
	d = value.CloneDoc(d)
	if p.proj != nil {
		d = p.proj.Apply(d)
	}
	return d
}

// target finds the document findAndModify acts on: the first match, or the
// first in sort order when a sort is given. c may be nil (no collection).
func (p *famPlan) target(c *collection) (*record, error) {
	if c == nil {
		return nil, nil
	}
	if err := checkHint(c, p.hint); err != nil {
		return nil, err
	}
	limit := 1
	if p.sorter != nil {
		limit = 0
	}
	m, err := c.matchPlanned(p.f, p.filterDoc, limit, p.hint)
	if err != nil || len(m) == 0 {
		return nil, err
	}
	if p.sorter != nil {
		return firstBySort(p.sorter, m), nil
	}
	return m[0], nil
}

// apply runs findAndModify inside the collection's write and returns its reply.
func (p *famPlan) apply(c *collection, now time.Time) (bson.D, error) {
	target, err := p.target(c)
	if err != nil {
		return nil, err
	}
	if p.remove {
		if target == nil {
			return famReply(bson.D{{Key: "n", Value: int32(0)}}, nil), nil
		}
		if err := c.remove(target); err != nil {
			return nil, err
		}
		return famReply(bson.D{{Key: "n", Value: int32(1)}}, p.project(target.doc)), nil
	}
	if target == nil {
		return p.upsertReply(c, now)
	}
	before := target.doc
	uenv := p.cu.updateEnv(now)
	uenv.Position = p.cu.position(target.doc)
	out, modified, err := p.cu.upd.Apply(target.doc, uenv)
	if err != nil {
		return nil, err
	}
	if modified {
		// Stored as it is, as in execUpdate.
		if err := c.replace(target, out, p.cu.upd.IsReplacement()); err != nil {
			return nil, err
		}
	}
	v := p.project(before)
	if p.returnNew {
		v = p.project(target.doc)
	}
	return famReply(bson.D{{Key: "n", Value: int32(1)}, {Key: "updatedExisting", Value: true}}, v), nil
}

// upsertReply handles an update that matched nothing: inserts when upsert is
// set, otherwise reports no match.
func (p *famPlan) upsertReply(c *collection, now time.Time) (bson.D, error) {
	if !p.upsert {
		return famReply(bson.D{{Key: "n", Value: int32(0)}, {Key: "updatedExisting", Value: false}}, nil), nil
	}
	id, doc, err := upsertInto(c, p.cu, now)
	if err != nil {
		return nil, err
	}
	var v any
	if p.returnNew {
		v = p.project(doc)
	}
	return famReply(bson.D{{Key: "n", Value: int32(1)}, {Key: "updatedExisting", Value: false}, {Key: "upserted", Value: id}}, v), nil
}

func famReply(lastError bson.D, v any) bson.D {
	if v == nil {
		v = bson.Null{}
	}
	return bson.D{{Key: "lastErrorObject", Value: lastError}, {Key: "value", Value: v}}
}
