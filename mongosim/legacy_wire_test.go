package mongosim

import (
	"encoding/binary"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/wire"
)

// legacyMessage builds a message of a legacy op code from its body.
func legacyMessage(op wire.OpCode, requestID int32, body []byte) []byte {
	b := make([]byte, 16, 16+len(body))
	binary.LittleEndian.PutUint32(b[0:], uint32(16+len(body)))
	binary.LittleEndian.PutUint32(b[4:], uint32(requestID))
	binary.LittleEndian.PutUint32(b[12:], uint32(op))
	return append(b, body...)
}

func cstring(b []byte, s string) []byte { return append(append(b, s...), 0) }

// checkLegacyFailure asserts mongod's OP_REPLY to a removed read operation.
func checkLegacyFailure(t *testing.T, m wire.Message, requestID int32, what string) {
	t.Helper()
	if m.Reply == nil || m.Header.ResponseTo != requestID || len(m.Reply.Documents) != 1 {
		t.Fatalf("%s: want one OP_REPLY document answering %d, got %+v", what, requestID, m)
	}
	if m.Reply.ResponseFlags&wire.ReplyQueryFailure == 0 {
		t.Fatalf("%s: responseFlags %d lack QueryFailure", what, m.Reply.ResponseFlags)
	}
	doc := m.Reply.Documents[0]
	msg, _ := doc.Lookup("$err").StringValueOK()
	if !strings.HasPrefix(msg, what+" is no longer supported. The client driver may require an upgrade.") ||
		doc.Lookup("code").Int32() != 5739101 || doc.Lookup("ok").Double() != 0 {
		t.Fatalf("%s: reply %v", what, doc)
	}
}

// MongoDB 5.1+ answers a legacy OP_QUERY find and OP_GET_MORE with an
// error OP_REPLY, drops OP_INSERT, OP_UPDATE, OP_DELETE and
// OP_KILL_CURSORS without a reply, and keeps the connection open.
func TestLegacyOpcodesAnsweredAsMongod(t *testing.T) {
	c := Start(t)
	rc := dialRaw(t, c.Members()[0].Addr())
	q, err := bson.Marshal(bson.D{{Key: "x", Value: 1}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := rc.roundTrip(wire.AppendQuery(nil, 7, 0, &wire.Query{FullCollectionName: "db.c", NumberToReturn: 1, Query: q}))
	if err != nil {
		t.Fatalf("legacy find: %v", err)
	}
	checkLegacyFailure(t, m, 7, "OP_QUERY")

	getMore := cstring(make([]byte, 4), "db.c")
	getMore = binary.LittleEndian.AppendUint32(getMore, 2)
	getMore = binary.LittleEndian.AppendUint64(getMore, 12345)
	if m, err = rc.roundTrip(legacyMessage(wire.OpGetMore, 8, getMore)); err != nil {
		t.Fatalf("OP_GET_MORE: %v", err)
	}
	checkLegacyFailure(t, m, 8, "OP_GET_MORE")

	// Fire-and-forget operations: no reply, nothing done, and the next
	// command on the connection is answered.
	doc, _ := bson.Marshal(bson.D{{Key: "_id", Value: 1}})
	insert := append(cstring(make([]byte, 4), "db.c"), doc...)
	update := append(append(cstring(make([]byte, 4), "db.c"), make([]byte, 4)...), append(doc, doc...)...)
	del := append(append(cstring(make([]byte, 4), "db.c"), make([]byte, 4)...), doc...)
	kill := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint32(make([]byte, 4), 1), 12345)
	for i, msg := range [][]byte{
		legacyMessage(wire.OpInsert, 9, insert),
		legacyMessage(wire.OpUpdate, 10, update),
		legacyMessage(wire.OpDelete, 11, del),
		legacyMessage(wire.OpKillCursors, 12, kill),
	} {
		if _, err := rc.nc.Write(msg); err != nil {
			t.Fatalf("legacy write %d: %v", i, err)
		}
	}
	reply, err := rc.msg(bson.D{{Key: "count", Value: "c"}, {Key: "$db", Value: "db"}})
	if err != nil {
		t.Fatalf("command after the legacy operations: %v", err)
	}
	if reply.Lookup("n").Int32() != 0 {
		t.Fatalf("OP_INSERT stored a document: %v", reply)
	}
}
