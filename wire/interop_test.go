//lint:file-ignore SA1019 OP_QUERY is deprecated, and checking our legacy codec against the driver's is the point.

package wire

// Interoperability with the official driver's wire-message code: messages we
// encode must decode with it, and messages it encodes must decode with ours.

import (
	"bytes"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"
)

// driverDecodeMsg decodes an OP_MSG with the driver's readers.
func driverDecodeMsg(t *testing.T, b []byte) (requestID, responseTo int32, m *Msg) {
	t.Helper()
	length, reqID, respTo, op, rem, ok := wiremessage.ReadHeader(b)
	if !ok || int(length) != len(b) || op != wiremessage.OpMsg {
		t.Fatalf("driver ReadHeader: length %d op %v ok %v", length, op, ok)
	}
	flags, rem, ok := wiremessage.ReadMsgFlags(rem)
	if !ok {
		t.Fatal("driver ReadMsgFlags failed")
	}
	m = &Msg{Flags: MsgFlags(flags)}
	if flags&wiremessage.ChecksumPresent != 0 {
		if len(rem) < 4 {
			t.Fatal("no room for checksum")
		}
		sum, _, ok := wiremessage.ReadMsgChecksum(rem[len(rem)-4:])
		if !ok || sum != crc32c(b[:len(b)-4]) {
			t.Fatalf("driver read checksum %#x, computed %#x", sum, crc32c(b[:len(b)-4]))
		}
		rem = rem[:len(rem)-4]
	}
	for len(rem) > 0 {
		var st wiremessage.SectionType
		st, rem, ok = wiremessage.ReadMsgSectionType(rem)
		if !ok {
			t.Fatal("driver ReadMsgSectionType failed")
		}
		switch st {
		case wiremessage.SingleDocument:
			var doc bsoncore.Document
			doc, rem, ok = wiremessage.ReadMsgSectionSingleDocument(rem)
			if !ok {
				t.Fatal("driver ReadMsgSectionSingleDocument failed")
			}
			m.Body = bson.Raw(doc)
		case wiremessage.DocumentSequence:
			var id string
			var docs []bsoncore.Document
			id, docs, rem, ok = wiremessage.ReadMsgSectionDocumentSequence(rem)
			if !ok {
				t.Fatal("driver ReadMsgSectionDocumentSequence failed")
			}
			seq := DocumentSequence{Identifier: id}
			for _, d := range docs {
				seq.Documents = append(seq.Documents, bson.Raw(d))
			}
			m.Sequences = append(m.Sequences, seq)
		default:
			t.Fatalf("section type %d", st)
		}
	}
	return reqID, respTo, m
}

// driverEncodeMsg encodes m the way the driver's operation code does.
func driverEncodeMsg(reqID int32, m *Msg) []byte {
	idx, dst := wiremessage.AppendHeaderStart(nil, reqID, 0, wiremessage.OpMsg)
	dst = wiremessage.AppendMsgFlags(dst, wiremessage.MsgFlag(m.Flags))
	dst = wiremessage.AppendMsgSectionType(dst, wiremessage.SingleDocument)
	dst = append(dst, m.Body...)
	for _, seq := range m.Sequences {
		dst = wiremessage.AppendMsgSectionType(dst, wiremessage.DocumentSequence)
		var sidx int32
		sidx, dst = bsoncore.ReserveLength(dst)
		dst = append(dst, seq.Identifier...)
		dst = append(dst, 0)
		for _, d := range seq.Documents {
			dst = append(dst, d...)
		}
		dst = bsoncore.UpdateLength(dst, sidx, int32(len(dst[sidx:])))
	}
	return bsoncore.UpdateLength(dst, idx, int32(len(dst[idx:])))
}

func TestInteropMsgWithDriver(t *testing.T) {
	for name, m := range sampleMsgs(t) {
		t.Run(name, func(t *testing.T) {
			ours := AppendMsg(nil, 11, 12, m)
			reqID, respTo, got := driverDecodeMsg(t, ours)
			if reqID != 11 || respTo != 12 {
				t.Errorf("driver read ids %d/%d", reqID, respTo)
			}
			assertMsgEqual(t, m, got)

			if m.Flags&ChecksumPresent != 0 {
				return // the driver never writes checksums
			}
			theirs := driverEncodeMsg(13, m)
			if !bytes.Equal(theirs, AppendMsg(nil, 13, 0, m)) {
				t.Error("driver and AppendMsg encodings differ")
			}
			msg, err := Decode(theirs, 0)
			if err != nil {
				t.Fatal(err)
			}
			assertMsgEqual(t, m, msg.Msg)
		})
	}
}

func TestInteropLegacyWithDriver(t *testing.T) {
	qdoc := mustDoc(t, bson.D{{Key: "isMaster", Value: 1}})
	sel := mustDoc(t, bson.D{{Key: "a", Value: 1}})
	q := &Query{Flags: int32(wiremessage.SecondaryOK), FullCollectionName: "admin.$cmd", NumberToSkip: 1, NumberToReturn: -1, Query: qdoc, ReturnFieldsSelector: sel}

	// Ours -> driver.
	b := AppendQuery(nil, 21, 0, q)
	_, _, _, op, rem, ok := wiremessage.ReadHeader(b)
	if !ok || op != wiremessage.OpQuery {
		t.Fatal("driver ReadHeader on OP_QUERY")
	}
	flags, rem, ok1 := wiremessage.ReadQueryFlags(rem)
	ns, rem, ok2 := wiremessage.ReadQueryFullCollectionName(rem)
	skip, rem, ok3 := wiremessage.ReadQueryNumberToSkip(rem)
	ret, rem, ok4 := wiremessage.ReadQueryNumberToReturn(rem)
	doc, rem, ok5 := wiremessage.ReadQueryQuery(rem)
	rfs, rem, ok6 := wiremessage.ReadQueryReturnFieldsSelector(rem)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || len(rem) != 0 || flags != wiremessage.SecondaryOK || ns != "admin.$cmd" ||
		skip != 1 || ret != -1 || !bytes.Equal(doc, qdoc) || !bytes.Equal(rfs, sel) {
		t.Fatalf("driver read OP_QUERY as %v %q %d %d", flags, ns, skip, ret)
	}

	// Driver -> ours.
	idx, d := wiremessage.AppendHeaderStart(nil, 22, 0, wiremessage.OpQuery)
	d = wiremessage.AppendQueryFlags(d, wiremessage.SecondaryOK)
	d = wiremessage.AppendQueryFullCollectionName(d, "admin.$cmd")
	d = wiremessage.AppendQueryNumberToSkip(d, 0)
	d = wiremessage.AppendQueryNumberToReturn(d, -1)
	d = append(d, qdoc...)
	d = bsoncore.UpdateLength(d, idx, int32(len(d)))
	msg, err := Decode(d, 0)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Query.FullCollectionName != "admin.$cmd" || msg.Query.NumberToReturn != -1 || !bytes.Equal(msg.Query.Query, qdoc) || msg.Query.ReturnFieldsSelector != nil {
		t.Errorf("decoded driver OP_QUERY as %+v", msg.Query)
	}

	// OP_REPLY both ways.
	rdoc := mustDoc(t, bson.D{{Key: "ismaster", Value: true}, {Key: "ok", Value: 1.0}})
	b = AppendReply(nil, 23, 22, &Reply{ResponseFlags: 8, CursorID: 99, Documents: []bson.Raw{rdoc, rdoc}})
	_, _, respTo, _, rem, _ := wiremessage.ReadHeader(b)
	_, rem, _ = wiremessage.ReadReplyFlags(rem)
	cid, rem, _ := wiremessage.ReadReplyCursorID(rem)
	_, rem, _ = wiremessage.ReadReplyStartingFrom(rem)
	n, rem, _ := wiremessage.ReadReplyNumberReturned(rem)
	docs, _, ok := wiremessage.ReadReplyDocuments(rem)
	if !ok || respTo != 22 || cid != 99 || n != 2 || len(docs) != 2 || !bytes.Equal(docs[1], rdoc) {
		t.Fatalf("driver read OP_REPLY: cursor %d n %d docs %d", cid, n, len(docs))
	}
	idx, d = wiremessage.AppendHeaderStart(nil, 24, 23, wiremessage.OpReply)
	d = wiremessage.AppendReplyFlags(d, wiremessage.AwaitCapable)
	d = wiremessage.AppendReplyCursorID(d, 5)
	d = wiremessage.AppendReplyStartingFrom(d, 0)
	d = wiremessage.AppendReplyNumberReturned(d, 1)
	d = append(d, rdoc...)
	d = bsoncore.UpdateLength(d, idx, int32(len(d)))
	msg, err = Decode(d, 0)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Reply.ResponseFlags != int32(wiremessage.AwaitCapable) || msg.Reply.CursorID != 5 || len(msg.Reply.Documents) != 1 {
		t.Errorf("decoded driver OP_REPLY as %+v", msg.Reply)
	}
}

func TestInteropCompressedWithDriver(t *testing.T) {
	m := sampleMsgs(t)["two sequences"]
	m.Flags = 0
	plain := AppendMsg(nil, 31, 30, m)
	for _, c := range []Compressor{CompressorNoop, CompressorSnappy, CompressorZlib, CompressorZstd} {
		t.Run(c.String(), func(t *testing.T) {
			opts := driver.CompressionOpts{Compressor: wiremessage.CompressorID(c), ZlibLevel: 6, ZstdLevel: 6}

			// Ours -> driver.
			comp, err := AppendCompressed(nil, plain, c, 6)
			if err != nil {
				t.Fatal(err)
			}
			_, reqID, respTo, op, rem, ok := wiremessage.ReadHeader(comp)
			if !ok || op != wiremessage.OpCompressed || reqID != 31 || respTo != 30 {
				t.Fatalf("driver ReadHeader: %v %d %d", op, reqID, respTo)
			}
			orig, rem, ok1 := wiremessage.ReadCompressedOriginalOpCode(rem)
			size, rem, ok2 := wiremessage.ReadCompressedUncompressedSize(rem)
			id, rem, ok3 := wiremessage.ReadCompressedCompressorID(rem)
			if !(ok1 && ok2 && ok3) || orig != wiremessage.OpMsg || int(size) != len(plain)-HeaderLen || id != wiremessage.CompressorID(c) {
				t.Fatalf("driver read compressed fields %v %d %v", orig, size, id)
			}
			opts.UncompressedSize = size
			out, err := driver.DecompressPayload(rem, opts)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out, plain[HeaderLen:]) {
				t.Fatal("driver decompressed different bytes")
			}

			// Driver -> ours.
			payload, err := driver.CompressPayload(plain[HeaderLen:], opts)
			if err != nil {
				t.Fatal(err)
			}
			idx, d := wiremessage.AppendHeaderStart(nil, 32, 0, wiremessage.OpCompressed)
			d = wiremessage.AppendCompressedOriginalOpCode(d, wiremessage.OpMsg)
			d = wiremessage.AppendCompressedUncompressedSize(d, int32(len(plain)-HeaderLen))
			d = wiremessage.AppendCompressedCompressorID(d, opts.Compressor)
			d = wiremessage.AppendCompressedCompressedMessage(d, payload)
			d = bsoncore.UpdateLength(d, idx, int32(len(d)))
			msg, err := Decode(d, 0)
			if err != nil {
				t.Fatal(err)
			}
			if msg.Compressor != c || msg.Header.RequestID != 32 || msg.Header.OpCode != OpMsg {
				t.Errorf("decoded driver message as %+v", msg)
			}
			assertMsgEqual(t, m, msg.Msg)
		})
	}
}
