package mongosim

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// The newer stages and operators answer the official driver as mongod
// would: $bucket with an n-accumulator, $dateTrunc with $dateDiff, and
// $graphLookup across collections.
func TestAggregationStagesThroughTheOfficialDriver(t *testing.T) {
	c := Start(t)
	ctx := testCtx(t)
	db := connect(t, c.URI()).Database("shop")
	day := func(d int) time.Time { return time.Date(2024, 3, d, 10, 0, 0, 0, time.UTC) }
	if _, err := db.Collection("orders").InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "total", Value: 5}, {Key: "at", Value: day(4)}},
		bson.D{{Key: "_id", Value: 2}, {Key: "total", Value: 15}, {Key: "at", Value: day(5)}},
		bson.D{{Key: "_id", Value: 3}, {Key: "total", Value: 25}, {Key: "at", Value: day(12)}},
		bson.D{{Key: "_id", Value: 4}, {Key: "total", Value: 18}, {Key: "at", Value: day(13)}},
	}); err != nil {
		t.Fatal(err)
	}
	cur, err := db.Collection("orders").Aggregate(ctx, mongo.Pipeline{
		{{Key: "$bucket", Value: bson.D{{Key: "groupBy", Value: "$total"}, {Key: "boundaries", Value: bson.A{0, 10, 20}},
			{Key: "default", Value: "big"},
			{Key: "output", Value: bson.D{{Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}},
				{Key: "top", Value: bson.D{{Key: "$topN", Value: bson.D{{Key: "n", Value: 1}, {Key: "sortBy", Value: bson.D{{Key: "total", Value: -1}}}, {Key: "output", Value: "$_id"}}}}}}}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var buckets []bson.M
	if err := cur.All(ctx, &buckets); err != nil {
		t.Fatal(err)
	}
	want := []bson.M{{"_id": int32(0), "n": int32(1), "top": bson.A{int32(1)}}, {"_id": int32(10), "n": int32(2), "top": bson.A{int32(4)}}, {"_id": "big", "n": int32(1), "top": bson.A{int32(3)}}}
	if len(buckets) != len(want) {
		t.Fatalf("buckets %v", buckets)
	}
	for i := range want {
		for k, v := range want[i] {
			if got := buckets[i][k]; !sameValue(got, v) {
				t.Errorf("bucket %d field %s = %v, want %v", i, k, got, v)
			}
		}
	}

	cur, err = db.Collection("orders").Aggregate(ctx, mongo.Pipeline{
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: bson.D{{Key: "$dateTrunc", Value: bson.D{{Key: "date", Value: "$at"}, {Key: "unit", Value: "week"}}}}},
			{Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}},
		{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}},
		{{Key: "$project", Value: bson.D{{Key: "n", Value: 1}, {Key: "days", Value: bson.D{{Key: "$dateDiff", Value: bson.D{
			{Key: "startDate", Value: "$_id"}, {Key: "endDate", Value: day(31)}, {Key: "unit", Value: "day"}}}}}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var weeks []struct {
		ID   time.Time `bson:"_id"`
		N    int32     `bson:"n"`
		Days int64     `bson:"days"`
	}
	if err := cur.All(ctx, &weeks); err != nil {
		t.Fatal(err)
	}
	// 2024-03-04/05 fall in the week from Sunday 03-03, 03-12/13 in the week from 03-10.
	if len(weeks) != 2 || !weeks[0].ID.Equal(time.Date(2024, 3, 3, 0, 0, 0, 0, time.UTC)) || weeks[0].N != 2 ||
		weeks[0].Days != 28 || !weeks[1].ID.Equal(time.Date(2024, 3, 10, 0, 0, 0, 0, time.UTC)) || weeks[1].Days != 21 {
		t.Errorf("weeks %+v", weeks)
	}

	if _, err := db.Collection("staff").InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: "ann"}, {Key: "boss", Value: "bob"}},
		bson.D{{Key: "_id", Value: "bob"}, {Key: "boss", Value: "cy"}},
		bson.D{{Key: "_id", Value: "cy"}},
	}); err != nil {
		t.Fatal(err)
	}
	var chain []bson.M
	cur, err = db.Collection("staff").Aggregate(ctx, mongo.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: "_id", Value: "ann"}}}},
		{{Key: "$graphLookup", Value: bson.D{{Key: "from", Value: "staff"}, {Key: "startWith", Value: "$boss"},
			{Key: "connectFromField", Value: "boss"}, {Key: "connectToField", Value: "_id"}, {Key: "as", Value: "up"}, {Key: "depthField", Value: "d"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := cur.All(ctx, &chain); err != nil {
		t.Fatal(err)
	}
	if len(chain) != 1 || len(chain[0]["up"].(bson.A)) != 2 {
		t.Fatalf("graphLookup %v", chain)
	}
}
