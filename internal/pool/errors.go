package pool

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/sturdy-go/sturdy/internal/mongoerr"
)

// ErrPoolClosed is returned by CheckOut once the pool has been closed.
var ErrPoolClosed = errors.New("pool: attempted to check out a connection from a closed connection pool")

// PoolClearedError is returned by CheckOut while the pool is paused: it was
// cleared after an error (Cause) and the server has not been seen healthy
// since, or it was never marked ready.
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
	return label == mongoerr.LabelRetryableWrite
}

// Retryable reports true: a check-out from a cleared pool never reached the
// server.
func (e *PoolClearedError) Retryable() bool { return true }

// WaitQueueTimeoutError is returned by CheckOut when its context ended (or
// Options.WaitQueueTimeout passed) before a connection became available.
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

// addBackpressureLabels marks a network error met while connecting or during
// the hello handshake as a possible sign of server overload
// (SystemOverloadedError and RetryableError), so that SDAM does not clear the
// pool for it. Errors that overload cannot cause (DNS failures, certificate
// problems) and errors after the hello (authentication) are left alone.
func addBackpressureLabels(err error) error {
	var ne *mongoerr.NetworkError
	if !errors.As(err, &ne) || (ne.Op != "dial" && ne.Op != "handshake") {
		return err
	}
	var cmdErr *mongoerr.CommandError
	if errors.As(err, &cmdErr) {
		return err // the server answered: not overload of the connection kind
	}
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	if errors.As(err, &dnsErr) || errors.As(err, &certErr) || errors.As(err, &unknownAuthority) ||
		errors.As(err, &hostname) || errors.As(err, &invalid) {
		return err
	}
	for _, l := range []string{mongoerr.LabelSystemOverloaded, mongoerr.LabelRetryable} {
		if !slices.Contains(ne.Labels, l) {
			ne.Labels = append(ne.Labels, l)
		}
	}
	return err
}
