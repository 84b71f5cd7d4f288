package sturdy

// Dirty reports whether the session's server session saw a network error
// during an operation: such a session is discarded instead of returning to
// the pool when it ends. It is false before the session's first operation
// and after it has ended. The unified test format's assertSessionDirty
// checks it.
func (s *Session) Dirty() bool {
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
