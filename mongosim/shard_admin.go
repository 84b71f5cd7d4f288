package mongosim

import (
	"slices"
	"sort"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// The sharding admin commands mongos answers itself: enableSharding,
// listShards, shardCollection, and listDatabases/dropDatabase and the
// session commands, which span every shard.

func (r *Router) enableSharding(rq *request) (bson.D, error) {
	if rq.db != "admin" {
		return nil, cmderr.New(cmderr.Unauthorized, "enableSharding may only be run against the admin database.")
	}
	db, _ := rq.cmd[0].Value.(string)
	if db == "" {
		return nil, cmderr.New(cmderr.InvalidNamespace, "invalid db name specified: %s", shellString(rq.cmd[0].Value))
	}
	ss := r.cluster.sharding
	if v, ok := rq.get("primaryShard"); ok {
		name, _ := v.(string)
		idx := slices.Index(ss.names, name)
		if idx < 0 {
			return nil, cmderr.New(codeShardNotFound, "Shard %s not found", name)
		}
		ss.mu.Lock()
		if d := ss.dbs[db]; d != nil && d.primary != idx {
			ss.mu.Unlock()
			return nil, cmderr.New(cmderr.NamespaceExists, "database %s already exists with primary shard %s", db, ss.names[d.primary])
		}
		if ss.dbs[db] == nil {
			ss.dbs[db] = &shardedDB{primary: idx, uuid: newUUID(), ts: bson.Timestamp{T: uint32(time.Now().Unix()), I: 1}}
		}
		ss.mu.Unlock()
	}
	ss.primaryOf(db, true)
	return bson.D{{Key: "ok", Value: 1.0}}, nil
}

func (r *Router) listShards(rq *request) (bson.D, error) {
	if rq.db != "admin" {
		return nil, cmderr.New(cmderr.Unauthorized, "listShards may only be run against the admin database.")
	}
	return bson.D{{Key: "shards", Value: toArray(r.shardDocs())}, {Key: "ok", Value: 1.0}}, nil
}

func (r *Router) shardDocs() []bson.D {
	ss := r.cluster.sharding
	var docs []bson.D
	for i, sc := range ss.shards {
		docs = append(docs, bson.D{{Key: "_id", Value: ss.names[i]}, {Key: "host", Value: shardHost(sc)}, {Key: "state", Value: int32(1)}})
	}
	return docs
}

// shardCollection shards a collection with a fixed chunk layout: a hashed
// key gets one chunk per shard over the hash space; a range key one chunk
// on the primary shard (split and moveChunk spread it).
func (r *Router) shardCollection(rq *request) (bson.D, error) {
	ns, db, coll, err := shardCollectionNS(rq)
	if err != nil {
		return nil, err
	}
	sc, err := parseShardKey(rq, ns)
	if err != nil {
		return nil, err
	}
	ss := r.cluster.sharding
	if old := ss.coll(ns); old != nil {
		if compareKeys(old.key, sc.key) == 0 && len(old.key) == len(sc.key) && old.key[0].Key == sc.key[0].Key {
			return bson.D{{Key: "collectionsharded", Value: ns}, {Key: "ok", Value: 1.0}}, nil
		}
		return nil, cmderr.New(codeAlreadyInitialized, "sharding already enabled for collection %s with options { shardKey: %s }", ns, shellString(old.key))
	}
	primary := ss.primaryOf(db, true)
	// The collection must be empty unless it is on one shard (the primary)
	// and stays there: mongosim moves no data at shardCollection.
	count, err := r.shardCmd(rq, primary, bson.D{{Key: "count", Value: coll}, {Key: "$db", Value: db}}, nil, false, true)
	if err != nil {
		return nil, err
	}
	n, _ := asInt64(func() any { v, _ := lookupD(count, "n"); return v }())
	chunks := sc.initialChunks(n == 0, len(ss.shards), primary)
	sc.chunks.Store(&chunks)
	if err := r.createShardKeyIndex(rq, sc, db, coll); err != nil {
		return nil, err
	}
	ss.mu.Lock()
	if ss.colls[ns] == nil {
		ss.colls[ns] = sc
	}
	ss.mu.Unlock()
	ss.shards[primary].data.recordShardCollection(rq.ctx, db, coll, sc.key, sc.unique)
	return bson.D{{Key: "collectionsharded", Value: ns}, {Key: "collectionUUID", Value: sc.uuid}, {Key: "ok", Value: 1.0}}, nil
}

// shardCollectionNS reads and checks the namespace to shard.
func shardCollectionNS(rq *request) (ns, db, coll string, err error) {
	if rq.db != "admin" {
		return "", "", "", cmderr.New(cmderr.Unauthorized, "shardCollection may only be run against the admin database.")
	}
	ns, _ = rq.cmd[0].Value.(string)
	db, coll, ok := strings.Cut(ns, ".")
	if !ok || db == "" || coll == "" {
		return "", "", "", cmderr.New(cmderr.InvalidNamespace, "Invalid namespace specified '%s'", ns)
	}
	if db == "admin" || db == "config" || db == "local" || strings.HasPrefix(coll, "system.") {
		return "", "", "", cmderr.New(cmderr.IllegalOperation, "can't shard %s", ns)
	}
	return ns, db, coll, nil
}

// parseShardKey reads the key and options of shardCollection into the
// new collection's metadata (no chunks yet). A key is ascending fields or
// one hashed field; the options mongosim lacks are refused.
func parseShardKey(rq *request, ns string) (*shardedColl, error) {
	keyv, _ := rq.get("key")
	key, ok := keyv.(bson.D)
	if !ok || len(key) == 0 {
		return nil, cmderr.New(cmderr.BadValue, "Shard key must be a non-empty object")
	}
	for _, k := range []string{"numInitialChunks", "presplitHashedZones", "collation", "timeseries"} {
		if v, ok := rq.get(k); ok && k == "collation" && isSimpleCollation(v) {
			continue
		} else if ok {
			return nil, cmderr.Unsupported("shardCollection option " + k)
		}
	}
	unique := false
	if v, ok := rq.get("unique"); ok {
		unique = truthy(v)
	}
	sc := &shardedColl{ns: ns, key: value.CloneDoc(key), unique: unique, epoch: bson.NewObjectID(), uuid: newUUID(),
		ts: bson.Timestamp{T: uint32(time.Now().Unix()), I: 1}}
	for _, e := range key {
		switch v := e.Value.(type) {
		case string:
			if v != "hashed" {
				return nil, cmderr.New(cmderr.BadValue, "Unsupported shard key pattern %s. Pattern must either be a single hashed field, or a list of ascending fields", shellString(key))
			}
			if sc.hashed != "" {
				return nil, cmderr.New(cmderr.BadValue, "Shard key %s can contain at most one 'hashed' field", shellString(key))
			}
			sc.hashed = e.Key
		default:
			if n, ok := value.ToFloat(v); !ok || n != 1 {
				return nil, cmderr.New(cmderr.BadValue, "Unsupported shard key pattern %s. Pattern must either be a single hashed field, or a list of ascending fields", shellString(key))
			}
		}
		sc.fields = append(sc.fields, e.Key)
	}
	if unique && sc.hashed != "" {
		return nil, cmderr.New(cmderr.InvalidOptions, "Hashed shard keys cannot be declared unique. It's possible to ensure uniqueness on the hashed field by declaring an additional (non-hashed) unique index on the field.")
	}
	return sc, nil
}

// initialChunks lays out a new sharded collection's chunks: as mongos
// 7.2+, an empty collection with a leading hashed key gets one chunk per
// shard, split evenly over the hash space, chunk i on shard i; any other
// one chunk on the primary shard.
func (sc *shardedColl) initialChunks(empty bool, nshards, primary int) []chunk {
	minKey, maxKey := make(bson.D, 0, len(sc.key)), make(bson.D, 0, len(sc.key))
	for _, f := range sc.fields {
		minKey = append(minKey, bson.E{Key: f, Value: bson.MinKey{}})
		maxKey = append(maxKey, bson.E{Key: f, Value: bson.MaxKey{}})
	}
	if sc.hashed == "" || !empty || sc.fields[0] != sc.hashed {
		return []chunk{{min: minKey, max: maxKey, shard: primary, version: 1}}
	}
	var chunks []chunk
	lo := minKey
	splits := hashedSplitPoints(nshards)
	for i := 0; i < nshards; i++ {
		hi := maxKey
		if i < len(splits) {
			hi = slices.Clone(minKey)
			for j := range hi {
				hi[j].Value = bson.MinKey{}
				if sc.fields[j] == sc.hashed {
					hi[j].Value = splits[i]
				}
			}
		}
		chunks = append(chunks, chunk{min: lo, max: hi, shard: i, version: 1})
		lo = hi
	}
	return chunks
}

// createShardKeyIndex gives every shard the collection and the shard key
// index (mongod requires one; on an empty collection shardCollection
// creates it), and tells each the shard key so updates cannot change it.
func (r *Router) createShardKeyIndex(rq *request, sc *shardedColl, db, coll string) error {
	ss := r.cluster.sharding
	idx := bson.D{{Key: "key", Value: sc.key}, {Key: "name", Value: indexName(sc.key)}}
	switch {
	case len(sc.key) == 1 && sc.key[0].Key == "_id" && sc.hashed == "":
		// The _id index every collection has is the key's index, as on
		// mongod (unique by nature).
		idx = bson.D{{Key: "key", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "name", Value: "_id_"}}
	case sc.unique:
		idx = append(idx, bson.E{Key: "unique", Value: true})
	}
	for i := range ss.shards {
		reply, err := r.shardCmd(rq, i, bson.D{{Key: "createIndexes", Value: coll}, {Key: "indexes", Value: bson.A{idx}}, {Key: "$db", Value: db}}, nil, true, true)
		if err != nil {
			return err
		}
		if !replyOK(reply) {
			return &shardError{reply: reply}
		}
		ss.shards[i].data.setShardKey(db, coll, sc.fields)
	}
	return nil
}

// listDatabases merges the shards' lists, adding up sizes.
func (r *Router) listDatabases(rq *request) (bson.D, error) {
	ss := r.cluster.sharding
	replies, err := r.forEachShard(rq, allShards(len(ss.shards)), rq.cmd, false, true)
	if err != nil {
		return nil, err
	}
	type dbInfo struct {
		size  int64
		empty bool
	}
	infos := map[string]*dbInfo{}
	var order []string
	nameOnly := false
	var total int64
	for _, reply := range replies {
		v, _ := lookupD(reply, "databases")
		arr, _ := v.(bson.A)
		for _, x := range arr {
			d, _ := x.(bson.D)
			name, _ := lookupD(d, "name")
			s, _ := name.(string)
			sz, hasSize := lookupD(d, "sizeOnDisk")
			if !hasSize {
				nameOnly = true
			}
			n, _ := asInt64(sz)
			e, _ := lookupD(d, "empty")
			if infos[s] == nil {
				infos[s] = &dbInfo{empty: true}
				order = append(order, s)
			}
			infos[s].size += n
			infos[s].empty = infos[s].empty && asBool(e)
			total += n
		}
	}
	sort.Strings(order)
	out := bson.A{}
	for _, name := range order {
		if nameOnly {
			out = append(out, bson.D{{Key: "name", Value: name}})
			continue
		}
		out = append(out, bson.D{{Key: "name", Value: name}, {Key: "sizeOnDisk", Value: infos[name].size}, {Key: "empty", Value: infos[name].empty}})
	}
	reply := bson.D{{Key: "databases", Value: out}}
	if !nameOnly {
		reply = append(reply, bson.E{Key: "totalSize", Value: total})
	}
	return append(reply, bson.E{Key: "ok", Value: 1.0}), nil
}

// dropDatabase drops the database on every shard and forgets its metadata.
func (r *Router) dropDatabase(rq *request) (bson.D, error) {
	ss := r.cluster.sharding
	replies, err := r.forEachShard(rq, allShards(len(ss.shards)), rq.cmd, true, true)
	if err != nil {
		return nil, err
	}
	ss.mu.Lock()
	delete(ss.dbs, rq.db)
	for ns := range ss.colls {
		if strings.HasPrefix(ns, rq.db+".") {
			delete(ss.colls, ns)
		}
	}
	ss.mu.Unlock()
	return replies[0], nil
}

// broadcastAdmin sends a session command to every shard.
func (r *Router) broadcastAdmin(rq *request) (bson.D, error) {
	ss := r.cluster.sharding
	if rq.name == "endSessions" {
		ids, _ := rq.cmd[0].Value.(bson.A)
		ss.mu.Lock()
		for _, id := range ids {
			delete(ss.txns, value.Key(id))
			delete(ss.moves, value.Key(id))
			delete(ss.famPins, value.Key(id))
		}
		ss.mu.Unlock()
	}
	if _, err := r.forEachShard(rq, allShards(len(ss.shards)), rq.cmd, false, false); err != nil {
		return nil, err
	}
	return bson.D{{Key: "ok", Value: 1.0}}, nil
}

// setShardKey records a sharded collection's key on a shard's storage so
// its updates refuse to change the key (ImmutableField), creating the
// collection if needed.
func (s *storage) setShardKey(db, coll string, fields []string) {
	c, _, err := s.ensure(db, coll)
	if err != nil || c == nil {
		return
	}
	c.mu.Lock()
	c.shardKey = slices.Clone(fields)
	c.mu.Unlock()
}

// isSimpleCollation reports whether a collation is {locale: "simple"}, the
// only one a shard key (or, in mongosim, a view) may have.
func isSimpleCollation(v any) bool {
	c, err := parseCollation(v, "collation")
	return err == nil && c == nil
}
