package sturdy_test

import (
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/mongosim"
)

func TestBulkWriteMixed(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	rec := &recorder{}
	c := connect(t, cluster.URI(), func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	coll := c.Database("db").Collection("bulk")

	models := []sturdy.WriteModel{
		&sturdy.InsertOneModel{Document: d("_id", 1, "x", 1)},
		&sturdy.InsertOneModel{Document: d("_id", 2, "x", 2)},
		&sturdy.UpdateOneModel{Filter: d("_id", 1), Update: d("$inc", d("x", 10))},
		&sturdy.UpdateOneModel{Filter: d("_id", 7), Update: d("$set", d("x", 7)), Upsert: true},
		sturdy.ReplaceOneModel{Filter: d("_id", 8), Replacement: d("x", 8), Upsert: true},
		&sturdy.UpdateManyModel{Filter: nil, Update: d("$set", d("y", true))},
		&sturdy.InsertOneModel{Document: d("_id", 3)},
		&sturdy.DeleteOneModel{Filter: d("_id", 2)},
		&sturdy.DeleteManyModel{Filter: d("x", d("$gte", 8))},
	}
	res, err := coll.BulkWrite(ctx, models, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := [...]int64{res.InsertedCount, res.MatchedCount, res.ModifiedCount, res.UpsertedCount, res.DeletedCount}
	if want := [...]int64{3, 1 + 4, 1 + 4, 2, 3}; got != want || !res.Acknowledged {
		t.Fatalf("inserted, matched, modified, upserted, deleted = %v, want %v", got, want)
	}
	if res.UpsertedIDs[3] != int32(7) || res.UpsertedIDs[4] != int32(8) || len(res.UpsertedIDs) != 2 {
		t.Fatalf("UpsertedIDs = %v: want model indexes 3 and 4", res.UpsertedIDs)
	}
	// Ordered: consecutive models of one kind share a command.
	var kinds []string
	for _, e := range rec.started {
		if e.CommandName == "insert" || e.CommandName == "update" || e.CommandName == "delete" {
			kinds = append(kinds, e.CommandName)
		}
	}
	if strings.Join(kinds, ",") != "insert,update,insert,delete" {
		t.Fatalf("commands %v", kinds)
	}
	// The update command with a multi: true statement carries no txnNumber;
	// the single-document ones do (retryable writes on a replica set).
	for _, e := range rec.startedNamed("update") {
		if e.TxnNumber != nil {
			t.Errorf("update command with UpdateManyModel has txnNumber %d", *e.TxnNumber)
		}
	}
	for _, e := range rec.startedNamed("insert") {
		if e.TxnNumber == nil {
			t.Errorf("insert command without txnNumber")
		}
	}
	for _, e := range rec.startedNamed("delete") {
		if e.TxnNumber != nil {
			t.Errorf("delete with a DeleteManyModel has txnNumber")
		}
	}
	// All commands of one BulkWrite share the operation id.
	ops := map[int64]bool{}
	for _, e := range rec.started {
		if e.CommandName == "insert" || e.CommandName == "update" || e.CommandName == "delete" {
			ops[e.OperationID] = true
		}
	}
	if len(ops) != 1 {
		t.Fatalf("bulk commands spread over operation ids %v", ops)
	}
}

func TestBulkWriteErrors(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	c := connect(t, cluster.URI(), nil)
	coll := c.Database("db").Collection("bulkerr")
	if _, err := coll.InsertOne(ctx, d("_id", 2), nil); err != nil {
		t.Fatal(err)
	}
	models := []sturdy.WriteModel{
		&sturdy.InsertOneModel{Document: d("_id", 1)},
		&sturdy.DeleteOneModel{Filter: d("_id", 100)},
		&sturdy.InsertOneModel{Document: d("_id", 2)}, // duplicate
		&sturdy.InsertOneModel{Document: d("_id", 3)},
		&sturdy.InsertOneModel{Document: d("_id", 1)}, // duplicate
		&sturdy.InsertOneModel{Document: d("_id", 4)},
	}

	// Ordered: stops at model 2.
	_, err := coll.BulkWrite(ctx, models, nil)
	var bwe *sturdy.BulkWriteException
	if !errors.As(err, &bwe) {
		t.Fatalf("ordered: %v", err)
	}
	if len(bwe.WriteErrors) != 1 || bwe.WriteErrors[0].Index != 2 || bwe.WriteErrors[0].Model != models[2] || bwe.WriteErrors[0].Code != 11000 {
		t.Fatalf("ordered write errors %+v", bwe.WriteErrors)
	}
	if bwe.PartialResult == nil || bwe.PartialResult.InsertedCount != 1 || !sturdy.IsDuplicateKey(err) {
		t.Fatalf("ordered partial result %+v", bwe.PartialResult)
	}
	if n, _ := coll.CountDocuments(ctx, nil, nil); n != 2 {
		t.Fatalf("after ordered bulk: %d documents, want 2", n)
	}

	// Unordered: every model runs; both duplicates reported by model index.
	_, err = coll.BulkWrite(ctx, models, &sturdy.BulkWriteOptions{Ordered: ptr(false)})
	if !errors.As(err, &bwe) {
		t.Fatalf("unordered: %v", err)
	}
	var idx []int
	for _, we := range bwe.WriteErrors {
		idx = append(idx, we.Index)
	}
	if len(idx) != 3 || idx[0] != 0 || idx[1] != 2 || idx[2] != 4 {
		t.Fatalf("unordered write error indexes %v, want [0 2 4]", idx)
	}
	if bwe.PartialResult.InsertedCount != 2 {
		t.Fatalf("unordered partial result %+v", bwe.PartialResult)
	}

	// InsertMany reports a BulkWriteException too, with all ids.
	res, err := coll.InsertMany(ctx, []any{d("_id", 10), d("_id", 3), d("_id", 11)}, &sturdy.InsertManyOptions{Ordered: ptr(false)})
	if !errors.As(err, &bwe) || len(bwe.WriteErrors) != 1 || bwe.WriteErrors[0].Index != 1 || res == nil || len(res.InsertedIDs) != 3 {
		t.Fatalf("InsertMany: %v %+v", err, res)
	}
}

func TestInsertManySplitsByCount(t *testing.T) {
	// The server advertises maxWriteBatchSize 100 (mongod's is 100 000):
	// the same split with 250 documents instead of 250 000, which took a
	// minute under -race on a loaded machine.
	ctx := testCtx(t)
	cluster := mongosim.StartWithOptions(t, mongosim.Options{MaxWriteBatchSize: 100})
	rec := &recorder{}
	c := connect(t, cluster.URI(), func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	coll := c.Database("db").Collection("many")
	const n = 250
	docs := make([]any, n)
	for i := range docs {
		docs[i] = bson.D{{Key: "i", Value: int32(i)}}
	}
	res, err := coll.InsertMany(ctx, docs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.InsertedIDs) != n {
		t.Fatalf("%d ids", len(res.InsertedIDs))
	}
	inserts := rec.startedNamed("insert")
	if len(inserts) != 3 {
		t.Fatalf("%d insert commands, want 3 (maxWriteBatchSize 100)", len(inserts))
	}
	sizes := []int{}
	for _, e := range inserts {
		arr, _ := commandField(e, "documents").ArrayOK()
		vals, _ := arr.Values()
		sizes = append(sizes, len(vals))
	}
	if sizes[0] != 100 || sizes[1] != 100 || sizes[2] != 50 {
		t.Fatalf("batch sizes %v", sizes)
	}
	if got, err := coll.EstimatedDocumentCount(ctx, nil); err != nil || got != n {
		t.Fatalf("count %d, %v", got, err)
	}
}

func TestInsertManySplitsByMessageSize(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	rec := &recorder{}
	c := connect(t, cluster.URI(), func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	coll := c.Database("db").Collection("big")
	// 60 documents of 1 MB: 60 MB, more than one 48 MB message.
	blob := strings.Repeat("x", 1<<20)
	docs := make([]any, 60)
	for i := range docs {
		docs[i] = d("_id", i, "blob", blob)
	}
	if _, err := coll.InsertMany(ctx, docs, nil); err != nil {
		t.Fatal(err)
	}
	inserts := rec.startedNamed("insert")
	if len(inserts) != 2 {
		t.Fatalf("%d insert commands, want 2", len(inserts))
	}
	total := 0
	for _, e := range inserts {
		total += len(e.Command)
		if len(e.Command) > 48_000_000 {
			t.Errorf("a command of %d bytes exceeds maxMessageSizeBytes", len(e.Command))
		}
	}
	if total < 60<<20 {
		t.Fatalf("commands carry %d bytes, want all 60 documents", total)
	}
	if n, err := coll.CountDocuments(ctx, nil, nil); err != nil || n != 60 {
		t.Fatalf("count %d, %v", n, err)
	}
}
