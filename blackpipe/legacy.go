package blackpipe

import (
	"errors"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/wire"
)

// Legacy operations. MongoDB 5.1+ serves OP_QUERY only for commands (a
// namespace ending in ".$cmd") and no longer serves OP_GET_MORE,
// OP_KILL_CURSORS, OP_INSERT, OP_UPDATE and OP_DELETE. As mongod does, an
// OP_QUERY find and an OP_GET_MORE are answered with an OP_REPLY carrying
// QueryFailure and {$err, code: 5739101, ok: 0}, and the fire-and-forget
// ones are dropped without a reply; the connection stays open.

// codeUnsupportedLegacyOp is mongod's code in those OP_REPLY errors.
const codeUnsupportedLegacyOp = 5739101

// errLegacyQuery marks an OP_QUERY on a collection (a legacy find).
var errLegacyQuery = errors.New("OP_QUERY is no longer supported")

// isCommandNamespace reports a "db.$cmd" namespace.
func isCommandNamespace(ns string) bool {
	_, coll, ok := strings.Cut(ns, ".")
	return ok && coll == "$cmd"
}

// answerLegacy answers a message decodeRequest refused with err when it is
// a legacy operation, and reports whether it was one (else the connection
// closes).
func (c *Conn) answerLegacy(b []byte, err error) bool {
	h, herr := wire.ParseHeader(b)
	if herr != nil {
		return false
	}
	switch {
	case errors.Is(err, errLegacyQuery):
		c.replyLegacyError(h.RequestID, "OP_QUERY is no longer supported")
	case !errors.Is(err, wire.ErrUnsupportedOpCode):
		return false
	case h.OpCode == wire.OpGetMore:
		c.replyLegacyError(h.RequestID, "OP_GET_MORE is no longer supported")
	case h.OpCode == wire.OpKillCursors, h.OpCode == wire.OpInsert, h.OpCode == wire.OpUpdate, h.OpCode == wire.OpDelete:
		// Fire-and-forget: mongod sends nothing back.
	default:
		return false
	}
	c.s.logf("conn %d: %s is no longer supported; answered as mongod does", c.id, h.OpCode)
	return true
}

func (c *Conn) replyLegacyError(responseTo int32, what string) {
	doc, err := bson.Marshal(bson.D{
		{Key: "$err", Value: what + ". The client driver may require an upgrade. For more details see https://dochub.mongodb.org/core/legacy-opcode-removal"},
		{Key: "code", Value: int32(codeUnsupportedLegacyOp)},
		{Key: "ok", Value: 0.0},
	})
	if err != nil {
		return
	}
	id := c.s.nextReplyID.Add(1)
	_ = c.write(wire.AppendReply(nil, id, responseTo, &wire.Reply{ResponseFlags: wire.ReplyQueryFailure, Documents: []bson.Raw{doc}}), nil)
}
