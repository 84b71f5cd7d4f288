package sturdy

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestCursorBatchWalksInPlace checks the in-place batch walker against the
// documents it was given, and its refusal of batches holding anything but
// documents.
func TestCursorBatchWalksInPlace(t *testing.T) {
	mk := func(batch bson.A) bson.Raw {
		b, err := bson.Marshal(bson.D{{Key: "cursor", Value: bson.D{
			{Key: "nextBatch", Value: batch}, {Key: "id", Value: int64(42)}, {Key: "ns", Value: "db.c"}}}, {Key: "ok", Value: 1.0}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var batch bson.A
	for i := range 1500 { // keys of four digits too
		batch = append(batch, bson.D{{Key: "i", Value: int32(i)}})
	}
	id, ns, b, err := cursorBatch(mk(batch))
	if err != nil || id != 42 || string(ns) != "db.c" || b.n != len(batch) {
		t.Fatalf("cursorBatch = %d, %q, %d documents, %v", id, ns, b.n, err)
	}
	for i := range batch {
		doc, ok := b.next()
		if !ok {
			t.Fatalf("batch ended after %d documents", i)
		}
		if got := doc.Lookup("i").Int32(); got != int32(i) {
			t.Fatalf("document %d has i %d", i, got)
		}
		if cap(doc) != len(doc) {
			t.Fatalf("document %d can be appended over its neighbour", i)
		}
	}
	if _, ok := b.next(); ok || b.n != 0 {
		t.Error("batch did not end")
	}
	if _, _, b, err := cursorBatch(mk(bson.A{})); err != nil || b.n != 0 {
		t.Errorf("empty batch: %d documents, %v", b.n, err)
	}
	for _, bad := range []bson.A{{bson.D{}, int32(1)}, {"x"}, {bson.A{}}} {
		if _, _, _, err := cursorBatch(mk(bad)); err == nil {
			t.Errorf("batch %v accepted", bad)
		}
	}
}
