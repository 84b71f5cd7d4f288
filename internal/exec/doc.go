// Package exec is the one path every command of the client takes: server
// selection, connection check-out, command assembly (lsid, txnNumber,
// $readPreference, $clusterTime; $db via conn.Request), command monitoring
// events, error classification and SDAM error handoff, and check-in.
//
// Execute runs an operation as a loop of attempts; retry.go's policy decides
// after each failure whether to run another: retryable writes (Retryable
// Writes spec 1.0: once, same txnNumber), retryable reads, and the overload
// policy (Client Backpressure spec: RetryableError label, backoff with
// jitter, the retry token bucket, deprioritized servers), combined as
// docs/retry-policy.md says. The specifications:
// https://github.com/mongodb/specifications/blob/master/source/retryable-writes/retryable-writes.md
// and
// https://github.com/mongodb/specifications/blob/master/source/client-backpressure/client-backpressure.md.
// Everything an operation keeps between attempts — the operation id, the
// session and the transaction number a retry must reuse, the servers to
// deprioritize, the error to report — lives in one opState, together with
// room for what each attempt builds (the assembled command, the
// started-event hook); opStates are recycled once Execute returns. The
// backoff's sleep, jitter and clock are injectable on the Executor.
//
// Under a client-side operation timeout (package csot: timeoutMS at any
// level) each command carries maxTimeMS = time left − the server's minimum
// RTT and is not sent when that is not positive; retryable writes and
// reads retry until the deadline instead of once; and an error met at the
// deadline (or the server's MaxTimeMSExpired) is returned as a
// mongoerr.TimeoutError wrapping it.
package exec
