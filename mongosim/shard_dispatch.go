package mongosim

import (
	"context"
	"crypto/md5"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
	"github.com/sturdy-go/sturdy/wire"
)

// A multi-shard deployment (Options.Shards > 1): the Cluster itself is
// shard 0 and shardSet.shards[1:] are further replica sets, each a Cluster
// of its own. The routers hold the config metadata in process (the
// catalog below stands for the config servers): each database's primary
// shard and each sharded collection's key and chunks. Routing follows
// mongos: unsharded collections live on their database's primary shard,
// sharded ones are split by chunk; see shardwrite.go and shardread.go.

// shardSet is the sharding state of a multi-shard Cluster.
type shardSet struct {
	shards []*Cluster // shards[0] is the top Cluster
	names  []string   // shard ids: "shard0", "shard1", ...

	mu        sync.Mutex
	dbs       map[string]*shardedDB
	colls     map[string]*shardedColl // by namespace
	cursors   map[int64]*routerCursor
	lastSweep time.Time
	txnPins   map[string]txnPin // by lsid: the shard a transaction runs on (shardtxn.go)
	famPins   map[string]famPin // by lsid: a retryable findAndModify's target (shardwrite.go)
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
	lastUsed atomic.Int64 // unix nanoseconds
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

// --- metadata ---

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

// hashKeyValue is the hashed shard key value: the first 8 bytes of the
// MD5 of the value's canonical key (equal numbers of any type hash alike,
// as on mongod, though the values differ from mongod's hashes).
func hashKeyValue(v any) int64 {
	sum := md5.Sum([]byte(keyOf(v)))
	return int64(binary.LittleEndian.Uint64(sum[:8]))
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
	for _, ch := range sc.chunkList() {
		if compareKeys(key, ch.min) >= 0 && compareKeys(key, ch.max) < 0 {
			return ch.shard
		}
	}
	cs := sc.chunkList()
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

// --- shard round trips ---

// shardError carries a shard's error reply, relayed to the client as is.
type shardError struct{ reply bson.D }

func (e *shardError) Error() string {
	v, _ := lookupD(e.reply, "errmsg")
	return fmt.Sprintf("shard error: %v", v)
}

// shardCmd sends cmd to shard i: to its primary for writes, else as the
// client's read preference selects. Reads and retryable writes are retried
// on a new primary as forward does. The reply is returned even when it is
// an error reply; err is a connection failure already turned into the
// error mongos reports.
func (r *Router) shardCmd(rq *request, i int, cmd bson.D, seqs []wire.DocumentSequence, write, retry bool) (bson.D, error) {
	body, err := bson.Marshal(cmd)
	if err != nil {
		return nil, cmderr.New(cmderr.BadValue, "%v", err)
	}
	return r.shardRaw(rq, i, body, seqs, write, retry)
}

func (r *Router) shardRaw(rq *request, i int, body bson.Raw, seqs []wire.DocumentSequence, write, retry bool) (bson.D, error) {
	sc := r.cluster.sharding.shards[i]
	var (
		reply   bson.D
		lastErr error
	)
	for attempt := 1; attempt <= routerShardAttempts; attempt++ {
		reply, lastErr = r.shardTrip(rq, sc, body, seqs, write)
		if lastErr == nil {
			code, _ := replyCode(reply)
			if !retry || !slices.Contains(routerRetryCodes, code) || attempt == routerShardAttempts {
				break
			}
		} else if !retry || rq.ctx.Err() != nil {
			break
		}
		if !awaitShardPrimary(rq.ctx, sc) {
			break
		}
	}
	if lastErr != nil {
		if rq.ctx.Err() != nil {
			return nil, rq.ctx.Err()
		}
		if errors.Is(lastErr, errNoTarget) {
			return nil, &cmderr.Error{Code: codeFailedToSatisfyReadPreference, Name: "FailedToSatisfyReadPreference",
				Message: fmt.Sprintf("Could not find host matching read preference for set %s", sc.setName)}
		}
		return nil, cmderr.New(cmderr.HostUnreachable, "Connection to shard %s failed: %v", r.cluster.sharding.names[i], lastErr)
	}
	return deleteField(reply, "topologyVersion"), nil
}

func awaitShardPrimary(ctx context.Context, sc *Cluster) bool {
	deadline := time.Now().Add(routerPrimaryWait)
	for {
		if sc.Primary() != nil {
			return true
		}
		if time.Now().After(deadline) || !sleepCtx(ctx, 10*time.Millisecond) {
			return false
		}
	}
}

// shardTarget picks the member of shard sc for rq as mongos does from its
// $readPreference: the primary for mode primary (the default) and for
// every write, a secondary for secondary, either for the preferred modes
// and nearest.
func (r *Router) shardTarget(rq *request, sc *Cluster, write bool) *Member {
	mode := "primary"
	if rp, ok := rq.get("$readPreference"); ok {
		if d, ok := rp.(bson.D); ok {
			if m, ok := lookupD(d, "mode"); ok {
				mode, _ = m.(string)
			}
		}
	}
	primary := sc.Primary()
	if write || mode == "primary" {
		return primary
	}
	var secondaries []*Member
	for _, m := range sc.Members() {
		if m != primary {
			secondaries = append(secondaries, m)
		}
	}
	pick := func() *Member {
		if len(secondaries) == 0 {
			return nil
		}
		return secondaries[int(r.commands.Load())%len(secondaries)]
	}
	switch mode {
	case "primaryPreferred":
		if primary != nil {
			return primary
		}
		return pick()
	case "secondary":
		return pick()
	default:
		if m := pick(); m != nil {
			return m
		}
		return primary
	}
}

func (r *Router) shardTrip(rq *request, sc *Cluster, body bson.Raw, seqs []wire.DocumentSequence, write bool) (bson.D, error) {
	p := r.shardTarget(rq, sc, write)
	if p == nil {
		return nil, errNoTarget
	}
	return r.exchange(rq.ctx, p, rq.raw.RequestID, &wire.Msg{Body: body, Sequences: seqs})
}

func readShardReply(nc net.Conn) (bson.D, error) {
	raw, err := wire.ReadMessage(nc, nil, 0)
	if err != nil {
		return nil, err
	}
	m, err := wire.Decode(raw, 0)
	if err != nil || m.Msg == nil {
		return nil, fmt.Errorf("bad reply from the shard: %v", err)
	}
	var reply bson.D
	if err := bson.Unmarshal(m.Msg.Body, &reply); err != nil {
		return nil, fmt.Errorf("bad reply from the shard: %w", err)
	}
	return reply, nil
}

// --- dispatch ---

// routeSharded answers one command on a multi-shard deployment.
func (r *Router) routeSharded(rq *request, cmd *command, out *outcome, wce bson.D) {
	defer func() {
		if p := recover(); p != nil {
			r.cluster.logf("mongosim router %s: routing %s panicked: %v\n%s", r.addr, rq.name, p, debug.Stack())
			if !rq.raw.Replied() {
				_ = rq.send(errorDoc(cmderr.New(codeInternalError, "mongosim internal error in %s: %v", rq.name, p), nil))
			}
		}
	}()
	reply, err := r.route(rq, cmd, out)
	if err != nil {
		var se *shardError
		switch {
		case errors.As(err, &se):
			reply = se.reply
		case rq.ctx.Err() != nil:
			_ = rq.hangup()
			return
		default:
			r.replyErr(rq, out, err)
			return
		}
	}
	if _, ok := lookupD(reply, "ok"); !ok {
		reply = append(reply, bson.E{Key: "ok", Value: 1.0})
	}
	var token bson.D
	if sh := r.pinnedShard(rq.cmd); sh != nil {
		token = bson.D{{Key: "recoveryShardId", Value: sh.setName}}
	}
	r.reply(rq, out, reply, wce, token)
}

// errShardedTxn: a transaction spanning shards needs mongos' two-phase
// commit, which mongosim does not implement.
func errShardedTxn(why string) error {
	return cmderr.New(cmderr.NotImplemented, "mongosim does not support transactions spanning shards (%s); a transaction must stay on one shard", why)
}

// route runs rq and returns the reply to send.
func (r *Router) route(rq *request, cmd *command, out *outcome) (bson.D, error) {
	ss := r.cluster.sharding
	if len(rq.cmd) == 0 {
		return r.forwardTo(rq, cmd, out, 0) // the shard answers the empty command
	}
	if _, ok := rq.get("autocommit"); ok || rq.name == "commitTransaction" || rq.name == "abortTransaction" {
		return r.routeTxn(rq, cmd, out)
	}
	switch strings.ToLower(rq.name) {
	case "enablesharding":
		return r.enableSharding(rq)
	case "shardcollection":
		return r.shardCollection(rq)
	case "listshards":
		return r.listShards(rq)
	case "split":
		return r.splitChunk(rq)
	case "movechunk":
		return r.moveChunk(rq)
	case "getmore":
		return r.getMore(rq)
	case "killcursors":
		return r.killCursors(rq)
	case "listdatabases":
		return r.listDatabases(rq)
	case "dropdatabase":
		return r.dropDatabase(rq)
	case "endsessions", "killsessions", "killallsessions", "killallsessionsbypattern", "refreshsessions":
		return r.broadcastAdmin(rq)
	case "bulkwrite":
		return r.bulkWrite(rq, cmd, out)
	case "renamecollection":
		// An admin command naming its namespaces: it runs on the source
		// database's primary shard, which must also be the target's.
		from, _ := rq.cmd[0].Value.(string)
		tov, _ := rq.get("to")
		to, _ := tov.(string)
		if ss.coll(from) != nil || ss.coll(to) != nil {
			return nil, cmderr.Unsupported("renameCollection of a sharded collection")
		}
		fromDB, _, _ := strings.Cut(from, ".")
		toDB, _, _ := strings.Cut(to, ".")
		p := ss.primaryOf(fromDB, false)
		ss.mu.Lock()
		if ss.dbs[toDB] == nil && toDB != "admin" && toDB != "config" && toDB != "local" {
			ss.dbs[toDB] = &shardedDB{primary: p, uuid: newUUID(), ts: bson.Timestamp{T: uint32(time.Now().Unix()), I: 1}}
		}
		ss.mu.Unlock()
		if ss.primaryOf(toDB, false) != p {
			return nil, cmderr.Unsupported("renameCollection between databases on different primary shards")
		}
		return r.forwardTo(rq, cmd, out, p)
	}
	if rq.db == "config" && rq.name == "find" {
		if reply, ok, err := r.configFind(rq); ok {
			return reply, err
		}
	}
	coll, _ := rq.cmd[0].Value.(string)
	if coll != "" && cmd != nil {
		if sc := ss.coll(rq.db + "." + coll); sc != nil {
			return r.routeShardedColl(rq, cmd, out, sc)
		}
	}
	if rq.name == "aggregate" && coll != "" && !isChangeStream(pipelineOf(rq)) && ss.needsRouter(pipelineOf(rq)) {
		return r.routerAggregate(rq, cmd, out, ss.unshardedColl(rq.db, coll), true)
	}
	if rq.name == "aggregate" && isChangeStream(pipelineOf(rq)) && coll == "" {
		return nil, cmderr.Unsupported("database- or cluster-wide change streams on a multi-shard deployment")
	}
	create := cmd != nil && (cmd.write || rq.name == "create" || rq.name == "createIndexes")
	return r.forwardTo(rq, cmd, out, ss.primaryOf(rq.db, create))
}

// forwardTo relays the command as received to shard i, remembering a
// cursor it opens so getMore finds its shard.
func (r *Router) forwardTo(rq *request, cmd *command, out *outcome, i int) (bson.D, error) {
	write := cmd == nil || cmd.write
	reply, err := r.shardRaw(rq, i, rq.raw.Command, rq.raw.Sequences, write, routerRetries(rq.name, cmd, out.hasTxnNumber))
	if err != nil {
		return nil, err
	}
	r.trackCursor(reply, i)
	return reply, nil
}

// trackCursor records a shard cursor opened by a relayed reply.
func (r *Router) trackCursor(reply bson.D, shard int) {
	cur, ok := lookupD(reply, "cursor")
	if !ok {
		return
	}
	d, _ := cur.(bson.D)
	idv, _ := lookupD(d, "id")
	id, _ := asInt64(idv)
	if id == 0 {
		return
	}
	ns, _ := lookupD(d, "ns")
	s, _ := ns.(string)
	ss := r.cluster.sharding
	c := &routerCursor{router: r.index, shard: shard, ns: s}
	c.lastUsed.Store(time.Now().UnixNano())
	ss.mu.Lock()
	ss.sweepCursors()
	ss.cursors[id] = c
	ss.mu.Unlock()
}

func pipelineOf(rq *request) bson.A {
	v, _ := rq.get("pipeline")
	a, _ := v.(bson.A)
	return a
}

// withField returns a copy of d with key set to v (appended if absent).
func withField(d bson.D, key string, v any) bson.D {
	out := slices.Clone(d)
	for i := range out {
		if out[i].Key == key {
			out[i].Value = v
			return out
		}
	}
	return append(out, bson.E{Key: key, Value: v})
}

// without returns a copy of d without the named fields.
func without(d bson.D, keys ...string) bson.D {
	out := make(bson.D, 0, len(d))
	for _, e := range d {
		if !slices.Contains(keys, e.Key) {
			out = append(out, e)
		}
	}
	return out
}

// forEachShard sends cmd to each of shards in turn and returns the
// replies; the first error reply ends it as a shardError.
func (r *Router) forEachShard(rq *request, shards []int, cmd bson.D, write, retry bool) ([]bson.D, error) {
	replies := make([]bson.D, 0, len(shards))
	for _, i := range shards {
		reply, err := r.shardCmd(rq, i, cmd, nil, write, retry)
		if err != nil {
			return nil, err
		}
		if !replyOK(reply) {
			return nil, &shardError{reply: reply}
		}
		replies = append(replies, reply)
	}
	return replies, nil
}

func allShards(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// --- admin commands ---

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
	if rq.db != "admin" {
		return nil, cmderr.New(cmderr.Unauthorized, "shardCollection may only be run against the admin database.")
	}
	ns, _ := rq.cmd[0].Value.(string)
	db, coll, ok := strings.Cut(ns, ".")
	if !ok || db == "" || coll == "" {
		return nil, cmderr.New(cmderr.InvalidNamespace, "Invalid namespace specified '%s'", ns)
	}
	if db == "admin" || db == "config" || db == "local" || strings.HasPrefix(coll, "system.") {
		return nil, cmderr.New(cmderr.IllegalOperation, "can't shard %s", ns)
	}
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
	ss := r.cluster.sharding
	if old := ss.coll(ns); old != nil {
		if compareKeys(old.key, key) == 0 && len(old.key) == len(key) && old.key[0].Key == key[0].Key {
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
	minKey, maxKey := make(bson.D, 0, len(key)), make(bson.D, 0, len(key))
	for _, f := range sc.fields {
		minKey = append(minKey, bson.E{Key: f, Value: bson.MinKey{}})
		maxKey = append(maxKey, bson.E{Key: f, Value: bson.MaxKey{}})
	}
	nshards := len(ss.shards)
	var chunks []chunk
	if sc.hashed != "" && n == 0 {
		// One chunk per shard over the int64 hash space.
		lo := minKey
		step := uint64(math.MaxUint64) / uint64(nshards)
		for i := 0; i < nshards; i++ {
			hi := maxKey
			if i < nshards-1 {
				bound := int64(uint64(1)<<63 + uint64(i+1)*step)
				hi = slices.Clone(minKey)
				for j := range hi {
					hi[j].Value = bson.MinKey{}
					if sc.fields[j] == sc.hashed {
						hi[j].Value = bound
					}
				}
				if sc.fields[0] != sc.hashed {
					// A compound key with a non-leading hashed field
					// keeps the whole space on one chunk.
					break
				}
			}
			chunks = append(chunks, chunk{min: lo, max: hi, shard: (primary + i) % nshards, version: 1})
			lo = hi
		}
		if len(chunks) < nshards || compareKeys(chunks[len(chunks)-1].max, maxKey) != 0 {
			chunks = []chunk{{min: minKey, max: maxKey, shard: primary, version: 1}}
		}
	} else {
		chunks = []chunk{{min: minKey, max: maxKey, shard: primary, version: 1}}
	}
	sc.chunks.Store(&chunks)
	// Every shard gets the collection and the shard key index (mongod
	// requires one; on an empty collection shardCollection creates it),
	// and learns the shard key so updates cannot change it.
	idx := bson.D{{Key: "key", Value: key}, {Key: "name", Value: indexName(key)}}
	if unique {
		idx = append(idx, bson.E{Key: "unique", Value: true})
	}
	for i := range ss.shards {
		reply, err := r.shardCmd(rq, i, bson.D{{Key: "createIndexes", Value: coll}, {Key: "indexes", Value: bson.A{idx}}, {Key: "$db", Value: db}}, nil, true, true)
		if err != nil {
			return nil, err
		}
		if !replyOK(reply) {
			return nil, &shardError{reply: reply}
		}
		ss.shards[i].data.setShardKey(db, coll, sc.fields)
	}
	ss.mu.Lock()
	if ss.colls[ns] == nil {
		ss.colls[ns] = sc
	}
	ss.mu.Unlock()
	return bson.D{{Key: "collectionsharded", Value: ns}, {Key: "collectionUUID", Value: sc.uuid}, {Key: "ok", Value: 1.0}}, nil
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
			delete(ss.txnPins, keyOf(id))
			delete(ss.famPins, keyOf(id))
		}
		ss.mu.Unlock()
	}
	if _, err := r.forEachShard(rq, allShards(len(ss.shards)), rq.cmd, false, false); err != nil {
		return nil, err
	}
	return bson.D{{Key: "ok", Value: 1.0}}, nil
}

// bulkWrite (the client-level command) is relayed whole when its
// namespaces are unsharded and on one primary shard, else split by shard.
func (r *Router) bulkWrite(rq *request, cmd *command, out *outcome) (bson.D, error) {
	ss := r.cluster.sharding
	v, _ := rq.get("nsInfo")
	arr, _ := v.(bson.A)
	target := -1
	for _, x := range arr {
		d, _ := x.(bson.D)
		nsv, _ := lookupD(d, "ns")
		ns, _ := nsv.(string)
		db, _, _ := strings.Cut(ns, ".")
		p := ss.primaryOf(db, true)
		if ss.coll(ns) != nil || (target >= 0 && p != target) {
			return r.shardedBulkWrite(rq) // shardbulk.go
		}
		target = p
	}
	if target < 0 {
		target = 0
	}
	return r.forwardTo(rq, cmd, out, target)
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
