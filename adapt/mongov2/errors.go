package mongov2

import (
	"errors"
	"strings"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/mongoerr"
)

// Error is an official driver error translated into sturdy's error types.
// errors.As finds both: the sturdy type (what once and optimistic classify)
// and the official driver's original.
type Error struct {
	Translated error // *sturdy.CommandError, *sturdy.WriteException, ... or a sturdy sentinel
	Original   error // the official driver's error
}

func (e *Error) Error() string { return e.Original.Error() }

// Unwrap returns the translated error first, so its labels answer
// sturdy.HasErrorLabel.
func (e *Error) Unwrap() []error { return []error{e.Translated, e.Original} }

// HasErrorLabel reports the translated error's labels (sturdy.HasErrorLabel
// follows single-error Unwrap chains only).
func (e *Error) HasErrorLabel(label string) bool { return sturdy.HasErrorLabel(e.Translated, label) }

func labelsOf(err error) []string {
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return ce.Labels
	}
	var we mongo.WriteException
	if errors.As(err, &we) {
		return we.Labels
	}
	return nil
}

// translate maps an official driver error to sturdy's types. Errors it does
// not know stay as they are: once then treats an interrupted write as one
// that may have been applied, the safe side.
func translate(err error) error {
	if err == nil {
		return nil
	}
	wrap := func(t error) error { return &Error{Translated: t, Original: err} }
	var sse topology.ServerSelectionError
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
		return wrap(sturdy.ErrNoDocuments)
	case errors.Is(err, mongo.ErrClientDisconnected):
		return wrap(sturdy.ErrClientDisconnected)
	case errors.As(err, &sse):
		// The official driver returns the first error when a retry's
		// selection fails, so a selection error means nothing was sent.
		return mongoerr.NotSent(&sturdy.ServerSelectionError{Reason: "suitable server", Topology: sse.Desc.String(), Err: err})
	case isPoolCleared(err):
		return mongoerr.NotSent(wrap(&sturdy.PoolClearedError{Cause: err}))
	case mongo.IsNetworkError(err):
		// The official driver labels failures to open a connection
		// "connection handshake": nothing was sent on them.
		if strings.Contains(err.Error(), "handshake") {
			return mongoerr.NotSent(&sturdy.NetworkError{Op: "handshake", Err: err, Labels: labelsOf(err)})
		}
		return &sturdy.NetworkError{Op: "read", Err: err, Labels: labelsOf(err)}
	}
	var we mongo.WriteException
	if errors.As(err, &we) {
		t := &sturdy.WriteException{Labels: we.Labels}
		for _, w := range we.WriteErrors {
			t.WriteErrors = append(t.WriteErrors, sturdy.WriteError{Index: w.Index, Code: int32(w.Code), Message: w.Message, Details: w.Details, Raw: w.Raw})
		}
		if c := we.WriteConcernError; c != nil {
			t.WriteConcernError = &sturdy.WriteConcernError{Code: int32(c.Code), Name: c.Name, Message: c.Message, Details: c.Details, Raw: c.Raw}
		}
		return wrap(t)
	}
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return wrap(&sturdy.CommandError{Code: ce.Code, Name: ce.Name, Message: ce.Message, Labels: ce.Labels, Raw: ce.Raw})
	}
	return err
}

// isPoolCleared reports a check-out the official driver refused because the
// pool was cleared (its error type is unexported): nothing was sent.
func isPoolCleared(err error) bool {
	var r interface{ Retryable() bool }
	if !errors.As(err, &r) {
		return false
	}
	e, ok := r.(error)
	return ok && strings.Contains(e.Error(), "was cleared because")
}
