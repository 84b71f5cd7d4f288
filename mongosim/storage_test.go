package mongosim

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestBSONSizeMatchesMarshal(t *testing.T) {
	doc := bson.D{
		{Key: "_id", Value: bson.NewObjectID()},
		{Key: "s", Value: "héllo"},
		{Key: "i", Value: int32(1)}, {Key: "l", Value: int64(2)}, {Key: "f", Value: 1.5},
		{Key: "b", Value: true}, {Key: "n", Value: nil},
		{Key: "d", Value: bson.NewDateTimeFromTime(time.Unix(1, 0))},
		{Key: "ts", Value: bson.Timestamp{T: 1, I: 2}},
		{Key: "bin", Value: bson.Binary{Subtype: 0, Data: []byte{1, 2, 3}}},
		{Key: "re", Value: bson.Regex{Pattern: "a+", Options: "i"}},
		{Key: "dec", Value: bson.NewDecimal128(1, 2)},
		{Key: "arr", Value: bson.A{int32(1), "x", bson.D{{Key: "k", Value: bson.A{}}}}},
		{Key: "sub", Value: bson.D{{Key: "a", Value: bson.D{}}}},
		{Key: "min", Value: bson.MinKey{}}, {Key: "max", Value: bson.MaxKey{}},
	}
	raw, err := bson.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if got := bsonSize(doc); got != len(raw) {
		t.Fatalf("bsonSize = %d, marshalled %d", got, len(raw))
	}
}

func TestShellString(t *testing.T) {
	cases := map[string]any{
		`"x"`: "x", `1`: int32(1), `2`: int64(2), `1.0`: 1.0, `1.5`: 1.5, `null`: nil,
		`{ a: 1, b: [ "x", true ] }`:           bson.D{{Key: "a", Value: int32(1)}, {Key: "b", Value: bson.A{"x", true}}},
		`ObjectId('000000000000000000000000')`: bson.ObjectID{},
	}
	for want, v := range cases {
		if got := shellString(v); got != want {
			t.Errorf("shellString(%v) = %s, want %s", v, got, want)
		}
	}
}
