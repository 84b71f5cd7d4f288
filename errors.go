package sturdy

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/internal/conn"
	"github.com/sturdy-go/sturdy/mongoerr"
)

// The error types every operation can return. They are aliases of the types
// in package mongoerr (where go doc shows their fields), which every layer of
// the driver produces, so errors.As works with either name.
type (
	// CommandError is a command the server answered with {ok: 0}.
	CommandError = mongoerr.CommandError
	// WriteException is a write that returned write errors or a write
	// concern error.
	WriteException = mongoerr.WriteException
	// WriteError is one failed statement of a write.
	WriteError = mongoerr.WriteError
	// WriteConcernError reports that a write did not satisfy its write concern.
	WriteConcernError = mongoerr.WriteConcernError
	// NetworkError is a failure to reach or talk to a server.
	NetworkError = mongoerr.NetworkError
	// ServerSelectionError means no suitable server was found in time.
	ServerSelectionError = mongoerr.ServerSelectionError
	// PoolClearedError is a connection check-out refused because the pool
	// was cleared after an error: nothing was sent to the server.
	PoolClearedError = mongoerr.PoolClearedError
	// WaitQueueTimeoutError is a check-out that waited too long for a
	// connection: nothing was sent to the server.
	WaitQueueTimeoutError = mongoerr.WaitQueueTimeoutError
	// InUseCounts are a load-balanced pool's checked-out connections by
	// purpose (cursors, transactions, other), in WaitQueueTimeoutError.
	InUseCounts = mongoerr.InUseCounts
	// AuthError is a failed authentication; Err is usually the server's
	// CommandError (AuthenticationFailed, 18).
	AuthError = mongoerr.AuthError
	// RetryableWritesUnsupportedError is a retryable write whose
	// transaction number the server rejected; it unwraps to the server's
	// CommandError.
	RetryableWritesUnsupportedError = mongoerr.RetryableWritesUnsupportedError
)

// Error labels a server or the client attaches to errors.
const (
	LabelRetryableWrite    = mongoerr.LabelRetryableWrite
	LabelNoWritesPerformed = mongoerr.LabelNoWritesPerformed
	LabelSystemOverloaded  = mongoerr.LabelSystemOverloaded
	LabelRetryable         = mongoerr.LabelRetryable
)

var (
	// ErrNoDocuments is returned by SingleResult when the query matched nothing.
	ErrNoDocuments = errors.New("sturdy: no documents in result")
	// ErrClientDisconnected is returned by operations on a client after Disconnect.
	ErrClientDisconnected = mongoerr.ErrClientDisconnected
	// ErrSessionEnded is returned when an ended session is used.
	ErrSessionEnded = mongoerr.ErrSessionEnded
	// ErrNilDocument is returned when a required document is nil.
	ErrNilDocument = errors.New("sturdy: document is nil")
	// ErrEmptySlice is returned when a write is given no documents or models.
	ErrEmptySlice = errors.New("sturdy: must provide at least one element")
	// ErrInvalidArgument is wrapped by errors about arguments the client
	// rejects before sending anything (an update without $-operators, a
	// replacement with them, a cursor decoded into a non-slice...).
	ErrInvalidArgument = errors.New("sturdy: invalid argument")
	// ErrUnacknowledgedSession is returned when an unacknowledged (w: 0)
	// write is given an explicit session: the server could not tell the
	// client whether the session's state changed. Inside the session's
	// transaction there is no such write: the collection's w: 0 gives way
	// to the transaction's write concern.
	ErrUnacknowledgedSession = mongoerr.ErrUnacknowledgedSession
	// ErrUnacknowledgedWrite is the error of a FindOneAnd* result under an
	// unacknowledged (w: 0) write concern: the command was sent, but the
	// server returns no document to report.
	ErrUnacknowledgedWrite = errors.New("sturdy: unacknowledged write: the server returned no result")
	// ErrNoServiceID is wrapped by the error of an operation in
	// load-balanced mode (loadBalanced=true) when the server's handshake
	// reply had no serviceId: it is not a mongos behind a load balancer.
	ErrNoServiceID = conn.ErrNoServiceID
)

func argError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// BulkWriteError is one failed write of a BulkWrite or InsertMany. Index is
// the position of the failed model in the caller's slice (not in the batch
// the server saw).
type BulkWriteError struct {
	WriteError
	Model WriteModel // the model that failed; nil for InsertMany
}

func (e BulkWriteError) Error() string { return e.WriteError.Error() }

// BulkWriteException is the error of a BulkWrite or InsertMany that returned
// write errors or a write concern error, or that failed with a command error
// or with a network error after an earlier command of it was answered (Err).
// PartialResult counts what was written; with an ordered write, models
// after the first error were not attempted. The models of the command that
// failed with Err may or may not have been applied.
type BulkWriteException struct {
	WriteErrors       []BulkWriteError
	WriteConcernError *WriteConcernError
	Labels            []string
	PartialResult     *BulkWriteResult
	// Err is the command, network or server-selection error that ended
	// the write; nil if every command was answered. errors.As and
	// HasErrorLabel see through to it.
	Err error
}

// Unwrap returns Err.
func (e *BulkWriteException) Unwrap() error { return e.Err }

func (e *BulkWriteException) Error() string {
	var parts []string
	if e.Err != nil {
		parts = append(parts, e.Err.Error())
	}
	for _, we := range e.WriteErrors {
		parts = append(parts, we.Error())
	}
	if e.WriteConcernError != nil {
		parts = append(parts, e.WriteConcernError.Error())
	}
	return "bulk write exception: " + strings.Join(parts, "; ")
}

// HasErrorLabel reports whether the server attached label.
func (e *BulkWriteException) HasErrorLabel(label string) bool {
	return slices.Contains(e.Labels, label)
}

// ClientBulkWriteException is the error of a Client.BulkWrite that met write
// errors or write concern errors, or a command or network error (Err) after
// some models were written. PartialResult is what is known to have been
// written, nil if no model is; the models of the command that failed with
// Err may or may not have been applied.
type ClientBulkWriteException struct {
	// Err is the top-level error that ended the write, nil if none.
	// errors.As and HasErrorLabel see through to it.
	Err error
	// WriteErrors are the failed models by their index in the caller's
	// slice.
	WriteErrors map[int]WriteError
	// WriteConcernErrors has one entry per command whose write concern
	// failed.
	WriteConcernErrors []WriteConcernError
	// Labels are the labels of replies carrying write concern errors.
	Labels        []string
	PartialResult *ClientBulkWriteResult
}

// Unwrap returns Err.
func (e *ClientBulkWriteException) Unwrap() error { return e.Err }

func (e *ClientBulkWriteException) Error() string {
	var parts []string
	if e.Err != nil {
		parts = append(parts, e.Err.Error())
	}
	idx := make([]int, 0, len(e.WriteErrors))
	for i := range e.WriteErrors {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	for _, i := range idx {
		parts = append(parts, e.WriteErrors[i].Error())
	}
	for i := range e.WriteConcernErrors {
		parts = append(parts, e.WriteConcernErrors[i].Error())
	}
	return "client bulk write exception: " + strings.Join(parts, "; ")
}

// HasErrorLabel reports whether a write concern error's reply carried label
// (labels of Err are found through Unwrap).
func (e *ClientBulkWriteException) HasErrorLabel(label string) bool {
	return slices.Contains(e.Labels, label)
}

// HasErrorLabel reports whether err, or an error it wraps, carries label.
func HasErrorLabel(err error, label string) bool { return mongoerr.HasErrorLabel(err, label) }

// SafeToRetry reports whether err is known to have occurred before anything
// of the operation was sent to a server (server selection, connection
// check-out or dial, encoding), so the operation had no effect. False means
// it may have been sent. Like pgconn's SafeToRetry, the executor marks the
// error where it knows; the error's type alone cannot tell (a server
// selection error can follow an attempt that was sent).
func SafeToRetry(err error) bool { return mongoerr.SafeToRetry(err) }

// IsNetworkError reports whether err is (or wraps) a network error.
func IsNetworkError(err error) bool { return mongoerr.IsNetworkError(err) }

// IsTimeout reports whether err is a timeout: a TimeoutError (timeoutMS), a
// context deadline, a network timeout or a server time limit
// (MaxTimeMSExpired).
func IsTimeout(err error) bool { return mongoerr.IsTimeout(err) }

// IsDuplicateKey reports whether err is a duplicate-key error, as a command
// error, a write error, a bulk write error or a write concern error.
func IsDuplicateKey(err error) bool {
	var cbwe *ClientBulkWriteException
	if errors.As(err, &cbwe) {
		for _, we := range cbwe.WriteErrors {
			if mongoerr.IsDuplicateKeyCode(we.Code) {
				return true
			}
		}
	}
	var bwe *BulkWriteException
	if errors.As(err, &bwe) {
		for _, we := range bwe.WriteErrors {
			if mongoerr.IsDuplicateKeyCode(we.Code) {
				return true
			}
		}
		if bwe.WriteConcernError != nil && mongoerr.IsDuplicateKeyCode(bwe.WriteConcernError.Code) {
			return true
		}
	}
	return mongoerr.IsDuplicateKey(err)
}

var dupIndexInMessage = regexp.MustCompile(`index: (\S+) dup key`)

// DuplicateKeyIndex reports whether err is a duplicate-key error and, if
// so, the name of the unique index it is about: "_id_" when the server's
// keyPattern (4.2+) is {_id: 1}, else the name in its message ("... index:
// email_1 dup key: ..."), else "" when neither says.
func DuplicateKeyIndex(err error) (index string, ok bool) {
	if !IsDuplicateKey(err) {
		return "", false
	}
	type report struct {
		raw bson.Raw
		msg string
	}
	var reports []report
	var cbwe *ClientBulkWriteException
	if errors.As(err, &cbwe) {
		for _, w := range cbwe.WriteErrors {
			if mongoerr.IsDuplicateKeyCode(w.Code) {
				reports = append(reports, report{w.Raw, w.Message})
			}
		}
	}
	var bwe *BulkWriteException
	if errors.As(err, &bwe) {
		for _, w := range bwe.WriteErrors {
			reports = append(reports, report{w.Raw, w.Message})
		}
	}
	var we *WriteException
	if errors.As(err, &we) {
		for _, w := range we.WriteErrors {
			reports = append(reports, report{w.Raw, w.Message})
		}
	}
	var ce *CommandError
	if errors.As(err, &ce) {
		reports = append(reports, report{ce.Raw, ce.Message})
	}
	for _, r := range reports {
		if kp, ok := r.raw.Lookup("keyPattern").DocumentOK(); ok {
			if elems, err := kp.Elements(); err == nil && len(elems) == 1 && elems[0].Key() == "_id" {
				return "_id_", true
			}
		}
		if m := dupIndexInMessage.FindStringSubmatch(r.msg); m != nil {
			return m[1], true
		}
	}
	return "", true
}

// TimeoutError is an operation that ran out of its timeoutMS (see
// Options.Timeout): errors.Is(err, context.DeadlineExceeded) holds, and Err
// is the last error met (a server's MaxTimeMSExpired, a network timeout, a
// server selection error), or nil when the time ran out before sending.
type TimeoutError = mongoerr.TimeoutError
