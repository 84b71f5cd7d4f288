package agg

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestBucketStages(t *testing.T) {
	const nums = `[{"_id": 1, "x": 1}, {"_id": 2, "x": 5}, {"_id": 3, "x": 12}, {"_id": 4, "x": 20}, {"_id": 5, "x": "s"}, {"_id": 6}]`
	runPipeCases(t, []pipeCase{
		{name: "bucket with default", input: nums,
			pipeline: `[{"$bucket": {"groupBy": "$x", "boundaries": [0, 10, 20], "default": "other", "output": {"n": {"$sum": 1}, "ids": {"$push": "$_id"}}}}]`,
			want:     `[{"_id": 0, "n": 2, "ids": [1, 2]}, {"_id": 10, "n": 1, "ids": [3]}, {"_id": "other", "n": 3, "ids": [4, 5, 6]}]`},
		{name: "bucket default output is count", input: `[{"x": 1}, {"x": 2}]`,
			pipeline: `[{"$bucket": {"groupBy": "$x", "boundaries": [0, 5]}}]`,
			want:     `[{"_id": 0, "count": 2}]`},
		{name: "bucket without default fails on an outlier", input: nums,
			pipeline: `[{"$bucket": {"groupBy": "$x", "boundaries": [0, 10]}}]`, code: 40066},
		{name: "bucket boundaries must ascend", pipeline: `[{"$bucket": {"groupBy": "$x", "boundaries": [5, 1]}}]`, code: 40194, compile: true},
		{name: "bucket boundaries of one type", pipeline: `[{"$bucket": {"groupBy": "$x", "boundaries": [1, "a"]}}]`, code: 40193, compile: true},
		{name: "bucket default inside the range", pipeline: `[{"$bucket": {"groupBy": "$x", "boundaries": [0, 10], "default": 5}}]`, code: 40199, compile: true},
		{name: "bucketAuto keeps equal values together", input: `[{"x": 1}, {"x": 1}, {"x": 1}, {"x": 2}, {"x": 3}, {"x": 4}]`,
			pipeline: `[{"$bucketAuto": {"groupBy": "$x", "buckets": 3}}]`,
			want:     `[{"_id": {"min": 1, "max": 2}, "count": 3}, {"_id": {"min": 2, "max": 4}, "count": 2}, {"_id": {"min": 4, "max": 4}, "count": 1}]`},
		{name: "bucketAuto buckets must be positive", pipeline: `[{"$bucketAuto": {"groupBy": "$x", "buckets": 0}}]`, code: 40243, compile: true},
		{name: "graphLookup", input: `[{"_id": "a", "boss": null, "start": "b"}]`,
			pipeline: `[{"$graphLookup": {"from": "staff", "startWith": "$start", "connectFromField": "reportsTo", "connectToField": "_id", "as": "chain", "depthField": "d"}}, {"$project": {"chain._id": 1, "chain.d": 1}}]`,
			want:     `[{"_id": "a", "chain": [{"_id": "b", "d": {"$numberLong": "0"}}, {"_id": "c", "d": {"$numberLong": "1"}}, {"_id": "e", "d": {"$numberLong": "2"}}]}]`},
		{name: "graphLookup maxDepth", input: `[{"_id": "a", "start": "b"}]`,
			pipeline: `[{"$graphLookup": {"from": "staff", "startWith": "$start", "connectFromField": "reportsTo", "connectToField": "_id", "as": "chain", "maxDepth": 0}}, {"$project": {"chain._id": 1}}]`,
			want:     `[{"_id": "a", "chain": [{"_id": "b"}]}]`},
		{name: "graphLookup restrictSearchWithMatch stops at an excluded document", input: `[{"_id": "a", "start": "b"}]`,
			pipeline: `[{"$graphLookup": {"from": "staff", "startWith": "$start", "connectFromField": "reportsTo", "connectToField": "_id", "as": "chain", "restrictSearchWithMatch": {"_id": {"$ne": "e"}}}}, {"$project": {"chain._id": 1}}]`,
			want:     `[{"_id": "a", "chain": [{"_id": "b"}, {"_id": "c"}]}]`},
		{name: "n-accumulators", input: `[{"g": 1, "v": 3, "k": "c"}, {"g": 1, "v": 1, "k": "a"}, {"g": 1, "v": null, "k": "z"}, {"g": 1, "v": 2, "k": "b"}]`,
			pipeline: `[{"$group": {"_id": "$g",
				"first2": {"$firstN": {"input": "$v", "n": 2}}, "last2": {"$lastN": {"input": "$v", "n": 2}},
				"max2": {"$maxN": {"input": "$v", "n": 2}}, "min2": {"$minN": {"input": "$v", "n": 2}},
				"top": {"$top": {"output": "$k", "sortBy": {"v": -1}}}, "bottom2": {"$bottomN": {"output": "$k", "sortBy": {"v": -1}, "n": 2}},
				"top2": {"$topN": {"output": ["$k", "$v"], "sortBy": {"k": 1}, "n": 2}}}}]`,
			want: `[{"_id": 1, "first2": [3, 1], "last2": [null, 2], "max2": [3, 2], "min2": [1, 2], "top": "c", "bottom2": ["a", "z"], "top2": [["a", 1], ["b", 2]]}]`},
		{name: "n must be positive", pipeline: `[{"$group": {"_id": 1, "x": {"$firstN": {"input": "$v", "n": 0}}}}]`, code: 5787908, compile: true},
	})
}

// runPipeCases' catalog has no staff collection; the graphLookup cases get
// theirs here.
func init() {
	extraCollections["test.staff"] = `[{"_id": "b", "reportsTo": "c"}, {"_id": "c", "reportsTo": "e"}, {"_id": "e", "reportsTo": null}, {"_id": "x", "reportsTo": "b"}]`
}

func TestSampleReturnsDistinctDocuments(t *testing.T) {
	var in []bson.D
	for i := 0; i < 50; i++ {
		in = append(in, bson.D{{Key: "_id", Value: int32(i)}})
	}
	p, err := Compile(bson.A{bson.D{{Key: "$sample", Value: bson.D{{Key: "size", Value: 10}}}}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Run(context.Background(), in, Env{DB: "test"})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[any]bool{}
	for _, d := range out {
		if seen[d[0].Value] {
			t.Fatalf("sampled %v twice", d[0].Value)
		}
		seen[d[0].Value] = true
	}
	if len(out) != 10 {
		t.Fatalf("sampled %d documents, want 10", len(out))
	}
	if out, _ := p.Run(context.Background(), in[:3], Env{DB: "test"}); len(out) != 3 {
		t.Fatalf("sample of 10 from 3 documents gave %d", len(out))
	}
}
