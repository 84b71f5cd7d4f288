package mongosim

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// A multi-shard deployment (Options.Shards > 1): the Cluster itself is
// shard 0 and shardSet.shards[1:] are further replica sets, each a Cluster
// of its own. The routers hold the config metadata in process (the
// catalog below stands for the config servers): each database's primary
// shard and each sharded collection's key and chunks. Routing follows
// mongos: unsharded collections live on their database's primary shard,
// sharded ones are split by chunk; see shard_write.go and shard_read.go.

// shardSet is the sharding state of a multi-shard Cluster.
type shardSet struct {
	shards []*Cluster // shards[0] is the top Cluster
	names  []string   // shard ids: "shard0", "shard1", ...

	mu        sync.Mutex
	dbs       map[string]*shardedDB
	colls     map[string]*shardedColl // by namespace
	cursors   map[int64]*routerCursor
	lastSweep time.Time
	txns      map[string]*shardTxn      // by lsid: the session's latest transaction (shard_txn.go)
	coords    map[string]*coordination  // the coordinators' commit decisions (shard_txn_coordinator.go)
	hook      atomic.Pointer[coordHook] // tests: interrupts two-phase commits
	moves     map[string]movedWrite     // by lsid: a retryable write that moved a document (shard_keychange_router.go)
	famPins   map[string]famPin         // by lsid: a retryable findAndModify's target (shard_write.go)
}

type shardedDB struct {
	primary int
	uuid    bson.Binary
	ts      bson.Timestamp
}

// shardedColl is a sharded collection's metadata. chunks cover
// [MinKey, MaxKey) of the key space in order; with a hashed key the space
// is the key's hash.
type shardedColl struct {
	ns     string
	key    bson.D
	fields []string
	hashed string // the hashed field, "" for a range key
	unique bool
	epoch  bson.ObjectID
	uuid   bson.Binary
	ts     bson.Timestamp
	chunks atomic.Pointer[[]chunk] // replaced whole by split and moveChunk
}

func (sc *shardedColl) chunkList() []chunk { return *sc.chunks.Load() }

type chunk struct {
	min, max bson.D
	shard    int
	version  int64
}

// routerCursor is a cursor a router answers getMore for: either a shard's
// cursor the router relays (shard >= 0, same id as on the shard) or a
// merged result the router holds (shard -1).
type routerCursor struct {
	router   int
	shard    int
	ns       string
	mu       sync.Mutex
	docs     []bson.D
	stream   *mergedStream // a change stream merged from the shards' (shard_changestream.go)
	lastUsed atomic.Int64  // unix nanoseconds
}

// startShards launches shards 1..M-1 next to the Cluster (shard 0). Their
// members listen on Port+Members+Routers+(i-1)*Members+j when Port is set.
func (c *Cluster) startShards() error {
	o := c.opts
	if o.Shards <= 1 {
		return nil
	}
	ss := &shardSet{
		shards:  []*Cluster{c},
		names:   []string{"shard0"},
		dbs:     map[string]*shardedDB{},
		colls:   map[string]*shardedColl{},
		cursors: map[int64]*routerCursor{},
	}
	c.sharding = ss
	for i := 1; i < o.Shards; i++ {
		so := o
		so.Shards, so.Routers = 0, 0
		so.ReplicaSetName = o.ReplicaSetName + "-shard" + strconv.Itoa(i)
		so.Limiter = LimiterOptions{}
		if o.Port != 0 {
			so.Port = o.Port + o.Members + o.Routers + (i-1)*o.Members
		}
		so.Seed = o.Seed + int64(i)
		// One cluster time for every shard, as gossip keeps a real
		// cluster's clocks in step: change events order across shards.
		so.clusterClock = c.data.clusterClock
		sc, err := Launch(so)
		if err != nil {
			return fmt.Errorf("mongosim: shard %d: %w", i, err)
		}
		if sc.auth != nil {
			sc.auth.trusted = c.isRouterConn
		}
		ss.shards = append(ss.shards, sc)
		ss.names = append(ss.names, "shard"+strconv.Itoa(i))
	}
	return nil
}

func (c *Cluster) closeShards() []error {
	if c.sharding == nil {
		return nil
	}
	var errs []error
	for i, sc := range c.sharding.shards[1:] {
		if err := sc.Close(); err != nil {
			errs = append(errs, fmt.Errorf("shard %d: %w", i+1, err))
		}
	}
	return errs
}

// Shards returns the deployment's shards, each a replica set: shard 0 is
// the Cluster itself (its Members and Primary), the others are Clusters of
// their own whose Members a test may connect to directly. Without
// Options.Shards > 1 it returns just the Cluster.
func (c *Cluster) Shards() []*Cluster {
	if c.sharding == nil {
		return []*Cluster{c}
	}
	return slices.Clone(c.sharding.shards)
}

// ReplicaSetURI is a connection string to the members as a replica set,
// even when URI lists routers: a shard's own URI.
func (c *Cluster) ReplicaSetURI() string {
	var hosts []string
	for _, m := range c.Members() {
		hosts = append(hosts, m.addr)
	}
	var params []string
	if c.setName != "" {
		params = append(params, "replicaSet="+c.setName)
	}
	return "mongodb://" + strings.Join(hosts, ",") + "/" + joinParams(params)
}

// shardHost is a shard's host string as listShards reports it.
func shardHost(sc *Cluster) string {
	var hosts []string
	for _, m := range sc.Members() {
		hosts = append(hosts, m.addr)
	}
	return sc.setName + "/" + strings.Join(hosts, ",")
}
