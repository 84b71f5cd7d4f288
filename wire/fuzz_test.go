package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// fuzzMax keeps fuzzing fast: nothing the fuzzer builds needs more.
const fuzzMax = 1 << 20

// seedMessages returns real encoded messages of every kind.
func seedMessages(t testing.TB) map[string][]byte {
	seeds := map[string][]byte{}
	for name, m := range sampleMsgs(t) {
		seeds["msg-"+name] = AppendMsg(nil, 1, 2, m)
	}
	q := mustDoc(t, bson.D{{Key: "hello", Value: 1}, {Key: "client", Value: bson.D{{Key: "driver", Value: bson.D{{Key: "name", Value: "sturdy"}}}}}})
	seeds["query"] = AppendQuery(nil, 3, 0, &Query{FullCollectionName: "admin.$cmd", NumberToReturn: -1, Query: q})
	seeds["query-selector"] = AppendQuery(nil, 3, 0, &Query{FullCollectionName: "db.c", Query: q, ReturnFieldsSelector: mustDoc(t, bson.D{{Key: "a", Value: 1}})})
	seeds["reply"] = AppendReply(nil, 4, 3, &Reply{CursorID: 7, Documents: []bson.Raw{mustDoc(t, bson.D{{Key: "ok", Value: 1.0}}), q}})
	seeds["reply-query-failure"] = AppendReply(nil, 5, 3, &Reply{ResponseFlags: ReplyQueryFailure, Documents: []bson.Raw{mustDoc(t, bson.D{{Key: "$err", Value: "x"}, {Key: "code", Value: int32(5739101)}})}})
	// Legacy operations, which Decode refuses by op code (a server answers
	// them from the header).
	getMore := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint32(append(make([]byte, 4), "db.c\x00"...), 2), 7)
	seeds["get-more"] = legacyOp(OpGetMore, getMore)
	seeds["insert"] = legacyOp(OpInsert, append(append(make([]byte, 4), "db.c\x00"...), q...))
	plain := seeds["msg-two sequences"]
	for _, c := range []Compressor{CompressorNoop, CompressorSnappy, CompressorZlib, CompressorZstd} {
		b, err := AppendCompressed(nil, plain, c, 6)
		if err != nil {
			t.Fatal(err)
		}
		seeds["compressed-"+c.String()] = b
	}
	return seeds
}

// legacyOp frames body as a message of a legacy op code.
func legacyOp(op OpCode, body []byte) []byte {
	b := appendHeader(nil, int32(HeaderLen+len(body)), 6, 0, op)
	return append(b, body...)
}

// checkDecodeError asserts the error contract of Decode.
func checkDecodeError(t *testing.T, err error) {
	var we *Error
	if !errors.As(err, &we) {
		t.Fatalf("error %v (%T) is not a *Error", err, err)
	}
	switch {
	case errors.Is(err, ErrMalformed), errors.Is(err, ErrMessageTooLarge), errors.Is(err, ErrChecksum),
		errors.Is(err, ErrUnsupportedOpCode), errors.Is(err, ErrUnsupportedCompressor):
	default:
		t.Fatalf("error %v wraps no sentinel", err)
	}
}

// reencode encodes a decoded message again (uncompressed).
func reencode(m Message) []byte {
	switch {
	case m.Msg != nil:
		return AppendMsg(nil, m.Header.RequestID, m.Header.ResponseTo, m.Msg)
	case m.Query != nil:
		return AppendQuery(nil, m.Header.RequestID, m.Header.ResponseTo, m.Query)
	case m.Reply != nil:
		return AppendReply(nil, m.Header.RequestID, m.Header.ResponseTo, m.Reply)
	}
	return nil
}

func checkDecoded(t *testing.T, in []byte, m Message) {
	n := 0
	for _, p := range []bool{m.Msg != nil, m.Query != nil, m.Reply != nil} {
		if p {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("decoded message has %d of Msg/Query/Reply set", n)
	}
	// What decodes must survive a round trip unchanged.
	again, err := Decode(reencode(m), fuzzMax)
	if err != nil {
		t.Fatalf("re-encoded message does not decode: %v", err)
	}
	if fmt.Sprint(again.Msg, again.Query, again.Reply) != fmt.Sprint(m.Msg, m.Query, m.Reply) {
		t.Fatalf("round trip changed the message:\n%v\n%v", m, again)
	}
}

func FuzzDecode(f *testing.F) {
	for _, b := range seedMessages(f) {
		f.Add(b)
	}
	// One Msg reused across inputs, as a connection reuses it: what it
	// held from an earlier message must not leak into the next.
	var reused Msg
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(data, fuzzMax)
		m2, err2 := DecodeInto(data, fuzzMax, &reused)
		if (err == nil) != (err2 == nil) || !reflect.DeepEqual(m.Msg, m2.Msg) {
			t.Fatalf("DecodeInto into a reused Msg = %+v, %v; Decode = %+v, %v", m2.Msg, err2, m.Msg, err)
		}
		if err != nil {
			checkDecodeError(t, err)
			return
		}
		checkDecoded(t, data, m)
	})
}

// FuzzDecodeCompressed builds OP_COMPRESSED messages around arbitrary
// payloads, so the fuzzer spends its time inside the decompressors.
func FuzzDecodeCompressed(f *testing.F) {
	for _, b := range seedMessages(f) {
		if h, _ := ParseHeader(b); h.OpCode == OpCompressed {
			f.Add(b[24], int32(binary.LittleEndian.Uint32(b[16:])), int32(binary.LittleEndian.Uint32(b[20:])), b[25:])
		}
	}
	f.Fuzz(func(t *testing.T, compressor byte, original int32, size int32, payload []byte) {
		data := compressedMessage(OpCode(original), size, Compressor(compressor), payload)
		m, err := Decode(data, fuzzMax)
		if err != nil {
			checkDecodeError(t, err)
			return
		}
		if m.Compressor != Compressor(compressor) || m.Header.MessageLength != size+HeaderLen || m.Header.OpCode != OpCode(original) {
			t.Fatalf("decoded header %+v compressor %v", m.Header, m.Compressor)
		}
		checkDecoded(t, data, m)
		// Compressing what was decoded must round trip too.
		comp, err := AppendCompressed(nil, reencode(m), Compressor(compressor), -1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Decode(comp, fuzzMax); err != nil {
			t.Fatalf("recompressed message does not decode: %v", err)
		}
	})
}

func FuzzReadMessage(f *testing.F) {
	for _, b := range seedMessages(f) {
		f.Add(b)
		f.Add(append(bytes.Clone(b), b...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		var buf []byte
		consumed := 0
		for range 8 {
			msg, err := ReadMessage(r, buf, fuzzMax)
			if err != nil {
				var we *Error
				if errors.As(err, &we) && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrMessageTooLarge) {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			h, err := ParseHeader(msg)
			if err != nil || int(h.MessageLength) != len(msg) || h.MessageLength > fuzzMax {
				t.Fatalf("ReadMessage returned %d bytes for header %+v (%v)", len(msg), h, err)
			}
			if !bytes.Equal(msg, data[consumed:consumed+len(msg)]) {
				t.Fatal("ReadMessage returned bytes not from the stream")
			}
			consumed += len(msg)
			buf = msg
		}
	})
}

func FuzzParseHeader(f *testing.F) {
	for _, b := range seedMessages(f) {
		f.Add(b[:HeaderLen])
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := ParseHeader(data)
		if err != nil {
			checkDecodeError(t, err)
			if len(data) >= HeaderLen && h.MessageLength >= HeaderLen {
				t.Fatalf("rejected valid header %+v: %v", h, err)
			}
			return
		}
		if len(data) < HeaderLen || h.MessageLength < HeaderLen {
			t.Fatalf("accepted %x as %+v", data, h)
		}
		if got := appendHeader(nil, h.MessageLength, h.RequestID, h.ResponseTo, h.OpCode); !bytes.Equal(got, data[:HeaderLen]) {
			t.Fatalf("header round trip: %x != %x", got, data[:HeaderLen])
		}
	})
}

// TestWriteFuzzSeeds regenerates testdata/fuzz seed files from real encoded
// messages. Run with WIRE_WRITE_SEEDS=1.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("WIRE_WRITE_SEEDS") == "" {
		t.Skip("set WIRE_WRITE_SEEDS=1 to regenerate the seed corpus")
	}
	write := func(fuzzName, seedName string, values ...string) {
		dir := filepath.Join("testdata", "fuzz", fuzzName)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var sb bytes.Buffer
		sb.WriteString("go test fuzz v1\n")
		for _, v := range values {
			sb.WriteString(v + "\n")
		}
		if err := os.WriteFile(filepath.Join(dir, "seed-"+seedName), sb.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bs := func(b []byte) string { return "[]byte(" + strconv.Quote(string(b)) + ")" }
	write("FuzzValidateBSON", "every-type", bs(everyTypeDoc(t)))
	write("FuzzValidateBSON", "nested", bs(nestedDocs(4)))
	for name, b := range seedMessages(t) {
		name = sanitize(name)
		write("FuzzDecode", name, bs(b))
		write("FuzzReadMessage", name, bs(b))
		write("FuzzParseHeader", name, bs(b[:HeaderLen]))
		if h, _ := ParseHeader(b); h.OpCode == OpCompressed {
			write("FuzzDecodeCompressed", name,
				"byte("+strconv.QuoteRune(rune(b[24]))+")",
				"int32("+strconv.Itoa(int(int32(binary.LittleEndian.Uint32(b[16:]))))+")",
				"int32("+strconv.Itoa(int(int32(binary.LittleEndian.Uint32(b[20:]))))+")",
				bs(b[25:]))
		}
	}
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}
