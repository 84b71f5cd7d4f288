package mongoerr

import (
	"bytes"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestScanReplyAgreesWithLookup: the one-pass scan finds what LookupErr
// finds for each field, the first of a repeated key included, and nothing
// in a truncated document.
func TestScanReplyAgreesWithLookup(t *testing.T) {
	docs := []bson.D{
		{{Key: "n", Value: int32(1)}, {Key: "ok", Value: 1.0}},
		{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: "x"}, {Key: "code", Value: int32(2)}},
		{{Key: "writeErrors", Value: bson.A{bson.D{{Key: "index", Value: int32(0)}}}}, {Key: "ok", Value: int32(1)}},
		{{Key: "ok", Value: 1.0}, {Key: "writeConcernError", Value: bson.D{{Key: "code", Value: int32(64)}}}, {Key: "ok", Value: 0.0}},
		{{Key: "x", Value: "no ok"}},
		{},
	}
	for _, d := range docs {
		raw, err := bson.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		got := scanReply(raw)
		for key, v := range map[string]bson.RawValue{"ok": got.ok, "writeErrors": got.writeErrors, "writeConcernError": got.writeConcernError} {
			want, err := bson.Raw(raw).LookupErr(key)
			if err != nil {
				if v.Type != 0 {
					t.Errorf("%v: %s found as %v, LookupErr finds nothing", d, key, v)
				}
				continue
			}
			if v.Type != want.Type || !bytes.Equal(v.Value, want.Value) {
				t.Errorf("%v: %s = %v, LookupErr finds %v", d, key, v, want)
			}
		}
		if len(raw) > 6 {
			if cut := scanReply(raw[:len(raw)-3]); cut.ok.Type != 0 {
				t.Errorf("%v: ok found in a truncated document", d)
			}
		}
	}
}
