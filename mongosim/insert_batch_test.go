package mongosim

import (
	"context"
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// An insert writes its documents in batches of up to insertBatchMax under
// one hold of the collection's lock. These tests, with the official driver
// over TCP, check what the batches must not change: ordered inserts stop at
// the first error, unordered ones report every error in statement order,
// and a document held by an uncommitted transaction waits for it without
// losing or repeating the documents around it.

func batchDocs(n int, ids ...int) []any {
	docs := make([]any, n)
	for i := range docs {
		id := i
		if i < len(ids) {
			id = ids[i]
		}
		docs[i] = bson.D{{Key: "_id", Value: int32(id)}, {Key: "i", Value: int32(i)}}
	}
	return docs
}

func TestInsertBatchesKeepStatementOrder(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("batches")

	// Ordered, 200 documents, the 101st repeats the 11th's _id: 100
	// inserted, one error at index 100, nothing after it.
	docs := batchDocs(200)
	docs[100] = bson.D{{Key: "_id", Value: int32(10)}}
	_, err := db.Collection("ordered").InsertMany(ctx, docs)
	var bwe mongo.BulkWriteException
	if !errors.As(err, &bwe) || len(bwe.WriteErrors) != 1 || bwe.WriteErrors[0].Index != 100 || bwe.WriteErrors[0].Code != 11000 {
		t.Fatalf("ordered insert with a duplicate at 100: %v", err)
	}
	if n, err := db.Collection("ordered").CountDocuments(ctx, bson.D{}); err != nil || n != 100 {
		t.Errorf("ordered: %d documents stored (%v), want 100", n, err)
	}

	// Unordered: duplicates at 70 and 150, and a document whose _id is an
	// array (refused before it reaches the collection) at 71.
	docs = batchDocs(200)
	docs[70] = bson.D{{Key: "_id", Value: int32(3)}}
	docs[71] = bson.D{{Key: "_id", Value: bson.A{int32(1)}}}
	docs[150] = bson.D{{Key: "_id", Value: int32(149)}}
	_, err = db.Collection("unordered").InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
	if !errors.As(err, &bwe) || len(bwe.WriteErrors) != 3 {
		t.Fatalf("unordered insert with three bad documents: %v", err)
	}
	for k, want := range []int{70, 71, 150} {
		if got := bwe.WriteErrors[k].Index; got != want {
			t.Errorf("write error %d is for document %d, want %d", k, got, want)
		}
	}
	if n, err := db.Collection("unordered").CountDocuments(ctx, bson.D{}); err != nil || n != 197 {
		t.Errorf("unordered: %d documents stored (%v), want 197", n, err)
	}
}

func TestInsertBatchWaitsForTransactionHoldingADocument(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("batches").Collection("held")
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: int32(-1)}}) // the collection exists
	sdNoErr(t, err)

	sess, err := client.StartSession()
	sdNoErr(t, err)
	defer sess.EndSession(context.Background())
	sdNoErr(t, sess.StartTransaction())
	sctx := mongo.NewSessionContext(ctx, sess)
	_, err = coll.InsertOne(sctx, bson.D{{Key: "_id", Value: int32(130)}, {Key: "txn", Value: true}})
	sdNoErr(t, err)

	done := make(chan error, 1)
	go func() {
		r, err := coll.InsertMany(ctx, batchDocs(200))
		if err == nil && len(r.InsertedIDs) != 200 {
			err = errors.New("not every document inserted")
		}
		done <- err
	}()
	// Documents 0..129 go in; 130 waits for the transaction.
	for {
		n, err := coll.CountDocuments(ctx, bson.D{})
		sdNoErr(t, err)
		if n == 131 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("insertMany finished while the transaction held document 130: %v", err)
		default:
		}
	}
	sdNoErr(t, sess.AbortTransaction(ctx))
	sdNoErr(t, <-done)
	n, err := coll.CountDocuments(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: int32(0)}}}})
	sdNoErr(t, err)
	if n != 200 {
		t.Errorf("%d documents after the transaction aborted, want 200", n)
	}
	if err := coll.FindOne(ctx, bson.D{{Key: "txn", Value: true}}).Err(); !errors.Is(err, mongo.ErrNoDocuments) {
		t.Errorf("the aborted transaction's document: %v", err)
	}
}

// watchInserts opens a change stream on coll and returns a function that
// reads the next n events as (operationType, _id, clusterTime).
func watchInserts(ctx context.Context, t *testing.T, coll *mongo.Collection, opts ...options.Lister[options.ChangeStreamOptions]) func(n int) []batchEvent {
	t.Helper()
	cs, err := coll.Watch(ctx, mongo.Pipeline{}, opts...)
	sdNoErr(t, err)
	t.Cleanup(func() { _ = cs.Close(context.Background()) })
	return func(n int) []batchEvent {
		t.Helper()
		out := make([]batchEvent, n)
		for i := range out {
			ev := nextEvent(ctx, t, cs)
			at := bson.Raw(ev).Lookup("clusterTime")
			tt, ti, ok := at.TimestampOK()
			if !ok {
				t.Fatalf("event without a clusterTime: %v", ev)
			}
			if _, ok := bson.Raw(ev).Lookup("wallTime").DateTimeOK(); !ok {
				t.Fatalf("event without a wallTime: %v", ev)
			}
			id, _ := bson.Raw(ev).Lookup("documentKey", "_id").Int32OK()
			out[i] = batchEvent{op: ev.get("operationType").(string), id: id, at: bson.Timestamp{T: tt, I: ti}}
		}
		return out
	}
}

type batchEvent struct {
	op string
	id int32
	at bson.Timestamp
}

// checkEvents checks that events are op events for ids, in order, with
// cluster times strictly increasing.
func checkEvents(t *testing.T, what string, got []batchEvent, op string, ids []int32) {
	t.Helper()
	for k, ev := range got {
		if ev.op != op || ev.id != ids[k] {
			t.Fatalf("%s: event %d is %s of %d, want %s of %d", what, k, ev.op, ev.id, op, ids[k])
		}
		if k > 0 && !got[k-1].at.Before(ev.at) {
			t.Fatalf("%s: event %d's clusterTime %v is not after the one before, %v", what, k, ev.at, got[k-1].at)
		}
	}
}

func idRange(from, to int, skip ...int) []int32 {
	var out []int32
next:
	for i := from; i < to; i++ {
		for _, s := range skip {
			if i == s {
				continue next
			}
		}
		out = append(out, int32(i))
	}
	return out
}

// An insert logs its batch's change events together: they must still be
// one event per stored document, in statement order, each with its own
// cluster time, a duplicate in an ordered insert ending them and one in an
// unordered insert leaving a gap; the reply's operationTime covers them,
// and a stream started at one event's cluster time begins at that event.
func TestInsertBatchChangeEvents(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("batches").Collection("events")
	next := watchInserts(ctx, t, coll)

	// Ordered, 150 documents (three batches), the 101st repeats _id 10.
	docs := batchDocs(150)
	docs[100] = bson.D{{Key: "_id", Value: int32(10)}}
	sess, err := client.StartSession()
	sdNoErr(t, err)
	defer sess.EndSession(context.Background())
	_, err = coll.InsertMany(mongo.NewSessionContext(ctx, sess), docs)
	var bwe mongo.BulkWriteException
	if !errors.As(err, &bwe) || len(bwe.WriteErrors) != 1 || bwe.WriteErrors[0].Index != 100 {
		t.Fatalf("ordered insert with a duplicate at 100: %v", err)
	}
	ordered := next(100)
	checkEvents(t, "ordered", ordered, "insert", idRange(0, 100))
	if opTime := sess.OperationTime(); opTime == nil || opTime.Before(ordered[99].at) {
		t.Errorf("the insert's operationTime %v is before its last event's clusterTime %v", opTime, ordered[99].at)
	}

	// Unordered, _id 100..249 with repeats of stored ids at 120 and 200
	// (positions 20 and 100): every other document has its event, in order.
	docs = batchDocs(150)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: int32(100 + i)}}
	}
	docs[20] = bson.D{{Key: "_id", Value: int32(5)}}
	docs[100] = bson.D{{Key: "_id", Value: int32(6)}}
	_, err = coll.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
	if !errors.As(err, &bwe) || len(bwe.WriteErrors) != 2 || bwe.WriteErrors[0].Index != 20 || bwe.WriteErrors[1].Index != 100 {
		t.Fatalf("unordered insert with duplicates at 20 and 100: %v", err)
	}
	unordered := next(148)
	checkEvents(t, "unordered", unordered, "insert", idRange(100, 250, 120, 200))
	if !ordered[99].at.Before(unordered[0].at) {
		t.Errorf("the second insert's first event %v is not after the first's last %v", unordered[0].at, ordered[99].at)
	}

	// A stream starting at the 70th event's cluster time sees it first.
	from := watchInserts(ctx, t, coll, options.ChangeStream().SetStartAtOperationTime(&ordered[69].at))
	if got := from(3); got[0].id != 69 || got[1].id != 70 || got[2].id != 71 {
		t.Errorf("a stream started at event 69's clusterTime reads %v", got)
	}
}

// A capped collection evicts its oldest document as each insert of a batch
// overflows it: every eviction's delete event follows the insert that
// caused it, as when the documents are inserted one by one.
func TestInsertBatchCappedEventsInterleave(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("batches")
	sdNoErr(t, db.CreateCollection(ctx, "capped", options.CreateCollection().SetCapped(true).SetSizeInBytes(1<<20).SetMaxDocuments(5)))
	coll := db.Collection("capped")
	next := watchInserts(ctx, t, coll)
	_, err := coll.InsertMany(ctx, batchDocs(10))
	sdNoErr(t, err)
	got := next(15)
	checkEvents(t, "first five", got[:5], "insert", idRange(0, 5))
	for k := 5; k < 10; k++ {
		ins, del := got[5+2*(k-5)], got[6+2*(k-5)]
		if ins.op != "insert" || ins.id != int32(k) || del.op != "delete" || del.id != int32(k-5) {
			t.Fatalf("after the first five: %v then %v, want insert of %d then delete of %d", ins, del, k, k-5)
		}
		if !got[4+2*(k-5)].at.Before(ins.at) || !ins.at.Before(del.at) {
			t.Fatalf("cluster times out of order around document %d: %v", k, got)
		}
	}
	var left []int32
	cur, err := coll.Find(ctx, bson.D{})
	sdNoErr(t, err)
	for cur.Next(ctx) {
		left = append(left, cur.Current.Lookup("_id").Int32())
	}
	sdNoErr(t, cur.Err())
	if len(left) != 5 || left[0] != 5 || left[4] != 9 {
		t.Errorf("capped collection holds %v, want 5..9", left)
	}
}

// A retried insert replays the statements the first attempt applied: a
// failCommand writeConcernError (after the write, labelled retryable) makes
// the driver send the same 200 documents again, and the server answers
// them from its statement table instead of reporting duplicates.
func TestInsertBatchRetryReplaysStatements(t *testing.T) {
	client, _ := specClient(t, true)
	ctx := sdCtx(t)
	coll := client.Database("batches").Collection("retried")
	fp := bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: int32(1)}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"insert"}},
			{Key: "writeConcernError", Value: bson.D{{Key: "code", Value: int32(91)}, {Key: "errmsg", Value: "shutting down"},
				{Key: "errorLabels", Value: bson.A{"RetryableWriteError"}}}}}}}
	sdNoErr(t, client.Database("admin").RunCommand(ctx, fp).Err())
	r, err := coll.InsertMany(ctx, batchDocs(200))
	if err != nil || len(r.InsertedIDs) != 200 {
		t.Fatalf("retried insertMany: %v", err)
	}
	if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != 200 {
		t.Errorf("%d documents after the retried insert (%v), want 200", n, err)
	}
}

// An insert stores a document with _id first and one _id only: a document
// sent with _id later is reordered, one with a second _id keeps the first,
// one sent as it must be stored is stored as sent.
func TestInsertBatchStoresIDFirst(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("batches").Collection("idfirst")
	docs := []any{
		bson.D{{Key: "a", Value: int32(1)}, {Key: "_id", Value: int32(1)}},
		bson.D{{Key: "_id", Value: int32(2)}, {Key: "a", Value: int32(2)}, {Key: "_id", Value: int32(99)}},
		bson.D{{Key: "_id", Value: int32(3)}, {Key: "a", Value: bson.D{{Key: "b", Value: bson.A{int32(3)}}}}},
	}
	_, err := coll.InsertMany(ctx, docs)
	sdNoErr(t, err)
	cur, err := coll.Find(ctx, bson.D{})
	sdNoErr(t, err)
	var got []string
	for cur.Next(ctx) {
		got = append(got, cur.Current.String())
	}
	sdNoErr(t, cur.Err())
	want := []string{`{"_id": {"$numberInt":"1"},"a": {"$numberInt":"1"}}`, `{"_id": {"$numberInt":"2"},"a": {"$numberInt":"2"}}`,
		`{"_id": {"$numberInt":"3"},"a": {"b": [{"$numberInt":"3"}]}}`}
	if len(got) != len(want) {
		t.Fatalf("stored %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("document %d stored as %s, want %s", i, got[i], want[i])
		}
	}
}
