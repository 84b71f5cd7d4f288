package sturdy_test

import (
	"errors"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/blackpipe"
)

// scriptedWrites is a blackpipe handler answering write commands: every
// insert batch fails its second statement with a duplicate key error; an
// update reports its first statement upserted.
type scriptedWrites struct {
	mu      sync.Mutex
	batches [][]int32 // _ids of each insert batch, in arrival order
	updates int
}

func (s *scriptedWrites) handle(r *blackpipe.Request) bool {
	switch r.Name {
	case "insert":
		var ids []int32
		for _, seq := range r.Sequences {
			for _, doc := range seq.Documents {
				ids = append(ids, doc.Lookup("_id").Int32())
			}
		}
		s.mu.Lock()
		s.batches = append(s.batches, ids)
		s.mu.Unlock()
		if len(ids) < 2 {
			_ = r.Reply(bson.D{{Key: "n", Value: int32(len(ids))}})
			return true
		}
		_ = r.ReplyWriteErrors(int32(len(ids)-1), blackpipe.WriteError{Index: 1, Code: 11000, Message: "E11000 duplicate key"})
		return true
	case "update":
		s.mu.Lock()
		s.updates++
		s.mu.Unlock()
		_ = r.Reply(bson.D{{Key: "n", Value: int32(1)}, {Key: "nModified", Value: int32(0)},
			{Key: "upserted", Value: bson.A{bson.D{{Key: "index", Value: int32(0)}, {Key: "_id", Value: "u"}}}}})
		return true
	}
	return false
}

func TestBulkWriteIndexMappingBlackpipe(t *testing.T) {
	ctx := testCtx(t)
	script := &scriptedWrites{}
	srv := blackpipe.StartWithOptions(t, blackpipe.Options{
		Hello:   bson.D{{Key: "maxWriteBatchSize", Value: int32(2)}},
		Handler: script.handle,
	})
	c := connect(t, srv.URI(), nil)
	coll := c.Database("db").Collection("c")
	models := []sturdy.WriteModel{
		&sturdy.InsertOneModel{Document: d("_id", int32(0))},
		&sturdy.InsertOneModel{Document: d("_id", int32(1))},
		&sturdy.InsertOneModel{Document: d("_id", int32(2))},
		&sturdy.InsertOneModel{Document: d("_id", int32(3))},
		&sturdy.InsertOneModel{Document: d("_id", int32(4))},
		&sturdy.UpdateOneModel{Filter: d("k", 1), Update: d("$set", d("v", 1)), Upsert: true},
		&sturdy.InsertOneModel{Document: d("_id", int32(6))},
	}

	// Unordered: all inserts share commands of at most 2 statements; the
	// second statement of each fails, reported by model index.
	_, err := coll.BulkWrite(ctx, models, &sturdy.BulkWriteOptions{Ordered: ptr(false)})
	var bwe *sturdy.BulkWriteException
	if !errors.As(err, &bwe) {
		t.Fatalf("unordered: %v", err)
	}
	var idx []int
	for _, we := range bwe.WriteErrors {
		idx = append(idx, we.Index)
		if we.Model != models[we.Index] {
			t.Errorf("write error %d names the wrong model", we.Index)
		}
	}
	if len(idx) != 3 || idx[0] != 1 || idx[1] != 3 || idx[2] != 6 {
		t.Fatalf("write error indexes %v, want [1 3 6]", idx)
	}
	if got := script.batches; len(got) != 3 || len(got[0]) != 2 || got[2][0] != 4 || got[2][1] != 6 {
		t.Fatalf("insert batches %v, want [[0 1] [2 3] [4 6]]", got)
	}
	pr := bwe.PartialResult
	if pr.InsertedCount != 3 || pr.UpsertedCount != 1 || pr.UpsertedIDs[5] != "u" || script.updates != 1 {
		t.Fatalf("partial result %+v (updates %d)", pr, script.updates)
	}
	if !sturdy.IsDuplicateKey(err) {
		t.Fatal("IsDuplicateKey false for a bulk duplicate")
	}

	// Ordered: the first failing batch stops the write.
	script.batches, script.updates = nil, 0
	_, err = coll.BulkWrite(ctx, models, nil)
	if !errors.As(err, &bwe) || len(bwe.WriteErrors) != 1 || bwe.WriteErrors[0].Index != 1 {
		t.Fatalf("ordered: %v", err)
	}
	if len(script.batches) != 1 || script.updates != 0 || bwe.PartialResult.InsertedCount != 1 {
		t.Fatalf("ordered sent %v batches and %d updates", script.batches, script.updates)
	}
}

func TestWriteErrorsBlackpipe(t *testing.T) {
	ctx := testCtx(t)
	srv := blackpipe.StartWithOptions(t, blackpipe.Options{Handler: func(r *blackpipe.Request) bool {
		switch r.Name {
		case "insert":
			_ = r.ReplyWriteConcernError(1, blackpipe.WriteConcernError{Code: 64, Message: "waiting for replication timed out"})
			return true
		case "delete":
			_ = r.ReplyError(13, "not authorized")
			return true
		}
		return false
	}})
	rec := &recorder{}
	c := connect(t, srv.URI(), func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	coll := c.Database("db").Collection("c")

	_, err := coll.InsertOne(ctx, d("a", 1), nil)
	var we *sturdy.WriteException
	if !errors.As(err, &we) || we.WriteConcernError == nil || we.WriteConcernError.Code != 64 {
		t.Fatalf("write concern error: %v", err)
	}
	_, err = coll.InsertMany(ctx, []any{d("a", 1), d("a", 2)}, nil)
	var bwe *sturdy.BulkWriteException
	if !errors.As(err, &bwe) || bwe.WriteConcernError == nil || bwe.PartialResult.InsertedCount != 1 {
		t.Fatalf("InsertMany write concern error: %v", err)
	}
	_, err = coll.DeleteMany(ctx, nil, nil)
	var ce *sturdy.CommandError
	if !errors.As(err, &ce) || ce.Code != 13 {
		t.Fatalf("command error: %v", err)
	}
	// A standalone does not support retryable writes: no txnNumber.
	for _, e := range rec.startedNamed("insert") {
		if e.TxnNumber != nil {
			t.Fatal("txnNumber sent to a standalone")
		}
	}
}
