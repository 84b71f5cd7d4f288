package mongosim

import (
	"slices"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// Transactions on a multi-shard deployment, as mongos' transaction router
// runs them. A statement is routed as outside a transaction (by shard key,
// to one shard or several); each shard it reaches becomes a participant,
// the first time with startTransaction and the transaction's readConcern.
// The first participant a write reaches is the coordinator, named by the
// recoveryToken. A failed statement aborts the transaction on every
// participant. commitTransaction takes mongos' paths: no participant, one
// participant, all read-only, one writer (the readers commit first), or
// two-phase commit through the coordinator (shard_txn_coordinator.go).
//
// The routers share what they know of a transaction (shardSet.txns), so a
// commit retried through another router finds its participants, as the
// recoveryToken lets mongos find the coordinator.

// shardTxn is one transaction (lsid, txnNumber) as the routers track it.
type shardTxn struct {
	lsid   any // the lsid document
	key    string
	number int64

	mu           sync.Mutex
	readConcern  any // the first statement's, sent to each new participant
	participants []txnParticipant
	coordinator  int // the first participant that wrote; -1: none yet
}

type txnParticipant struct {
	shard int
	wrote bool
}

// txnFor returns the transaction rq belongs to, starting it when rq
// carries startTransaction; nil when the routers know no such transaction.
func (ss *shardSet) txnFor(rq *request) *shardTxn {
	lsid, _ := rq.get("lsid")
	n, _, _ := txnNumberOf(rq)
	key := value.Key(lsid)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if st, ok := rq.get("startTransaction"); ok && asBool(st) {
		if ss.txns == nil {
			ss.txns = map[string]*shardTxn{}
		}
		rc, _ := rq.get("readConcern")
		t := &shardTxn{lsid: lsid, key: key, number: n, readConcern: rc, coordinator: -1}
		ss.txns[key] = t
		return t
	}
	if t := ss.txns[key]; t != nil && t.number == n {
		return t
	}
	return nil
}

// routeTxn routes a statement, commitTransaction or abortTransaction of a
// transaction.
func (r *Router) routeTxn(rq *request, cmd *command, out *outcome) (bson.D, error) {
	if lsid, _ := rq.get("lsid"); lsid == nil {
		// The shard gives the error mongod gives (no session/txnNumber).
		return r.forwardTo(rq, cmd, out, 0)
	}
	if _, ok, _ := txnNumberOf(rq); !ok {
		return r.forwardTo(rq, cmd, out, 0)
	}
	st := r.cluster.sharding.txnFor(rq)
	switch {
	case st == nil && rq.name == "commitTransaction":
		return r.recoverShardedCommit(rq)
	case st == nil:
		// No statement of it reached the routing (a fail point answered
		// it): shard 0 answers NoSuchTransaction, with the cluster time
		// mongos' own reply would carry.
		return r.forwardTo(rq, cmd, out, 0)
	case rq.name == "commitTransaction":
		return r.commitShardTxn(rq, cmd, out, st)
	case rq.name == "abortTransaction":
		return r.abortShardTxn(rq, cmd, out, st)
	case rq.name == "bulkWrite":
		return nil, cmderr.Unsupported("the client-level bulkWrite in a transaction on a multi-shard deployment")
	}
	rq.stxn = st
	reply, err := r.routeStatement(rq, cmd, out)
	if err != nil || !replyOK(reply) || hasField(reply, "writeErrors") {
		// mongos aborts the transaction on every participant when a
		// statement fails, so no shard keeps holding its documents.
		r.sendAbort(rq, st)
	}
	return reply, err
}

func hasField(d bson.D, key string) bool {
	_, ok := lookupD(d, key)
	return ok
}

// forShard rewrites a statement of st for shard i and records i as a
// participant: its first statement there starts the transaction (with the
// transaction's readConcern), later ones continue it.
func (st *shardTxn) forShard(i int, doc bson.D) bson.D {
	c := lookupCommand(doc[0].Key)
	wrote := c != nil && c.write
	st.mu.Lock()
	k := slices.IndexFunc(st.participants, func(p txnParticipant) bool { return p.shard == i })
	first := k < 0
	if first {
		st.participants = append(st.participants, txnParticipant{shard: i})
		k = len(st.participants) - 1
	}
	if wrote {
		st.participants[k].wrote = true
		if st.coordinator < 0 {
			st.coordinator = i
		}
	}
	rc := st.readConcern
	st.mu.Unlock()
	doc = without(doc, "startTransaction", "readConcern", "autocommit", "txnNumber", "lsid")
	doc = append(doc, bson.E{Key: "lsid", Value: st.lsid}, bson.E{Key: "txnNumber", Value: st.number}, bson.E{Key: "autocommit", Value: false})
	if first {
		doc = append(doc, bson.E{Key: "startTransaction", Value: true})
		if rc != nil {
			doc = append(doc, bson.E{Key: "readConcern", Value: rc})
		}
	}
	return doc
}

// snapshot returns the participants and the coordinator.
func (st *shardTxn) snapshot() ([]txnParticipant, int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return slices.Clone(st.participants), st.coordinator
}

// recoveryShard is the shard a recoveryToken names: the coordinator, or
// the first participant of a read-only transaction; -1 before any.
func (st *shardTxn) recoveryShard() int {
	parts, coord := st.snapshot()
	if coord >= 0 {
		return coord
	}
	if len(parts) > 0 {
		return parts[0].shard
	}
	return -1
}

// recoveryToken is the token a reply in rq's transaction carries, nil
// outside one.
func (r *Router) shardedRecoveryToken(rq *request) bson.D {
	st := rq.stxn
	if st == nil {
		if _, ok := rq.get("autocommit"); !ok {
			return nil
		}
		st = r.cluster.sharding.txnFor(rq)
	}
	if st == nil {
		return nil
	}
	i := st.recoveryShard()
	if i < 0 {
		return nil
	}
	return bson.D{{Key: "recoveryShardId", Value: r.cluster.sharding.shards[i].setName}}
}

// commitShardTxn commits st by mongos' commit paths.
func (r *Router) commitShardTxn(rq *request, cmd *command, out *outcome, st *shardTxn) (bson.D, error) {
	ss := r.cluster.sharding
	parts, coord := st.snapshot()
	var readers, writers []int
	for _, p := range parts {
		if p.wrote {
			writers = append(writers, p.shard)
		} else {
			readers = append(readers, p.shard)
		}
	}
	switch {
	case len(parts) == 0:
		return bson.D{{Key: "ok", Value: 1.0}}, nil // nothing ran: nothing to commit
	case len(parts) == 1:
		return r.forwardTo(rq, cmd, out, parts[0].shard)
	case len(writers) <= 1:
		// Read-only participants commit first; the one writer last, so
		// its commit is the transaction's.
		for i, s := range append(readers, writers...) {
			reply, err := r.forwardTo(rq, cmd, out, s)
			if err != nil || !replyOK(reply) || i == len(parts)-1 {
				return reply, err
			}
		}
	}
	shards := make([]int, len(parts))
	for i, p := range parts {
		shards[i] = p.shard
	}
	return ss.coordinateCommit(rq, st.lsid, st.number, coord, shards)
}

// abortShardTxn aborts st on every participant: ok when one aborted, else
// the first error that is not NoSuchTransaction, else NoSuchTransaction.
// One participant answers as it would alone.
func (r *Router) abortShardTxn(rq *request, cmd *command, out *outcome, st *shardTxn) (bson.D, error) {
	parts, _ := st.snapshot()
	if len(parts) == 0 {
		// No statement reached a shard: shard 0 answers NoSuchTransaction
		// (with the cluster time mongos' own reply would carry).
		return r.forwardTo(rq, cmd, out, 0)
	}
	if co := r.cluster.sharding.coordination(st.lsid, st.number); co != nil && co.decided() == decisionCommit {
		return nil, cmderr.New(cmderr.TransactionCommitted, "Transaction with { txnNumber: %d } has been committed.", st.number)
	}
	if len(parts) == 1 {
		return r.forwardTo(rq, cmd, out, parts[0].shard)
	}
	var firstErr, noSuch bson.D
	aborted := false
	for _, p := range parts {
		reply, err := r.shardCmd(rq, p.shard, txnCommand("abortTransaction", st.lsid, st.number), nil, true, true)
		switch {
		case err != nil:
			return nil, err
		case replyOK(reply):
			aborted = true
		default:
			if code, _ := replyCode(reply); code == cmderr.NoSuchTransaction {
				noSuch = reply
			} else if firstErr == nil {
				firstErr = reply
			}
		}
	}
	switch {
	case firstErr != nil:
		return nil, &shardError{reply: firstErr}
	case aborted:
		return bson.D{{Key: "ok", Value: 1.0}}, nil
	}
	return nil, &shardError{reply: noSuch}
}

// sendAbort aborts st on every participant, ignoring the answers.
func (r *Router) sendAbort(rq *request, st *shardTxn) {
	parts, _ := st.snapshot()
	for _, p := range parts {
		_, _ = r.shardCmd(rq, p.shard, txnCommand("abortTransaction", st.lsid, st.number), nil, true, false)
	}
}

// statementFor is forShard on an encoded command; control commands the
// router sends itself pass unchanged.
func (st *shardTxn) statementFor(i int, body bson.Raw) (bson.Raw, error) {
	var doc bson.D
	if err := bson.Unmarshal(body, &doc); err != nil || len(doc) == 0 {
		return nil, cmderr.New(cmderr.BadValue, "bad command for the shard: %v", err)
	}
	if isTxnControl(doc[0].Key) {
		return body, nil
	}
	out, err := bson.Marshal(st.forShard(i, doc))
	if err != nil {
		return nil, cmderr.New(cmderr.BadValue, "%v", err)
	}
	return out, nil
}

// recoverShardedCommit answers a commitTransaction of a transaction this
// router did not route, from its recoveryToken: the coordinator shard's
// two-phase commit when it has one (joined, and resumed if stopped), else
// the recovery shard's own outcome: committed, or aborted now so that a
// router that never saw the transaction never commits it.
func (r *Router) recoverShardedCommit(rq *request) (bson.D, error) {
	ss := r.cluster.sharding
	lsid, _ := rq.get("lsid")
	n, _, _ := txnNumberOf(rq)
	if co := ss.coordination(lsid, n); co != nil {
		return co.await(rq.ctx)
	}
	tok, _ := rq.get("recoveryToken")
	d, _ := tok.(bson.D)
	id, _ := lookupD(d, "recoveryShardId")
	shard := slices.IndexFunc(ss.shards, func(c *Cluster) bool { return c.setName == id })
	if shard < 0 {
		return nil, cmderr.New(cmderr.NoSuchTransaction, "Transaction %d: the recoveryToken names no shard of this cluster", n)
	}
	reply, err := r.shardCmd(rq, shard, txnCommand("abortTransaction", lsid, n), nil, true, true)
	if err != nil {
		return nil, err
	}
	code, failed := replyCode(reply)
	switch {
	case failed && code == cmderr.TransactionCommitted:
		return bson.D{{Key: "ok", Value: 1.0}}, nil
	case !failed, code == cmderr.NoSuchTransaction:
		return nil, cmderr.New(cmderr.NoSuchTransaction, "Transaction %d was aborted: the recovery shard has no commit decision for it", n)
	}
	return nil, &shardError{reply: reply}
}
