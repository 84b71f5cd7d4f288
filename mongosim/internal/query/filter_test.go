package query

import (
	"errors"
	"math"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// doc parses relaxed extended JSON into a bson.D (ints become int32, large
// ones int64, {"$numberLong": ...} int64, decimals float64).
func doc(t testing.TB, js string) bson.D {
	t.Helper()
	var d bson.D
	if err := bson.UnmarshalExtJSON([]byte(js), false, &d); err != nil {
		t.Fatalf("bad test JSON %s: %v", js, err)
	}
	return d
}

type matchCase struct {
	filter string
	doc    string
	want   bool
}

func runMatchCases(t *testing.T, cases []matchCase) {
	t.Helper()
	for _, c := range cases {
		f, err := CompileFilter(doc(t, c.filter))
		if err != nil {
			t.Errorf("CompileFilter(%s): %v", c.filter, err)
			continue
		}
		if got := f.Match(doc(t, c.doc)); got != c.want {
			t.Errorf("filter %s on %s: got %v, want %v", c.filter, c.doc, got, c.want)
		}
	}
}

func TestEquality(t *testing.T) {
	runMatchCases(t, []matchCase{
		{`{}`, `{"a": 1}`, true},
		{`{"a": 1}`, `{"a": 1}`, true},
		{`{"a": 1}`, `{"a": 2}`, false},
		{`{"a": 1}`, `{"a": 1.0}`, true},
		{`{"a": 1}`, `{"a": {"$numberLong": "1"}}`, true},
		{`{"a": {"$numberLong": "5000000000"}}`, `{"a": 5000000000.0}`, true},
		{`{"a": 1}`, `{"a": "1"}`, false},
		{`{"a": 1}`, `{"b": 1}`, false},
		{`{"a": 1, "b": 2}`, `{"a": 1, "b": 2}`, true},
		{`{"a": 1, "b": 2}`, `{"a": 1, "b": 3}`, false},
		// arrays: element match and whole-array match
		{`{"a": 2}`, `{"a": [1, 2, 3]}`, true},
		{`{"a": 4}`, `{"a": [1, 2, 3]}`, false},
		{`{"a": [1, 2]}`, `{"a": [1, 2]}`, true},
		{`{"a": [1, 2]}`, `{"a": [2, 1]}`, false},
		{`{"a": [1, 2]}`, `{"a": [[1, 2], 3]}`, true},
		{`{"a": 1}`, `{"a": [[1], 2]}`, false}, // only one level of expansion
		// documents compare exactly, field order included
		{`{"a": {"b": 1, "c": 2}}`, `{"a": {"b": 1, "c": 2}}`, true},
		{`{"a": {"b": 1, "c": 2}}`, `{"a": {"c": 2, "b": 1}}`, false},
		{`{"a": {"b": 1}}`, `{"a": {"b": 1, "c": 2}}`, false},
		// null vs missing
		{`{"a": null}`, `{"a": null}`, true},
		{`{"a": null}`, `{}`, true},
		{`{"a": null}`, `{"a": 0}`, false},
		{`{"a": null}`, `{"a": [1, null]}`, true},
		{`{"a": null}`, `{"a": []}`, false},
		{`{"a": null}`, `{"a": {"$undefined": true}}`, false},
		{`{"a": {"$eq": null}}`, `{}`, true},
		{`{"a": {"$ne": null}}`, `{}`, false},
		{`{"a": {"$ne": null}}`, `{"a": 0}`, true},
		// $eq with an operator-looking value matches literally
		{`{"a": {"$eq": {"$gt": 1}}}`, `{"a": {"$gt": 1}}`, true},
		{`{"a": {"$eq": {"$gt": 1}}}`, `{"a": 5}`, false},
	})
}

func TestDottedPaths(t *testing.T) {
	runMatchCases(t, []matchCase{
		{`{"a.b": 1}`, `{"a": {"b": 1}}`, true},
		{`{"a.b": 1}`, `{"a": {"b": 2}}`, false},
		{`{"a.b.c": 1}`, `{"a": {"b": {"c": 1}}}`, true},
		{`{"a.b": 1}`, `{"a": [{"b": 2}, {"b": 1}]}`, true},
		{`{"a.b": 1}`, `{"a": [{"b": [0, 1]}]}`, true},
		{`{"a.b": 1}`, `{"a": [[{"b": 1}]]}`, false}, // nested arrays are not traversed
		{`{"a.0.b": 1}`, `{"a": [[{"b": 1}]]}`, true},
		{`{"a.0": 5}`, `{"a": [5, 6]}`, true},
		{`{"a.1": 5}`, `{"a": [5, 6]}`, false},
		{`{"a.1": 6}`, `{"a": [5, 6]}`, true},
		{`{"a.5": 6}`, `{"a": [5, 6]}`, false},
		{`{"pending.0": "x"}`, `{"pending": ["x", "y"]}`, true},
		{`{"a.1.b": 2}`, `{"a": [{"b": 1}, {"b": 2}]}`, true},
		{`{"a.1.b": 1}`, `{"a": [{"b": 1}, {"b": 2}]}`, false},
		{`{"a.0": 1}`, `{"a": {"0": 1}}`, true}, // numeric field name on a document
		{`{"a.0": 1}`, `{"a": [{"0": 1}]}`, true},
		// null semantics through arrays (MongoDB's jstests/core/null2.js)
		{`{"a.b": null}`, `{"a": [{"b": 5}]}`, false},
		{`{"a.b": null}`, `{"a": [{}]}`, true},
		{`{"a.b": null}`, `{"a": []}`, false},
		{`{"a.b": null}`, `{"a": [{}, {"b": 5}]}`, true},
		{`{"a.b": null}`, `{"a": [5, {"b": 5}]}`, false},
		{`{"a.b": {"$in": [null]}}`, `{"a": [{}, {"b": 5}]}`, true},
		{`{"a.b": null}`, `{"a": 5}`, true},
		{`{"a.b": null}`, `{}`, true},
		{`{"a.b": {"$exists": false}}`, `{"a": [5]}`, true},
		{`{"a.b": {"$exists": true}}`, `{"a": [5, {"b": null}]}`, true},
	})
}

func TestComparison(t *testing.T) {
	runMatchCases(t, []matchCase{
		{`{"a": {"$gt": 5}}`, `{"a": 6}`, true},
		{`{"a": {"$gt": 5}}`, `{"a": 5}`, false},
		{`{"a": {"$gte": 5}}`, `{"a": 5.0}`, true},
		{`{"a": {"$lt": 5}}`, `{"a": {"$numberLong": "4"}}`, true},
		{`{"a": {"$lte": 5}}`, `{"a": 5.5}`, false},
		{`{"a": {"$gt": 5}}`, `{"a": "6"}`, false}, // type bracketing
		{`{"a": {"$lt": "b"}}`, `{"a": 1}`, false},
		{`{"a": {"$lt": "b"}}`, `{"a": "a"}`, true},
		{`{"a": {"$gt": 5}}`, `{}`, false},
		{`{"a": {"$gt": 5}}`, `{"a": null}`, false},
		{`{"a": {"$gt": 5}}`, `{"a": [1, 7]}`, true},
		{`{"a": {"$gt": 5, "$lt": 7}}`, `{"a": [4, 8]}`, true}, // different elements may satisfy each
		{`{"a": {"$elemMatch": {"$gt": 5, "$lt": 7}}}`, `{"a": [4, 8]}`, false},
		{`{"a": {"$elemMatch": {"$gt": 5, "$lt": 7}}}`, `{"a": [4, 6]}`, true},
		{`{"a": {"$gte": null}}`, `{}`, true},
		{`{"a": {"$lte": null}}`, `{"a": null}`, true},
		{`{"a": {"$gt": null}}`, `{"a": null}`, false},
		{`{"a": {"$lt": null}}`, `{"a": 1}`, false},
		{`{"a": {"$gt": {"$minKey": 1}}}`, `{"a": "x"}`, true},
		{`{"a": {"$lt": {"$maxKey": 1}}}`, `{"a": {"b": 1}}`, true},
		{`{"a": {"$gt": {"$maxKey": 1}}}`, `{"a": 1}`, false},
		{`{"a": {"$gt": {"$date": "2020-01-01T00:00:00Z"}}}`, `{"a": {"$date": "2021-01-01T00:00:00Z"}}`, true},
		{`{"a": {"$gt": {"$date": "2020-01-01T00:00:00Z"}}}`, `{"a": {"$timestamp": {"t": 2000000000, "i": 1}}}`, false},
		{`{"a": {"$gt": [1]}}`, `{"a": [2]}`, true}, // whole-array comparison
		{`{"a": {"$gt": {"b": 1}}}`, `{"a": {"b": 2}}`, true},
		{`{"a": {"$ne": 1}}`, `{"a": [1, 2]}`, false},
		{`{"a": {"$ne": 1}}`, `{"a": [2, 3]}`, true},
		{`{"a": {"$ne": 1}}`, `{}`, true},
		{`{"a": {"$gt": {"$numberLong": "9007199254740992"}}}`, `{"a": {"$numberLong": "9007199254740993"}}`, true},
	})
}

func TestNaN(t *testing.T) {
	nan := bson.D{{Key: "a", Value: math.NaN()}}
	cases := []struct {
		filter bson.D
		want   bool
	}{
		{bson.D{{Key: "a", Value: math.NaN()}}, true},
		{bson.D{{Key: "a", Value: bson.D{{Key: "$gte", Value: math.NaN()}}}}, true},
		{bson.D{{Key: "a", Value: bson.D{{Key: "$gt", Value: math.NaN()}}}}, false},
		{bson.D{{Key: "a", Value: bson.D{{Key: "$lt", Value: 5}}}}, false},
		{bson.D{{Key: "a", Value: bson.D{{Key: "$gt", Value: math.Inf(-1)}}}}, false},
	}
	for _, c := range cases {
		f, err := CompileFilter(c.filter)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Match(nan); got != c.want {
			t.Errorf("%v on NaN: got %v want %v", c.filter, got, c.want)
		}
	}
}

func TestInNin(t *testing.T) {
	runMatchCases(t, []matchCase{
		{`{"a": {"$in": [1, 2]}}`, `{"a": 2}`, true},
		{`{"a": {"$in": [1, 2]}}`, `{"a": 2.0}`, true},
		{`{"a": {"$in": [1, 2]}}`, `{"a": 3}`, false},
		{`{"a": {"$in": [1, "x", {"b": 1}, [1, 2]]}}`, `{"a": "x"}`, true},
		{`{"a": {"$in": [1, "x", {"b": 1}, [1, 2]]}}`, `{"a": {"b": 1}}`, true},
		{`{"a": {"$in": [[1, 2]]}}`, `{"a": [1, 2]}`, true},
		{`{"a": {"$in": [3, 2]}}`, `{"a": [1, 2]}`, true},
		{`{"a": {"$in": []}}`, `{"a": 1}`, false},
		{`{"a": {"$in": [null]}}`, `{}`, true},
		{`{"a": {"$in": [null, 1]}}`, `{"a": null}`, true},
		{`{"a": {"$in": [{"$regularExpression": {"pattern": "^ab", "options": ""}}]}}`, `{"a": "abc"}`, true},
		{`{"a": {"$in": [{"$regularExpression": {"pattern": "^ab", "options": ""}}]}}`, `{"a": "xab"}`, false},
		{`{"a": {"$in": [{"$regularExpression": {"pattern": "^AB", "options": "i"}}, 5]}}`, `{"a": ["x", "abc"]}`, true},
		{`{"a": {"$nin": [1, 2]}}`, `{"a": 3}`, true},
		{`{"a": {"$nin": [1, 2]}}`, `{"a": [3, 1]}`, false},
		{`{"a": {"$nin": [1, 2]}}`, `{}`, true},
		{`{"a": {"$nin": [null]}}`, `{}`, false},
	})
}

func TestExistsTypeSizeAllMod(t *testing.T) {
	runMatchCases(t, []matchCase{
		{`{"a": {"$exists": true}}`, `{"a": null}`, true},
		{`{"a": {"$exists": true}}`, `{}`, false},
		{`{"a": {"$exists": false}}`, `{}`, true},
		{`{"a": {"$exists": 0}}`, `{"a": 1}`, false},
		{`{"a": {"$exists": 1}}`, `{"a": []}`, true},
		{`{"a.b": {"$exists": true}}`, `{"a": [{"c": 1}, {"b": 1}]}`, true},

		{`{"a": {"$type": "string"}}`, `{"a": "x"}`, true},
		{`{"a": {"$type": 2}}`, `{"a": "x"}`, true},
		{`{"a": {"$type": 2.0}}`, `{"a": "x"}`, true},
		{`{"a": {"$type": "int"}}`, `{"a": 1}`, true},
		{`{"a": {"$type": "long"}}`, `{"a": 1}`, false},
		{`{"a": {"$type": "long"}}`, `{"a": {"$numberLong": "1"}}`, true},
		{`{"a": {"$type": "double"}}`, `{"a": 1.5}`, true},
		{`{"a": {"$type": "number"}}`, `{"a": 1.5}`, true},
		{`{"a": {"$type": "number"}}`, `{"a": "1"}`, false},
		{`{"a": {"$type": "decimal"}}`, `{"a": {"$numberDecimal": "1.5"}}`, true},
		{`{"a": {"$type": ["string", "null"]}}`, `{"a": null}`, true},
		{`{"a": {"$type": "null"}}`, `{}`, false},
		{`{"a": {"$type": "array"}}`, `{"a": []}`, true},
		{`{"a": {"$type": "array"}}`, `{"a": 1}`, false},
		{`{"a": {"$type": "string"}}`, `{"a": [1, "x"]}`, true},
		{`{"a": {"$type": "object"}}`, `{"a": {"b": 1}}`, true},
		{`{"a": {"$type": "objectId"}}`, `{"a": {"$oid": "5f0000000000000000000000"}}`, true},
		{`{"a": {"$type": "bool"}}`, `{"a": false}`, true},
		{`{"a": {"$type": "date"}}`, `{"a": {"$date": "2020-01-01T00:00:00Z"}}`, true},
		{`{"a": {"$type": "minKey"}}`, `{"a": {"$minKey": 1}}`, true},
		{`{"a": {"$type": -1}}`, `{"a": {"$minKey": 1}}`, true},
		{`{"a": {"$type": 127}}`, `{"a": {"$maxKey": 1}}`, true},

		{`{"a": {"$size": 2}}`, `{"a": [1, 2]}`, true},
		{`{"a": {"$size": 2}}`, `{"a": [1]}`, false},
		{`{"a": {"$size": 0}}`, `{"a": []}`, true},
		{`{"a": {"$size": 0}}`, `{}`, false},
		{`{"a": {"$size": 1}}`, `{"a": [[1, 2]]}`, true},
		{`{"a": {"$size": 2}}`, `{"a": [[1, 2]]}`, false}, // no expansion for $size
		{`{"a": {"$size": 2.0}}`, `{"a": [1, 2]}`, true},
		{`{"a.b": {"$size": 1}}`, `{"a": [{"b": [1]}, {"b": [1, 2]}]}`, true},

		{`{"a": {"$all": [1, 2]}}`, `{"a": [2, 3, 1]}`, true},
		{`{"a": {"$all": [1, 2]}}`, `{"a": [2, 3]}`, false},
		{`{"a": {"$all": [1]}}`, `{"a": 1}`, true},
		{`{"a": {"$all": []}}`, `{"a": [1]}`, false},
		{`{"a": {"$all": [[1, 2]]}}`, `{"a": [1, 2]}`, true},
		{`{"a": {"$all": [[1, 2]]}}`, `{"a": [[1, 2], 3]}`, true},
		{`{"a": {"$all": [{"$regularExpression": {"pattern": "^x", "options": ""}}, "y"]}}`, `{"a": ["xa", "y"]}`, true},
		{`{"a": {"$all": [{"$elemMatch": {"b": 1}}, {"$elemMatch": {"c": 2}}]}}`, `{"a": [{"b": 1}, {"c": 2}]}`, true},
		{`{"a": {"$all": [{"$elemMatch": {"b": 1, "c": 2}}]}}`, `{"a": [{"b": 1}, {"c": 2}]}`, false},

		{`{"a": {"$mod": [4, 0]}}`, `{"a": 8}`, true},
		{`{"a": {"$mod": [4, 0]}}`, `{"a": 9}`, false},
		{`{"a": {"$mod": [4, 1]}}`, `{"a": 9.7}`, true}, // truncation
		{`{"a": {"$mod": [4, -1]}}`, `{"a": -5}`, true},
		{`{"a": {"$mod": [4.5, 1]}}`, `{"a": 5}`, true}, // divisor truncated to 4
		{`{"a": {"$mod": [4, 0]}}`, `{"a": "8"}`, false},
		{`{"a": {"$mod": [4, 0]}}`, `{"a": [1, 12]}`, true},
		{`{"a": {"$mod": [-1, 0]}}`, `{"a": {"$numberLong": "-9223372036854775808"}}`, true},
	})
}

func TestLogical(t *testing.T) {
	runMatchCases(t, []matchCase{
		{`{"$and": [{"a": 1}, {"b": 2}]}`, `{"a": 1, "b": 2}`, true},
		{`{"$and": [{"a": 1}, {"b": 2}]}`, `{"a": 1, "b": 3}`, false},
		{`{"$or": [{"a": 1}, {"b": 2}]}`, `{"a": 0, "b": 2}`, true},
		{`{"$or": [{"a": 1}, {"b": 2}]}`, `{"a": 0, "b": 0}`, false},
		{`{"$or": [{"a": 1}]}`, `{"a": 1}`, true},
		{`{"$nor": [{"a": 1}, {"b": 2}]}`, `{"a": 0, "b": 0}`, true},
		{`{"$nor": [{"a": 1}, {"b": 2}]}`, `{"a": 1}`, false},
		{`{"$and": [{"$or": [{"a": 1}, {"a": 2}]}, {"$nor": [{"b": 1}]}]}`, `{"a": 2}`, true},
		{`{"a": {"$not": {"$gt": 5}}}`, `{"a": 3}`, true},
		{`{"a": {"$not": {"$gt": 5}}}`, `{"a": 6}`, false},
		{`{"a": {"$not": {"$gt": 5}}}`, `{}`, true},
		{`{"a": {"$not": {"$gt": 5}}}`, `{"a": "x"}`, true},
		{`{"a": {"$not": {"$regularExpression": {"pattern": "^a", "options": ""}}}}`, `{"a": "abc"}`, false},
		{`{"a": {"$not": {"$regularExpression": {"pattern": "^a", "options": ""}}}}`, `{"a": "xbc"}`, true},
		{`{"a": {"$not": {"$regex": "^A", "$options": "i"}}}`, `{"a": "abc"}`, false},
		{`{"a": {"$not": {"$size": 1}}}`, `{"a": [1, 2]}`, true},
		{`{"$comment": "why", "a": 1}`, `{"a": 1}`, true},
		{`{"a": {"$gt": 0, "$comment": "x"}}`, `{"a": 1}`, true},
		{`{"$alwaysFalse": 1}`, `{"a": 1}`, false},
		{`{"$alwaysTrue": 1}`, `{"a": 1}`, true},
	})
}

func TestElemMatch(t *testing.T) {
	runMatchCases(t, []matchCase{
		{`{"a": {"$elemMatch": {"b": 1, "c": 2}}}`, `{"a": [{"b": 1, "c": 2}]}`, true},
		{`{"a": {"$elemMatch": {"b": 1, "c": 2}}}`, `{"a": [{"b": 1}, {"c": 2}]}`, false},
		{`{"a.b": 1, "a.c": 2}`, `{"a": [{"b": 1}, {"c": 2}]}`, true},
		{`{"a": {"$elemMatch": {"b": 1}}}`, `{"a": {"b": 1}}`, false}, // not an array
		{`{"a": {"$elemMatch": {"b": {"$gte": 2}}}}`, `{"a": [1, {"b": 3}]}`, true},
		{`{"a": {"$elemMatch": {"$in": [3, 4]}}}`, `{"a": [1, 4]}`, true},
		{`{"a": {"$elemMatch": {"$ne": 1}}}`, `{"a": [1, 1]}`, false},
		{`{"a": {"$elemMatch": {"$ne": 1}}}`, `{"a": [1, 2]}`, true},
		{`{"a": {"$elemMatch": {"$gt": 1}}}`, `{"a": [[2]]}`, false}, // no expansion in value form
		{`{"a": {"$elemMatch": {"$elemMatch": {"$gt": 1}}}}`, `{"a": [[0], [2]]}`, true},
		{`{"a": {"$elemMatch": {"b": {"$elemMatch": {"c": 1}}}}}`, `{"a": [{"b": [{"c": 1}]}]}`, true},
		{`{"a": {"$elemMatch": {"b": {"$elemMatch": {"c": 1}}}}}`, `{"a": [{"b": [{"c": 2}]}]}`, false},
		{`{"a": {"$elemMatch": {"$or": [{"b": 1}, {"c": 1}]}}}`, `{"a": [{"c": 1}]}`, true},
		{`{"a": {"$elemMatch": {}}}`, `{"a": [{"x": 1}]}`, true},
		{`{"a": {"$elemMatch": {}}}`, `{"a": [1]}`, false},
		{`{"a.b": {"$elemMatch": {"$eq": 2}}}`, `{"a": [{"b": [1]}, {"b": [2]}]}`, true},
		{`{"a": {"$elemMatch": {"$regex": "^x"}}}`, `{"a": ["y", "xz"]}`, true},
		{`{"a": {"$elemMatch": {"$not": {"$gt": 5}}}}`, `{"a": [6, 7]}`, false},
		{`{"a": {"$elemMatch": {"$not": {"$gt": 5}}}}`, `{"a": [6, 1]}`, true},
	})
}

func TestRegex(t *testing.T) {
	runMatchCases(t, []matchCase{
		{`{"a": {"$regex": "^ab"}}`, `{"a": "abc"}`, true},
		{`{"a": {"$regex": "^ab"}}`, `{"a": "cab"}`, false},
		{`{"a": {"$regex": "^AB", "$options": "i"}}`, `{"a": "abc"}`, true},
		{`{"a": {"$regularExpression": {"pattern": "^AB", "options": "i"}}}`, `{"a": "abc"}`, true},
		{`{"a": {"$regex": {"$regularExpression": {"pattern": "^AB", "options": "i"}}}}`, `{"a": "abc"}`, true},
		{`{"a": {"$regex": "^b", "$options": "m"}}`, `{"a": "a\nb"}`, true},
		{`{"a": {"$regex": "^b"}}`, `{"a": "a\nb"}`, false},
		{`{"a": {"$regex": "a.b", "$options": "s"}}`, `{"a": "a\nb"}`, true},
		{`{"a": {"$regex": "a.b"}}`, `{"a": "a\nb"}`, false},
		{`{"a": {"$regex": "a b # comment\n c", "$options": "x"}}`, `{"a": "abc"}`, true},
		{`{"a": {"$regex": "a[ ]b", "$options": "x"}}`, `{"a": "a b"}`, true},
		{`{"a": {"$regex": "c$"}}`, `{"a": "abc\n"}`, true}, // PCRE $ before final newline
		{`{"a": {"$regex": "c$"}}`, `{"a": "abc\nx"}`, false},
		{`{"a": {"$regex": "c\\Z"}}`, `{"a": "abc\n"}`, true},
		{`{"a": {"$regex": "x"}}`, `{"a": ["y", "xx"]}`, true},
		{`{"a": {"$regex": "x"}}`, `{"a": 5}`, false},
		{`{"a": {"$regex": "x"}}`, `{}`, false},
		{`{"a": {"$regex": "x"}}`, `{"a": {"$symbol": "x"}}`, true},
		// a regex value equals an identical stored regex
		{`{"a": {"$regularExpression": {"pattern": "x", "options": ""}}}`, `{"a": {"$regularExpression": {"pattern": "x", "options": ""}}}`, true},
		{`{"a": {"$eq": {"$regularExpression": {"pattern": "x", "options": ""}}}}`, `{"a": "x"}`, false},
	})
}

func TestCompileErrors(t *testing.T) {
	cases := []struct {
		filter string
		code   int32
		msg    string
	}{
		{`{"a": {"$foo": 1}}`, cmderr.BadValue, "unknown operator: $foo"},
		{`{"$foo": 1}`, cmderr.BadValue, "unknown top level operator: $foo"},
		{`{"a": {"$gt": 1, "b": 2}}`, cmderr.BadValue, "unknown operator: b"},
		{`{"$and": []}`, cmderr.BadValue, "$and must be a nonempty array"},
		{`{"$or": 1}`, cmderr.BadValue, "$or must be a nonempty array"},
		{`{"$nor": [1]}`, cmderr.BadValue, "$or/$and/$nor entries need to be full objects"},
		{`{"a": {"$in": 1}}`, cmderr.BadValue, "$in needs an array"},
		{`{"a": {"$nin": {"x": 1}}}`, cmderr.BadValue, "$nin needs an array"},
		{`{"a": {"$in": [{"$gt": 1}]}}`, cmderr.BadValue, "cannot nest $ under $in"},
		{`{"a": {"$all": 1}}`, cmderr.BadValue, "$all needs an array"},
		{`{"a": {"$size": "x"}}`, cmderr.BadValue, "$size needs a number"},
		{`{"a": {"$size": -1}}`, cmderr.BadValue, "Failed to parse $size. Expected a non-negative number, but found -1"},
		{`{"a": {"$size": 1.5}}`, cmderr.BadValue, "Failed to parse $size. Expected an integer, but found 1.5"},
		{`{"a": {"$mod": [0, 1]}}`, cmderr.BadValue, "divisor cannot be 0"},
		{`{"a": {"$mod": [1]}}`, cmderr.BadValue, "malformed mod, not enough elements"},
		{`{"a": {"$mod": [1, 2, 3]}}`, cmderr.BadValue, "malformed mod, too many elements"},
		{`{"a": {"$type": "foo"}}`, cmderr.BadValue, "Unknown type name alias: foo"},
		{`{"a": {"$type": 99}}`, cmderr.BadValue, "Invalid numerical type code: 99"},
		{`{"a": {"$not": 5}}`, cmderr.BadValue, "$not needs a regex or a document"},
		{`{"a": {"$not": {}}}`, cmderr.BadValue, "$not cannot be empty"},
		{`{"a": {"$elemMatch": 1}}`, cmderr.BadValue, "$elemMatch needs an Object"},
		{`{"a": {"$options": "i"}}`, cmderr.BadValue, "$options needs a $regex"},
		{`{"a": {"$regex": {"$regularExpression": {"pattern": "x", "options": "i"}}, "$options": "m"}}`, cmderr.BadValue, "options set in both $regex and $options"},
		{`{"a": {"$regex": 1}}`, cmderr.BadValue, "$regex has to be a string"},
		{`{"a": {"$regex": "x", "$options": "z"}}`, 51108, "invalid flag in regex options: z"},
		{`{"a": {"$regex": "("}}`, 51091, ""},
		{`{"a": {"$regex": "a(?=b)"}}`, cmderr.NotImplemented, ""},
		{`{"a": {"$regex": "(a)\\1"}}`, cmderr.NotImplemented, ""},
		{`{"a": {"$regex": "a*+"}}`, cmderr.NotImplemented, ""},
		{`{"$where": "true"}`, cmderr.BadValue, "$where is not allowed in this context"},
		{`{"$text": {"$search": "x"}}`, cmderr.BadValue, "$text is not allowed in this context"},
		{`{"a": {"$elemMatch": {"$text": {"$search": "x"}}}}`, cmderr.BadValue, "$text can only be applied to the top-level document"},
		{`{"$jsonSchema": {"format": "x"}}`, cmderr.FailedToParse, "$jsonSchema keyword 'format' is not currently supported"},
		{`{"a": {"$geoWithin": {}}}`, cmderr.BadValue, "$geoWithin must be an object"},
		{`{"a": {"$near": [0, 0]}}`, 5626500, ""},
		{`{"a": {"$bitsAllSet": -1}}`, cmderr.FailedToParse, "Expected a positive number in: $bitsAllSet: -1"},
		{`{"a": {"$elemMatch": {"$expr": {"$eq": [1, 1]}}}}`, cmderr.BadValue, "$expr can only be applied to the top-level document"},
		{`{"a": {"$all": [{"$elemMatch": {"b": 1}}, 2]}}`, cmderr.BadValue, "$all/$elemMatch has to be consistent"},
		{`{"a": {"$gt": {"$regularExpression": {"pattern": "x", "options": ""}}}}`, cmderr.BadValue, "Can't have RegEx as arg to predicate over field 'a'."},
	}
	for _, c := range cases {
		_, err := CompileFilter(doc(t, c.filter))
		var ce *cmderr.Error
		if !errors.As(err, &ce) {
			t.Errorf("%s: want *cmderr.Error, got %v", c.filter, err)
			continue
		}
		if ce.Code != c.code || (c.msg != "" && ce.Message != c.msg) {
			t.Errorf("%s: got %d %q, want %d %q", c.filter, ce.Code, ce.Message, c.code, c.msg)
		}
	}
}

func TestMatchPosition(t *testing.T) {
	cases := []struct {
		filter, doc string
		ok          bool
		pos         int
	}{
		{`{"a": 5}`, `{"a": [1, 5, 5]}`, true, 1},
		{`{"a": 5}`, `{"a": 5}`, true, -1},
		{`{"a.b": 2}`, `{"a": [{"b": 1}, {"b": 2}]}`, true, 1},
		{`{"a": {"$elemMatch": {"b": 2, "c": 3}}}`, `{"a": [{"b": 2}, {"b": 2, "c": 3}]}`, true, 1},
		{`{"x": 1, "a": {"$gt": 3}}`, `{"x": 1, "a": [1, 4]}`, true, 1},
		{`{"a": {"$ne": 1}}`, `{"a": [2, 3]}`, true, -1},
		{`{"a": 9}`, `{"a": [1]}`, false, -1},
		{`{"a.b.c": 1}`, `{"a": [{"b": [{"c": 0}]}, {"b": [{"c": 0}, {"c": 1}]}]}`, true, 1},
		{`{"_id": 1, "grades": {"$gte": 85}}`, `{"_id": 1, "grades": [80, 85, 90]}`, true, 1},
	}
	for _, c := range cases {
		f, err := CompileFilter(doc(t, c.filter))
		if err != nil {
			t.Fatal(err)
		}
		ok, pos := f.MatchPosition(doc(t, c.doc))
		if ok != c.ok || pos != c.pos {
			t.Errorf("%s on %s: got (%v, %d), want (%v, %d)", c.filter, c.doc, ok, pos, c.ok, c.pos)
		}
	}
}

func TestNilFilterMatchesAll(t *testing.T) {
	var f *Filter
	if !f.Match(bson.D{{Key: "a", Value: 1}}) {
		t.Fatal("nil filter should match")
	}
}

func TestBSONMNestedValues(t *testing.T) {
	f, err := CompileFilter(bson.D{{Key: "a.b", Value: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if !f.Match(bson.D{{Key: "a", Value: bson.M{"b": 1}}}) {
		t.Error("bson.M sub-document should be traversed")
	}
	if !f.Match(bson.D{{Key: "a", Value: bson.A{bson.M{"b": 1}}}}) {
		t.Error("bson.M array element should be traversed")
	}
}

func TestLookup(t *testing.T) {
	d := doc(t, `{"a": {"b": [10, {"c": 2}]}, "pending": ["x"], "n": null}`)
	cases := []struct {
		path string
		want any
		ok   bool
	}{
		{"a.b.0", int32(10), true},
		{"a.b.1.c", int32(2), true},
		{"a.b.2", nil, false},
		{"a.b.c", nil, false}, // no implicit traversal
		{"pending.0", "x", true},
		{"n", nil, true},
		{"zz", nil, false},
		{"n.x", nil, false},
	}
	for _, c := range cases {
		v, ok := Lookup(d, c.path)
		if ok != c.ok || v != c.want {
			t.Errorf("Lookup(%q) = %v, %v; want %v, %v", c.path, v, ok, c.want, c.ok)
		}
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	f, err := CompileFilter(doc(t, `{"a.b": {"$gt": 1}, "c": {"$in": [1, 2, 3]}, "d": {"$regex": "^x"}, "e": {"$ne": null}}`))
	if err != nil {
		t.Fatal(err)
	}
	d := doc(t, `{"a": [{"b": 0}, {"b": 2}], "c": 3, "d": "xy", "e": 1}`)
	if !f.Match(d) {
		t.Fatal("should match")
	}
	if n := testing.AllocsPerRun(100, func() { f.Match(d) }); n != 0 {
		t.Errorf("Match allocates %v times per call", n)
	}
}

func BenchmarkMatch(b *testing.B) {
	f, err := CompileFilter(doc(b, `{"status": "A", "qty": {"$lt": 30}, "tags": "red"}`))
	if err != nil {
		b.Fatal(err)
	}
	d := doc(b, `{"_id": 1, "status": "A", "qty": 20, "tags": ["blue", "red"], "size": {"h": 14, "w": 21}}`)
	b.ReportAllocs()
	for b.Loop() {
		f.Match(d)
	}
}
