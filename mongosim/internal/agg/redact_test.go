package agg

import "testing"

func TestRedact(t *testing.T) {
	runPipeCases(t, []pipeCase{
		{name: "descend prunes embedded documents", input: `[{"_id": 1, "level": 1, "sub": {"level": 3, "x": 1}, "list": [{"level": 1, "y": 2}, {"level": 5, "y": 3}, 7, [{"level": 9}]]}, {"_id": 2, "level": 5}]`,
			pipeline: `[{"$redact": {"$cond": [{"$lte": ["$level", 2]}, "$$DESCEND", "$$PRUNE"]}}]`,
			want:     `[{"_id": 1, "level": 1, "list": [{"level": 1, "y": 2}, 7, []]}]`},
		{name: "keep stops descending", input: `[{"_id": 1, "sub": {"level": 9}}]`,
			pipeline: `[{"$redact": "$$KEEP"}]`,
			want:     `[{"_id": 1, "sub": {"level": 9}}]`},
		{name: "redact must answer a redact variable", input: `[{"_id": 1}]`, pipeline: `[{"$redact": 1}]`, code: 17053},
	})
}

// The regex expression operators translate patterns as $regex queries do
// (package query hands expr its compiler).
func TestRegexExpressions(t *testing.T) {
	runPipeCases(t, []pipeCase{
		{name: "regexMatch, regexFind, regexFindAll", input: `[{"_id": 1, "s": "éa1b22", "t": "Hello World"}, {"_id": 2}]`,
			pipeline: `[{"$project": {
				"m": {"$regexMatch": {"input": "$t", "regex": "^hello", "options": "i"}},
				"f": {"$regexFind": {"input": "$s", "regex": "(b)(x)?"}},
				"all": {"$regexFindAll": {"input": "$s", "regex": {"$regularExpression": {"pattern": "[0-9]+", "options": ""}}}}}}]`,
			want: `[{"_id": 1, "m": true, "f": {"match": "b", "idx": 3, "captures": ["b", null]}, "all": [{"match": "1", "idx": 2, "captures": []}, {"match": "22", "idx": 4, "captures": []}]},
				{"_id": 2, "m": false, "f": null, "all": []}]`},
		{name: "regex options twice", input: `[{"s": "a"}]`, pipeline: `[{"$project": {"m": {"$regexMatch": {"input": "$s", "regex": {"$regularExpression": {"pattern": "a", "options": "i"}}, "options": "m"}}}}]`, code: 51107},
		{name: "regex input must be a string", input: `[{"s": 1}]`, pipeline: `[{"$project": {"m": {"$regexMatch": {"input": "$s", "regex": "a"}}}}]`, code: 51104},
		{name: "regex unknown argument", pipeline: `[{"$project": {"m": {"$regexMatch": {"input": "$s", "regex": "a", "flags": "i"}}}}]`, code: 31024, compile: true},
	})
}

// $percentile and $median answer the discrete percentile: the sample at
// rank ceil(n·p) − 1 of the sorted numbers, as doubles.
func TestPercentileAccumulators(t *testing.T) {
	runPipeCases(t, []pipeCase{
		{name: "group percentile and median", input: `[{"v": 40}, {"v": 10}, {"v": "x"}, {"v": 30}, {"v": 20}, {}]`,
			pipeline: `[{"$group": {"_id": null, "m": {"$median": {"input": "$v", "method": "approximate"}}, "p": {"$percentile": {"input": "$v", "p": [0.25, 0.9, 1], "method": "approximate"}}, "none": {"$median": {"input": "$nope", "method": "approximate"}}}}]`,
			want:     `[{"_id": null, "m": 20.0, "p": [10.0, 40.0, 40.0], "none": null}]`},
		{name: "percentile expression", input: `[{"a": [3, 1, 2, "x"], "s": 7}]`,
			pipeline: `[{"$project": {"_id": 0, "m": {"$median": {"input": "$a", "method": "approximate"}}, "p": {"$percentile": {"input": "$s", "p": [0.1, 0.5], "method": "approximate"}}, "e": {"$percentile": {"input": "$nope", "p": [0.5], "method": "approximate"}}}}]`,
			want:     `[{"m": 2.0, "p": [7.0, 7.0], "e": [null]}]`},
		{name: "percentile p in range", pipeline: `[{"$group": {"_id": null, "p": {"$percentile": {"input": "$v", "p": [1.5], "method": "approximate"}}}}]`, code: 7750303, compile: true},
		{name: "percentile needs a method", pipeline: `[{"$group": {"_id": null, "p": {"$percentile": {"input": "$v", "p": [0.5]}}}}]`, code: 40414, compile: true},
	})
}

// $bucketAuto fills buckets of round(n/buckets) documents (the last takes
// the rest) and, with a granularity, rounds the boundaries to the series.
func TestBucketAutoSizesAndGranularity(t *testing.T) {
	runPipeCases(t, []pipeCase{
		{name: "bucket size is rounded, the last bucket takes the rest", input: `[{"x": 4}, {"x": 1}, {"x": 7}, {"x": 2}, {"x": 6}, {"x": 3}, {"x": 5}]`,
			pipeline: `[{"$bucketAuto": {"groupBy": "$x", "buckets": 3}}]`,
			want:     `[{"_id": {"min": 1, "max": 3}, "count": 2}, {"_id": {"min": 3, "max": 5}, "count": 2}, {"_id": {"min": 5, "max": 7}, "count": 3}]`},
		{name: "1-2-5 series", input: `[{"x": 1}, {"x": 2}, {"x": 3}, {"x": 8}, {"x": 12}]`,
			pipeline: `[{"$bucketAuto": {"groupBy": "$x", "buckets": 2, "granularity": "1-2-5"}}]`,
			want:     `[{"_id": {"min": 0.5, "max": 5.0}, "count": 3}, {"_id": {"min": 5.0, "max": 20.0}, "count": 2}]`},
		{name: "powers of two", input: `[{"x": 1}, {"x": 3}, {"x": 5}, {"x": 9}]`,
			pipeline: `[{"$bucketAuto": {"groupBy": "$x", "buckets": 2, "granularity": "POWERSOF2"}}]`,
			want:     `[{"_id": {"min": 0.5, "max": 4}, "count": 2}, {"_id": {"min": 4, "max": 16}, "count": 2}]`},
		// 68 × 0.1 in doubles, as mongod scales the series, is 6.800000000000001.
		{name: "granularity absorbs values below the rounded boundary", input: `[{"x": 10}, {"x": 11}, {"x": 13}, {"x": 14}]`,
			pipeline: `[{"$bucketAuto": {"groupBy": "$x", "buckets": 2, "granularity": "E6"}}]`,
			want:     `[{"_id": {"min": 6.800000000000001, "max": 15.0}, "count": 4}]`},
		{name: "unknown granularity", pipeline: `[{"$bucketAuto": {"groupBy": "$x", "buckets": 2, "granularity": "R7"}}]`, code: 40257, compile: true},
		{name: "granularity needs non-negative numbers", input: `[{"x": -1}]`, pipeline: `[{"$bucketAuto": {"groupBy": "$x", "buckets": 2, "granularity": "R5"}}]`, code: 40260},
	})
}
