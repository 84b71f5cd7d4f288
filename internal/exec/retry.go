package exec

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/event"
	"github.com/sturdy-go/sturdy/internal/backoff"
	"github.com/sturdy-go/sturdy/internal/csot"
	"github.com/sturdy-go/sturdy/internal/topology"
	"github.com/sturdy-go/sturdy/mongoerr"
)

// MaxUnsentRetries caps the retries of attempts that never reached the
// server (the pool was cleared or paused at check-out, or a write's server
// stopped being writable before it was sent). Such an attempt
// cannot have been applied, so it does not use up the operation's one
// retry; this cap, the context's deadline and, without one, the
// topology's ServerSelectionTimeout counted from the operation's start
// bound them instead. Each such retry waits in server selection until the
// server is rediscovered (a cleared pool or a write's lost server means
// the server was marked Unknown first), so the cap is a guard against a
// loop, not a pace: a burst of faults on other connections can clear a
// pool many times while a check-out waits for a new connection.
const MaxUnsentRetries = 100

// errRetryUnsupported is the driver-side failure of a retry whose server
// no longer supports retryable writes; the policy then returns the
// previous error.
var errRetryUnsupported = errors.New("the server selected for the retry does not support retryable writes")

// retryPolicy decides, after a failed attempt, whether the operation runs
// another one: Execute calls retry after every failed attempt and
// succeeded after the successful one, and reruns selection and attempt
// while retry says so.
type retryPolicy interface {
	// retry is called after attempt number st.attempts failed with err
	// (reply is that attempt's reply, if any). It reports whether to try
	// again and otherwise the reply and error Execute returns. A
	// policy that retries may wait (honouring ctx), publish a RetryEvent
	// and add to st.deprioritized first.
	retry(ctx context.Context, st *opState, err error, reply bson.Raw) (again bool, finalReply bson.Raw, final error)
	// succeeded is called once when an attempt succeeds (token deposits).
	succeeded(st *opState)
}

// policyFor returns the retry policy for op.
func (e *Executor) policyFor(op *Operation, st *opState) retryPolicy {
	maxAdaptive := max(e.MaxAdaptiveRetries, 0)
	st.retry = retrier{e: e, op: op, maxAdaptive: maxAdaptive, tokens: e.retryTokens()}
	st.retry.start = st.retry.now()
	return &st.retry
}

// RetryTokens returns the client-wide retry token bucket, nil when
// DisableRetryTokens is set.
func (e *Executor) RetryTokens() *backoff.TokenBucket { return e.retryTokens() }

func (e *Executor) retryTokens() *backoff.TokenBucket {
	if e.DisableRetryTokens {
		return nil
	}
	e.tokensOnce.Do(func() {
		if e.Tokens == nil {
			e.Tokens = backoff.NewTokenBucket(backoff.BucketCapacity)
		}
	})
	return e.Tokens
}

// retrier is the one retry policy, combining (as docs/retry-policy.md says):
//
//   - retryable writes (Retryable Writes spec 1.0): an eligible write
//     that carried a txnNumber is retried once, with the same txnNumber,
//     after a retryable write error (network error, pool cleared, the
//     RetryableWriteError label from 4.4+ servers, the spec's codes and
//     messages from older ones);
//   - retryable reads: an eligible read is retried once after a network
//     error, a pool-cleared error or one of the retryable read codes;
//   - overload (Client Backpressure spec): any command whose error
//     carries RetryableError is retried (writes need RetryWrites, reads
//     RetryReads, runCommand both), and once such an error or a
//     SystemOverloadedError has been
//     seen the operation may retry up to MaxAdaptiveRetries times in all,
//     for any retryable error. A SystemOverloadedError is followed by a
//     backoff of jitter × min(10 s, base × 2^i) (i = retries so far, base
//     100 ms or the error's positive baseBackoffMS) and, with
//     retargeting, the server is deprioritized.
//
// An attempt that failed at check-out because the pool was cleared or
// paused, or found its server no longer writable, never reached the
// server: its retry is free (MaxUnsentRetries), it neither counts as the
// operation's retry nor takes a token.
//
// Every other retry takes a token from the bucket (when on); a successful
// operation deposits 0.1, plus 1 if it succeeded on a retry that took one;
// a retry that fails without the overload label gives its token back. A
// retry is not started when the context's deadline would pass during its
// backoff.
//
// The error returned follows the retryable-writes rules: the latest error
// that says a write may have been attempted, else the first error; errors
// saying nothing was attempted are the driver's own before sending
// (server selection, check-out) and those labelled NoWritesPerformed.
type retrier struct {
	e           *Executor
	op          *Operation
	maxAdaptive int
	tokens      *backoff.TokenBucket

	retries   int       // counted retries started so far
	unsent    int       // free retries of attempts that never reached the server
	took      bool      // the retry in flight took a token
	start     time.Time // when the operation started, by the injected clock
	overload  bool      // an overload-policy error has been seen
	prevErr   error
	prevReply bson.Raw
}

func (r *retrier) succeeded(*opState) {
	if r.tokens == nil {
		return
	}
	n := backoff.SuccessDeposit
	if r.took {
		n += backoff.RetryCost
	}
	r.tokens.Deposit(n)
}

// retry: the failed retry's token first, then the errors that end the
// operation, the free retry of an attempt that never reached the server,
// and last the counted retry the policy allows.
func (r *retrier) retry(ctx context.Context, st *opState, err error, reply bson.Raw) (bool, bson.Raw, error) {
	overloaded := mongoerr.HasErrorLabel(err, mongoerr.LabelSystemOverloaded)
	if r.took && !overloaded {
		r.tokens.Deposit(backoff.RetryCost) // the failed retry's token comes back
		r.took = false
	}
	if end, finalReply, final := r.ends(ctx, st, err, reply); end {
		return false, finalReply, final
	}
	if r.neverSent(st, err) {
		return r.retryUnsent(ctx, st, err)
	}
	if !r.allowed(ctx, st, err, overloaded) {
		return r.stop()
	}
	return r.retryCounted(ctx, st, err, overloaded)
}

// stop ends the operation with the error the retryable-writes rules pick.
func (r *retrier) stop() (bool, bson.Raw, error) { return false, r.prevReply, r.prevErr }

// ends records err as the error to report if it says a write was
// attempted, and reports whether it ends the operation whatever the
// policy: out of time, unacknowledged, no server, no retryable writes or
// sessions, a closed client.
func (r *retrier) ends(ctx context.Context, st *opState, err error, reply bson.Raw) (bool, bson.Raw, error) {
	var te *mongoerr.TimeoutError
	if errors.As(err, &te) {
		// Out of time before sending: report the timeout with the error
		// that made the operation retry.
		if te.Err == nil && r.prevErr != nil {
			te.Err = r.prevErr
		}
		return true, r.prevReply, err
	}
	if r.prevErr == nil || writeAttempted(st, err) {
		r.prevErr, r.prevReply = err, reply
	}
	var selErr *mongoerr.ServerSelectionError
	switch {
	case ctx.Err() != nil, r.op.Flags.Has(Unacknowledged), errors.As(err, &selErr), errors.Is(err, errRetryUnsupported),
		errors.Is(err, ErrSessionsNotSupported), errors.Is(err, topology.ErrTopologyClosed):
		return true, r.prevReply, r.prevErr
	}
	if st.txnNumber != nil && !st.inTxn && transactionNumbersRejected(err) {
		return true, reply, &mongoerr.RetryableWritesUnsupportedError{Err: err}
	}
	return false, nil, nil
}

// retryUnsent is the free retry of an attempt that never reached the
// server (MaxUnsentRetries of them, within the operation's time).
func (r *retrier) retryUnsent(ctx context.Context, st *opState, err error) (bool, bson.Raw, error) {
	if r.unsent >= MaxUnsentRetries || r.unsentExpired(ctx) {
		return r.stop()
	}
	r.unsent++
	r.took = false
	unpinForRetry(r.op, st, err)
	r.announce(ctx, st, err, 0, serverAddr(st))
	return true, nil, nil
}

// allowed reports whether the policy allows a counted retry after err:
// an overload retry within MaxAdaptiveRetries, or a retryable write's or
// read's one retry (more once overload was seen, or under a timeout).
// It notes whether overload has been seen.
func (r *retrier) allowed(ctx context.Context, st *opState, err error, overloaded bool) bool {
	labelled := mongoerr.HasErrorLabel(err, mongoerr.LabelRetryable) && r.overloadAllowed()
	if labelled || overloaded {
		r.overload = true
	}
	classic := r.retryableWrite(st) && isRetryableWriteError(err) ||
		r.op.Flags.Has(RetryableRead) && r.e.RetryReads && !st.inTxn && isRetryableReadError(err)
	return labelled && r.retries < r.maxAdaptive ||
		classic && (r.retries < 1 || r.overload && r.retries < r.maxAdaptive || !r.overload && csot.Active(ctx))
}

// retryCounted starts a counted retry: backoff after overload (unless the
// deadline would pass first), a token, the server deprioritized, the
// retry announced, then the wait.
func (r *retrier) retryCounted(ctx context.Context, st *opState, err error, overloaded bool) (bool, bson.Raw, error) {
	var wait time.Duration
	if overloaded {
		wait = backoff.Delay(cmp.Or(baseBackoff(err), r.e.BackoffBase), r.retries, r.jitter())
	}
	if dl, ok := ctx.Deadline(); ok && r.now().Add(wait).After(dl) {
		return r.stop() // the deadline would pass before the retry starts
	}
	if r.tokens != nil {
		if !r.tokens.Consume(backoff.RetryCost) {
			return r.stop()
		}
		r.took = true
	}
	addr := r.deprioritize(st, overloaded)
	if r.op.Flags.Has(TxnCommand) && !mongoerr.HasErrorLabel(err, mongoerr.LabelRetryable) {
		// Transactions spec: a commit retried after anything but an
		// overload error asks for w:majority.
		st.commitMajority = true
	}
	unpinForRetry(r.op, st, err)
	r.retries++
	r.announce(ctx, st, err, wait, addr)
	if wait > 0 {
		if serr := r.sleep(ctx, wait); serr != nil {
			if r.took {
				r.tokens.Deposit(backoff.RetryCost) // the retry never ran
				r.took = false
			}
			return r.stop()
		}
	}
	return true, nil, nil
}

// deprioritize adds the failed attempt's server to those selection
// avoids, after overload (with retargeting on) or on a sharded cluster,
// and returns its address ("" when selection failed).
func (r *retrier) deprioritize(st *opState, overloaded bool) string {
	if st.server == nil {
		return ""
	}
	addr := st.server.Addr()
	if overloaded && !r.e.DisableOverloadRetargeting || r.e.Topology.Description().Kind == topology.Sharded {
		if !slices.Contains(st.deprioritized, addr) {
			st.deprioritized = append(st.deprioritized, addr)
		}
	}
	return addr
}

// neverSent reports whether the failed attempt of a retryable operation
// never reached the server: its check-out found the pool cleared or
// paused, or its server stopped being writable before the write was
// sent. Only operations that would be retried after such an error
// (retryable writes and reads with their option on) get the free retry;
// every operation gets it when its server left the topology before the
// check-out.
func (r *retrier) neverSent(st *opState, err error) bool {
	if st.sent {
		return false
	}
	if errors.Is(err, ErrServerRemoved) {
		// Nothing reached any server: safe to send anywhere else, for
		// any command, unless it is bound to the server that left.
		return r.op.Server == nil
	}
	var cleared *mongoerr.PoolClearedError
	if !errors.As(err, &cleared) && !errors.Is(err, ErrServerNoLongerWritable) {
		return false
	}
	return r.retryableWrite(st) || r.op.Flags.Has(RetryableRead) && r.e.RetryReads && !st.inTxn
}

// unsentExpired reports whether the free retries' time is up: the
// context's deadline has passed or, without one, ServerSelectionTimeout
// since the operation started.
func (r *retrier) unsentExpired(ctx context.Context) bool {
	now := r.now()
	if dl, ok := ctx.Deadline(); ok {
		return !now.Before(dl)
	}
	return now.Sub(r.start) >= r.e.Topology.Options().ServerSelectionTimeout
}

func serverAddr(st *opState) string {
	if st.server == nil {
		return ""
	}
	return st.server.Addr()
}

// overloadAllowed is the overload policy's gate: writes need RetryWrites,
// reads RetryReads, generic commands both.
func (r *retrier) overloadAllowed() bool {
	switch {
	case r.op.Flags.Has(TxnCommand):
		return true
	case r.op.Flags.Has(RunCommand):
		return r.e.RetryWrites && r.e.RetryReads
	case r.op.Flags.Has(Write):
		return r.e.RetryWrites
	default:
		return r.e.RetryReads
	}
}

// retryableWrite reports whether the operation runs under the Retryable
// Writes spec: an eligible write with retryWrites on that carries a
// txnNumber, or that has not yet reached a server to learn whether it
// supports one.
func (r *retrier) retryableWrite(st *opState) bool {
	if st.inTxn {
		// Transactions spec: only commit and abort are retried as
		// retryable writes, and they are whatever retryWrites says.
		return r.op.Flags.Has(TxnCommand)
	}
	return r.op.Flags.Has(RetryableWrite) && r.e.RetryWrites && (st.txnNumber != nil || !st.checkedOut)
}

// announce publishes the RetryEvent and the debug log record of a retry.
func (r *retrier) announce(ctx context.Context, st *opState, reason error, wait time.Duration, addr string) {
	tokens := 0.0
	if r.tokens != nil {
		tokens = r.tokens.Tokens()
	}
	var txn *int64
	if st.txnNumber != nil {
		n := *st.txnNumber
		txn = &n
	}
	if m := r.e.Monitor; m != nil && m.Retry != nil {
		m.Retry(ctx, &event.RetryEvent{
			OperationID: st.opID, CommandName: st.name, Attempt: r.retries + r.unsent, Reason: reason,
			Backoff: wait, TokensLeft: tokens, ServerAddress: addr, TxnNumber: txn,
		})
	}
	if l := r.e.Logger; l != nil && l.Enabled(ctx, slog.LevelDebug) {
		attrs := []slog.Attr{
			slog.String("command", st.name),
			slog.Int64("operationId", st.opID),
			slog.Int("retry", r.retries+r.unsent),
			slog.String("server", addr),
			slog.String("reason", reason.Error()),
			slog.Bool("overload", mongoerr.HasErrorLabel(reason, mongoerr.LabelSystemOverloaded)),
			slog.Duration("backoff", wait),
			slog.Float64("tokensLeft", tokens),
		}
		if txn != nil {
			attrs = append(attrs, slog.Int64("txnNumber", *txn))
		}
		l.LogAttrs(ctx, slog.LevelDebug, "retrying command", attrs...)
	}
}

func (r *retrier) jitter() float64 {
	if r.e.Jitter != nil {
		return r.e.Jitter()
	}
	return rand.Float64()
}

func (r *retrier) now() time.Time {
	if r.e.Now != nil {
		return r.e.Now()
	}
	return time.Now()
}

func (r *retrier) sleep(ctx context.Context, d time.Duration) error {
	if r.e.Sleep != nil {
		return r.e.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// writeAttempted reports whether err says the attempt may have written:
// the command was sent and the error is not labelled NoWritesPerformed.
func writeAttempted(st *opState, err error) bool {
	return st.sent && !mongoerr.HasErrorLabel(err, mongoerr.LabelNoWritesPerformed)
}

// isRetryableWriteError: a network error, a pool-cleared error, or the
// RetryableWriteError label (set by 4.4+ servers, by labelNetworkError,
// and by labelPre44 for older servers).
func isRetryableWriteError(err error) bool {
	var cleared *mongoerr.PoolClearedError
	return mongoerr.IsNetworkError(err) || errors.As(err, &cleared) ||
		mongoerr.HasErrorLabel(err, mongoerr.LabelRetryableWrite)
}

// isRetryableReadError: a network error, a pool-cleared error or a
// retryable read code (also met during a connection handshake).
func isRetryableReadError(err error) bool {
	var cleared *mongoerr.PoolClearedError
	if mongoerr.IsNetworkError(err) || errors.As(err, &cleared) {
		return true
	}
	var ce *mongoerr.CommandError
	return errors.As(err, &ce) && mongoerr.IsRetryableReadCode(ce.Code)
}

// pre44Retryable is the Retryable Writes spec 1.0's test for servers that do
// not label: a listed code, or a "not master" / "node is recovering" message,
// at top level or in the writeConcernError. WriteConcernFailed (64) is not
// listed and so never retryable.
func pre44Retryable(err error) bool {
	match := func(code int32, msg string) bool {
		return mongoerr.IsRetryableWriteCode(code) ||
			strings.Contains(msg, "not master") || strings.Contains(msg, "node is recovering")
	}
	var ce *mongoerr.CommandError
	if errors.As(err, &ce) && match(ce.Code, ce.Message) {
		return true
	}
	var wex *mongoerr.WriteException
	return errors.As(err, &wex) && wex.WriteConcernError != nil &&
		match(wex.WriteConcernError.Code, wex.WriteConcernError.Message)
}

// labelNetworkError adds the RetryableWriteError label, as drivers do, to a
// network error met by a write eligible for retry and, for servers before
// 4.4, to server errors the Retryable Writes spec 1.0 classifies as
// retryable.
func (e *Executor) labelNetworkError(op *Operation, st *opState, err error) error {
	if err == nil || op.Flags.Has(Unacknowledged) {
		return err
	}
	if st.inTxn {
		if !op.Flags.Has(TxnCommand) {
			return err // no RetryableWriteError inside a transaction
		}
	} else if !op.Flags.Has(RetryableWrite) || !e.RetryWrites || (st.txnNumber == nil && st.checkedOut) {
		return err
	}
	if mongoerr.HasErrorLabel(err, mongoerr.LabelRetryableWrite) {
		return err
	}
	var ne *mongoerr.NetworkError
	if errors.As(err, &ne) {
		if ne == err {
			// A copy: the pool may hand the same dial error to several
			// waiters.
			labelled := *ne
			labelled.Labels = append(slices.Clip(ne.Labels), mongoerr.LabelRetryableWrite)
			return &labelled
		}
		return &labelledError{err: err, labels: []string{mongoerr.LabelRetryableWrite}}
	}
	if st.txnNumber != nil && st.wire < 9 && pre44Retryable(err) {
		var ce *mongoerr.CommandError
		if errors.As(err, &ce) {
			ce.Labels = append(ce.Labels, mongoerr.LabelRetryableWrite)
			return err
		}
		var wex *mongoerr.WriteException
		if errors.As(err, &wex) {
			wex.Labels = append(wex.Labels, mongoerr.LabelRetryableWrite)
		}
	}
	return err
}

// labelledError adds client-side labels to an error it wraps.
type labelledError struct {
	err    error
	labels []string
}

func (e *labelledError) Error() string { return e.err.Error() }
func (e *labelledError) Unwrap() error { return e.err }
func (e *labelledError) HasErrorLabel(label string) bool {
	return slices.Contains(e.labels, label) || mongoerr.HasErrorLabel(e.err, label)
}

// transactionNumbersRejected is IllegalOperation (20) with a message
// starting "Transaction numbers": the deployment cannot take retryable
// writes (MMAPv1).
func transactionNumbersRejected(err error) bool {
	var ce *mongoerr.CommandError
	return errors.As(err, &ce) && ce.Code == mongoerr.CodeIllegalOperation && strings.HasPrefix(ce.Message, "Transaction numbers") &&
		!ce.HasErrorLabel(mongoerr.LabelRetryableWrite)
}

// baseBackoff is the error's positive baseBackoffMS, or 0 for the default.
func baseBackoff(err error) time.Duration {
	var raw bson.Raw
	var ce *mongoerr.CommandError
	var wex *mongoerr.WriteException
	switch {
	case errors.As(err, &ce):
		raw = ce.Raw
	case errors.As(err, &wex):
		raw = wex.Raw
	default:
		return 0
	}
	v, lerr := raw.LookupErr("baseBackoffMS")
	if lerr != nil {
		return 0
	}
	ms, ok := v.AsFloat64OK()
	if !ok || ms <= 0 || ms > float64(backoff.Max/time.Millisecond) {
		if ok && ms > 0 {
			return backoff.Max
		}
		return 0
	}
	return time.Duration(ms * float64(time.Millisecond))
}
