package mongosim

import (
	"context"
	"errors"
	"sync"
	"time"
)

// opContext is a request's context while it runs (from opRegistry.begin):
// its parent's (the connection's, or the maxTimeMS deadline's), and
// canceled too by killOp and when the request ends, as the child of
// context.WithCancelCause it replaces would be. That child registered with
// the connection's context on every request and made a done channel on
// every write that waited for its session: ~0.75 µs, 1.5% of mongosim's
// CPU per single-document command. opContext watches its parent only once
// something waits on Done.
//
// As with a child context, the first cancellation wins: a request whose
// parent was canceled first keeps the parent's error and cause. Contexts
// derived from it are canceled with it (the context package watches a
// context of its own type with a goroutine), with Canceled as their cause.
type opContext struct {
	parent context.Context

	mu    sync.Mutex
	err   error // set by cancel
	cause error
	done  chan struct{} // made by Done
	stop  func() bool   // ends the watch of parent that Done set up
}

func (c *opContext) Deadline() (time.Time, bool) { return c.parent.Deadline() }

// Value answers opContextKey with c, so that killed finds c in r.ctx and
// in contexts derived from it, as context.Cause found the cause.
func (c *opContext) Value(key any) any {
	if key == (opContextKey{}) {
		return c
	}
	return c.parent.Value(key)
}

type opContextKey struct{}

func (c *opContext) Err() error {
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	if err != nil {
		return err
	}
	return c.parent.Err()
}

// Done is closed once c or its parent is canceled; from the first call on,
// c watches its parent.
func (c *opContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done != nil {
		return c.done
	}
	c.done = make(chan struct{})
	if c.err == nil {
		if err := c.parent.Err(); err != nil {
			c.err, c.cause = err, context.Cause(c.parent)
		}
	}
	switch {
	case c.err != nil:
		close(c.done)
	case c.parent.Done() != nil:
		c.stop = context.AfterFunc(c.parent, func() { c.cancel(context.Canceled, nil) })
	}
	return c.done
}

// cancel cancels c with err and cause, unless it is canceled already; a
// parent canceled first gives its own error and cause instead.
func (c *opContext) cancel(err, cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	if perr := c.parent.Err(); perr != nil {
		err, cause = perr, context.Cause(c.parent)
	}
	if cause == nil {
		cause = err
	}
	c.err, c.cause = err, cause
	if c.done != nil {
		close(c.done)
	}
	if c.stop != nil {
		c.stop()
	}
}

// killed reports whether killOp canceled c (before anything else did).
func (c *opContext) killed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return errors.Is(c.cause, errKilled)
}
