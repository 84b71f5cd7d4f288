package mongosim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// dataClient starts a mongosim replica set and connects the official
// driver to it; both are closed when the test ends.
func dataClient(t testing.TB) (*mongo.Client, *Cluster) {
	t.Helper()
	c := StartWithOptions(t, Options{})
	// A short heartbeat keeps the driver's Disconnect from waiting out a
	// monitor parked in an awaitable hello.
	client, err := mongo.Connect(options.Client().ApplyURI(c.URI()).SetHeartbeatInterval(500 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	return client, c
}

func sdCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func sdNoErr(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func sdWriteCodes(err error) []int {
	var codes []int
	var we mongo.WriteException
	var bwe mongo.BulkWriteException
	switch {
	case errors.As(err, &we):
		for _, e := range we.WriteErrors {
			codes = append(codes, e.Code)
		}
	case errors.As(err, &bwe):
		for _, e := range bwe.WriteErrors {
			codes = append(codes, e.Code)
		}
	}
	return codes
}

func sdCode(err error) int32 {
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return 0
}

func sdFindAll(t testing.TB, ctx context.Context, coll *mongo.Collection, filter any, opts ...options.Lister[options.FindOptions]) []bson.D {
	t.Helper()
	cur, err := coll.Find(ctx, filter, opts...)
	sdNoErr(t, err)
	var out []bson.D
	sdNoErr(t, cur.All(ctx, &out))
	return out
}

func TestInsertFindRoundTrip(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("app").Collection("people")

	res, err := coll.InsertOne(ctx, bson.D{{Key: "name", Value: "ann"}, {Key: "age", Value: 31}})
	sdNoErr(t, err)
	if _, ok := res.InsertedID.(bson.ObjectID); !ok {
		t.Fatalf("InsertedID = %T, want ObjectID", res.InsertedID)
	}
	_, err = coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 2}, {Key: "name", Value: "bob"}, {Key: "age", Value: 25}},
		bson.D{{Key: "name", Value: "cy"}, {Key: "_id", Value: 3}, {Key: "age", Value: 40}, {Key: "tags", Value: bson.A{"x", "y"}}},
	})
	sdNoErr(t, err)

	var got bson.D
	sdNoErr(t, coll.FindOne(ctx, bson.D{{Key: "_id", Value: 3}}).Decode(&got))
	if got[0].Key != "_id" || got[1].Key != "name" {
		t.Fatalf("_id must be stored first: %v", got)
	}
	// the stored document has the server-side _id first and keeps the rest
	var byName bson.M
	sdNoErr(t, coll.FindOne(ctx, bson.D{{Key: "name", Value: "ann"}}).Decode(&byName))
	if byName["_id"] != res.InsertedID || byName["age"] != int32(31) {
		t.Fatalf("got %v", byName)
	}

	docs := sdFindAll(t, ctx, coll, bson.D{{Key: "age", Value: bson.D{{Key: "$gte", Value: 25}}}},
		options.Find().SetSort(bson.D{{Key: "age", Value: -1}}).SetProjection(bson.D{{Key: "name", Value: 1}, {Key: "_id", Value: 0}}).SetSkip(1).SetLimit(5))
	want := []string{"ann", "bob"}
	if len(docs) != len(want) {
		t.Fatalf("got %v", docs)
	}
	for i, d := range docs {
		if len(d) != 1 || d[0].Value != want[i] {
			t.Fatalf("doc %d = %v, want name %s only", i, d, want[i])
		}
	}

	if err := coll.FindOne(ctx, bson.D{{Key: "name", Value: "nobody"}}).Err(); !errors.Is(err, mongo.ErrNoDocuments) {
		t.Fatalf("FindOne missing = %v", err)
	}
	// A missing collection reads as empty.
	if docs := sdFindAll(t, ctx, client.Database("app").Collection("nothing"), bson.D{}); len(docs) != 0 {
		t.Fatalf("missing collection returned %v", docs)
	}
}

func TestInsertErrors(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("db").Collection("coll")

	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
	sdNoErr(t, err)
	_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
	var we mongo.WriteException
	if !errors.As(err, &we) || len(we.WriteErrors) != 1 {
		t.Fatalf("want a write exception, got %v", err)
	}
	e := we.WriteErrors[0]
	if e.Code != 11000 || e.Message != "E11000 duplicate key error collection: db.coll index: _id_ dup key: { _id: 1 }" {
		t.Fatalf("dup key error = %d %q", e.Code, e.Message)
	}
	if !mongo.IsDuplicateKeyError(err) {
		t.Fatal("IsDuplicateKeyError = false")
	}
	if kp := e.Raw.Lookup("keyPattern"); kp.String() != `{"_id": {"$numberInt":"1"}}` {
		t.Fatalf("keyPattern = %s", kp)
	}
	if kv := e.Raw.Lookup("keyValue"); kv.String() != `{"_id": {"$numberInt":"1"}}` {
		t.Fatalf("keyValue = %s", kv)
	}
	// 1 and 1.0 are the same _id
	_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1.0}})
	if !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("1.0 after 1: %v", err)
	}

	// ordered insertMany stops at the first error; unordered goes on.
	batch := []any{bson.D{{Key: "_id", Value: 10}}, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 11}}}
	res, err := coll.InsertMany(ctx, batch)
	if codes := sdWriteCodes(err); len(codes) != 1 || codes[0] != 11000 {
		t.Fatalf("ordered: %v", err)
	}
	if n, _ := coll.CountDocuments(ctx, bson.D{{Key: "_id", Value: 11}}); n != 0 {
		t.Fatal("ordered insert went past the error")
	}
	_ = res
	batch = []any{bson.D{{Key: "_id", Value: 20}}, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 21}}, bson.D{{Key: "_id", Value: 20}}}
	_, err = coll.InsertMany(ctx, batch, options.InsertMany().SetOrdered(false))
	var bwe mongo.BulkWriteException
	if !errors.As(err, &bwe) || len(bwe.WriteErrors) != 2 || bwe.WriteErrors[0].Index != 1 || bwe.WriteErrors[1].Index != 3 {
		t.Fatalf("unordered: %v", err)
	}
	if n, _ := coll.CountDocuments(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{20, 21}}}}}); n != 2 {
		t.Fatalf("unordered inserted %d of 2", n)
	}

	// _id may not be an array
	_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: bson.A{1, 2}}})
	if codes := sdWriteCodes(err); len(codes) != 1 || codes[0] != 53 {
		t.Fatalf("array _id: %v", err)
	}
	// documents over 16 MiB are refused
	big := strings.Repeat("x", 16*1024*1024)
	db := client.Database("db")
	err = db.RunCommand(ctx, bson.D{{Key: "insert", Value: "coll"}, {Key: "documents", Value: bson.A{bson.D{{Key: "big", Value: big}}}}}).Err()
	if err == nil {
		var reply bson.M
		_ = db.RunCommand(ctx, bson.D{{Key: "insert", Value: "coll"}, {Key: "documents", Value: bson.A{bson.D{{Key: "big", Value: big}}}}}).Decode(&reply)
		we, _ := reply["writeErrors"].(bson.A)
		if len(we) != 1 || we[0].(bson.D)[1].Value != int32(10334) {
			t.Fatalf("16 MiB document: %v", reply["writeErrors"])
		}
	} else if !strings.Contains(err.Error(), "10334") && !strings.Contains(err.Error(), "too large") {
		t.Fatalf("16 MiB document: %v", err)
	}
	// invalid namespaces
	err = client.Database("db").Collection("a$b").FindOne(ctx, bson.D{}).Err()
	if sdCode(err) != 73 {
		t.Fatalf("a$b: %v", err)
	}
	// unknown fields are refused, not ignored
	err = db.RunCommand(ctx, bson.D{{Key: "find", Value: "coll"}, {Key: "bogus", Value: 1}}).Err()
	if sdCode(err) != 40415 {
		t.Fatalf("unknown field: %v", err)
	}
}

func TestUpdateDelete(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("db").Collection("u")
	_, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "g", Value: "a"}, {Key: "n", Value: 1}, {Key: "arr", Value: bson.A{1, 5, 9}}},
		bson.D{{Key: "_id", Value: 2}, {Key: "g", Value: "a"}, {Key: "n", Value: 2}},
		bson.D{{Key: "_id", Value: 3}, {Key: "g", Value: "b"}, {Key: "n", Value: 3}},
	})
	sdNoErr(t, err)

	res, err := coll.UpdateMany(ctx, bson.D{{Key: "g", Value: "a"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 10}}}})
	sdNoErr(t, err)
	if res.MatchedCount != 2 || res.ModifiedCount != 2 {
		t.Fatalf("UpdateMany = %+v", res)
	}
	// matched but not modified
	res, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: 3}}}})
	sdNoErr(t, err)
	if res.MatchedCount != 1 || res.ModifiedCount != 0 {
		t.Fatalf("no-op UpdateOne = %+v", res)
	}
	// upsert
	res, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 7}, {Key: "g", Value: "c"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: 70}}}}, options.UpdateOne().SetUpsert(true))
	sdNoErr(t, err)
	if res.UpsertedCount != 1 || res.UpsertedID != int32(7) || res.MatchedCount != 0 {
		t.Fatalf("upsert = %+v", res)
	}
	var doc bson.M
	sdNoErr(t, coll.FindOne(ctx, bson.D{{Key: "_id", Value: 7}}).Decode(&doc))
	if doc["g"] != "c" || doc["n"] != int32(70) {
		t.Fatalf("upserted %v", doc)
	}
	// arrayFilters
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "arr.$[e]", Value: 0}}}},
		options.UpdateOne().SetArrayFilters([]any{bson.D{{Key: "e", Value: bson.D{{Key: "$gt", Value: 4}}}}}))
	sdNoErr(t, err)
	sdNoErr(t, coll.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&doc))
	if fmt.Sprint(doc["arr"]) != "[1 0 0]" {
		t.Fatalf("arrayFilters: %v", doc["arr"])
	}
	// positional $
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "arr", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "arr.$", Value: 100}}}})
	sdNoErr(t, err)
	sdNoErr(t, coll.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&doc))
	if fmt.Sprint(doc["arr"]) != "[100 0 0]" {
		t.Fatalf("positional: %v", doc["arr"])
	}
	// replace keeps _id; changing it is refused
	_, err = coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "only", Value: true}})
	sdNoErr(t, err)
	var rd bson.D
	sdNoErr(t, coll.FindOne(ctx, bson.D{{Key: "_id", Value: 2}}).Decode(&rd))
	if len(rd) != 2 || rd[0].Key != "_id" || rd[1].Key != "only" {
		t.Fatalf("replaced doc = %v", rd)
	}
	_, err = coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "_id", Value: 99}})
	if codes := sdWriteCodes(err); len(codes) != 1 || codes[0] != 66 {
		t.Fatalf("changing _id: %v", err)
	}
	// updateOne with sort (8.0) picks the first by sort order
	_, err = coll.UpdateOne(ctx, bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "top", Value: true}}}},
		options.UpdateOne().SetSort(bson.D{{Key: "n", Value: -1}}))
	sdNoErr(t, err)
	sdNoErr(t, coll.FindOne(ctx, bson.D{{Key: "top", Value: true}}).Decode(&doc))
	if doc["_id"] != int32(7) {
		t.Fatalf("sorted updateOne hit %v", doc)
	}
	// unknown update operator is a write error
	_, err = coll.UpdateOne(ctx, bson.D{}, bson.D{{Key: "$bogus", Value: bson.D{{Key: "a", Value: 1}}}})
	if err == nil {
		t.Fatal("$bogus accepted")
	}
	// hint must name an index
	_, err = coll.UpdateOne(ctx, bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}}, options.UpdateOne().SetHint("nope_1"))
	if err == nil {
		t.Fatal("bad hint accepted")
	}

	dres, err := coll.DeleteOne(ctx, bson.D{{Key: "g", Value: "a"}})
	sdNoErr(t, err)
	if dres.DeletedCount != 1 {
		t.Fatalf("DeleteOne = %d", dres.DeletedCount)
	}
	dres, err = coll.DeleteMany(ctx, bson.D{})
	sdNoErr(t, err)
	if dres.DeletedCount != 3 {
		t.Fatalf("DeleteMany = %d", dres.DeletedCount)
	}
	if n, _ := coll.EstimatedDocumentCount(ctx); n != 0 {
		t.Fatalf("left %d", n)
	}
}

func TestFindAndModify(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("db").Collection("fam")
	_, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "q", Value: 5}},
		bson.D{{Key: "_id", Value: 2}, {Key: "q", Value: 9}},
	})
	sdNoErr(t, err)

	var before, after bson.M
	sdNoErr(t, coll.FindOneAndUpdate(ctx, bson.D{}, bson.D{{Key: "$inc", Value: bson.D{{Key: "q", Value: 1}}}},
		options.FindOneAndUpdate().SetSort(bson.D{{Key: "q", Value: -1}})).Decode(&before))
	if before["_id"] != int32(2) || before["q"] != int32(9) {
		t.Fatalf("before image = %v", before)
	}
	sdNoErr(t, coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "q", Value: 1}}}},
		options.FindOneAndUpdate().SetReturnDocument(options.After).SetProjection(bson.D{{Key: "q", Value: 1}, {Key: "_id", Value: 0}})).Decode(&after))
	if len(after) != 1 || after["q"] != int32(11) {
		t.Fatalf("after image = %v", after)
	}
	// upsert with new: the inserted doc
	sdNoErr(t, coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "$setOnInsert", Value: bson.D{{Key: "q", Value: 0}}}},
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&after))
	if after["_id"] != int32(3) || after["q"] != int32(0) {
		t.Fatalf("upsert image = %v", after)
	}
	// upsert without new: no document
	err = coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 4}}, bson.D{{Key: "$set", Value: bson.D{{Key: "q", Value: 4}}}},
		options.FindOneAndUpdate().SetUpsert(true)).Err()
	if !errors.Is(err, mongo.ErrNoDocuments) {
		t.Fatalf("upsert pre-image: %v", err)
	}
	var replaced bson.D
	sdNoErr(t, coll.FindOneAndReplace(ctx, bson.D{{Key: "_id", Value: 4}}, bson.D{{Key: "r", Value: 1}},
		options.FindOneAndReplace().SetReturnDocument(options.After)).Decode(&replaced))
	if len(replaced) != 2 || replaced[0].Key != "_id" || replaced[1].Key != "r" {
		t.Fatalf("replace image = %v", replaced)
	}
	var deleted bson.M
	sdNoErr(t, coll.FindOneAndDelete(ctx, bson.D{{Key: "q", Value: bson.D{{Key: "$exists", Value: true}}}}, options.FindOneAndDelete().SetSort(bson.D{{Key: "q", Value: 1}})).Decode(&deleted))
	if deleted["_id"] != int32(3) {
		t.Fatalf("deleted %v", deleted)
	}
	if n, _ := coll.CountDocuments(ctx, bson.D{}); n != 3 {
		t.Fatalf("count after delete = %d", n)
	}

	// raw reply shape
	var reply bson.D
	sdNoErr(t, client.Database("db").RunCommand(ctx, bson.D{{Key: "findAndModify", Value: "fam"}, {Key: "query", Value: bson.D{{Key: "_id", Value: 50}}},
		{Key: "update", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}}, {Key: "upsert", Value: true}}).Decode(&reply))
	leo, _ := reply[0].Value.(bson.D)
	if reply[0].Key != "lastErrorObject" || len(leo) != 3 || leo[0].Value != int32(1) || leo[1].Value != false || leo[2].Key != "upserted" || leo[2].Value != int32(50) {
		t.Fatalf("findAndModify reply = %v", reply)
	}
	// duplicate key through findAndModify keeps keyPattern/keyValue
	_, err = coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "x", Value: 1}}, Options: options.Index().SetUnique(true).SetSparse(true)})
	sdNoErr(t, err)
	err = coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}).Err()
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 11000 || !strings.Contains(ce.Message, "index: x_1 dup key: { x: 1 }") {
		t.Fatalf("dup key via findAndModify: %v", err)
	}
	if ce.Raw.Lookup("keyValue").String() != `{"x": {"$numberInt":"1"}}` {
		t.Fatalf("keyValue = %s", ce.Raw.Lookup("keyValue"))
	}
	// remove + update is refused
	err = client.Database("db").RunCommand(ctx, bson.D{{Key: "findAndModify", Value: "fam"}, {Key: "remove", Value: true}, {Key: "update", Value: bson.D{}}}).Err()
	if sdCode(err) != 9 {
		t.Fatalf("remove+update: %v", err)
	}
}

func TestCursorsManyGetMores(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("db").Collection("many")
	const total = 10000
	docs := make([]any, total)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "pad", Value: "abcdefgh"}}
	}
	_, err := coll.InsertMany(ctx, docs)
	sdNoErr(t, err)

	cur, err := coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(100))
	sdNoErr(t, err)
	next := 0
	batches := 0
	for cur.Next(ctx) {
		if cur.RemainingBatchLength() == 99 {
			batches++
		}
		id := cur.Current.Lookup("_id").Int32()
		if int(id) != next {
			t.Fatalf("got _id %d, want %d", id, next)
		}
		next++
	}
	sdNoErr(t, cur.Err())
	sdNoErr(t, cur.Close(ctx))
	if next != total || batches != total/100 {
		t.Fatalf("drained %d docs in %d batches", next, batches)
	}

	// sorted, limited, with a default first batch of 101
	var reply bson.D
	sdNoErr(t, client.Database("db").RunCommand(ctx, bson.D{{Key: "find", Value: "many"}, {Key: "sort", Value: bson.D{{Key: "_id", Value: -1}}}}).Decode(&reply))
	c := reply[0].Value.(bson.D)
	first := c[0].Value.(bson.A)
	id := c[1].Value.(int64)
	if len(first) != 101 || id == 0 || first[0].(bson.D)[0].Value != int32(total-1) {
		t.Fatalf("first batch %d docs, id %d", len(first), id)
	}
	// getMore on the wrong namespace, then kill, then CursorNotFound
	err = client.Database("db").RunCommand(ctx, bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "other"}}).Err()
	if sdCode(err) != 13 {
		t.Fatalf("foreign getMore: %v", err)
	}
	var killed bson.M
	sdNoErr(t, client.Database("db").RunCommand(ctx, bson.D{{Key: "killCursors", Value: "many"}, {Key: "cursors", Value: bson.A{id, int64(12345)}}}).Decode(&killed))
	if fmt.Sprint(killed["cursorsKilled"]) != fmt.Sprintf("[%d]", id) || fmt.Sprint(killed["cursorsNotFound"]) != "[12345]" {
		t.Fatalf("killCursors = %v", killed)
	}
	err = client.Database("db").RunCommand(ctx, bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "many"}}).Err()
	if sdCode(err) != 43 || !strings.Contains(err.Error(), fmt.Sprintf("cursor id %d not found", id)) {
		t.Fatalf("getMore after kill: %v", err)
	}
	// dropping the collection kills its cursors
	cur, err = coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(10))
	sdNoErr(t, err)
	sdNoErr(t, coll.Drop(ctx))
	for cur.Next(ctx) {
	}
	if sdCode(cur.Err()) != 43 {
		t.Fatalf("cursor after drop: %v", cur.Err())
	}
	_ = cur.Close(ctx)

	// A negative limit is refused as by mongod 4.4+; singleBatch with a
	// limit is its replacement: one batch, no cursor.
	_, err = coll.InsertMany(ctx, docs[:300])
	sdNoErr(t, err)
	err = client.Database("db").RunCommand(ctx, bson.D{{Key: "find", Value: "many"}, {Key: "limit", Value: -150}}).Err()
	if sdCode(err) != 51024 || !strings.Contains(err.Error(), "BSON field 'limit' value must be >= 0, actual value '-150'") {
		t.Fatalf("negative limit: %v", err)
	}
	sdNoErr(t, client.Database("db").RunCommand(ctx, bson.D{{Key: "find", Value: "many"}, {Key: "limit", Value: 150}, {Key: "singleBatch", Value: true}}).Decode(&reply))
	c = reply[0].Value.(bson.D)
	if len(c[0].Value.(bson.A)) != 150 || c[1].Value.(int64) != 0 {
		t.Fatalf("singleBatch with limit: %d docs id %v", len(c[0].Value.(bson.A)), c[1].Value)
	}
	// limit across batches
	got := sdFindAll(t, ctx, coll, bson.D{}, options.Find().SetLimit(250).SetBatchSize(100))
	if len(got) != 250 {
		t.Fatalf("limit 250 gave %d", len(got))
	}
}

func TestCountDistinct(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("db").Collection("cd")
	_, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "k", Value: 1}, {Key: "t", Value: bson.A{"a", "b"}}},
		bson.D{{Key: "k", Value: 1.0}, {Key: "t", Value: "a"}},
		bson.D{{Key: "k", Value: 2}, {Key: "t", Value: bson.A{}}},
		bson.D{{Key: "k", Value: "s"}},
	})
	sdNoErr(t, err)
	n, err := coll.CountDocuments(ctx, bson.D{{Key: "k", Value: 1}})
	sdNoErr(t, err)
	if n != 2 {
		t.Fatalf("CountDocuments = %d", n)
	}
	n, err = coll.EstimatedDocumentCount(ctx)
	sdNoErr(t, err)
	if n != 4 {
		t.Fatalf("EstimatedDocumentCount = %d", n)
	}
	var reply bson.M
	sdNoErr(t, client.Database("db").RunCommand(ctx, bson.D{{Key: "count", Value: "cd"}, {Key: "skip", Value: 1}, {Key: "limit", Value: 2}}).Decode(&reply))
	if reply["n"] != int32(2) {
		t.Fatalf("count skip/limit = %v", reply)
	}
	res := coll.Distinct(ctx, "k", bson.D{})
	var ks []any
	sdNoErr(t, res.Decode(&ks))
	if fmt.Sprint(ks) != "[1 2 s]" {
		t.Fatalf("distinct k = %v", ks)
	}
	res = coll.Distinct(ctx, "t", bson.D{{Key: "k", Value: bson.D{{Key: "$type", Value: "number"}}}})
	var ts []string
	sdNoErr(t, res.Decode(&ts))
	if fmt.Sprint(ts) != "[a b]" {
		t.Fatalf("distinct t = %v", ts)
	}
}

func TestAggregate(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("agg")
	coll := db.Collection("sales")
	_, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "item", Value: "a"}, {Key: "qty", Value: 2}},
		bson.D{{Key: "_id", Value: 2}, {Key: "item", Value: "b"}, {Key: "qty", Value: 5}},
		bson.D{{Key: "_id", Value: 3}, {Key: "item", Value: "a"}, {Key: "qty", Value: 4}},
	})
	sdNoErr(t, err)
	cur, err := coll.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: "qty", Value: bson.D{{Key: "$gt", Value: 1}}}}}},
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$item"}, {Key: "total", Value: bson.D{{Key: "$sum", Value: "$qty"}}}}}},
		{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}},
	})
	sdNoErr(t, err)
	var out []bson.M
	sdNoErr(t, cur.All(ctx, &out))
	if len(out) != 2 || out[0]["_id"] != "a" || out[0]["total"] != int32(6) || out[1]["total"] != int32(5) {
		t.Fatalf("group = %v", out)
	}

	// many results across getMores
	cur, err = coll.Aggregate(ctx, mongo.Pipeline{}, options.Aggregate().SetBatchSize(1))
	sdNoErr(t, err)
	sdNoErr(t, cur.All(ctx, &out))
	if len(out) != 3 {
		t.Fatalf("batched aggregate = %v", out)
	}

	// $out replaces the target
	_, err = db.Collection("summary").InsertOne(ctx, bson.D{{Key: "_id", Value: "old"}})
	sdNoErr(t, err)
	cur, err = coll.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$item"}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}},
		{{Key: "$out", Value: "summary"}},
	})
	sdNoErr(t, err)
	sdNoErr(t, cur.Close(ctx))
	got := sdFindAll(t, ctx, db.Collection("summary"), bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if len(got) != 2 || got[0][0].Value != "a" {
		t.Fatalf("$out target = %v", got)
	}

	// $merge updates matching documents and inserts the rest
	cur, err = coll.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$project", Value: bson.D{{Key: "_id", Value: "$item"}, {Key: "last", Value: "$qty"}}}},
		{{Key: "$match", Value: bson.D{{Key: "_id", Value: "b"}}}},
		{{Key: "$merge", Value: bson.D{{Key: "into", Value: "summary"}, {Key: "whenMatched", Value: "merge"}, {Key: "whenNotMatched", Value: "insert"}}}},
	})
	sdNoErr(t, err)
	sdNoErr(t, cur.Close(ctx))
	var b bson.M
	sdNoErr(t, db.Collection("summary").FindOne(ctx, bson.D{{Key: "_id", Value: "b"}}).Decode(&b))
	if b["n"] != int32(1) || b["last"] != int32(5) {
		t.Fatalf("$merge result = %v", b)
	}

	// aggregate without cursor is refused
	err = db.RunCommand(ctx, bson.D{{Key: "aggregate", Value: "sales"}, {Key: "pipeline", Value: bson.A{}}}).Err()
	if sdCode(err) != 9 {
		t.Fatalf("aggregate without cursor: %v", err)
	}
}

func TestCatalogCommands(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("cat")
	sdNoErr(t, db.CreateCollection(ctx, "a"))
	sdNoErr(t, db.CreateCollection(ctx, "a")) // same options: ok, as 7.0+
	_, err := db.Collection("b").InsertOne(ctx, bson.D{{Key: "x", Value: 1}})
	sdNoErr(t, err)

	names, err := db.ListCollectionNames(ctx, bson.D{})
	sdNoErr(t, err)
	if fmt.Sprint(names) != "[a b]" {
		t.Fatalf("collections = %v", names)
	}
	names, err = db.ListCollectionNames(ctx, bson.D{{Key: "name", Value: "b"}})
	sdNoErr(t, err)
	if fmt.Sprint(names) != "[b]" {
		t.Fatalf("filtered collections = %v", names)
	}
	specs, err := db.ListCollectionSpecifications(ctx, bson.D{})
	sdNoErr(t, err)
	if len(specs) != 2 || specs[0].Type != "collection" || specs[0].UUID == nil {
		t.Fatalf("specs = %+v", specs)
	}
	dbs, err := client.ListDatabaseNames(ctx, bson.D{{Key: "name", Value: "cat"}})
	sdNoErr(t, err)
	if fmt.Sprint(dbs) != "[cat]" {
		t.Fatalf("databases = %v", dbs)
	}
	sdNoErr(t, db.Collection("b").Drop(ctx))
	sdNoErr(t, db.Collection("b").Drop(ctx)) // missing: ok in 8.0
	names, _ = db.ListCollectionNames(ctx, bson.D{})
	if fmt.Sprint(names) != "[a]" {
		t.Fatalf("after drop = %v", names)
	}
	var stats bson.M
	sdNoErr(t, db.RunCommand(ctx, bson.D{{Key: "dbStats", Value: 1}}).Decode(&stats))
	if stats["collections"] != int64(1) {
		t.Fatalf("dbStats = %v", stats)
	}
	sdNoErr(t, db.Drop(ctx))
	dbs, _ = client.ListDatabaseNames(ctx, bson.D{{Key: "name", Value: "cat"}})
	if len(dbs) != 0 {
		t.Fatalf("after dropDatabase = %v", dbs)
	}
	// explain of a command that has none fails loudly
	err = db.RunCommand(ctx, bson.D{{Key: "explain", Value: bson.D{{Key: "insert", Value: "a"}}}}).Err()
	if sdCode(err) != 20 {
		t.Fatalf("explain: %v", err)
	}
}

func TestIndexes(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("db")
	coll := db.Collection("ix")
	name, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "name", Value: 1}}, Options: options.Index().SetUnique(true)})
	sdNoErr(t, err)
	if name != "name_1" {
		t.Fatalf("index name %q", name)
	}
	name, err = coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "a", Value: 1}, {Key: "b.c", Value: -1}}, Options: options.Index().SetUnique(true)})
	sdNoErr(t, err)
	if name != "a_1_b.c_-1" {
		t.Fatalf("compound index name %q", name)
	}
	_, err = coll.InsertOne(ctx, bson.D{{Key: "name", Value: "x"}, {Key: "a", Value: 1}, {Key: "b", Value: bson.D{{Key: "c", Value: 1}}}})
	sdNoErr(t, err)
	_, err = coll.InsertOne(ctx, bson.D{{Key: "name", Value: "x"}})
	var we mongo.WriteException
	if !errors.As(err, &we) || we.WriteErrors[0].Message != `E11000 duplicate key error collection: db.ix index: name_1 dup key: { name: "x" }` {
		t.Fatalf("unique violation: %v", err)
	}
	_, err = coll.InsertOne(ctx, bson.D{{Key: "name", Value: "y"}, {Key: "a", Value: 1}, {Key: "b", Value: bson.D{{Key: "c", Value: 1}}}})
	if !errors.As(err, &we) || !strings.Contains(we.WriteErrors[0].Message, "index: a_1_b.c_-1 dup key: { a: 1, b.c: 1 }") {
		t.Fatalf("compound violation: %v", err)
	}
	// an update into a duplicate is refused; the document is unchanged
	_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "z"}, {Key: "name", Value: "z"}})
	sdNoErr(t, err)
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: "z"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "name", Value: "x"}}}})
	if !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("update into duplicate: %v", err)
	}
	// missing fields are null: only one document may lack name
	_, err = coll.InsertOne(ctx, bson.D{{Key: "other", Value: 1}, {Key: "a", Value: 5}})
	sdNoErr(t, err)
	_, err = coll.InsertOne(ctx, bson.D{{Key: "other", Value: 2}, {Key: "a", Value: 6}})
	if !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("second null name: %v", err)
	}
	// sparse unique skips documents without the field
	_, err = coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "s", Value: 1}}, Options: options.Index().SetUnique(true).SetSparse(true)})
	sdNoErr(t, err)

	// conflicts
	_, err = coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "name", Value: 1}}, Options: options.Index().SetName("other")})
	if sdCode(err) != 85 {
		t.Fatalf("same key, other name: %v", err)
	}
	_, err = coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "zzz", Value: 1}}, Options: options.Index().SetName("name_1")})
	if sdCode(err) != 86 {
		t.Fatalf("same name, other key: %v", err)
	}
	_, err = coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "name", Value: 1}}}) // not unique, same name
	if sdCode(err) != 85 {
		t.Fatalf("same name, other options: %v", err)
	}
	// unique index over existing duplicates
	_, err = db.Collection("dups").InsertMany(ctx, []any{bson.D{{Key: "v", Value: 1}}, bson.D{{Key: "v", Value: 1}}})
	sdNoErr(t, err)
	_, err = db.Collection("dups").Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "v", Value: 1}}, Options: options.Index().SetUnique(true)})
	if sdCode(err) != 11000 {
		t.Fatalf("unique over dups: %v", err)
	}

	cur, err := coll.Indexes().List(ctx)
	sdNoErr(t, err)
	var specs []bson.M
	sdNoErr(t, cur.All(ctx, &specs))
	if len(specs) != 4 || specs[0]["name"] != "_id_" || specs[1]["unique"] != true {
		t.Fatalf("listIndexes = %v", specs)
	}
	sdNoErr(t, coll.Indexes().DropOne(ctx, "name_1"))
	_, err = coll.InsertOne(ctx, bson.D{{Key: "name", Value: "x"}, {Key: "a", Value: 7}})
	sdNoErr(t, err) // no longer unique
	err = coll.Indexes().DropOne(ctx, "name_1")
	if sdCode(err) != 27 {
		t.Fatalf("drop missing index: %v", err)
	}
	err = coll.Indexes().DropOne(ctx, "_id_")
	if sdCode(err) != 72 {
		t.Fatalf("drop _id_: %v", err)
	}
	sdNoErr(t, coll.Indexes().DropAll(ctx))
	cur, err = coll.Indexes().List(ctx)
	sdNoErr(t, err)
	sdNoErr(t, cur.All(ctx, &specs))
	if len(specs) != 1 {
		t.Fatalf("after DropAll = %v", specs)
	}
	_, err = db.Collection("nope").Indexes().List(ctx)
	if err != nil {
		// the driver treats NamespaceNotFound from listIndexes as empty; any other error is wrong
		t.Fatalf("listIndexes on missing collection: %v", err)
	}
}

// TestResilientArticleCounter runs the two-step exactly-once counter of "How To Write
// Resilient MongoDB Applications" and its clean-up pass.
func TestResilientArticleCounter(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("app").Collection("counters")
	day := "2016-06-28"

	step1 := func(tok bson.ObjectID) {
		_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: day}}, bson.D{{Key: "$addToSet", Value: bson.D{{Key: "pending", Value: tok}}}}, options.UpdateOne().SetUpsert(true))
		sdNoErr(t, err)
	}
	step2 := func(tok bson.ObjectID) int64 {
		res, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: day}, {Key: "pending", Value: tok}},
			bson.D{{Key: "$pull", Value: bson.D{{Key: "pending", Value: tok}}}, {Key: "$inc", Value: bson.D{{Key: "counter", Value: 1}}}})
		sdNoErr(t, err)
		return res.ModifiedCount
	}
	t1, t2, t3 := bson.NewObjectID(), bson.NewObjectID(), bson.NewObjectID()
	step1(t1)
	step1(t1) // retried: $addToSet is idempotent
	if step2(t1) != 1 || step2(t1) != 0 {
		t.Fatal("step 2 must apply exactly once")
	}
	step1(t2)
	step1(t3)
	if step2(t2) != 1 {
		t.Fatal("step 2 for t2")
	}
	// t3 is left pending (the network failed before step 2)
	var doc bson.M
	sdNoErr(t, coll.FindOne(ctx, bson.D{{Key: "_id", Value: day}}).Decode(&doc))
	if doc["counter"] != int32(2) || len(doc["pending"].(bson.A)) != 1 {
		t.Fatalf("before clean-up: %v", doc)
	}

	cur, err := coll.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: "pending.0", Value: bson.D{{Key: "$exists", Value: true}}}}}},
		{{Key: "$project", Value: bson.D{{Key: "counter", Value: bson.D{{Key: "$add", Value: bson.A{"$counter", bson.D{{Key: "$size", Value: "$pending"}}}}}}}}},
	})
	sdNoErr(t, err)
	var fixes []bson.M
	sdNoErr(t, cur.All(ctx, &fixes))
	if len(fixes) != 1 || fixes[0]["counter"] != int32(3) {
		t.Fatalf("clean-up aggregation = %v", fixes)
	}
	for _, f := range fixes {
		_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: f["_id"]}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "counter", Value: f["counter"]}}}, {Key: "$unset", Value: bson.D{{Key: "pending", Value: ""}}}})
		sdNoErr(t, err)
	}
	var final bson.D
	sdNoErr(t, coll.FindOne(ctx, bson.D{{Key: "_id", Value: day}}).Decode(&final))
	if len(final) != 2 || final[0].Value != day || final[1].Key != "counter" || final[1].Value != int32(3) {
		t.Fatalf("after clean-up: %v", final)
	}
}

// TestOptimisticLockingArticleUpsert runs the optimistic-locking upsert of
// "Optimistic Locking in MongoDB": a stale version finds no match, tries to
// insert and hits the _id index.
func TestOptimisticLockingArticleUpsert(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("app").Collection("docs")
	created := bson.NewDateTimeFromTime(time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC))
	save := func(version int, body string) error {
		_, err := coll.UpdateOne(ctx,
			bson.D{{Key: "_id", Value: "doc1"}, {Key: "version", Value: version}},
			bson.D{
				{Key: "$set", Value: bson.D{{Key: "body", Value: body}}},
				{Key: "$inc", Value: bson.D{{Key: "version", Value: 1}}},
				{Key: "$setOnInsert", Value: bson.D{{Key: "created", Value: created}}},
			}, options.UpdateOne().SetUpsert(true))
		return err
	}
	// A new document starts at version 0 in the query, so it is stored with 1.
	sdNoErr(t, save(0, "first"))
	sdNoErr(t, save(1, "second"))
	err := save(1, "stale")
	var we mongo.WriteException
	if !errors.As(err, &we) || we.WriteErrors[0].Code != 11000 ||
		we.WriteErrors[0].Message != `E11000 duplicate key error collection: app.docs index: _id_ dup key: { _id: "doc1" }` {
		t.Fatalf("stale save: %v", err)
	}
	var doc bson.M
	sdNoErr(t, coll.FindOne(ctx, bson.D{{Key: "_id", Value: "doc1"}}).Decode(&doc))
	if doc["version"] != int32(2) || doc["body"] != "second" || doc["created"] != created {
		t.Fatalf("stored %v", doc)
	}
}

func TestConcurrentInc(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("db").Collection("inc")
	const workers, each = 32, 50
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: "c"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}, options.UpdateOne().SetUpsert(true))
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var doc bson.M
	sdNoErr(t, coll.FindOne(ctx, bson.D{{Key: "_id", Value: "c"}}).Decode(&doc))
	if doc["n"] != int32(workers*each) {
		t.Fatalf("n = %v, want %d", doc["n"], workers*each)
	}
}

func TestClientBulkWrite(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	_, err := client.Database("bw").Collection("a").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 1}})
	sdNoErr(t, err)
	writes := []mongo.ClientBulkWrite{
		{Database: "bw", Collection: "a", Model: mongo.NewClientInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: 2}})},
		{Database: "bw", Collection: "b", Model: mongo.NewClientInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: 1}})},
		{Database: "bw", Collection: "a", Model: mongo.NewClientUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: 1}}).SetUpdate(bson.D{{Key: "$inc", Value: bson.D{{Key: "x", Value: 1}}}})},
		{Database: "bw", Collection: "a", Model: mongo.NewClientUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: 9}}).SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 9}}}}).SetUpsert(true)},
		{Database: "bw", Collection: "a", Model: mongo.NewClientDeleteOneModel().SetFilter(bson.D{{Key: "_id", Value: 2}})},
	}
	res, err := client.BulkWrite(ctx, writes, options.ClientBulkWrite().SetVerboseResults(true))
	sdNoErr(t, err)
	if res.InsertedCount != 2 || res.MatchedCount != 1 || res.ModifiedCount != 1 || res.UpsertedCount != 1 || res.DeletedCount != 1 {
		t.Fatalf("result = %+v", res)
	}
	if res.UpdateResults[3].UpsertedID != int32(9) {
		t.Fatalf("upserted id = %v", res.UpdateResults[3].UpsertedID)
	}
	// an ordered bulk stops at a duplicate key
	writes = []mongo.ClientBulkWrite{
		{Database: "bw", Collection: "a", Model: mongo.NewClientInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: 1}})},
		{Database: "bw", Collection: "a", Model: mongo.NewClientInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: 100}})},
	}
	_, err = client.BulkWrite(ctx, writes)
	var bwe mongo.ClientBulkWriteException
	if !errors.As(err, &bwe) || len(bwe.WriteErrors) != 1 || bwe.WriteErrors[0].Code != 11000 {
		t.Fatalf("ordered bulk error: %v", err)
	}
	if n, _ := client.Database("bw").Collection("a").CountDocuments(ctx, bson.D{{Key: "_id", Value: 100}}); n != 0 {
		t.Fatal("ordered bulk went past the error")
	}
}

// TestRetryReplaysDataCommands drops the connection after each write has
// committed; the driver retries and the retryable-write table must replay
// the stored result instead of writing twice.
func TestRetryReplaysDataCommands(t *testing.T) {
	client, c := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("db").Collection("retry")
	arm := func() {
		t.Helper()
		sdNoErr(t, c.SetFailPoint(bson.D{
			{Key: "configureFailPoint", Value: "onPrimaryTransactionalWrite"},
			{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
			{Key: "data", Value: bson.D{{Key: "closeConnection", Value: true}}},
		}))
	}
	arm()
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 0}})
	sdNoErr(t, err) // the retry replays success rather than hitting a duplicate key

	arm()
	res, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})
	sdNoErr(t, err)
	if res.MatchedCount != 1 || res.ModifiedCount != 1 {
		t.Fatalf("replayed update result = %+v", res)
	}
	arm()
	res, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}, options.UpdateOne().SetUpsert(true))
	sdNoErr(t, err)
	if res.UpsertedID != int32(2) {
		t.Fatalf("replayed upsert result = %+v", res)
	}
	arm()
	var before bson.M
	sdNoErr(t, coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}).Decode(&before))
	if before["n"] != int32(1) {
		t.Fatalf("replayed findAndModify pre-image = %v", before)
	}
	var doc bson.M
	sdNoErr(t, coll.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&doc))
	if doc["n"] != int32(2) {
		t.Fatalf("n = %v: a retried write ran twice", doc["n"])
	}
	arm()
	dres, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: 2}})
	sdNoErr(t, err)
	if dres.DeletedCount != 1 {
		t.Fatalf("replayed delete = %d", dres.DeletedCount)
	}
	if st := c.Stats(); st.Hangups != 5 || st.Replayed != 5 {
		t.Fatalf("stats = %+v, want 5 hang-ups each answered by a replay", st)
	}
}

func TestPipelineUpdateAndRename(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("db")
	coll := db.Collection("src")
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 2}, {Key: "b", Value: 3}})
	sdNoErr(t, err)
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, mongo.Pipeline{
		{{Key: "$set", Value: bson.D{{Key: "sum", Value: bson.D{{Key: "$add", Value: bson.A{"$a", "$b"}}}}}}},
		{{Key: "$unset", Value: "b"}},
	})
	sdNoErr(t, err)
	var doc bson.D
	sdNoErr(t, coll.FindOne(ctx, bson.D{}).Decode(&doc))
	if len(doc) != 3 || doc[2].Key != "sum" || doc[2].Value != int32(5) {
		t.Fatalf("pipeline update = %v", doc)
	}

	admin := client.Database("admin")
	sdNoErr(t, admin.RunCommand(ctx, bson.D{{Key: "renameCollection", Value: "db.src"}, {Key: "to", Value: "db.dst"}}).Err())
	if n, _ := db.Collection("src").CountDocuments(ctx, bson.D{}); n != 0 {
		t.Fatal("source still has documents")
	}
	sdNoErr(t, db.Collection("dst").FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Err())
	err = admin.RunCommand(ctx, bson.D{{Key: "renameCollection", Value: "db.src"}, {Key: "to", Value: "db.dst"}}).Err()
	if sdCode(err) != 26 {
		t.Fatalf("rename missing source: %v", err)
	}
	_, err = db.Collection("other").InsertOne(ctx, bson.D{})
	sdNoErr(t, err)
	err = admin.RunCommand(ctx, bson.D{{Key: "renameCollection", Value: "db.dst"}, {Key: "to", Value: "db.other"}}).Err()
	if sdCode(err) != 48 {
		t.Fatalf("rename onto existing: %v", err)
	}
}

func TestDatabaseAggregateAndUnsupported(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("db")
	cur, err := db.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$documents", Value: bson.A{bson.D{{Key: "x", Value: 1}}, bson.D{{Key: "x", Value: 2}}}}},
		{{Key: "$match", Value: bson.D{{Key: "$expr", Value: bson.D{{Key: "$gt", Value: bson.A{"$x", "$$min"}}}}}}},
	}, options.Aggregate().SetLet(bson.D{{Key: "min", Value: 1}}))
	sdNoErr(t, err)
	var out []bson.M
	sdNoErr(t, cur.All(ctx, &out))
	if len(out) != 1 || out[0]["x"] != int32(2) {
		t.Fatalf("$documents = %v", out)
	}
	// $currentOp runs only on admin, as on mongod
	_, err = db.Aggregate(ctx, mongo.Pipeline{{{Key: "$currentOp", Value: bson.D{}}}})
	if sdCode(err) != 73 {
		t.Fatalf("$currentOp: %v", err)
	}
	coll := db.Collection("c")
	_, err = coll.Find(ctx, bson.D{}, options.Find().SetMin(bson.D{{Key: "a", Value: 1}}))
	if sdCode(err) != 51173 {
		t.Fatalf("min without a hint: %v", err)
	}
}
