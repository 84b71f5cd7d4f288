package expr

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

const testDoc = `{"_id": 1, "a": 5, "b": 2, "d": 1.5, "s": "Hello", "arr": [1, 2, 3],
 "objs": [{"x": 1}, {"x": 2}, {"y": 3}, 7, [{"x": 4}]], "n": null,
 "sub": {"k": "v", "deep": {"z": 9}}, "date": {"$date": "2024-03-05T06:07:08.009Z"},
 "pending": ["p1", "p2"], "counter": 10, "big": {"$numberLong": "9223372036854775807"},
 "l": {"$numberLong": "7"}, "neg": -3, "str": "  pad  ", "oid": {"$oid": "65f0a1b2c3d4e5f601020304"}}`

func parseDoc(t testing.TB, s string) bson.D {
	t.Helper()
	var d bson.D
	if err := bson.UnmarshalExtJSON([]byte(s), false, &d); err != nil {
		t.Fatalf("bad test JSON %s: %v", s, err)
	}
	return d
}

// parseVal parses one extended-JSON value.
func parseVal(t testing.TB, s string) any {
	t.Helper()
	return parseDoc(t, `{"v": `+s+`}`)[0].Value
}

func sameValue(a, b any) bool {
	x, err1 := bson.Marshal(bson.D{{Key: "v", Value: a}})
	y, err2 := bson.Marshal(bson.D{{Key: "v", Value: b}})
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

func show(v any) string {
	if IsMissing(v) {
		return "<missing>"
	}
	b, err := bson.MarshalExtJSON(bson.D{{Key: "v", Value: v}}, true, false)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

type exprCase struct {
	name string
	spec string // extended JSON expression
	want string // extended JSON value, or "missing"
	code int32  // expected error code instead of a value
	doc  string // defaults to testDoc
}

func runCases(t *testing.T, cases []exprCase) {
	t.Helper()
	now := bson.NewDateTimeFromTime(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ds := c.doc
			if ds == "" {
				ds = testDoc
			}
			doc := parseDoc(t, ds)
			e, err := Compile(parseVal(t, c.spec))
			var got any
			if err == nil {
				got, err = e.Eval(doc, map[string]any{"NOW": now, "uv": int32(42)})
			}
			if c.code != 0 {
				var ce *cmderr.Error
				if !errors.As(err, &ce) || ce.Code != c.code {
					t.Fatalf("%s: want error code %d, got %v (value %s)", c.spec, c.code, err, show(got))
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: unexpected error %v", c.spec, err)
			}
			if c.want == "missing" {
				if !IsMissing(got) {
					t.Fatalf("%s: want missing, got %s", c.spec, show(got))
				}
				return
			}
			want := parseVal(t, c.want)
			if !sameValue(got, want) {
				t.Fatalf("%s: got %s, want %s", c.spec, show(got), show(want))
			}
		})
	}
}

func TestPathsAndVariables(t *testing.T) {
	runCases(t, []exprCase{
		{name: "field", spec: `"$a"`, want: `5`},
		{name: "nested", spec: `"$sub.deep.z"`, want: `9`},
		{name: "missing field", spec: `"$nope"`, want: "missing"},
		{name: "missing nested", spec: `"$sub.nope.z"`, want: "missing"},
		{name: "through scalar", spec: `"$a.b"`, want: "missing"},
		{name: "array traversal", spec: `"$objs.x"`, want: `[1, 2, [4]]`},
		{name: "array numeric component is a field", spec: `"$arr.0"`, want: `[]`},
		{name: "null field", spec: `"$n"`, want: `null`},
		{name: "ROOT", spec: `"$$ROOT.sub.k"`, want: `"v"`},
		{name: "CURRENT", spec: `"$$CURRENT.a"`, want: `5`},
		{name: "NOW", spec: `"$$NOW"`, want: `{"$date": "2025-01-02T03:04:05Z"}`},
		{name: "REMOVE", spec: `"$$REMOVE"`, want: "missing"},
		{name: "user var", spec: `"$$uv"`, want: `42`},
		{name: "undefined var", spec: `"$$nope"`, code: 17276},
		{name: "bad var name", spec: `{"$let": {"vars": {"Bad": 1}, "in": 1}}`, code: 9},
		{name: "dollar alone", spec: `"$"`, code: 16872},
		{name: "empty path component", spec: `"$a..b"`, code: 15998},
		{name: "literal string", spec: `"abc"`, want: `"abc"`},
		{name: "literal number", spec: `3.5`, want: `3.5`},
		{name: "object expression", spec: `{"x": "$a", "y": {"z": "$b"}, "m": "$nope"}`, want: `{"x": 5, "y": {"z": 2}}`},
		{name: "array expression missing to null", spec: `["$a", "$nope"]`, want: `[5, null]`},
		{name: "two operators", spec: `{"$add": [1], "$abs": 1}`, code: 15983},
		{name: "operator then field", spec: `{"a": 1, "$add": [1]}`, code: 16404},
		{name: "unknown operator", spec: `{"$foo": 1}`, code: 168},
		{name: "unsupported operator", spec: `{"$meta": "searchScore"}`, code: 238},
		{name: "let", spec: `{"$let": {"vars": {"x": "$a", "y": 3}, "in": {"$add": ["$$x", "$$y"]}}}`, want: `8`},
		{name: "let shadows", spec: `{"$let": {"vars": {"uv": 1}, "in": "$$uv"}}`, want: `1`},
		{name: "let var path", spec: `{"$let": {"vars": {"o": "$sub"}, "in": "$$o.deep.z"}}`, want: `9`},
		{name: "let missing in", spec: `{"$let": {"vars": {}}}`, code: 9},
		{name: "literal", spec: `{"$literal": "$a"}`, want: `"$a"`},
		{name: "literal doc", spec: `{"$literal": {"$add": 1}}`, want: `{"$add": 1}`},
	})
}

func TestArithmetic(t *testing.T) {
	runCases(t, []exprCase{
		{name: "add ints", spec: `{"$add": ["$a", "$b", 1]}`, want: `8`},
		{name: "add promotes double", spec: `{"$add": ["$a", "$d"]}`, want: `6.5`},
		{name: "add long", spec: `{"$add": ["$a", "$l"]}`, want: `{"$numberLong": "12"}`},
		{name: "add int32 overflow to long", spec: `{"$add": [2147483647, 1]}`, want: `{"$numberLong": "2147483648"}`},
		{name: "add long overflow to double", spec: `{"$add": ["$big", 1]}`, want: `9.223372036854775808e18`},
		{name: "add null", spec: `{"$add": ["$a", null]}`, want: `null`},
		{name: "add missing", spec: `{"$add": ["$a", "$nope"]}`, want: `null`},
		{name: "add empty", spec: `{"$add": []}`, want: `0`},
		{name: "add string", spec: `{"$add": ["$a", "x"]}`, code: 16554},
		{name: "add date", spec: `{"$add": ["$date", 1000]}`, want: `{"$date": "2024-03-05T06:07:09.009Z"}`},
		{name: "add two dates", spec: `{"$add": ["$date", "$date"]}`, code: 16612},
		{name: "seed counter plus size", spec: `{"$add": ["$counter", {"$size": "$pending"}]}`, want: `12`},
		{name: "subtract", spec: `{"$subtract": ["$a", "$b"]}`, want: `3`},
		{name: "subtract dates", spec: `{"$subtract": ["$date", {"$add": ["$date", -60000]}]}`, want: `{"$numberLong": "60000"}`},
		{name: "subtract date number", spec: `{"$subtract": ["$date", 9]}`, want: `{"$date": "2024-03-05T06:07:08Z"}`},
		{name: "subtract number date", spec: `{"$subtract": [1, "$date"]}`, code: 16556},
		{name: "subtract arity", spec: `{"$subtract": [1]}`, code: 16020},
		{name: "subtract null", spec: `{"$subtract": [null, 1]}`, want: `null`},
		{name: "multiply", spec: `{"$multiply": ["$a", "$b", "$d"]}`, want: `15.0`},
		{name: "multiply ints", spec: `{"$multiply": [3, 4]}`, want: `12`},
		{name: "multiply bad", spec: `{"$multiply": [3, "x"]}`, code: 16555},
		{name: "divide", spec: `{"$divide": ["$a", "$b"]}`, want: `2.5`},
		{name: "divide by zero", spec: `{"$divide": [1, 0]}`, code: 16608},
		{name: "divide bad", spec: `{"$divide": [1, "x"]}`, code: 16609},
		{name: "mod ints", spec: `{"$mod": [7, 3]}`, want: `1`},
		{name: "mod negative", spec: `{"$mod": [-7, 3]}`, want: `-1`},
		{name: "mod double", spec: `{"$mod": [7.5, 2]}`, want: `1.5`},
		{name: "mod zero", spec: `{"$mod": [7, 0]}`, code: 16610},
		{name: "mod long min by -1", spec: `{"$mod": [{"$numberLong": "-9223372036854775808"}, -1]}`, want: `{"$numberLong": "0"}`},
		{name: "abs", spec: `{"$abs": "$neg"}`, want: `3`},
		{name: "abs double", spec: `{"$abs": -2.5}`, want: `2.5`},
		{name: "abs null", spec: `{"$abs": null}`, want: `null`},
		{name: "abs long min", spec: `{"$abs": {"$numberLong": "-9223372036854775808"}}`, code: 28680},
		{name: "abs string", spec: `{"$abs": "x"}`, code: 28765},
		{name: "ceil", spec: `{"$ceil": 1.2}`, want: `2.0`},
		{name: "floor", spec: `{"$floor": -1.2}`, want: `-2.0`},
		{name: "floor int", spec: `{"$floor": 5}`, want: `5`},
		{name: "sqrt", spec: `{"$sqrt": 16}`, want: `4.0`},
		{name: "sqrt negative", spec: `{"$sqrt": -1}`, code: 28714},
		{name: "pow ints", spec: `{"$pow": [2, 10]}`, want: `1024`},
		{name: "pow overflow", spec: `{"$pow": [10, 30]}`, want: `1e30`},
		{name: "pow negative exponent", spec: `{"$pow": [2, -1]}`, want: `0.5`},
		{name: "pow zero negative", spec: `{"$pow": [0, -1]}`, code: 28764},
		{name: "round half even", spec: `{"$round": 2.5}`, want: `2.0`},
		{name: "round place", spec: `{"$round": [1.2345, 2]}`, want: `1.23`},
		{name: "round int negative place", spec: `{"$round": [1250, -2]}`, want: `1200`},
		{name: "round int negative place up", spec: `{"$round": [1351, -2]}`, want: `1400`},
		{name: "round bad place", spec: `{"$round": [1, 200]}`, code: 51083},
		{name: "trunc", spec: `{"$trunc": [-1.789, 1]}`, want: `-1.7`},
		{name: "trunc int", spec: `{"$trunc": 7}`, want: `7`},
		{name: "exp", spec: `{"$exp": 0}`, want: `1.0`},
		{name: "ln bad", spec: `{"$ln": 0}`, code: 28766},
		{name: "log10", spec: `{"$log10": 1000}`, want: `3.0`},
		{name: "log base one", spec: `{"$log": [8, 1]}`, code: 28759},
	})
}

func TestArrays(t *testing.T) {
	runCases(t, []exprCase{
		{name: "size", spec: `{"$size": "$arr"}`, want: `3`},
		{name: "size array arg", spec: `{"$size": ["$pending"]}`, want: `2`},
		{name: "size missing", spec: `{"$size": "$nope"}`, code: 17124},
		{name: "size null", spec: `{"$size": "$n"}`, code: 17124},
		{name: "size arity", spec: `{"$size": [1, 2]}`, code: 16020},
		{name: "arrayElemAt", spec: `{"$arrayElemAt": ["$arr", 1]}`, want: `2`},
		{name: "arrayElemAt negative", spec: `{"$arrayElemAt": ["$arr", -1]}`, want: `3`},
		{name: "arrayElemAt out of range", spec: `{"$arrayElemAt": ["$arr", 9]}`, want: "missing"},
		{name: "arrayElemAt not array", spec: `{"$arrayElemAt": ["$a", 0]}`, code: 28689},
		{name: "arrayElemAt bad index", spec: `{"$arrayElemAt": ["$arr", "x"]}`, code: 28690},
		{name: "arrayElemAt fractional index", spec: `{"$arrayElemAt": ["$arr", 1.5]}`, code: 28691},
		{name: "first", spec: `{"$first": "$arr"}`, want: `1`},
		{name: "last", spec: `{"$last": "$arr"}`, want: `3`},
		{name: "first empty", spec: `{"$first": [[]]}`, want: "missing"},
		{name: "concatArrays", spec: `{"$concatArrays": ["$arr", [4], "$pending"]}`, want: `[1, 2, 3, 4, "p1", "p2"]`},
		{name: "concatArrays null", spec: `{"$concatArrays": ["$arr", "$nope"]}`, want: `null`},
		{name: "concatArrays bad", spec: `{"$concatArrays": ["$arr", 1]}`, code: 28664},
		{name: "in", spec: `{"$in": [2, "$arr"]}`, want: `true`},
		{name: "in numeric types", spec: `{"$in": [2.0, "$arr"]}`, want: `true`},
		{name: "in absent", spec: `{"$in": [9, "$arr"]}`, want: `false`},
		{name: "in not array", spec: `{"$in": [1, "$nope"]}`, code: 40081},
		{name: "isArray", spec: `{"$isArray": ["$arr"]}`, want: `true`},
		{name: "isArray scalar", spec: `{"$isArray": "$a"}`, want: `false`},
		{name: "range", spec: `{"$range": [0, 10, 3]}`, want: `[0, 3, 6, 9]`},
		{name: "range negative", spec: `{"$range": [5, 0, -2]}`, want: `[5, 3, 1]`},
		{name: "range empty", spec: `{"$range": [5, 0]}`, want: `[]`},
		{name: "range zero step", spec: `{"$range": [0, 5, 0]}`, code: 34449},
		{name: "range non int", spec: `{"$range": [0.5, 5]}`, code: 34443},
		{name: "range too big", spec: `{"$range": [-2147483648, 2147483647]}`, code: 146},
		{name: "reverseArray", spec: `{"$reverseArray": "$arr"}`, want: `[3, 2, 1]`},
		{name: "reverseArray bad", spec: `{"$reverseArray": "$a"}`, code: 34435},
		{name: "slice n", spec: `{"$slice": ["$arr", 2]}`, want: `[1, 2]`},
		{name: "slice -n", spec: `{"$slice": ["$arr", -2]}`, want: `[2, 3]`},
		{name: "slice pos n", spec: `{"$slice": ["$arr", 1, 5]}`, want: `[2, 3]`},
		{name: "slice neg pos", spec: `{"$slice": ["$arr", -10, 1]}`, want: `[1]`},
		{name: "slice bad n", spec: `{"$slice": ["$arr", 1, 0]}`, code: 28729},
		{name: "slice not array", spec: `{"$slice": ["$a", 1]}`, code: 28724},
		{name: "indexOfArray", spec: `{"$indexOfArray": ["$arr", 3]}`, want: `2`},
		{name: "indexOfArray none", spec: `{"$indexOfArray": ["$arr", 3, 0, 2]}`, want: `-1`},
		{name: "indexOfArray null", spec: `{"$indexOfArray": [null, 3]}`, want: `null`},
		{name: "filter", spec: `{"$filter": {"input": "$arr", "as": "v", "cond": {"$gte": ["$$v", 2]}}}`, want: `[2, 3]`},
		{name: "filter this", spec: `{"$filter": {"input": "$arr", "cond": {"$ne": ["$$this", 2]}}}`, want: `[1, 3]`},
		{name: "filter limit", spec: `{"$filter": {"input": "$arr", "cond": true, "limit": 1}}`, want: `[1]`},
		{name: "filter null input", spec: `{"$filter": {"input": "$nope", "cond": true}}`, want: `null`},
		{name: "filter bad input", spec: `{"$filter": {"input": "$a", "cond": true}}`, code: 28651},
		{name: "filter unknown arg", spec: `{"$filter": {"input": "$a", "cond": true, "x": 1}}`, code: 9},
		{name: "filter missing cond", spec: `{"$filter": {"input": "$a"}}`, code: 9},
		{name: "map", spec: `{"$map": {"input": "$arr", "as": "x", "in": {"$multiply": ["$$x", 10]}}}`, want: `[10, 20, 30]`},
		{name: "map outer var", spec: `{"$map": {"input": "$arr", "in": {"$add": ["$$this", "$a"]}}}`, want: `[6, 7, 8]`},
		{name: "map bad", spec: `{"$map": {"input": 1, "in": 1}}`, code: 16883},
		{name: "reduce", spec: `{"$reduce": {"input": "$arr", "initialValue": 0, "in": {"$add": ["$$value", "$$this"]}}}`, want: `6`},
		{name: "reduce concat", spec: `{"$reduce": {"input": "$pending", "initialValue": "", "in": {"$concat": ["$$value", "$$this"]}}}`, want: `"p1p2"`},
		{name: "reduce bad", spec: `{"$reduce": {"input": 1, "initialValue": 0, "in": 1}}`, code: 40080},
		{name: "setUnion", spec: `{"$setUnion": [[1, 2, 2], [2, 3]]}`, want: `[1, 2, 3]`},
		{name: "setIntersection", spec: `{"$setIntersection": [[1, 2, 3], [2, 3, 4]]}`, want: `[2, 3]`},
		{name: "setDifference", spec: `{"$setDifference": [[1, 2, 3], [2]]}`, want: `[1, 3]`},
		{name: "setEquals", spec: `{"$setEquals": [[1, 2], [2, 1, 1]]}`, want: `true`},
		{name: "setIsSubset", spec: `{"$setIsSubset": [[1], [2, 1]]}`, want: `true`},
		{name: "set bad", spec: `{"$setUnion": [[1], 2]}`, code: 17044},
		{name: "anyElementTrue", spec: `{"$anyElementTrue": [[0, false, 1]]}`, want: `true`},
		{name: "allElementsTrue", spec: `{"$allElementsTrue": [[1, 0]]}`, want: `false`},
		{name: "sum array", spec: `{"$sum": "$arr"}`, want: `6`},
		{name: "sum args", spec: `{"$sum": ["$a", "$b", "x"]}`, want: `7`},
		{name: "sum missing", spec: `{"$sum": "$nope"}`, want: `0`},
		{name: "avg", spec: `{"$avg": "$arr"}`, want: `2.0`},
		{name: "avg none", spec: `{"$avg": [[]]}`, want: `null`},
		{name: "max", spec: `{"$max": "$arr"}`, want: `3`},
		{name: "min args", spec: `{"$min": ["$a", null, "$b"]}`, want: `2`},
		{name: "max empty", spec: `{"$max": [[]]}`, want: `null`},
	})
}

func TestLogicAndComparison(t *testing.T) {
	runCases(t, []exprCase{
		{name: "eq", spec: `{"$eq": ["$a", 5.0]}`, want: `true`},
		{name: "eq missing null", spec: `{"$eq": ["$nope", null]}`, want: `false`},
		{name: "eq missing missing", spec: `{"$eq": ["$nope", "$nope2"]}`, want: `true`},
		{name: "ne", spec: `{"$ne": ["$a", 5]}`, want: `false`},
		{name: "gt cross type", spec: `{"$gt": ["$s", "$a"]}`, want: `true`},
		{name: "gte", spec: `{"$gte": ["$a", 5]}`, want: `true`},
		{name: "lt missing", spec: `{"$lt": ["$nope", null]}`, want: `true`},
		{name: "lte", spec: `{"$lte": ["$b", 1]}`, want: `false`},
		{name: "cmp", spec: `{"$cmp": ["$a", "$b"]}`, want: `1`},
		{name: "cmp arity", spec: `{"$cmp": ["$a"]}`, code: 16020},
		{name: "and", spec: `{"$and": [1, "$a", true]}`, want: `true`},
		{name: "and false", spec: `{"$and": [1, 0]}`, want: `false`},
		{name: "and empty", spec: `{"$and": []}`, want: `true`},
		{name: "and short circuit", spec: `{"$and": [false, {"$divide": [1, 0]}]}`, want: `false`},
		{name: "or", spec: `{"$or": [null, "$nope", ""]}`, want: `true`},
		{name: "or false", spec: `{"$or": [null, "$nope", 0]}`, want: `false`},
		{name: "not", spec: `{"$not": ["$n"]}`, want: `true`},
		{name: "not array truthy", spec: `{"$not": [[]]}`, want: `false`},
		{name: "cond array", spec: `{"$cond": [{"$gt": ["$a", 3]}, "big", "small"]}`, want: `"big"`},
		{name: "cond doc", spec: `{"$cond": {"if": "$n", "then": 1, "else": 2}}`, want: `2`},
		{name: "cond missing else", spec: `{"$cond": {"if": true, "then": 1}}`, code: 17082},
		{name: "cond unknown", spec: `{"$cond": {"if": true, "then": 1, "else": 2, "x": 1}}`, code: 17083},
		{name: "cond arity", spec: `{"$cond": [true, 1]}`, code: 16020},
		{name: "ifNull missing", spec: `{"$ifNull": ["$nope", "dflt"]}`, want: `"dflt"`},
		{name: "ifNull null", spec: `{"$ifNull": ["$n", "$a"]}`, want: `5`},
		{name: "ifNull value", spec: `{"$ifNull": ["$s", "dflt"]}`, want: `"Hello"`},
		{name: "ifNull multiple", spec: `{"$ifNull": ["$n", "$nope", 3]}`, want: `3`},
		{name: "ifNull arity", spec: `{"$ifNull": ["$n"]}`, code: 16020},
		{name: "switch", spec: `{"$switch": {"branches": [{"case": {"$lt": ["$a", 0]}, "then": "neg"}, {"case": {"$gt": ["$a", 0]}, "then": "pos"}], "default": "zero"}}`, want: `"pos"`},
		{name: "switch default", spec: `{"$switch": {"branches": [{"case": false, "then": 1}], "default": 2}}`, want: `2`},
		{name: "switch no match", spec: `{"$switch": {"branches": [{"case": false, "then": 1}]}}`, code: 40066},
		{name: "switch no branches", spec: `{"$switch": {"branches": []}}`, code: 40068},
		{name: "switch bad branch", spec: `{"$switch": {"branches": [{"case": true}]}}`, code: 40065},
		{name: "type", spec: `{"$type": "$d"}`, want: `"double"`},
		{name: "type missing", spec: `{"$type": "$nope"}`, want: `"missing"`},
		{name: "type long", spec: `{"$type": "$l"}`, want: `"long"`},
		{name: "isNumber", spec: `{"$isNumber": "$s"}`, want: `false`},
	})
}

func TestStrings(t *testing.T) {
	runCases(t, []exprCase{
		{name: "concat", spec: `{"$concat": ["$s", " ", "world"]}`, want: `"Hello world"`},
		{name: "concat null", spec: `{"$concat": ["$s", "$nope"]}`, want: `null`},
		{name: "concat bad", spec: `{"$concat": ["$s", 1]}`, code: 16702},
		{name: "toUpper", spec: `{"$toUpper": "$s"}`, want: `"HELLO"`},
		{name: "toLower", spec: `{"$toLower": "$s"}`, want: `"hello"`},
		{name: "toLower null", spec: `{"$toLower": "$nope"}`, want: `""`},
		{name: "toUpper number", spec: `{"$toUpper": 5}`, want: `"5"`},
		{name: "toUpper array", spec: `{"$toUpper": [[1]]}`, code: 16007},
		{name: "substr", spec: `{"$substr": ["$s", 1, 3]}`, want: `"ell"`},
		{name: "substrBytes rest", spec: `{"$substrBytes": ["$s", 2, -1]}`, want: `"llo"`},
		{name: "substrBytes past end", spec: `{"$substrBytes": ["$s", 10, 2]}`, want: `""`},
		{name: "substrBytes utf8 middle", spec: `{"$substrBytes": ["é", 1, 1]}`, code: 28656},
		{name: "substrBytes bad start", spec: `{"$substrBytes": ["abc", "x", 1]}`, code: 16034},
		{name: "substrCP", spec: `{"$substrCP": ["héllo", 1, 2]}`, want: `"él"`},
		{name: "strLenBytes", spec: `{"$strLenBytes": "héllo"}`, want: `6`},
		{name: "strLenCP", spec: `{"$strLenCP": "héllo"}`, want: `5`},
		{name: "strLenBytes missing", spec: `{"$strLenBytes": "$nope"}`, code: 34473},
		{name: "split", spec: `{"$split": ["a,b,,c", ","]}`, want: `["a", "b", "", "c"]`},
		{name: "split null", spec: `{"$split": ["$nope", ","]}`, want: `null`},
		{name: "split bad", spec: `{"$split": [1, ","]}`, code: 40085},
		{name: "split empty sep", spec: `{"$split": ["a", ""]}`, code: 40087},
		{name: "trim", spec: `{"$trim": {"input": "$str"}}`, want: `"pad"`},
		{name: "ltrim", spec: `{"$ltrim": {"input": "$str"}}`, want: `"pad  "`},
		{name: "rtrim chars", spec: `{"$rtrim": {"input": "xxaxx", "chars": "x"}}`, want: `"xxa"`},
		{name: "trim bad", spec: `{"$trim": {"input": 1}}`, code: 50699},
		{name: "trim missing input", spec: `{"$trim": {"chars": "x"}}`, code: 9},
		{name: "strcasecmp", spec: `{"$strcasecmp": ["abc", "ABC"]}`, want: `0`},
	})
}

func TestConversions(t *testing.T) {
	runCases(t, []exprCase{
		{name: "toString int", spec: `{"$toString": "$a"}`, want: `"5"`},
		{name: "toString double", spec: `{"$toString": 2.5}`, want: `"2.5"`},
		{name: "toString bool", spec: `{"$toString": true}`, want: `"true"`},
		{name: "toString oid", spec: `{"$toString": "$oid"}`, want: `"65f0a1b2c3d4e5f601020304"`},
		{name: "toString date", spec: `{"$toString": "$date"}`, want: `"2024-03-05T06:07:08.009Z"`},
		{name: "toString null", spec: `{"$toString": "$nope"}`, want: `null`},
		{name: "toString doc", spec: `{"$toString": "$sub"}`, code: 241},
		{name: "toInt string", spec: `{"$toInt": "42"}`, want: `42`},
		{name: "toInt double", spec: `{"$toInt": 4.9}`, want: `4`},
		{name: "toInt bad string", spec: `{"$toInt": "4x"}`, code: 241},
		{name: "toInt overflow", spec: `{"$toInt": "$big"}`, code: 241},
		{name: "toLong", spec: `{"$toLong": "$a"}`, want: `{"$numberLong": "5"}`},
		{name: "toLong date", spec: `{"$toLong": {"$add": [{"$toDate": 0.0}, 5]}}`, want: `{"$numberLong": "5"}`},
		{name: "toDouble", spec: `{"$toDouble": "1.5"}`, want: `1.5`},
		{name: "toDouble bool", spec: `{"$toDouble": true}`, want: `1.0`},
		{name: "toBool zero", spec: `{"$toBool": 0}`, want: `false`},
		{name: "toBool string", spec: `{"$toBool": ""}`, want: `true`},
		{name: "toObjectId", spec: `{"$toObjectId": "65f0a1b2c3d4e5f601020304"}`, want: `{"$oid": "65f0a1b2c3d4e5f601020304"}`},
		{name: "toDate string", spec: `{"$toDate": "2024-03-05T06:07:08.009Z"}`, want: `{"$date": "2024-03-05T06:07:08.009Z"}`},
		{name: "convert onError", spec: `{"$convert": {"input": "x", "to": "int", "onError": -1}}`, want: `-1`},
		{name: "convert onNull", spec: `{"$convert": {"input": "$nope", "to": "int", "onNull": 0}}`, want: `0`},
		{name: "convert numeric to", spec: `{"$convert": {"input": 5, "to": 2}}`, want: `"5"`},
		{name: "convert bad to", spec: `{"$convert": {"input": 5, "to": "nope"}}`, code: 2},
		{name: "convert error", spec: `{"$convert": {"input": "x", "to": "int"}}`, code: 241},
		{name: "convert missing to", spec: `{"$convert": {"input": "x"}}`, code: 9},
		{name: "toDecimal int", spec: `{"$toDecimal": 1}`, want: `{"$numberDecimal": "1"}`},
		{name: "toDecimal double", spec: `{"$toDecimal": 2.5}`, want: `{"$numberDecimal": "2.50000000000000"}`},
		{name: "toDecimal string", spec: `{"$toDecimal": "1.10"}`, want: `{"$numberDecimal": "1.10"}`},
		{name: "toDecimal bad string", spec: `{"$toDecimal": "x1"}`, code: 241},
		{name: "convert to decimal", spec: `{"$convert": {"input": true, "to": "decimal"}}`, want: `{"$numberDecimal": "1"}`},
	})
}

func TestObjectsAndDates(t *testing.T) {
	runCases(t, []exprCase{
		{name: "mergeObjects", spec: `{"$mergeObjects": ["$sub", {"k": "w", "n": 1}, null]}`, want: `{"k": "w", "deep": {"z": 9}, "n": 1}`},
		{name: "mergeObjects bad", spec: `{"$mergeObjects": ["$sub", 1]}`, code: 40400},
		{name: "objectToArray", spec: `{"$objectToArray": {"a": 1, "b": 2}}`, want: `[{"k": "a", "v": 1}, {"k": "b", "v": 2}]`},
		{name: "objectToArray bad", spec: `{"$objectToArray": 1}`, code: 40390},
		{name: "arrayToObject pairs", spec: `{"$arrayToObject": [[["a", 1], ["b", 2], ["a", 3]]]}`, want: `{"a": 3, "b": 2}`},
		{name: "arrayToObject kv", spec: `{"$arrayToObject": [[{"k": "a", "v": 1}]]}`, want: `{"a": 1}`},
		{name: "arrayToObject mixed", spec: `{"$arrayToObject": [[["a", 1], {"k": "b", "v": 2}]]}`, code: 40391},
		{name: "arrayToObject bad key", spec: `{"$arrayToObject": [[[1, 1]]]}`, code: 40394},
		{name: "getField", spec: `{"$getField": "a"}`, want: `5`},
		{name: "getField input", spec: `{"$getField": {"field": "k", "input": "$sub"}}`, want: `"v"`},
		{name: "dateToString default", spec: `{"$dateToString": {"date": "$date"}}`, want: `"2024-03-05T06:07:08.009Z"`},
		{name: "dateToString format", spec: `{"$dateToString": {"date": "$date", "format": "%Y/%m/%d %H:%M:%S.%L %j %%"}}`, want: `"2024/03/05 06:07:08.009 065 %"`},
		{name: "dateToString tz offset", spec: `{"$dateToString": {"date": "$date", "format": "%H:%M", "timezone": "+02:30"}}`, want: `"08:37"`},
		{name: "dateToString onNull", spec: `{"$dateToString": {"date": "$nope", "onNull": "none"}}`, want: `"none"`},
		{name: "dateToString bad format", spec: `{"$dateToString": {"date": "$date", "format": "%Q"}}`, code: 18536},
		{name: "dateToString bad tz", spec: `{"$dateToString": {"date": "$date", "timezone": "Nowhere/Land"}}`, code: 40485},
		{name: "year", spec: `{"$year": "$date"}`, want: `2024`},
		{name: "month doc form", spec: `{"$month": {"date": "$date"}}`, want: `3`},
		{name: "dayOfWeek", spec: `{"$dayOfWeek": "$date"}`, want: `3`},
		{name: "millisecond", spec: `{"$millisecond": ["$date"]}`, want: `9`},
		{name: "year of string", spec: `{"$year": "$s"}`, code: 16006},
	})
}

func TestDateArithmetic(t *testing.T) {
	runCases(t, []exprCase{
		{name: "dateAdd month clamps to the month's end", spec: `{"$dateAdd": {"startDate": {"$date": "2024-01-31T10:00:00Z"}, "unit": "month", "amount": 1}}`, want: `{"$date": "2024-02-29T10:00:00Z"}`},
		{name: "dateAdd hours", spec: `{"$dateAdd": {"startDate": "$date", "unit": "hour", "amount": 3}}`, want: `{"$date": "2024-03-05T09:07:08.009Z"}`},
		{name: "dateAdd quarter", spec: `{"$dateAdd": {"startDate": "$date", "unit": "quarter", "amount": -1}}`, want: `{"$date": "2023-12-05T06:07:08.009Z"}`},
		{name: "dateSubtract week", spec: `{"$dateSubtract": {"startDate": "$date", "unit": "week", "amount": 1}}`, want: `{"$date": "2024-02-27T06:07:08.009Z"}`},
		{name: "dateAdd null", spec: `{"$dateAdd": {"startDate": "$nope", "unit": "day", "amount": 1}}`, want: `null`},
		{name: "dateAdd fractional amount", spec: `{"$dateAdd": {"startDate": "$date", "unit": "day", "amount": 1.5}}`, code: 5166405},
		{name: "dateAdd bad unit", spec: `{"$dateAdd": {"startDate": "$date", "unit": "fortnight", "amount": 1}}`, code: 9},
		{name: "dateDiff year", spec: `{"$dateDiff": {"startDate": {"$date": "2024-12-31T23:00:00Z"}, "endDate": {"$date": "2025-01-01T01:00:00Z"}, "unit": "year"}}`, want: `{"$numberLong": "1"}`},
		{name: "dateDiff hour", spec: `{"$dateDiff": {"startDate": {"$date": "2024-12-31T23:00:00Z"}, "endDate": {"$date": "2025-01-01T01:00:00Z"}, "unit": "hour"}}`, want: `{"$numberLong": "2"}`},
		{name: "dateDiff day in a timezone", spec: `{"$dateDiff": {"startDate": {"$date": "2024-12-31T23:00:00Z"}, "endDate": {"$date": "2025-01-01T01:00:00Z"}, "unit": "day", "timezone": "+03:00"}}`, want: `{"$numberLong": "0"}`},
		{name: "dateDiff week from Sunday", spec: `{"$dateDiff": {"startDate": "$date", "endDate": {"$date": "2024-03-10T00:00:00Z"}, "unit": "week"}}`, want: `{"$numberLong": "1"}`},
		{name: "dateDiff week from Monday", spec: `{"$dateDiff": {"startDate": "$date", "endDate": {"$date": "2024-03-10T00:00:00Z"}, "unit": "week", "startOfWeek": "mon"}}`, want: `{"$numberLong": "0"}`},
		{name: "dateDiff negative", spec: `{"$dateDiff": {"startDate": "$date", "endDate": {"$date": "2024-01-05T00:00:00Z"}, "unit": "month"}}`, want: `{"$numberLong": "-2"}`},
		{name: "dateTrunc day", spec: `{"$dateTrunc": {"date": "$date", "unit": "day"}}`, want: `{"$date": "2024-03-05T00:00:00Z"}`},
		{name: "dateTrunc week", spec: `{"$dateTrunc": {"date": "$date", "unit": "week"}}`, want: `{"$date": "2024-03-03T00:00:00Z"}`},
		{name: "dateTrunc quarter", spec: `{"$dateTrunc": {"date": "$date", "unit": "quarter"}}`, want: `{"$date": "2024-01-01T00:00:00Z"}`},
		{name: "dateTrunc 15 minutes", spec: `{"$dateTrunc": {"date": "$date", "unit": "minute", "binSize": 15}}`, want: `{"$date": "2024-03-05T06:00:00Z"}`},
		{name: "dateTrunc day in a timezone", spec: `{"$dateTrunc": {"date": "$date", "unit": "day", "timezone": "+02:30"}}`, want: `{"$date": "2024-03-04T21:30:00Z"}`},
		{name: "dateTrunc binSize 0", spec: `{"$dateTrunc": {"date": "$date", "unit": "day", "binSize": 0}}`, code: 5439017},
	})
}

func TestConstantAndTruthy(t *testing.T) {
	e := MustCompile(nil)
	if v, ok := e.Constant(); !ok || v != nil {
		t.Fatalf("null literal should be constant nil, got %v %v", v, ok)
	}
	if _, ok := MustCompile("$a").Constant(); ok {
		t.Fatal("a field path is not constant")
	}
	for _, c := range []struct {
		v    any
		want bool
	}{{Missing, false}, {nil, false}, {int32(0), false}, {0.0, false}, {int64(2), true}, {"", true}, {bson.A{}, true}, {false, false}} {
		if Truthy(c.v) != c.want {
			t.Errorf("Truthy(%v) = %v", c.v, !c.want)
		}
	}
}

func TestEvalDoesNotMutateInput(t *testing.T) {
	doc := parseDoc(t, testDoc)
	before, _ := bson.Marshal(doc)
	for _, spec := range []string{
		`{"$mergeObjects": ["$sub", {"k": 2}]}`,
		`{"$reverseArray": "$arr"}`,
		`{"$concatArrays": ["$arr", [9]]}`,
		`{"$setUnion": ["$arr", [9]]}`,
	} {
		if _, err := MustCompile(parseVal(t, spec)).Eval(doc, nil); err != nil {
			t.Fatal(err)
		}
	}
	after, _ := bson.Marshal(doc)
	if !bytes.Equal(before, after) {
		t.Fatal("Eval modified its input document")
	}
}

func TestNowWithoutVarsIsStable(t *testing.T) {
	e := MustCompile(bson.A{"$$NOW", "$$NOW"})
	v, err := e.Eval(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := v.(bson.A)
	if a[0] != a[1] {
		t.Fatalf("$$NOW differs within one evaluation: %v", a)
	}
	if _, ok := a[0].(bson.DateTime); !ok {
		t.Fatalf("$$NOW is %T", a[0])
	}
}

func TestCheckVariables(t *testing.T) {
	defined := map[string]any{"x": 1}
	ok := []bson.D{
		{{Key: "$eq", Value: bson.A{"$a", "$$x"}}},
		{{Key: "$eq", Value: bson.A{"$a", "$$NOW"}}},
		{{Key: "$map", Value: bson.D{{Key: "input", Value: "$arr"}, {Key: "as", Value: "el"}, {Key: "in", Value: "$$el.v"}}}},
		{{Key: "$literal", Value: "$$undefinedButLiteral"}},
		{{Key: "$reduce", Value: bson.D{{Key: "input", Value: "$arr"}, {Key: "initialValue", Value: 0}, {Key: "in", Value: bson.D{{Key: "$add", Value: bson.A{"$$value", "$$this"}}}}}}},
	}
	for _, spec := range ok {
		if err := CheckVariables(spec, defined); err != nil {
			t.Errorf("%v: %v", spec, err)
		}
	}
	err := CheckVariables(bson.D{{Key: "$eq", Value: bson.A{"$a", "$$y.z"}}}, defined)
	var ce *cmderr.Error
	if !errors.As(err, &ce) || ce.Code != 17276 || ce.Message != "Use of undefined variable: y" {
		t.Fatalf("undefined: %v", err)
	}
}

// strength2 is a test collator that ignores ASCII case.
type strength2 struct{}

func (strength2) CompareStrings(a, b string) int {
	return strings.Compare(strings.ToLower(a), strings.ToLower(b))
}
func (strength2) Key(s string) string { return strings.ToLower(s) }

func TestCollatedOperators(t *testing.T) {
	vars := WithCollator(nil, strength2{})
	cases := []struct {
		spec bson.D
		want any
	}{
		{bson.D{{Key: "$eq", Value: bson.A{"ABC", "abc"}}}, true},
		{bson.D{{Key: "$in", Value: bson.A{"X", bson.A{"x", "y"}}}}, true},
		{bson.D{{Key: "$setIsSubset", Value: bson.A{bson.A{"A"}, bson.A{"a", "b"}}}}, true},
		{bson.D{{Key: "$max", Value: bson.A{"b", "A", "C"}}}, "C"},
		{bson.D{{Key: "$indexOfArray", Value: bson.A{bson.A{"a", "B"}, "b"}}}, int32(1)},
	}
	for _, tc := range cases {
		got, err := MustCompile(tc.spec).Eval(bson.D{}, vars)
		if err != nil || got != tc.want {
			t.Errorf("%v = %v, %v; want %v", tc.spec, got, err, tc.want)
		}
		// Without the collation the answer is the binary one.
		if plain, _ := MustCompile(tc.spec).Eval(bson.D{}, nil); plain == tc.want {
			t.Errorf("%v: simple collation also gave %v", tc.spec, plain)
		}
	}
}
