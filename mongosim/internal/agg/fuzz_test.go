package agg

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// fuzzSeeds are pipelines (as extended JSON) that reach most stages and
// operators; the fuzzer mutates their BSON encodings.
var fuzzSeeds = []string{
	`[{"$match": {"pending.0": {"$exists": true}}}, {"$project": {"counter": {"$add": ["$counter", {"$size": "$pending"}]}}}]`,
	`[{"$group": {"_id": "$k", "n": {"$sum": 1}, "p": {"$push": "$v"}, "s": {"$addToSet": "$v"}, "a": {"$avg": "$v"}}}, {"$sort": {"n": -1}}]`,
	`[{"$unwind": {"path": "$arr", "includeArrayIndex": "i", "preserveNullAndEmptyArrays": true}}, {"$skip": 1}, {"$limit": 5}, {"$count": "c"}]`,
	`[{"$addFields": {"x.y": {"$map": {"input": "$arr", "in": {"$multiply": ["$$this", 2]}}}}}, {"$unset": ["arr"]}]`,
	`[{"$lookup": {"from": "c", "let": {"k": "$k"}, "pipeline": [{"$match": {"$expr": {"$eq": ["$k", "$$k"]}}}], "as": "j"}}]`,
	`[{"$lookup": {"from": "c", "localField": "k", "foreignField": "k", "as": "j"}}, {"$replaceWith": {"$mergeObjects": ["$$ROOT", {"n": {"$size": "$j"}}]}}]`,
	`[{"$facet": {"a": [{"$sortByCount": "$k"}], "b": [{"$project": {"s": {"$substrBytes": ["$str", 0, 2]}}}]}}]`,
	`[{"$unionWith": {"coll": "c", "pipeline": [{"$set": {"u": true}}]}}, {"$out": "o"}]`,
	`[{"$project": {"r": {"$reduce": {"input": {"$range": [0, 5]}, "initialValue": 0, "in": {"$add": ["$$value", "$$this"]}}}, "c": {"$cond": [{"$gt": ["$v", 1]}, "$v", null]}}}]`,
	`[{"$project": {"t": {"$toString": "$v"}, "d": {"$dateToString": {"date": "$$NOW", "format": "%Y"}}, "sw": {"$switch": {"branches": [{"case": "$v", "then": 1}], "default": 0}}}}]`,
	`[{"$merge": {"into": "m", "on": "_id", "whenMatched": "replace", "whenNotMatched": "insert"}}]`,
	`[{"$documents": [{"a": 1}, {"a": [1, 2]}]}, {"$unwind": "$a"}, {"$replaceRoot": {"newRoot": {"v": "$a"}}}]`,
	`[{"$setWindowFields": {"partitionBy": "$k", "sortBy": {"v": 1}, "output": {"s": {"$sum": "$v", "window": {"range": [-2, 1]}}, "r": {"$rank": {}}, "p": {"$shift": {"output": "$v", "by": -1}}, "d": {"$derivative": {"input": "$v"}, "window": {"documents": [-1, 0]}}, "e": {"$expMovingAvg": {"input": "$v", "N": 3}}, "l": {"$linearFill": "$v"}}}}]`,
	`[{"$densify": {"field": "counter", "partitionByFields": ["k"], "range": {"step": 1, "bounds": "full"}}}, {"$fill": {"sortBy": {"counter": 1}, "output": {"v": {"method": "locf"}, "str": {"value": "x"}}}}]`,
	`[{"$redact": {"$cond": [{"$gt": ["$v", 1]}, "$$DESCEND", "$$KEEP"]}}]`,
	`[{"$bucketAuto": {"groupBy": {"$abs": "$v"}, "buckets": 3, "granularity": "E12", "output": {"m": {"$median": {"input": "$v", "method": "approximate"}}}}}]`,
}

func fuzzInput(t testing.TB) []bson.D {
	return parseDocs(t, `[
	 {"_id": 1, "k": "a", "v": 1, "arr": [1, 2, 3], "pending": ["x"], "counter": 1, "str": "héllo", "o": {"p": [{"q": 1}]}},
	 {"_id": 2, "k": "b", "v": 2.5, "arr": [], "pending": [], "counter": {"$numberLong": "9223372036854775807"}, "str": ""},
	 {"_id": 3, "k": null, "v": "s", "arr": "scalar", "d": {"$date": "2024-01-01T00:00:00Z"}},
	 {"_id": {"$oid": "65f0a1b2c3d4e5f601020304"}, "v": {"$numberLong": "-9223372036854775808"}, "arr": [[1], {"a": null}]}
	]`)
}

func FuzzPipeline(f *testing.F) {
	for _, s := range fuzzSeeds {
		doc := bson.D{{Key: "pipeline", Value: parse(f, s)}}
		b, err := bson.Marshal(doc)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var doc bson.D
		if err := bson.Unmarshal(data, &doc); err != nil {
			return
		}
		var pipeline bson.A
		for _, e := range doc {
			if a, ok := e.Value.(bson.A); ok {
				pipeline = a
				break
			}
		}
		if pipeline == nil {
			return
		}
		p, err := Compile(pipeline)
		if err != nil {
			var ce *cmderr.Error
			if !errors.As(err, &ce) {
				t.Fatalf("Compile returned a %T, not a *cmderr.Error: %v", err, err)
			}
			return
		}
		cat := newCatalog()
		cat.colls["test.c"] = fuzzInput(t)
		in := append(fuzzInput(t), doc)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = p.Run(ctx, in, Env{DB: "test", Catalog: cat})
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			var ce *cmderr.Error
			if !errors.As(err, &ce) {
				t.Fatalf("Run returned a %T, not a *cmderr.Error: %v", err, err)
			}
		}
	})
}

// TestFuzzSeedsRun checks that the seed pipelines themselves are valid, so
// the fuzzer starts from inputs that reach the stages rather than errors.
func TestFuzzSeedsRun(t *testing.T) {
	for _, s := range fuzzSeeds {
		p, err := Compile(parse(t, s).(bson.A))
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		cat := newCatalog()
		cat.colls["test.c"] = fuzzInput(t)
		if _, err := p.Run(context.Background(), fuzzInput(t), Env{DB: "test", Catalog: cat}); err != nil {
			// runtime type errors on the mixed input are fine; panics are not
			var ce *cmderr.Error
			if !errors.As(err, &ce) {
				t.Fatalf("%s: %v", s, err)
			}
		}
	}
}
