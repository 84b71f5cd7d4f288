package fuzzdoc

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSetLeavesTheSeedAlone(t *testing.T) {
	seed := bson.D{{Key: "a", Value: bson.D{{Key: "b", Value: int32(1)}}}, {Key: "arr", Value: bson.A{int32(1), int32(2)}}}
	before, err := bson.Marshal(seed)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		path string
		want bson.D
	}{
		{"", seed},
		{"a.b", bson.D{{Key: "a", Value: bson.D{{Key: "b", Value: "x"}}}, {Key: "arr", Value: bson.A{int32(1), int32(2)}}}},
		{"a.c", bson.D{{Key: "a", Value: bson.D{{Key: "b", Value: int32(1)}, {Key: "c", Value: "x"}}}, {Key: "arr", Value: bson.A{int32(1), int32(2)}}}},
		{"arr.1", bson.D{{Key: "a", Value: bson.D{{Key: "b", Value: int32(1)}}}, {Key: "arr", Value: bson.A{int32(1), "x"}}}},
		{"arr.9", bson.D{{Key: "a", Value: bson.D{{Key: "b", Value: int32(1)}}}, {Key: "arr", Value: bson.A{int32(1), int32(2), "x"}}}},
		{"a.b.c", bson.D{{Key: "a", Value: bson.D{{Key: "b", Value: bson.D{{Key: "c", Value: "x"}}}}}, {Key: "arr", Value: bson.A{int32(1), int32(2)}}}},
	}
	for _, c := range cases {
		got, err := bson.Marshal(Set(seed, c.path, "x"))
		if err != nil {
			t.Fatal(err)
		}
		want, err := bson.Marshal(c.want)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("Set(%q) = %v, want %v", c.path, bson.Raw(got), bson.Raw(want))
		}
	}
	after, err := bson.Marshal(seed)
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Fatalf("Set changed its seed: %v, was %v", bson.Raw(after), bson.Raw(before))
	}
}

func TestValueKinds(t *testing.T) {
	seen := map[bson.Type]bool{}
	for kind := range uint8(12) {
		for n := range int64(5) {
			doc, err := bson.Marshal(bson.D{{Key: "v", Value: Value(kind, n, "1.5")}})
			if err != nil {
				t.Fatalf("kind %d n %d: %v", kind, n, err)
			}
			seen[bson.Raw(doc).Lookup("v").Type] = true
		}
	}
	if len(seen) < 14 {
		t.Fatalf("only %d BSON types: %v", len(seen), seen)
	}
}
