package rawdoc

import (
	"bytes"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

var keys = []string{"ok", "writeErrors", "writeConcernError", "n"}

// agree checks FirstFields against LookupErr for each of keys.
func agree(t *testing.T, raw []byte) {
	t.Helper()
	got := make([]bson.RawValue, len(keys))
	FirstFields(raw, keys, got)
	for i, key := range keys {
		want, err := bson.Raw(raw).LookupErr(key)
		if err != nil {
			if got[i].Type != 0 {
				t.Errorf("%x: %s found as %v, LookupErr finds nothing", raw, key, got[i])
			}
			continue
		}
		if got[i].Type != want.Type || !bytes.Equal(got[i].Value, want.Value) {
			t.Errorf("%x: %s = %v, LookupErr finds %v", raw, key, got[i], want)
		}
	}
}

// TestFirstFieldsAgreesWithLookup: the one walk finds what LookupErr finds
// for each field, the first of a repeated key included, and nothing in a
// truncated document.
func TestFirstFieldsAgreesWithLookup(t *testing.T) {
	for _, d := range seedDocs {
		raw, err := bson.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		agree(t, raw)
		if len(raw) > 6 {
			vals := make([]bson.RawValue, len(keys))
			if FirstFields(raw[:len(raw)-3], keys, vals); vals[0].Type != 0 {
				t.Errorf("%v: ok found in a truncated document", d)
			}
		}
	}
}

var seedDocs = []bson.D{
	{{Key: "n", Value: int32(1)}, {Key: "ok", Value: 1.0}},
	{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: "x"}, {Key: "code", Value: int32(2)}},
	{{Key: "writeErrors", Value: bson.A{bson.D{{Key: "index", Value: int32(0)}}}}, {Key: "ok", Value: int32(1)}},
	{{Key: "ok", Value: 1.0}, {Key: "writeConcernError", Value: bson.D{{Key: "code", Value: int32(64)}}}, {Key: "ok", Value: 0.0}},
	{{Key: "x", Value: "no ok"}},
	{{Key: "re", Value: bson.Regex{Pattern: "a", Options: "i"}}, {Key: "n", Value: int64(2)}, {Key: "ok", Value: 1.0}},
	{{Key: "b", Value: bson.Binary{Data: []byte{1}}}, {Key: "cws", Value: bson.CodeWithScope{Code: "f", Scope: bson.D{}}}, {Key: "ok", Value: 1.0}},
	{},
}

// FuzzFirstFields: on any bytes FirstFields does not panic; it finds
// nothing in a document shorter than its declared length, and in a
// well-formed document what LookupErr finds. (On other malformed bytes
// LookupErr may read past the declared end; replies reach FirstFields
// validated.)
func FuzzFirstFields(f *testing.F) {
	for _, d := range seedDocs {
		raw, err := bson.Marshal(d)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		vals := make([]bson.RawValue, len(keys))
		FirstFields(raw, keys, vals)
		if n, _, ok := bsoncore.ReadLength(raw); !ok || n < 5 || int(n) > len(raw) {
			for i, v := range vals {
				if v.Type != 0 {
					t.Errorf("%x: %s found in a document shorter than its length", raw, keys[i])
				}
			}
			return
		}
		if n, _, _ := bsoncore.ReadLength(raw); int(n) == len(raw) && bsoncore.Document(raw).Validate() == nil {
			agree(t, raw)
		}
	})
}
