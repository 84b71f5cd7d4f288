package mongosim

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// Window functions, $densify and $fill answer the official driver as
// mongod 8.0 would, on sensor readings with a gap: a moving average over a
// one-hour range window, $documentNumber and $shift per sensor; then the
// gap densified hour by hour and carried forward with $fill.
func TestWindowStagesThroughTheOfficialDriver(t *testing.T) {
	c := Start(t)
	ctx := testCtx(t)
	coll := connect(t, c.URI()).Database("plant").Collection("readings")
	hour := func(h int) bson.DateTime {
		return bson.NewDateTimeFromTime(time.Date(2024, 5, 1, h, 0, 0, 0, time.UTC))
	}
	if _, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "sensor", Value: "a"}, {Key: "t", Value: hour(0)}, {Key: "temp", Value: 10}},
		bson.D{{Key: "_id", Value: 2}, {Key: "sensor", Value: "b"}, {Key: "t", Value: hour(0)}, {Key: "temp", Value: 5}},
		bson.D{{Key: "_id", Value: 3}, {Key: "sensor", Value: "a"}, {Key: "t", Value: hour(1)}, {Key: "temp", Value: 14}},
		bson.D{{Key: "_id", Value: 4}, {Key: "sensor", Value: "b"}, {Key: "t", Value: hour(2)}},
		bson.D{{Key: "_id", Value: 5}, {Key: "sensor", Value: "a"}, {Key: "t", Value: hour(3)}, {Key: "temp", Value: 20}},
	}); err != nil {
		t.Fatal(err)
	}
	run := func(pipeline mongo.Pipeline) []bson.D {
		t.Helper()
		cur, err := coll.Aggregate(ctx, pipeline)
		if err != nil {
			t.Fatal(err)
		}
		var out []bson.D
		if err := cur.All(ctx, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	same := func(got, want []bson.D) {
		t.Helper()
		g, _ := bson.Marshal(bson.D{{Key: "v", Value: got}})
		w, _ := bson.Marshal(bson.D{{Key: "v", Value: want}})
		if !bytes.Equal(g, w) {
			t.Fatalf("got  %v\nwant %v", got, want)
		}
	}

	got := run(mongo.Pipeline{
		{{Key: "$setWindowFields", Value: bson.D{{Key: "partitionBy", Value: "$sensor"}, {Key: "sortBy", Value: bson.D{{Key: "t", Value: 1}}},
			{Key: "output", Value: bson.D{
				{Key: "avg", Value: bson.D{{Key: "$avg", Value: "$temp"}, {Key: "window", Value: bson.D{{Key: "range", Value: bson.A{-1, 0}}, {Key: "unit", Value: "hour"}}}}},
				{Key: "n", Value: bson.D{{Key: "$documentNumber", Value: bson.D{}}}},
				{Key: "prev", Value: bson.D{{Key: "$shift", Value: bson.D{{Key: "output", Value: "$temp"}, {Key: "by", Value: -1}}}}},
			}}}}},
		{{Key: "$project", Value: bson.D{{Key: "avg", Value: 1}, {Key: "n", Value: 1}, {Key: "prev", Value: 1}}}},
	})
	row := func(id int32, avg any, n int32, prev any) bson.D {
		return bson.D{{Key: "_id", Value: id}, {Key: "avg", Value: avg}, {Key: "n", Value: n}, {Key: "prev", Value: prev}}
	}
	// Hour 3's window [02:00, 03:00] holds only itself; sensor b's hour 2
	// has no temperature, so its average is null.
	same(got, []bson.D{row(1, 10.0, 1, nil), row(3, 12.0, 2, int32(10)), row(5, 20.0, 3, int32(14)), row(2, 5.0, 1, nil), row(4, nil, 2, int32(5))})

	got = run(mongo.Pipeline{
		{{Key: "$densify", Value: bson.D{{Key: "field", Value: "t"}, {Key: "partitionByFields", Value: bson.A{"sensor"}},
			{Key: "range", Value: bson.D{{Key: "step", Value: 1}, {Key: "unit", Value: "hour"}, {Key: "bounds", Value: "full"}}}}}},
		{{Key: "$fill", Value: bson.D{{Key: "partitionBy", Value: "$sensor"}, {Key: "sortBy", Value: bson.D{{Key: "t", Value: 1}}},
			{Key: "output", Value: bson.D{{Key: "temp", Value: bson.D{{Key: "method", Value: "locf"}}}}}}}},
		{{Key: "$project", Value: bson.D{{Key: "_id", Value: 0}, {Key: "sensor", Value: 1}, {Key: "t", Value: 1}, {Key: "temp", Value: 1}}}},
	})
	reading := func(s string, h int, temp int32) bson.D {
		return bson.D{{Key: "sensor", Value: s}, {Key: "t", Value: hour(h)}, {Key: "temp", Value: temp}}
	}
	// "full" gives every sensor every hour from the first reading to the
	// last; locf carries each sensor's last temperature into its gaps.
	same(got, []bson.D{reading("a", 0, 10), reading("a", 1, 14), reading("a", 2, 14), reading("a", 3, 20),
		reading("b", 0, 5), reading("b", 1, 5), reading("b", 2, 5), reading("b", 3, 5)})

	_, err := coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$setWindowFields", Value: bson.D{
		{Key: "output", Value: bson.D{{Key: "r", Value: bson.D{{Key: "$rank", Value: bson.D{}}}}}}}}}})
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(5371602) {
		t.Fatalf("$rank without sortBy: %v, want code 5371602", err)
	}
	_, err = coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$densify", Value: bson.D{{Key: "field", Value: "sensor"},
		{Key: "range", Value: bson.D{{Key: "step", Value: 1}, {Key: "bounds", Value: "full"}}}}}}})
	if !errors.As(err, &se) || !se.HasErrorCode(5733201) {
		t.Fatalf("$densify over strings: %v, want code 5733201", err)
	}
}

// $redact and the newer expression operators through the official driver:
// the embedded document above the reader's level and the whole second
// document are pruned; $regexFind, $sortArray, $dateToParts and $replaceAll
// answer mongod's shapes.
func TestRedactAndNewerOperatorsThroughTheOfficialDriver(t *testing.T) {
	c := Start(t)
	ctx := testCtx(t)
	coll := connect(t, c.URI()).Database("docs").Collection("reports")
	at := time.Date(2024, 3, 5, 6, 7, 8, 0, time.UTC)
	if _, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "level", Value: 1}, {Key: "title", Value: "Report Q1 2024"},
			{Key: "secret", Value: bson.D{{Key: "level", Value: 3}, {Key: "note", Value: "x"}}},
			{Key: "tags", Value: bson.A{"b", "a", "c"}}, {Key: "at", Value: at}},
		bson.D{{Key: "_id", Value: 2}, {Key: "level", Value: 5}, {Key: "title", Value: "Board minutes"}},
	}); err != nil {
		t.Fatal(err)
	}
	cur, err := coll.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$redact", Value: bson.D{{Key: "$cond", Value: bson.A{bson.D{{Key: "$lte", Value: bson.A{"$level", 2}}}, "$$DESCEND", "$$PRUNE"}}}}},
		{{Key: "$project", Value: bson.D{{Key: "secret", Value: 1},
			{Key: "q", Value: bson.D{{Key: "$regexFind", Value: bson.D{{Key: "input", Value: "$title"}, {Key: "regex", Value: "Q([1-4])"}}}}},
			{Key: "tags", Value: bson.D{{Key: "$sortArray", Value: bson.D{{Key: "input", Value: "$tags"}, {Key: "sortBy", Value: 1}}}}},
			{Key: "parts", Value: bson.D{{Key: "$dateToParts", Value: bson.D{{Key: "date", Value: "$at"}}}}},
			{Key: "title", Value: bson.D{{Key: "$replaceAll", Value: bson.D{{Key: "input", Value: "$title"}, {Key: "find", Value: " "}, {Key: "replacement", Value: "_"}}}}},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	type match struct {
		Match    string   `bson:"match"`
		Idx      int32    `bson:"idx"`
		Captures []string `bson:"captures"`
	}
	var got []struct {
		ID     int32          `bson:"_id"`
		Secret *bson.D        `bson:"secret"`
		Q      match          `bson:"q"`
		Tags   []string       `bson:"tags"`
		Parts  map[string]any `bson:"parts"`
		Title  string         `bson:"title"`
	}
	if err := cur.All(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("got %d documents, want 1 (the level-5 report pruned): %+v", len(got), got)
	}
	r := got[0]
	if r.ID != 1 || r.Secret != nil || r.Q.Match != "Q1" || r.Q.Idx != 7 || len(r.Q.Captures) != 1 || r.Q.Captures[0] != "1" ||
		len(r.Tags) != 3 || r.Tags[0] != "a" || r.Tags[2] != "c" || r.Title != "Report_Q1_2024" {
		t.Errorf("got %+v", r)
	}
	for k, want := range map[string]int32{"year": 2024, "month": 3, "day": 5, "hour": 6, "minute": 7, "second": 8, "millisecond": 0} {
		if r.Parts[k] != want {
			t.Errorf("parts.%s = %v (%T), want %d", k, r.Parts[k], r.Parts[k], want)
		}
	}
}

// $median/$percentile and $bucketAuto with a granularity through the
// official driver: discrete percentiles (rank ceil(n·p) − 1 of the sorted
// values) and boundaries on the 1-2-5 series.
func TestPercentilesAndGranularityThroughTheOfficialDriver(t *testing.T) {
	c := Start(t)
	ctx := testCtx(t)
	coll := connect(t, c.URI()).Database("shop").Collection("prices")
	var docs []any
	for _, p := range []int32{1, 2, 3, 8, 12} {
		docs = append(docs, bson.D{{Key: "price", Value: p}})
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	cur, err := coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil},
		{Key: "median", Value: bson.D{{Key: "$median", Value: bson.D{{Key: "input", Value: "$price"}, {Key: "method", Value: "approximate"}}}}},
		{Key: "p", Value: bson.D{{Key: "$percentile", Value: bson.D{{Key: "input", Value: "$price"}, {Key: "p", Value: bson.A{0.2, 0.95}}, {Key: "method", Value: "approximate"}}}}},
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	var stats []struct {
		Median float64   `bson:"median"`
		P      []float64 `bson:"p"`
	}
	if err := cur.All(ctx, &stats); err != nil {
		t.Fatal(err)
	}
	if len(stats) != 1 || stats[0].Median != 3 || len(stats[0].P) != 2 || stats[0].P[0] != 1 || stats[0].P[1] != 12 {
		t.Fatalf("percentiles %+v", stats)
	}
	cur, err = coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$bucketAuto", Value: bson.D{{Key: "groupBy", Value: "$price"},
		{Key: "buckets", Value: 2}, {Key: "granularity", Value: "1-2-5"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	var buckets []struct {
		ID struct {
			Min float64 `bson:"min"`
			Max float64 `bson:"max"`
		} `bson:"_id"`
		Count int32 `bson:"count"`
	}
	if err := cur.All(ctx, &buckets); err != nil {
		t.Fatal(err)
	}
	// Three prices a bucket: [0.5, 5) holds 1, 2, 3 and [5, 20) holds 8, 12.
	if len(buckets) != 2 || buckets[0].ID.Min != 0.5 || buckets[0].ID.Max != 5 || buckets[0].Count != 3 ||
		buckets[1].ID.Min != 5 || buckets[1].ID.Max != 20 || buckets[1].Count != 2 {
		t.Fatalf("buckets %+v", buckets)
	}
}
