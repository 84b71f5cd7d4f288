package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func mustDoc(t testing.TB, d any) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sampleMsgs(t testing.TB) map[string]*Msg {
	body := mustDoc(t, bson.D{{Key: "insert", Value: "coll"}, {Key: "$db", Value: "test"}})
	d1 := mustDoc(t, bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: "a"}})
	d2 := mustDoc(t, bson.D{{Key: "_id", Value: 2}, {Key: "nested", Value: bson.D{{Key: "y", Value: bson.A{1, 2.5, "z"}}}}})
	return map[string]*Msg{
		"body only":      {Body: body},
		"more to come":   {Flags: MoreToCome, Body: body},
		"exhaust":        {Flags: ExhaustAllowed, Body: body},
		"checksum":       {Flags: ChecksumPresent, Body: body},
		"one sequence":   {Body: body, Sequences: []DocumentSequence{{Identifier: "documents", Documents: []bson.Raw{d1, d2}}}},
		"two sequences":  {Flags: ChecksumPresent | MoreToCome, Body: body, Sequences: []DocumentSequence{{Identifier: "documents", Documents: []bson.Raw{d1}}, {Identifier: "updates", Documents: []bson.Raw{d2, d1, d2}}}},
		"empty sequence": {Body: body, Sequences: []DocumentSequence{{Identifier: "documents"}}},
		// The identifiers drivers send are decoded as shared strings, others
		// (and near misses) as copies.
		"identifiers": {Body: body, Sequences: []DocumentSequence{{Identifier: "deletes", Documents: []bson.Raw{d1}}, {Identifier: "ops"},
			{Identifier: "nsInfo"}, {Identifier: "documentsX", Documents: []bson.Raw{d2}}, {Identifier: "update"}, {Identifier: ""}}},
	}
}

func assertMsgEqual(t *testing.T, want, got *Msg) {
	t.Helper()
	if got == nil {
		t.Fatal("decoded message has no Msg")
	}
	if got.Flags != want.Flags {
		t.Errorf("flags = %#x, want %#x", got.Flags, want.Flags)
	}
	if !bytes.Equal(got.Body, want.Body) {
		t.Errorf("body = %v, want %v", got.Body, want.Body)
	}
	if len(got.Sequences) != len(want.Sequences) {
		t.Fatalf("got %d sequences, want %d", len(got.Sequences), len(want.Sequences))
	}
	for i, ws := range want.Sequences {
		gs := got.Sequences[i]
		if gs.Identifier != ws.Identifier || len(gs.Documents) != len(ws.Documents) {
			t.Fatalf("sequence %d = %q with %d docs, want %q with %d", i, gs.Identifier, len(gs.Documents), ws.Identifier, len(ws.Documents))
		}
		for j := range ws.Documents {
			if !bytes.Equal(gs.Documents[j], ws.Documents[j]) {
				t.Errorf("sequence %d doc %d = %v, want %v", i, j, gs.Documents[j], ws.Documents[j])
			}
		}
	}
}

func TestMsgRoundTrip(t *testing.T) {
	for name, m := range sampleMsgs(t) {
		t.Run(name, func(t *testing.T) {
			prefix := []byte("prefix")
			out := AppendMsg(append([]byte(nil), prefix...), 42, 7, m)
			if !bytes.Equal(out[:len(prefix)], prefix) {
				t.Fatal("AppendMsg clobbered dst")
			}
			b := out[len(prefix):]
			if got := int(binary.LittleEndian.Uint32(b)); got != len(b) {
				t.Fatalf("messageLength = %d, encoded %d bytes", got, len(b))
			}
			msg, err := Decode(b, 0)
			if err != nil {
				t.Fatal(err)
			}
			want := Header{MessageLength: int32(len(b)), RequestID: 42, ResponseTo: 7, OpCode: OpMsg}
			if msg.Header != want {
				t.Errorf("header = %+v, want %+v", msg.Header, want)
			}
			if msg.Query != nil || msg.Reply != nil || msg.Compressor != CompressorNoop {
				t.Errorf("unexpected fields set: %+v", msg)
			}
			assertMsgEqual(t, m, msg.Msg)
		})
	}
}

func TestMsgNilBodyEncodesEmptyDocument(t *testing.T) {
	b := AppendMsg(nil, 1, 0, &Msg{})
	msg, err := Decode(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(msg.Msg.Body, emptyDocument) {
		t.Fatalf("body = %x", []byte(msg.Msg.Body))
	}
}

// TestAppendMsgStartThenBody: the header AppendMsgStart writes, followed
// by the body, is the message AppendMsg encodes.
func TestAppendMsgStartThenBody(t *testing.T) {
	body, err := bson.Marshal(bson.D{{Key: "ok", Value: 1.0}, {Key: "s", Value: strings.Repeat("x", 300)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, flags := range []MsgFlags{0, MoreToCome} {
		want := AppendMsg(nil, 7, 9, &Msg{Flags: flags, Body: body})
		got := append(AppendMsgStart([]byte("prefix"), 7, 9, flags, len(body)), body...)
		if !bytes.Equal(got[len("prefix"):], want) {
			t.Errorf("flags %v:\n got %x\nwant %x", flags, got, want)
		}
	}
}

func TestDecodeIsZeroCopy(t *testing.T) {
	m := sampleMsgs(t)["one sequence"]
	b := AppendMsg(nil, 1, 0, m)
	msg, err := Decode(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	inside := func(d []byte) bool {
		return len(d) > 0 && uintptrOf(d) >= uintptrOf(b) && uintptrOf(d)+uintptr(len(d)) <= uintptrOf(b)+uintptr(len(b))
	}
	if !inside(msg.Msg.Body) || !inside(msg.Msg.Sequences[0].Documents[1]) {
		t.Fatal("decoded documents do not alias the input")
	}
	if cap(msg.Msg.Body) != len(msg.Msg.Body) {
		t.Fatalf("body capacity %d not clipped to length %d", cap(msg.Msg.Body), len(msg.Msg.Body))
	}
}

func TestQueryRoundTrip(t *testing.T) {
	q := mustDoc(t, bson.D{{Key: "hello", Value: 1}, {Key: "client", Value: bson.D{{Key: "driver", Value: "sturdy"}}}})
	sel := mustDoc(t, bson.D{{Key: "x", Value: 1}})
	for _, tc := range []*Query{
		{Flags: 4, FullCollectionName: "admin.$cmd", NumberToReturn: -1, Query: q},
		{Flags: 0, FullCollectionName: "db.coll", NumberToSkip: 3, NumberToReturn: 10, Query: q, ReturnFieldsSelector: sel},
	} {
		b := AppendQuery([]byte{9}, 5, 0, tc)[1:]
		msg, err := Decode(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := msg.Query
		if got == nil || msg.Header.OpCode != OpQuery || msg.Header.RequestID != 5 {
			t.Fatalf("decoded %+v", msg)
		}
		if got.Flags != tc.Flags || got.FullCollectionName != tc.FullCollectionName || got.NumberToSkip != tc.NumberToSkip ||
			got.NumberToReturn != tc.NumberToReturn || !bytes.Equal(got.Query, tc.Query) || !bytes.Equal(got.ReturnFieldsSelector, tc.ReturnFieldsSelector) {
			t.Errorf("got %+v, want %+v", got, tc)
		}
	}
}

func TestReplyRoundTrip(t *testing.T) {
	d := mustDoc(t, bson.D{{Key: "ok", Value: 1.0}, {Key: "isWritablePrimary", Value: true}})
	for _, docs := range [][]bson.Raw{nil, {d}, {d, d, d}} {
		r := &Reply{ResponseFlags: 8, CursorID: 1 << 40, StartingFrom: 2, Documents: docs}
		b := AppendReply(nil, 9, 5, r)
		msg, err := Decode(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := msg.Reply
		if got == nil || msg.Header.OpCode != OpReply || msg.Header.ResponseTo != 5 {
			t.Fatalf("decoded %+v", msg)
		}
		if got.ResponseFlags != 8 || got.CursorID != 1<<40 || got.StartingFrom != 2 || len(got.Documents) != len(docs) {
			t.Fatalf("got %+v", got)
		}
		for i := range docs {
			if !bytes.Equal(got.Documents[i], docs[i]) {
				t.Errorf("doc %d differs", i)
			}
		}
	}
}

func TestChecksum(t *testing.T) {
	m := sampleMsgs(t)["two sequences"]
	good := AppendMsg(nil, 1, 0, m)
	if _, err := Decode(good, 0); err != nil {
		t.Fatalf("good checksum rejected: %v", err)
	}
	for _, pos := range []int{5, 20, 30, len(good) - 6, len(good) - 1} {
		bad := bytes.Clone(good)
		bad[pos] ^= 0x40
		_, err := Decode(bad, 0)
		if !errors.Is(err, ErrChecksum) {
			t.Errorf("flipping byte %d: err = %v, want ErrChecksum", pos, err)
		}
	}
}

func TestCompressedRoundTrip(t *testing.T) {
	big := make([]bson.Raw, 200)
	for i := range big {
		big[i] = mustDoc(t, bson.D{{Key: "_id", Value: i}, {Key: "text", Value: strings.Repeat("compressible ", 10)}})
	}
	msgs := sampleMsgs(t)
	msgs["big"] = &Msg{Body: mustDoc(t, bson.D{{Key: "insert", Value: "c"}}), Sequences: []DocumentSequence{{Identifier: "documents", Documents: big}}}
	for _, c := range []Compressor{CompressorNoop, CompressorSnappy, CompressorZlib, CompressorZstd} {
		for name, m := range msgs {
			t.Run(c.String()+"/"+name, func(t *testing.T) {
				plain := AppendMsg(nil, 77, 66, m)
				comp, err := AppendCompressed([]byte("pre"), plain, c, -1)
				if err != nil {
					t.Fatal(err)
				}
				comp = comp[3:]
				if name == "big" && c != CompressorNoop && len(comp) >= len(plain)/2 {
					t.Errorf("%s did not compress: %d -> %d bytes", c, len(plain), len(comp))
				}
				h, err := ParseHeader(comp)
				if err != nil || h.OpCode != OpCompressed || int(h.MessageLength) != len(comp) || h.RequestID != 77 || h.ResponseTo != 66 {
					t.Fatalf("compressed header %+v, %v", h, err)
				}
				msg, err := Decode(comp, 0)
				if err != nil {
					t.Fatal(err)
				}
				want := Header{MessageLength: int32(len(plain)), RequestID: 77, ResponseTo: 66, OpCode: OpMsg}
				if msg.Header != want || msg.Compressor != c {
					t.Errorf("header %+v compressor %v, want %+v %v", msg.Header, msg.Compressor, want, c)
				}
				assertMsgEqual(t, m, msg.Msg)
			})
		}
	}
}

func TestCompressedLegacyOps(t *testing.T) {
	q := AppendQuery(nil, 3, 0, &Query{FullCollectionName: "admin.$cmd", NumberToReturn: -1, Query: mustDoc(t, bson.D{{Key: "hello", Value: 1}})})
	r := AppendReply(nil, 4, 3, &Reply{Documents: []bson.Raw{mustDoc(t, bson.D{{Key: "ok", Value: 1}})}})
	for _, c := range []Compressor{CompressorSnappy, CompressorZlib, CompressorZstd} {
		cq, err := AppendCompressed(nil, q, c, 6)
		if err != nil {
			t.Fatal(err)
		}
		cr, err := AppendCompressed(nil, r, c, 6)
		if err != nil {
			t.Fatal(err)
		}
		mq, err := Decode(cq, 0)
		if err != nil || mq.Query == nil || mq.Query.FullCollectionName != "admin.$cmd" {
			t.Errorf("%s query: %+v %v", c, mq, err)
		}
		mr, err := Decode(cr, 0)
		if err != nil || mr.Reply == nil || len(mr.Reply.Documents) != 1 {
			t.Errorf("%s reply: %+v %v", c, mr, err)
		}
	}
}

func TestAppendCompressedRejects(t *testing.T) {
	plain := AppendMsg(nil, 1, 0, &Msg{Body: mustDoc(t, bson.D{{Key: "ping", Value: 1}})})
	comp, err := AppendCompressed(nil, plain, CompressorZlib, -1)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		msg   []byte
		c     Compressor
		level int
		want  error
	}{
		{"short", plain[:10], CompressorSnappy, 0, ErrMalformed},
		{"length mismatch", plain[:len(plain)-1], CompressorSnappy, 0, ErrMalformed},
		{"already compressed", comp, CompressorSnappy, 0, ErrMalformed},
		{"unknown compressor", plain, 4, 0, ErrUnsupportedCompressor},
		{"bad zlib level", plain, CompressorZlib, 10, ErrUnsupportedCompressor},
	}
	for _, tc := range cases {
		dst := []byte("keep")
		out, err := AppendCompressed(dst, tc.msg, tc.c, tc.level)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
		if string(out) != "keep" {
			t.Errorf("%s: dst modified to %q", tc.name, out)
		}
	}
}

func TestCompressorNames(t *testing.T) {
	for _, c := range []Compressor{CompressorNoop, CompressorSnappy, CompressorZlib, CompressorZstd} {
		got, ok := CompressorByName(c.String())
		if !ok || got != c {
			t.Errorf("CompressorByName(%q) = %v, %v", c.String(), got, ok)
		}
	}
	if _, ok := CompressorByName("lz4"); ok {
		t.Error("lz4 accepted")
	}
	if Compressor(9).String() != "compressor(9)" || OpCode(2003).String() != "opcode(2003)" || OpCode(2002).String() != "OP_INSERT" || OpMsg.String() != "OP_MSG" {
		t.Error("String of unknown values")
	}
}

func TestCommandName(t *testing.T) {
	cases := []struct {
		doc  bson.Raw
		want string
	}{
		{mustDoc(t, bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{}}}), "find"},
		{mustDoc(t, bson.D{}), ""},
		{nil, ""},
		{bson.Raw{9, 0, 0, 0, 2, 'a', 'b'}, ""}, // unterminated key
	}
	for _, tc := range cases {
		if got := CommandName(tc.doc); got != tc.want {
			t.Errorf("CommandName(%x) = %q, want %q", []byte(tc.doc), got, tc.want)
		}
	}
}

func TestErrorFormat(t *testing.T) {
	_, err := Decode([]byte{1, 2, 3}, 0)
	var we *Error
	if !errors.As(err, &we) || we.Err != ErrMalformed {
		t.Fatalf("err = %#v", err)
	}
	if s := err.Error(); !strings.HasPrefix(s, "wire: malformed message at offset 3") {
		t.Errorf("Error() = %q", s)
	}
	e := &Error{OpCode: OpMsg, Offset: 21, Reason: "x", Err: ErrChecksum}
	if got := e.Error(); got != "wire: OP_MSG: checksum mismatch at offset 21: x" {
		t.Errorf("Error() = %q", got)
	}
}

func TestAppendMsgDoesNotAllocate(t *testing.T) {
	m := sampleMsgs(t)["two sequences"]
	buf := make([]byte, 0, 4096)
	allocs := testing.AllocsPerRun(100, func() {
		buf = AppendMsg(buf[:0], 1, 0, m)
	})
	if allocs != 0 {
		t.Errorf("AppendMsg allocated %v times with a large enough dst", allocs)
	}
	q := &Query{FullCollectionName: "admin.$cmd", Query: m.Body}
	r := &Reply{Documents: []bson.Raw{m.Body}}
	allocs = testing.AllocsPerRun(100, func() {
		buf = AppendQuery(buf[:0], 1, 0, q)
		buf = AppendReply(buf, 1, 0, r)
	})
	if allocs != 0 {
		t.Errorf("AppendQuery/AppendReply allocated %v times", allocs)
	}
}

func TestReadMessage(t *testing.T) {
	m := sampleMsgs(t)
	a := AppendMsg(nil, 1, 0, m["one sequence"])
	b := AppendMsg(nil, 2, 0, m["body only"])
	stream := bytes.NewReader(append(bytes.Clone(a), b...))
	buf := make([]byte, 0, 1024)
	got, err := ReadMessage(stream, buf, 0)
	if err != nil || !bytes.Equal(got, a) {
		t.Fatalf("first message: %v", err)
	}
	if &got[0] != &buf[:1][0] {
		t.Error("buffer with enough capacity was not reused")
	}
	got, err = ReadMessage(stream, got, 0)
	if err != nil || !bytes.Equal(got, b) {
		t.Fatalf("second message: %v", err)
	}
	if _, err = ReadMessage(stream, got, 0); err != io.EOF {
		t.Fatalf("at end of stream err = %v, want io.EOF", err)
	}
	// Small buffer grows.
	got, err = ReadMessage(bytes.NewReader(a), nil, 0)
	if err != nil || !bytes.Equal(got, a) {
		t.Fatalf("nil buffer: %v", err)
	}
}

// countingReader records how many bytes were consumed.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func header(length int32, op OpCode) []byte {
	return appendHeader(nil, length, 1, 0, op)
}

func TestReadMessageRejects(t *testing.T) {
	msg := AppendMsg(nil, 1, 0, sampleMsgs(t)["body only"])
	// Too large: rejected after reading only the header.
	cr := &countingReader{r: bytes.NewReader(append(header(2000, OpMsg), make([]byte, 2000)...))}
	_, err := ReadMessage(cr, nil, 1000)
	if !errors.Is(err, ErrMessageTooLarge) || cr.n != HeaderLen {
		t.Errorf("too large: err = %v after reading %d bytes", err, cr.n)
	}
	for _, l := range []int32{-1, 0, 15, -1 << 31} {
		_, err = ReadMessage(bytes.NewReader(header(l, OpMsg)), nil, 0)
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("length %d: err = %v, want ErrMalformed", l, err)
		}
	}
	// Default limit applies when maxSize is 0.
	_, err = ReadMessage(bytes.NewReader(header(DefaultMaxMessageSize+1, OpMsg)), nil, 0)
	if !errors.Is(err, ErrMessageTooLarge) {
		t.Errorf("default max: err = %v", err)
	}
	// Truncated body and truncated header.
	_, err = ReadMessage(bytes.NewReader(msg[:len(msg)-3]), nil, 0)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated body: err = %v", err)
	}
	_, err = ReadMessage(bytes.NewReader(msg[:7]), nil, 0)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated header: err = %v", err)
	}
	// A peer declaring a huge message but sending little data does not
	// make ReadMessage allocate the declared size.
	buf, err := ReadMessage(bytes.NewReader(append(header(40_000_000, OpMsg), make([]byte, 100)...)), nil, 0)
	if !errors.Is(err, io.ErrUnexpectedEOF) || cap(buf) > 4<<20 {
		t.Errorf("lying length: err = %v, buffer capacity %d", err, cap(buf))
	}
}

// TestCompressorsStartNoGoroutines guards packages that use goleak: the
// shared zstd encoder and decoder must not leave goroutines running.
func TestCompressorsStartNoGoroutines(t *testing.T) {
	plain := AppendMsg(nil, 1, 0, sampleMsgs(t)["two sequences"])
	for _, c := range []Compressor{CompressorSnappy, CompressorZlib, CompressorZstd} {
		b, err := AppendCompressed(nil, plain, c, -1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Decode(b, 0); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	if strings.Contains(stacks, "klauspost/compress") {
		t.Errorf("compression goroutines left running:\n%s", stacks)
	}
}
