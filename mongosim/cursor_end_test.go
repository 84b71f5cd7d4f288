package mongosim

import (
	"context"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	drvevent "go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// getMoreLog records the cursor ids and batch lengths of the getMore
// replies a client saw.
type getMoreLog struct {
	mu      sync.Mutex
	batches []int
	ids     []int64
}

func (g *getMoreLog) monitor() *drvevent.CommandMonitor {
	return &drvevent.CommandMonitor{Succeeded: func(_ context.Context, e *drvevent.CommandSucceededEvent) {
		if e.CommandName != "getMore" {
			return
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		arr, _ := e.Reply.Lookup("cursor", "nextBatch").Array().Values()
		g.batches = append(g.batches, len(arr))
		g.ids = append(g.ids, e.Reply.Lookup("cursor", "id").Int64())
	}}
}

func (g *getMoreLog) take() (batches []int, ids []int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	batches, ids = g.batches, g.ids
	g.batches, g.ids = nil, nil
	return batches, ids
}

// firstBatch runs a cursor command and returns its first batch's length
// and cursor id.
func firstBatch(t *testing.T, ctx context.Context, db *mongo.Database, cmd bson.D) (int, int64) {
	t.Helper()
	raw := mustRun(t, ctx, db, cmd)
	arr, _ := raw.Lookup("cursor", "firstBatch").Array().Values()
	return len(arr), raw.Lookup("cursor", "id").Int64()
}

// TestCursorEnds: as mongod's query and pipeline executors, find and
// aggregate learn that they are exhausted only when asked for one more
// document, so a batch that takes exactly the last documents leaves the
// cursor open and the next getMore answers an empty batch with id 0. A
// find whose limit the batch reaches, listCollections and listIndexes
// (queued results) close at once.
func TestCursorEnds(t *testing.T) {
	c := Start(t)
	ctx := testCtx(t)
	var log getMoreLog
	client := connect(t, c.URI(), options.Client().SetMonitor(log.monitor()))
	db := client.Database("ends")
	coll := db.Collection("c")
	docs := []bson.D{}
	for i := range 4 {
		docs = append(docs, bson.D{{Key: "_id", Value: i}})
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	drain := func(cur *mongo.Cursor, err error) int {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer cur.Close(ctx)
		n := 0
		for cur.Next(ctx) {
			n++
		}
		if cur.Err() != nil {
			t.Fatal(cur.Err())
		}
		return n
	}
	expect := func(what string, n, wantN int, wantBatches []int) {
		t.Helper()
		batches, ids := log.take()
		if n != wantN || len(batches) != len(wantBatches) {
			t.Fatalf("%s: %d documents, getMore batches %v (ids %v); want %d documents, batches %v", what, n, batches, ids, wantN, wantBatches)
		}
		for i := range batches {
			last := i == len(batches)-1
			if batches[i] != wantBatches[i] || (ids[i] == 0) != last {
				t.Fatalf("%s: getMore batches %v ids %v; want batches %v, id 0 only on the last", what, batches, ids, wantBatches)
			}
		}
	}

	n := drain(coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(2)))
	expect("find batchSize 2 of 4", n, 4, []int{2, 0})
	n = drain(coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(3)))
	expect("find batchSize 3 of 4", n, 4, []int{1})
	n = drain(coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(2).SetLimit(4)))
	expect("find limit 4 batchSize 2", n, 4, []int{2})
	n = drain(coll.Aggregate(ctx, bson.A{}, options.Aggregate().SetBatchSize(2)))
	expect("aggregate batchSize 2 of 4", n, 4, []int{2, 0})

	if n, id := firstBatch(t, ctx, db, bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 4}}); n != 4 || id == 0 {
		t.Fatalf("find batchSize 4 of 4: %d docs, id %d; want a live cursor", n, id)
	}
	if n, id := firstBatch(t, ctx, db, bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 4}, {Key: "limit", Value: 4}}); n != 4 || id != 0 {
		t.Fatalf("find limit 4 batchSize 4: %d docs, id %d; want id 0", n, id)
	}
	if n, id := firstBatch(t, ctx, db, bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 4}, {Key: "singleBatch", Value: true}}); n != 4 || id != 0 {
		t.Fatalf("find singleBatch: %d docs, id %d; want id 0", n, id)
	}
	if n, id := firstBatch(t, ctx, db, bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 10}}); n != 4 || id != 0 {
		t.Fatalf("find batchSize 10 of 4: %d docs, id %d; want id 0", n, id)
	}
	if n, id := firstBatch(t, ctx, db, bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{}}, {Key: "cursor", Value: bson.D{{Key: "batchSize", Value: 4}}}}); n != 4 || id == 0 {
		t.Fatalf("aggregate batchSize 4 of 4: %d docs, id %d; want a live cursor", n, id)
	}
	// batchSize 0: an empty first batch and a cursor, except for a
	// collection that does not exist (mongod's EOF plan).
	if err := db.CreateCollection(ctx, "empty"); err != nil {
		t.Fatal(err)
	}
	if n, id := firstBatch(t, ctx, db, bson.D{{Key: "find", Value: "empty"}, {Key: "batchSize", Value: 0}}); n != 0 || id == 0 {
		t.Fatalf("find batchSize 0 on an empty collection: %d docs, id %d; want a live cursor", n, id)
	}
	if n, id := firstBatch(t, ctx, db, bson.D{{Key: "find", Value: "missing"}, {Key: "batchSize", Value: 0}}); n != 0 || id != 0 {
		t.Fatalf("find batchSize 0 on a missing collection: %d docs, id %d; want id 0", n, id)
	}
	if n, id := firstBatch(t, ctx, db, bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 0}}); n != 0 || id == 0 {
		t.Fatalf("find batchSize 0: %d docs, id %d; want a live cursor", n, id)
	}
	// listCollections and listIndexes read a queue: id 0 with the last.
	if n, id := firstBatch(t, ctx, db, bson.D{{Key: "listCollections", Value: 1}, {Key: "cursor", Value: bson.D{{Key: "batchSize", Value: 2}}}}); n != 2 || id != 0 {
		t.Fatalf("listCollections batchSize 2 of 2: %d, id %d; want id 0", n, id)
	}
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "a", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	if n, id := firstBatch(t, ctx, db, bson.D{{Key: "listIndexes", Value: "c"}, {Key: "cursor", Value: bson.D{{Key: "batchSize", Value: 2}}}}); n != 2 || id != 0 {
		t.Fatalf("listIndexes batchSize 2 of 2: %d, id %d; want id 0", n, id)
	}
	n, _ = firstBatch(t, ctx, db, bson.D{{Key: "listIndexes", Value: "c"}, {Key: "cursor", Value: bson.D{{Key: "batchSize", Value: 1}}}})
	log.take()
	if n != 1 {
		t.Fatalf("listIndexes batchSize 1: %d", n)
	}
	cur, err := coll.Indexes().List(ctx, options.ListIndexes().SetBatchSize(1))
	n = drain(cur, err)
	expect("listIndexes batchSize 1 of 2", n, 2, []int{1})

	// A negative limit is refused, as by mongod 4.4+.
	err = db.RunCommand(ctx, bson.D{{Key: "find", Value: "c"}, {Key: "limit", Value: -1}}).Err()
	commandError(t, err, 51024)
}
