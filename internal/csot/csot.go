package csot

import (
	"context"
	"errors"
	"time"
)

type opKey struct{}    // an operation-level timeoutMS, not yet started
type stateKey struct{} // the timeout of the operation in progress

// opTimeout is an operation-level timeoutMS; its address tells one
// WithOperationTimeout from another (see ErrOverride).
type opTimeout struct{ d time.Duration }

// state is the timeout of a started operation.
type state struct {
	timeout time.Duration // 0: timeoutMS=0, no limit (but legacy options ignored)
	// noMaxTime: commands of this operation carry no maxTimeMS
	// (iteration-mode and tailable cursors, getMore).
	noMaxTime bool
	// txn: the timeout of a whole WithTransaction, which the operations of
	// its callback share and may not override.
	txn      bool
	op       *opTimeout // the operation-level timeout the txn consumed
	deadline time.Time  // the txn's deadline (zero: none)
	err      error      // set by Start: the operation tried to override the txn's timeout
}

// ErrOverride is an operation inside a transaction's callback that sets
// its own timeout (WithOperationTimeout or an earlier context deadline):
// the CSOT spec makes it a client-side error.
var ErrOverride = errors.New("the operation overrides the timeout of the WithTransaction it runs in")

// WithOperationTimeout marks ctx with an operation-level timeoutMS d (0: no
// limit, overriding every other level). Its clock starts when the operation
// starts, not now.
func WithOperationTimeout(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, opKey{}, &opTimeout{d})
}

// OperationTimeout returns the operation-level timeoutMS set on ctx.
func OperationTimeout(ctx context.Context) (time.Duration, bool) {
	o, ok := ctx.Value(opKey{}).(*opTimeout)
	if !ok {
		return 0, false
	}
	return o.d, true
}

// Resolve returns the timeoutMS that applies to an operation run with ctx:
// the operation's own, else the first non-nil level (nearest first).
func Resolve(ctx context.Context, levels ...*time.Duration) (time.Duration, bool) {
	if d, ok := OperationTimeout(ctx); ok {
		return d, true
	}
	for _, l := range levels {
		if l != nil {
			return *l, true
		}
	}
	return 0, false
}

// Start begins an operation with the timeoutMS that applies (see Resolve).
// Inside an operation already started, ctx is returned unchanged: its
// deadline bounds everything the operation does. The cancel func must be
// called when the operation ends.
func Start(ctx context.Context, levels ...*time.Duration) (context.Context, context.CancelFunc) {
	if s, ok := ctx.Value(stateKey{}).(*state); ok {
		if s.txn && s.err == nil && overrides(ctx, s) {
			c := *s
			c.err = ErrOverride
			return context.WithValue(ctx, stateKey{}, &c), func() {}
		}
		return ctx, func() {}
	}
	d, ok := Resolve(ctx, levels...)
	if !ok {
		return ctx, func() {}
	}
	return StartWith(ctx, d, false)
}

// overrides reports whether ctx, inside the transaction s, sets a timeout
// of its own: an operation-level timeout the transaction did not consume,
// or a deadline earlier than the transaction's.
func overrides(ctx context.Context, s *state) bool {
	if o, ok := ctx.Value(opKey{}).(*opTimeout); ok && o != s.op {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && (s.deadline.IsZero() || dl.Before(s.deadline))
}

// StartTxn begins the timeout of a whole transaction (WithTransaction)
// with timeout d (0: no limit): the operations run with the returned
// context share its deadline, and one that sets its own timeout fails
// with ErrOverride (see Err).
func StartTxn(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	o, _ := ctx.Value(opKey{}).(*opTimeout)
	s := &state{timeout: d, txn: true, op: o}
	ctx = context.WithValue(ctx, stateKey{}, s)
	cancel := context.CancelFunc(func() {})
	if d > 0 {
		ctx, cancel = context.WithTimeout(ctx, d)
	}
	s.deadline, _ = ctx.Deadline()
	return ctx, cancel
}

// InTxn reports whether ctx runs under a transaction's timeout.
func InTxn(ctx context.Context) bool {
	s, ok := ctx.Value(stateKey{}).(*state)
	return ok && s.txn
}

// Err returns ErrOverride when Start found that the operation overrides
// its transaction's timeout.
func Err(ctx context.Context) error {
	if s, ok := ctx.Value(stateKey{}).(*state); ok {
		return s.err
	}
	return nil
}

// StartWith begins an operation with timeout d (0: no limit). noMaxTime
// keeps maxTimeMS off its commands.
func StartWith(ctx context.Context, d time.Duration, noMaxTime bool) (context.Context, context.CancelFunc) {
	ctx = context.WithValue(ctx, stateKey{}, &state{timeout: d, noMaxTime: noMaxTime})
	if d > 0 {
		return context.WithTimeout(ctx, d)
	}
	return ctx, func() {}
}

// WithDeadline continues an operation begun earlier (a cursorLifetime
// cursor's getMore) under its original deadline.
func WithDeadline(ctx context.Context, deadline time.Time, noMaxTime bool) (context.Context, context.CancelFunc) {
	ctx = context.WithValue(ctx, stateKey{}, &state{timeout: max(time.Until(deadline), 1), noMaxTime: noMaxTime})
	return context.WithDeadline(ctx, deadline)
}

// WithoutMaxTime marks the operation in progress so that its commands carry
// no maxTimeMS, keeping its deadline.
func WithoutMaxTime(ctx context.Context) context.Context {
	s, ok := ctx.Value(stateKey{}).(*state)
	if !ok || s.noMaxTime {
		return ctx
	}
	c := *s // a transaction's cursor stays in the transaction
	c.noMaxTime = true
	return context.WithValue(ctx, stateKey{}, &c)
}

// Active reports whether a timeoutMS (possibly 0) governs the operation.
func Active(ctx context.Context) bool {
	_, ok := ctx.Value(stateKey{}).(*state)
	return ok
}

// Deadline returns the operation's deadline when a timeoutMS > 0 governs
// it: the earlier of its timeout and ctx's own deadline. Under timeoutMS=0
// a context deadline bounds the waits but is not the operation's timeout.
func Deadline(ctx context.Context) (time.Time, bool) {
	s, ok := ctx.Value(stateKey{}).(*state)
	if !ok || s.timeout <= 0 {
		return time.Time{}, false
	}
	return ctx.Deadline()
}

// SendMaxTime reports whether the operation's commands carry maxTimeMS.
func SendMaxTime(ctx context.Context) bool {
	s, ok := ctx.Value(stateKey{}).(*state)
	return ok && !s.noMaxTime
}

// Timeout returns the timeoutMS of the operation in progress (0: no limit).
func Timeout(ctx context.Context) (time.Duration, bool) {
	s, ok := ctx.Value(stateKey{}).(*state)
	if !ok {
		return 0, false
	}
	return s.timeout, true
}

// WithMaxTime undoes WithoutMaxTime: the operation's commands carry
// maxTimeMS again (a change stream's resume aggregate inside a Next).
func WithMaxTime(ctx context.Context) context.Context {
	s, ok := ctx.Value(stateKey{}).(*state)
	if !ok || !s.noMaxTime {
		return ctx
	}
	c := *s
	c.noMaxTime = false
	return context.WithValue(ctx, stateKey{}, &c)
}
