package mongosim

import (
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// The routing table the config servers hold on a real cluster: each
// database's primary shard, each sharded collection's key and chunks, and
// the chunk math that maps a document or a filter to its shard.

// primaryOf returns db's primary shard, choosing one (the shard that is
// primary for the fewest databases) when create is set and db is new;
// without create a new database reads from shard 0.
func (ss *shardSet) primaryOf(db string, create bool) int {
	if db == "admin" || db == "config" || db == "local" {
		return 0
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if d := ss.dbs[db]; d != nil {
		return d.primary
	}
	if !create {
		return 0
	}
	counts := make([]int, len(ss.shards))
	for _, d := range ss.dbs {
		counts[d.primary]++
	}
	best := 0
	for i, n := range counts {
		if n < counts[best] {
			best = i
		}
	}
	ss.dbs[db] = &shardedDB{primary: best, uuid: newUUID(), ts: bson.Timestamp{T: uint32(time.Now().Unix()), I: 1}}
	return best
}

func (ss *shardSet) coll(ns string) *shardedColl {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.colls[ns]
}

func newUUID() bson.Binary {
	b := make([]byte, 16)
	for i := range b {
		b[i] = byte(rand.UintN(256))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return bson.Binary{Subtype: bson.TypeBinaryUUID, Data: b}
}

// owners lists the shards that hold at least one of sc's chunks, in order.
func (sc *shardedColl) owners() []int {
	var out []int
	for _, ch := range sc.chunkList() {
		if !slices.Contains(out, ch.shard) {
			out = append(out, ch.shard)
		}
	}
	slices.Sort(out)
	return out
}

// keyOfDoc extracts doc's shard key (hashing the hashed field); a missing
// field is null, as mongos treats it since 4.4. An array on the path
// cannot be a shard key value.
func (sc *shardedColl) keyOfDoc(doc bson.D) (bson.D, error) {
	key := make(bson.D, 0, len(sc.fields))
	for _, f := range sc.fields {
		v, isArray := dottedValue(doc, f)
		if isArray {
			return nil, cmderr.New(codeShardKeyNotFound, "Document %s does not contain shard key for pattern %s", shellString(doc), shellString(sc.key))
		}
		if f == sc.hashed {
			v = hashKeyValue(v)
		}
		key = append(key, bson.E{Key: f, Value: v})
	}
	return key, nil
}

// mongos error codes.
const (
	codeShardKeyNotFound    = 61
	codeShardNotFound       = 70
	codeAlreadyInitialized  = 23
	codeNamespaceNotSharded = 118
)

// dottedValue returns the value at a dotted path (nil when missing) and
// whether an array lies on the path.
func dottedValue(doc bson.D, path string) (any, bool) {
	var cur any = doc
	for _, p := range strings.Split(path, ".") {
		switch d := cur.(type) {
		case bson.D:
			v, ok := value.Get(d, p)
			if !ok {
				return nil, false
			}
			cur = v
		case bson.A:
			return nil, true
		default:
			return nil, false
		}
	}
	if _, ok := cur.(bson.A); ok {
		return nil, true
	}
	return cur, false
}

func compareKeys(a, b bson.D) int {
	for i := range a {
		if i >= len(b) {
			return 1
		}
		if c := value.Compare(a[i].Value, b[i].Value); c != 0 {
			return c
		}
	}
	return 0
}

// shardFor returns the shard whose chunk holds key.
func (sc *shardedColl) shardFor(key bson.D) int {
	cs := sc.chunkList()
	if i := chunkIndex(cs, key); i >= 0 {
		return cs[i].shard
	}
	return cs[len(cs)-1].shard // MaxKey itself
}

// targetFilter returns the shard a filter targets when it fixes every
// shard key field by equality, or -1 (broadcast).
func (sc *shardedColl) targetFilter(filter bson.D) int {
	key := make(bson.D, 0, len(sc.fields))
	for _, f := range sc.fields {
		v, ok := equalityOn(filter, f)
		if !ok {
			return -1
		}
		if f == sc.hashed {
			v = hashKeyValue(v)
		}
		key = append(key, bson.E{Key: f, Value: v})
	}
	return sc.shardFor(key)
}

// equalityOn finds an equality on field in a filter: {f: v}, {f: {$eq: v}}
// or either inside a top-level $and. Arrays, regexes and operator
// documents are not equalities a shard key can target.
func equalityOn(filter bson.D, field string) (any, bool) {
	for _, e := range filter {
		if e.Key == "$and" {
			if a, ok := e.Value.(bson.A); ok {
				for _, x := range a {
					if d, ok := x.(bson.D); ok {
						if v, ok := equalityOn(d, field); ok {
							return v, true
						}
					}
				}
			}
			continue
		}
		if e.Key != field {
			continue
		}
		v := e.Value
		if d, ok := v.(bson.D); ok && len(d) > 0 && strings.HasPrefix(d[0].Key, "$") {
			if len(d) != 1 || d[0].Key != "$eq" {
				continue
			}
			v = d[0].Value
		}
		switch v.(type) {
		case bson.A, bson.Regex, bson.MinKey, bson.MaxKey:
			continue
		}
		return v, true
	}
	return nil, false
}
