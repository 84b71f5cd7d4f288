package mongosim

import (
	"context"
	"slices"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/wire"
)

// A router's part in sharded transactions, as mongos' transaction router:
// it remembers the transactions it routed, so that a statement of a
// transaction started on another mongos fails with NoSuchTransaction (which
// is why drivers pin a transaction to its mongos); it returns a
// recoveryToken with every successful reply in a transaction; and a
// commitTransaction it did not route is answered from the recovery shard
// when the command carries that token.

// routerTxnLimit bounds the sessions a router remembers: past it the
// oldest half is forgotten (their transactions then fail as unknown on this
// router, as after a mongos restart).
const routerTxnLimit = 100_000

// routerTxns are the transactions a router routed: the latest txnNumber per
// session id. The zero value is ready to use.
type routerTxns struct {
	mu  sync.Mutex
	m   map[string]routedTxn
	seq uint64
}

type routedTxn struct {
	number int64
	seq    uint64 // insertion order, for trimming
}

func (t *routerTxns) begin(lsid []byte, n int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]routedTxn{}
	}
	if len(t.m) >= routerTxnLimit {
		cut := t.seq - routerTxnLimit/2
		for k, v := range t.m {
			if v.seq < cut {
				delete(t.m, k)
			}
		}
	}
	t.seq++
	t.m[string(lsid)] = routedTxn{number: n, seq: t.seq}
}

func (t *routerTxns) known(lsid []byte, n int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	rt, ok := t.m[string(lsid)]
	return ok && rt.number == n
}

func (t *routerTxns) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.m = nil
}

// recoveryToken is what a router returns in a transaction: the shard that
// can tell the transaction's outcome (with one shard, that shard).
func (r *Router) recoveryToken() bson.D {
	return bson.D{{Key: "recoveryShardId", Value: r.cluster.setName}}
}

// txnAction is what the router does with a command of a transaction.
type txnAction int

const (
	txnForward  txnAction = iota // route it to the shard
	txnRecover                   // a commit of a transaction routed elsewhere: ask the recovery shard
	txnAnswered                  // an error was sent
)

// checkTxn applies mongos' transaction router to a command that carried
// autocommit: false: startTransaction begins the transaction on this
// router; a later statement of a transaction this router did not begin is
// NoSuchTransaction; a commit or abort of one is recovered with its
// recoveryToken, or NoSuchTransaction without one.
func (r *Router) checkTxn(rq *request, out *outcome) txnAction {
	lsid, err := lsidOf(rq)
	if err != nil {
		r.replyErr(rq, out, err)
		return txnAnswered
	}
	n, _, _ := txnNumberOf(rq)
	if st, ok := rq.get("startTransaction"); ok && asBool(st) {
		r.txns.begin(lsid, n)
		return txnForward
	}
	if r.txns.known(lsid, n) {
		return txnForward
	}
	_, hasToken := rq.get("recoveryToken")
	switch {
	case rq.name == "commitTransaction" && hasToken:
		return txnRecover
	case rq.name == "abortTransaction" && hasToken:
		// The recovery shard is the one participant: abort there.
		return txnForward
	}
	r.replyErr(rq, out, cmderr.New(cmderr.NoSuchTransaction,
		"Cannot continue transaction %d on this mongos: it did not start it and no recoveryToken was sent (a transaction is pinned to its mongos)", n))
	return txnAnswered
}

// recoverCommit answers a commitTransaction of a transaction another
// mongos routed, as the recovery shard does without a commit coordinator:
// a committed transaction is reported committed; one that never began
// committing is aborted and reported as NoSuchTransaction, so a new mongos
// never itself commits a transaction.
func (r *Router) recoverCommit(rq *request, out *outcome) {
	if r.cluster.sharding != nil {
		r.finishRouted(rq, out, nil)(r.recoverShardedCommit(rq)) // shard_txn.go
		return
	}
	lsid, _ := rq.get("lsid")
	n, _, _ := txnNumberOf(rq)
	abort := bson.D{
		{Key: "abortTransaction", Value: int32(1)}, {Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: n},
		{Key: "autocommit", Value: false}, {Key: "$db", Value: "admin"},
	}
	reply, err := r.shardCommand(rq.ctx, abort)
	if err != nil {
		if rq.ctx.Err() != nil {
			_ = rq.hangup()
			return
		}
		r.replyErr(rq, out, cmderr.New(cmderr.HostUnreachable, "Connection to the recovery shard failed: %v", err))
		return
	}
	code, failed := replyCode(reply)
	switch {
	case failed && code == cmderr.TransactionCommitted:
		_ = rq.send(bson.D{{Key: "recoveryToken", Value: r.recoveryToken()}, {Key: "ok", Value: 1.0}})
	case !failed, code == cmderr.NoSuchTransaction:
		r.replyErr(rq, out, cmderr.New(cmderr.NoSuchTransaction,
			"Transaction %d was aborted: the recovery shard has no commit decision for it", n))
	default:
		// The shard's own error (a stepped-down primary, ...) as it was.
		_ = rq.send(reply)
	}
}

// shardCommand sends doc (with its $db) to the shard's primary on a pooled
// connection and returns the reply.
func (r *Router) shardCommand(ctx context.Context, doc bson.D) (bson.D, error) {
	p := r.cluster.Primary()
	if p == nil {
		return nil, errNoTarget
	}
	body, err := bson.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return r.exchange(ctx, p, 1, &wire.Msg{Body: body})
}

// txnReplyLabels are the labels of a relayed reply in a transaction that
// carries the router's own writeConcernError: only a commit's retryable
// one is labelled, as mongod labels it.
func txnReplyLabels(name string, wce bson.D) []string {
	if name != "commitTransaction" {
		return nil
	}
	if code, ok := lookupD(wce, "code"); ok {
		if n, isNum := asInt64(code); isNum && slices.Contains(retryableWriteCodes, int32(n)) {
			return []string{labelRetryableWrite, labelUnknownCommit}
		}
	}
	return nil
}

// replyOK reports whether a shard's reply has ok: 1.
func replyOK(reply bson.D) bool {
	ok, _ := lookupD(reply, "ok")
	return asBool(ok)
}
