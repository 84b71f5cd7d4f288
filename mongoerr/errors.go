package mongoerr

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Error labels with meaning to the client.
const (
	LabelRetryableWrite    = "RetryableWriteError"
	LabelNoWritesPerformed = "NoWritesPerformed"
	LabelSystemOverloaded  = "SystemOverloadedError"
	LabelRetryable         = "RetryableError"
	LabelTransientTxn      = "TransientTransactionError"
	// LabelUnknownCommitResult: a commit's outcome is unknown; committing
	// again is safe.
	LabelUnknownCommitResult = "UnknownTransactionCommitResult"
	// LabelResumableChangeStream: a change stream can resume after this
	// error.
	LabelResumableChangeStream = "ResumableChangeStreamError"
)

var (
	// ErrClientDisconnected is the error of an operation on a client after
	// Disconnect, including one that was waiting for a server when
	// Disconnect ran.
	ErrClientDisconnected = errors.New("sturdy: client is disconnected")
	// ErrSessionEnded is the error of an operation on an ended session.
	ErrSessionEnded = errors.New("sturdy: session has ended")
	// ErrUnacknowledgedSession is the error of an unacknowledged (w: 0)
	// write given an explicit session outside a transaction: the server
	// could not tell the client whether the session's state changed.
	ErrUnacknowledgedSession = errors.New("sturdy: unacknowledged writes cannot use an explicit session")
)

// CommandError is a command the server answered with {ok: 0}.
type CommandError struct {
	Code    int32
	Name    string
	Message string
	Labels  []string
	Raw     bson.Raw // the whole reply
}

func (e *CommandError) Error() string {
	if e.Name != "" {
		return fmt.Sprintf("(%s) %s", e.Name, e.Message)
	}
	return fmt.Sprintf("command failed with code %d: %s", e.Code, e.Message)
}

// HasErrorLabel reports whether the server attached label.
func (e *CommandError) HasErrorLabel(label string) bool { return slices.Contains(e.Labels, label) }

// WriteError is one failed statement of a write command.
type WriteError struct {
	Index   int
	Code    int32
	Message string
	Details bson.Raw
	Raw     bson.Raw
}

func (e WriteError) Error() string {
	return fmt.Sprintf("write error %d at index %d: %s", e.Code, e.Index, e.Message)
}

// WriteConcernError is the server's report that a write could not satisfy
// its write concern.
type WriteConcernError struct {
	Code    int32
	Name    string
	Message string
	Details bson.Raw
	Raw     bson.Raw
}

func (e *WriteConcernError) Error() string {
	return fmt.Sprintf("write concern error (%s, %d): %s", e.Name, e.Code, e.Message)
}

// WriteException is a write command that returned ok: 1 with write errors
// or a write concern error.
type WriteException struct {
	WriteErrors       []WriteError
	WriteConcernError *WriteConcernError
	Labels            []string
	Raw               bson.Raw
}

func (e *WriteException) Error() string {
	var parts []string
	for _, we := range e.WriteErrors {
		parts = append(parts, we.Error())
	}
	if e.WriteConcernError != nil {
		parts = append(parts, e.WriteConcernError.Error())
	}
	return "write exception: " + strings.Join(parts, "; ")
}

// HasErrorLabel reports whether the server attached label.
func (e *WriteException) HasErrorLabel(label string) bool { return slices.Contains(e.Labels, label) }

// NetworkError is a failure to reach or talk to a server. The connection it
// happened on is closed and never reused.
type NetworkError struct {
	Addr   string
	Op     string // "dial", "handshake", "write", "read", "decode"
	Err    error
	Labels []string // labels the client attached (e.g. RetryableWriteError)
}

func (e *NetworkError) Error() string {
	return fmt.Sprintf("network error during %s with %s: %v", e.Op, e.Addr, e.Err)
}
func (e *NetworkError) Unwrap() error { return e.Err }

// HasErrorLabel reports whether the client attached label.
func (e *NetworkError) HasErrorLabel(label string) bool { return slices.Contains(e.Labels, label) }

// Timeout reports whether the network error was a timeout.
func (e *NetworkError) Timeout() bool { return isTimeout(e.Err) }

// IncompatibleError says a server's wire-version range does not overlap
// with this client's (SupportedMin to SupportedMax). Server selection fails
// with it, wrapped in a *ServerSelectionError.
type IncompatibleError struct {
	Addr           string
	MinWireVersion int32 // the server's range
	MaxWireVersion int32
	SupportedMin   int32 // this client's range
	SupportedMax   int32
}

func (e *IncompatibleError) Error() string {
	if e.MinWireVersion > e.SupportedMax {
		return fmt.Sprintf("server at %s requires wire version %d, but this version of sturdy only supports up to %d",
			e.Addr, e.MinWireVersion, e.SupportedMax)
	}
	return fmt.Sprintf("server at %s reports wire version %d, but this version of sturdy requires at least %d (MongoDB 4.4)",
		e.Addr, e.MaxWireVersion, e.SupportedMin)
}

// ReadPrefError is a read preference that can never be satisfied as given
// (server selection returns it as is, without waiting).
type ReadPrefError struct{ Reason string }

func (e *ReadPrefError) Error() string { return "invalid read preference: " + e.Reason }

// ServerSelectionError is returned when no suitable server was found before
// the server selection timeout or the context deadline.
type ServerSelectionError struct {
	Reason   string // what was wanted ("writable server", "read preference secondary")
	Topology string // a summary of the topology description at the time
	Err      error  // the last server error seen, or the context error
}

func (e *ServerSelectionError) Error() string {
	s := "server selection error: no " + e.Reason + " available; topology: " + e.Topology
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}
func (e *ServerSelectionError) Unwrap() error { return e.Err }

// labeled is implemented by every error that carries labels.
type labeled interface{ HasErrorLabel(string) bool }

// HasErrorLabel reports whether err, or any error it wraps, carries label.
func HasErrorLabel(err error, label string) bool {
	for err != nil {
		if l, ok := err.(labeled); ok && l.HasErrorLabel(label) {
			return true
		}
		err = errors.Unwrap(err)
	}
	return false
}

// IsNetworkError reports whether err is (or wraps) a network error.
func IsNetworkError(err error) bool {
	var ne *NetworkError
	return errors.As(err, &ne)
}

// IsTimeout reports whether err is a timeout: a context deadline, a network
// timeout, or a server time-limit error (MaxTimeMSExpired 50).
func IsTimeout(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		return true
	}
	var ce *CommandError
	return errors.As(err, &ce) && ce.Code == CodeMaxTimeMSExpired
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// IsDuplicateKey reports whether err is a duplicate-key error (11000, 11001,
// 12582), as a command error, a write error or a write concern error.
func IsDuplicateKey(err error) bool {
	dup := IsDuplicateKeyCode
	var ce *CommandError
	if errors.As(err, &ce) && dup(ce.Code) {
		return true
	}
	var we *WriteException
	if errors.As(err, &we) {
		for _, w := range we.WriteErrors {
			if dup(w.Code) {
				return true
			}
		}
		if we.WriteConcernError != nil && dup(we.WriteConcernError.Code) {
			return true
		}
	}
	return false
}

// TimeoutError is an operation that ran out of its timeoutMS: the deadline
// passed, the server answered MaxTimeMSExpired (50), a socket timed out, or
// the time left could not cover the server's round trip. Err is the last
// error met (nil if none); errors.Is(err, context.DeadlineExceeded) holds.
type TimeoutError struct {
	Err    error
	Detail string // where the expiry was noticed, when there is no Err
}

func (e *TimeoutError) Error() string {
	switch {
	case e.Err == nil:
		return "operation timed out (timeoutMS): " + e.Detail
	case e.Detail != "":
		return "operation timed out (timeoutMS): " + e.Detail + "; last error: " + e.Err.Error()
	}
	return "operation timed out (timeoutMS): " + e.Err.Error()
}

func (e *TimeoutError) Unwrap() error { return e.Err }

// Is makes every TimeoutError a context.DeadlineExceeded.
func (e *TimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// IsMaxTimeExpired reports whether err carries the server's MaxTimeMSExpired
// (code 50): as a command error, a write error or a write concern error.
func IsMaxTimeExpired(err error) bool {
	var ce *CommandError
	if errors.As(err, &ce) && ce.Code == CodeMaxTimeMSExpired {
		return true
	}
	var we *WriteException
	if errors.As(err, &we) {
		if we.WriteConcernError != nil && we.WriteConcernError.Code == CodeMaxTimeMSExpired {
			return true
		}
		for _, w := range we.WriteErrors {
			if w.Code == CodeMaxTimeMSExpired {
				return true
			}
		}
	}
	return false
}
