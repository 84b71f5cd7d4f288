package mongoerr

import "errors"

// SafeToRetry reports whether err is known to have occurred before anything
// of the operation was sent to a server: no attempt wrote its command (it
// failed in server selection, while checking out or opening a connection,
// or encoding the command), so the operation had no effect and running it
// again cannot apply it twice. False means it may have been sent, or that
// nothing is known. As pgconn's SafeToRetry, it is the executor that says
// so, where it knows exactly, not a guess from the error's type.
func SafeToRetry(err error) bool {
	var s interface{ SafeToRetry() bool }
	return errors.As(err, &s) && s.SafeToRetry()
}

// NotSent marks err, an operation's error, as met before anything was sent,
// so that SafeToRetry reports true; it returns nil for nil. The executor
// (and adapters translating another driver's errors) call it; the error's
// message, labels and errors.Is/As answers stay those of err.
func NotSent(err error) error {
	if err == nil || SafeToRetry(err) {
		return err
	}
	return &notSentError{err: err}
}

type notSentError struct{ err error }

func (e *notSentError) Error() string     { return e.err.Error() }
func (e *notSentError) Unwrap() error     { return e.err }
func (e *notSentError) SafeToRetry() bool { return true }
