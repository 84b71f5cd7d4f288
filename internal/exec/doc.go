// Package exec is the one path every command of the client takes: server
// selection, connection check-out, command assembly (lsid, txnNumber,
// $readPreference, $clusterTime; $db via conn.Request), command monitoring
// events, error classification and SDAM error handoff, and check-in.
//
// Execute runs an operation as a loop of attempts. Today the loop runs one
// attempt; retryable writes, retryable reads and the overload (backpressure)
// policy plug into it as a retryPolicy (see retry.go) without changing the
// attempt itself. Everything an operation must keep between attempts — the
// operation id, the session and the transaction number a retry must reuse,
// the servers to deprioritize — lives in one opState.
package exec
