package mongosim

import (
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/agg"
	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/query"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// Reads on a multi-shard deployment. A read that targets one shard is
// relayed as is; a broadcast read gathers each shard's whole result and
// the router finishes it (sort, skip, limit, projection, the rest of a
// pipeline) and holds the merged result in its own cursor.

// routeShardedColl answers a command on a sharded collection.
func (r *Router) routeShardedColl(rq *request, cmd *command, out *outcome, sc *shardedColl) (bson.D, error) {
	ss := r.cluster.sharding
	switch rq.name {
	case "insert", "update", "delete":
		if reply, ok := ss.movedReply(rq); ok && rq.name == "update" {
			return reply, nil // a retry of a write that moved its document
		}
		return r.shardedWrite(rq, sc)
	case "findAndModify":
		if reply, ok := ss.movedReply(rq); ok {
			return reply, nil // a retry of a write that moved its document
		}
		reply, err := r.shardedFindAndModify(rq, cmd, out, sc)
		if code, _ := replyCode(reply); err == nil && code == codeWouldChangeOwningShard {
			return r.famKeyChange(rq, sc, reply) // shard_keychange_router.go
		}
		return reply, err
	case "find":
		return r.shardedFind(rq, cmd, out, sc)
	case "count":
		return r.shardedCount(rq, cmd, out, sc)
	case "distinct":
		return r.shardedDistinct(rq, cmd, out, sc)
	case "aggregate":
		return r.shardedAggregate(rq, cmd, out, sc)
	case "drop":
		replies, err := r.forEachShard(rq, allShards(len(ss.shards)), rq.cmd, true, true)
		if err != nil {
			return nil, err
		}
		ss.mu.Lock()
		delete(ss.colls, sc.ns)
		ss.mu.Unlock()
		return replies[0], nil
	case "createIndexes", "dropIndexes", "collMod":
		if rq.name == "createIndexes" {
			if err := sc.checkUniqueIndexes(rq); err != nil {
				return nil, err
			}
		}
		primary := ss.primaryOf(rq.db, false)
		order := append([]int{primary}, slices.DeleteFunc(allShards(len(ss.shards)), func(i int) bool { return i == primary })...)
		replies, err := r.forEachShard(rq, order, rq.cmd, true, true)
		if err != nil {
			return nil, err
		}
		return replies[0], nil
	case "listIndexes", "create":
		return r.forwardTo(rq, cmd, out, ss.primaryOf(rq.db, false))
	}
	return nil, cmderr.Unsupported(rq.name + " on a sharded collection")
}

// targetShards is the single shard a filter targets, or every shard
// owning a chunk.
func (sc *shardedColl) targetShards(filter bson.D) []int {
	if i := sc.targetFilter(filter); i >= 0 {
		return []int{i}
	}
	return sc.owners()
}

// drain sends a cursor-returning command to shard i and reads the cursor
// to its end with getMore.
func (r *Router) drain(rq *request, i int, cmd bson.D) ([]bson.D, error) {
	reply, err := r.shardCmd(rq, i, cmd, nil, false, true)
	if err != nil {
		return nil, err
	}
	if !replyOK(reply) {
		return nil, &shardError{reply: reply}
	}
	var docs []bson.D
	db, _ := lookupD(cmd, "$db")
	if err := r.readCursor(rq, i, reply, db, "", func(d bson.D) { docs = append(docs, d) }); err != nil {
		return nil, err
	}
	return docs, nil
}

// readCursor hands each document of the cursor in reply (shard i's
// successful answer) to each, reading on with getMore on database db in
// collection coll ("": the one the cursor's ns names) to its end.
func (r *Router) readCursor(rq *request, i int, reply bson.D, db any, coll string, each func(bson.D)) error {
	var err error
	key := "firstBatch"
	for {
		cv, _ := lookupD(reply, "cursor")
		cur, _ := cv.(bson.D)
		bv, _ := lookupD(cur, key)
		batch, _ := bv.(bson.A)
		for _, x := range batch {
			d, _ := x.(bson.D)
			each(d)
		}
		idv, _ := lookupD(cur, "id")
		id, _ := asInt64(idv)
		if id == 0 {
			return nil
		}
		getMoreColl := coll
		if getMoreColl == "" {
			nsv, _ := lookupD(cur, "ns")
			ns, _ := nsv.(string)
			_, getMoreColl, _ = strings.Cut(ns, ".")
		}
		gm := bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: getMoreColl}, {Key: "$db", Value: db}}
		if lsid, ok := rq.get("lsid"); ok {
			gm = append(gm, bson.E{Key: "lsid", Value: lsid})
		}
		if reply, err = r.shardCmd(rq, i, gm, nil, false, false); err != nil {
			return err
		}
		if !replyOK(reply) {
			return &shardError{reply: reply}
		}
		key = "nextBatch"
	}
}

// gather runs cmd on each shard and concatenates the results.
func (r *Router) gather(rq *request, shards []int, cmd bson.D) ([]bson.D, error) {
	var all []bson.D
	for _, i := range shards {
		docs, err := r.drain(rq, i, cmd)
		if err != nil {
			return nil, err
		}
		all = append(all, docs...)
	}
	return all, nil
}

// cursorReply answers with the first batch of docs and a router cursor
// for the rest.
func (r *Router) cursorReply(ns string, docs []bson.D, batchSize int, singleBatch bool) bson.D {
	if batchSize < 0 {
		batchSize = defaultFirstBatch
	}
	first, rest := splitBatch(docs, batchSize)
	var id int64
	if len(rest) > 0 && !singleBatch {
		id = r.openCursor(ns, rest)
	}
	return bson.D{{Key: "cursor", Value: bson.D{
		{Key: "firstBatch", Value: toArray(first)},
		{Key: "id", Value: id},
		{Key: "ns", Value: ns},
	}}, {Key: "ok", Value: 1.0}}
}

func (r *Router) openCursor(ns string, docs []bson.D) int64 {
	return r.registerCursor(&routerCursor{router: r.index, shard: -1, ns: ns, docs: docs})
}

// registerCursor gives c a fresh non-zero id in the cluster's router
// cursor table (sweeping expired ones first) and returns it.
func (r *Router) registerCursor(c *routerCursor) int64 {
	ss := r.cluster.sharding
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.sweepCursors()
	c.lastUsed.Store(time.Now().UnixNano())
	for {
		id := rand.Int64()
		if id != 0 && ss.cursors[id] == nil {
			ss.cursors[id] = c
			return id
		}
	}
}

func (r *Router) lookupCursor(id int64) *routerCursor {
	ss := r.cluster.sharding
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if c := ss.cursors[id]; c != nil && c.router == r.index {
		c.lastUsed.Store(time.Now().UnixNano())
		return c
	}
	return nil
}

// sweepCursors forgets cursors idle for cursorIdleTimeout, as the shards
// time theirs out; ss.mu is held.
func (ss *shardSet) sweepCursors() {
	now := time.Now()
	if now.Sub(ss.lastSweep) < time.Minute {
		return
	}
	ss.lastSweep = now
	for id, c := range ss.cursors {
		if now.Sub(time.Unix(0, c.lastUsed.Load())) > cursorIdleTimeout {
			delete(ss.cursors, id)
		}
	}
}

func (r *Router) dropCursor(id int64) {
	ss := r.cluster.sharding
	ss.mu.Lock()
	delete(ss.cursors, id)
	ss.mu.Unlock()
}

func errCursorNotFound(id int64) error {
	return cmderr.New(cmderr.CursorNotFound, "cursor id %d not found", id)
}

// getMore serves a router cursor, or relays to the shard that owns the
// cursor.
func (r *Router) getMore(rq *request) (bson.D, error) {
	id, ok := asInt64(rq.cmd[0].Value)
	if !ok {
		return nil, cmderr.New(cmderr.TypeMismatch, "BSON field 'getMore.getMore' is the wrong type '%s', expected type 'long'", typeNameOf(rq.cmd[0].Value))
	}
	collv, _ := rq.get("collection")
	coll, _ := collv.(string)
	c := r.lookupCursor(id)
	if c == nil {
		return nil, errCursorNotFound(id)
	}
	if c.ns != rq.db+"."+coll {
		return nil, cmderr.New(cmderr.Unauthorized, "Requested getMore on namespace '%s.%s', but cursor belongs to a different namespace %s", rq.db, coll, c.ns)
	}
	if c.stream != nil {
		return r.streamGetMore(rq, id, c) // shard_changestream.go
	}
	if c.shard >= 0 {
		reply, err := r.shardRaw(rq, c.shard, rq.raw.Command, nil, false, false)
		if err != nil {
			return nil, err
		}
		cv, _ := lookupD(reply, "cursor")
		cur, _ := cv.(bson.D)
		idv, _ := lookupD(cur, "id")
		if n, _ := asInt64(idv); n == 0 || !replyOK(reply) {
			r.dropCursor(id)
		}
		return reply, nil
	}
	if _, ok := rq.get("maxTimeMS"); ok {
		// A merged cursor is never awaitData (mongos's check).
		return nil, cmderr.New(cmderr.BadValue, "cannot set maxTimeMS on getMore command for a non-awaitData cursor")
	}
	batchSize := -1
	if v, ok := rq.get("batchSize"); ok {
		if n, ok := asInt64(v); ok && n > 0 {
			batchSize = int(n)
		}
	}
	c.mu.Lock()
	batch, rest := splitBatch(c.docs, batchSize)
	c.docs = rest
	c.mu.Unlock()
	next := id
	if len(rest) == 0 {
		r.dropCursor(id)
		next = 0
	}
	return bson.D{{Key: "cursor", Value: bson.D{
		{Key: "nextBatch", Value: toArray(batch)},
		{Key: "id", Value: next},
		{Key: "ns", Value: c.ns},
	}}, {Key: "ok", Value: 1.0}}, nil
}

// killCursors kills router cursors and relays shard cursors' kills.
func (r *Router) killCursors(rq *request) (bson.D, error) {
	v, _ := rq.get("cursors")
	ids, _ := v.(bson.A)
	coll, _ := rq.cmd[0].Value.(string)
	killed, notFound := bson.A{}, bson.A{}
	for _, x := range ids {
		id, _ := asInt64(x)
		c := r.lookupCursor(id)
		if c == nil || c.ns != rq.db+"."+coll {
			notFound = append(notFound, id)
			continue
		}
		r.dropCursor(id)
		if c.shard >= 0 {
			kc := bson.D{{Key: "killCursors", Value: coll}, {Key: "cursors", Value: bson.A{id}}, {Key: "$db", Value: rq.db}}
			if lsid, ok := rq.get("lsid"); ok {
				kc = append(kc, bson.E{Key: "lsid", Value: lsid})
			}
			if _, err := r.shardCmd(rq, c.shard, kc, nil, false, false); err != nil {
				return nil, err
			}
		}
		killed = append(killed, id)
	}
	return bson.D{
		{Key: "cursorsKilled", Value: killed}, {Key: "cursorsNotFound", Value: notFound},
		{Key: "cursorsAlive", Value: bson.A{}}, {Key: "cursorsUnknown", Value: bson.A{}}, {Key: "ok", Value: 1.0},
	}, nil
}

// routerBatchSize reads cursor.batchSize; -1 when absent or not a
// non-negative number.
func routerBatchSize(rq *request) int {
	if cv, ok := rq.get("cursor"); ok {
		if d, ok := cv.(bson.D); ok {
			if v, ok := lookupD(d, "batchSize"); ok {
				if n, ok := asInt64(v); ok && n >= 0 {
					return int(n)
				}
			}
		}
	}
	return -1
}

// relayTargeted relays a read that one shard answers whole.
func (r *Router) relayTargeted(rq *request, cmd *command, out *outcome, shards []int) (bson.D, bool, error) {
	if len(shards) != 1 {
		return nil, false, nil
	}
	reply, err := r.forwardTo(rq, cmd, out, shards[0])
	return reply, true, err
}

func (r *Router) shardedFind(rq *request, cmd *command, out *outcome, sc *shardedColl) (bson.D, error) {
	filter, _, err := docArg(rq, "filter")
	if err != nil {
		return nil, err
	}
	if reply, ok, err := r.relayTargeted(rq, cmd, out, sc.targetShards(filter)); ok {
		return reply, err
	}
	if v, ok := rq.get("tailable"); ok && truthy(v) {
		return nil, cmderr.Unsupported("tailable cursors on a sharded collection")
	}
	if hasNearFilter(filter) {
		return nil, cmderr.Unsupported("$near/$nearSphere on a sharded collection spanning several shards")
	}
	page, err := findPageArgs(rq)
	if err != nil {
		return nil, err
	}
	sortDoc, projDoc, skip, limit, batchSize, singleBatch := page.sort, page.projection, page.skip, page.limit, page.batchSize, page.singleBatch
	env, err := routerEnv(rq)
	if err != nil {
		return nil, err
	}
	var sorter *query.Sort
	if len(sortDoc) > 0 {
		if sorter, err = compileSort(sortDoc, env); err != nil {
			return nil, err
		}
	}
	proj, err := optionalProjection(projDoc, env)
	if err != nil {
		return nil, err
	}
	if proj.NeedsTextScore() || (sorter != nil && sorter.NeedsTextScore()) {
		return nil, cmderr.Unsupported("{$meta: \"textScore\"} in a find across the shards of a sharded collection")
	}
	// Each shard returns whole documents (the router sorts on fields a
	// projection may drop) and at most skip+limit of them.
	shardCmd := without(rq.cmd, "projection", "skip", "limit", "batchSize", "singleBatch")
	if limit > 0 {
		shardCmd = append(shardCmd, bson.E{Key: "limit", Value: skip + limit})
	}
	docs, err := r.gather(rq, sc.owners(), shardCmd)
	if err != nil {
		return nil, err
	}
	if sorter != nil {
		sorter.SortDocs(docs)
	}
	docs = skipLimit(docs, skip, limit)
	var f *query.Filter
	if proj != nil && proj.NeedsPosition() {
		// field.$ takes the position where the filter matched.
		if f, err = env.compileFilter(filter); err != nil {
			return nil, err
		}
	}
	if err := projectDocs(proj, f, docs); err != nil {
		return nil, err
	}
	return r.cursorReply(sc.ns, docs, batchSize, singleBatch), nil
}

func (r *Router) shardedCount(rq *request, cmd *command, out *outcome, sc *shardedColl) (bson.D, error) {
	filter, _, err := docArg(rq, "query")
	if err != nil {
		return nil, err
	}
	if reply, ok, err := r.relayTargeted(rq, cmd, out, sc.targetShards(filter)); ok {
		return reply, err
	}
	skip, limit, _, err := skipLimitArgs(rq)
	if err != nil {
		return nil, err
	}
	replies, err := r.forEachShard(rq, sc.owners(), without(rq.cmd, "skip", "limit"), false, true)
	if err != nil {
		return nil, err
	}
	var n int64
	for _, reply := range replies {
		v, _ := lookupD(reply, "n")
		k, _ := asInt64(v)
		n += k
	}
	n = max(0, n-skip)
	if limit > 0 && n > limit {
		n = limit
	}
	return bson.D{{Key: "n", Value: int32(n)}, {Key: "ok", Value: 1.0}}, nil
}

func (r *Router) shardedDistinct(rq *request, cmd *command, out *outcome, sc *shardedColl) (bson.D, error) {
	filter, _, err := docArg(rq, "query")
	if err != nil {
		return nil, err
	}
	if reply, ok, err := r.relayTargeted(rq, cmd, out, sc.targetShards(filter)); ok {
		return reply, err
	}
	replies, err := r.forEachShard(rq, sc.owners(), rq.cmd, false, true)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	values := bson.A{}
	for _, reply := range replies {
		v, _ := lookupD(reply, "values")
		arr, _ := v.(bson.A)
		for _, x := range arr {
			if k := value.Key(x); !seen[k] {
				seen[k] = true
				values = append(values, x)
			}
		}
	}
	slices.SortStableFunc(values, value.Compare)
	return bson.D{{Key: "values", Value: values}, {Key: "ok", Value: 1.0}}, nil
}

// shardedAggregate runs the pipeline's leading $match stages on the shards
// and the rest on the router over their merged output.
func (r *Router) shardedAggregate(rq *request, cmd *command, out *outcome, sc *shardedColl) (bson.D, error) {
	return r.routerAggregate(rq, cmd, out, sc, false)
}

// leadingMatches counts the $match stages that lead pipeline (the shards
// run them) and joins their filters into one, which may target shards.
func leadingMatches(pipeline bson.A) (lead int, filter bson.D) {
	for lead < len(pipeline) {
		d, ok := pipeline[lead].(bson.D)
		if !ok || len(d) != 1 || d[0].Key != "$match" {
			break
		}
		m, _ := d[0].Value.(bson.D)
		filter = append(filter, bson.E{Key: "$and", Value: bson.A{m}})
		lead++
	}
	return lead, filter
}

// splitFinalWrite takes a final $out or $merge (run on the target's
// primary shard) off stages; write is nil when there is none.
func splitFinalWrite(stages bson.A) (rest bson.A, write bson.D) {
	if n := len(stages); n > 0 {
		if d, ok := stages[n-1].(bson.D); ok && len(d) == 1 && (d[0].Key == "$out" || d[0].Key == "$merge") {
			return stages[:n-1], d
		}
	}
	return stages, nil
}

// routerAggregate runs an aggregate with the router finishing the
// pipeline; force keeps it on the router even when one shard could answer
// (the pipeline reads or writes sharded collections).
func (r *Router) routerAggregate(rq *request, cmd *command, out *outcome, sc *shardedColl, force bool) (bson.D, error) {
	pipeline := pipelineOf(rq)
	if isChangeStream(pipeline) {
		return r.openMergedStream(rq) // shard_changestream.go
	}
	if v, ok := rq.get("explain"); ok && truthy(v) {
		return nil, cmderr.Unsupported("aggregate explain")
	}
	lead, leadFilter := leadingMatches(pipeline)
	if !force {
		if reply, ok, err := r.relayTargeted(rq, cmd, out, sc.targetShards(leadFilter)); ok {
			return reply, err
		}
	}
	if geoNearFirst(pipeline) {
		return nil, cmderr.Unsupported("$geoNear on a sharded collection spanning several shards")
	}
	lead, err := textLead(pipeline, lead)
	if err != nil {
		return nil, err
	}
	batchSize := routerBatchSize(rq)
	restStages, write := splitFinalWrite(pipeline[lead:])
	rest, err := agg.Compile(restStages)
	if err != nil {
		return nil, err
	}
	env, err := routerEnv(rq)
	if err != nil {
		return nil, err
	}
	// The shards only read: a $out/$merge's writeConcern is for the write.
	shardCmd := withField(without(rq.cmd, "writeConcern"), "pipeline", pipeline[:lead])
	shardCmd = withField(shardCmd, "cursor", bson.D{})
	docs, err := r.gather(rq, sc.owners(), shardCmd)
	if err != nil {
		return nil, err
	}
	res, err := rest.Run(rq.ctx, docs, agg.Env{DB: rq.db, Catalog: routerCatalog{r: r, rq: rq}, Now: rq.now, Vars: env.vars, Collator: env.collator(), Scripts: rq.scripts()})
	if err != nil {
		return errorReply(err)
	}
	if write != nil {
		return r.writeStage(rq, write, res)
	}
	return r.cursorReply(sc.ns, res, batchSize, false), nil
}

// codeOutToSharded is mongod's refusal of $out into a sharded collection.
const codeOutToSharded = 28769

// writeStage runs a sharded aggregate's final $out or $merge: the merged
// results go, as a $documents stage, to the target collection's primary
// shard, or for $merge into a sharded collection each to the shard its
// key targets; $out into a sharded collection fails as on mongos.
func (r *Router) writeStage(rq *request, stage bson.D, docs []bson.D) (bson.D, error) {
	ss := r.cluster.sharding
	db, coll := rq.db, ""
	switch v := stage[0].Value.(type) {
	case string:
		coll = v
	case bson.D:
		for _, e := range v {
			switch e.Key {
			case "db":
				db, _ = e.Value.(string)
			case "coll", "into":
				switch x := e.Value.(type) {
				case string:
					coll = x
				case bson.D:
					if d, ok := lookupD(x, "db"); ok {
						db, _ = d.(string)
					}
					if c, ok := lookupD(x, "coll"); ok {
						coll, _ = c.(string)
					}
				}
			}
		}
	}
	if coll == "" {
		return nil, cmderr.Unsupported(stage[0].Key + " with this target on a sharded collection")
	}
	byShard := map[int][]bson.D{ss.primaryOf(db, true): docs}
	if target := ss.coll(db + "." + coll); target != nil {
		if stage[0].Key == "$out" {
			return nil, cmderr.New(codeOutToSharded, "%s.%s cannot be sharded: $out cannot write to a sharded collection (use $merge)", db, coll)
		}
		// $merge into a sharded collection: each document goes to the
		// shard its key targets, where $merge matches and writes it.
		byShard = map[int][]bson.D{}
		for _, d := range docs {
			key, err := target.keyOfDoc(d)
			if err != nil {
				return nil, err
			}
			s := target.shardFor(key)
			byShard[s] = append(byShard[s], d)
		}
	}
	for _, s := range slices.Sorted(maps.Keys(byShard)) {
		cmd := withField(without(rq.cmd, "let", "hint"), "pipeline", bson.A{bson.D{{Key: "$documents", Value: toArray(byShard[s])}}, stage})
		cmd[0] = bson.E{Key: "aggregate", Value: int32(1)}
		cmd = withField(cmd, "cursor", bson.D{})
		reply, err := r.shardCmd(rq, s, cmd, nil, true, false)
		if err != nil {
			return nil, err
		}
		if !replyOK(reply) {
			return nil, &shardError{reply: reply}
		}
	}
	return bson.D{{Key: "cursor", Value: bson.D{{Key: "firstBatch", Value: bson.A{}}, {Key: "id", Value: int64(0)}, {Key: "ns", Value: rq.db + "." + rq.cmd[0].Value.(string)}}}, {Key: "ok", Value: 1.0}}, nil
}

// routerCatalog lets a pipeline the router finishes read other
// collections ($lookup, $unionWith) through the router.
type routerCatalog struct {
	r  *Router
	rq *request
}

func (c routerCatalog) Read(db, coll string) ([]bson.D, error) {
	ss := c.r.cluster.sharding
	shards := []int{ss.primaryOf(db, false)}
	if sc := ss.coll(db + "." + coll); sc != nil {
		shards = sc.owners()
	}
	cmd := bson.D{{Key: "find", Value: coll}, {Key: "$db", Value: db}}
	if lsid, ok := c.rq.get("lsid"); ok {
		cmd = append(cmd, bson.E{Key: "lsid", Value: lsid})
	}
	return c.r.gather(c.rq, shards, cmd)
}

func (routerCatalog) Out(string, string, []bson.D) error {
	return cmderr.Unsupported("$out on a sharded collection")
}

func (routerCatalog) Merge(string, string, []bson.D, []string, any, string) error {
	return cmderr.Unsupported("$merge on a sharded collection")
}

// configFind answers finds on the config collections the router's
// metadata stands for: databases, collections, chunks and shards.
func (r *Router) configFind(rq *request) (bson.D, bool, error) {
	coll, _ := rq.cmd[0].Value.(string)
	docs, ok := r.configDocs(coll)
	if !ok {
		return nil, false, nil
	}
	slices.SortFunc(docs, func(a, b bson.D) int { return value.Compare(a[0].Value, b[0].Value) })
	docs, single, err := findInMemory(rq, docs)
	if err != nil {
		return nil, true, err
	}
	return r.cursorReply("config."+coll, docs, -1, single), true, nil
}

// configDocs builds the documents of config collection coll from the
// router's metadata; false for a collection it does not stand for.
func (r *Router) configDocs(coll string) ([]bson.D, bool) {
	ss := r.cluster.sharding
	if coll == "shards" {
		return r.shardDocs(), true
	}
	var docs []bson.D
	ss.mu.Lock()
	defer ss.mu.Unlock()
	switch coll {
	case "databases":
		for name, d := range ss.dbs {
			docs = append(docs, bson.D{{Key: "_id", Value: name}, {Key: "primary", Value: ss.names[d.primary]},
				{Key: "version", Value: bson.D{{Key: "uuid", Value: d.uuid}, {Key: "timestamp", Value: d.ts}, {Key: "lastMod", Value: int32(1)}}}})
		}
	case "collections":
		for ns, sc := range ss.colls {
			docs = append(docs, bson.D{{Key: "_id", Value: ns}, {Key: "lastmodEpoch", Value: sc.epoch},
				{Key: "timestamp", Value: sc.ts}, {Key: "uuid", Value: sc.uuid}, {Key: "key", Value: sc.key},
				{Key: "unique", Value: sc.unique}, {Key: "noBalance", Value: false}})
		}
	case "chunks":
		for _, sc := range ss.colls {
			for _, ch := range sc.chunkList() {
				docs = append(docs, bson.D{{Key: "_id", Value: bson.NewObjectID()}, {Key: "uuid", Value: sc.uuid},
					{Key: "min", Value: ch.min}, {Key: "max", Value: ch.max}, {Key: "shard", Value: ss.names[ch.shard]},
					{Key: "lastmod", Value: bson.Timestamp{T: 1, I: uint32(ch.version)}}})
			}
		}
	default:
		return nil, false
	}
	return docs, true
}

// findInMemory applies a find's filter, sort, skip, limit and projection
// to docs; single is the find's singleBatch.
func findInMemory(rq *request, docs []bson.D) (out []bson.D, single bool, err error) {
	filter, _, err := docArg(rq, "filter")
	if err != nil {
		return nil, false, err
	}
	env, err := routerEnv(rq)
	if err != nil {
		return nil, false, err
	}
	f, err := env.compileFilter(filter)
	if err != nil {
		return nil, false, err
	}
	docs = slices.DeleteFunc(docs, func(d bson.D) bool { return !f.Match(d) })
	if sortDoc, _, err := docArg(rq, "sort"); err == nil && len(sortDoc) > 0 {
		s, err := compileSort(sortDoc, env)
		if err != nil {
			return nil, false, err
		}
		if s != nil {
			s.SortDocs(docs)
		}
	}
	skip, limit, single, err := skipLimitArgs(rq)
	if err != nil {
		return nil, false, err
	}
	docs = skipLimit(docs, skip, limit)
	if projDoc, _, err := docArg(rq, "projection"); err == nil && len(projDoc) > 0 {
		p, err := query.CompileProjection(projDoc)
		if err != nil {
			return nil, false, err
		}
		for i, d := range docs {
			docs[i] = p.Apply(d)
		}
	}
	return docs, single, nil
}

// checkUniqueIndexes refuses, as mongos does, a unique index a shard
// cannot enforce alone: its key must start with the shard key's fields.
func (sc *shardedColl) checkUniqueIndexes(rq *request) error {
	v, _ := rq.get("indexes")
	specs, _ := v.(bson.A)
	for _, x := range specs {
		spec, _ := x.(bson.D)
		u, _ := lookupD(spec, "unique")
		if !asBool(u) {
			continue
		}
		kv, _ := lookupD(spec, "key")
		key, _ := kv.(bson.D)
		if len(key) == 1 && key[0].Key == "_id" {
			continue
		}
		ok := len(key) >= len(sc.fields)
		for i := 0; ok && i < len(sc.fields); i++ {
			ok = key[i].Key == sc.fields[i]
		}
		if !ok {
			return cmderr.New(codeCannotCreateIndex, "cannot create unique index over %s with shard key pattern %s", shellString(key), shellString(sc.key))
		}
	}
	return nil
}

// codeCannotCreateIndex is mongod's CannotCreateIndex.
const codeCannotCreateIndex = 67

// crossCollectionStages read or write collections other than the
// aggregate's own.
var crossCollectionStages = []string{"$lookup", "$graphLookup", "$unionWith", "$out", "$merge"}

// needsRouter reports whether an aggregate on an unsharded collection must
// run on the router: it names another collection while some collection is
// sharded, so its primary shard alone may not hold what it reads or
// writes.
func (ss *shardSet) needsRouter(pipeline bson.A) bool {
	ss.mu.Lock()
	sharded := len(ss.colls) > 0
	ss.mu.Unlock()
	return sharded && mentionsStage(pipeline)
}

func mentionsStage(v any) bool {
	switch x := v.(type) {
	case bson.D:
		for _, e := range x {
			if slices.Contains(crossCollectionStages, e.Key) || mentionsStage(e.Value) {
				return true
			}
		}
	case bson.A:
		for _, y := range x {
			if mentionsStage(y) {
				return true
			}
		}
	}
	return false
}

// unshardedColl describes an unsharded collection as one chunk on its
// database's primary shard, for the router's aggregate.
func (ss *shardSet) unshardedColl(db, coll string) *shardedColl {
	sc := &shardedColl{ns: db + "." + coll}
	chunks := []chunk{{shard: ss.primaryOf(db, false)}}
	sc.chunks.Store(&chunks)
	return sc
}

// routerEnv is what a router merges shards' results under: the command's
// own collation and let variables. A collection's default collation lives
// on the shards, so a merge of a command without one sorts by the simple
// collation (COMPATIBILITY.md).
func routerEnv(rq *request) (opEnv, error) {
	vars, err := rq.letVars()
	if err != nil {
		return opEnv{}, err
	}
	v, present := rq.get("collation")
	if !present {
		return opEnv{vars: vars}, nil
	}
	c, err := parseCollation(v, rq.name+".collation")
	if err != nil {
		return opEnv{}, err
	}
	return opEnv{coll: c, vars: vars}, nil
}
