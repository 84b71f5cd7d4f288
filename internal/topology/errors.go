package topology

import (
	"errors"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/internal/conn"
	"github.com/sturdy-go/sturdy/internal/pool"
	"github.com/sturdy-go/sturdy/mongoerr"
)

// ErrTopologyClosed is returned by SelectServer after Disconnect. It is the
// client's ErrClientDisconnected, so an operation racing Disconnect reports
// that and nothing else.
var ErrTopologyClosed = mongoerr.ErrClientDisconnected

// stateChange is a "not writable primary" or "node is recovering" error
// found in a reply.
type stateChange struct {
	shutdown        bool
	topologyVersion *TopologyVersion
}

// IsStateChangeError reports whether err is a "not writable primary" or
// "node is recovering" error, by code or, when the server sent none, by
// message. Write errors are never state changes; write concern errors can be.
func IsStateChangeError(err error) bool {
	_, ok := classifyStateChange(err)
	return ok
}

func classifyStateChange(err error) (stateChange, bool) {
	var (
		code  int32
		msg   string
		reply bson.Raw
	)
	var ce *mongoerr.CommandError
	var we *mongoerr.WriteException
	switch {
	case errors.As(err, &ce):
		code, msg, reply = ce.Code, ce.Message, ce.Raw
	case errors.As(err, &we) && we.WriteConcernError != nil:
		code, msg, reply = we.WriteConcernError.Code, we.WriteConcernError.Message, we.Raw
	default:
		return stateChange{}, false
	}
	if !isRecovering(code, msg) && !isNotWritablePrimary(code, msg) {
		return stateChange{}, false
	}
	sc := stateChange{shutdown: code != 0 && mongoerr.IsShutdownCode(code)}
	if len(reply) > 0 {
		if v, err := reply.LookupErr("topologyVersion"); err == nil {
			sc.topologyVersion = conn.ParseTopologyVersion(v)
		}
	}
	return sc, true
}

func isRecovering(code int32, msg string) bool {
	if code != 0 {
		return mongoerr.IsRecoveringCode(code)
	}
	return strings.Contains(msg, "not master or secondary") || strings.Contains(msg, "node is recovering")
}

func isNotWritablePrimary(code int32, msg string) bool {
	if code != 0 {
		return mongoerr.IsNotWritablePrimaryCode(code)
	}
	if isRecovering(0, msg) {
		return false
	}
	return strings.Contains(msg, "not master")
}

// poolSideError reports errors that the pool produced without talking to
// the server: they say nothing new about the server's state.
func poolSideError(err error) bool {
	var pce *mongoerr.PoolClearedError
	var wqe *mongoerr.WaitQueueTimeoutError
	return errors.As(err, &pce) || errors.As(err, &wqe) || errors.Is(err, pool.ErrPoolClosed)
}

// isNetworkTimeout reports a network error that was a timeout (including
// a context deadline that cut a round trip short).
func isNetworkTimeout(err error) bool {
	var ne *mongoerr.NetworkError
	return errors.As(err, &ne) && mongoerr.IsTimeout(err)
}
