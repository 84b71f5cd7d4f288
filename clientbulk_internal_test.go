package sturdy

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// FuzzClientBulkWriteReply feeds arbitrary bytes as a bulkWrite reply to
// the code that reads its counts and its results cursor: it must not
// panic, and every write error or result it records must name a model of
// the batch.
func FuzzClientBulkWriteReply(f *testing.F) {
	seed := func(results bson.A) {
		b, err := bson.Marshal(bson.D{
			{Key: "cursor", Value: bson.D{{Key: "id", Value: int64(0)}, {Key: "ns", Value: "admin.$cmd.bulkWrite"}, {Key: "firstBatch", Value: results}}},
			{Key: "nErrors", Value: int32(1)}, {Key: "nInserted", Value: int32(1)}, {Key: "nMatched", Value: int32(1)},
			{Key: "nModified", Value: int32(1)}, {Key: "nUpserted", Value: int32(1)}, {Key: "nDeleted", Value: int32(1)}, {Key: "ok", Value: 1.0}})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	seed(bson.A{})
	seed(bson.A{
		bson.D{{Key: "ok", Value: 1.0}, {Key: "idx", Value: int32(0)}, {Key: "n", Value: int32(1)}},
		bson.D{{Key: "ok", Value: 1.0}, {Key: "idx", Value: int32(1)}, {Key: "n", Value: int32(1)}, {Key: "nModified", Value: int32(0)},
			{Key: "upserted", Value: bson.D{{Key: "_id", Value: "u"}}}},
		bson.D{{Key: "ok", Value: 0.0}, {Key: "idx", Value: int64(2)}, {Key: "code", Value: int32(11000)}, {Key: "errmsg", Value: "dup"},
			{Key: "errInfo", Value: bson.D{{Key: "k", Value: 1}}}},
	})
	seed(bson.A{bson.D{{Key: "ok", Value: 1}, {Key: "idx", Value: 9.5}}, bson.D{{Key: "idx", Value: int32(-1)}}})

	f.Fuzz(func(t *testing.T, reply []byte) {
		batch := []clientOp{{kind: kindInsert, id: 1}, {kind: kindUpdate}, {kind: kindDelete}}
		const start = 10
		w := &clientBulk{verbose: true, res: &ClientBulkWriteResult{
			InsertResults: map[int]ClientInsertResult{}, UpdateResults: map[int]ClientUpdateResult{}, DeleteResults: map[int]ClientDeleteResult{}}}
		w.addCounts(reply)
		_, _, docs, err := cursorBatch(reply)
		if err != nil {
			return
		}
		for {
			item, ok := docs.next()
			if !ok {
				break
			}
			i, _, err := w.addItem(batch, start, item)
			if err == nil && (i < 0 || i >= len(batch)) {
				t.Fatalf("accepted op index %d of a batch of %d", i, len(batch))
			}
		}
		inBatch := func(m int) {
			if m < start || m >= start+len(batch) {
				t.Fatalf("recorded model %d outside the batch [%d, %d)", m, start, start+len(batch))
			}
		}
		for m := range w.exc.WriteErrors {
			inBatch(m)
		}
		for m := range w.res.InsertResults {
			inBatch(m)
		}
		for m := range w.res.UpdateResults {
			inBatch(m)
		}
		for m := range w.res.DeleteResults {
			inBatch(m)
		}
	})
}
