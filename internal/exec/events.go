package exec

import (
	"context"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/event"
	"github.com/sturdy-go/sturdy/internal/conn"
	"github.com/sturdy-go/sturdy/internal/session"
)

// attemptIdentity is what every event of one attempt repeats.
type attemptIdentity struct {
	requestID          int32
	connectionID       int64
	serverConnectionID *int64
	serviceID          *bson.ObjectID
	address            string
	db                 string
	lsid               bson.Raw
	txnNumber          *int64
	redact             bool
}

func (e *Executor) identity(st *opState, op *Operation, c *conn.Conn, ss *session.Server) attemptIdentity {
	ids := attemptIdentity{
		connectionID:       c.ID(),
		serverConnectionID: c.ServerConnectionID(),
		serviceID:          c.ServiceID(),
		address:            c.Addr(),
		db:                 op.DB,
	}
	if e.Monitor == nil {
		return ids // for events only: spare the lookups and the copy
	}
	ids.redact = isSensitive(st.name, op.Command)
	if ss != nil {
		ids.lsid = ss.ID
		if st.txnNumber != nil {
			n := *st.txnNumber
			ids.txnNumber = &n
		}
	}
	return ids
}

// sensitiveCommands are never shown in events: they carry credentials.
var sensitiveCommands = map[string]bool{
	"authenticate": true, "saslstart": true, "saslcontinue": true, "getnonce": true,
	"createuser": true, "updateuser": true, "copydbgetnonce": true, "copydbsaslstart": true, "copydb": true,
}

// isSensitive reports whether the command's body and reply must be
// redacted from events: the credential-bearing commands, and hello or
// legacy hello when they carry speculativeAuthenticate.
func isSensitive(name string, cmd bson.D) bool {
	n := strings.ToLower(name)
	if sensitiveCommands[n] {
		return true
	}
	if n == "hello" || n == "ismaster" {
		for _, el := range cmd {
			if el.Key == "speculativeAuthenticate" {
				return true
			}
		}
	}
	return false
}

var emptyDoc = bson.Raw{5, 0, 0, 0, 0}

// eventCommand is the command as the started event shows it: the body with
// $db and the document sequences folded in as arrays.
func eventCommand(cmd bson.D, op *Operation) bson.Raw {
	full := make(bson.D, 0, len(cmd)+1+len(op.Sequences))
	full = append(full, cmd...)
	full = append(full, bson.E{Key: "$db", Value: op.DB})
	for _, seq := range op.Sequences {
		arr := make(bson.A, len(seq.Documents))
		for i, d := range seq.Documents {
			arr[i] = d
		}
		full = append(full, bson.E{Key: seq.Identifier, Value: arr})
	}
	raw, err := bson.Marshal(full)
	if err != nil {
		return emptyDoc // the same marshal succeeded for the wire; unreachable in practice
	}
	return raw
}

func (e *Executor) publishStarted(ctx context.Context, op *Operation, st *opState, cmd bson.D, ids attemptIdentity) {
	if e.Monitor == nil || e.Monitor.CommandStarted == nil {
		return
	}
	command := emptyDoc
	if !ids.redact {
		command = eventCommand(cmd, op)
	}
	e.Monitor.PublishCommandStarted(ctx, &event.CommandStartedEvent{
		Command:            command,
		DatabaseName:       ids.db,
		CommandName:        st.name,
		RequestID:          ids.requestID,
		OperationID:        st.opID,
		ConnectionID:       ids.connectionID,
		ServerConnectionID: ids.serverConnectionID,
		ServiceID:          ids.serviceID,
		ServerAddress:      ids.address,
		LSID:               ids.lsid,
		TxnNumber:          ids.txnNumber,
	})
}

// ackReply is what a succeeded event reports for an unacknowledged write,
// which gets no reply.
var ackReply = func() bson.Raw {
	b, _ := bson.Marshal(bson.D{{Key: "ok", Value: int32(1)}})
	return b
}()

func (e *Executor) publishSucceeded(ctx context.Context, st *opState, ids attemptIdentity, d time.Duration, reply bson.Raw) {
	if e.Monitor == nil || e.Monitor.CommandSucceeded == nil {
		return
	}
	switch {
	case ids.redact:
		reply = emptyDoc
	case reply == nil:
		reply = ackReply
	}
	e.Monitor.PublishCommandSucceeded(ctx, &event.CommandSucceededEvent{
		CommandName:        st.name,
		DatabaseName:       ids.db,
		RequestID:          ids.requestID,
		OperationID:        st.opID,
		ConnectionID:       ids.connectionID,
		ServerConnectionID: ids.serverConnectionID,
		ServiceID:          ids.serviceID,
		ServerAddress:      ids.address,
		Duration:           d,
		Reply:              reply,
		LSID:               ids.lsid,
		TxnNumber:          ids.txnNumber,
	})
}

func (e *Executor) publishFailed(ctx context.Context, st *opState, ids attemptIdentity, d time.Duration, err error) {
	if e.Monitor == nil || e.Monitor.CommandFailed == nil {
		return
	}
	e.Monitor.PublishCommandFailed(ctx, &event.CommandFailedEvent{
		CommandName:        st.name,
		DatabaseName:       ids.db,
		RequestID:          ids.requestID,
		OperationID:        st.opID,
		ConnectionID:       ids.connectionID,
		ServerConnectionID: ids.serverConnectionID,
		ServiceID:          ids.serviceID,
		ServerAddress:      ids.address,
		Duration:           d,
		Failure:            err,
		LSID:               ids.lsid,
		TxnNumber:          ids.txnNumber,
	})
}
