package mongosim

import (
	"errors"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/query"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
	"github.com/sturdy-go/sturdy/wire"
)

// Writes on a sharded collection, as mongos splits them: each statement
// goes to the shard its shard key targets; multi-document updates and
// deletes without the key go to every shard; updateOne/deleteOne and
// findAndModify without it (allowed since mongos 7.0) try the shards in
// turn until one matches. Sub-batches carry stmtIds with the statements'
// places in the client's batch and the client's lsid/txnNumber, so a
// retried write replays on each shard; writeErrors keep the client's
// indexes.

// wop is one statement of a client write.
type wop struct {
	idx        int
	stmt       bson.D
	shard      int   // the one target, or -1
	targets    []int // every target of a broadcast statement
	firstMatch bool  // try targets in turn until one matches
	err        error // routing error, reported as the statement's writeError
}

// wresult accumulates the shards' write replies.
type wresult struct {
	n, nModified int64
	upserted     bson.A
	writeErrors  []bson.D
	shardNotes
}

// shardNotes gathers what a client's write reply carries from all the
// shards' replies: the first writeConcernError and every errorLabel
// (RetryableWriteError on a wce).
type shardNotes struct {
	wce    bson.D
	labels []string
}

// note takes the writeConcernError and errorLabels of a shard's reply.
func (sn *shardNotes) note(reply bson.D) {
	if v, ok := lookupD(reply, "writeConcernError"); ok && sn.wce == nil {
		sn.wce, _ = v.(bson.D)
	}
	if v, ok := lookupD(reply, "errorLabels"); ok {
		arr, _ := v.(bson.A)
		for _, x := range arr {
			if l, ok := x.(string); ok && !slices.Contains(sn.labels, l) {
				sn.labels = append(sn.labels, l)
			}
		}
	}
}

// finish ends a client's reply: the writeConcernError, ok and the labels.
func (sn *shardNotes) finish(d bson.D) bson.D {
	if sn.wce != nil {
		d = append(d, bson.E{Key: "writeConcernError", Value: sn.wce})
	}
	d = append(d, bson.E{Key: "ok", Value: 1.0})
	if len(sn.labels) > 0 {
		d = append(d, bson.E{Key: "errorLabels", Value: sn.labels})
	}
	return d
}

// hasKeyFields reports whether doc has every shard key field.
func (sc *shardedColl) hasKeyFields(doc bson.D) bool {
	for _, f := range sc.fields {
		var cur any = doc
		for _, p := range strings.Split(f, ".") {
			d, ok := cur.(bson.D)
			if !ok {
				return false
			}
			if cur, ok = value.Get(d, p); !ok {
				return false
			}
		}
	}
	return true
}

// isReplacement reports whether an update's u is a replacement document
// (no update operators, not a pipeline).
func isReplacement(u any) bool {
	d, ok := u.(bson.D)
	return ok && (len(d) == 0 || !strings.HasPrefix(d[0].Key, "$"))
}

func errUpsertNoKey() error {
	return cmderr.New(codeShardKeyNotFound, "Failed to target upsert by query :: could not extract exact shard key")
}

// shardedWrite runs an insert, update or delete on a sharded collection:
// target each statement, send the sub-batches, then (updates) move the
// documents whose shard key changed.
func (r *Router) shardedWrite(rq *request, sc *shardedColl) (bson.D, error) {
	field := map[string]string{"insert": "documents", "update": "updates", "delete": "deletes"}[rq.name]
	ops, err := targetWrites(rq, sc, field)
	if err != nil {
		return nil, err
	}
	ordered := true
	if v, ok := rq.get("ordered"); ok {
		ordered = asBool(v)
	}
	var res wresult
	if err := sendOps(ops, ordered, len(r.cluster.sharding.shards), writeSender{r, rq, field, &res}); err != nil {
		return nil, err
	}
	if !ordered {
		sortByInt(res.writeErrors, "index")
	}
	if rq.name == "update" {
		if err := r.resolveKeyChanges(rq, sc, ops, &res); err != nil {
			return nil, err
		}
	}
	return res.reply(rq.name), nil
}

// targetWrites reads the statements of an insert, update or delete (in
// field) and targets each.
func targetWrites(rq *request, sc *shardedColl, field string) ([]wop, error) {
	v, _ := rq.get(field)
	stmts, ok := v.(bson.A)
	if !ok {
		return nil, cmderr.New(cmderr.TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type 'array'", rq.name, field, typeNameOf(v))
	}
	ops := make([]wop, len(stmts))
	for i, x := range stmts {
		d, ok := x.(bson.D)
		if !ok {
			return nil, cmderr.New(cmderr.TypeMismatch, "BSON field '%s.%s.%d' is the wrong type '%s', expected type 'object'", rq.name, field, i, typeNameOf(x))
		}
		op := wop{idx: i, stmt: d, shard: -1}
		get := func(k string) any { v, _ := lookupD(d, k); return v }
		switch rq.name {
		case "insert":
			op.stmt, _ = withID(d)
			sc.targetDoc(&op, op.stmt)
		case "update":
			q, _ := get("q").(bson.D)
			sc.targetQuery(&op, q, get("u"), asBool(get("upsert")), asBool(get("multi")))
		case "delete":
			q, _ := get("q").(bson.D)
			n, _ := asInt64(get("limit"))
			sc.targetQuery(&op, q, nil, false, n == 0)
		}
		ops[i] = op
	}
	return ops, nil
}

// withID returns doc with an _id first when it has none (added): mongos
// adds it so that a retry sends the same document.
func withID(doc bson.D) (out bson.D, added bool) {
	if _, has := value.Get(doc, "_id"); has {
		return doc, false
	}
	return append(bson.D{{Key: "_id", Value: bson.NewObjectID()}}, doc...), true
}

// targetDoc targets an insert at the shard its document's key names.
func (sc *shardedColl) targetDoc(op *wop, doc bson.D) {
	if key, err := sc.keyOfDoc(doc); err != nil {
		op.err = err
	} else {
		op.shard = sc.shardFor(key)
	}
}

// targetQuery targets an update or delete by its filter. Without a
// target, an upsert cannot be routed, a multi write goes to every shard
// owning chunks and a single-document one tries them in turn.
func (sc *shardedColl) targetQuery(op *wop, filter bson.D, u any, upsert, multi bool) {
	t := sc.targetFilter(filter)
	if t < 0 && isReplacement(u) && sc.hasKeyFields(u.(bson.D)) {
		// A replacement keeps the shard key (it may not change): its own
		// full key names the document's shard.
		if key, err := sc.keyOfDoc(u.(bson.D)); err == nil {
			t = sc.shardFor(key)
		}
	}
	switch {
	case t >= 0:
		op.shard = t
	case upsert:
		op.err = errUpsertNoKey()
	case multi:
		op.targets = sc.owners()
	default:
		op.targets, op.firstMatch = sc.owners(), true
	}
}

// opSender is how a write path (shardedWrite, shardedBulkWrite) sends
// targeted statements and keeps their results; sendOps decides the order.
type opSender interface {
	// send sends batch to shard as one command; matched counts the
	// documents it matched.
	send(shard int, batch []*wop) (matched int64, err error)
	// routerError records a statement the router could not target.
	routerError(op *wop)
	// errorCount counts the statements that failed so far.
	errorCount() int
}

// sendOps sends targeted statements to their shards. Ordered, they go in
// order, a run of statements for one shard as one sub-batch, until one
// fails. Unordered, each shard gets one sub-batch, then the statements
// without a single target go out one by one.
func sendOps(ops []wop, ordered bool, shards int, s opSender) error {
	if !ordered {
		return sendUnordered(ops, shards, s)
	}
	for i := 0; i < len(ops); {
		op := &ops[i]
		before, next := s.errorCount(), i+1
		switch {
		case op.err != nil:
			s.routerError(op)
		case op.shard >= 0:
			var batch []*wop
			for next = i; next < len(ops) && ops[next].err == nil && ops[next].shard == op.shard; next++ {
				batch = append(batch, &ops[next])
			}
			if _, err := s.send(op.shard, batch); err != nil {
				return err
			}
		default:
			if err := sendSpread(op, s); err != nil {
				return err
			}
		}
		if s.errorCount() > before {
			return nil
		}
		i = next
	}
	return nil
}

// sendUnordered sends unordered statements: each shard's at once, then
// those that go to several shards.
func sendUnordered(ops []wop, shards int, s opSender) error {
	for shard := range shards {
		var batch []*wop
		for i := range ops {
			if ops[i].err == nil && ops[i].shard == shard {
				batch = append(batch, &ops[i])
			}
		}
		if len(batch) > 0 {
			if _, err := s.send(shard, batch); err != nil {
				return err
			}
		}
	}
	for i := range ops {
		switch op := &ops[i]; {
		case op.err != nil:
			s.routerError(op)
		case op.shard < 0:
			if err := sendSpread(op, s); err != nil {
				return err
			}
		}
	}
	return nil
}

// sendSpread sends a statement without a targetable shard key to its
// shards: all of them for a multi write, in turn until one matches for a
// single-document write; an error stops it.
func sendSpread(op *wop, s opSender) error {
	for _, shard := range op.targets {
		before := s.errorCount()
		n, err := s.send(shard, []*wop{op})
		if err != nil {
			return err
		}
		if s.errorCount() > before || (op.firstMatch && n > 0) {
			return nil
		}
	}
	return nil
}

// writeSender sends insert, update and delete sub-batches.
type writeSender struct {
	r     *Router
	rq    *request
	field string // the statements' field: documents, updates or deletes
	res   *wresult
}

func (w writeSender) send(shard int, batch []*wop) (int64, error) {
	return w.r.sendWrites(w.rq, w.field, shard, batch, w.res)
}

func (w writeSender) routerError(op *wop) { w.res.addError(op.idx, op.err) }

func (w writeSender) errorCount() int { return len(w.res.writeErrors) }

// sortByInt sorts docs (stably) by their integer field key.
func sortByInt(docs []bson.D, key string) {
	slices.SortStableFunc(docs, func(a, b bson.D) int {
		x, _ := lookupD(a, key)
		y, _ := lookupD(b, key)
		i, _ := asInt64(x)
		j, _ := asInt64(y)
		return int(i - j)
	})
}

func (res *wresult) addError(idx int, err error) {
	var ce *cmderr.Error
	if !errors.As(err, &ce) {
		ce = cmderr.New(codeInternalError, "%v", err)
	}
	res.writeErrors = append(res.writeErrors, bson.D{{Key: "index", Value: int32(idx)}, {Key: "code", Value: ce.Code}, {Key: "errmsg", Value: ce.Message}})
}

func (res *wresult) reply(name string) bson.D {
	d := bson.D{{Key: "n", Value: int32(res.n)}}
	if name == "update" {
		if len(res.upserted) > 0 {
			slices.SortStableFunc(res.upserted, func(a, b any) int {
				x, _ := lookupD(a.(bson.D), "index")
				y, _ := lookupD(b.(bson.D), "index")
				i, _ := asInt64(x)
				j, _ := asInt64(y)
				return int(i - j)
			})
			d = append(d, bson.E{Key: "upserted", Value: res.upserted})
		}
		d = append(d, bson.E{Key: "nModified", Value: int32(res.nModified)})
	}
	if len(res.writeErrors) > 0 {
		d = append(d, bson.E{Key: "writeErrors", Value: toArray(res.writeErrors)})
	}
	return res.finish(d)
}

// sendBatch sends batch to shard as rq's command without the fields
// drop, the statements in the document sequence seqID and, on a
// retryable write, their places in the client's batch as stmtIds so that
// a retry replays on the shard. A reply with ok 0 is a shardError.
func (r *Router) sendBatch(rq *request, shard int, seqID string, batch []*wop, drop ...string) (bson.D, error) {
	seq := wire.DocumentSequence{Identifier: seqID}
	ids := make(bson.A, len(batch))
	for i, op := range batch {
		raw, err := bson.Marshal(op.stmt)
		if err != nil {
			return nil, cmderr.New(cmderr.BadValue, "%v", err)
		}
		seq.Documents = append(seq.Documents, raw)
		ids[i] = int32(op.idx)
	}
	cmd := without(rq.cmd, drop...)
	_, hasTxn := rq.get("txnNumber")
	if hasTxn {
		cmd = append(cmd, bson.E{Key: "stmtIds", Value: ids})
	}
	reply, err := r.shardCmd(rq, shard, cmd, []wire.DocumentSequence{seq}, true, hasTxn)
	if err != nil {
		return nil, err
	}
	if !replyOK(reply) {
		return nil, &shardError{reply: reply}
	}
	return reply, nil
}

// sendWrites sends batch to shard as one write command and merges the
// reply into res, mapping indexes back to the client's batch; matched is
// the reply's n.
func (r *Router) sendWrites(rq *request, field string, shard int, batch []*wop, res *wresult) (int64, error) {
	reply, err := r.sendBatch(rq, shard, field, batch, field, "stmtIds")
	if err != nil {
		return 0, err
	}
	get := func(k string) int64 {
		v, _ := lookupD(reply, k)
		n, _ := asInt64(v)
		return n
	}
	n := get("n")
	res.n += n
	res.nModified += get("nModified")
	mapIdx := func(d bson.D) bson.D {
		v, _ := lookupD(d, "index")
		i, _ := asInt64(v)
		if i >= 0 && int(i) < len(batch) {
			d = setField(slices.Clone(d), "index", int32(batch[i].idx))
		}
		return d
	}
	if v, ok := lookupD(reply, "upserted"); ok {
		arr, _ := v.(bson.A)
		for _, x := range arr {
			d, _ := x.(bson.D)
			res.upserted = append(res.upserted, mapIdx(d))
		}
	}
	if v, ok := lookupD(reply, "writeErrors"); ok {
		arr, _ := v.(bson.A)
		for _, x := range arr {
			d, _ := x.(bson.D)
			res.writeErrors = append(res.writeErrors, mapIdx(d))
		}
	}
	res.note(reply)
	return n, nil
}

// shardedFindAndModify targets the shard key when the query fixes it;
// otherwise (mongos 7.0+) a sorted one picks the best match across the
// shards first, and an unsorted one tries the shards in turn.
func (r *Router) shardedFindAndModify(rq *request, cmd *command, out *outcome, sc *shardedColl) (bson.D, error) {
	q, _, err := docArg(rq, "query")
	if err != nil {
		return nil, err
	}
	if t := sc.targetFilter(q); t >= 0 {
		return r.forwardTo(rq, cmd, out, t)
	}
	if v, ok := rq.get("upsert"); ok && asBool(v) {
		return nil, errUpsertNoKey()
	}
	shards := sc.owners()
	sortDoc, _, err := docArg(rq, "sort")
	if err != nil {
		return nil, err
	}
	if len(sortDoc) > 0 {
		if reply, done, err := r.famSorted(rq, q, sortDoc, shards); done {
			return reply, err
		}
	}
	return r.famInTurn(rq, shards)
}

// famSorted runs a sorted findAndModify without the shard key on the
// shard with the best match, narrowed to that document's _id; done is
// false when no shard has a match. A retry of a retryable one goes where
// the first attempt went, with the same document, so the shard replays
// it (mongos keeps this in the write's history).
func (r *Router) famSorted(rq *request, q, sortDoc bson.D, shards []int) (reply bson.D, done bool, err error) {
	env, err := routerEnv(rq)
	if err != nil {
		return nil, true, err
	}
	sorter, err := compileSort(sortDoc, env)
	if err != nil {
		return nil, true, err
	}
	_, hasTxn := rq.get("txnNumber")
	lsid, _ := rq.get("lsid")
	tv, _ := rq.get("txnNumber")
	txn, _ := tv.(int64)
	retryable := hasTxn && lsid != nil
	ss := r.cluster.sharding
	if retryable {
		if pin, ok := ss.famPin(lsid); ok && pin.txnNumber == txn {
			reply, err := r.shardCmd(rq, pin.shard, withField(rq.cmd, "query", pin.query), nil, true, hasTxn)
			return reply, true, err
		}
	}
	best, bestShard, err := r.bestMatch(rq, q, sortDoc, sorter, shards)
	if err != nil || best == nil {
		return nil, err != nil, err
	}
	id, _ := value.Get(best, "_id")
	narrowed := bson.D{{Key: "$and", Value: bson.A{q, bson.D{{Key: "_id", Value: id}}}}}
	if retryable {
		ss.pinFam(lsid, famPin{txnNumber: txn, shard: bestShard, query: narrowed})
	}
	reply, err = r.shardCmd(rq, bestShard, withField(rq.cmd, "query", narrowed), nil, true, hasTxn)
	return reply, true, err
}

// bestMatch asks each shard for its first match of q in sort order and
// returns the first of those (nil: none) and its shard.
func (r *Router) bestMatch(rq *request, q, sortDoc bson.D, sorter *query.Sort, shards []int) (best bson.D, shard int, err error) {
	shard = -1
	for _, s := range shards {
		find := bson.D{{Key: "find", Value: rq.cmd[0].Value}, {Key: "filter", Value: q}, {Key: "sort", Value: sortDoc}, {Key: "limit", Value: int64(1)}, {Key: "$db", Value: rq.db}}
		if lsid, ok := rq.get("lsid"); ok {
			find = append(find, bson.E{Key: "lsid", Value: lsid})
		}
		docs, err := r.drain(rq, s, find)
		if err != nil {
			return nil, -1, err
		}
		if len(docs) > 0 && (best == nil || (sorter != nil && sorter.Compare(docs[0], best) < 0)) {
			best, shard = docs[0], s
		}
	}
	return best, shard, nil
}

// famInTurn sends the findAndModify to the shards in turn until one
// matches or fails; else the last reply.
func (r *Router) famInTurn(rq *request, shards []int) (bson.D, error) {
	_, hasTxn := rq.get("txnNumber")
	var last bson.D
	for _, s := range shards {
		reply, err := r.shardCmd(rq, s, rq.cmd, nil, true, hasTxn)
		if err != nil {
			return nil, err
		}
		if !replyOK(reply) {
			return reply, nil
		}
		last = reply
		le, _ := lookupD(reply, "lastErrorObject")
		led, _ := le.(bson.D)
		nv, _ := lookupD(led, "n")
		if n, _ := asInt64(nv); n > 0 {
			return reply, nil
		}
	}
	return last, nil
}

// famPin is where a retryable findAndModify without the shard key went.
type famPin struct {
	txnNumber int64
	shard     int
	query     bson.D
}

// famPin returns the pin of the session lsid's last findAndModify.
func (ss *shardSet) famPin(lsid any) (famPin, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	pin, ok := ss.famPins[value.Key(lsid)]
	return pin, ok
}

// pinFam records where the session lsid's findAndModify went.
func (ss *shardSet) pinFam(lsid any, pin famPin) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.famPins == nil {
		ss.famPins = map[string]famPin{}
	}
	ss.famPins[value.Key(lsid)] = pin
}

// --- chunk management ---

// chunkNS reads a chunk command's namespace and its sharded collection.
func (r *Router) chunkNS(rq *request) (*shardedColl, error) {
	if rq.db != "admin" {
		return nil, cmderr.New(cmderr.Unauthorized, "%s may only be run against the admin database.", rq.name)
	}
	ns, _ := rq.cmd[0].Value.(string)
	sc := r.cluster.sharding.coll(ns)
	if sc == nil {
		return nil, cmderr.New(codeNamespaceNotSharded, "%s is not sharded", ns)
	}
	return sc, nil
}

// splitChunk splits the chunk holding middle (a shard key document; with
// a hashed key, the hash value) at middle.
func (r *Router) splitChunk(rq *request) (bson.D, error) {
	sc, err := r.chunkNS(rq)
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"find", "bounds"} {
		if _, ok := rq.get(k); ok {
			return nil, cmderr.Unsupported("split with " + k + " (use middle)")
		}
	}
	mid, _, err := docArg(rq, "middle")
	if err != nil || len(mid) != len(sc.fields) {
		return nil, cmderr.New(cmderr.BadValue, "split requires 'middle', a document with the shard key fields %s", shellString(sc.key))
	}
	key := make(bson.D, len(sc.fields))
	for i, f := range sc.fields {
		v, ok := value.Get(mid, f)
		if !ok {
			return nil, cmderr.New(cmderr.BadValue, "split key %s does not match the shard key %s", shellString(mid), shellString(sc.key))
		}
		key[i] = bson.E{Key: f, Value: v}
	}
	ss := r.cluster.sharding
	ss.mu.Lock()
	defer ss.mu.Unlock()
	i := chunkIndex(sc.chunkList(), key)
	if i < 0 {
		return nil, cmderr.New(cmderr.BadValue, "split key %s is not in any chunk", shellString(mid))
	}
	ch := sc.chunkList()[i]
	if compareKeys(key, ch.min) == 0 {
		return nil, cmderr.New(cmderr.BadValue, "cannot split on initial or final chunk's key")
	}
	chunks := slices.Clone(sc.chunkList())
	chunks[i].max = key
	chunks = slices.Insert(chunks, i+1, chunk{min: key, max: ch.max, shard: ch.shard, version: ch.version + 1})
	chunks[i].version++
	sc.chunks.Store(&chunks)
	return bson.D{{Key: "ok", Value: 1.0}}, nil
}

// moveChunk moves a chunk (found by find: a document's shard key, or
// bounds: its [min, max]) to shard "to", copying its documents there and
// deleting them from the donor. It does not block concurrent writes to
// the chunk, which may be lost.
func (r *Router) moveChunk(rq *request) (bson.D, error) {
	sc, err := r.chunkNS(rq)
	if err != nil {
		return nil, err
	}
	ss := r.cluster.sharding
	tov, _ := rq.get("to")
	toName, _ := tov.(string)
	to := slices.Index(ss.names, toName)
	if to < 0 {
		return nil, cmderr.New(codeShardNotFound, "Shard %s not found", toName)
	}
	key, err := moveChunkKey(rq, sc)
	if err != nil {
		return nil, err
	}
	ss.mu.Lock()
	idx := chunkIndex(sc.chunkList(), key)
	if idx < 0 {
		ss.mu.Unlock()
		return nil, cmderr.New(cmderr.BadValue, "no chunk holds %s", shellString(key))
	}
	ch := sc.chunkList()[idx]
	ss.mu.Unlock()
	if ch.shard == to {
		return bson.D{{Key: "millis", Value: int32(0)}, {Key: "ok", Value: 1.0}}, nil
	}
	if err := r.migrate(rq, sc, ch, to); err != nil {
		return nil, err
	}
	ss.mu.Lock()
	chunks := slices.Clone(sc.chunkList())
	chunks[idx].shard = to
	chunks[idx].version++
	sc.chunks.Store(&chunks)
	ss.mu.Unlock()
	return bson.D{{Key: "millis", Value: int32(0)}, {Key: "ok", Value: 1.0}}, nil
}

// moveChunkKey reads the shard key moveChunk names the chunk by.
func moveChunkKey(rq *request, sc *shardedColl) (bson.D, error) {
	if find, ok, _ := docArg(rq, "find"); ok {
		return sc.keyOfDoc(find)
	}
	bv, ok := rq.get("bounds")
	if !ok {
		return nil, cmderr.New(cmderr.BadValue, "moveChunk requires find or bounds")
	}
	b, _ := bv.(bson.A)
	if len(b) != 2 {
		return nil, cmderr.New(cmderr.BadValue, "bounds must be [min, max]")
	}
	key, _ := b[0].(bson.D)
	return key, nil
}

// chunkIndex returns the index of the chunk holding key, or -1.
func chunkIndex(chunks []chunk, key bson.D) int {
	for i, ch := range chunks {
		if compareKeys(key, ch.min) >= 0 && compareKeys(key, ch.max) < 0 {
			return i
		}
	}
	return -1
}

// migrate copies the documents of chunk ch to shard to and deletes them
// from the donor.
func (r *Router) migrate(rq *request, sc *shardedColl, ch chunk, to int) error {
	db, coll, _ := strings.Cut(sc.ns, ".")
	docs, err := r.drain(rq, ch.shard, bson.D{{Key: "find", Value: coll}, {Key: "$db", Value: db}})
	if err != nil {
		return err
	}
	var moving []bson.D
	ids := bson.A{}
	for _, d := range docs {
		k, err := sc.keyOfDoc(d)
		if err != nil || compareKeys(k, ch.min) < 0 || compareKeys(k, ch.max) >= 0 {
			continue
		}
		moving = append(moving, d)
		id, _ := value.Get(d, "_id")
		ids = append(ids, id)
	}
	if len(moving) == 0 {
		return nil
	}
	ins := bson.D{{Key: "insert", Value: coll}, {Key: "documents", Value: toArray(moving)}, {Key: "$db", Value: db}}
	if _, err := r.forEachShard(rq, []int{to}, ins, true, true); err != nil {
		return err
	}
	del := bson.D{{Key: "delete", Value: coll}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}}}, {Key: "limit", Value: int32(0)}}}}, {Key: "$db", Value: db}}
	_, err = r.forEachShard(rq, []int{ch.shard}, del, true, true)
	return err
}
