package mongosim

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// The participant's side of two-phase commit, as a shard runs it for
// mongos' transaction coordinator: prepareTransaction checks that the
// transaction's writes apply and holds its documents, answering a
// prepareTimestamp; from then on only commitTransaction with a
// commitTimestamp or abortTransaction ends it. A prepared transaction
// survives step-down, the transaction reaper and killSessions, other
// transactions writing its documents get WriteConflict, writes outside a
// transaction wait for it, and reads of the collections it wrote wait
// (mongod's prepare conflicts).

func init() {
	register(&command{name: "prepareTransaction", run: cmdPrepareTransaction, write: true})
	txnCommands["prepareTransaction"] = true
}

func cmdPrepareTransaction(r *request) (bson.D, error) {
	ts, err := r.tx.prepare(r.cluster.data.changes.clock.tick)
	if err != nil {
		return nil, err
	}
	return bson.D{{Key: "prepareTimestamp", Value: ts}, {Key: "ok", Value: 1.0}}, nil
}

// prepare moves an in-progress transaction to prepared, or answers the
// prepareTimestamp again for one already prepared. A transaction whose
// writes no longer apply is aborted with the conflict.
func (t *transaction) prepare(tick func() bson.Timestamp) (bson.Timestamp, error) {
	t.mu.Lock()
	switch t.phase {
	case txnPrepared:
		defer t.mu.Unlock()
		return t.prepareTS, nil
	case txnCommitted:
		t.mu.Unlock()
		return bson.Timestamp{}, cmderr.New(cmderr.TransactionCommitted, "Transaction with { txnNumber: %d } has been committed.", t.number)
	case txnAborted:
		t.mu.Unlock()
		return bson.Timestamp{}, cmderr.New(cmderr.NoSuchTransaction, "Transaction with { txnNumber: %d } has been aborted.", t.number)
	}
	var jobs []commitJob
	var err error
	if t.conflict != nil {
		err = t.conflict
	} else {
		jobs, err = t.commitPlan(false)
	}
	if err == nil {
		for _, j := range jobs {
			j.live.mu.Lock()
		}
		if err = t.checkCommit(jobs); err == nil {
			for _, j := range jobs {
				if j.live.prepared == nil {
					j.live.prepared = map[*transaction]struct{}{}
				}
				j.live.prepared[t] = struct{}{}
				t.preparedIn = append(t.preparedIn, j.live)
			}
		}
		for i := len(jobs) - 1; i >= 0; i-- {
			jobs[i].live.mu.Unlock()
		}
	}
	if err != nil {
		held := t.endLocked(txnAborted, "prepare failed")
		t.mu.Unlock()
		t.release(held)
		return bson.Timestamp{}, err
	}
	t.phase, t.prepareTS = txnPrepared, tick()
	t.mu.Unlock()
	return t.prepareTS, nil
}

// commitPrepared commits a prepared transaction. Its writes were checked
// at prepare and its documents held since, so it applies them.
func (t *transaction) commitPrepared() error {
	t.mu.Lock()
	if t.phase != txnPrepared {
		t.mu.Unlock()
		return cmderr.New(cmderr.InvalidOptions, "commitTransaction with a commitTimestamp needs a prepared transaction")
	}
	t.phase = txnInProgress // commitLocked's precondition; t.mu is held throughout
	held, err := t.commitLocked()
	t.mu.Unlock()
	t.release(held)
	return err
}

// abortPrepared aborts t whether or not it is prepared: the coordinator's
// abort decision, or the server shutting down.
func (t *transaction) abortPrepared(reason string) bool {
	t.mu.Lock()
	if t.phase != txnInProgress && t.phase != txnPrepared {
		t.mu.Unlock()
		return false
	}
	held := t.endLocked(txnAborted, reason)
	t.mu.Unlock()
	t.release(held)
	return true
}

// preparedWriter is a prepared transaction that wrote c (c.mu held), nil
// when there is none.
func (c *collection) preparedWriter() *transaction {
	for t := range c.prepared {
		return t
	}
	return nil
}

// errPrepared answers a statement sent to a prepared transaction.
func errPrepared(n int64) error {
	return cmderr.New(cmderr.PreparedTransactionInProgress, "Transaction with { txnNumber: %d } is prepared: only commitTransaction or abortTransaction may follow", n)
}

func (t *transaction) isPrepared() bool {
	phase, _ := t.state()
	return phase == txnPrepared
}
