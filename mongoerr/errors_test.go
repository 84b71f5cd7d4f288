package mongoerr

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func raw(t *testing.T, d bson.D) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFromReplyCommandError(t *testing.T) {
	err := FromReply(raw(t, bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: "not primary"}, {Key: "code", Value: int32(10107)},
		{Key: "codeName", Value: "NotWritablePrimary"}, {Key: "errorLabels", Value: bson.A{"RetryableWriteError"}}}))
	var ce *CommandError
	if !errors.As(err, &ce) || ce.Code != 10107 || ce.Name != "NotWritablePrimary" || ce.Message != "not primary" {
		t.Fatalf("got %#v", err)
	}
	if !HasErrorLabel(fmt.Errorf("wrapped: %w", err), LabelRetryableWrite) || HasErrorLabel(err, LabelNoWritesPerformed) {
		t.Error("labels not found through wrapping")
	}
}

func TestFromReplyWriteException(t *testing.T) {
	err := FromReply(raw(t, bson.D{{Key: "ok", Value: 1.0}, {Key: "n", Value: int32(0)},
		{Key: "writeErrors", Value: bson.A{bson.D{{Key: "index", Value: int32(1)}, {Key: "code", Value: int32(11000)}, {Key: "errmsg", Value: "E11000 dup"}}}},
		{Key: "writeConcernError", Value: bson.D{{Key: "code", Value: int32(91)}, {Key: "errmsg", Value: "shutdown"}, {Key: "errorLabels", Value: bson.A{"RetryableWriteError"}}}},
	}))
	var we *WriteException
	if !errors.As(err, &we) || len(we.WriteErrors) != 1 || we.WriteErrors[0].Index != 1 || we.WriteConcernError.Code != 91 {
		t.Fatalf("got %#v", err)
	}
	if !IsDuplicateKey(err) || !HasErrorLabel(err, LabelRetryableWrite) {
		t.Error("classification failed")
	}
	if FromReply(raw(t, bson.D{{Key: "ok", Value: int32(1)}})) != nil {
		t.Error("ok: 1 is not an error")
	}
}

func TestNetworkAndTimeout(t *testing.T) {
	ne := &NetworkError{Addr: "h:1", Op: "read", Err: context.DeadlineExceeded}
	if !IsNetworkError(fmt.Errorf("x: %w", ne)) || !IsTimeout(ne) {
		t.Error("network timeout not classified")
	}
	if IsTimeout(&CommandError{Code: 2}) || !IsTimeout(&CommandError{Code: 50}) {
		t.Error("MaxTimeMSExpired classification")
	}
}

func TestDriverErrorsClassify(t *testing.T) {
	cause := &NetworkError{Addr: "h:1", Op: "read", Err: errors.New("reset")}
	pc := fmt.Errorf("op: %w", &PoolClearedError{Addr: "h:1", Cause: cause})
	if !HasErrorLabel(pc, LabelRetryableWrite) {
		t.Error("a pool-cleared error must carry RetryableWriteError")
	}
	var got *PoolClearedError
	if !errors.As(pc, &got) || got.Cause != cause {
		t.Errorf("pool-cleared error lost its cause: %v", pc)
	}
	wq := &WaitQueueTimeoutError{Addr: "h:1", Err: context.DeadlineExceeded}
	if !errors.Is(wq, context.DeadlineExceeded) || !wq.Timeout() {
		t.Error("wait-queue timeout must be a deadline")
	}
	server := &CommandError{Code: 18, Name: "AuthenticationFailed", Message: "bad"}
	var ce *CommandError
	if !errors.As(&AuthError{Mechanism: "SCRAM-SHA-256", Err: server}, &ce) || ce.Code != 18 {
		t.Error("auth error must unwrap to the server's error")
	}
	rw := &RetryableWritesUnsupportedError{Err: &CommandError{Code: 20}}
	if rw.Error() != RetryableWritesUnsupportedMessage || !errors.As(rw, &ce) || ce.Code != 20 {
		t.Errorf("retryable-writes-unsupported: %v", rw)
	}
}

func TestNotSentMarksSafeToRetry(t *testing.T) {
	base := &NetworkError{Addr: "h:1", Op: "dial", Err: errors.New("refused"), Labels: []string{LabelRetryableWrite}}
	if SafeToRetry(base) || SafeToRetry(nil) || NotSent(nil) != nil {
		t.Fatal("an unmarked error is not known to be unsent")
	}
	err := NotSent(base)
	var ne *NetworkError
	if !SafeToRetry(err) || !SafeToRetry(fmt.Errorf("op: %w", err)) || err.Error() != base.Error() ||
		!errors.As(err, &ne) || ne != base || !HasErrorLabel(err, LabelRetryableWrite) {
		t.Errorf("marked error changed or not safe: %v", err)
	}
	if NotSent(err) != err {
		t.Error("marking twice wraps twice")
	}
	if !errors.Is(NotSent(&TimeoutError{Detail: "x"}), context.DeadlineExceeded) {
		t.Error("a marked timeout is no longer a deadline")
	}
}
