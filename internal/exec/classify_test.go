package exec

import (
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/internal/session"
	"github.com/sturdy-go/sturdy/mongoerr"
)

// The topology refuses servers before 4.4 (wire < 9) as incompatible, so the
// Retryable Writes spec 1.0's code-based classification cannot be reached end
// to end; this checks it on replies as such servers send them.
func TestPre44ClassificationByCodeAndMessage(t *testing.T) {
	reply := func(d bson.D) error {
		raw, err := bson.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		return mongoerr.FromReply(raw)
	}
	cmdErr := func(code int32, msg string) error {
		return reply(bson.D{{Key: "ok", Value: 0.0}, {Key: "code", Value: code}, {Key: "errmsg", Value: msg}})
	}
	wce := func(code int32, msg string) error {
		return reply(bson.D{{Key: "ok", Value: 1.0}, {Key: "n", Value: 1},
			{Key: "writeConcernError", Value: bson.D{{Key: "code", Value: code}, {Key: "errmsg", Value: msg}}}})
	}
	writeErr := func(code int32) error {
		return reply(bson.D{{Key: "ok", Value: 1.0}, {Key: "n", Value: 0},
			{Key: "writeErrors", Value: bson.A{bson.D{{Key: "index", Value: 0}, {Key: "code", Value: code}, {Key: "errmsg", Value: "x"}}}}})
	}
	cases := []struct {
		name  string
		err   error
		wire  int32
		retry bool
	}{
		{"ShutdownInProgress", cmdErr(91, "shutting down"), 8, true},
		{"InterruptedDueToStepDown", cmdErr(11602, "interrupted"), 8, true},
		{"NotMaster", cmdErr(10107, "x"), 8, true},
		{"SocketException", cmdErr(9001, "x"), 8, true},
		{"not master message", cmdErr(2, "operation failed: not master"), 8, true},
		{"node is recovering message", cmdErr(0, "node is recovering"), 8, true},
		{"other code", cmdErr(2, "bad value"), 8, false},
		{"WriteConcernFailed", wce(64, "waiting for replication timed out"), 8, false},
		{"writeConcernError 91", wce(91, "shutting down"), 8, true},
		{"writeConcernError not master", wce(100, "not master"), 8, true},
		{"writeErrors 91", writeErr(91), 8, false},
		{"4.4+ server without the label", cmdErr(91, "shutting down"), 9, false},
		{"4.4+ writeConcernError without the label", wce(91, "shutting down"), 9, false},
	}
	e := &Executor{RetryWrites: true}
	op := &Operation{Flags: Write | RetryableWrite}
	txn := int64(1)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := &opState{txnNumber: &txn, checkedOut: true, sent: true, wire: c.wire}
			got := isRetryableWriteError(e.labelNetworkError(op, st, c.err))
			if got != c.retry {
				t.Fatalf("retryable = %v, want %v (%v)", got, c.retry, c.err)
			}
		})
	}
	t.Run("retryWrites off", func(t *testing.T) {
		st := &opState{txnNumber: &txn, checkedOut: true, wire: 8}
		off := &Executor{}
		if isRetryableWriteError(off.labelNetworkError(op, st, cmdErr(91, "x"))) {
			t.Fatal("labelled without retryWrites")
		}
	})
}

func TestNetworkErrorLabelledOnACopy(t *testing.T) {
	orig := &mongoerr.NetworkError{Addr: "a:1", Op: "dial", Err: errors.New("refused"), Labels: []string{mongoerr.LabelRetryable}}
	e := &Executor{RetryWrites: true}
	st := &opState{}
	got := e.labelNetworkError(&Operation{Flags: Write | RetryableWrite}, st, orig)
	if !mongoerr.HasErrorLabel(got, mongoerr.LabelRetryableWrite) || !mongoerr.HasErrorLabel(got, mongoerr.LabelRetryable) {
		t.Fatalf("labels of %v", got)
	}
	if orig.HasErrorLabel(mongoerr.LabelRetryableWrite) {
		t.Fatal("the shared error was modified")
	}
	// A read's network error is not labelled.
	if r := e.labelNetworkError(&Operation{}, st, orig); mongoerr.HasErrorLabel(r, mongoerr.LabelRetryableWrite) {
		t.Fatal("a read's error labelled RetryableWriteError")
	}
}

func TestBaseBackoffFromReply(t *testing.T) {
	for _, c := range []struct {
		v    any
		want time.Duration
	}{
		{int32(50), 50 * time.Millisecond},
		{int64(250), 250 * time.Millisecond},
		{2.5, 2500 * time.Microsecond},
		{int32(0), 0},
		{int32(-5), 0},
		{"50", 0},
		{int64(1 << 40), 10 * time.Second},
	} {
		raw, _ := bson.Marshal(bson.D{{Key: "ok", Value: 0.0}, {Key: "code", Value: int32(462)}, {Key: "baseBackoffMS", Value: c.v}})
		if got := baseBackoff(mongoerr.FromReply(raw)); got != c.want {
			t.Errorf("baseBackoffMS %v: %v, want %v", c.v, got, c.want)
		}
	}
}

// A commit pinned to a mongos that went Unknown (or left the topology)
// between selection and sending is unpinned for its free retry, which then
// selects another mongos; without it the retries went straight back to the
// same mongos until they ran out (seen in cross-shard soaks with router
// restarts). A statement stays pinned: only the mongos it started on knows
// the transaction.
func TestCommitUnpinnedWhenItsMongosCannotTakeIt(t *testing.T) {
	for _, err := range []error{ErrServerNoLongerWritable, ErrServerRemoved} {
		for _, cmd := range []string{"commitTransaction", "insert"} {
			sess := session.NewClient(nil, false)
			sess.Txn.State, sess.Txn.Pinned = session.TxnInProgress, "mongos-a:27017"
			op := &Operation{Command: bson.D{{Key: cmd, Value: 1}}, Flags: TxnCommand.If(cmd == "commitTransaction"), Session: sess}
			unpinForRetry(op, &opState{inTxn: true, sess: sess}, err)
			if unpinned := sess.Txn.Pinned == ""; unpinned != op.Flags.Has(TxnCommand) {
				t.Errorf("%s after %v: unpinned %v, want %v", cmd, err, unpinned, op.Flags.Has(TxnCommand))
			}
		}
	}
}
