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
