package blackpipe

import (
	"errors"
	"sync"

	"github.com/sturdy-go/sturdy/wire"
)

// ErrNotExhaust is returned by Request.Stream for a request that was not
// sent with the exhaustAllowed flag: a server must not stream to it.
var ErrNotExhaust = errors.New("blackpipe: request does not allow exhaust replies")

// ErrStreamEnded is returned by Stream.Send after a reply without
// moreToCome ended the stream.
var ErrStreamEnded = errors.New("blackpipe: stream already ended")

// Stream sends successive replies to one exhaustAllowed OP_MSG request,
// as a server streams awaitable hello replies: each reply but the last
// carries moreToCome and answers the previous reply.
type Stream struct {
	r *Request

	mu         sync.Mutex
	responseTo int32
	ended      bool
}

// Stream resolves r and returns a Stream to answer it with. The
// connection dispatches no further request until a reply without
// moreToCome ends the stream (as with a real server, the client may not
// send one); it does watch for the client closing the connection, which
// cancels Context (see WatchClose).
func (r *Request) Stream() (*Stream, error) {
	if r.OpCode != wire.OpMsg || r.Flags&wire.ExhaustAllowed == 0 {
		return nil, ErrNotExhaust
	}
	s := &Stream{r: r, responseTo: r.RequestID}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.resolved {
		return nil, ErrAlreadyReplied
	}
	r.resolved = true // the last Send finishes r
	r.watchLocked()
	return s, nil
}

// Send writes doc ("ok": 1 added if absent) as the next reply, with the
// moreToCome flag if more is true. The last Send (more false) lets the
// connection read requests again.
func (s *Stream) Send(doc any, more bool) error {
	body, err := marshalReply(doc)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return ErrStreamEnded
	}
	r := s.r
	id := r.Conn.s.nextReplyID.Add(1)
	var flags wire.MsgFlags
	if more {
		flags = wire.MoreToCome
	}
	b := wire.AppendMsg(nil, id, s.responseTo, &wire.Msg{Flags: flags, Body: body})
	if r.Compressor != wire.CompressorNoop {
		if b, err = wire.AppendCompressed(nil, b, r.Compressor, -1); err != nil {
			return err
		}
	}
	s.responseTo = id
	if !more {
		s.ended = true
		defer r.finish()
	}
	return r.Conn.write(b, nil)
}
