package once

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/adapt"
	"github.com/sturdy-go/sturdy/mongoerr"
)

// Options configures a Collection. The zero value is the default.
type Options struct {
	// PendingField is the array holding the tokens of unfinished increments.
	// Default "pending".
	PendingField string
	// CutoffField holds the newest token Reconcile has folded; step one of
	// an Increment refuses tokens at or below it. Default "pendingCutoff".
	CutoffField string
	// RetryOn decides whether an error is worth the one retry. Default
	// IsTransient.
	RetryOn func(error) bool
}

// Collection wraps a sturdy collection with the exactly-once operations. It
// is safe for concurrent use.
type Collection struct {
	coll    adapt.Collection
	pending string
	cutoff  string
	retryOn func(error) bool

	// newToken mints step-one tokens; tests replace it to age tokens.
	newToken func() bson.ObjectID
	// beforeSetUnset runs in Reconcile's SetUnset mode between reading a
	// document and writing its totals; tests use it to interleave writers.
	beforeSetUnset func(id any)
}

// New wraps coll: a *sturdy.Collection, or another driver's collection
// through an adapter such as adapt/mongov2. At most one Options is used
// (the last non-nil one).
func New(coll adapt.Collection, opts ...*Options) *Collection {
	var o Options
	for _, p := range opts {
		if p != nil {
			o = *p
		}
	}
	if o.PendingField == "" {
		o.PendingField = "pending"
	}
	if o.CutoffField == "" {
		o.CutoffField = "pendingCutoff"
	}
	if o.RetryOn == nil {
		o.RetryOn = IsTransient
	}
	return &Collection{coll: coll, pending: o.PendingField, cutoff: o.CutoffField, retryOn: o.RetryOn, newToken: bson.NewObjectID}
}

// Unwrap returns the underlying sturdy collection, or nil when New was
// given another implementation of adapt.Collection (see Underlying).
func (c *Collection) Unwrap() *sturdy.Collection {
	sc, _ := c.coll.(*sturdy.Collection)
	return sc
}

// Underlying returns the collection New was given.
func (c *Collection) Underlying() adapt.Collection { return c.coll }

var (
	// ErrNotIdempotent is returned, before anything is sent, for an update
	// that would not leave the same document if applied twice.
	ErrNotIdempotent = errors.New("once: update is not idempotent")
	// ErrTokenRejected is wrapped by an IncrementError when step one's token
	// is at or below the document's cutoff: Reconcile has already folded a
	// token as new or newer, so adding this one could count an increment
	// twice (see Collection.Reconcile).
	ErrTokenRejected = errors.New("once: increment token is older than the document's reconcile cutoff")
	// ErrInvalidIncrement is wrapped by errors about an Increment's fields.
	ErrInvalidIncrement = errors.New("once: invalid increment")
)

// IsTransient reports whether err is worth one retry: a network error, an
// error the server or client labelled RetryableWriteError, or a
// not-primary / shutting-down error. Server selection errors are not
// transient (the driver has already waited for a server), nor are command
// errors such as a duplicate key or a failed authorization.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	var sse *sturdy.ServerSelectionError
	if errors.As(err, &sse) {
		return false
	}
	if sturdy.IsNetworkError(err) || sturdy.HasErrorLabel(err, sturdy.LabelRetryableWrite) {
		return true
	}
	// A check-out refused after a pool clear sent nothing: trying again is
	// safe. (sturdy retries these itself; the official driver may not.)
	var pce *sturdy.PoolClearedError
	if errors.As(err, &pce) {
		return true
	}
	var ce *sturdy.CommandError
	if errors.As(err, &ce) {
		return mongoerr.IsRetryableWriteCode(ce.Code)
	}
	var we *sturdy.WriteException
	if errors.As(err, &we) && len(we.WriteErrors) == 0 && we.WriteConcernError != nil {
		return mongoerr.IsRetryableWriteCode(we.WriteConcernError.Code)
	}
	return false
}

// mayHaveApplied reports whether a failed write might have been applied:
// its request may have reached the server and the reply was lost, or the
// server applied it but could not satisfy the write concern.
func mayHaveApplied(err error) bool {
	// The executor says when nothing was sent (a pool-cleared check-out,
	// a failed dial, server selection); it must be asked before the network
	// error a pool-cleared error wraps is seen.
	if sturdy.SafeToRetry(err) || sturdy.HasErrorLabel(err, sturdy.LabelNoWritesPerformed) {
		return false
	}
	if sturdy.IsNetworkError(err) {
		return true
	}
	var ce *sturdy.CommandError
	switch {
	case errors.As(err, &ce), errors.Is(err, sturdy.ErrInvalidArgument), errors.Is(err, sturdy.ErrClientDisconnected):
		return false
	}
	var we *sturdy.WriteException
	if errors.As(err, &we) {
		return we.WriteConcernError != nil
	}
	return true // a context error mid-flight, or something unknown
}

// Retry runs op and, if it fails with a transient error (IsTransient) while
// ctx is still live, runs it once more and returns the second result. Use it
// for operations that are naturally idempotent, such as reads:
//
//	err := once.Retry(ctx, func(ctx context.Context) error {
//		return coll.FindOne(ctx, filter).Decode(&doc)
//	})
func Retry(ctx context.Context, op func(ctx context.Context) error) error {
	_, err := retry(ctx, IsTransient, op)
	return err
}

// retry is Retry with a classifier; it reports whether op ran twice.
func retry(ctx context.Context, retryOn func(error) bool, op func(ctx context.Context) error) (retried bool, err error) {
	err = op(ctx)
	if err == nil || !retryOn(err) || ctx.Err() != nil {
		return false, err
	}
	return true, op(ctx)
}

// DuplicateKeyError is a duplicate key that is not the expected echo of an
// earlier attempt: on the first attempt (the _id is already taken), or on a
// unique index other than _id.
type DuplicateKeyError struct {
	Index string // the index name, e.g. "_id_" or "email_1"; "" if the server did not say
	ID    any    // the _id of the document being written
	Err   error  // the server's error
}

func (e *DuplicateKeyError) Error() string {
	return fmt.Sprintf("once: duplicate key on index %q for _id %v: %v", e.Index, e.ID, e.Err)
}

func (e *DuplicateKeyError) Unwrap() error { return e.Err }

// isDuplicateID reports whether err is a duplicate key on the _id index.
func isDuplicateID(err error) bool {
	ix, dup := sturdy.DuplicateKeyIndex(err)
	return dup && ix == "_id_"
}
