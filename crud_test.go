package sturdy_test

import (
	"errors"
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/mongosim"
)

type item struct {
	ID  int    `bson:"_id"`
	Cat string `bson:"cat"`
	N   int    `bson:"n"`
}

func TestInsertOneGeneratesIDFirst(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	c := connect(t, cluster.URI(), nil)
	coll := c.Database("db").Collection("ids")

	res, err := coll.InsertOne(ctx, d("a", 1, "b", "x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	id, ok := res.InsertedID.(bson.ObjectID)
	if !ok || id.IsZero() || !res.Acknowledged {
		t.Fatalf("InsertedID = %#v (%T), acknowledged %v", res.InsertedID, res.InsertedID, res.Acknowledged)
	}
	raw, err := coll.FindOne(ctx, d("_id", id), nil).Raw()
	if err != nil {
		t.Fatal(err)
	}
	elems, _ := raw.Elements()
	if len(elems) != 3 || elems[0].Key() != "_id" || elems[1].Key() != "a" {
		t.Fatalf("stored document %v: want _id first, then a, b", raw)
	}

	// A caller's _id is kept as is.
	res, err = coll.InsertOne(ctx, bson.M{"_id": "mine", "v": 1}, nil)
	if err != nil || res.InsertedID != "mine" {
		t.Fatalf("InsertOne with _id: %v %#v", err, res)
	}
	// The same _id again: duplicate key, as a WriteException.
	_, err = coll.InsertOne(ctx, bson.M{"_id": "mine"}, nil)
	var we *sturdy.WriteException
	if !errors.As(err, &we) || !sturdy.IsDuplicateKey(err) || len(we.WriteErrors) != 1 || we.WriteErrors[0].Code != 11000 {
		t.Fatalf("duplicate insert: %v", err)
	}
}

func TestCRUDRoundTrip(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	c := connect(t, cluster.URI(), nil)
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	coll := c.Database("shop").Collection("items")

	docs := []any{}
	for i := 1; i <= 10; i++ {
		cat := "odd"
		if i%2 == 0 {
			cat = "even"
		}
		docs = append(docs, item{ID: i, Cat: cat, N: i * 10})
	}
	im, err := coll.InsertMany(ctx, docs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(im.InsertedIDs) != 10 || im.InsertedIDs[3] != int32(4) {
		t.Fatalf("InsertedIDs = %#v", im.InsertedIDs)
	}

	// Find with filter, sort, skip, limit and projection.
	cur, err := coll.Find(ctx, d("cat", "even"), &sturdy.FindOptions{
		Sort: d("n", -1), Skip: 1, Limit: 3, Projection: d("n", 1),
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []bson.M
	if err := cur.All(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("Find returned %d docs: %v", len(got), got)
	}
	for i, want := range []int32{8, 6, 4} {
		if got[i]["_id"] != want || got[i]["cat"] != nil {
			t.Fatalf("doc %d = %v, want _id %d without cat", i, got[i], want)
		}
	}

	// FindOne and ErrNoDocuments.
	var one item
	if err := coll.FindOne(ctx, d("_id", 7), nil).Decode(&one); err != nil || one.N != 70 {
		t.Fatalf("FindOne: %v %+v", err, one)
	}
	if err := coll.FindOne(ctx, d("_id", 99), nil).Err(); !errors.Is(err, sturdy.ErrNoDocuments) {
		t.Fatalf("FindOne missing: %v", err)
	}

	// Updates.
	ur, err := coll.UpdateOne(ctx, d("_id", 1), d("$inc", d("n", 1)), nil)
	if err != nil || ur.MatchedCount != 1 || ur.ModifiedCount != 1 || ur.UpsertedID != nil {
		t.Fatalf("UpdateOne: %v %+v", err, ur)
	}
	ur, err = coll.UpdateMany(ctx, d("cat", "odd"), d("$set", d("flag", true)), nil)
	if err != nil || ur.MatchedCount != 5 || ur.ModifiedCount != 5 {
		t.Fatalf("UpdateMany: %v %+v", err, ur)
	}
	ur, err = coll.UpdateOne(ctx, d("_id", 11), d("$set", d("cat", "new")), &sturdy.UpdateOptions{Upsert: true})
	if err != nil || ur.UpsertedCount != 1 || ur.UpsertedID != int32(11) || ur.MatchedCount != 0 {
		t.Fatalf("upsert: %v %+v", err, ur)
	}
	ur, err = coll.ReplaceOne(ctx, d("_id", 2), d("cat", "replaced", "n", 0), nil)
	if err != nil || ur.MatchedCount != 1 {
		t.Fatalf("ReplaceOne: %v %+v", err, ur)
	}
	if err := coll.FindOne(ctx, d("_id", 2), nil).Decode(&one); err != nil || one.Cat != "replaced" || one.N != 0 {
		t.Fatalf("after replace: %v %+v", err, one)
	}

	// FindOneAnd*.
	var before, after item
	if err := coll.FindOneAndUpdate(ctx, d("_id", 3), d("$inc", d("n", 5)), nil).Decode(&before); err != nil || before.N != 30 {
		t.Fatalf("FindOneAndUpdate before: %v %+v", err, before)
	}
	if err := coll.FindOneAndUpdate(ctx, d("_id", 3), d("$inc", d("n", 5)),
		&sturdy.FindOneAndUpdateOptions{ReturnDocument: sturdy.After}).Decode(&after); err != nil || after.N != 40 {
		t.Fatalf("FindOneAndUpdate after: %v %+v", err, after)
	}
	if err := coll.FindOneAndUpdate(ctx, d("_id", 50), d("$set", d("n", 1)),
		&sturdy.FindOneAndUpdateOptions{Upsert: true, ReturnDocument: sturdy.After, Projection: d("n", 1)}).Decode(&after); err != nil || after.ID != 50 || after.N != 1 {
		t.Fatalf("FindOneAndUpdate upsert: %v %+v", err, after)
	}
	if err := coll.FindOneAndUpdate(ctx, d("_id", 51), d("$set", d("n", 1)), nil).Err(); !errors.Is(err, sturdy.ErrNoDocuments) {
		t.Fatalf("FindOneAndUpdate no match: %v", err)
	}
	if err := coll.FindOneAndReplace(ctx, d("cat", "even"), d("cat", "r"), &sturdy.FindOneAndReplaceOptions{
		Sort: d("n", -1), ReturnDocument: sturdy.After}).Decode(&after); err != nil || after.ID != 10 || after.Cat != "r" {
		t.Fatalf("FindOneAndReplace: %v %+v", err, after)
	}
	if err := coll.FindOneAndDelete(ctx, d("_id", 50), nil).Decode(&before); err != nil || before.ID != 50 {
		t.Fatalf("FindOneAndDelete: %v %+v", err, before)
	}

	// Counting and distinct.
	n, err := coll.CountDocuments(ctx, d("cat", "odd"), nil)
	if err != nil || n != 5 {
		t.Fatalf("CountDocuments: %v %d", err, n)
	}
	n, err = coll.CountDocuments(ctx, nil, &sturdy.CountOptions{Skip: 2, Limit: 4})
	if err != nil || n != 4 {
		t.Fatalf("CountDocuments skip/limit: %v %d", err, n)
	}
	n, err = coll.CountDocuments(ctx, d("cat", "none"), nil)
	if err != nil || n != 0 {
		t.Fatalf("CountDocuments none: %v %d", err, n)
	}
	n, err = coll.EstimatedDocumentCount(ctx, nil)
	if err != nil || n != 11 {
		t.Fatalf("EstimatedDocumentCount: %v %d", err, n)
	}
	vals, err := coll.Distinct(ctx, "cat", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cats := []string{}
	for _, v := range vals {
		cats = append(cats, v.(string))
	}
	slices.Sort(cats)
	if !slices.Equal(cats, []string{"even", "new", "odd", "r", "replaced"}) {
		t.Fatalf("Distinct = %v", cats)
	}

	// Aggregate.
	cur, err = coll.Aggregate(ctx, []bson.D{
		{{Key: "$match", Value: d("cat", "odd")}},
		{{Key: "$group", Value: d("_id", "$cat", "total", d("$sum", "$n"))}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var groups []bson.M
	if err := cur.All(ctx, &groups); err != nil {
		t.Fatal(err)
	}
	// 11 + 40 + 50 + 70 + 90 after the updates above.
	if len(groups) != 1 || groups[0]["total"] != int32(261) {
		t.Fatalf("Aggregate = %v", groups)
	}

	// Deletes.
	dr, err := coll.DeleteOne(ctx, d("cat", "odd"), nil)
	if err != nil || dr.DeletedCount != 1 {
		t.Fatalf("DeleteOne: %v %+v", err, dr)
	}
	dr, err = coll.DeleteMany(ctx, d("cat", "odd"), nil)
	if err != nil || dr.DeletedCount != 4 {
		t.Fatalf("DeleteMany: %v %+v", err, dr)
	}

	// Indexes, listing, RunCommand, drop.
	name, err := coll.CreateIndex(ctx, sturdy.IndexModel{Keys: d("cat", 1, "n", -1), Options: &sturdy.IndexOptions{Unique: ptr(true)}}, nil)
	if err != nil || name != "cat_1_n_-1" {
		t.Fatalf("CreateIndex: %v %q", err, name)
	}
	_, err = coll.InsertOne(ctx, d("cat", "replaced", "n", 0), nil)
	if !sturdy.IsDuplicateKey(err) {
		t.Fatalf("unique index violation: %v", err)
	}
	icur, err := coll.ListIndexes(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var idx []bson.M
	if err := icur.All(ctx, &idx); err != nil || len(idx) != 2 || idx[1]["name"] != "cat_1_n_-1" {
		t.Fatalf("ListIndexes: %v %v", err, idx)
	}
	names, err := c.Database("shop").ListCollectionNames(ctx, nil, nil)
	if err != nil || !slices.Contains(names, "items") {
		t.Fatalf("ListCollectionNames: %v %v", err, names)
	}
	dbs, err := c.ListDatabaseNames(ctx, nil, nil)
	if err != nil || !slices.Contains(dbs, "shop") {
		t.Fatalf("ListDatabaseNames: %v %v", err, dbs)
	}
	reply, err := c.Database("shop").RunCommand(ctx, d("count", "items"), nil)
	if err != nil || reply.Lookup("n").AsInt64() != 6 {
		t.Fatalf("RunCommand count: %v %v", err, reply)
	}
	if err := coll.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := coll.Drop(ctx); err != nil {
		t.Fatalf("dropping a missing collection: %v", err)
	}
	n, err = coll.EstimatedDocumentCount(ctx, nil)
	if err != nil || n != 0 {
		t.Fatalf("count after drop: %v %d", err, n)
	}
}

func TestArgumentValidation(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	rec := &recorder{}
	c := connect(t, cluster.URI(), func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	coll := c.Database("db").Collection("v")

	cases := []struct {
		name string
		err  error
	}{
		{"update without operators", func() error { _, err := coll.UpdateOne(ctx, nil, d("a", 1), nil); return err }()},
		{"empty update", func() error { _, err := coll.UpdateMany(ctx, nil, bson.D{}, nil); return err }()},
		{"nil update", func() error { _, err := coll.UpdateOne(ctx, nil, nil, nil); return err }()},
		{"replacement with operators", func() error { _, err := coll.ReplaceOne(ctx, nil, d("$set", d("a", 1)), nil); return err }()},
		{"FindOneAndUpdate without operators", coll.FindOneAndUpdate(ctx, nil, d("a", 1), nil).Err()},
		{"FindOneAndReplace with operators", coll.FindOneAndReplace(ctx, nil, d("$inc", d("a", 1)), nil).Err()},
		{"nil insert", func() error { _, err := coll.InsertOne(ctx, nil, nil); return err }()},
		{"no documents", func() error { _, err := coll.InsertMany(ctx, nil, nil); return err }()},
		{"not a document", func() error { _, err := coll.InsertOne(ctx, 42, nil); return err }()},
		{"bulk update without operators", func() error {
			_, err := coll.BulkWrite(ctx, []sturdy.WriteModel{&sturdy.UpdateOneModel{Filter: nil, Update: d("x", 1)}}, nil)
			return err
		}()},
		{"bulk nil model", func() error { _, err := coll.BulkWrite(ctx, []sturdy.WriteModel{nil}, nil); return err }()},
		{"All into a non-slice", func() error {
			cur, err := coll.Find(ctx, nil, nil)
			if err != nil {
				return err
			}
			var x int
			return cur.All(ctx, &x)
		}()},
	}
	for _, tc := range cases {
		if tc.err == nil {
			t.Errorf("%s: no error", tc.name)
		} else if !errors.Is(tc.err, sturdy.ErrInvalidArgument) && !errors.Is(tc.err, sturdy.ErrNilDocument) && !errors.Is(tc.err, sturdy.ErrEmptySlice) {
			t.Errorf("%s: unexpected error type %v", tc.name, tc.err)
		}
	}
	// Pipelines are valid updates.
	if _, err := coll.UpdateOne(ctx, nil, bson.A{d("$set", d("a", 1))}, &sturdy.UpdateOptions{Upsert: true}); err != nil {
		t.Fatalf("pipeline update: %v", err)
	}
	for _, e := range rec.startedNamed("update") {
		if u := commandField(e, "updates"); u.Type != bson.TypeArray {
			t.Errorf("update event without updates: %v", e.Command)
		}
	}
	if n := len(rec.startedNamed("update")); n != 1 {
		t.Fatalf("%d update commands sent, want only the valid one", n)
	}
}

func TestTypedErrors(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	c := connect(t, cluster.URI(), nil)

	_, err := c.Database("db").RunCommand(ctx, d("noSuchCommand", 1), nil)
	var ce *sturdy.CommandError
	if !errors.As(err, &ce) || ce.Code != 59 {
		t.Fatalf("unknown command: %v", err)
	}
	if sturdy.IsNetworkError(err) || sturdy.IsTimeout(err) || sturdy.IsDuplicateKey(err) {
		t.Fatal("misclassified command error")
	}

	if err := c.Disconnect(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Database("db").Collection("c").InsertOne(ctx, d("a", 1), nil); !errors.Is(err, sturdy.ErrClientDisconnected) {
		t.Fatalf("after Disconnect: %v", err)
	}
	if err := c.Disconnect(ctx); !errors.Is(err, sturdy.ErrClientDisconnected) {
		t.Fatalf("second Disconnect: %v", err)
	}
}

func TestConnectURIAndDatabaseCommands(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	c, err := sturdy.Connect(ctx, cluster.URI())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Disconnect(ctx); err != nil {
			t.Error(err)
		}
	}()
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	db := c.Database("agg")
	src := db.Collection("src")
	if _, err := src.InsertMany(ctx, []any{d("_id", 1, "v", 1), d("_id", 2, "v", 2), d("_id", 3, "v", 3)}, nil); err != nil {
		t.Fatal(err)
	}
	// A pipeline ending in $out is a write: it runs and the output appears.
	cur, err := src.Aggregate(ctx, bson.A{d("$match", d("v", d("$gte", 2))), d("$out", "dst")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = cur.Close(ctx)
	if n, err := db.Collection("dst").CountDocuments(ctx, nil, nil); err != nil || n != 2 {
		t.Fatalf("$out wrote %d documents, %v", n, err)
	}
	// A database-level aggregation.
	cur, err = db.Aggregate(ctx, bson.A{d("$documents", bson.A{d("x", 1), d("x", 2)})}, nil)
	if err == nil {
		var out []bson.M
		if err := cur.All(ctx, &out); err != nil || len(out) != 2 {
			t.Fatalf("$documents: %v %v", err, out)
		}
	} else {
		var ce *sturdy.CommandError
		if !errors.As(err, &ce) {
			t.Fatalf("database aggregate: %v", err)
		}
		t.Logf("database-level aggregate unsupported by mongosim: %v", err)
	}
	if err := db.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	names, err := c.ListDatabaseNames(ctx, nil, nil)
	if err != nil || slices.Contains(names, "agg") {
		t.Fatalf("after Drop: %v %v", names, err)
	}
}

func TestRetryableWriteEligibility(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	rec := &recorder{}
	c := connect(t, cluster.URI(), func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	coll := c.Database("db").Collection("elig")
	steps := []struct {
		name      string
		run       func() error
		command   string
		retryable bool
	}{
		{"InsertOne", func() error { _, err := coll.InsertOne(ctx, d("_id", 1, "a", 1), nil); return err }, "insert", true},
		{"InsertMany", func() error { _, err := coll.InsertMany(ctx, []any{d("_id", 2), d("_id", 3)}, nil); return err }, "insert", true},
		{"UpdateOne", func() error { _, err := coll.UpdateOne(ctx, d("_id", 1), d("$inc", d("a", 1)), nil); return err }, "update", true},
		{"ReplaceOne", func() error { _, err := coll.ReplaceOne(ctx, d("_id", 1), d("a", 5), nil); return err }, "update", true},
		{"UpdateMany", func() error { _, err := coll.UpdateMany(ctx, nil, d("$inc", d("a", 1)), nil); return err }, "update", false},
		{"FindOneAndUpdate", func() error { return coll.FindOneAndUpdate(ctx, d("_id", 1), d("$inc", d("a", 1)), nil).Err() }, "findAndModify", true},
		{"DeleteOne", func() error { _, err := coll.DeleteOne(ctx, d("_id", 3), nil); return err }, "delete", true},
		{"DeleteMany", func() error { _, err := coll.DeleteMany(ctx, d("_id", 2), nil); return err }, "delete", false},
		{"RunCommand insert", func() error {
			_, err := c.Database("db").RunCommand(ctx, d("insert", "elig", "documents", bson.A{d("_id", 9)}), nil)
			return err
		}, "insert", false},
	}
	for _, s := range steps {
		rec.reset()
		if err := s.run(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		evs := rec.startedNamed(s.command)
		if len(evs) != 1 {
			t.Fatalf("%s: %d %s commands", s.name, len(evs), s.command)
		}
		if got := evs[0].TxnNumber != nil; got != s.retryable {
			t.Errorf("%s: txnNumber sent = %v, want %v", s.name, got, s.retryable)
		}
	}
}
