package mongoerr

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// AuthError is a failed authentication. Err is usually the server's
// *CommandError (code 18, AuthenticationFailed).
type AuthError struct {
	Mechanism string
	Err       error
	// ServiceID is the serviceId of the handshake in load-balanced mode.
	ServiceID *bson.ObjectID
}

func (e *AuthError) Error() string {
	return fmt.Sprintf("authentication with %s failed: %v", e.Mechanism, e.Err)
}

func (e *AuthError) Unwrap() error { return e.Err }

// PoolClearedError is a connection check-out refused while the pool is
// paused: it was cleared after an error (Cause) and the server has not been
// seen healthy since, or it was never marked ready.
//
// It carries the RetryableWriteError label: no command was sent, so the
// operation can always be retried on another (or the same, recovered)
// server. It unwraps to Cause for diagnosis, so classify it with errors.As
// before asking whether it is a network error: it must not mark the server
// Unknown a second time.
type PoolClearedError struct {
	Addr  string
	Cause error // the error that caused the clear; nil if the pool was never ready
}

func (e *PoolClearedError) Error() string {
	if e.Cause == nil {
		return fmt.Sprintf("connection pool for %s is paused (server not yet available)", e.Addr)
	}
	return fmt.Sprintf("connection pool for %s was cleared because another operation failed with: %v", e.Addr, e.Cause)
}

// Unwrap returns the error that caused the clear.
func (e *PoolClearedError) Unwrap() error { return e.Cause }

// HasErrorLabel reports RetryableWriteError: nothing was sent, so a retry is
// always safe.
func (e *PoolClearedError) HasErrorLabel(label string) bool {
	return label == LabelRetryableWrite
}

// Retryable reports true: a check-out from a cleared pool never reached the
// server.
func (e *PoolClearedError) Retryable() bool { return true }

// WaitQueueTimeoutError is a connection check-out whose context ended (or
// whose WaitQueueTimeout passed) before a connection became available:
// nothing was sent to the server.
type WaitQueueTimeoutError struct {
	Addr string
	Wait time.Duration // how long the check-out waited
	Err  error         // ctx.Err(), or context.DeadlineExceeded for WaitQueueTimeout
	// InUse, in load-balanced mode only (else nil), counts the checked-out
	// connections by purpose when the wait ended: a pool exhausted by
	// pinned cursors or transactions is then told apart from a busy one.
	InUse *InUseCounts
}

// InUseCounts are a load-balanced pool's checked-out connections by
// purpose, as the load balancer specification tracks them.
type InUseCounts struct {
	MaxPoolSize  int
	Cursors      int // pinned to cursors
	Transactions int // pinned to transactions
	Other        int
}

func (e *WaitQueueTimeoutError) Error() string {
	msg := fmt.Sprintf("timed out after %v while checking out a connection from the connection pool for %s: %v",
		e.Wait.Round(time.Microsecond), e.Addr, e.Err)
	if u := e.InUse; u != nil {
		msg = fmt.Sprintf("Timeout waiting for connection from the connection pool. maxPoolSize: %d, connections in use by cursors: %d, connections in use by transactions: %d, connections in use by other operations: %d (%s)",
			u.MaxPoolSize, u.Cursors, u.Transactions, u.Other, msg)
	}
	return msg
}

// Unwrap returns the context error, so errors.Is(err, context.DeadlineExceeded) holds.
func (e *WaitQueueTimeoutError) Unwrap() error { return e.Err }

// Timeout reports whether the wait ended by a deadline rather than a cancellation.
func (e *WaitQueueTimeoutError) Timeout() bool { return errors.Is(e.Err, context.DeadlineExceeded) }

// RetryableWritesUnsupportedMessage replaces the server's message when it
// rejects a transaction number (IllegalOperation 20, "Transaction numbers
// are only allowed on ..."), e.g. with the MMAPv1 storage engine.
const RetryableWritesUnsupportedMessage = "This MongoDB deployment does not support retryable writes. " +
	"Please add retryWrites=false to your connection string."

// RetryableWritesUnsupportedError is returned when the server rejected the
// transaction number of a retryable write. It unwraps to the server's
// error (a *CommandError with code 20).
type RetryableWritesUnsupportedError struct{ Err error }

func (e *RetryableWritesUnsupportedError) Error() string { return RetryableWritesUnsupportedMessage }
func (e *RetryableWritesUnsupportedError) Unwrap() error { return e.Err }
