package mongosim

import (
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// Commands and labels of multi-document transactions.

const (
	labelTransient         = "TransientTransactionError"
	labelUnknownCommit     = "UnknownTransactionCommitResult"
	codeLockTimeout        = 24
	defaultTxnLifetimeSecs = 60
)

// transientTxnCodes are the codes mongod labels TransientTransactionError
// on any command of a transaction (commit and abort included).
var transientTxnCodes = []int32{cmderr.WriteConflict, codeLockTimeout, 267, 239, 246, 249, 257}

// txnCommands are the commands mongod 8.0 runs inside a transaction.
var txnCommands = map[string]bool{
	"find": true, "getMore": true, "killCursors": true, "insert": true, "update": true, "delete": true,
	"findAndModify": true, "aggregate": true, "distinct": true, "bulkWrite": true,
	"commitTransaction": true, "abortTransaction": true, "create": true, "createIndexes": true,
}

// data is the store the request reads and writes: its transaction's view
// inside a transaction, else the deployment's.
func (r *request) data() *storage {
	if r.tx != nil {
		return r.tx.view
	}
	return r.cluster.data
}

func isTxnControl(name string) bool {
	return name == "commitTransaction" || name == "abortTransaction" || name == "prepareTransaction"
}

// checkTxnArgs validates the session fields of a command that carries
// autocommit (or is commit/abortTransaction) before the session is used.
func (m *Member) checkTxnArgs(r *request, cmd *command, hasTxn bool) error {
	auto, hasAuto := r.get("autocommit")
	if !hasAuto {
		if isTxnControl(cmd.name) {
			if !hasTxn {
				return cmderr.New(cmderr.InvalidOptions, "'%s' must be run within a transaction", cmd.name)
			}
			return cmderr.New(cmderr.InvalidOptions, "'%s' must be run within a transaction (autocommit: false is missing)", cmd.name)
		}
		return cmderr.New(cmderr.InvalidOptions, "Specifying startTransaction requires autocommit: false")
	}
	if b, ok := auto.(bool); !ok {
		return typeErr("OperationSessionInfo.autocommit", "bool", auto)
	} else if b {
		return cmderr.New(cmderr.InvalidOptions, "Specifying autocommit=true is not allowed.")
	}
	if !hasTxn {
		return cmderr.New(cmderr.InvalidOptions, "'autocommit' field requires a transaction number to also be specified")
	}
	if m.cluster.setName == "" {
		return cmderr.New(cmderr.IllegalOperation, "Transaction numbers are only allowed on a replica set member or mongos")
	}
	if st, ok := r.get("startTransaction"); ok {
		if b, isBool := st.(bool); !isBool {
			return typeErr("OperationSessionInfo.startTransaction", "bool", st)
		} else if !b {
			return cmderr.New(cmderr.InvalidOptions, "Specifying startTransaction=false is not allowed.")
		}
	}
	if !txnCommands[cmd.name] {
		return cmderr.New(cmderr.OperationNotSupportedInTransaction, "Cannot run '%s' in a multi-document transaction.", cmd.name)
	}
	if !isTxnControl(cmd.name) {
		if (r.db == "admin" && cmd.name != "bulkWrite") || r.db == "config" || r.db == "local" {
			return cmderr.New(cmderr.OperationNotSupportedInTransaction, "Cannot run command against the '%s' database in a transaction.", r.db)
		}
		if _, ok := r.get("writeConcern"); ok {
			return cmderr.New(cmderr.InvalidOptions, "Cannot set write concern after starting a transaction.")
		}
	}
	if cmd.name == "aggregate" {
		if p, ok := r.get("pipeline"); ok {
			if a, ok := p.(bson.A); ok {
				for _, st := range a {
					if d, ok := st.(bson.D); ok && len(d) > 0 {
						switch d[0].Key {
						case "$out", "$merge":
							return cmderr.New(cmderr.OperationNotSupportedInTransaction, "%s cannot be used in a transaction", d[0].Key)
						case "$changeStream":
							return cmderr.New(cmderr.OperationNotSupportedInTransaction, "Operation not permitted in transaction :: caused by :: $changeStream cannot run in a transaction")
						}
					}
				}
			}
		}
	}
	return nil
}

// readConcernOf validates a transaction's readConcern (only the first
// statement may carry one).
func readConcernOf(r *request, first bool) error {
	v, ok := r.get("readConcern")
	if !ok {
		return nil
	}
	if !first {
		return cmderr.New(cmderr.InvalidOptions, "Only the first command in a transaction may specify a readConcern")
	}
	d, ok := v.(bson.D)
	if !ok {
		return typeErr("readConcern", "object", v)
	}
	for _, e := range d {
		switch e.Key {
		case "level":
			switch e.Value {
			case "local", "majority", "snapshot":
			default:
				return cmderr.New(cmderr.InvalidOptions, "The readConcern level must be either 'local' (default), 'majority' or 'snapshot' in order to run in a transaction")
			}
		case "afterClusterTime":
			// Every write is visible at once on every member (one shared
			// store), so any cluster time is already reached.
		case "atClusterTime":
			return cmderr.Unsupported("readConcern atClusterTime")
		default:
			return cmderr.New(cmderr.InvalidOptions, "unrecognized readConcern field: %s", e.Key)
		}
	}
	return nil
}

// enterTransaction finds or starts the session's transaction for a command
// that carries autocommit: false. The caller releases the session.
func (m *Member) enterTransaction(r *request, cmd *command, n int64) (*txnContext, *transaction, error) {
	lsid, err := lsidOf(r)
	if err != nil {
		return nil, nil, err
	}
	c := m.cluster
	s, err := c.txns.acquire(r.ctx, lsid)
	if err != nil {
		return nil, nil, err
	}
	tc := &txnContext{sess: s, txnNumber: n}
	fail := func(err error) (*txnContext, *transaction, error) {
		tc.release()
		return nil, nil, err
	}
	if s.started && n < s.txnNumber {
		return fail(cmderr.New(cmderr.TransactionTooOld,
			"Cannot start transaction %d on session %s because a newer transaction %d has already started.", n, uuidString(lsid), s.txnNumber))
	}
	if _, start := r.get("startTransaction"); start {
		if s.started && n == s.txnNumber {
			return fail(cmderr.New(cmderr.ConflictingOperationInProgress,
				"Cannot start a transaction at given transaction number %d on session %s using txnNumber %d and autocommit=false because a transaction with the same number has already started", n, uuidString(lsid), n))
		}
		if err := readConcernOf(r, true); err != nil {
			return fail(err)
		}
		if s.txn != nil {
			if phase, _ := s.txn.state(); phase == txnPrepared {
				return fail(errPrepared(s.txn.number))
			}
			s.txn.abort("a newer transaction started on the session")
		}
		s.started, s.txnNumber = true, n
		s.stmts.reset()
		life := time.Duration(c.txnLifetimeSecs.Load()) * time.Second
		s.txn = newTransaction(c.data, lsid, n, r.now.Add(life))
		return tc, s.txn, nil
	}
	t := s.txn
	if !s.started || n != s.txnNumber || t == nil || t.number != n {
		return fail(cmderr.New(cmderr.NoSuchTransaction,
			"Given transaction number %d does not match any in-progress transactions. The active transaction number is %d", n, s.txnNumber))
	}
	if !r.now.Before(t.deadline) {
		t.abort("exceeded transactionLifetimeLimitSeconds")
	}
	phase, reason := t.state()
	switch phase {
	case txnAborted:
		msg := "Transaction with { txnNumber: %d } has been aborted."
		if reason != "" {
			msg = "Transaction with { txnNumber: %d } has been aborted: " + reason + "."
		}
		return fail(cmderr.New(cmderr.NoSuchTransaction, msg, n))
	case txnPrepared:
		if !isTxnControl(cmd.name) {
			return fail(errPrepared(n))
		}
		return tc, t, nil
	case txnCommitted:
		if cmd.name == "commitTransaction" {
			return tc, t, nil // a retried commit answers as the first did
		}
		return fail(cmderr.New(cmderr.TransactionCommitted, "Transaction with { txnNumber: %d } has been committed.", n))
	}
	if !isTxnControl(cmd.name) {
		if err := readConcernOf(r, false); err != nil {
			t.abort("an error occurred in the transaction")
			return fail(err)
		}
	}
	return tc, t, nil
}

// finishStatement ends a statement inside a transaction: a write conflict
// becomes the command's error, and any error aborts the transaction, as on
// mongod.
func finishStatement(t *transaction, reply bson.D, err error) (bson.D, error) {
	if t.conflict != nil {
		err = t.conflict
	}
	if err == nil {
		if _, bad := lookupD(reply, "writeErrors"); bad && !onlyKeyChanges(reply) {
			t.abort("a write error occurred in the transaction")
		}
		return reply, nil
	}
	t.abort("an error occurred in the transaction")
	return nil, err
}

func cmdCommitTransaction(r *request) (bson.D, error) {
	t := r.tx
	wc, wce := commitWriteConcern(r)
	_, hasTS := r.get("commitTimestamp")
	switch phase, _ := t.state(); phase {
	case txnInProgress:
		if hasTS {
			return nil, cmderr.New(cmderr.InvalidOptions, "commitTimestamp cannot be given for a transaction that was not prepared")
		}
		if err := t.commit(); err != nil {
			return nil, err
		}
	case txnPrepared:
		if !hasTS {
			return nil, cmderr.New(cmderr.InvalidOptions, "commitTransaction of a prepared transaction needs its commitTimestamp")
		}
		if err := t.commitPrepared(); err != nil {
			return nil, err
		}
	}
	reply := bson.D{}
	if wce != nil {
		reply = append(reply, bson.E{Key: "writeConcernError", Value: wce})
	}
	_ = wc
	return append(reply, bson.E{Key: "ok", Value: 1.0}), nil
}

func cmdAbortTransaction(r *request) (bson.D, error) {
	t := r.tx
	if phase, _ := t.state(); phase == txnCommitted {
		return nil, cmderr.New(cmderr.TransactionCommitted, "Transaction with { txnNumber: %d } has been committed.", t.number)
	}
	if !t.abortPrepared("abortTransaction") {
		return nil, cmderr.New(cmderr.NoSuchTransaction, "Transaction with { txnNumber: %d } has been aborted.", t.number)
	}
	return bson.D{{Key: "ok", Value: 1.0}}, nil
}

// commitWriteConcern checks the commit's write concern against the set:
// more members than exist is UnsatisfiableWriteConcern, an unknown tag
// UnknownReplWriteConcern, both as a writeConcernError after committing.
func commitWriteConcern(r *request) (bson.D, bson.D) {
	v, ok := r.get("writeConcern")
	if !ok {
		return nil, nil
	}
	wc, _ := v.(bson.D)
	w, ok := lookupD(wc, "w")
	if !ok {
		return wc, nil
	}
	if s, isStr := w.(string); isStr {
		if s == "majority" {
			return wc, nil
		}
		return wc, bson.D{{Key: "code", Value: int32(cmderr.UnknownReplWriteConcern)}, {Key: "codeName", Value: "UnknownReplWriteConcern"},
			{Key: "errmsg", Value: "No write concern mode named '" + s + "' found in replica set configuration"}}
	}
	if n, isNum := asInt64(w); isNum && n > int64(len(r.cluster.members)) {
		return wc, bson.D{{Key: "code", Value: int32(cmderr.UnsatisfiableWriteConcern)}, {Key: "codeName", Value: "UnsatisfiableWriteConcern"},
			{Key: "errmsg", Value: "Not enough data-bearing nodes"}}
	}
	return wc, nil
}

// txnErrorLabels are the labels mongod puts on an error of a command that
// carried autocommit: false.
func txnErrorLabels(name string, code int32) []string {
	commitOrAbort := isTxnControl(name)
	retriable := slices.Contains(retryableWriteCodes, code)
	var labels []string
	if commitOrAbort && retriable {
		labels = append(labels, labelRetryableWrite)
	}
	// WriteConflict, LockTimeout, PreparedTransactionInProgress and the
	// snapshot errors (SnapshotTooOld, SnapshotUnavailable,
	// StaleChunkHistory, MigrationConflict) are transient, as on mongod.
	transient := code == cmderr.NoSuchTransaction || slices.Contains(transientTxnCodes, code)
	if !commitOrAbort && retriable {
		transient = true
	}
	if transient {
		labels = append(labels, labelTransient)
	}
	if name == "commitTransaction" && (retriable || code == cmderr.MaxTimeMSExpired) {
		labels = append(labels, labelUnknownCommit)
	}
	return labels
}

// abortAllTransactions aborts every open transaction, as a step-down does;
// prepared ones stay (a prepared transaction survives step-down).
func (c *Cluster) abortAllTransactions(reason string) {
	for _, t := range c.data.clock.openTxns() {
		t.abort(reason)
	}
}

// endAllTransactions aborts every open transaction, prepared ones too, as
// the server shuts down.
func (c *Cluster) endAllTransactions(reason string) {
	for _, t := range c.data.clock.openTxns() {
		t.abortPrepared(reason)
	}
}

func init() {
	register(
		&command{name: "commitTransaction", run: cmdCommitTransaction, write: true},
		&command{name: "abortTransaction", run: cmdAbortTransaction, write: true},
	)
}

// abortSessionTransactions aborts the open transactions of the sessions
// listed as [{id: UUID}, ...].
func (c *Cluster) abortSessionTransactions(ids bson.A, reason string) {
	want := map[string]bool{}
	for _, v := range ids {
		if d, ok := v.(bson.D); ok {
			if id, ok := lookupD(d, "id"); ok {
				if b, ok := id.(bson.Binary); ok {
					want[string(b.Data)] = true
				}
			}
		}
	}
	for _, t := range c.data.clock.openTxns() {
		if want[string(t.lsid)] {
			t.abort(reason)
		}
	}
}

// reapTransactions aborts transactions past their lifetime every period,
// as mongod's periodic reaper does (the deadline is on the injectable
// clock; the period is real time).
func (c *Cluster) reapTransactions(period time.Duration) {
	defer close(c.reaperDone)
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-c.reaperStop:
			return
		case <-tick.C:
			now := c.now()
			for _, t := range c.data.clock.openTxns() {
				if !now.Before(t.deadline) {
					t.abort("exceeded transactionLifetimeLimitSeconds")
				}
			}
		}
	}
}
