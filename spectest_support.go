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
