package mongosim

import (
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/wire"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/reply_golden.txt from the current code")

// goldenStep is one message a client sends in TestReplyBytesGolden.
type goldenStep struct {
	name  string
	body  bson.D
	seq   *wire.DocumentSequence // sent as a kind-1 section, as drivers send documents
	flags wire.MsgFlags
	zlib  bool // sent OP_COMPRESSED (zlib): the reply is compressed the same way
	query bool // sent as OP_QUERY (legacy hello)
}

// goldenSteps are representative single-document commands as drivers send
// them (lsid, txnNumber, $clusterTime, $db), their retries, errors,
// fail-point errors with labels, writeConcernError, a compressed request,
// fire-and-forget, a reply large enough to be written as header and body,
// and a legacy hello.
func goldenSteps(ct bson.Timestamp) []goldenStep {
	lsid := bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: bytes.Repeat([]byte{7}, 16)}}}
	gossip := bson.D{{Key: "clusterTime", Value: ct}, {Key: "signature", Value: bson.D{
		{Key: "hash", Value: bson.Binary{Data: make([]byte, 20)}}, {Key: "keyId", Value: int64(0)}}}}
	cmd := func(d bson.D, txn int64) bson.D {
		d = append(d, bson.E{Key: "lsid", Value: lsid})
		if txn > 0 {
			d = append(d, bson.E{Key: "txnNumber", Value: txn})
		}
		return append(d, bson.E{Key: "$clusterTime", Value: gossip}, bson.E{Key: "$db", Value: "test"})
	}
	docs := func(id string, ds ...bson.D) *wire.DocumentSequence {
		seq := &wire.DocumentSequence{Identifier: id}
		for _, d := range ds {
			raw, _ := bson.Marshal(d)
			seq.Documents = append(seq.Documents, raw)
		}
		return seq
	}
	doc := func(id, n int32) bson.D { return bson.D{{Key: "_id", Value: id}, {Key: "n", Value: n}} }
	ins := bson.D{{Key: "insert", Value: "c"}, {Key: "ordered", Value: true}}
	upd := bson.D{{Key: "update", Value: "c"}, {Key: "ordered", Value: true}}
	inc := bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: int32(1)}}},
		{Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: int32(1)}}}}}}
	findOne := func(id int32) bson.D {
		return cmd(bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "_id", Value: id}}},
			{Key: "limit", Value: int64(1)}, {Key: "singleBatch", Value: true}}, 0)
	}
	failPoint := func(data bson.D) bson.D {
		return bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: int32(1)}}},
			{Key: "data", Value: data}, {Key: "$db", Value: "admin"}}
	}
	big := strings.Repeat("x", 20<<10)
	return []goldenStep{
		{name: "insertOne", body: cmd(ins, 1), seq: docs("documents", doc(1, 0))},
		{name: "insertTwo", body: cmd(ins, 2), seq: docs("documents", doc(2, 0), doc(3, 0))},
		{name: "insertRetried", body: cmd(ins, 2), seq: docs("documents", doc(2, 0), doc(3, 0))},
		{name: "insertDuplicate", body: cmd(ins, 3), seq: docs("documents", doc(1, 0))},
		{name: "findOne", body: findOne(1)},
		{name: "findNone", body: findOne(99)},
		{name: "updateOne", body: cmd(upd, 4), seq: docs("updates", inc)},
		{name: "updateRetried", body: cmd(upd, 4), seq: docs("updates", inc)},
		{name: "updateInline", body: cmd(append(upd, bson.E{Key: "updates", Value: bson.A{inc}}), 5)},
		{name: "updateMajority", body: cmd(append(upd, bson.E{Key: "updates", Value: bson.A{inc}},
			bson.E{Key: "writeConcern", Value: bson.D{{Key: "w", Value: "majority"}}}), 6)},
		{name: "updateNoSession", body: append(upd, bson.E{Key: "updates", Value: bson.A{inc}}, bson.E{Key: "$db", Value: "test"})},
		{name: "deleteOne", body: cmd(bson.D{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{
			bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: int32(3)}}}, {Key: "limit", Value: int32(1)}}}}}, 7)},
		{name: "unknownCommand", body: cmd(bson.D{{Key: "noSuchCommand", Value: int32(1)}}, 0)},
		{name: "badMaxTime", body: cmd(bson.D{{Key: "find", Value: "c"}, {Key: "maxTimeMS", Value: "x"}}, 0)},
		{name: "noDB", body: bson.D{{Key: "ping", Value: int32(1)}}},
		{name: "txnNumberOnFind", body: cmd(bson.D{{Key: "find", Value: "c"}}, 8)},
		{name: "failPointLabels", body: failPoint(bson.D{{Key: "failCommands", Value: bson.A{"insert"}},
			{Key: "errorCode", Value: int32(91)}, {Key: "errorLabels", Value: bson.A{"RetryableWriteError", "Custom"}}})},
		{name: "insertFailed", body: cmd(ins, 9), seq: docs("documents", doc(4, 0))},
		{name: "failPointNotPrimary", body: failPoint(bson.D{{Key: "failCommands", Value: bson.A{"update"}},
			{Key: "errorCode", Value: int32(10107)}})},
		{name: "updateNotPrimary", body: cmd(upd, 10), seq: docs("updates", inc)},
		{name: "failPointWCE", body: failPoint(bson.D{{Key: "failCommands", Value: bson.A{"update"}},
			{Key: "writeConcernError", Value: bson.D{{Key: "code", Value: int32(91)}, {Key: "errmsg", Value: "Replication is being shut down"}}}})},
		{name: "updateWCE", body: cmd(upd, 11), seq: docs("updates", inc)},
		{name: "failPointExtraInfo", body: failPoint(bson.D{{Key: "failCommands", Value: bson.A{"find"}},
			{Key: "errorCode", Value: int32(2)}, {Key: "errorExtraInfo", Value: bson.D{{Key: "why", Value: "test"}}}})},
		{name: "findFailed", body: findOne(1)},
		{name: "findCompressed", body: findOne(2), zlib: true},
		{name: "insertFireAndForget", body: cmd(ins, 0), seq: docs("documents", doc(5, 0)), flags: wire.MoreToCome},
		{name: "findAfterFireAndForget", body: findOne(5)},
		{name: "insertBig", body: cmd(ins, 12), seq: docs("documents", bson.D{{Key: "_id", Value: int32(6)}, {Key: "s", Value: big}})},
		{name: "findBig", body: findOne(6)},
		{name: "ping", body: bson.D{{Key: "ping", Value: int32(1)}, {Key: "$db", Value: "admin"}}},
		{name: "legacyHello", body: bson.D{{Key: "isMaster", Value: int32(1)}, {Key: "helloOk", Value: true}}, query: true},
		{name: "hello", body: bson.D{{Key: "hello", Value: int32(1)}, {Key: "$db", Value: "admin"}}},
	}
}

// TestReplyBytesGolden sends goldenSteps to a replica-set primary whose
// clock stands still and compares each reply, byte for byte (header
// included), with testdata/reply_golden.txt, written by an earlier version
// with -update-golden: changes to how requests are decoded and replies
// built must leave what clients receive unchanged. The member's processId
// and address, which differ from run to run, are masked before comparing.
func TestReplyBytesGolden(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	c := StartWithOptions(t, Options{Now: func() time.Time { return at }})
	m := c.Members()[0]
	rc := dialRaw(t, m.Addr())
	var out strings.Builder
	for i, st := range goldenSteps(bson.Timestamp{T: uint32(at.Unix()) - 10, I: 1}) {
		id := int32(100 + i)
		msg := goldenMessage(t, id, st)
		_ = rc.nc.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := rc.nc.Write(msg); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if st.flags&wire.MoreToCome != 0 {
			fmt.Fprintf(&out, "%s\n-\n", st.name)
			continue
		}
		reply, err := wire.ReadMessage(rc.nc, nil, 0)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		reply = bytes.ReplaceAll(reply, m.processID[:], make([]byte, len(m.processID)))
		reply = bytes.ReplaceAll(reply, []byte(m.Addr()), bytes.Repeat([]byte{'*'}, len(m.Addr())))
		fmt.Fprintf(&out, "%s\n%s\n", st.name, hex.EncodeToString(reply))
	}
	path := filepath.Join("testdata", "reply_golden.txt")
	if *updateGolden {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	wantLines, gotLines := strings.Split(string(want), "\n"), strings.Split(out.String(), "\n")
	if len(wantLines) != len(gotLines) {
		t.Fatalf("%d lines, want %d", len(gotLines), len(wantLines))
	}
	for i := 1; i < len(gotLines); i += 2 {
		if gotLines[i] != wantLines[i] {
			t.Errorf("%s: reply differs\n got %s\nwant %s", gotLines[i-1], describeReply(gotLines[i]), describeReply(wantLines[i]))
		}
	}
}

// goldenMessage encodes st as the client sends it.
func goldenMessage(t *testing.T, id int32, st goldenStep) []byte {
	t.Helper()
	body, err := bson.Marshal(st.body)
	if err != nil {
		t.Fatal(err)
	}
	if st.query {
		return wire.AppendQuery(nil, id, 0, &wire.Query{FullCollectionName: "admin.$cmd", NumberToReturn: -1, Query: body})
	}
	m := &wire.Msg{Flags: st.flags, Body: body}
	if st.seq != nil {
		m.Sequences = []wire.DocumentSequence{*st.seq}
	}
	msg := wire.AppendMsg(nil, id, 0, m)
	if st.zlib {
		if msg, err = wire.AppendCompressed(nil, msg, wire.CompressorZlib, -1); err != nil {
			t.Fatal(err)
		}
	}
	return msg
}

// describeReply shows a reply's hex and, where it decodes, its documents.
func describeReply(h string) string {
	b, err := hex.DecodeString(h)
	if err != nil {
		return h
	}
	m, err := wire.Decode(b, 0)
	switch {
	case err != nil:
		return h + " (" + err.Error() + ")"
	case m.Msg != nil:
		return fmt.Sprintf("%v %v", m.Header, m.Msg.Body)
	case m.Reply != nil && len(m.Reply.Documents) > 0:
		return fmt.Sprintf("%v %v", m.Header, m.Reply.Documents[0])
	}
	return h
}
