package exec

import (
	"errors"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/internal/session"
	"github.com/sturdy-go/sturdy/mongoerr"
)

// Labels the executor adds to errors in transactions.
const ()

// commitRetryWTimeout is the wtimeout (ms) a commit retried with w:majority
// gets when its write concern has none, so it cannot wait forever.
const commitRetryWTimeout = int64(10000)

// appendTxnCommand appends the command of a transaction (transactions
// spec, "Constructing commands within a transaction"): the operation's
// fields without readConcern, and without writeConcern except on
// commit/abort; lsid, txnNumber, autocommit:false; startTransaction and the
// transaction's readConcern on its first command; recoveryToken on
// commit/abort.
func (e *Executor) appendTxnCommand(cmd bson.D, op *Operation, st *opState, ss *session.Server) bson.D {
	t := &st.sess.Txn
	majority := op.Flags.Has(TxnCommand) && op.Command[0].Key == "commitTransaction" && (op.Flags.Has(MajorityCommit) || st.commitMajority)
	hasWC := false
	for _, el := range op.Command {
		if op.Flags.Has(RunCommand) {
			// The application's command is sent as it was given.
			cmd = append(cmd, el)
			continue
		}
		switch el.Key {
		case "readConcern":
			continue
		case "writeConcern":
			if !op.Flags.Has(TxnCommand) {
				continue
			}
			hasWC = true
			if majority {
				el.Value = majorityWriteConcern(el.Value)
			}
		}
		cmd = append(cmd, el)
	}
	if majority && !hasWC {
		cmd = append(cmd, bson.E{Key: "writeConcern", Value: majorityWriteConcern(nil)})
	}
	cmd = append(cmd, bson.E{Key: "lsid", Value: ss.ID}, bson.E{Key: "txnNumber", Value: *st.txnNumber})
	if t.State == session.TxnStarting && !op.Flags.Has(TxnCommand) {
		cmd = append(cmd, bson.E{Key: "startTransaction", Value: true})
		rc := t.ReadConcern
		if ts, ok := st.sess.OperationTime(); ok && st.sess.Causal {
			rc = append(rc[:len(rc):len(rc)], bson.E{Key: "afterClusterTime", Value: ts})
		}
		if len(rc) > 0 {
			cmd = append(cmd, bson.E{Key: "readConcern", Value: rc})
		}
	}
	cmd = append(cmd, bson.E{Key: "autocommit", Value: false})
	if op.Flags.Has(TxnCommand) && len(t.RecoveryToken) > 0 {
		cmd = append(cmd, bson.E{Key: "recoveryToken", Value: t.RecoveryToken})
	}
	return cmd
}

// unpinAfter unpins op's session once a transaction command ended
// (transactions spec, "When to unpin"): after any abortTransaction, after
// an error labelled TransientTransactionError, and after a commit whose
// outcome is unknown. A successful commit stays pinned, as the
// application may commit again.
func unpinAfter(op *Operation, err error) {
	t := &op.Session.Txn
	switch {
	case t.Pinned == "":
	case op.Flags.Has(TxnCommand) && op.Command[0].Key == "abortTransaction",
		mongoerr.HasErrorLabel(err, mongoerr.LabelTransientTxn),
		op.Flags.Has(TxnCommand) && mongoerr.HasErrorLabel(err, mongoerr.LabelUnknownCommitResult):
		t.Pinned = ""
	}
}

// unpinForRetry unpins a commit or abort before its retry selects a
// server: an abort is unpinned whatever happens, a commit once its error
// leaves the outcome unknown or is transient, or its mongos could not take
// it (gone Unknown or left the topology before the command was sent: its
// free retries would otherwise go straight back to it, without a pause,
// until they ran out). The retry may then recover the outcome on another
// mongos with the recoveryToken.
func unpinForRetry(op *Operation, st *opState, err error) {
	if !st.inTxn || !op.Flags.Has(TxnCommand) || st.sess.Txn.Pinned == "" {
		return
	}
	if op.Command[0].Key == "abortTransaction" || unknownCommitResult(err) || mongoerr.HasErrorLabel(err, mongoerr.LabelTransientTxn) ||
		errors.Is(err, ErrServerNoLongerWritable) || errors.Is(err, ErrServerRemoved) {
		st.sess.Txn.Pinned = ""
	}
}

// majorityWriteConcern is wc (a bson.D, bson.Raw or nil) with w:majority
// and, unless it has one, wtimeout 10000 (transactions spec, "writeConcern
// for commitTransaction attempts").
func majorityWriteConcern(wc any) bson.D {
	var d bson.D
	switch v := wc.(type) {
	case bson.D:
		d = append(d, v...)
	case bson.Raw:
		_ = bson.Unmarshal(v, &d)
	}
	out := bson.D{{Key: "w", Value: "majority"}}
	hasTimeout := false
	for _, el := range d {
		switch el.Key {
		case "w":
			continue
		case "wtimeout":
			hasTimeout = true
		}
		out = append(out, el)
	}
	if !hasTimeout {
		out = append(out, bson.E{Key: "wtimeout", Value: commitRetryWTimeout})
	}
	return out
}

// labelTxnError adds the labels the transactions spec has the driver add:
// TransientTransactionError to network, server selection and pool-cleared
// errors of the transaction's commands other than commitTransaction, and
// UnknownTransactionCommitResult to commit errors that leave the outcome
// unknown.
func labelTxnError(op *Operation, err error) error {
	if err == nil {
		return nil
	}
	if op.Flags.Has(TxnCommand) && op.Command[0].Key == "commitTransaction" {
		if unknownCommitResult(err) && !mongoerr.HasErrorLabel(err, mongoerr.LabelUnknownCommitResult) {
			return &labelledError{err: err, labels: []string{mongoerr.LabelUnknownCommitResult}}
		}
		return err
	}
	var selErr *mongoerr.ServerSelectionError
	var cleared *mongoerr.PoolClearedError
	if (mongoerr.IsNetworkError(err) || errors.As(err, &selErr) || errors.As(err, &cleared)) &&
		!mongoerr.HasErrorLabel(err, mongoerr.LabelTransientTxn) {
		return &labelledError{err: err, labels: []string{mongoerr.LabelTransientTxn}}
	}
	return err
}

// unknownCommitResult: a commit error after which the transaction may or
// may not have committed: server selection, network and retryable-write
// errors, MaxTimeMSExpired, and write concern failures other than an
// invalid write concern.
func unknownCommitResult(err error) bool {
	var selErr *mongoerr.ServerSelectionError
	var cleared *mongoerr.PoolClearedError
	if mongoerr.IsNetworkError(err) || errors.As(err, &selErr) || errors.As(err, &cleared) ||
		mongoerr.HasErrorLabel(err, mongoerr.LabelRetryableWrite) {
		return true
	}
	var ce *mongoerr.CommandError
	if errors.As(err, &ce) {
		return ce.Code == mongoerr.CodeMaxTimeMSExpired || ce.Code == mongoerr.CodeWriteConcernFailed
	}
	var wex *mongoerr.WriteException
	if errors.As(err, &wex) && wex.WriteConcernError != nil {
		c := wex.WriteConcernError.Code
		return c != mongoerr.CodeUnknownReplWriteConcern && c != mongoerr.CodeUnsatisfiableWriteConcern
	}
	return false
}

// causalCommands are the commands a causally consistent session sends with
// readConcern.afterClusterTime: the reads that take a read concern, and the
// writes that accept one holding only afterClusterTime (read/write concern
// spec, "afterClusterTime").
var causalCommands = map[string]bool{
	"find": true, "aggregate": true, "distinct": true, "count": true,
	"insert": true, "update": true, "findAndModify": true, "delete": true, "bulkWrite": true,
	"create": true, "createIndexes": true, "drop": true, "dropDatabase": true, "dropIndexes": true,
}

// causalCommand: a command of op gets afterClusterTime in a causally
// consistent session; never a runCommand, a getMore/killCursors (pinned to
// a server) or an unacknowledged write.
func causalCommand(op *Operation) bool {
	return !op.Flags.Has(RunCommand) && !op.Flags.Has(Unacknowledged) && op.Server == nil && causalCommands[op.Command[0].Key]
}

// withAfterClusterTime sets readConcern.afterClusterTime in cmd (a copy of
// the operation's command) to the session's operationTime, keeping the
// read concern's level; it returns cmd unchanged before the session has
// an operationTime.
func withAfterClusterTime(cmd bson.D, sess *session.Client) bson.D {
	ts, ok := sess.OperationTime()
	if !ok {
		return cmd
	}
	for i, el := range cmd {
		if el.Key != "readConcern" {
			continue
		}
		var rc bson.D
		switch v := el.Value.(type) {
		case bson.D:
			rc = append(rc, v...)
		case bson.Raw:
			_ = bson.Unmarshal(v, &rc)
		}
		cmd[i].Value = append(rc, bson.E{Key: "afterClusterTime", Value: ts})
		return cmd
	}
	return append(cmd, bson.E{Key: "readConcern", Value: bson.D{{Key: "afterClusterTime", Value: ts}}})
}

// snapshotCommand: a command of op is sent with the snapshot session's
// readConcern. Every command is, reads and writes alike (the server refuses
// those that cannot read from a snapshot), except the ones that continue or
// end what an earlier command began.
func snapshotCommand(op *Operation) bool {
	switch op.Command[0].Key {
	case "getMore", "killCursors", "endSessions", "commitTransaction", "abortTransaction":
		return false
	}
	return !op.Flags.Has(Unacknowledged)
}

// withSnapshotReadConcern replaces cmd's readConcern (a copy of cmd is
// returned) with {level: "snapshot"} and, once the session's snapshot time
// is known, atClusterTime: a snapshot session reads one snapshot whatever
// the collection's read concern says.
func withSnapshotReadConcern(cmd bson.D, sess *session.Client) bson.D {
	rc := bson.D{{Key: "level", Value: "snapshot"}}
	if ts, ok := sess.SnapshotTime(); ok {
		rc = append(rc, bson.E{Key: "atClusterTime", Value: ts})
	}
	out := make(bson.D, 0, len(cmd)+1)
	for _, el := range cmd {
		if el.Key != "readConcern" {
			out = append(out, el)
		}
	}
	return append(out, bson.E{Key: "readConcern", Value: rc})
}

// recordSnapshotTime fixes a snapshot session's time from its first
// successful reply: cursor.atClusterTime (find, aggregate) or atClusterTime
// (distinct).
func recordSnapshotTime(sess *session.Client, reply bson.Raw) {
	if _, ok := sess.SnapshotTime(); ok {
		return
	}
	if t, i, ok := reply.Lookup("cursor", "atClusterTime").TimestampOK(); ok {
		sess.SetSnapshotTime(bson.Timestamp{T: t, I: i})
		return
	}
	if t, i, ok := reply.Lookup("atClusterTime").TimestampOK(); ok {
		sess.SetSnapshotTime(bson.Timestamp{T: t, I: i})
	}
}
