package wire

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func benchMsg(b *testing.B) *Msg {
	docs := make([]bson.Raw, 100)
	for i := range docs {
		docs[i] = mustDoc(b, bson.D{{Key: "_id", Value: i}, {Key: "name", Value: "document"}, {Key: "n", Value: 3.5}})
	}
	return &Msg{
		Body:      mustDoc(b, bson.D{{Key: "insert", Value: "coll"}, {Key: "ordered", Value: true}, {Key: "$db", Value: "test"}}),
		Sequences: []DocumentSequence{{Identifier: "documents", Documents: docs}},
	}
}

func BenchmarkAppendMsg(b *testing.B) {
	m := benchMsg(b)
	buf := AppendMsg(nil, 1, 0, m)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendMsg(buf[:0], 1, 0, m)
	}
}

func BenchmarkDecodeMsg(b *testing.B) {
	buf := AppendMsg(nil, 1, 0, benchMsg(b))
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(buf, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeCompressed(b *testing.B) {
	plain := AppendMsg(nil, 1, 0, benchMsg(b))
	for _, c := range []Compressor{CompressorSnappy, CompressorZlib, CompressorZstd} {
		comp, err := AppendCompressed(nil, plain, c, -1)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.String(), func(b *testing.B) {
			b.SetBytes(int64(len(plain)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Decode(comp, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkAppendCompressed(b *testing.B) {
	plain := AppendMsg(nil, 1, 0, benchMsg(b))
	for _, c := range []Compressor{CompressorSnappy, CompressorZlib, CompressorZstd} {
		b.Run(c.String(), func(b *testing.B) {
			buf, _ := AppendCompressed(nil, plain, c, -1)
			b.SetBytes(int64(len(plain)))
			b.ReportAllocs()
			for b.Loop() {
				buf, _ = AppendCompressed(buf[:0], plain, c, -1)
			}
		})
	}
}

// BenchmarkDecodeCursorReply decodes a getMore reply of 10 000 small
// documents, the shape a cursor drain reads.
func BenchmarkDecodeCursorReply(b *testing.B) {
	buf := AppendMsg(nil, 1, 0, &Msg{Body: cursorReplyBody(b)})
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(buf, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidateCursorReply validates the body of a getMore reply of
// 10 000 small documents, the shape a cursor drain reads: every byte of a
// reply from the network goes through validateBSON.
func BenchmarkValidateCursorReply(b *testing.B) {
	body := cursorReplyBody(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, reason := validateBSON(body); reason != "" {
			b.Fatal(reason)
		}
	}
}

// cursorReplyBody is the body of a getMore reply of 10 000 small documents.
func cursorReplyBody(b *testing.B) bson.Raw {
	batch := make(bson.A, 10000)
	for i := range batch {
		batch[i] = bson.D{{Key: "_id", Value: int32(i)}, {Key: "x", Value: int32(i)}, {Key: "s", Value: "hello world"}}
	}
	return mustDoc(b, bson.D{{Key: "ok", Value: 1.0}, {Key: "cursor", Value: bson.D{
		{Key: "nextBatch", Value: batch}, {Key: "id", Value: int64(0)}, {Key: "ns", Value: "db.c"}}}})
}
