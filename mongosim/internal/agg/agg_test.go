package agg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// memCatalog is an in-memory Catalog for tests.
type memCatalog struct {
	mu     sync.Mutex
	colls  map[string][]bson.D
	merges []mergeCall
}

type mergeCall struct {
	ns             string
	docs           []bson.D
	on             []string
	whenMatched    any
	whenNotMatched string
}

func newCatalog() *memCatalog { return &memCatalog{colls: map[string][]bson.D{}} }

func (c *memCatalog) Read(db, coll string) ([]bson.D, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]bson.D(nil), c.colls[db+"."+coll]...), nil
}

func (c *memCatalog) Out(db, coll string, docs []bson.D) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.colls[db+"."+coll] = docs
	return nil
}

func (c *memCatalog) Merge(db, coll string, docs []bson.D, on []string, whenMatched any, whenNotMatched string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.merges = append(c.merges, mergeCall{db + "." + coll, docs, on, whenMatched, whenNotMatched})
	return nil
}

func parse(t testing.TB, s string) any {
	t.Helper()
	var d bson.D
	if err := bson.UnmarshalExtJSON([]byte(`{"v": `+s+`}`), false, &d); err != nil {
		t.Fatalf("bad test JSON %s: %v", s, err)
	}
	return d[0].Value
}

func parseDocs(t testing.TB, s string) []bson.D {
	t.Helper()
	a := parse(t, s).(bson.A)
	out := make([]bson.D, len(a))
	for i, x := range a {
		out[i] = x.(bson.D)
	}
	return out
}

func docsJSON(docs []bson.D) string {
	a := make(bson.A, len(docs))
	for i, d := range docs {
		a[i] = d
	}
	b, err := bson.MarshalExtJSON(bson.D{{Key: "v", Value: a}}, true, false)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func sameDocs(a, b []bson.D) bool {
	x, err1 := bson.Marshal(bson.D{{Key: "v", Value: toA(a)}})
	y, err2 := bson.Marshal(bson.D{{Key: "v", Value: toA(b)}})
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

func toA(docs []bson.D) bson.A {
	a := make(bson.A, len(docs))
	for i, d := range docs {
		a[i] = d
	}
	return a
}

const people = `[
 {"_id": 1, "name": "ann", "age": 30, "city": "rome", "tags": ["a", "b"], "pets": [{"kind": "cat", "n": 2}, {"kind": "dog", "n": 1}]},
 {"_id": 2, "name": "bob", "age": 25, "city": "oslo", "tags": [], "pets": []},
 {"_id": 3, "name": "cid", "age": 35, "city": "rome", "tags": "solo"},
 {"_id": 4, "name": "dee", "age": null, "city": "oslo", "tags": null, "pets": [{"kind": "cat", "n": 1}]}
]`

// extraCollections are more collections for runPipeCases' catalog, by
// namespace, as extended JSON arrays.
var extraCollections = map[string]string{}

type pipeCase struct {
	name     string
	pipeline string
	input    string // defaults to people
	want     string
	code     int32
	compile  bool // the error is expected from Compile
}

func runPipeCases(t *testing.T, cases []pipeCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := c.input
			if in == "" {
				in = people
			}
			docs := parseDocs(t, in)
			before := docsJSON(docs)
			cat := newCatalog()
			cat.colls["test.owners"] = parseDocs(t, `[{"_id": "o1", "city": "rome", "owner": "max"}, {"_id": "o2", "city": "oslo", "owner": "ida"}, {"_id": "o3", "city": ["rome", "paris"], "owner": "liv"}]`)
			cat.colls["test.extra"] = parseDocs(t, `[{"_id": 100, "name": "zed"}]`)
			for ns, docs := range extraCollections {
				cat.colls[ns] = parseDocs(t, docs)
			}
			p, err := Compile(parse(t, c.pipeline).(bson.A))
			var got []bson.D
			if err == nil {
				if c.compile {
					t.Fatalf("Compile succeeded, want error %d", c.code)
				}
				got, err = p.Run(context.Background(), docs, Env{DB: "test", Catalog: cat, Now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), Vars: map[string]any{"limit": int32(30)}})
			}
			if c.code != 0 {
				var ce *cmderr.Error
				if !errors.As(err, &ce) || ce.Code != c.code {
					t.Fatalf("want error code %d, got %v (docs %s)", c.code, err, docsJSON(got))
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			want := parseDocs(t, c.want)
			if !sameDocs(got, want) {
				t.Fatalf("got  %s\nwant %s", docsJSON(got), docsJSON(want))
			}
			if after := docsJSON(docs); after != before {
				t.Fatalf("pipeline modified its input:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

func TestCounterCleanupPipeline(t *testing.T) {
	runPipeCases(t, []pipeCase{{
		name:     "resilient-applications counter clean-up",
		pipeline: `[{"$match": {"pending.0": {"$exists": true}}}, {"$project": {"counter": {"$add": ["$counter", {"$size": "$pending"}]}}}]`,
		input:    `[{"_id": "c1", "counter": 10, "pending": ["t1", "t2"]}, {"_id": "c2", "counter": 3, "pending": []}, {"_id": "c3", "counter": {"$numberLong": "7"}, "pending": ["t3"]}]`,
		want:     `[{"_id": "c1", "counter": 12}, {"_id": "c3", "counter": {"$numberLong": "8"}}]`,
	}})
}

func TestMatch(t *testing.T) {
	runPipeCases(t, []pipeCase{
		{name: "equality", pipeline: `[{"$match": {"city": "oslo"}}, {"$project": {"_id": 1}}]`, want: `[{"_id": 2}, {"_id": 4}]`},
		{name: "expr", pipeline: `[{"$match": {"$expr": {"$gt": ["$age", 28]}}}, {"$project": {"_id": 1}}]`, want: `[{"_id": 1}, {"_id": 3}]`},
		{name: "expr with let var", pipeline: `[{"$match": {"city": "rome", "$expr": {"$lt": ["$age", "$$limit"]}}}, {"$project": {"_id": 1}}]`, want: `[]`},
		{name: "expr inside and", pipeline: `[{"$match": {"$and": [{"city": "rome"}, {"$expr": {"$eq": ["$age", 35]}}]}}, {"$project": {"_id": 1}}]`, want: `[{"_id": 3}]`},
		{name: "expr error fails", pipeline: `[{"$match": {"$expr": {"$divide": [1, 0]}}}]`, code: 16608},
		{name: "bad operator", pipeline: `[{"$match": {"age": {"$foo": 1}}}]`, code: 2, compile: true},
		{name: "not an object", pipeline: `[{"$match": 1}]`, code: 15959, compile: true},
	})
}

func TestProject(t *testing.T) {
	in := `[{"_id": 1, "a": 1, "b": {"c": 2, "d": 3}, "arr": [{"x": 1, "y": 2}, {"x": 3}, 5], "s": "v"}]`
	runPipeCases(t, []pipeCase{
		{name: "inclusion keeps doc order", input: in, pipeline: `[{"$project": {"s": 1, "a": true}}]`, want: `[{"_id": 1, "a": 1, "s": "v"}]`},
		{name: "exclude id", input: in, pipeline: `[{"$project": {"a": 1, "_id": 0}}]`, want: `[{"a": 1}]`},
		{name: "only id excluded", input: in, pipeline: `[{"$project": {"_id": 0}}]`, want: `[{"a": 1, "b": {"c": 2, "d": 3}, "arr": [{"x": 1, "y": 2}, {"x": 3}, 5], "s": "v"}]`},
		{name: "exclusion", input: in, pipeline: `[{"$project": {"b.c": 0, "arr": 0}}]`, want: `[{"_id": 1, "a": 1, "b": {"d": 3}, "s": "v"}]`},
		{name: "nested inclusion", input: in, pipeline: `[{"$project": {"b.d": 1}}]`, want: `[{"_id": 1, "b": {"d": 3}}]`},
		{name: "nested inclusion sub-object", input: in, pipeline: `[{"$project": {"b": {"c": 1}}}]`, want: `[{"_id": 1, "b": {"c": 2}}]`},
		{name: "inclusion through array", input: in, pipeline: `[{"$project": {"arr.x": 1, "_id": 0}}]`, want: `[{"arr": [{"x": 1}, {"x": 3}]}]`},
		{name: "exclusion through array", input: in, pipeline: `[{"$project": {"arr.x": 0, "_id": 0, "b": 0}}]`, want: `[{"a": 1, "arr": [{"y": 2}, {}, 5], "s": "v"}]`},
		{name: "computed", input: in, pipeline: `[{"$project": {"sum": {"$add": ["$a", "$b.c"]}, "lit": "x", "a": 1}}]`, want: `[{"_id": 1, "a": 1, "sum": 3, "lit": "x"}]`},
		{name: "computed missing omitted", input: in, pipeline: `[{"$project": {"m": "$nope", "r": "$$REMOVE", "n": {"$ifNull": ["$nope", null]}}}]`, want: `[{"_id": 1, "n": null}]`},
		{name: "computed nested path", input: in, pipeline: `[{"$project": {"q.r": "$a", "_id": 0}}]`, want: `[{"q": {"r": 1}}]`},
		{name: "computed id", input: in, pipeline: `[{"$project": {"_id": "$s"}}]`, want: `[{"_id": "v"}]`},
		{name: "literal number via $literal", input: in, pipeline: `[{"$project": {"one": {"$literal": 1}, "_id": 0}}]`, want: `[{"one": 1}]`},
		{name: "mixed", input: in, pipeline: `[{"$project": {"a": 1, "b": 0}}]`, code: 31254, compile: true},
		{name: "mixed reverse", input: in, pipeline: `[{"$project": {"b": 0, "a": 1}}]`, code: 31253, compile: true},
		{name: "expression in exclusion", input: in, pipeline: `[{"$project": {"b": 0, "x": "$a"}}]`, code: 31252, compile: true},
		{name: "empty", input: in, pipeline: `[{"$project": {}}]`, code: 51272, compile: true},
		{name: "collision", input: in, pipeline: `[{"$project": {"b": 1, "b.c": 1}}]`, code: 31249, compile: true},
		{name: "collision reverse", input: in, pipeline: `[{"$project": {"b.c": 1, "b": 1}}]`, code: 31250, compile: true},
		{name: "dollar field", input: in, pipeline: `[{"$project": {"$a": 1}}]`, code: 16410, compile: true},
		{name: "empty sub-projection", input: in, pipeline: `[{"$project": {"b": {}}}]`, code: 51270, compile: true},
		{name: "bad expression", input: in, pipeline: `[{"$project": {"x": {"$nope": 1}}}]`, code: 168, compile: true},
		{name: "runtime error", input: in, pipeline: `[{"$project": {"x": {"$size": "$a"}}}]`, code: 17124},
		{name: "not object", input: in, pipeline: `[{"$project": 1}]`, code: 15969, compile: true},
	})
}

func TestAddFieldsSetUnset(t *testing.T) {
	in := `[{"_id": 1, "a": 1, "b": {"c": 2}, "arr": [{"x": 1}, {"x": 2}]}]`
	runPipeCases(t, []pipeCase{
		{name: "addFields", input: in, pipeline: `[{"$addFields": {"z": {"$add": ["$a", 1]}, "a": 10}}]`, want: `[{"_id": 1, "a": 10, "b": {"c": 2}, "arr": [{"x": 1}, {"x": 2}], "z": 2}]`},
		{name: "set numbers are values", input: in, pipeline: `[{"$set": {"t": true, "n": 0}}, {"$project": {"t": 1, "n": 1, "_id": 0}}]`, want: `[{"t": true, "n": 0}]`},
		{name: "set nested merges", input: in, pipeline: `[{"$set": {"b": {"d": 3}}}, {"$project": {"b": 1, "_id": 0}}]`, want: `[{"b": {"c": 2, "d": 3}}]`},
		{name: "set dotted", input: in, pipeline: `[{"$set": {"b.e.f": "$a"}}, {"$project": {"b": 1, "_id": 0}}]`, want: `[{"b": {"c": 2, "e": {"f": 1}}}]`},
		{name: "set into array elements", input: in, pipeline: `[{"$set": {"arr.y": 0}}, {"$project": {"arr": 1, "_id": 0}}]`, want: `[{"arr": [{"x": 1, "y": 0}, {"x": 2, "y": 0}]}]`},
		{name: "set remove", input: in, pipeline: `[{"$set": {"a": "$$REMOVE"}}]`, want: `[{"_id": 1, "b": {"c": 2}, "arr": [{"x": 1}, {"x": 2}]}]`},
		{name: "set empty object", input: in, pipeline: `[{"$set": {"a": {}}}, {"$project": {"a": 1, "_id": 0}}]`, want: `[{"a": {}}]`},
		{name: "unset string", input: in, pipeline: `[{"$unset": "b"}]`, want: `[{"_id": 1, "a": 1, "arr": [{"x": 1}, {"x": 2}]}]`},
		{name: "unset list nested", input: in, pipeline: `[{"$unset": ["b.c", "arr.x", "a"]}]`, want: `[{"_id": 1, "b": {}, "arr": [{}, {}]}]`},
		{name: "unset bad", input: in, pipeline: `[{"$unset": [1]}]`, code: 31120, compile: true},
		{name: "unset empty", input: in, pipeline: `[{"$unset": []}]`, code: 31119, compile: true},
		{name: "addFields not object", input: in, pipeline: `[{"$addFields": 1}]`, code: 40272, compile: true},
	})
}

func TestGroup(t *testing.T) {
	runPipeCases(t, []pipeCase{
		{name: "by city", pipeline: `[{"$group": {"_id": "$city", "n": {"$sum": 1}, "ages": {"$sum": "$age"}, "avg": {"$avg": "$age"}, "names": {"$push": "$name"}, "min": {"$min": "$age"}, "max": {"$max": "$age"}, "first": {"$first": "$name"}, "last": {"$last": "$name"}, "cnt": {"$count": {}}}}]`,
			want: `[{"_id": "rome", "n": 2, "ages": 65, "avg": 32.5, "names": ["ann", "cid"], "min": 30, "max": 35, "first": "ann", "last": "cid", "cnt": 2},
			        {"_id": "oslo", "n": 2, "ages": 25, "avg": 25.0, "names": ["bob", "dee"], "min": 25, "max": 25, "first": "bob", "last": "dee", "cnt": 2}]`},
		{name: "null id", pipeline: `[{"$group": {"_id": null, "total": {"$sum": "$age"}}}]`, want: `[{"_id": null, "total": 90}]`},
		{name: "missing and null group together", input: `[{"_id": 1, "k": null}, {"_id": 2}, {"_id": 3, "k": 1}, {"_id": 4, "k": 1.0}, {"_id": 5, "k": {"$numberLong": "1"}}]`,
			pipeline: `[{"$group": {"_id": "$k", "ids": {"$push": "$_id"}}}]`, want: `[{"_id": null, "ids": [1, 2]}, {"_id": 1, "ids": [3, 4, 5]}]`},
		{name: "document id", pipeline: `[{"$group": {"_id": {"c": "$city", "old": {"$gte": ["$age", 30]}}, "n": {"$sum": 1}}}, {"$sort": {"_id.c": 1, "_id.old": 1}}]`,
			want: `[{"_id": {"c": "oslo", "old": false}, "n": 2}, {"_id": {"c": "rome", "old": true}, "n": 2}]`},
		{name: "addToSet and mergeObjects", input: `[{"_id": 1, "g": 1, "v": "x", "o": {"a": 1}}, {"_id": 2, "g": 1, "v": "x", "o": {"b": 2}}, {"_id": 3, "g": 1, "v": "y", "o": null}]`,
			pipeline: `[{"$group": {"_id": "$g", "s": {"$addToSet": "$v"}, "m": {"$mergeObjects": "$o"}}}]`, want: `[{"_id": 1, "s": ["x", "y"], "m": {"a": 1, "b": 2}}]`},
		{name: "push skips missing", pipeline: `[{"$group": {"_id": 0, "p": {"$push": "$pets.kind"}, "q": {"$push": "$nope"}}}]`,
			want: `[{"_id": 0, "p": [["cat", "dog"], [], ["cat"]], "q": []}]`},
		{name: "first of missing is null", pipeline: `[{"$group": {"_id": 0, "f": {"$first": "$nope"}}}]`, want: `[{"_id": 0, "f": null}]`},
		{name: "avg of nothing", pipeline: `[{"$group": {"_id": 0, "a": {"$avg": "$nope"}, "s": {"$sum": "$nope"}}}]`, want: `[{"_id": 0, "a": null, "s": 0}]`},
		{name: "stdDevPop", input: `[{"v": 2}, {"v": 4}, {"v": 4}, {"v": 4}, {"v": 5}, {"v": 5}, {"v": 7}, {"v": 9}]`, pipeline: `[{"$group": {"_id": null, "sd": {"$stdDevPop": "$v"}}}]`, want: `[{"_id": null, "sd": 2.0}]`},
		{name: "empty input", input: `[]`, pipeline: `[{"$group": {"_id": null, "n": {"$sum": 1}}}]`, want: `[]`},
		{name: "sum long promotion", input: `[{"v": 2147483647}, {"v": 1}]`, pipeline: `[{"$group": {"_id": null, "s": {"$sum": "$v"}}}]`, want: `[{"_id": null, "s": {"$numberLong": "2147483648"}}]`},
		{name: "no id", pipeline: `[{"$group": {"n": {"$sum": 1}}}]`, code: 15955, compile: true},
		{name: "unknown accumulator", pipeline: `[{"$group": {"_id": null, "n": {"$foo": 1}}}]`, code: 15952, compile: true},
		{name: "accumulator without merge", pipeline: `[{"$group": {"_id": null, "n": {"$accumulator": {"init": "function() {}", "accumulate": "function() {}", "accumulateArgs": [], "lang": "js"}}}}]`, code: 4544709, compile: true},
		{name: "accumulator without scripting", pipeline: `[{"$group": {"_id": null, "n": {"$accumulator": {"init": "function() {}", "accumulate": "function() {}", "accumulateArgs": [], "merge": "function() {}", "lang": "js"}}}}]`, code: 31264},
		{name: "dotted field", pipeline: `[{"$group": {"_id": null, "a.b": {"$sum": 1}}}]`, code: 40235, compile: true},
		{name: "not accumulator object", pipeline: `[{"$group": {"_id": null, "n": 1}}]`, code: 40234, compile: true},
		{name: "array argument", pipeline: `[{"$group": {"_id": null, "n": {"$sum": [1, 2]}}}]`, code: 40237, compile: true},
		{name: "count with args", pipeline: `[{"$group": {"_id": null, "n": {"$count": 1}}}]`, code: 14, compile: true},
		{name: "two accumulators", pipeline: `[{"$group": {"_id": null, "n": {"$sum": 1, "$avg": 1}}}]`, code: 40238, compile: true},
	})
}

func TestSortLimitSkipCount(t *testing.T) {
	runPipeCases(t, []pipeCase{
		{name: "sort desc", pipeline: `[{"$sort": {"age": -1}}, {"$project": {"_id": 1}}]`, want: `[{"_id": 3}, {"_id": 1}, {"_id": 2}, {"_id": 4}]`},
		{name: "sort two keys", pipeline: `[{"$sort": {"city": 1, "name": -1}}, {"$project": {"_id": 1}}]`, want: `[{"_id": 4}, {"_id": 2}, {"_id": 3}, {"_id": 1}]`},
		{name: "limit", pipeline: `[{"$limit": 2}, {"$project": {"_id": 1}}]`, want: `[{"_id": 1}, {"_id": 2}]`},
		{name: "limit long", pipeline: `[{"$limit": {"$numberLong": "1"}}, {"$project": {"_id": 1}}]`, want: `[{"_id": 1}]`},
		{name: "skip", pipeline: `[{"$skip": 3}, {"$project": {"_id": 1}}]`, want: `[{"_id": 4}]`},
		{name: "skip all", pipeline: `[{"$skip": 9}]`, want: `[]`},
		{name: "count", pipeline: `[{"$match": {"city": "rome"}}, {"$count": "n"}]`, want: `[{"n": 2}]`},
		{name: "count none", pipeline: `[{"$match": {"city": "nowhere"}}, {"$count": "n"}]`, want: `[]`},
		{name: "sort empty", pipeline: `[{"$sort": {}}]`, code: 15976, compile: true},
		{name: "sort bad", pipeline: `[{"$sort": 1}]`, code: 15973, compile: true},
		{name: "limit zero", pipeline: `[{"$limit": 0}]`, code: 15958, compile: true},
		{name: "limit string", pipeline: `[{"$limit": "1"}]`, code: 15957, compile: true},
		{name: "limit fraction", pipeline: `[{"$limit": 1.5}]`, code: 9, compile: true},
		{name: "skip negative", pipeline: `[{"$skip": -1}]`, code: 15956, compile: true},
		{name: "count empty", pipeline: `[{"$count": ""}]`, code: 40157, compile: true},
		{name: "count dollar", pipeline: `[{"$count": "$n"}]`, code: 40158, compile: true},
		{name: "count dot", pipeline: `[{"$count": "a.b"}]`, code: 40160, compile: true},
		{name: "sortByCount", pipeline: `[{"$unwind": "$pets"}, {"$sortByCount": "$pets.kind"}]`, want: `[{"_id": "cat", "count": 2}, {"_id": "dog", "count": 1}]`},
		{name: "sortByCount bad", pipeline: `[{"$sortByCount": "city"}]`, code: 40148, compile: true},
	})
}

func TestUnwind(t *testing.T) {
	runPipeCases(t, []pipeCase{
		{name: "string form", pipeline: `[{"$unwind": "$tags"}, {"$project": {"tags": 1}}]`, want: `[{"_id": 1, "tags": "a"}, {"_id": 1, "tags": "b"}, {"_id": 3, "tags": "solo"}]`},
		{name: "index and preserve", pipeline: `[{"$unwind": {"path": "$tags", "includeArrayIndex": "i", "preserveNullAndEmptyArrays": true}}, {"$project": {"tags": 1, "i": 1}}]`,
			want: `[{"_id": 1, "tags": "a", "i": {"$numberLong": "0"}}, {"_id": 1, "tags": "b", "i": {"$numberLong": "1"}}, {"_id": 2, "i": null}, {"_id": 3, "tags": "solo", "i": null}, {"_id": 4, "tags": null, "i": null}]`},
		{name: "nested path", input: `[{"_id": 1, "a": {"b": [1, 2]}}]`, pipeline: `[{"$unwind": "$a.b"}]`, want: `[{"_id": 1, "a": {"b": 1}}, {"_id": 1, "a": {"b": 2}}]`},
		{name: "missing preserved", input: `[{"_id": 1}]`, pipeline: `[{"$unwind": {"path": "$x", "preserveNullAndEmptyArrays": true}}]`, want: `[{"_id": 1}]`},
		{name: "no dollar", pipeline: `[{"$unwind": "tags"}]`, code: 28818, compile: true},
		{name: "unknown option", pipeline: `[{"$unwind": {"path": "$tags", "x": 1}}]`, code: 28811, compile: true},
		{name: "no path", pipeline: `[{"$unwind": {"preserveNullAndEmptyArrays": true}}]`, code: 28812, compile: true},
		{name: "bad type", pipeline: `[{"$unwind": 1}]`, code: 15981, compile: true},
		{name: "index dollar", pipeline: `[{"$unwind": {"path": "$tags", "includeArrayIndex": "$i"}}]`, code: 28822, compile: true},
	})
}

func TestReplaceRoot(t *testing.T) {
	runPipeCases(t, []pipeCase{
		{name: "replaceRoot", input: `[{"_id": 1, "in": {"a": 1}}]`, pipeline: `[{"$replaceRoot": {"newRoot": "$in"}}]`, want: `[{"a": 1}]`},
		{name: "replaceWith merge", input: `[{"_id": 1, "in": {"a": 1}}]`, pipeline: `[{"$replaceWith": {"$mergeObjects": [{"_id": "$_id"}, "$in"]}}]`, want: `[{"_id": 1, "a": 1}]`},
		{name: "not object", input: `[{"_id": 1, "in": 5}]`, pipeline: `[{"$replaceRoot": {"newRoot": "$in"}}]`, code: 40228},
		{name: "missing", input: `[{"_id": 1}]`, pipeline: `[{"$replaceWith": "$in"}]`, code: 40228},
		{name: "no newRoot", pipeline: `[{"$replaceRoot": {}}]`, code: 40414, compile: true},
		{name: "unknown field", pipeline: `[{"$replaceRoot": {"newRoot": "$a", "x": 1}}]`, code: 40415, compile: true},
	})
}

func TestLookupFacetUnion(t *testing.T) {
	runPipeCases(t, []pipeCase{
		{name: "lookup equality", pipeline: `[{"$match": {"_id": {"$in": [1, 2]}}}, {"$lookup": {"from": "owners", "localField": "city", "foreignField": "city", "as": "o"}}, {"$project": {"o._id": 1}}]`,
			want: `[{"_id": 1, "o": [{"_id": "o1"}, {"_id": "o3"}]}, {"_id": 2, "o": [{"_id": "o2"}]}]`},
		{name: "lookup local array", input: `[{"_id": 1, "cs": ["oslo", "paris"]}]`, pipeline: `[{"$lookup": {"from": "owners", "localField": "cs", "foreignField": "city", "as": "o"}}, {"$project": {"o._id": 1}}]`,
			want: `[{"_id": 1, "o": [{"_id": "o2"}, {"_id": "o3"}]}]`},
		{name: "lookup missing local matches missing foreign", input: `[{"_id": 1}]`, pipeline: `[{"$lookup": {"from": "owners", "localField": "nope", "foreignField": "nope", "as": "o"}}, {"$project": {"n": {"$size": "$o"}}}]`,
			want: `[{"_id": 1, "n": 3}]`},
		{name: "lookup unknown collection", input: `[{"_id": 1}]`, pipeline: `[{"$lookup": {"from": "none", "localField": "a", "foreignField": "b", "as": "o"}}]`, want: `[{"_id": 1, "o": []}]`},
		{name: "lookup pipeline let", pipeline: `[{"$match": {"_id": 3}}, {"$lookup": {"from": "owners", "let": {"c": "$city"}, "pipeline": [{"$match": {"$expr": {"$eq": ["$city", "$$c"]}}}, {"$project": {"owner": 1, "_id": 0}}], "as": "o"}}, {"$project": {"o": 1}}]`,
			want: `[{"_id": 3, "o": [{"owner": "max"}]}]`},
		{name: "lookup pipeline sees command let", pipeline: `[{"$match": {"_id": 3}}, {"$lookup": {"from": "owners", "pipeline": [{"$project": {"_id": 0, "l": "$$limit"}}, {"$limit": 1}], "as": "o"}}, {"$project": {"o": 1}}]`,
			want: `[{"_id": 3, "o": [{"l": 30}]}]`},
		{name: "lookup dotted as", input: `[{"_id": 1, "city": "oslo"}]`, pipeline: `[{"$lookup": {"from": "owners", "localField": "city", "foreignField": "city", "as": "x.y"}}, {"$project": {"x.y.owner": 1}}]`,
			want: `[{"_id": 1, "x": {"y": [{"owner": "ida"}]}}]`},
		{name: "lookup no as", pipeline: `[{"$lookup": {"from": "owners", "localField": "a", "foreignField": "b"}}]`, code: 9, compile: true},
		{name: "lookup half equality", pipeline: `[{"$lookup": {"from": "owners", "localField": "a", "as": "x"}}]`, code: 9, compile: true},
		{name: "lookup unknown arg", pipeline: `[{"$lookup": {"from": "owners", "localField": "a", "foreignField": "b", "as": "x", "y": 1}}]`, code: 9, compile: true},
		{name: "lookup out inside", pipeline: `[{"$lookup": {"from": "owners", "pipeline": [{"$out": "x"}], "as": "x"}}]`, code: 51047, compile: true},
		{name: "lookup bad let name", pipeline: `[{"$lookup": {"from": "owners", "let": {"Bad": 1}, "pipeline": [], "as": "x"}}]`, code: 9, compile: true},
		{name: "facet", pipeline: `[{"$facet": {"n": [{"$count": "c"}], "rome": [{"$match": {"city": "rome"}}, {"$project": {"_id": 1}}]}}]`,
			want: `[{"n": [{"c": 4}], "rome": [{"_id": 1}, {"_id": 3}]}]`},
		{name: "facet nested facet", pipeline: `[{"$facet": {"a": [{"$facet": {"b": [{"$limit": 1}]}}]}}]`, code: 40600, compile: true},
		{name: "facet out", pipeline: `[{"$facet": {"a": [{"$out": "x"}]}}]`, code: 40600, compile: true},
		{name: "facet empty pipeline", pipeline: `[{"$facet": {"a": []}}]`, code: 40171, compile: true},
		{name: "facet bad name", pipeline: `[{"$facet": {"$a": [{"$limit": 1}]}}]`, code: 40174, compile: true},
		{name: "unionWith", input: `[{"_id": 1}]`, pipeline: `[{"$unionWith": "extra"}]`, want: `[{"_id": 1}, {"_id": 100, "name": "zed"}]`},
		{name: "unionWith pipeline", input: `[{"_id": 1}]`, pipeline: `[{"$unionWith": {"coll": "owners", "pipeline": [{"$match": {"owner": "ida"}}, {"$project": {"owner": 1}}]}}]`, want: `[{"_id": 1}, {"_id": "o2", "owner": "ida"}]`},
		{name: "unionWith documents", input: `[{"_id": 1}]`, pipeline: `[{"$unionWith": {"pipeline": [{"$documents": [{"x": 1}]}]}}]`, want: `[{"_id": 1}, {"x": 1}]`},
		{name: "unionWith no coll", pipeline: `[{"$unionWith": {"pipeline": []}}]`, code: 40414, compile: true},
		{name: "documents", input: `[{"_id": 1}]`, pipeline: `[{"$documents": [{"a": 1}, {"a": {"$add": [1, 1]}}]}, {"$match": {"a": 2}}]`, want: `[{"a": 2}]`},
		{name: "documents not first", pipeline: `[{"$limit": 1}, {"$documents": []}]`, code: 40602, compile: true},
		{name: "documents not docs", pipeline: `[{"$documents": [1]}]`, code: 40228},
	})
}

func TestPipelineErrors(t *testing.T) {
	runPipeCases(t, []pipeCase{
		{name: "unknown stage", pipeline: `[{"$foo": {}}]`, code: 40324, compile: true},
		{name: "unsupported stage", pipeline: `[{"$planCacheStats": {}}]`, code: 238, compile: true},
		{name: "geoNear not first", pipeline: `[{"$geoNear": {}}]`, code: 40603, compile: true},
		{name: "two fields", pipeline: `[{"$match": {}, "$limit": 1}]`, code: 40323, compile: true},
		{name: "not object", pipeline: `[1]`, code: 14, compile: true},
		{name: "out not last", pipeline: `[{"$out": "x"}, {"$limit": 1}]`, code: 40601, compile: true},
		{name: "merge not last", pipeline: `[{"$merge": {"into": "x"}}, {"$limit": 1}]`, code: 40601, compile: true},
		{name: "empty pipeline", pipeline: `[]`, input: `[{"_id": 1}]`, want: `[{"_id": 1}]`},
	})
}

func TestOutAndMerge(t *testing.T) {
	cat := newCatalog()
	docs := parseDocs(t, people)
	p, err := Compile(parse(t, `[{"$match": {"city": "rome"}}, {"$project": {"name": 1}}, {"$out": "romans"}]`).(bson.A))
	if err != nil {
		t.Fatal(err)
	}
	if !p.HasWriteStage() {
		t.Fatal("HasWriteStage false for $out")
	}
	out, err := p.Run(context.Background(), docs, Env{DB: "test", Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 0 {
		t.Fatalf("$out returned documents: %s", docsJSON(out))
	}
	if got, want := cat.colls["test.romans"], parseDocs(t, `[{"_id": 1, "name": "ann"}, {"_id": 3, "name": "cid"}]`); !sameDocs(got, want) {
		t.Fatalf("$out wrote %s", docsJSON(got))
	}

	p, err = Compile(parse(t, `[{"$out": {"db": "other", "coll": "c"}}]`).(bson.A))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Run(context.Background(), docs[:1], Env{DB: "test", Catalog: cat}); err != nil {
		t.Fatal(err)
	}
	if len(cat.colls["other.c"]) != 1 {
		t.Fatalf("$out to another db wrote %v", cat.colls)
	}

	p, err = Compile(parse(t, `[{"$merge": {"into": {"db": "d2", "coll": "m"}, "on": ["name", "city"], "whenMatched": [{"$set": {"x": 1}}], "whenNotMatched": "discard"}}]`).(bson.A))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Run(context.Background(), docs, Env{DB: "test", Catalog: cat}); err != nil {
		t.Fatal(err)
	}
	m := cat.merges[len(cat.merges)-1]
	if m.ns != "d2.m" || fmt.Sprint(m.on) != "[name city]" || m.whenNotMatched != "discard" || len(m.docs) != 4 {
		t.Fatalf("merge call %+v", m)
	}
	if _, ok := m.whenMatched.(bson.A); !ok {
		t.Fatalf("whenMatched pipeline passed as %T", m.whenMatched)
	}

	p, err = Compile(parse(t, `[{"$merge": "plain"}]`).(bson.A))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Run(context.Background(), docs, Env{DB: "test", Catalog: cat}); err != nil {
		t.Fatal(err)
	}
	m = cat.merges[len(cat.merges)-1]
	if m.ns != "test.plain" || fmt.Sprint(m.on) != "[_id]" || m.whenMatched != "merge" || m.whenNotMatched != "insert" {
		t.Fatalf("merge defaults %+v", m)
	}
	// the catalog gets copies: changing them must not reach the input
	m.docs[0][0].Value = "changed"
	if docs[0][0].Value == "changed" {
		t.Fatal("$merge shared documents with its input")
	}

	for spec, code := range map[string]int32{
		`[{"$merge": {"into": "x", "whenMatched": "nope"}}]`:                      2,
		`[{"$merge": {"into": "x", "whenNotMatched": "nope"}}]`:                   2,
		`[{"$merge": {"into": "x", "whenMatched": [{"$group": {"_id": null}}]}}]`: 72,
		`[{"$merge": {"whenMatched": "merge"}}]`:                                  40414,
		`[{"$merge": {"into": "x", "bogus": 1}}]`:                                 40415,
		`[{"$merge": {"into": "x", "on": []}}]`:                                   51186,
		`[{"$merge": {"into": "x", "let": {}}}]`:                                  238,
		`[{"$out": 1}]`:                                                           16990,
		`[{"$out": {"coll": "x"}}]`:                                               40414,
	} {
		_, err := Compile(parse(t, spec).(bson.A))
		var ce *cmderr.Error
		if !errors.As(err, &ce) || ce.Code != code {
			t.Errorf("%s: want code %d, got %v", spec, code, err)
		}
	}

	// without a catalog a write stage fails loudly
	p, _ = Compile(parse(t, `[{"$out": "x"}]`).(bson.A))
	_, err = p.Run(context.Background(), docs, Env{})
	var ce *cmderr.Error
	if !errors.As(err, &ce) || ce.Code != cmderr.NotImplemented {
		t.Fatalf("$out without catalog: %v", err)
	}
}

func TestLeadingMatchAndHelpers(t *testing.T) {
	p, err := Compile(parse(t, `[{"$match": {"city": "oslo", "$expr": {"$gt": ["$age", 100]}}}, {"$limit": 1}]`).(bson.A))
	if err != nil {
		t.Fatal(err)
	}
	f := p.LeadingMatch()
	if f == nil {
		t.Fatal("LeadingMatch nil for a leading $match")
	}
	docs := parseDocs(t, people)
	if !f.Match(docs[1]) || f.Match(docs[0]) {
		t.Fatal("LeadingMatch filter does not filter on city")
	}
	if p.HasWriteStage() {
		t.Fatal("HasWriteStage true without $out")
	}
	if got := fmt.Sprint(p.Stages()); got != "[$match $limit]" {
		t.Fatalf("Stages() = %s", got)
	}
	p, _ = Compile(parse(t, `[{"$limit": 1}, {"$match": {}}]`).(bson.A))
	if p.LeadingMatch() != nil {
		t.Fatal("LeadingMatch non-nil when the first stage is not $match")
	}
	// the full stage still applies the $expr part
	p, _ = Compile(parse(t, `[{"$match": {"city": "oslo", "$expr": {"$gt": ["$age", 100]}}}]`).(bson.A))
	out, err := p.Run(context.Background(), docs, Env{})
	if err != nil || len(out) != 0 {
		t.Fatalf("got %s, %v", docsJSON(out), err)
	}
}

func TestNowAndContext(t *testing.T) {
	now := time.Date(2025, 6, 7, 8, 9, 10, 0, time.UTC)
	p, err := Compile(parse(t, `[{"$project": {"_id": 0, "t": "$$NOW"}}]`).(bson.A))
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Run(context.Background(), []bson.D{{}}, Env{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if got := out[0][0].Value; got != bson.NewDateTimeFromTime(now) {
		t.Fatalf("$$NOW = %v", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Run(ctx, []bson.D{{}}, Env{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: %v", err)
	}
}

func TestConcurrentRuns(t *testing.T) {
	p, err := Compile(parse(t, `[{"$unwind": "$pets"}, {"$group": {"_id": "$pets.kind", "n": {"$sum": "$pets.n"}}}, {"$sort": {"_id": 1}}]`).(bson.A))
	if err != nil {
		t.Fatal(err)
	}
	docs := parseDocs(t, people)
	want := parseDocs(t, `[{"_id": "cat", "n": 3}, {"_id": "dog", "n": 1}]`)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := p.Run(context.Background(), docs, Env{})
			if err == nil && !sameDocs(out, want) {
				err = fmt.Errorf("got %s", docsJSON(out))
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
