package mongosim

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// Transactions on a multi-shard deployment run when they stay on one
// shard: the first statement pins the transaction (lsid, txnNumber) to the
// shard it targets, every statement is relayed whole to that shard, and
// commitTransaction/abortTransaction go there too, through any router (the
// pin is shared, as mongos' recovery token finds the coordinator). A
// statement that would reach another shard, or several, fails with 238.

type txnPin struct {
	txnNumber int64
	shard     int
}

// routeTxn relays a statement of a transaction to its pinned shard.
func (r *Router) routeTxn(rq *request, cmd *command, out *outcome) (bson.D, error) {
	ss := r.cluster.sharding
	lsid, _ := rq.get("lsid")
	tv, _ := rq.get("txnNumber")
	txn, ok := tv.(int64)
	if lsid == nil || !ok {
		// The shard gives the error mongod gives (no session/txnNumber).
		return r.forwardTo(rq, cmd, out, 0)
	}
	key := value.Key(lsid)
	ss.mu.Lock()
	pin, pinned := ss.txnPins[key]
	ss.mu.Unlock()
	if pinned && pin.txnNumber != txn {
		pinned = false
	}
	if rq.name == "commitTransaction" || rq.name == "abortTransaction" {
		shard := 0
		if pinned {
			shard = pin.shard
		}
		return r.forwardTo(rq, cmd, out, shard)
	}
	shard, err := r.txnShard(rq)
	if err != nil {
		return nil, err
	}
	if pinned && shard >= 0 && shard != pin.shard {
		return nil, errShardedTxn("this statement targets " + ss.names[shard] + ", the transaction runs on " + ss.names[pin.shard])
	}
	if pinned {
		shard = pin.shard
	}
	if shard < 0 {
		shard = 0 // a statement that needs no particular shard
	}
	if !pinned {
		ss.mu.Lock()
		if ss.txnPins == nil {
			ss.txnPins = map[string]txnPin{}
		}
		ss.txnPins[key] = txnPin{txnNumber: txn, shard: shard}
		ss.mu.Unlock()
	}
	return r.forwardTo(rq, cmd, out, shard)
}

// txnShard is the one shard a statement in a transaction touches, -1 when
// any will do (getMore is relayed by its cursor's shard).
func (r *Router) txnShard(rq *request) (int, error) {
	ss := r.cluster.sharding
	if rq.name == "getMore" {
		id, _ := asInt64(rq.cmd[0].Value)
		if c := r.lookupCursor(id); c != nil && c.shard >= 0 {
			return c.shard, nil
		}
		return -1, nil
	}
	if rq.name == "bulkWrite" {
		return -1, errShardedTxn("client bulkWrite")
	}
	if rq.name == "aggregate" && ss.needsRouter(pipelineOf(rq)) {
		return -1, errShardedTxn("an aggregate naming other collections while some are sharded")
	}
	coll, _ := rq.cmd[0].Value.(string)
	if coll == "" || rq.db == "admin" {
		return ss.primaryOf(rq.db, false), nil
	}
	sc := ss.coll(rq.db + "." + coll)
	if sc == nil {
		return ss.primaryOf(rq.db, true), nil
	}
	var shards []int
	add := func(s ...int) {
		for _, x := range s {
			if !containsInt(shards, x) {
				shards = append(shards, x)
			}
		}
	}
	filterTargets := func(field string, d bson.D) {
		f, _ := lookupD(d, field)
		fd, _ := f.(bson.D)
		add(sc.targetShards(fd)...)
	}
	switch rq.name {
	case "insert":
		v, _ := rq.get("documents")
		arr, _ := v.(bson.A)
		for _, x := range arr {
			d, _ := x.(bson.D)
			key, err := sc.keyOfDoc(d)
			if err != nil {
				return -1, err
			}
			add(sc.shardFor(key))
		}
	case "update", "delete":
		field := map[string]string{"update": "updates", "delete": "deletes"}[rq.name]
		v, _ := rq.get(field)
		arr, _ := v.(bson.A)
		for _, x := range arr {
			d, _ := x.(bson.D)
			filterTargets("q", d)
		}
	case "find":
		filterTargets("filter", rq.cmd)
	case "count", "distinct":
		filterTargets("query", rq.cmd)
	case "findAndModify":
		filterTargets("query", rq.cmd)
	case "aggregate":
		var lead bson.D
		for _, st := range pipelineOf(rq) {
			d, _ := st.(bson.D)
			if len(d) != 1 || d[0].Key != "$match" {
				break
			}
			m, _ := d[0].Value.(bson.D)
			lead = append(lead, bson.E{Key: "$and", Value: bson.A{m}})
		}
		add(sc.targetShards(lead)...)
	default:
		return -1, cmderr.Unsupported(rq.name + " on a sharded collection in a transaction")
	}
	if len(shards) > 1 {
		names := make([]string, len(shards))
		for i, s := range shards {
			names[i] = ss.names[s]
		}
		return -1, errShardedTxn(rq.name + " on " + sc.ns + " reaches " + strings.Join(names, ", "))
	}
	if len(shards) == 0 {
		return -1, nil
	}
	return shards[0], nil
}

func containsInt(s []int, x int) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// recoveryPrimary is the primary of the shard a transaction command (doc,
// with its lsid and txnNumber) belongs to: the shard it is pinned to on
// several shards, else the one shard.
func (r *Router) recoveryPrimary(doc bson.D) *Member {
	if sh := r.pinnedShard(doc); sh != nil {
		return sh.Primary()
	}
	return r.cluster.Primary()
}

// pinnedShard is the shard doc's transaction is pinned to, nil when there
// is one shard or no pin.
func (r *Router) pinnedShard(doc bson.D) *Cluster {
	ss := r.cluster.sharding
	if ss == nil {
		return nil
	}
	lsid, _ := lookupD(doc, "lsid")
	tv, _ := lookupD(doc, "txnNumber")
	txn, _ := tv.(int64)
	ss.mu.Lock()
	pin, ok := ss.txnPins[value.Key(lsid)]
	ss.mu.Unlock()
	if !ok || pin.txnNumber != txn {
		return nil
	}
	return ss.shards[pin.shard]
}
