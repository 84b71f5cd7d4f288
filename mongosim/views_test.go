package mongosim

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// cmdErrCode returns the server error code of err (command error or the
// first write error), or 0.
func cmdErrCode(err error) int {
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return int(ce.Code)
	}
	if codes := sdWriteCodes(err); len(codes) > 0 {
		return codes[0]
	}
	var se mongo.ServerError
	if errors.As(err, &se) {
		for _, c := range []int{121, 166, 167, 93, 170, 67, 72, 197, 27, 238} {
			if se.HasErrorCode(c) {
				return c
			}
		}
	}
	return 0
}

// dm reads a decoded sub-document (bson.D in the v2 driver) as a map.
func dm(v any) bson.M {
	switch x := v.(type) {
	case bson.M:
		return x
	case bson.D:
		m := bson.M{}
		for _, e := range x {
			m[e.Key] = e.Value
		}
		return m
	}
	return nil
}

func seedPeople(t *testing.T, db *mongo.Database) {
	t.Helper()
	ctx := sdCtx(t)
	_, err := db.Collection("people").InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "name", Value: "ann"}, {Key: "age", Value: 31}, {Key: "city", Value: "oslo"}},
		bson.D{{Key: "_id", Value: 2}, {Key: "name", Value: "bob"}, {Key: "age", Value: 17}, {Key: "city", Value: "rome"}},
		bson.D{{Key: "_id", Value: 3}, {Key: "name", Value: "cyd"}, {Key: "age", Value: 45}, {Key: "city", Value: "oslo"}},
		bson.D{{Key: "_id", Value: 4}, {Key: "name", Value: "dee"}, {Key: "age", Value: 52}, {Key: "city", Value: "lima"}},
	})
	sdNoErr(t, err)
}

func TestViewCreateAndListCollections(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("vw")
	seedPeople(t, db)
	pipeline := mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "age", Value: bson.D{{Key: "$gte", Value: 18}}}}}}}
	sdNoErr(t, db.CreateView(ctx, "adults", "people", pipeline))

	cur, err := db.ListCollections(ctx, bson.D{{Key: "name", Value: "adults"}})
	sdNoErr(t, err)
	var got []bson.M
	sdNoErr(t, cur.All(ctx, &got))
	if len(got) != 1 {
		t.Fatalf("listCollections: %v", got)
	}
	if got[0]["type"] != "view" {
		t.Fatalf("type = %v", got[0]["type"])
	}
	opts := dm(got[0]["options"])
	if opts["viewOn"] != "people" {
		t.Fatalf("options = %v", opts)
	}
	if p, ok := opts["pipeline"].(bson.A); !ok || len(p) != 1 {
		t.Fatalf("options.pipeline = %v", opts["pipeline"])
	}
	if info := dm(got[0]["info"]); info["readOnly"] != true {
		t.Fatalf("info = %v", info)
	}
	if _, ok := got[0]["idIndex"]; ok {
		t.Fatalf("a view has no idIndex: %v", got[0])
	}

	// Same definition again succeeds; a different one, or a collection of
	// the same name, does not.
	sdNoErr(t, db.CreateView(ctx, "adults", "people", pipeline))
	if err := db.CreateView(ctx, "adults", "people", mongo.Pipeline{}); cmdErrCode(err) != 48 {
		t.Fatalf("different definition: %v", err)
	}
	if err := db.CreateCollection(ctx, "adults"); cmdErrCode(err) != 48 {
		t.Fatalf("collection over a view: %v", err)
	}
	// A view on itself is a cycle; $out cannot be in a view.
	if err := db.CreateView(ctx, "self", "self", mongo.Pipeline{}); cmdErrCode(err) != 93 {
		t.Fatalf("self view: %v", err)
	}
	err = db.CreateView(ctx, "bad", "people", mongo.Pipeline{{{Key: "$out", Value: "x"}}})
	if cmdErrCode(err) != 167 {
		t.Fatalf("$out in a view: %v", err)
	}
	err = db.RunCommand(ctx, bson.D{{Key: "create", Value: "p"}, {Key: "pipeline", Value: bson.A{}}}).Err()
	if cmdErrCode(err) != 72 {
		t.Fatalf("pipeline without viewOn: %v", err)
	}
}

func TestViewReads(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("vw")
	seedPeople(t, db)
	sdNoErr(t, db.CreateView(ctx, "adults", "people", mongo.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: "age", Value: bson.D{{Key: "$gte", Value: 18}}}}}},
		{{Key: "$project", Value: bson.D{{Key: "name", Value: 1}, {Key: "age", Value: 1}, {Key: "city", Value: 1}}}},
	}))
	// A view on the view.
	sdNoErr(t, db.CreateView(ctx, "osloAdults", "adults", mongo.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: "city", Value: "oslo"}}}},
	}))
	v := db.Collection("adults")

	// find with filter, sort, skip, limit and projection.
	cur, err := v.Find(ctx, bson.D{{Key: "age", Value: bson.D{{Key: "$gt", Value: 20}}}},
		options.Find().SetSort(bson.D{{Key: "age", Value: -1}}).SetSkip(1).SetLimit(2).SetProjection(bson.D{{Key: "_id", Value: 0}, {Key: "name", Value: 1}}))
	sdNoErr(t, err)
	var names []bson.D
	sdNoErr(t, cur.All(ctx, &names))
	want := []bson.D{{{Key: "name", Value: "cyd"}}, {{Key: "name", Value: "ann"}}}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("find on view = %v, want %v", names, want)
	}

	n, err := v.CountDocuments(ctx, bson.D{})
	sdNoErr(t, err)
	if n != 3 {
		t.Fatalf("countDocuments = %d", n)
	}
	n, err = v.EstimatedDocumentCount(ctx)
	sdNoErr(t, err)
	if n != 3 {
		t.Fatalf("estimatedDocumentCount = %d", n)
	}
	var cities []string
	sdNoErr(t, v.Distinct(ctx, "city", bson.D{}).Decode(&cities))
	if !reflect.DeepEqual(cities, []string{"lima", "oslo"}) {
		t.Fatalf("distinct = %v", cities)
	}
	cur, err = v.Aggregate(ctx, mongo.Pipeline{{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "total", Value: bson.D{{Key: "$sum", Value: "$age"}}}}}}})
	sdNoErr(t, err)
	var sums []bson.M
	sdNoErr(t, cur.All(ctx, &sums))
	if len(sums) != 1 || sums[0]["total"] != int32(128) {
		t.Fatalf("aggregate on view = %v", sums)
	}

	// Cursors on a view name the view and getMore through it.
	for what, open := range map[string]func() (*mongo.Cursor, error){
		"aggregate": func() (*mongo.Cursor, error) {
			return v.Aggregate(ctx, mongo.Pipeline{}, options.Aggregate().SetBatchSize(1))
		},
		"find": func() (*mongo.Cursor, error) { return v.Find(ctx, bson.D{}, options.Find().SetBatchSize(1)) },
	} {
		cur, err := open()
		sdNoErr(t, err)
		var all []bson.M
		sdNoErr(t, cur.All(ctx, &all))
		if len(all) != 3 {
			t.Fatalf("%s on a view in batches of 1: %d documents", what, len(all))
		}
	}

	raw, err := db.RunCommand(ctx, bson.D{{Key: "aggregate", Value: "adults"}, {Key: "pipeline", Value: bson.A{}},
		{Key: "cursor", Value: bson.D{{Key: "batchSize", Value: 0}}}}).Raw()
	sdNoErr(t, err)
	if ns := raw.Lookup("cursor", "ns").StringValue(); ns != "vw.adults" {
		t.Fatalf("cursor.ns = %q, want vw.adults", ns)
	}
	_ = db.RunCommand(ctx, bson.D{{Key: "killCursors", Value: "adults"}, {Key: "cursors", Value: bson.A{raw.Lookup("cursor", "id").Int64()}}})

	// The view on the view applies both pipelines.
	cur, err = db.Collection("osloAdults").Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	sdNoErr(t, err)
	var oslo []bson.M
	sdNoErr(t, cur.All(ctx, &oslo))
	if len(oslo) != 2 || oslo[0]["name"] != "ann" || oslo[1]["name"] != "cyd" {
		t.Fatalf("view on view = %v", oslo)
	}
	n, err = db.Collection("osloAdults").CountDocuments(ctx, bson.D{{Key: "age", Value: bson.D{{Key: "$gt", Value: 40}}}})
	sdNoErr(t, err)
	if n != 1 {
		t.Fatalf("count on view on view = %d", n)
	}

	// $lookup from a view reads through it.
	cur, err = db.Collection("people").Aggregate(ctx, mongo.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: "_id", Value: 2}}}},
		{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "osloAdults"}, {Key: "pipeline", Value: bson.A{}}, {Key: "as", Value: "o"}}}},
	})
	sdNoErr(t, err)
	var joined []bson.M
	sdNoErr(t, cur.All(ctx, &joined))
	if len(joined) != 1 || len(joined[0]["o"].(bson.A)) != 2 {
		t.Fatalf("$lookup from view = %v", joined)
	}

	// A write to the base collection shows through the view at once.
	_, err = db.Collection("people").InsertOne(ctx, bson.D{{Key: "_id", Value: 5}, {Key: "name", Value: "eve"}, {Key: "age", Value: 60}, {Key: "city", Value: "oslo"}})
	sdNoErr(t, err)
	n, err = db.Collection("osloAdults").CountDocuments(ctx, bson.D{})
	sdNoErr(t, err)
	if n != 3 {
		t.Fatalf("count after base insert = %d", n)
	}
}

func TestViewWritesRefused(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("vw")
	seedPeople(t, db)
	sdNoErr(t, db.CreateView(ctx, "v", "people", mongo.Pipeline{}))
	v := db.Collection("v")
	checks := map[string]error{}
	_, checks["insert"] = v.InsertOne(ctx, bson.D{{Key: "x", Value: 1}})
	_, checks["update"] = v.UpdateOne(ctx, bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}})
	_, checks["delete"] = v.DeleteMany(ctx, bson.D{})
	checks["findAndModify"] = v.FindOneAndUpdate(ctx, bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}).Err()
	_, checks["createIndexes"] = v.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "x", Value: 1}}})
	_, checks["listIndexes"] = v.Indexes().List(ctx)
	_, checks["bulkWrite"] = v.BulkWrite(ctx, []mongo.WriteModel{mongo.NewInsertOneModel().SetDocument(bson.D{{Key: "x", Value: 1}})})
	_, checks["$out"] = db.Collection("people").Aggregate(ctx, mongo.Pipeline{{{Key: "$out", Value: "v"}}})
	_, checks["$changeStream"] = v.Watch(ctx, mongo.Pipeline{})
	checks["collStats"] = db.RunCommand(ctx, bson.D{{Key: "collStats", Value: "v"}}).Err()
	for what, err := range checks {
		if cmdErrCode(err) != 166 {
			t.Errorf("%s on a view: %v, want CommandNotSupportedOnView (166)", what, err)
		}
	}
	var stats bson.M
	sdNoErr(t, db.RunCommand(ctx, bson.D{{Key: "dbStats", Value: 1}}).Decode(&stats))
	if stats["views"] != int64(1) || stats["collections"] != int64(1) {
		t.Fatalf("dbStats = %v", stats)
	}
	// Nothing reached the base collection.
	n, err := db.Collection("people").CountDocuments(ctx, bson.D{{Key: "x", Value: bson.D{{Key: "$exists", Value: true}}}})
	sdNoErr(t, err)
	if n != 0 {
		t.Fatalf("a write through the view reached the base: %d", n)
	}
}

func TestViewDropAndCollMod(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("vw")
	seedPeople(t, db)
	sdNoErr(t, db.CreateView(ctx, "v", "people", mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "city", Value: "oslo"}}}}}))
	count := func(coll string) int64 {
		t.Helper()
		n, err := db.Collection(coll).CountDocuments(ctx, bson.D{})
		sdNoErr(t, err)
		return n
	}
	if n := count("v"); n != 2 {
		t.Fatalf("view count = %d", n)
	}
	err := db.RunCommand(ctx, bson.D{{Key: "collMod", Value: "v"}, {Key: "viewOn", Value: "people"},
		{Key: "pipeline", Value: bson.A{bson.D{{Key: "$match", Value: bson.D{{Key: "city", Value: "rome"}}}}}}}).Err()
	sdNoErr(t, err)
	if n := count("v"); n != 1 {
		t.Fatalf("count after collMod = %d", n)
	}
	// The pipeline alone may change (no auth).
	sdNoErr(t, db.RunCommand(ctx, bson.D{{Key: "collMod", Value: "v"},
		{Key: "pipeline", Value: bson.A{bson.D{{Key: "$match", Value: bson.D{{Key: "age", Value: bson.D{{Key: "$gt", Value: 40}}}}}}}}}).Err())
	if n := count("v"); n != 2 {
		t.Fatalf("count after pipeline-only collMod = %d", n)
	}
	// A cycle through collMod is refused and leaves the view as it was.
	sdNoErr(t, db.CreateView(ctx, "w", "v", mongo.Pipeline{}))
	err = db.RunCommand(ctx, bson.D{{Key: "collMod", Value: "v"}, {Key: "viewOn", Value: "w"}, {Key: "pipeline", Value: bson.A{}}}).Err()
	if cmdErrCode(err) != 93 {
		t.Fatalf("cycle: %v", err)
	}
	if n := count("w"); n != 2 {
		t.Fatalf("count through w = %d", n)
	}
	// collMod with a validator on a view is refused.
	err = db.RunCommand(ctx, bson.D{{Key: "collMod", Value: "v"}, {Key: "validator", Value: bson.D{}}}).Err()
	if cmdErrCode(err) != 72 {
		t.Fatalf("validator on a view: %v", err)
	}

	sdNoErr(t, db.Collection("v").Drop(ctx))
	names, err := db.ListCollectionNames(ctx, bson.D{})
	sdNoErr(t, err)
	for _, n := range names {
		if n == "v" {
			t.Fatalf("view still listed after drop: %v", names)
		}
	}
	if n := count("people"); n != 4 {
		t.Fatalf("dropping the view touched the base: %d", n)
	}
	// w now reads a missing namespace: empty.
	if n := count("w"); n != 0 {
		t.Fatalf("view on a dropped view = %d", n)
	}
}

func TestViewReadsInsideATransaction(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("vw")
	seedPeople(t, db)
	sdNoErr(t, db.CreateView(ctx, "oslo", "people", mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "city", Value: "oslo"}}}}}))
	sess, err := client.StartSession()
	sdNoErr(t, err)
	defer sess.EndSession(ctx)
	_, err = sess.WithTransaction(ctx, func(ctx context.Context) (any, error) {
		if _, err := db.Collection("people").InsertOne(ctx, bson.D{{Key: "_id", Value: 9}, {Key: "city", Value: "oslo"}}); err != nil {
			return nil, err
		}
		// The view reads the transaction's own write.
		n, err := db.Collection("oslo").CountDocuments(ctx, bson.D{})
		if err != nil {
			return nil, err
		}
		if n != 3 {
			t.Errorf("count through the view inside the transaction = %d, want 3", n)
		}
		return nil, nil
	})
	sdNoErr(t, err)
	// After the commit every reader sees it.
	n, err := db.Collection("oslo").CountDocuments(ctx, bson.D{})
	sdNoErr(t, err)
	if n != 3 {
		t.Fatalf("count after commit = %d", n)
	}
}

func TestViewChangeStreamEvents(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("vwcs")
	seedPeople(t, db)
	cs, err := db.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetShowExpandedEvents(true))
	sdNoErr(t, err)
	defer cs.Close(ctx)
	plain, err := db.Watch(ctx, mongo.Pipeline{})
	sdNoErr(t, err)
	defer plain.Close(ctx)
	sdNoErr(t, db.CreateView(ctx, "v", "people", mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "age", Value: 1}}}}}))
	sdNoErr(t, db.Collection("v").Drop(ctx))
	_, err = db.Collection("people").InsertOne(ctx, bson.D{{Key: "_id", Value: 99}})
	sdNoErr(t, err)

	var events []bson.Raw
	for len(events) < 3 && cs.Next(ctx) {
		events = append(events, append(bson.Raw(nil), cs.Current...))
	}
	sdNoErr(t, cs.Err())
	if got := events[0].Lookup("operationType").StringValue(); got != "create" {
		t.Fatalf("first event = %s", events[0])
	}
	if events[0].Lookup("operationDescription", "viewOn").StringValue() != "people" {
		t.Fatalf("create of a view = %s", events[0])
	}
	if _, err := events[0].LookupErr("collectionUUID"); err == nil {
		t.Fatalf("a view's create event has a collectionUUID: %s", events[0])
	}
	if events[1].Lookup("operationType").StringValue() != "drop" || events[1].Lookup("ns", "coll").StringValue() != "v" {
		t.Fatalf("second event = %s", events[1])
	}
	if events[2].Lookup("operationType").StringValue() != "insert" {
		t.Fatalf("third event = %s", events[2])
	}
	// Without expanded events the view's DDL is not reported.
	if !plain.Next(ctx) {
		t.Fatal(plain.Err())
	}
	if op := plain.Current.Lookup("operationType").StringValue(); op != "insert" {
		t.Fatalf("plain stream saw %s first", plain.Current)
	}
}

func TestViewsThroughRouters(t *testing.T) {
	client, _ := shardedClient(t, 2, options.Client())
	ctx := sdCtx(t)
	db := client.Database("db")
	// An unsharded base: the view and its base live on the primary shard.
	seedPeople(t, db)
	sdNoErr(t, db.CreateView(ctx, "adults", "people", mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "age", Value: bson.D{{Key: "$gte", Value: 18}}}}}}}))
	n, err := db.Collection("adults").CountDocuments(ctx, bson.D{})
	sdNoErr(t, err)
	if n != 3 {
		t.Fatalf("count through the router = %d", n)
	}
	if _, err := db.Collection("adults").InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); cmdErrCode(err) != 166 {
		t.Fatalf("insert into a view through the router: %v", err)
	}
	// A view on a sharded collection fails loudly instead of reading one shard.
	shardCollection(t, ctx, client, "db.h", bson.D{{Key: "k", Value: "hashed"}})
	sdNoErr(t, db.CreateView(ctx, "hv", "h", mongo.Pipeline{}))
	if _, err := db.Collection("hv").Find(ctx, bson.D{}); cmdErrCode(err) != 238 {
		t.Fatalf("find on a view of a sharded collection: %v", err)
	}
}

func TestViewIgnoresBaseCollation(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("vwcoll")
	sdNoErr(t, db.CreateCollection(ctx, "names", options.CreateCollection().SetCollation(&options.Collation{Locale: "en", Strength: 2})))
	_, err := db.Collection("names").InsertMany(ctx, []any{bson.D{{Key: "n", Value: "abc"}}, bson.D{{Key: "n", Value: "ABC"}}})
	sdNoErr(t, err)
	sdNoErr(t, db.CreateView(ctx, "v", "names", mongo.Pipeline{}))
	// The base's case-insensitive default matches both; the view's simple
	// collation matches one, through find and aggregate alike.
	n, err := db.Collection("names").CountDocuments(ctx, bson.D{{Key: "n", Value: "abc"}})
	sdNoErr(t, err)
	if n != 2 {
		t.Fatalf("base count = %d", n)
	}
	for what, count := range map[string]func() (int64, error){
		"countDocuments": func() (int64, error) { return db.Collection("v").CountDocuments(ctx, bson.D{{Key: "n", Value: "abc"}}) },
		"find": func() (int64, error) {
			cur, err := db.Collection("v").Find(ctx, bson.D{{Key: "n", Value: "abc"}})
			if err != nil {
				return 0, err
			}
			var docs []bson.M
			err = cur.All(ctx, &docs)
			return int64(len(docs)), err
		},
	} {
		n, err := count()
		sdNoErr(t, err)
		if n != 1 {
			t.Errorf("%s through the view = %d, want 1", what, n)
		}
	}
}
