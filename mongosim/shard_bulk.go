package mongosim

import (
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// The client-level bulkWrite on several shards: each op is targeted as
// shardedWrite targets a statement (unsharded namespaces: their database's
// primary shard), sub-batches keep the whole nsInfo and carry stmtIds, and
// the shards' per-op results come back with the client's op indexes.

// bwResult accumulates the shards' bulkWrite replies.
type bwResult struct {
	counts  [6]int32 // nErrors, nInserted, nMatched, nModified, nUpserted, nDeleted
	results []bson.D
	shardNotes
}

var bwCountKeys = [6]string{"nErrors", "nInserted", "nMatched", "nModified", "nUpserted", "nDeleted"}

// shardedBulkWrite runs a client bulkWrite through the router: target each
// op, send the sub-batches, then merge the per-op results into one cursor.
func (r *Router) shardedBulkWrite(rq *request) (bson.D, error) {
	ops, err := r.targetBulkOps(rq)
	if err != nil {
		return nil, err
	}
	ordered := true
	if v, ok := rq.get("ordered"); ok {
		ordered = asBool(v)
	}
	var res bwResult
	if err := sendOps(ops, ordered, len(r.cluster.sharding.shards), bulkSender{r, rq, &res}); err != nil {
		return nil, err
	}
	res.mergeByOp()
	sortByInt(res.results, "idx")
	if v, ok := rq.get("errorsOnly"); ok && truthy(v) {
		res.results = slices.DeleteFunc(res.results, func(d bson.D) bool { v, _ := lookupD(d, "ok"); return asBool(v) })
	}
	return r.bulkReply(rq, &res), nil
}

// bulkNamespaces reads nsInfo: each namespace's sharded collection (nil:
// unsharded) and its database's primary shard.
func (r *Router) bulkNamespaces(rq *request) (colls []*shardedColl, primaries []int) {
	ss := r.cluster.sharding
	nsv, _ := rq.get("nsInfo")
	nsList, _ := nsv.(bson.A)
	colls = make([]*shardedColl, len(nsList))
	primaries = make([]int, len(nsList))
	for i, x := range nsList {
		d, _ := x.(bson.D)
		v, _ := lookupD(d, "ns")
		ns, _ := v.(string)
		db, _, _ := strings.Cut(ns, ".")
		colls[i] = ss.coll(ns)
		primaries[i] = ss.primaryOf(db, true)
	}
	return colls, primaries
}

// targetBulkOps reads the ops and targets each as shardedWrite targets a
// statement; an op on an unsharded namespace goes to its primary shard.
func (r *Router) targetBulkOps(rq *request) ([]wop, error) {
	colls, primaries := r.bulkNamespaces(rq)
	opsv, _ := rq.get("ops")
	opsArr, ok := opsv.(bson.A)
	if !ok {
		return nil, cmderr.New(cmderr.TypeMismatch, "BSON field 'bulkWrite.ops' is the wrong type '%s', expected type 'array'", typeNameOf(opsv))
	}
	ops := make([]wop, len(opsArr))
	for i, x := range opsArr {
		d, ok := x.(bson.D)
		if !ok || len(d) == 0 {
			return nil, cmderr.New(cmderr.TypeMismatch, "BSON field 'bulkWrite.ops.%d' is the wrong type '%s', expected type 'object'", i, typeNameOf(x))
		}
		op := wop{idx: i, stmt: d, shard: -1}
		nsIdx, _ := asInt64(d[0].Value)
		if nsIdx < 0 || int(nsIdx) >= len(colls) {
			return nil, cmderr.New(cmderr.BadValue, "BulkWrite ops entry %d has an invalid nsInfo index %d", i, nsIdx)
		}
		sc := colls[nsIdx]
		get := func(k string) any { v, _ := lookupD(d, k); return v }
		switch {
		case sc == nil:
			op.shard = primaries[nsIdx]
		case d[0].Key == "insert":
			doc, _ := get("document").(bson.D)
			if full, added := withID(doc); added {
				doc, op.stmt = full, withField(d, "document", full)
			}
			sc.targetDoc(&op, doc)
		case d[0].Key == "update" || d[0].Key == "delete":
			filter, _ := get("filter").(bson.D)
			sc.targetQuery(&op, filter, get("updateMods"), asBool(get("upsert")), asBool(get("multi")))
		default:
			return nil, cmderr.New(cmderr.FailedToParse, "Unrecognized bulkWrite op %q", d[0].Key)
		}
		ops[i] = op
	}
	return ops, nil
}

// bulkSender sends bulkWrite sub-batches.
type bulkSender struct {
	r   *Router
	rq  *request
	res *bwResult
}

// send reports as matched the documents the sub-batch matched or deleted.
func (b bulkSender) send(shard int, batch []*wop) (int64, error) {
	before := b.res.counts
	err := b.r.sendBulkOps(b.rq, shard, batch, b.res)
	return int64(b.res.counts[2] + b.res.counts[5] - before[2] - before[5]), err
}

// routerError records an op the router could not target as its result.
func (b bulkSender) routerError(op *wop) {
	e, _ := op.err.(*cmderr.Error)
	if e == nil {
		e = cmderr.New(codeInternalError, "%v", op.err)
	}
	b.res.counts[0]++
	b.res.results = append(b.res.results, bson.D{{Key: "ok", Value: 0.0}, {Key: "idx", Value: int32(op.idx)},
		{Key: "code", Value: e.Code}, {Key: "errmsg", Value: e.Message}, {Key: "codeName", Value: cmderr.Name(e.Code)}, {Key: "n", Value: int32(0)}})
}

func (b bulkSender) errorCount() int { return int(b.res.counts[0]) }

// bulkReply is the client's reply: the results as a cursor (of the
// client's batchSize; by default all in the first batch), then the counts.
func (r *Router) bulkReply(rq *request, res *bwResult) bson.D {
	batchSize := routerBatchSize(rq)
	if batchSize < 0 {
		batchSize = 1 << 30
	}
	reply := r.cursorReply("admin.$cmd.bulkWrite", res.results, batchSize, false)
	reply = deleteField(reply, "ok")
	for i, k := range bwCountKeys {
		reply = append(reply, bson.E{Key: k, Value: res.counts[i]})
	}
	return res.finish(reply)
}

// sendBulkOps sends batch to shard as one bulkWrite (all of nsInfo, the
// batch's ops, their stmtIds) and merges its results.
func (r *Router) sendBulkOps(rq *request, shard int, batch []*wop, res *bwResult) error {
	// Every result comes back (errorsOnly is applied by the router) in one
	// batch unless it is very large.
	reply, err := r.sendBatch(rq, shard, "ops", batch, "ops", "stmtIds", "errorsOnly", "cursor")
	if err != nil {
		return err
	}
	for i, k := range bwCountKeys {
		v, _ := lookupD(reply, k)
		n, _ := asInt64(v)
		res.counts[i] += int32(n)
	}
	res.note(reply)
	return r.readCursor(rq, shard, reply, "admin", "$cmd.bulkWrite", func(d bson.D) {
		v, _ := lookupD(d, "idx")
		if i, _ := asInt64(v); i >= 0 && int(i) < len(batch) {
			d = setField(slices.Clone(d), "idx", int32(batch[i].idx))
		}
		res.results = append(res.results, d)
	})
}

// mergeByOp folds the results of one op sent to several shards into one:
// n and nModified add up, an error wins; nErrors counts the ops that
// failed.
func (res *bwResult) mergeByOp() {
	byIdx := map[int64]int{}
	var out []bson.D
	num := func(d bson.D, k string) int64 { v, _ := lookupD(d, k); n, _ := asInt64(v); return n }
	for _, item := range res.results {
		idx := num(item, "idx")
		at, seen := byIdx[idx]
		if !seen {
			byIdx[idx] = len(out)
			out = append(out, item)
			continue
		}
		prev := out[at]
		n := num(prev, "n") + num(item, "n")
		okPrev, _ := lookupD(prev, "ok")
		okItem, _ := lookupD(item, "ok")
		merged := prev
		if asBool(okPrev) && !asBool(okItem) {
			merged = slices.Clone(item)
		} else if asBool(okPrev) {
			merged = slices.Clone(prev)
			if _, ok := lookupD(prev, "nModified"); ok {
				merged = setField(merged, "nModified", int32(num(prev, "nModified")+num(item, "nModified")))
			}
			if up, ok := lookupD(item, "upserted"); ok {
				merged = setField(merged, "upserted", up)
			}
		}
		out[at] = setField(merged, "n", int32(n))
	}
	res.results = out
	res.counts[0] = 0
	for _, item := range out {
		if v, _ := lookupD(item, "ok"); !asBool(v) {
			res.counts[0]++
		}
	}
}
