package sturdy

import (
	"context"
	"errors"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/internal/session"
)

// Session is an explicit client session: operations given the same Session
// (through the Session field of their options) run with the same logical
// session id on the server. A Session is for one goroutine at a time, like
// the official driver's. Multi-document transactions are not supported.
type Session struct {
	client *Client

	mu sync.Mutex
	sc *session.Client
}

// StartSession starts an explicit session. It fails if the deployment does
// not support sessions (a standalone server before 3.6, or one that reports
// no logicalSessionTimeoutMinutes).
func (c *Client) StartSession(ctx context.Context) (*Session, error) {
	if c.closed.Load() {
		return nil, ErrClientDisconnected
	}
	ok, err := c.sessionsSupported(ctx)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errors.New("sturdy: the deployment does not support sessions")
	}
	return &Session{client: c, sc: session.NewClient(c.sessions, false)}, nil
}

// ID returns the session's lsid document ({id: UUID}), or nil before the
// session's first operation (the server session is taken from the pool
// lazily, when the first command is sent).
func (s *Session) ID() bson.Raw {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sc.ID()
}

// EndSession ends the session and returns its server session to the client's
// pool. Using the session afterwards fails with ErrSessionEnded.
func (s *Session) EndSession(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sc.End()
}

// client returns the internal session for an operation of client c.
func (s *Session) use(c *Client) (*session.Client, error) {
	if s.client != c {
		return nil, errors.New("sturdy: session was started by a different client")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sc.Ended {
		return nil, ErrSessionEnded
	}
	return s.sc, nil
}
