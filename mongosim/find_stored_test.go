package mongosim

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// A find without sort or projection answers with the stored documents'
// cached encodings. These tests prove, with the official driver over TCP,
// that a write never reaches a result already read (a cursor keeps the
// documents as they were when the find ran), that the next find sees the
// write (the cache is dropped with the document it encoded), and that
// concurrent updates and finds are race-free and never show a half-applied
// update.

func TestFindStoredDocumentsAfterWrites(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("stored").Collection("c")
	const n = 20
	docs := make([]any, n)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: int32(i)}, {Key: "n", Value: int32(0)}, {Key: "sub", Value: bson.D{{Key: "a", Value: bson.A{int32(1), int32(2)}}}}}
	}
	_, err := coll.InsertMany(ctx, docs)
	sdNoErr(t, err)
	want := func(id, n int32, a ...int32) bson.D {
		arr := bson.A{}
		for _, x := range a {
			arr = append(arr, x)
		}
		return bson.D{{Key: "_id", Value: id}, {Key: "n", Value: n}, {Key: "sub", Value: bson.D{{Key: "a", Value: arr}}}}
	}

	// A first find encodes (and caches) every document.
	if got := sdFindAll(t, ctx, coll, bson.D{}); len(got) != n {
		t.Fatalf("first find: %d documents", len(got))
	}
	// A cursor that has handed out 2 documents and holds the other 18.
	cur, err := coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(2))
	sdNoErr(t, err)
	defer func() { _ = cur.Close(ctx) }()

	_, err = coll.UpdateMany(ctx, bson.D{}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: int32(1)}}}, {Key: "$push", Value: bson.D{{Key: "sub.a", Value: int32(3)}}}})
	sdNoErr(t, err)
	_, err = coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: int32(5)}}, bson.D{{Key: "n", Value: int32(50)}, {Key: "sub", Value: bson.D{{Key: "a", Value: bson.A{}}}}})
	sdNoErr(t, err)
	_, err = coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: int32(7)}})
	sdNoErr(t, err)

	// The open cursor's documents are those of its find.
	i := int32(0)
	for cur.Next(ctx) {
		var got bson.D
		sdNoErr(t, bson.Unmarshal(cur.Current, &got))
		if w := want(i, 0, 1, 2); fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("cursor document %d = %v, want %v (as it was when the find ran)", i, got, w)
		}
		i++
	}
	sdNoErr(t, cur.Err())
	if i != n {
		t.Errorf("cursor returned %d documents, want %d", i, n)
	}

	// A new find sees every write.
	got := sdFindAll(t, ctx, coll, bson.D{})
	if len(got) != n-1 {
		t.Fatalf("find after the writes: %d documents, want %d", len(got), n-1)
	}
	for _, d := range got {
		id := d[0].Value.(int32)
		w := want(id, 1, 1, 2, 3)
		if id == 5 {
			w = want(5, 50)
		}
		if id == 7 {
			t.Errorf("deleted document 7 found: %v", d)
		}
		if fmt.Sprint(d) != fmt.Sprint(w) {
			t.Errorf("after the writes: %v, want %v", d, w)
		}
	}
	// skip and limit on the stored documents, and a filter.
	got = sdFindAll(t, ctx, coll, bson.D{{Key: "n", Value: int32(1)}}, options.Find().SetSkip(3).SetLimit(4))
	if len(got) != 4 || got[0][0].Value != int32(3) || got[3][0].Value != int32(8) {
		t.Errorf("skip 3 limit 4 of n: 1 = %v, want _id 3, 4, 6, 8", got)
	}
}

func TestFindStoredDocumentsConcurrentUpdates(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("stored").Collection("race")
	const n = 200
	docs := make([]any, n)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: int32(i)}, {Key: "a", Value: int32(0)}, {Key: "b", Value: int32(0)}}
	}
	_, err := coll.InsertMany(ctx, docs)
	sdNoErr(t, err)

	wctx, stopWriters := context.WithCancel(ctx)
	defer stopWriters()
	var writers, readers sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 2 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := 0; wctx.Err() == nil; i++ {
				id := int32((i*7 + w) % n)
				// a and b move together: a find must never see them apart.
				upd := bson.D{{Key: "$inc", Value: bson.D{{Key: "a", Value: int32(1)}, {Key: "b", Value: int32(1)}}}}
				if _, err := coll.UpdateOne(wctx, bson.D{{Key: "_id", Value: id}}, upd); err != nil && wctx.Err() == nil {
					errs <- err
					return
				}
			}
		}()
	}
	check := func() error {
		cur, err := coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(50))
		if err != nil {
			return err
		}
		defer func() { _ = cur.Close(ctx) }()
		seen := 0
		for cur.Next(ctx) {
			var d struct{ A, B int32 }
			if err := bson.Unmarshal(cur.Current, &d); err != nil {
				return err
			}
			if d.A != d.B {
				return fmt.Errorf("document %s: a %d != b %d", cur.Current, d.A, d.B)
			}
			seen++
		}
		if err := cur.Err(); err != nil {
			return err
		}
		if seen != n {
			return fmt.Errorf("find returned %d documents, want %d", seen, n)
		}
		return nil
	}
	for range 3 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for range 30 {
				if err := check(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	readers.Wait()
	stopWriters()
	writers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var last struct{ A, B int32 }
	sdNoErr(t, coll.FindOne(ctx, bson.D{{Key: "_id", Value: int32(0)}}).Decode(&last))
	if last.A == 0 || last.A != last.B {
		t.Errorf("document 0 after the updates: a %d, b %d; want equal and updated", last.A, last.B)
	}
}
