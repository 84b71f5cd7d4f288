package exec

import "context"

// retryPolicy decides, after a failed attempt, whether the operation runs
// another one. It is where retryable writes and reads (seed 002: retry once
// with the same txnNumber after SDAM has processed the error and a server
// has been selected again) and the overload policy (seed 003: RetryableError
// label, backoff with jitter, the token bucket, deprioritized servers) plug
// in: Execute calls retry after every failed attempt and succeeded after the
// successful one, and reruns selection and attempt while retry says so.
type retryPolicy interface {
	// retry is called after attempt number st.attempts failed with err (a
	// server selection error, a check-out error or an attempt error). It
	// reports whether to try again and otherwise the error Execute
	// returns (the latest one, or an earlier one when the latest tells the
	// caller less, e.g. a driver-side failure on the retry). A policy that
	// retries may wait (honouring ctx), publish a RetryEvent and add to
	// st.deprioritized first.
	retry(ctx context.Context, st *opState, err error) (again bool, final error)
	// succeeded is called once when an attempt succeeds (token deposits).
	succeeded(st *opState)
}

// noRetry runs every operation exactly once: the behaviour until issues 4
// (retryable writes/reads) and 5 (backpressure) replace it in
// Executor.policyFor.
type noRetry struct{}

func (noRetry) retry(_ context.Context, _ *opState, err error) (bool, error) { return false, err }
func (noRetry) succeeded(*opState)                                           {}
