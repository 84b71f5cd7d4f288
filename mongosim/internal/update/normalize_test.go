package update

import (
	"reflect"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// roundTrip is normalize's definition: the value as bson.Unmarshal gives
// it back after bson.Marshal.
func roundTrip(t *testing.T, v any) any {
	t.Helper()
	b, err := bson.Marshal(bson.D{{Key: "u", Value: v}})
	if err != nil {
		t.Fatal(err)
	}
	var d bson.D
	if err := bson.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d[0].Value
}

// TestNormalizeMatchesRoundTrip: normalize gives what a BSON round trip
// gives: a spec of decoded types as it is (Compile only reads it), one of
// other Go types encoded into a copy (changing it leaves the spec alone);
// a key holding NUL still fails as the round trip does.
func TestNormalizeMatchesRoundTrip(t *testing.T) {
	specs := []any{
		bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: int32(1)}}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: bson.A{int64(1), 2.5, "s", nil, true, bson.D{}, bson.A{}}},
			{Key: "t", Value: bson.Timestamp{T: 1, I: 2}}, {Key: "d", Value: bson.NewDateTimeFromTime(time.Unix(5, 0))},
			{Key: "o", Value: bson.NewObjectID()}}}},
		bson.A{bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: "$y"}}}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "i", Value: 7}, {Key: "m", Value: bson.M{"k": 1}}}}}, // Go int and a map
		bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: bson.Binary{Subtype: 0, Data: []byte{1}}}}}},
	}
	for _, spec := range specs {
		got, err := normalize(spec)
		if err != nil {
			t.Fatalf("normalize(%v): %v", spec, err)
		}
		if want := roundTrip(t, spec); !reflect.DeepEqual(got, want) {
			t.Errorf("normalize(%v) = %#v, round trip %#v", spec, got, want)
		}
		if isNormal(spec) {
			continue
		}
		before := roundTrip(t, spec)
		switch g := got.(type) {
		case bson.D:
			g[0].Value = "changed"
		case bson.A:
			g[0] = "changed"
		}
		if after := roundTrip(t, spec); !reflect.DeepEqual(before, after) {
			t.Errorf("changing normalize's result changed the spec %v", spec)
		}
	}
	if _, err := normalize(bson.D{{Key: "$set", Value: bson.D{{Key: "a\x00b", Value: int32(1)}}}}); err == nil {
		t.Error("normalize accepted a key holding NUL")
	}
}
