package wire

import (
	"bytes"
	"errors"
	"math"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

type namedInt int32

type tagged struct {
	A int    `bson:"a"`
	B string `bson:"b,omitempty"`
}

// TestAppendDocumentMatchesMarshal checks AppendDocument against
// bson.Marshal byte for byte, for the types it encodes itself and for the
// ones it hands on.
func TestAppendDocumentMatchesMarshal(t *testing.T) {
	raw, _ := bson.Marshal(bson.D{{Key: "x", Value: int32(1)}, {Key: "y", Value: bson.A{"a", 2.5}}})
	rv := bson.Raw(raw).Lookup("y")
	rawDoc, badRaw := bson.Raw(raw), bson.Raw{9, 0, 0, 0, 0x08, 'a', 0, 7, 0}
	oid := bson.NewObjectID()
	big := make(bson.A, 1200)
	for i := range big {
		big[i] = i
	}
	deep := bson.D{{Key: "leaf", Value: int32(1)}}
	for range 40 {
		deep = bson.D{{Key: "d", Value: deep}}
	}
	cases := []bson.D{
		{},
		{{Key: "insert", Value: "coll"}, {Key: "ordered", Value: true}, {Key: "off", Value: false}},
		{{Key: "i32", Value: int32(-7)}, {Key: "i64", Value: int64(1) << 40}, {Key: "f", Value: math.Pi}, {Key: "nan", Value: math.NaN()}},
		{{Key: "small", Value: 5}, {Key: "neg", Value: -5}, {Key: "large", Value: math.MaxInt32 + 1}, {Key: "min", Value: math.MinInt32 - 1}},
		{{Key: "nil", Value: nil}, {Key: "oid", Value: oid}, {Key: "raw", Value: bson.Raw(raw)}, {Key: "rv", Value: rv}},
		{{Key: "nested", Value: bson.D{{Key: "a", Value: bson.A{int32(1), bson.D{{Key: "b", Value: nil}}, bson.A{}}}}}},
		{{Key: "nilD", Value: bson.D(nil)}, {Key: "nilA", Value: bson.A(nil)}, {Key: "nilRaw", Value: bson.Raw(nil)}},
		{{Key: "named", Value: namedInt(3)}, {Key: "struct", Value: tagged{A: 1}}, {Key: "m", Value: bson.M{"k": "v"}}},
		{{Key: "time", Value: time.Unix(1700000000, 0).UTC()}, {Key: "bytes", Value: []byte{1, 2, 3}}, {Key: "u32", Value: uint32(9)}},
		{{Key: "str", Value: "héllo\x00world"}, {Key: "empty", Value: ""}},
		{{Key: "big", Value: big}},
		{{Key: "deep", Value: deep}},
		{{Key: "rvInt", Value: bson.RawValue{Type: bson.TypeInt32, Value: []byte{1, 0, 0, 0}}}},
		{{Key: "badNested", Value: bson.Raw{13, 0, 0, 0, 0x03, 'a', 0, 5, 0, 0, 0, 7, 0}}},
		{{Key: "badBool", Value: bson.Raw{9, 0, 0, 0, 0x08, 'a', 0, 7, 0}}},
		{{Key: "rvBadDoc", Value: bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: []byte{5, 0, 0, 0, 1}}}},
		{{Key: "rvShort", Value: bson.RawValue{Type: bson.TypeInt32, Value: []byte{1}}}},
		// *bson.Raw, which commands use to carry a document without boxing.
		{{Key: "rawPtr", Value: &rawDoc}, {Key: "nilRawPtr", Value: (*bson.Raw)(nil)}},
		{{Key: "badRawPtr", Value: &badRaw}},
	}
	for i, d := range cases {
		want, werr := bson.Marshal(d)
		prefix := []byte("prefix")
		got, gerr := AppendDocument(prefix, d)
		if (werr != nil) != (gerr != nil) {
			t.Fatalf("case %d: bson.Marshal error %v, AppendDocument error %v", i, werr, gerr)
		}
		if werr != nil {
			continue
		}
		if !bytes.Equal(got[:6], []byte("prefix")) || !bytes.Equal(got[6:], want) {
			t.Errorf("case %d: AppendDocument differs from bson.Marshal\n got %x\nwant %x", i, got[6:], want)
		}
	}
}

func TestAppendDocumentErrors(t *testing.T) {
	for _, d := range []bson.D{
		{{Key: "a\x00b", Value: int32(1)}},
		{{Key: "ch", Value: make(chan int)}},
		{{Key: "badRaw", Value: bson.Raw{9, 0, 0, 0, 0}}},
		{{Key: "nested", Value: bson.D{{Key: "f", Value: func() {}}}}},
	} {
		_, werr := bson.Marshal(d)
		dst := []byte("keep")
		got, err := AppendDocument(dst, d)
		if err == nil {
			t.Errorf("%v: no error (bson.Marshal says %v)", d[0].Key, werr)
			continue
		}
		if werr == nil {
			t.Errorf("%v: AppendDocument fails (%v) where bson.Marshal does not", d[0].Key, err)
		}
		if string(got) != "keep" {
			t.Errorf("%v: dst not restored: %q", d[0].Key, got)
		}
	}
	if _, err := AppendDocument(nil, bson.D{{Key: "a\x00", Value: 1}}); !errors.Is(err, errNullInKey) {
		t.Errorf("null in key: %v", err)
	}
}

func BenchmarkAppendDocument(b *testing.B) {
	lsid, _ := bson.Marshal(bson.D{{Key: "id", Value: bson.NewObjectID()}})
	cmd := bson.D{{Key: "insert", Value: "coll"}, {Key: "ordered", Value: true}, {Key: "lsid", Value: bson.Raw(lsid)},
		{Key: "txnNumber", Value: int64(5)}, {Key: "writeConcern", Value: bson.D{{Key: "w", Value: "majority"}}}}
	b.Run("AppendDocument", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf, _ = AppendDocument(buf[:0], cmd)
		}
	})
	b.Run("bson.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = bson.Marshal(cmd)
		}
	})
}
