package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// everyTypeDoc holds one element of every BSON type, nested a few levels.
func everyTypeDoc(t testing.TB) bson.Raw {
	oid := bson.ObjectID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	dec, err := bson.ParseDecimal128("1.5")
	if err != nil {
		t.Fatal(err)
	}
	return mustDoc(t, bson.D{
		{Key: "double", Value: 1.5},
		{Key: "string", Value: "héllo"},
		{Key: "doc", Value: bson.D{{Key: "a", Value: bson.D{{Key: "b", Value: bson.A{1, "x", bson.D{}}}}}}},
		{Key: "array", Value: bson.A{}},
		{Key: "binary", Value: bson.Binary{Subtype: 0, Data: []byte{1, 2, 3}}},
		{Key: "oldbinary", Value: bson.Binary{Subtype: 2, Data: []byte{1, 2}}},
		{Key: "undefined", Value: bson.Undefined{}},
		{Key: "oid", Value: oid},
		{Key: "true", Value: true},
		{Key: "false", Value: false},
		{Key: "date", Value: bson.DateTime(1234)},
		{Key: "null", Value: nil},
		{Key: "regex", Value: bson.Regex{Pattern: "^a", Options: "i"}},
		{Key: "dbpointer", Value: bson.DBPointer{DB: "db.c", Pointer: oid}},
		{Key: "js", Value: bson.JavaScript("x()")},
		{Key: "symbol", Value: bson.Symbol("sym")},
		{Key: "cws", Value: bson.CodeWithScope{Code: "f()", Scope: bson.D{{Key: "v", Value: bson.D{{Key: "w", Value: 1}}}}}},
		{Key: "int32", Value: int32(7)},
		{Key: "timestamp", Value: bson.Timestamp{T: 1, I: 2}},
		{Key: "int64", Value: int64(8)},
		{Key: "decimal", Value: dec},
		{Key: "min", Value: bson.MinKey{}},
		{Key: "max", Value: bson.MaxKey{}},
	})
}

func TestValidateBSONAcceptsEveryType(t *testing.T) {
	doc := everyTypeDoc(t)
	if at, reason := validateBSON(doc); reason != "" {
		t.Fatalf("valid document rejected at %d: %s", at, reason)
	}
	// Every strict prefix is invalid.
	for i := range len(doc) - 1 {
		if _, reason := validateBSON(doc[:i]); reason == "" {
			t.Fatalf("prefix of %d bytes accepted", i)
		}
	}
}

// nestedDocs returns a document made of depth nested empty-keyed documents.
func nestedDocs(depth int) []byte {
	size := 5 + (depth-1)*7
	b := make([]byte, size)
	for i := range depth - 1 {
		binary.LittleEndian.PutUint32(b[i*6:], uint32(5+(depth-1-i)*7))
		b[i*6+4] = 0x03
	}
	binary.LittleEndian.PutUint32(b[(depth-1)*6:], 5)
	return b
}

func TestValidateBSONRejects(t *testing.T) {
	good := everyTypeDoc(t)
	if _, reason := validateBSON(nestedDocs(MaxDocumentNesting)); reason != "" {
		t.Fatalf("nesting of exactly %d rejected: %s", MaxDocumentNesting, reason)
	}
	corrupt := func(find []byte, patch func(b []byte, at int)) []byte {
		b := bytes.Clone(good)
		at := bytes.Index(b, find)
		if at < 0 {
			t.Fatalf("%q not in document", find)
		}
		patch(b, at)
		return b
	}
	cases := map[string][]byte{
		"too deep":                  nestedDocs(MaxDocumentNesting + 1),
		"very deep":                 nestedDocs(1_000_000),
		"bad type inside embedded":  corrupt([]byte("\x04b\x00"), func(b []byte, at int) { b[at+7] = 0x55 }),
		"bad bool":                  corrupt([]byte("\x08true\x00"), func(b []byte, at int) { b[at+6] = 2 }),
		"string length too long":    corrupt([]byte("\x02string\x00"), func(b []byte, at int) { b[at+8] = 200 }),
		"string length zero":        corrupt([]byte("\x02string\x00"), func(b []byte, at int) { b[at+8] = 0 }),
		"string not terminated":     corrupt([]byte("héllo\x00"), func(b []byte, at int) { b[at+6] = 'x' }),
		"embedded length too long":  corrupt([]byte("\x03doc\x00"), func(b []byte, at int) { b[at+5] += 100 }),
		"embedded length too short": corrupt([]byte("\x03doc\x00"), func(b []byte, at int) { b[at+5] -= 1 }),
		"binary length negative":    corrupt([]byte("\x05binary\x00"), func(b []byte, at int) { b[at+11] = 0x80 }),
		"old binary inner length":   corrupt([]byte("\x05oldbinary\x00"), func(b []byte, at int) { b[at+16] = 9 }),
		"code with scope length":    corrupt([]byte("\x0fcws\x00"), func(b []byte, at int) { b[at+5]++ }),
		"code with scope bad scope": corrupt([]byte("\x10w\x00"), func(b []byte, at int) { b[at] = 0x42 }),
		"no terminator":             func() []byte { b := bytes.Clone(good); b[len(b)-1] = 1; return b }(),
		"trailing garbage":          append(bytes.Clone(good), 0),
	}
	for name, doc := range cases {
		if _, reason := validateBSON(doc); reason == "" {
			t.Errorf("%s: accepted", name)
		}
	}
	// A deeply nested document inside a message is rejected by Decode.
	b := rawMessage(OpMsg, le32(0), []byte{0}, nestedDocs(100_000))
	if _, err := Decode(b, 0); !errors.Is(err, ErrMalformed) {
		t.Errorf("deeply nested body: err = %v", err)
	}
}

// FuzzValidateBSON checks validateBSON against the driver: whatever it
// accepts, bsoncore accepts and bson.Unmarshal decodes.
func FuzzValidateBSON(f *testing.F) {
	f.Add([]byte(everyTypeDoc(f)))
	f.Add(nestedDocs(5))
	f.Add([]byte(mustDoc(f, bson.D{{Key: "a", Value: bson.A{bson.D{{Key: "b", Value: "c"}}}}})))
	f.Fuzz(func(t *testing.T, doc []byte) {
		_, reason := validateBSON(doc)
		core := bsoncore.Document(doc).Validate()
		if reason == "" {
			if core != nil {
				t.Fatalf("accepted a document bsoncore rejects: %v", core)
			}
			var out bson.D
			if err := bson.Unmarshal(doc, &out); err != nil {
				t.Fatalf("accepted a document bson.Unmarshal rejects: %v", err)
			}
		}
	})
}

func TestDecodeTooDeepIsErrTooDeep(t *testing.T) {
	b := AppendMsg(nil, 1, 0, &Msg{Body: nestedDocs(MaxDocumentNesting + 1)})
	_, err := Decode(b, 0)
	if !errors.Is(err, ErrTooDeep) || !errors.Is(err, ErrMalformed) {
		t.Fatalf("want ErrTooDeep (also ErrMalformed), got %v", err)
	}
	bad := AppendMsg(nil, 1, 0, &Msg{Body: []byte{5, 0, 0, 0, 1}})
	if _, err := Decode(bad, 0); errors.Is(err, ErrTooDeep) || !errors.Is(err, ErrMalformed) {
		t.Fatalf("other malformation: %v", err)
	}
}
