package mongosim

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// Change streams over several shards, as mongos merges them: a database's,
// the whole cluster's, or a sharded collection's stream opens the stream
// on every shard and returns the events merged by cluster time. The
// shards share one cluster clock (as gossip keeps a real cluster's in
// step), so event times are comparable; the router returns an event only
// once every shard has been read past its time (the time read before
// polling them), so a later poll can never bring an earlier event.
//
// A merged stream's resume token names a position on every shard
// ({_data: "83" + one 16-digit hex position per shard}): resuming
// (resumeAfter or startAfter) opens each shard's stream after its
// position, so the tokens stay valid across shard primary step-downs (a
// shard's change log outlives its primary, as the oplog does).

// mergedStream is the state of a router's merged change stream cursor.
type mergedStream struct {
	mu      sync.Mutex
	shards  []int
	cursors []int64    // each shard's cursor id; 0 once it ended
	shardNS []string   // each shard cursor's namespace
	pending [][]bson.D // events read from each shard, not yet returned
	emitted []uint64   // each shard's position of the last event returned
}

// mergedToken encodes positions as a merged stream's resume token.
func mergedToken(pos []uint64) bson.D {
	s := "83"
	for _, p := range pos {
		s += fmt.Sprintf("%016X", p)
	}
	return bson.D{{Key: "_data", Value: s}}
}

// parseMergedToken decodes a merged stream's token for n shards; ok is
// false for any other token.
func parseMergedToken(v any, n int) ([]uint64, bool) {
	d, _ := v.(bson.D)
	data, _ := lookupD(d, "_data")
	s, _ := data.(string)
	if len(s) != 2+16*n || s[:2] != "83" {
		return nil, false
	}
	out := make([]uint64, n)
	for i := range out {
		p, err := strconv.ParseUint(s[2+16*i:2+16*(i+1)], 16, 64)
		if err != nil {
			return nil, false
		}
		out[i] = p
	}
	return out, true
}

// tokenSeq is the log position a shard's event or resume token names.
func tokenSeq(v any) uint64 {
	seq, _, _, err := parseResumeToken(v)
	if err != nil {
		return 0
	}
	return seq
}

// openMergedStream answers an aggregate whose pipeline starts with
// $changeStream by opening it on every shard.
func (r *Router) openMergedStream(rq *request) (bson.D, error) {
	ss := r.cluster.sharding
	pipeline := pipelineOf(rq)
	first, _ := pipeline[0].(bson.D)
	opts, _ := first[0].Value.(bson.D)
	shards := allShards(len(ss.shards))
	var resume []uint64
	for _, k := range []string{"resumeAfter", "startAfter"} {
		if v, ok := lookupD(opts, k); ok {
			pos, ok := parseMergedToken(v, len(shards))
			if !ok {
				return nil, cmderr.New(codeInvalidResumeToken, "the resume token was not made by this cluster's merged change stream")
			}
			resume = pos
			opts = without(opts, k)
		}
	}
	ms := &mergedStream{shards: shards, cursors: make([]int64, len(shards)), shardNS: make([]string, len(shards)),
		pending: make([][]bson.D, len(shards)), emitted: make([]uint64, len(shards))}
	cut := ss.shards[0].data.clusterClock.current()
	var ns string
	for i, s := range shards {
		o := opts
		if resume != nil {
			o = append(slices.Clone(opts), bson.E{Key: "resumeAfter", Value: resumeToken(resume[i])})
		}
		p := append(bson.A{bson.D{{Key: "$changeStream", Value: o}}}, pipeline[1:]...)
		reply, err := r.shardCmd(rq, s, withField(rq.cmd, "pipeline", p), nil, false, true)
		if err != nil {
			return nil, err
		}
		if !replyOK(reply) {
			return nil, &shardError{reply: reply}
		}
		id, shardNS, batch, pbrt := cursorParts(reply, "firstBatch")
		ms.cursors[i], ms.shardNS[i], ms.pending[i] = id, shardNS, batch
		switch {
		case resume != nil:
			ms.emitted[i] = resume[i]
		case len(batch) > 0:
			id, _ := lookupD(batch[0], "_id")
			ms.emitted[i] = tokenSeq(id) - 1
		default:
			ms.emitted[i] = tokenSeq(pbrt)
		}
		if ns == "" {
			ns = shardNS
		}
	}
	out := ms.emit(cut)
	id := r.openStreamCursor(ns, ms)
	return bson.D{{Key: "cursor", Value: bson.D{
		{Key: "firstBatch", Value: toArray(out)},
		{Key: "postBatchResumeToken", Value: ms.token()},
		{Key: "id", Value: id},
		{Key: "ns", Value: ns},
	}}, {Key: "ok", Value: 1.0}}, nil
}

// cursorParts reads a shard's cursor reply.
func cursorParts(reply bson.D, key string) (id int64, ns string, batch []bson.D, pbrt any) {
	cv, _ := lookupD(reply, "cursor")
	cur, _ := cv.(bson.D)
	idv, _ := lookupD(cur, "id")
	id, _ = asInt64(idv)
	nsv, _ := lookupD(cur, "ns")
	ns, _ = nsv.(string)
	bv, _ := lookupD(cur, key)
	arr, _ := bv.(bson.A)
	for _, x := range arr {
		if d, ok := x.(bson.D); ok {
			batch = append(batch, d)
		}
	}
	pbrt, _ = lookupD(cur, "postBatchResumeToken")
	return id, ns, batch, pbrt
}

// emit returns, in cluster time order, the pending events at or before
// cut, each with the merged token of the positions after it.
func (ms *mergedStream) emit(cut bson.Timestamp) []bson.D {
	type ev struct {
		shard int
		at    bson.Timestamp
		doc   bson.D
	}
	var ready []ev
	for i, p := range ms.pending {
		k := 0
		for k < len(p) {
			at, _ := lookupD(p[k], "clusterTime")
			ts, _ := at.(bson.Timestamp)
			if cut.Before(ts) {
				break
			}
			ready = append(ready, ev{i, ts, p[k]})
			k++
		}
		ms.pending[i] = p[k:]
	}
	slices.SortStableFunc(ready, func(a, b ev) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.shard - b.shard
	})
	out := make([]bson.D, len(ready))
	for n, e := range ready {
		id, _ := lookupD(e.doc, "_id")
		ms.emitted[e.shard] = tokenSeq(id)
		out[n] = setField(slices.Clone(e.doc), "_id", mergedToken(ms.emitted))
	}
	return out
}

// token is the postBatchResumeToken: the positions returned so far.
func (ms *mergedStream) token() bson.D { return mergedToken(ms.emitted) }

func (r *Router) openStreamCursor(ns string, ms *mergedStream) int64 {
	return r.registerCursor(&routerCursor{router: r.index, shard: -1, ns: ns, stream: ms})
}

// streamGetMore reads each shard's stream and returns the events every
// shard has been read past, waiting up to maxTimeMS (one second by
// default) for one.
func (r *Router) streamGetMore(rq *request, id int64, c *routerCursor) (bson.D, error) {
	ms := c.stream
	ms.mu.Lock()
	defer ms.mu.Unlock()
	ss := r.cluster.sharding
	wait := defaultAwait
	if v, ok := rq.get("maxTimeMS"); ok {
		if n, ok := asInt64(v); ok {
			wait = time.Duration(n) * time.Millisecond
		}
	}
	ctx, cancel := context.WithTimeout(rq.ctx, wait)
	defer cancel()
	var out []bson.D
	for {
		wakes := make([]reflect.SelectCase, 0, len(ms.shards)+1)
		wakes = append(wakes, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())})
		for _, s := range ms.shards {
			_, wake := ss.shards[s].data.changes.head()
			wakes = append(wakes, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(wake)})
		}
		cut := ss.shards[0].data.clusterClock.current()
		if err := ms.poll(r, rq); err != nil {
			return nil, err
		}
		out = ms.emit(cut)
		if len(out) > 0 || ms.ended() || ctx.Err() != nil {
			break
		}
		if ms.hasPending() {
			continue // events past the cut: every shard is read past them now
		}
		reflect.Select(wakes)
	}
	next := id
	if ms.ended() {
		r.dropCursor(id)
		next = 0
	}
	return bson.D{{Key: "cursor", Value: bson.D{
		{Key: "nextBatch", Value: toArray(out)},
		{Key: "postBatchResumeToken", Value: ms.token()},
		{Key: "id", Value: next},
		{Key: "ns", Value: c.ns},
	}}, {Key: "ok", Value: 1.0}}, nil
}

// poll reads what each open shard stream has, without waiting.
func (ms *mergedStream) poll(r *Router, rq *request) error {
	for i, s := range ms.shards {
		if ms.cursors[i] == 0 {
			continue
		}
		db, coll := splitNS(ms.shardNS[i])
		gm := bson.D{{Key: "getMore", Value: ms.cursors[i]}, {Key: "collection", Value: coll}, {Key: "maxTimeMS", Value: int64(1)}, {Key: "$db", Value: db}}
		if lsid, ok := rq.get("lsid"); ok {
			gm = append(gm, bson.E{Key: "lsid", Value: lsid})
		}
		reply, err := r.shardCmd(rq, s, gm, nil, false, true)
		if err != nil {
			return err
		}
		if !replyOK(reply) {
			return &shardError{reply: reply}
		}
		id, _, batch, _ := cursorParts(reply, "nextBatch")
		ms.cursors[i] = id
		ms.pending[i] = append(ms.pending[i], batch...)
	}
	return nil
}

func (ms *mergedStream) ended() bool {
	for i, id := range ms.cursors {
		if id != 0 || len(ms.pending[i]) > 0 {
			return false
		}
	}
	return true
}

func (ms *mergedStream) hasPending() bool {
	for _, p := range ms.pending {
		if len(p) > 0 {
			return true
		}
	}
	return false
}

func splitNS(ns string) (db, coll string) {
	for i := 0; i < len(ns); i++ {
		if ns[i] == '.' {
			return ns[:i], ns[i+1:]
		}
	}
	return ns, ""
}
