package mongosim

import (
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
	"github.com/sturdy-go/sturdy/wire"
)

// The client-level bulkWrite on several shards: each op is targeted as
// shardedWrite targets a statement (unsharded namespaces: their database's
// primary shard), sub-batches keep the whole nsInfo and carry stmtIds, and
// the shards' per-op results come back with the client's op indexes.

// bwResult accumulates the shards' bulkWrite replies.
type bwResult struct {
	counts  [6]int32 // nErrors, nInserted, nMatched, nModified, nUpserted, nDeleted
	results []bson.D
	wce     bson.D
	labels  []string
}

var bwCountKeys = [6]string{"nErrors", "nInserted", "nMatched", "nModified", "nUpserted", "nDeleted"}

func (r *Router) shardedBulkWrite(rq *request) (bson.D, error) {
	ss := r.cluster.sharding
	nsv, _ := rq.get("nsInfo")
	nsList, _ := nsv.(bson.A)
	colls := make([]*shardedColl, len(nsList))
	primaries := make([]int, len(nsList))
	for i, x := range nsList {
		d, _ := x.(bson.D)
		v, _ := lookupD(d, "ns")
		ns, _ := v.(string)
		db, _, _ := strings.Cut(ns, ".")
		colls[i] = ss.coll(ns)
		primaries[i] = ss.primaryOf(db, true)
	}
	opsv, _ := rq.get("ops")
	opsArr, ok := opsv.(bson.A)
	if !ok {
		return nil, cmderr.New(cmderr.TypeMismatch, "BSON field 'bulkWrite.ops' is the wrong type '%s', expected type 'array'", typeNameOf(opsv))
	}
	ordered := true
	if v, ok := rq.get("ordered"); ok {
		ordered = asBool(v)
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
		filter, _ := get("filter").(bson.D)
		switch {
		case sc == nil:
			op.shard = primaries[nsIdx]
		case d[0].Key == "insert":
			doc, _ := get("document").(bson.D)
			if _, has := value.Get(doc, "_id"); !has {
				doc = append(bson.D{{Key: "_id", Value: bson.NewObjectID()}}, doc...)
				op.stmt = withField(d, "document", doc)
			}
			if key, err := sc.keyOfDoc(doc); err != nil {
				op.err = err
			} else {
				op.shard = sc.shardFor(key)
			}
		case d[0].Key == "update" || d[0].Key == "delete":
			t := sc.targetFilter(filter)
			if u := get("updateMods"); t < 0 && isReplacement(u) && sc.hasKeyFields(u.(bson.D)) {
				if key, err := sc.keyOfDoc(u.(bson.D)); err == nil {
					t = sc.shardFor(key)
				}
			}
			switch {
			case t >= 0:
				op.shard = t
			case asBool(get("upsert")):
				op.err = errUpsertNoKey()
			case asBool(get("multi")):
				op.targets = sc.owners()
			default:
				op.targets, op.firstMatch = sc.owners(), true
			}
		default:
			return nil, cmderr.New(cmderr.FailedToParse, "Unrecognized bulkWrite op %q", d[0].Key)
		}
		ops[i] = op
	}
	var res bwResult
	routerErr := func(op *wop) {
		e, _ := op.err.(*cmderr.Error)
		if e == nil {
			e = cmderr.New(codeInternalError, "%v", op.err)
		}
		res.counts[0]++
		res.results = append(res.results, bson.D{{Key: "ok", Value: 0.0}, {Key: "idx", Value: int32(op.idx)},
			{Key: "code", Value: e.Code}, {Key: "errmsg", Value: e.Message}, {Key: "codeName", Value: cmderr.Name(e.Code)}, {Key: "n", Value: int32(0)}})
	}
	spread := func(op *wop) error {
		for _, s := range op.targets {
			before := res.counts
			if err := r.sendBulkOps(rq, s, []*wop{op}, &res); err != nil {
				return err
			}
			if res.counts[0] > before[0] || (op.firstMatch && res.counts[2]+res.counts[5] > before[2]+before[5]) {
				return nil
			}
		}
		return nil
	}
	if ordered {
		for i := 0; i < len(ops); {
			op := &ops[i]
			errorsBefore := res.counts[0]
			switch {
			case op.err != nil:
				routerErr(op)
				i++
			case op.shard >= 0:
				j := i
				var batch []*wop
				for j < len(ops) && ops[j].err == nil && ops[j].shard == op.shard {
					batch = append(batch, &ops[j])
					j++
				}
				if err := r.sendBulkOps(rq, op.shard, batch, &res); err != nil {
					return nil, err
				}
				i = j
			default:
				if err := spread(op); err != nil {
					return nil, err
				}
				i++
			}
			if res.counts[0] > errorsBefore {
				break
			}
		}
	} else {
		for s := range ss.shards {
			var batch []*wop
			for i := range ops {
				if ops[i].err == nil && ops[i].shard == s {
					batch = append(batch, &ops[i])
				}
			}
			if len(batch) > 0 {
				if err := r.sendBulkOps(rq, s, batch, &res); err != nil {
					return nil, err
				}
			}
		}
		for i := range ops {
			switch op := &ops[i]; {
			case op.err != nil:
				routerErr(op)
			case op.shard < 0:
				if err := spread(op); err != nil {
					return nil, err
				}
			}
		}
	}
	res.mergeByOp()
	slices.SortStableFunc(res.results, func(a, b bson.D) int {
		x, _ := lookupD(a, "idx")
		y, _ := lookupD(b, "idx")
		i, _ := asInt64(x)
		j, _ := asInt64(y)
		return int(i - j)
	})
	if v, ok := rq.get("errorsOnly"); ok && truthy(v) {
		res.results = slices.DeleteFunc(res.results, func(d bson.D) bool { v, _ := lookupD(d, "ok"); return asBool(v) })
	}
	batchSize := -1
	if cv, ok := rq.get("cursor"); ok {
		if d, ok := cv.(bson.D); ok {
			if v, ok := lookupD(d, "batchSize"); ok {
				if n, ok := asInt64(v); ok && n >= 0 {
					batchSize = int(n)
				}
			}
		}
	}
	if batchSize < 0 {
		batchSize = 1 << 30
	}
	reply := r.cursorReply("admin.$cmd.bulkWrite", res.results, batchSize, false)
	reply = deleteField(reply, "ok")
	for i, k := range bwCountKeys {
		reply = append(reply, bson.E{Key: k, Value: res.counts[i]})
	}
	if res.wce != nil {
		reply = append(reply, bson.E{Key: "writeConcernError", Value: res.wce})
	}
	reply = append(reply, bson.E{Key: "ok", Value: 1.0})
	if len(res.labels) > 0 {
		reply = append(reply, bson.E{Key: "errorLabels", Value: res.labels})
	}
	return reply, nil
}

// sendBulkOps sends batch to shard as one bulkWrite (all of nsInfo, the
// batch's ops, their stmtIds) and merges its results.
func (r *Router) sendBulkOps(rq *request, shard int, batch []*wop, res *bwResult) error {
	seq := wire.DocumentSequence{Identifier: "ops"}
	ids := make(bson.A, len(batch))
	for i, op := range batch {
		raw, err := bson.Marshal(op.stmt)
		if err != nil {
			return cmderr.New(cmderr.BadValue, "%v", err)
		}
		seq.Documents = append(seq.Documents, raw)
		ids[i] = int32(op.idx)
	}
	// Every result comes back (errorsOnly is applied by the router) in one
	// batch unless it is very large.
	cmd := without(rq.cmd, "ops", "stmtIds", "errorsOnly", "cursor")
	_, hasTxn := rq.get("txnNumber")
	if hasTxn {
		cmd = append(cmd, bson.E{Key: "stmtIds", Value: ids})
	}
	reply, err := r.shardCmd(rq, shard, cmd, []wire.DocumentSequence{seq}, true, hasTxn)
	if err != nil {
		return err
	}
	if !replyOK(reply) {
		return &shardError{reply: reply}
	}
	for i, k := range bwCountKeys {
		v, _ := lookupD(reply, k)
		n, _ := asInt64(v)
		res.counts[i] += int32(n)
	}
	if v, ok := lookupD(reply, "writeConcernError"); ok && res.wce == nil {
		res.wce, _ = v.(bson.D)
	}
	if v, ok := lookupD(reply, "errorLabels"); ok {
		arr, _ := v.(bson.A)
		for _, x := range arr {
			if l, ok := x.(string); ok && !slices.Contains(res.labels, l) {
				res.labels = append(res.labels, l)
			}
		}
	}
	key := "firstBatch"
	for {
		cv, _ := lookupD(reply, "cursor")
		cur, _ := cv.(bson.D)
		bv, _ := lookupD(cur, key)
		items, _ := bv.(bson.A)
		for _, x := range items {
			d, _ := x.(bson.D)
			v, _ := lookupD(d, "idx")
			i, _ := asInt64(v)
			if i >= 0 && int(i) < len(batch) {
				d = setField(slices.Clone(d), "idx", int32(batch[i].idx))
			}
			res.results = append(res.results, d)
		}
		idv, _ := lookupD(cur, "id")
		id, _ := asInt64(idv)
		if id == 0 {
			return nil
		}
		gm := bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "$cmd.bulkWrite"}, {Key: "$db", Value: "admin"}}
		if lsid, ok := rq.get("lsid"); ok {
			gm = append(gm, bson.E{Key: "lsid", Value: lsid})
		}
		if reply, err = r.shardCmd(rq, shard, gm, nil, false, false); err != nil {
			return err
		}
		if !replyOK(reply) {
			return &shardError{reply: reply}
		}
		key = "nextBatch"
	}
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
