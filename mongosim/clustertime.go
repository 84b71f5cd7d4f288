package mongosim

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// logicalClock is the deployment's cluster time. Replication is instant (one
// shared store), so it is also every member's last applied optime: each
// write takes a new timestamp from it, reads answer at its current value,
// and a client gossiping a later $clusterTime moves it forward (as mongod's
// vector clock does; mongod would also write a no-op so that the optime
// follows).
type logicalClock struct {
	mu   sync.Mutex
	now  func() time.Time
	last bson.Timestamp
	// gossip is the $clusterTime document of one cluster time, built
	// once for all the replies that carry that time (reads between two
	// writes all do).
	gossip atomic.Pointer[clusterTimeDoc]
}

// clusterTimeDoc is a reply's $clusterTime for the cluster time at, and at
// itself, both ready to go into a reply (boxed once).
type clusterTimeDoc struct {
	at       bson.Timestamp
	doc, opv any
	fields   [2]bson.E // doc's: in the same allocation
	// opTime is the opTime {ts: at, t: term} of a write at at as a reply
	// value (opTimeDoc; nil in a document gossipDoc built).
	term     int64
	opTime   any
	opFields [2]bson.E
}

// gossipDoc returns the $clusterTime document of at and at as a reply
// value. Replies never change a field's document in place, so the same
// one goes into many.
func (k *logicalClock) gossipDoc(at bson.Timestamp) *clusterTimeDoc {
	if g := k.gossip.Load(); g != nil && g.at == at {
		return g
	}
	g := newClusterTimeDoc(at)
	k.gossip.Store(g)
	return g
}

func newClusterTimeDoc(at bson.Timestamp) *clusterTimeDoc {
	v := any(at)
	g := &clusterTimeDoc{at: at, opv: v, fields: [2]bson.E{{Key: "clusterTime", Value: v}, {Key: "signature", Value: zeroSignatureValue}}}
	g.doc = bson.D(g.fields[:])
	return g
}

// opTimeDoc returns the opTime {ts, t: term} of a write at ts as a reply
// value. It is built with the $clusterTime document of ts (gossipDoc),
// which the write's reply carries too: one allocation for both.
func (k *logicalClock) opTimeDoc(ts bson.Timestamp, term int64) any {
	if g := k.gossip.Load(); g != nil && g.at == ts && g.opTime != nil && g.term == term {
		return g.opTime
	}
	g := newClusterTimeDoc(ts)
	g.term = term
	g.opFields = [2]bson.E{{Key: "ts", Value: g.opv}, {Key: "t", Value: term}}
	g.opTime = bson.D(g.opFields[:])
	k.gossip.Store(g)
	return g.opTime
}

func newLogicalClock(now func() time.Time) *logicalClock {
	k := &logicalClock{now: now}
	k.tick() // a fresh deployment already has a cluster time
	return k
}

// tick returns a new timestamp, later than every earlier one: the wall
// clock's seconds with an increment, as mongod's oplog timestamps are.
func (k *logicalClock) tick() bson.Timestamp { return k.tickN(1) }

// tickN takes n (>= 1) consecutive timestamps, as n ticks at one instant
// would, and returns the first; nextTick gives each of the others from the
// one before.
func (k *logicalClock) tickN(n int) bson.Timestamp {
	k.mu.Lock()
	defer k.mu.Unlock()
	first := bson.Timestamp{T: uint32(k.now().Unix()), I: 1}
	if first.T <= k.last.T {
		first = nextTick(k.last)
	}
	last := first
	for range n - 1 {
		last = nextTick(last)
	}
	k.last = last
	return first
}

// nextTick is the timestamp after ts within ts's second, or the next
// second's first when the increment is exhausted.
func nextTick(ts bson.Timestamp) bson.Timestamp {
	if ts.I < math.MaxUint32 {
		return bson.Timestamp{T: ts.T, I: ts.I + 1}
	}
	return bson.Timestamp{T: ts.T + 1, I: 1}
}

// current returns the latest timestamp handed out.
func (k *logicalClock) current() bson.Timestamp {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.last
}

// advance moves the clock to ts if ts is later (gossip from a client).
func (k *logicalClock) advance(ts bson.Timestamp) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.last.Before(ts) {
		k.last = ts
	}
}

// zeroSignature is the signature mongod puts on cluster times when it has
// no signing keys (a replica set without authentication): 20 zero bytes,
// keyId 0.
var zeroSignature = bson.D{
	{Key: "hash", Value: bson.Binary{Subtype: 0, Data: make([]byte, 20)}},
	{Key: "keyId", Value: int64(0)},
}

// zeroSignatureValue is zeroSignature as a reply value, boxed once.
var zeroSignatureValue any = zeroSignature

// maxClockDrift is how far ahead of the wall clock a gossiped cluster time
// may be (mongod's maxAcceptableLogicalClockDriftSecs default: one year).
const maxClockDrift = 365 * 24 * time.Hour

// gossipIn takes the $clusterTime a client sends: a later cluster time than
// the deployment's advances it. The signature is not checked (see
// COMPATIBILITY.md).
func (r *request) gossipIn() error {
	v, ok := r.get("$clusterTime")
	if !ok || r.cluster.setName == "" {
		return nil // a standalone keeps no cluster time
	}
	d, ok := v.(bson.D)
	if !ok {
		return typeErr("$clusterTime", "object", v)
	}
	ts, ok := lookupD(d, "clusterTime")
	if !ok {
		return cmderr.New(cmderr.NoSuchKey, "Missing expected field \"clusterTime\"")
	}
	t, ok := ts.(bson.Timestamp)
	if !ok {
		return typeErr("$clusterTime.clusterTime", "timestamp", ts)
	}
	if limit := r.now.Add(maxClockDrift).Unix(); int64(t.T) > limit {
		return cmderr.New(codeClusterTimeFailsRateLimiter, "New cluster time, %d, is too far from this node's wall clock time, %d.", t.T, r.now.Unix())
	}
	r.cluster.data.clusterClock.advance(t)
	return nil
}

// codeClusterTimeFailsRateLimiter: a gossiped cluster time too far ahead.
const codeClusterTimeFailsRateLimiter = 209

// withClusterTime appends $clusterTime and operationTime to a reply, as a
// replica-set member does on every reply (a standalone sends neither).
// opTime is the operation's time; zero means the current cluster time.
func (m *Member) withClusterTime(reply bson.D, opTime bson.Timestamp) bson.D {
	c := m.cluster
	if c.setName == "" {
		return reply
	}
	g := c.data.clusterClock.gossipDoc(c.data.clusterClock.current())
	opv := g.opv
	if !opTime.IsZero() && opTime != g.at {
		opv = opTime
	}
	reply = removeField(reply, "$clusterTime")
	reply = removeField(reply, "operationTime")
	return append(reply,
		bson.E{Key: "$clusterTime", Value: g.doc},
		bson.E{Key: "operationTime", Value: opv},
	)
}

// withWriteOpTime adds opTime {ts, t} and electionId before "ok", as mongod
// does on insert, update and delete replies of a replica-set primary.
func (m *Member) withWriteOpTime(reply bson.D, ts bson.Timestamp) bson.D {
	c := m.cluster
	if c.setName == "" {
		return reply
	}
	c.mu.Lock()
	term := c.term
	c.mu.Unlock()
	// The opTime built with the reply's $clusterTime (ts is the cluster
	// time the reply carries), and the term's electionId boxed once.
	reply = setField(reply, "opTime", c.data.clusterClock.opTimeDoc(ts, term))
	return setField(reply, "electionId", m.electionIDValue(term))
}

// termValue is a value for one term.
type termValue struct {
	term int64
	v    any
}

// electionIDValue is electionID(term) as a reply value.
func (m *Member) electionIDValue(term int64) any {
	if b := m.electionIDBox.Load(); b != nil && b.term == term {
		return b.v
	}
	b := &termValue{term: term, v: electionID(term)}
	m.electionIDBox.Store(b)
	return b.v
}

func removeField(d bson.D, key string) bson.D {
	for i := range d {
		if d[i].Key == key {
			return append(d[:i:i], d[i+1:]...)
		}
	}
	return d
}
