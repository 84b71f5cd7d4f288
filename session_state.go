package sturdy

// Session state that tests observe. The unified spec-test runner lives in
// another package (internal/harness/spectest), so an export_test.go file —
// visible only to this package's own tests — cannot serve it; the dirty flag
// goes through testhook instead of becoming public API, and the pinning
// accessors are public because applications debugging load-balanced or
// sharded transactions can use them too.

import "github.com/sturdy-go/sturdy/internal/testhook"

func init() {
	testhook.SessionDirty = func(s any) bool { return s.(*Session).dirty() }
}

// dirty reports whether the session's server session saw a network error
// during an operation: such a session is discarded instead of returning to
// the pool when it ends. It is false before the session's first operation
// and after it has ended. Only tests ask (the unified test format's
// assertSessionDirty), through testhook.SessionDirty.
func (s *Session) dirty() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sc.Server != nil && s.sc.Server.Dirty
}

// PinnedConnection reports whether the session's transaction holds a
// pinned connection (load-balanced mode). The unified test format's
// assertSessionPinned and assertSessionUnpinned check it.
func (s *Session) PinnedConnection() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sc.Pinned != nil
}

// PinnedServer returns the address of the mongos the session's sharded
// transaction is pinned to, or "" when it is not pinned (transactions
// spec, "Mongos Pinning"). The unified test format's assertSessionPinned
// and targetedFailPoint read it.
func (s *Session) PinnedServer() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sc.Txn.Pinned
}
