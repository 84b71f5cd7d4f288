package mongosim

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// ids lists the _id of each document, in order.
func ids(docs []bson.D) string {
	var out []string
	for _, d := range docs {
		out = append(out, fmt.Sprint(d[0].Value))
	}
	return strings.Join(out, ",")
}

// winningStages names the stages of explain's winning plan, root first,
// with the index name and direction of an IXSCAN or COLLSCAN.
func winningStages(t *testing.T, db *mongo.Database, find bson.D) string {
	t.Helper()
	var reply bson.D
	err := db.RunCommand(sdCtx(t), bson.D{{Key: "explain", Value: find}, {Key: "verbosity", Value: "queryPlanner"}}).Decode(&reply)
	sdNoErr(t, err)
	qp, _ := lookupD(reply, "queryPlanner")
	wp, _ := lookupD(qp.(bson.D), "winningPlan")
	var parts []string
	for st, _ := wp.(bson.D); st != nil; {
		name, _ := lookupD(st, "stage")
		s := fmt.Sprint(name)
		if ix, ok := lookupD(st, "indexName"); ok {
			s += " " + fmt.Sprint(ix)
		}
		if dir, ok := lookupD(st, "direction"); ok {
			s += " " + fmt.Sprint(dir)
		}
		parts = append(parts, s)
		in, _ := lookupD(st, "inputStage")
		st, _ = in.(bson.D)
	}
	return strings.Join(parts, " < ")
}

func TestFindReturnsIndexOrder(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("plan")
	coll := db.Collection("c")
	_, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 3}, {Key: "a", Value: 5}, {Key: "u", Value: 1}},
		bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}, {Key: "u", Value: 1}},
		bson.D{{Key: "_id", Value: 4}, {Key: "a", Value: 3}, {Key: "u", Value: 1}},
		bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: 3}, {Key: "u", Value: 1}},
	})
	sdNoErr(t, err)

	// An _id $in (an ODM's populate) walks the _id index.
	byIn := bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{4, 3, 2, 1}}}}}
	if got := ids(sdFindAll(t, ctx, coll, byIn)); got != "1,2,3,4" {
		t.Fatalf("find _id $in: %s, want index order 1,2,3,4", got)
	}
	if got := winningStages(t, db, bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: byIn}}); got != "FETCH < IXSCAN _id_ forward" {
		t.Fatalf("explain _id $in: %s", got)
	}
	// So does an aggregate's leading $match.
	cur, err := coll.Aggregate(ctx, bson.A{bson.D{{Key: "$match", Value: byIn}}})
	sdNoErr(t, err)
	var agg []bson.D
	sdNoErr(t, cur.All(ctx, &agg))
	if got := ids(agg); got != "1,2,3,4" {
		t.Fatalf("aggregate $match _id $in: %s, want index order 1,2,3,4", got)
	}
	// A filter no index answers scans the collection: insertion order.
	if got := ids(sdFindAll(t, ctx, coll, bson.D{{Key: "u", Value: 1}})); got != "3,1,4,2" {
		t.Fatalf("collection scan: %s, want natural order 3,1,4,2", got)
	}

	_, err = coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "a", Value: -1}}})
	sdNoErr(t, err)
	// A descending index: larger keys first, equal keys in insertion order.
	gte := bson.D{{Key: "a", Value: bson.D{{Key: "$gte", Value: 0}}}}
	if got := ids(sdFindAll(t, ctx, coll, gte)); got != "3,4,2,1" {
		t.Fatalf("find on {a: -1}: %s, want 3,4,2,1", got)
	}
	// A sort the index answers walks it backwards: equal keys reversed.
	sorted := sdFindAll(t, ctx, coll, bson.D{}, options.Find().SetSort(bson.D{{Key: "a", Value: 1}}))
	if got := ids(sorted); got != "1,2,4,3" {
		t.Fatalf("sort {a: 1} over {a: -1}: %s, want 1,2,4,3", got)
	}
	if got := winningStages(t, db, bson.D{{Key: "find", Value: "c"}, {Key: "sort", Value: bson.D{{Key: "a", Value: 1}}}}); got != "FETCH < IXSCAN a_-1 backward" {
		t.Fatalf("explain sort: %s", got)
	}
	// With a limit, the index scan's first documents.
	limited := sdFindAll(t, ctx, coll, gte, options.Find().SetLimit(2))
	if got := ids(limited); got != "3,4" {
		t.Fatalf("find on {a: -1} limit 2: %s, want 3,4", got)
	}
}

func TestFindMultikeyIndexOrder(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("plan").Collection("m")
	_, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: bson.A{5, 1}}},
		bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: 3}},
	})
	sdNoErr(t, err)
	_, err = coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "a", Value: 1}}})
	sdNoErr(t, err)
	// Each document comes at its first key within the bounds.
	if got := ids(sdFindAll(t, ctx, coll, bson.D{{Key: "a", Value: bson.D{{Key: "$gte", Value: 0}}}})); got != "1,2" {
		t.Fatalf("a >= 0: %s, want 1,2", got)
	}
	if got := ids(sdFindAll(t, ctx, coll, bson.D{{Key: "a", Value: bson.D{{Key: "$gte", Value: 2}}}})); got != "2,1" {
		t.Fatalf("a >= 2: %s, want 2,1", got)
	}
}

func TestFindHints(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("plan")
	coll := db.Collection("h")
	_, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "b", Value: "z"}},
		bson.D{{Key: "_id", Value: 2}},
		bson.D{{Key: "_id", Value: 3}, {Key: "b", Value: "a"}},
		bson.D{{Key: "_id", Value: 4}, {Key: "c", Value: 1}},
	})
	sdNoErr(t, err)
	_, err = coll.Indexes().CreateMany(ctx, []mongo.IndexModel{
		{Keys: bson.D{{Key: "b", Value: 1}}},
		{Keys: bson.D{{Key: "c", Value: 1}}, Options: options.Index().SetSparse(true)},
	})
	sdNoErr(t, err)

	// By name and by key pattern: the hinted index's order (missing b is
	// null, before strings).
	for _, hint := range []any{"b_1", bson.D{{Key: "b", Value: 1}}} {
		if got := ids(sdFindAll(t, ctx, coll, bson.D{}, options.Find().SetHint(hint))); got != "2,4,3,1" {
			t.Fatalf("hint %v: %s, want 2,4,3,1", hint, got)
		}
	}
	// A hinted sparse index holds only the documents with the field.
	if got := ids(sdFindAll(t, ctx, coll, bson.D{}, options.Find().SetHint("c_1"))); got != "4" {
		t.Fatalf("hint sparse c_1: %s, want 4", got)
	}
	n, err := coll.CountDocuments(ctx, bson.D{}, options.Count().SetHint("c_1"))
	sdNoErr(t, err)
	if n != 1 {
		t.Fatalf("count with sparse hint: %d, want 1", n)
	}
	var distinct bson.D
	err = db.RunCommand(ctx, bson.D{{Key: "distinct", Value: "h"}, {Key: "key", Value: "_id"}, {Key: "hint", Value: "c_1"}}).Decode(&distinct)
	sdNoErr(t, err)
	if v, _ := lookupD(distinct, "values"); fmt.Sprint(v) != "[4]" {
		t.Fatalf("distinct with sparse hint: %v, want [4]", distinct)
	}
	// Without the hint the sparse index is not used for {}: all documents.
	if got := ids(sdFindAll(t, ctx, coll, bson.D{})); got != "1,2,3,4" {
		t.Fatalf("no hint: %s", got)
	}
	// $natural: natural order and its reverse.
	if got := ids(sdFindAll(t, ctx, coll, bson.D{}, options.Find().SetHint(bson.D{{Key: "$natural", Value: -1}}))); got != "4,3,2,1" {
		t.Fatalf("hint $natural -1: %s", got)
	}
	if got := ids(sdFindAll(t, ctx, coll, bson.D{{Key: "b", Value: bson.D{{Key: "$gte", Value: ""}}}}, options.Find().SetHint(bson.D{{Key: "$natural", Value: 1}}))); got != "1,3" {
		t.Fatalf("hint $natural 1: %s", got)
	}
	natural := bson.D{{Key: "find", Value: "h"}, {Key: "filter", Value: bson.D{{Key: "b", Value: "a"}}}, {Key: "hint", Value: bson.D{{Key: "$natural", Value: -1}}}}
	if got := winningStages(t, db, natural); got != "COLLSCAN backward" {
		t.Fatalf("explain $natural hint: %s", got)
	}
	// A hint naming no index.
	for _, hint := range []any{"nope", bson.D{{Key: "x", Value: 1}}} {
		_, err = coll.Find(ctx, bson.D{}, options.Find().SetHint(hint))
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != 2 || ce.Message != "hint provided does not correspond to an existing index" {
			t.Fatalf("hint %v: %v, want 2 BadValue", hint, err)
		}
	}
}

func TestExplainPartialAndSparseIndexes(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("plan")
	coll := db.Collection("p")
	for i := 1; i <= 6; i++ {
		_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 7 - i}, {Key: "a", Value: 7 - i}, {Key: "s", Value: "x"}})
		sdNoErr(t, err)
	}
	_, err := coll.Indexes().CreateMany(ctx, []mongo.IndexModel{
		{Keys: bson.D{{Key: "a", Value: 1}}, Options: options.Index().SetPartialFilterExpression(bson.D{{Key: "a", Value: bson.D{{Key: "$gt", Value: 2}}}})},
		{Keys: bson.D{{Key: "s", Value: 1}}, Options: options.Index().SetSparse(true)},
	})
	sdNoErr(t, err)
	cases := []struct {
		filter bson.D
		want   string
	}{
		{bson.D{{Key: "a", Value: bson.D{{Key: "$gt", Value: 3}}}}, "FETCH < IXSCAN a_1 forward"},
		{bson.D{{Key: "a", Value: bson.D{{Key: "$gte", Value: 3}, {Key: "$lt", Value: 6}}}}, "FETCH < IXSCAN a_1 forward"},
		{bson.D{{Key: "a", Value: 4}}, "FETCH < IXSCAN a_1 forward"},
		{bson.D{{Key: "a", Value: bson.D{{Key: "$in", Value: bson.A{3, 5}}}}}, "FETCH < IXSCAN a_1 forward"},
		{bson.D{{Key: "a", Value: bson.D{{Key: "$gt", Value: 2}}}}, "FETCH < IXSCAN a_1 forward"},
		{bson.D{{Key: "a", Value: bson.D{{Key: "$gte", Value: 2}}}}, "COLLSCAN forward"},
		{bson.D{{Key: "a", Value: bson.D{{Key: "$in", Value: bson.A{1, 5}}}}}, "COLLSCAN forward"},
		{bson.D{{Key: "a", Value: "x"}}, "COLLSCAN forward"},
		{bson.D{{Key: "s", Value: "x"}}, "FETCH < IXSCAN s_1 forward"},
		{bson.D{{Key: "s", Value: nil}}, "COLLSCAN forward"},
	}
	for _, tc := range cases {
		got := winningStages(t, db, bson.D{{Key: "find", Value: "p"}, {Key: "filter", Value: tc.filter}})
		if got != tc.want {
			t.Errorf("explain %v: %s, want %s", tc.filter, got, tc.want)
		}
	}
	// The partial index's order is the find's order.
	got := ids(sdFindAll(t, ctx, coll, bson.D{{Key: "a", Value: bson.D{{Key: "$gt", Value: 3}}}}))
	if got != "4,5,6" {
		t.Fatalf("find a > 3: %s, want 4,5,6", got)
	}
}

// A single-document write takes the first match in the plan's order, as
// mongod's update and delete stages do.
func TestSingleWritesFollowPlanOrder(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("plan").Collection("w")
	_, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 5}},
		bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: 1}},
		bson.D{{Key: "_id", Value: 3}, {Key: "a", Value: 3}, {Key: "s", Value: 1}},
		bson.D{{Key: "_id", Value: 4}, {Key: "a", Value: 4}},
	})
	sdNoErr(t, err)
	_, err = coll.Indexes().CreateMany(ctx, []mongo.IndexModel{
		{Keys: bson.D{{Key: "a", Value: 1}}},
		{Keys: bson.D{{Key: "s", Value: 1}}, Options: options.Index().SetSparse(true)},
	})
	sdNoErr(t, err)
	res, err := coll.UpdateOne(ctx, bson.D{{Key: "a", Value: bson.D{{Key: "$gt", Value: 0}}}}, bson.D{{Key: "$set", Value: bson.D{{Key: "hit", Value: 1}}}})
	sdNoErr(t, err)
	if res.ModifiedCount != 1 {
		t.Fatalf("updateOne: %+v", res)
	}
	if got := ids(sdFindAll(t, ctx, coll, bson.D{{Key: "hit", Value: 1}})); got != "2" {
		t.Fatalf("updateOne a > 0 updated %s, want 2 (the smallest a)", got)
	}
	var doc bson.D
	err = coll.FindOneAndUpdate(ctx, bson.D{{Key: "a", Value: bson.D{{Key: "$in", Value: bson.A{5, 4}}}}}, bson.D{{Key: "$set", Value: bson.D{{Key: "hit", Value: 2}}}}).Decode(&doc)
	sdNoErr(t, err)
	if doc[0].Value != int32(4) {
		t.Fatalf("findOneAndUpdate a in [5, 4]: %v, want _id 4", doc)
	}
	_, err = coll.DeleteOne(ctx, bson.D{{Key: "a", Value: bson.D{{Key: "$gte", Value: 3}}}})
	sdNoErr(t, err)
	if got := ids(sdFindAll(t, ctx, coll, bson.D{}, options.Find().SetHint(bson.D{{Key: "$natural", Value: 1}}))); got != "1,2,4" {
		t.Fatalf("after deleteOne a >= 3: %s, want 1,2,4", got)
	}
	// $natural -1 takes the last document; a hinted sparse index hides
	// the documents without its field.
	_, err = coll.UpdateOne(ctx, bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "last", Value: true}}}}, options.UpdateOne().SetHint(bson.D{{Key: "$natural", Value: -1}}))
	sdNoErr(t, err)
	if got := ids(sdFindAll(t, ctx, coll, bson.D{{Key: "last", Value: true}})); got != "4" {
		t.Fatalf("updateOne $natural -1 updated %s, want 4", got)
	}
	many, err := coll.UpdateMany(ctx, bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "sp", Value: true}}}}, options.UpdateMany().SetHint("s_1"))
	sdNoErr(t, err)
	if many.MatchedCount != 0 {
		t.Fatalf("updateMany hinting s_1 matched %d; the only document with s was deleted", many.MatchedCount)
	}
}

// TestPointReadAnswersAsPlanned: a find by _id (no plan, stored bytes)
// answers with the bytes of the same find planned through the _id index
// (hinted), for each kind of _id; a string _id under a case-insensitive
// collation, which two documents match, is still answered in _id index
// order; an updateOne by _id changes the one document it names.
func TestPointReadAnswersAsPlanned(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("plan").Collection("point")
	docs := []any{
		bson.D{{Key: "_id", Value: "b"}, {Key: "v", Value: 1}},
		bson.D{{Key: "_id", Value: int64(7)}, {Key: "v", Value: bson.A{1, "x"}}},
		bson.D{{Key: "_id", Value: bson.D{{Key: "k", Value: 1}}}, {Key: "v", Value: 3}},
		bson.D{{Key: "_id", Value: "B"}, {Key: "v", Value: 4}},
		bson.D{{Key: "_id", Value: 2.5}, {Key: "v", Value: bson.D{{Key: "n", Value: nil}}}},
	}
	_, err := coll.InsertMany(ctx, docs)
	sdNoErr(t, err)
	raw := func(filter bson.D, opts ...options.Lister[options.FindOptions]) string {
		t.Helper()
		cur, err := coll.Find(ctx, filter, opts...)
		sdNoErr(t, err)
		var out []string
		for cur.Next(ctx) {
			out = append(out, cur.Current.String())
		}
		sdNoErr(t, cur.Err())
		return strings.Join(out, ";")
	}
	hinted := options.Find().SetHint(bson.D{{Key: "_id", Value: 1}})
	for _, d := range docs {
		id := d.(bson.D)[0].Value
		for _, filter := range []bson.D{{{Key: "_id", Value: id}}, {{Key: "_id", Value: bson.D{{Key: "$eq", Value: id}}}}} {
			got, want := raw(filter), raw(filter, hinted)
			if got == "" || got != want {
				t.Errorf("find %v: %s, planned %s", filter, got, want)
			}
		}
	}
	if got := raw(bson.D{{Key: "_id", Value: 7}}, options.Find().SetLimit(1)); !strings.Contains(got, `"$numberLong":"7"`) {
		t.Errorf("find {_id: 7} (an int32 for an int64 _id): %s", got)
	}
	ci := options.Find().SetCollation(&options.Collation{Locale: "en", Strength: 2})
	if got := raw(bson.D{{Key: "_id", Value: "b"}}, ci); !strings.HasPrefix(got, `{"_id": "B"`) || strings.Count(got, "_id") != 2 {
		t.Errorf("collated find {_id: 'b'}: %s, want B then b", got)
	}
	r, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 2.5}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})
	sdNoErr(t, err)
	if r.MatchedCount != 1 || r.ModifiedCount != 1 {
		t.Errorf("updateOne by _id: %+v", r)
	}
	if got := raw(bson.D{{Key: "n", Value: 1}}); !strings.Contains(got, `"_id": {"$numberDouble":"2.5"}`) || strings.Count(got, "_id") != 1 {
		t.Errorf("after updateOne by _id 2.5: %s", got)
	}
}
