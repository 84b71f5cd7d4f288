package wire

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"runtime"
	"testing"

	"github.com/klauspost/compress/s2"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// rawMessage frames body with a header whose length is correct.
func rawMessage(op OpCode, body ...[]byte) []byte {
	b := appendHeader(nil, 0, 1, 0, op)
	for _, p := range body {
		b = append(b, p...)
	}
	patchLength(b, 0)
	return b
}

func le32(v int32) []byte { return binary.LittleEndian.AppendUint32(nil, uint32(v)) }

func compressedMessage(orig OpCode, size int32, c Compressor, payload []byte) []byte {
	return rawMessage(OpCompressed, le32(int32(orig)), le32(size), []byte{byte(c)}, payload)
}

func zlibBytes(t testing.TB, p []byte) []byte {
	var buf bytes.Buffer
	w := zlib.NewWriter(&buf)
	if _, err := w.Write(p); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestDecodeRejectsMalformed(t *testing.T) {
	doc := []byte(mustDoc(t, bson.D{{Key: "ping", Value: 1}}))
	// A document whose length is right but whose element type is invalid.
	badBSON := []byte{12, 0, 0, 0, 0x7e, 'a', 0, 1, 2, 3, 4, 0}
	seq := func(id string, docs ...[]byte) []byte {
		s := append(le32(0), id...)
		s = append(s, 0)
		for _, d := range docs {
			s = append(s, d...)
		}
		binary.LittleEndian.PutUint32(s, uint32(len(s)))
		return append([]byte{1}, s...)
	}
	kind0 := func(d []byte) []byte { return append([]byte{0}, d...) }
	validMsgBody := AppendMsg(nil, 1, 0, &Msg{Body: doc})[HeaderLen:]
	plainBody := validMsgBody // uncompressed OP_MSG body, for OP_COMPRESSED payloads
	size := int32(len(plainBody))
	// Compresses well, so the wire message fits a limit the original exceeds.
	bigZstd, err := AppendCompressed(nil, AppendMsg(nil, 1, 0, &Msg{Body: mustDoc(t, bson.D{{Key: "x", Value: make([]byte, 10000)}})}), CompressorZstd, 0)
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name string
		msg  []byte
		max  int32
		want error
	}{
		{"empty", nil, 0, ErrMalformed},
		{"short header", []byte{20, 0, 0, 0, 1, 0, 0}, 0, ErrMalformed},
		{"negative length", append(header(-5, OpMsg), validMsgBody...), 0, ErrMalformed},
		{"length below header", header(12, OpMsg), 0, ErrMalformed},
		{"huge length", append(header(1<<31-1, OpMsg), validMsgBody...), 0, ErrMessageTooLarge},
		{"over custom max", rawMessage(OpMsg, validMsgBody), 20, ErrMessageTooLarge},
		{"length longer than data", append(header(int32(HeaderLen+len(validMsgBody)+1), OpMsg), validMsgBody...), 0, ErrMalformed},
		{"trailing data", append(rawMessage(OpMsg, validMsgBody), 0), 0, ErrMalformed},
		{"unsupported opcode", rawMessage(2002, le32(0)), 0, ErrUnsupportedOpCode},
		{"msg no flags", rawMessage(OpMsg, []byte{0, 0}), 0, ErrMalformed},
		{"msg no sections", rawMessage(OpMsg, le32(0)), 0, ErrMalformed},
		{"msg unknown required flag bit 2", rawMessage(OpMsg, le32(1<<2), kind0(doc)), 0, ErrMalformed},
		{"msg unknown required flag bit 15", rawMessage(OpMsg, le32(1<<15), kind0(doc)), 0, ErrMalformed},
		{"msg two kind-0", rawMessage(OpMsg, le32(0), kind0(doc), kind0(doc)), 0, ErrMalformed},
		{"msg only kind-1", rawMessage(OpMsg, le32(0), seq("documents", doc)), 0, ErrMalformed},
		{"msg unknown section kind", rawMessage(OpMsg, le32(0), kind0(doc), []byte{2}, doc), 0, ErrMalformed},
		{"msg kind-0 past end", rawMessage(OpMsg, le32(0), kind0(doc[:len(doc)-1])), 0, ErrMalformed},
		{"msg kind-0 length negative", rawMessage(OpMsg, le32(0), []byte{0}, le32(-1), doc[4:]), 0, ErrMalformed},
		{"msg kind-0 length too small", rawMessage(OpMsg, le32(0), []byte{0}, le32(4), doc[4:]), 0, ErrMalformed},
		{"msg kind-0 no length", rawMessage(OpMsg, le32(0), []byte{0, 1, 2}), 0, ErrMalformed},
		{"msg bad bson", rawMessage(OpMsg, le32(0), kind0(badBSON)), 0, ErrMalformed},
		{"msg bad bson in sequence", rawMessage(OpMsg, le32(0), kind0(doc), seq("documents", doc, badBSON)), 0, ErrMalformed},
		{"msg section size past end", rawMessage(OpMsg, le32(0), kind0(doc), []byte{1}, le32(1000), []byte("documents\x00")), 0, ErrMalformed},
		{"msg section size negative", rawMessage(OpMsg, le32(0), kind0(doc), []byte{1}, le32(-8), []byte("documents\x00")), 0, ErrMalformed},
		{"msg section size too small", rawMessage(OpMsg, le32(0), kind0(doc), []byte{1}, le32(3), []byte("documents\x00")), 0, ErrMalformed},
		{"msg section no identifier terminator", rawMessage(OpMsg, le32(0), kind0(doc), []byte{1}, le32(8), []byte("docs")), 0, ErrMalformed},
		{"msg sequence doc past section", func() []byte {
			s := seq("d", doc)
			binary.LittleEndian.PutUint32(s[1:], uint32(len(s)-2)) // section ends inside the document
			return rawMessage(OpMsg, le32(0), kind0(doc), s, []byte{0})
		}(), 0, ErrMalformed},
		{"msg checksum flag without room", rawMessage(OpMsg, le32(1), []byte{0, 0}), 0, ErrMalformed},
		{"msg bad checksum", rawMessage(OpMsg, le32(1), kind0(doc), le32(12345)), 0, ErrChecksum},
		{"query no name terminator", rawMessage(OpQuery, le32(0), []byte("admin.$cmd")), 0, ErrMalformed},
		{"query missing doc", rawMessage(OpQuery, le32(0), []byte("a.b\x00"), le32(0), le32(-1)), 0, ErrMalformed},
		{"query bad bson", rawMessage(OpQuery, le32(0), []byte("a.b\x00"), le32(0), le32(-1), badBSON), 0, ErrMalformed},
		{"query trailing bytes", rawMessage(OpQuery, le32(0), []byte("a.b\x00"), le32(0), le32(-1), doc, doc, []byte{1}), 0, ErrMalformed},
		{"reply count too high", rawMessage(OpReply, le32(0), make([]byte, 8), le32(0), le32(2), doc), 0, ErrMalformed},
		{"reply count too low", rawMessage(OpReply, le32(0), make([]byte, 8), le32(0), le32(0), doc), 0, ErrMalformed},
		{"reply count negative", rawMessage(OpReply, le32(0), make([]byte, 8), le32(0), le32(-1)), 0, ErrMalformed},
		{"reply huge count", rawMessage(OpReply, le32(0), make([]byte, 8), le32(0), le32(1<<30), doc), 0, ErrMalformed},
		{"reply truncated", rawMessage(OpReply, le32(0), make([]byte, 5)), 0, ErrMalformed},
		{"compressed short", rawMessage(OpCompressed, le32(int32(OpMsg)), le32(5)), 0, ErrMalformed},
		{"compressed bad compressor", compressedMessage(OpMsg, size, 4, plainBody), 0, ErrUnsupportedCompressor},
		{"compressed compressor 255", compressedMessage(OpMsg, size, 255, plainBody), 0, ErrUnsupportedCompressor},
		{"compressed nested", compressedMessage(OpCompressed, size, CompressorNoop, plainBody), 0, ErrUnsupportedOpCode},
		{"compressed unknown original", compressedMessage(2002, size, CompressorNoop, plainBody), 0, ErrUnsupportedOpCode},
		{"compressed negative size", compressedMessage(OpMsg, -1, CompressorNoop, plainBody), 0, ErrMalformed},
		{"compressed size over max", compressedMessage(OpMsg, 1<<30, CompressorZstd, nil), 0, ErrMessageTooLarge},
		{"compressed size over custom max", bigZstd, int32(len(bigZstd)), ErrMessageTooLarge},
		{"noop size lies low", compressedMessage(OpMsg, size-1, CompressorNoop, plainBody), 0, ErrMalformed},
		{"noop size lies high", compressedMessage(OpMsg, size+1, CompressorNoop, plainBody), 0, ErrMalformed},
		{"snappy size lies low", compressedMessage(OpMsg, size-1, CompressorSnappy, s2.EncodeSnappy(nil, plainBody)), 0, ErrMalformed},
		{"snappy size lies high", compressedMessage(OpMsg, size+1, CompressorSnappy, s2.EncodeSnappy(nil, plainBody)), 0, ErrMalformed},
		{"snappy garbage", compressedMessage(OpMsg, size, CompressorSnappy, []byte{byte(size), 0xff, 0xff, 0xff}), 0, ErrMalformed},
		{"zlib size lies low", compressedMessage(OpMsg, size-1, CompressorZlib, zlibBytes(t, plainBody)), 0, ErrMalformed},
		{"zlib size lies high", compressedMessage(OpMsg, size+1, CompressorZlib, zlibBytes(t, plainBody)), 0, ErrMalformed},
		{"zlib garbage", compressedMessage(OpMsg, size, CompressorZlib, []byte("not zlib at all")), 0, ErrMalformed},
		{"zlib bad trailer", func() []byte {
			z := zlibBytes(t, plainBody)
			z[len(z)-1] ^= 1
			return compressedMessage(OpMsg, size, CompressorZlib, z)
		}(), 0, ErrMalformed},
		{"zstd size lies low", compressedMessage(OpMsg, size-1, CompressorZstd, zstdEncoder.EncodeAll(plainBody, nil)), 0, ErrMalformed},
		{"zstd size lies high", compressedMessage(OpMsg, size+1, CompressorZstd, zstdEncoder.EncodeAll(plainBody, nil)), 0, ErrMalformed},
		{"zstd garbage", compressedMessage(OpMsg, size, CompressorZstd, []byte("not zstd")), 0, ErrMalformed},
		{"compressed inner malformed", compressedMessage(OpMsg, 4, CompressorNoop, le32(0)), 0, ErrMalformed},
		{"compressed inner bad checksum", compressedMessage(OpMsg, int32(len(validMsgBody)+4), CompressorNoop, append(le32(1), append(validMsgBody[4:], 1, 2, 3, 4)...)), 0, ErrChecksum},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Decode(tc.msg, tc.max)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v (message %+v)", err, tc.want, m)
			}
			var we *Error
			if !errors.As(err, &we) {
				t.Fatalf("err %T is not *Error", err)
			}
			if we.Offset < 0 || we.Offset > max(len(tc.msg), 16+int(size)+64) {
				t.Errorf("offset %d out of range", we.Offset)
			}
			if m.Msg != nil || m.Query != nil || m.Reply != nil {
				t.Errorf("failed decode returned a message: %+v", m)
			}
		})
	}
}

func TestDecodeAcceptsOptionalFlagBits(t *testing.T) {
	doc := mustDoc(t, bson.D{{Key: "ping", Value: 1}})
	b := rawMessage(OpMsg, binary.LittleEndian.AppendUint32(nil, uint32(ExhaustAllowed|1<<20|1<<31)), []byte{0}, doc)
	m, err := Decode(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m.Msg.Flags != ExhaustAllowed|1<<20|1<<31 {
		t.Errorf("flags = %#x", m.Msg.Flags)
	}
	// Sections may come in any order.
	b = rawMessage(OpMsg, le32(0), []byte{1}, le32(int32(4+2+len(doc))), []byte("d\x00"), doc, []byte{0}, doc)
	m, err = Decode(b, 0)
	if err != nil || len(m.Msg.Sequences) != 1 || !bytes.Equal(m.Msg.Body, doc) {
		t.Fatalf("kind-1 before kind-0: %+v %v", m, err)
	}
}

// TestDecompressionBombIsBounded checks that a small payload that expands to
// far more than its declared uncompressedSize is rejected without allocating
// the expanded size.
func TestDecompressionBombIsBounded(t *testing.T) {
	huge := make([]byte, 64<<20)
	payloads := map[Compressor][]byte{
		CompressorSnappy: s2.EncodeSnappy(nil, huge[:4<<20]),
		CompressorZlib:   zlibBytes(t, huge),
		CompressorZstd:   zstdEncoder.EncodeAll(huge, nil),
	}
	huge = nil
	for c, p := range payloads {
		msg := compressedMessage(OpMsg, 1000, c, p)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := Decode(msg, 0)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", c, err)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 2<<20 {
			t.Errorf("%s: decoding the bomb allocated %d bytes", c, grew)
		}
	}
}
