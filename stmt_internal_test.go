package sturdy

import (
	"bytes"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestPlainStmtMatchesTheEncoder: the hand-encoded statement is byte for
// byte what bson.Marshal makes of the same fields.
func TestPlainStmtMatchesTheEncoder(t *testing.T) {
	q, err := toDoc(bson.D{{Key: "_id", Value: int32(7)}}, true)
	if err != nil {
		t.Fatal(err)
	}
	update, err := updateValue(bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: int32(1)}}}})
	if err != nil {
		t.Fatal(err)
	}
	pipeline, err := updateValue(bson.A{bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: "x"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	replacement, err := replacementDoc(bson.D{{Key: "a", Value: int64(2)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []any{update, pipeline, replacement} {
		for _, multi := range []bool{false, true} {
			for _, upsert := range []bool{false, true} {
				got, err := stmtDoc(q, u, multi, upsert, nil, nil, nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				want := bson.D{{Key: "q", Value: q}, {Key: "u", Value: u}}
				if upsert {
					want = append(want, bson.E{Key: "upsert", Value: true})
				}
				if multi {
					want = append(want, bson.E{Key: "multi", Value: true})
				}
				wantRaw, err := bson.Marshal(want)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, wantRaw) {
					t.Errorf("u %T multi %v upsert %v:\n got %v\nwant %v", u, multi, upsert, bson.Raw(got), bson.Raw(wantRaw))
				}
			}
		}
	}
}

// TestToDocWithIDEncodesInPlace: a bson.D without _id comes out as the
// encoder's bytes behind a new ObjectID _id, which is the id returned; one
// with an _id keeps it.
func TestToDocWithIDEncodesInPlace(t *testing.T) {
	d := bson.D{{Key: "x", Value: int32(1)}, {Key: "s", Value: "hello world"}, {Key: "sub", Value: bson.D{{Key: "a", Value: bson.A{1, "b"}}}}}
	got, id, err := toDocWithID(nil, d)
	if err != nil {
		t.Fatal(err)
	}
	oid, ok := id.(bson.ObjectID)
	if !ok {
		t.Fatalf("id is %T, want an ObjectID", id)
	}
	want, err := bson.Marshal(append(bson.D{{Key: "_id", Value: oid}}, d...))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("got %v\nwant %v", got, bson.Raw(want))
	}

	withID := bson.D{{Key: "x", Value: int32(1)}, {Key: "_id", Value: "mine"}}
	got, id, err = toDocWithID(nil, withID)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := bson.Marshal(withID); !bytes.Equal(got, want) || id != "mine" {
		t.Errorf("with _id: got %v and id %v", got, id)
	}
}
