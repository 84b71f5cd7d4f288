package update

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// D parses relaxed extended JSON into a bson.D, the shape bson.Unmarshal
// gives documents (int32 for small integers, {"$numberLong": ...} for int64).
func D(js string) bson.D {
	var d bson.D
	if err := bson.UnmarshalExtJSON([]byte(js), false, &d); err != nil {
		panic(fmt.Sprintf("bad test JSON %s: %v", js, err))
	}
	return d
}

func show(v any) string {
	if d, ok := v.(bson.D); ok {
		b, err := bson.MarshalExtJSON(d, true, false)
		if err == nil {
			return string(b)
		}
	}
	return fmt.Sprintf("%#v", v)
}

var testNow = time.Date(2024, 5, 6, 7, 8, 9, 10_000_000, time.UTC)

type applyCase struct {
	name     string
	doc      string
	update   string
	env      *Env // nil: Position -1, testNow
	want     string
	modified bool
	code     int32  // expected error code, 0 for none
	msg      string // exact expected message when code != 0 ("" skips the check)
}

func runApplyCases(t *testing.T, cases []applyCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc := D(tc.doc)
			before := value.CloneDoc(doc)
			env := Env{Now: testNow, Position: -1}
			if tc.env != nil {
				env = *tc.env
				if env.Now.IsZero() {
					env.Now = testNow
				}
			}
			out, modified, err := compileAndApply(D(tc.update), doc, env)
			if !identicalDoc(before, doc) {
				t.Fatalf("input document was mutated: %s -> %s", show(before), show(doc))
			}
			if tc.code != 0 {
				checkErr(t, err, tc.code, tc.msg)
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if want := D(tc.want); !identicalDoc(want, out) {
				t.Fatalf("got  %s\nwant %s", show(out), show(want))
			}
			if modified != tc.modified {
				t.Fatalf("modified = %v, want %v", modified, tc.modified)
			}
		})
	}
}

func compileAndApply(spec, doc bson.D, env Env) (bson.D, bool, error) {
	u, err := Compile(spec)
	if err != nil {
		return nil, false, err
	}
	return u.Apply(doc, env)
}

func checkErr(t *testing.T, err error, code int32, msg string) {
	t.Helper()
	var ce *cmderr.Error
	if !errors.As(err, &ce) {
		t.Fatalf("error = %v, want *cmderr.Error code %d", err, code)
	}
	if ce.Code != code {
		t.Fatalf("code = %d (%s), want %d; message %q", ce.Code, ce.Name, code, ce.Message)
	}
	if msg != "" && ce.Message != msg {
		t.Fatalf("message = %q\nwant      %q", ce.Message, msg)
	}
}

func TestSet(t *testing.T) {
	runApplyCases(t, []applyCase{
		{name: "new field", doc: `{"_id":1}`, update: `{"$set":{"a":1}}`, want: `{"_id":1,"a":1}`, modified: true},
		{name: "same value is not a modification", doc: `{"_id":1,"a":1}`, update: `{"$set":{"a":1}}`, want: `{"_id":1,"a":1}`},
		{name: "same nested doc", doc: `{"_id":1,"a":{"b":[1,2]}}`, update: `{"$set":{"a":{"b":[1,2]}}}`, want: `{"_id":1,"a":{"b":[1,2]}}`},
		{name: "int to double is a modification", doc: `{"_id":1,"a":1}`, update: `{"$set":{"a":1.0}}`, want: `{"_id":1,"a":1.0}`, modified: true},
		{name: "new fields in lexicographic order", doc: `{"_id":1}`, update: `{"$set":{"b":1,"a":2},"$inc":{"0":1}}`, want: `{"_id":1,"0":1,"a":2,"b":1}`, modified: true},
		{name: "numeric names in numeric order", doc: `{"_id":1}`, update: `{"$set":{"a.10":1,"a.9":2}}`, want: `{"_id":1,"a":{"9":2,"10":1}}`, modified: true},
		{name: "existing fields keep their place", doc: `{"_id":1,"a":1,"b":2}`, update: `{"$set":{"b":3,"a":4}}`, want: `{"_id":1,"a":4,"b":3}`, modified: true},
		{name: "dotted path creates documents", doc: `{"_id":1}`, update: `{"$set":{"a.b.c":1}}`, want: `{"_id":1,"a":{"b":{"c":1}}}`, modified: true},
		{name: "dotted path into existing doc", doc: `{"_id":1,"a":{"c":1}}`, update: `{"$set":{"a.b":2}}`, want: `{"_id":1,"a":{"c":1,"b":2}}`, modified: true},
		{name: "two paths share a created parent", doc: `{"_id":1}`, update: `{"$set":{"a.y":1,"a.x":2}}`, want: `{"_id":1,"a":{"x":2,"y":1}}`, modified: true},
		{name: "numeric component on missing creates a document", doc: `{"_id":1}`, update: `{"$set":{"a.0":1}}`, want: `{"_id":1,"a":{"0":1}}`, modified: true},
		{name: "array index", doc: `{"_id":1,"a":[1,2,3]}`, update: `{"$set":{"a.1":9}}`, want: `{"_id":1,"a":[1,9,3]}`, modified: true},
		{name: "array index past the end pads with null", doc: `{"_id":1,"a":[1]}`, update: `{"$set":{"a.3":9}}`, want: `{"_id":1,"a":[1,null,null,9]}`, modified: true},
		{name: "field of an array element", doc: `{"_id":1,"a":[{"x":1},{"x":2}]}`, update: `{"$set":{"a.1.x":5,"a.1.y":6}}`, want: `{"_id":1,"a":[{"x":1},{"x":5,"y":6}]}`, modified: true},
		{name: "empty $set is a no-op", doc: `{"_id":1,"a":1}`, update: `{"$set":{}}`, want: `{"_id":1,"a":1}`},
		{name: "value with dollar keys nested is stored", doc: `{"_id":1}`, update: `{"$set":{"a":{"b":{"c":[{"d":1}]}}}}`, want: `{"_id":1,"a":{"b":{"c":[{"d":1}]}}}`, modified: true},
		{name: "scalar in the way", doc: `{"_id":1,"a":1}`, update: `{"$set":{"a.b":1}}`, code: cmderr.PathNotViable, msg: "Cannot create field 'b' in element {a: 1}"},
		{name: "scalar deeper in the way", doc: `{"_id":1,"a":{"b":"x"}}`, update: `{"$set":{"a.b.c.d":1}}`, code: cmderr.PathNotViable, msg: `Cannot create field 'c' in element {b: "x"}`},
		{name: "array with field name", doc: `{"_id":1,"a":[1,2]}`, update: `{"$set":{"a.b":1}}`, code: cmderr.PathNotViable, msg: "Cannot create field 'b' in element {a: [ 1, 2 ]}"},
		{name: "set _id to same value", doc: `{"_id":1,"a":1}`, update: `{"$set":{"_id":1,"a":2}}`, want: `{"_id":1,"a":2}`, modified: true},
		{name: "set _id to new value", doc: `{"_id":1}`, update: `{"$set":{"_id":2}}`, code: cmderr.ImmutableField, msg: "Performing an update on the path '_id' would modify the immutable field '_id'"},
		{name: "set _id subfield", doc: `{"_id":{"a":1}}`, update: `{"$set":{"_id.a":2}}`, code: cmderr.ImmutableField, msg: "Performing an update on the path '_id.a' would modify the immutable field '_id'"},
	})
}

func TestUnset(t *testing.T) {
	runApplyCases(t, []applyCase{
		{name: "removes field", doc: `{"_id":1,"a":1,"b":2}`, update: `{"$unset":{"a":""}}`, want: `{"_id":1,"b":2}`, modified: true},
		{name: "missing is a no-op", doc: `{"_id":1}`, update: `{"$unset":{"a":1,"x.y":1}}`, want: `{"_id":1}`},
		{name: "nested", doc: `{"_id":1,"a":{"b":1,"c":2}}`, update: `{"$unset":{"a.b":1}}`, want: `{"_id":1,"a":{"c":2}}`, modified: true},
		{name: "array element becomes null", doc: `{"_id":1,"a":[1,2]}`, update: `{"$unset":{"a.0":1}}`, want: `{"_id":1,"a":[null,2]}`, modified: true},
		{name: "through scalar is a no-op", doc: `{"_id":1,"a":1}`, update: `{"$unset":{"a.b":1}}`, want: `{"_id":1,"a":1}`},
		{name: "through array by name is a no-op", doc: `{"_id":1,"a":[1]}`, update: `{"$unset":{"a.b":1}}`, want: `{"_id":1,"a":[1]}`},
		{name: "unset _id", doc: `{"_id":1}`, update: `{"$unset":{"_id":1}}`, code: cmderr.ImmutableField, msg: "Performing an update on the path '_id' would modify the immutable field '_id'"},
	})
}

func TestArithmetic(t *testing.T) {
	runApplyCases(t, []applyCase{
		{name: "inc int32", doc: `{"_id":1,"x":1}`, update: `{"$inc":{"x":2}}`, want: `{"_id":1,"x":3}`, modified: true},
		{name: "inc missing creates", doc: `{"_id":1}`, update: `{"$inc":{"x":5,"y.z":1.5}}`, want: `{"_id":1,"x":5,"y":{"z":1.5}}`, modified: true},
		{name: "inc int32 overflow promotes to int64", doc: `{"_id":1,"x":2147483647}`, update: `{"$inc":{"x":1}}`, want: `{"_id":1,"x":{"$numberLong":"2147483648"}}`, modified: true},
		{name: "inc by double", doc: `{"_id":1,"x":1}`, update: `{"$inc":{"x":0.5}}`, want: `{"_id":1,"x":1.5}`, modified: true},
		{name: "inc by zero is not a modification", doc: `{"_id":1,"x":7}`, update: `{"$inc":{"x":0}}`, want: `{"_id":1,"x":7}`},
		{name: "inc by long zero changes the type", doc: `{"_id":1,"x":7}`, update: `{"$inc":{"x":{"$numberLong":"0"}}}`, want: `{"_id":1,"x":{"$numberLong":"7"}}`, modified: true},
		{name: "inc array element", doc: `{"_id":1,"a":[1,2]}`, update: `{"$inc":{"a.1":10}}`, want: `{"_id":1,"a":[1,12]}`, modified: true},
		{name: "inc int64 overflow", doc: `{"_id":1,"x":{"$numberLong":"9223372036854775807"}}`, update: `{"$inc":{"x":1}}`,
			code: cmderr.BadValue, msg: "Failed to apply $inc operations to current value ((NumberLong)9223372036854775807) for document {_id: 1}"},
		{name: "inc non-numeric field", doc: `{"_id":1,"x":"a"}`, update: `{"$inc":{"x":1}}`,
			code: cmderr.TypeMismatch, msg: "Cannot apply $inc to a value of non-numeric type. {_id: 1} has the field 'x' of non-numeric type string"},
		{name: "inc non-numeric field, ObjectId _id", doc: `{"_id":{"$oid":"65f0a1b2c3d4e5f607182930"},"x":null}`, update: `{"$inc":{"x":1}}`,
			code: cmderr.TypeMismatch, msg: "Cannot apply $inc to a value of non-numeric type. {_id: ObjectId('65f0a1b2c3d4e5f607182930')} has the field 'x' of non-numeric type null"},
		{name: "inc non-numeric argument", doc: `{"_id":1}`, update: `{"$inc":{"x":"a"}}`,
			code: cmderr.TypeMismatch, msg: `Cannot increment with non-numeric argument: {x: "a"}`},
		{name: "mul", doc: `{"_id":1,"x":3}`, update: `{"$mul":{"x":2}}`, want: `{"_id":1,"x":6}`, modified: true},
		{name: "mul missing stores zero of the multiplier type", doc: `{"_id":1}`, update: `{"$mul":{"a":5,"b":{"$numberLong":"5"},"c":2.5}}`,
			want: `{"_id":1,"a":0,"b":{"$numberLong":"0"},"c":0.0}`, modified: true},
		{name: "mul by one is not a modification", doc: `{"_id":1,"x":3}`, update: `{"$mul":{"x":1}}`, want: `{"_id":1,"x":3}`},
		{name: "mul overflow", doc: `{"_id":1,"x":{"$numberLong":"9223372036854775807"}}`, update: `{"$mul":{"x":2}}`,
			code: cmderr.BadValue, msg: "Failed to apply $mul operations to current value ((NumberLong)9223372036854775807) for document {_id: 1}"},
		{name: "mul non-numeric argument", doc: `{"_id":1}`, update: `{"$mul":{"x":true}}`,
			code: cmderr.TypeMismatch, msg: "Cannot multiply with non-numeric argument: {x: true}"},
		{name: "mul non-numeric field", doc: `{"_id":"k","x":[1]}`, update: `{"$mul":{"x":2}}`,
			code: cmderr.TypeMismatch, msg: `Cannot apply $mul to a value of non-numeric type. {_id: "k"} has the field 'x' of non-numeric type array`},
		{name: "min lowers", doc: `{"_id":1,"x":5}`, update: `{"$min":{"x":3}}`, want: `{"_id":1,"x":3}`, modified: true},
		{name: "min keeps", doc: `{"_id":1,"x":5}`, update: `{"$min":{"x":7}}`, want: `{"_id":1,"x":5}`},
		{name: "min equal other type keeps", doc: `{"_id":1,"x":5}`, update: `{"$min":{"x":5.0}}`, want: `{"_id":1,"x":5}`},
		{name: "min missing creates", doc: `{"_id":1}`, update: `{"$min":{"x":7}}`, want: `{"_id":1,"x":7}`, modified: true},
		{name: "max raises", doc: `{"_id":1,"x":5}`, update: `{"$max":{"x":7}}`, want: `{"_id":1,"x":7}`, modified: true},
		{name: "max across types", doc: `{"_id":1,"x":5}`, update: `{"$max":{"x":"a"}}`, want: `{"_id":1,"x":"a"}`, modified: true},
		{name: "max keeps", doc: `{"_id":1,"x":5}`, update: `{"$max":{"x":null}}`, want: `{"_id":1,"x":5}`},
		{name: "bit and/or/xor", doc: `{"_id":1,"x":12}`, update: `{"$bit":{"x":{"and":10,"or":1,"xor":{"$numberLong":"2"}}}}`, want: `{"_id":1,"x":{"$numberLong":"11"}}`, modified: true},
		{name: "bit missing starts from zero", doc: `{"_id":1}`, update: `{"$bit":{"x":{"or":5}}}`, want: `{"_id":1,"x":5}`, modified: true},
		{name: "bit non-integer field", doc: `{"_id":1,"x":1.5}`, update: `{"$bit":{"x":{"or":5}}}`, code: cmderr.BadValue},
		{name: "bit bad op", doc: `{"_id":1}`, update: `{"$bit":{"x":{"nand":5}}}`, code: cmderr.BadValue,
			msg: "The $bit modifier only supports 'and', 'or', and 'xor', not 'nand' which is an unknown operator: {nand: 5}"},
		{name: "bit non-integer argument", doc: `{"_id":1}`, update: `{"$bit":{"x":{"and":1.5}}}`, code: cmderr.BadValue},
	})
}

func TestRename(t *testing.T) {
	runApplyCases(t, []applyCase{
		{name: "simple", doc: `{"_id":1,"a":1,"c":2}`, update: `{"$rename":{"a":"b"}}`, want: `{"_id":1,"c":2,"b":1}`, modified: true},
		{name: "missing source is a no-op", doc: `{"_id":1}`, update: `{"$rename":{"a":"b.c"}}`, want: `{"_id":1}`},
		{name: "nested", doc: `{"_id":1,"a":{"b":{"x":1}}}`, update: `{"$rename":{"a.b":"c.d"}}`, want: `{"_id":1,"a":{},"c":{"d":{"x":1}}}`, modified: true},
		{name: "overwrites destination in place", doc: `{"_id":1,"b":0,"a":1}`, update: `{"$rename":{"a":"b"}}`, want: `{"_id":1,"b":1}`, modified: true},
		{name: "source through array", doc: `{"_id":1,"a":[{"b":1}]}`, update: `{"$rename":{"a.0.b":"c"}}`,
			code: cmderr.BadValue, msg: "The source field cannot be an array element, 'a.0.b' in doc with _id: 1 has an array field called 'a'"},
		{name: "destination through array", doc: `{"_id":1,"x":1,"a":[{"b":1}]}`, update: `{"$rename":{"x":"a.0.c"}}`,
			code: cmderr.BadValue, msg: "The destination field cannot be an array element, 'a.0.c' in doc with _id: 1 has an array field called 'a'"},
		{name: "same path", doc: `{"_id":1}`, update: `{"$rename":{"a":"a"}}`, code: cmderr.BadValue, msg: `The source and target field for $rename must differ: a: "a"`},
		{name: "prefix path", doc: `{"_id":1}`, update: `{"$rename":{"a":"a.b"}}`, code: cmderr.BadValue, msg: `The source and target field for $rename must not be on the same path: a: "a.b"`},
		{name: "non-string target", doc: `{"_id":1}`, update: `{"$rename":{"a":1}}`, code: cmderr.BadValue, msg: "The 'to' field for $rename must be a string: a: 1"},
		{name: "dynamic source", doc: `{"_id":1}`, update: `{"$rename":{"a.$":"b"}}`, code: cmderr.BadValue, msg: "The source field for $rename may not be dynamic: a.$"},
		{name: "conflict with another operator", doc: `{"_id":1}`, update: `{"$rename":{"a":"b"},"$set":{"b":1}}`,
			code: cmderr.ConflictingUpdateOperators, msg: "Updating the path 'b' would create a conflict at 'b'"},
		{name: "conflict on the source", doc: `{"_id":1}`, update: `{"$rename":{"a":"b"},"$set":{"a.x":1}}`,
			code: cmderr.ConflictingUpdateOperators, msg: "Updating the path 'a.x' would create a conflict at 'a'"},
		{name: "rename _id", doc: `{"_id":1}`, update: `{"$rename":{"_id":"x"}}`,
			code: cmderr.ImmutableField, msg: "Performing an update on the path '_id' would modify the immutable field '_id'"},
	})
}

func TestSetOnInsertAndCurrentDate(t *testing.T) {
	ins := &Env{Insert: true, Position: -1}
	runApplyCases(t, []applyCase{
		{name: "setOnInsert ignored on update", doc: `{"_id":1}`, update: `{"$setOnInsert":{"a":1,"b.c":2}}`, want: `{"_id":1}`},
		{name: "setOnInsert ignored even where not viable", doc: `{"_id":1,"a":1}`, update: `{"$setOnInsert":{"a.b":1}}`, want: `{"_id":1,"a":1}`},
		{name: "setOnInsert on insert", doc: `{"_id":1}`, update: `{"$setOnInsert":{"a":1}}`, env: ins, want: `{"_id":1,"a":1}`, modified: true},
		{name: "currentDate true", doc: `{"_id":1}`, update: `{"$currentDate":{"d":true}}`, want: `{"_id":1,"d":{"$date":"2024-05-06T07:08:09.01Z"}}`, modified: true},
		{name: "currentDate date", doc: `{"_id":1}`, update: `{"$currentDate":{"d":{"$type":"date"}}}`, want: `{"_id":1,"d":{"$date":"2024-05-06T07:08:09.01Z"}}`, modified: true},
		{name: "currentDate timestamp", doc: `{"_id":1,"t":1}`, update: `{"$currentDate":{"t":{"$type":"timestamp"}}}`, want: `{"_id":1,"t":{"$timestamp":{"t":1714979289,"i":1}}}`, modified: true},
		{name: "currentDate bad type", doc: `{"_id":1}`, update: `{"$currentDate":{"d":{"$type":"x"}}}`, code: cmderr.BadValue,
			msg: "The '$type' string field is required to be 'date' or 'timestamp': {$currentDate: {field : {$type: 'date'}}}"},
		{name: "currentDate bad option", doc: `{"_id":1}`, update: `{"$currentDate":{"d":{"x":1}}}`, code: cmderr.BadValue, msg: "Unrecognized $currentDate option: x"},
		{name: "currentDate bad argument", doc: `{"_id":1}`, update: `{"$currentDate":{"d":1}}`, code: cmderr.BadValue,
			msg: "int is not valid type for $currentDate. Please use a boolean ('true') or a $type expression ({$type: 'timestamp/date'})."},
	})
}

func TestPush(t *testing.T) {
	runApplyCases(t, []applyCase{
		{name: "append", doc: `{"_id":1,"a":[1]}`, update: `{"$push":{"a":2}}`, want: `{"_id":1,"a":[1,2]}`, modified: true},
		{name: "missing creates array", doc: `{"_id":1}`, update: `{"$push":{"a":{"x":1}}}`, want: `{"_id":1,"a":[{"x":1}]}`, modified: true},
		{name: "array value pushed as one element", doc: `{"_id":1,"a":[]}`, update: `{"$push":{"a":[1,2]}}`, want: `{"_id":1,"a":[[1,2]]}`, modified: true},
		{name: "each", doc: `{"_id":1,"a":[1]}`, update: `{"$push":{"a":{"$each":[2,3]}}}`, want: `{"_id":1,"a":[1,2,3]}`, modified: true},
		{name: "empty each is not a modification", doc: `{"_id":1,"a":[1]}`, update: `{"$push":{"a":{"$each":[]}}}`, want: `{"_id":1,"a":[1]}`},
		{name: "position 0", doc: `{"_id":1,"a":[1,2]}`, update: `{"$push":{"a":{"$each":[9],"$position":0}}}`, want: `{"_id":1,"a":[9,1,2]}`, modified: true},
		{name: "negative position", doc: `{"_id":1,"a":[1,2,3]}`, update: `{"$push":{"a":{"$each":[9],"$position":-1}}}`, want: `{"_id":1,"a":[1,2,9,3]}`, modified: true},
		{name: "position past end", doc: `{"_id":1,"a":[1]}`, update: `{"$push":{"a":{"$each":[9],"$position":10}}}`, want: `{"_id":1,"a":[1,9]}`, modified: true},
		{name: "slice keeps first n", doc: `{"_id":1,"a":[1,2]}`, update: `{"$push":{"a":{"$each":[3],"$slice":2}}}`, want: `{"_id":1,"a":[1,2]}`},
		{name: "negative slice keeps last n", doc: `{"_id":1,"a":[1,2]}`, update: `{"$push":{"a":{"$each":[3,4],"$slice":-3}}}`, want: `{"_id":1,"a":[2,3,4]}`, modified: true},
		{name: "slice zero empties", doc: `{"_id":1,"a":[1,2]}`, update: `{"$push":{"a":{"$each":[],"$slice":0}}}`, want: `{"_id":1,"a":[]}`, modified: true},
		{name: "sort whole elements", doc: `{"_id":1,"a":[3,1]}`, update: `{"$push":{"a":{"$each":[2],"$sort":-1}}}`, want: `{"_id":1,"a":[3,2,1]}`, modified: true},
		{name: "sort by field then slice", doc: `{"_id":1,"a":[{"s":5},{"s":1}]}`, update: `{"$push":{"a":{"$each":[{"s":3}],"$sort":{"s":-1},"$slice":2}}}`,
			want: `{"_id":1,"a":[{"s":5},{"s":3}]}`, modified: true},
		{name: "clauses before $each", doc: `{"_id":1,"a":[]}`, update: `{"$push":{"a":{"$slice":-1,"$each":[1,2]}}}`, want: `{"_id":1,"a":[2]}`, modified: true},
		{name: "non-array field", doc: `{"_id":1,"a":"x"}`, update: `{"$push":{"a":1}}`, code: cmderr.BadValue,
			msg: "The field 'a' must be an array but is of type string in document {_id: 1}"},
		{name: "each not an array", doc: `{"_id":1}`, update: `{"$push":{"a":{"$each":1}}}`, code: cmderr.BadValue,
			msg: "The argument to $each in $push must be an array but it was of type: int"},
		{name: "unknown clause", doc: `{"_id":1}`, update: `{"$push":{"a":{"$each":[1],"$foo":1}}}`, code: cmderr.BadValue, msg: "Unrecognized clause in $push: $foo"},
		{name: "bad slice", doc: `{"_id":1}`, update: `{"$push":{"a":{"$each":[1],"$slice":"x"}}}`, code: cmderr.BadValue,
			msg: "The value for $slice must be an integer value but was given type: string"},
		{name: "bad sort", doc: `{"_id":1}`, update: `{"$push":{"a":{"$each":[1],"$sort":2}}}`, code: cmderr.BadValue,
			msg: "The $sort element value must be either 1 or -1"},
	})
}

func TestAddToSet(t *testing.T) {
	runApplyCases(t, []applyCase{
		{name: "adds new", doc: `{"_id":1,"a":[1]}`, update: `{"$addToSet":{"a":2}}`, want: `{"_id":1,"a":[1,2]}`, modified: true},
		{name: "existing element is not a modification", doc: `{"_id":1,"a":[1,2]}`, update: `{"$addToSet":{"a":2}}`, want: `{"_id":1,"a":[1,2]}`},
		{name: "numerically equal is present", doc: `{"_id":1,"a":[1]}`, update: `{"$addToSet":{"a":1.0}}`, want: `{"_id":1,"a":[1]}`},
		{name: "documents compare whole", doc: `{"_id":1,"a":[{"x":1,"y":2}]}`, update: `{"$addToSet":{"a":{"y":2,"x":1}}}`, want: `{"_id":1,"a":[{"x":1,"y":2},{"y":2,"x":1}]}`, modified: true},
		{name: "missing creates", doc: `{"_id":1}`, update: `{"$addToSet":{"a":"t"}}`, want: `{"_id":1,"a":["t"]}`, modified: true},
		{name: "each dedups", doc: `{"_id":1,"a":[1]}`, update: `{"$addToSet":{"a":{"$each":[1,2,2,3]}}}`, want: `{"_id":1,"a":[1,2,3]}`, modified: true},
		{name: "empty each on missing creates empty array", doc: `{"_id":1}`, update: `{"$addToSet":{"a":{"$each":[]}}}`, want: `{"_id":1,"a":[]}`, modified: true},
		{name: "non-array field", doc: `{"_id":1,"a":5}`, update: `{"$addToSet":{"a":1}}`, code: cmderr.BadValue,
			msg: "Cannot apply $addToSet to non-array field. Field named 'a' has non-array type int"},
		{name: "each not an array", doc: `{"_id":1}`, update: `{"$addToSet":{"a":{"$each":"x"}}}`, code: cmderr.BadValue,
			msg: "The argument to $each in $addToSet must be an array but it was of type string"},
		{name: "fields after each", doc: `{"_id":1}`, update: `{"$addToSet":{"a":{"$each":[1],"x":1}}}`, code: cmderr.BadValue},
	})
}

func TestPullPullAllPop(t *testing.T) {
	runApplyCases(t, []applyCase{
		{name: "pull value", doc: `{"_id":1,"a":[1,2,1,3]}`, update: `{"$pull":{"a":1}}`, want: `{"_id":1,"a":[2,3]}`, modified: true},
		{name: "pull numerically equal", doc: `{"_id":1,"a":[1,2.0]}`, update: `{"$pull":{"a":2}}`, want: `{"_id":1,"a":[1]}`, modified: true},
		{name: "pull nothing matches", doc: `{"_id":1,"a":[1,2]}`, update: `{"$pull":{"a":5}}`, want: `{"_id":1,"a":[1,2]}`},
		{name: "pull missing", doc: `{"_id":1}`, update: `{"$pull":{"a":5}}`, want: `{"_id":1}`},
		{name: "pull $in", doc: `{"_id":1,"a":["x","y","z"]}`, update: `{"$pull":{"a":{"$in":["x","z"]}}}`, want: `{"_id":1,"a":["y"]}`, modified: true},
		{name: "pull $gte", doc: `{"_id":1,"a":[1,5,7,2]}`, update: `{"$pull":{"a":{"$gte":5}}}`, want: `{"_id":1,"a":[1,2]}`, modified: true},
		{name: "pull by document fields", doc: `{"_id":1,"a":[{"k":1,"v":"a"},{"k":2,"v":"b"},3]}`, update: `{"$pull":{"a":{"k":2}}}`,
			want: `{"_id":1,"a":[{"k":1,"v":"a"},3]}`, modified: true},
		{name: "pull by document with operator", doc: `{"_id":1,"a":[{"k":1},{"k":5}]}`, update: `{"$pull":{"a":{"k":{"$gt":3}}}}`, want: `{"_id":1,"a":[{"k":1}]}`, modified: true},
		{name: "pull array value", doc: `{"_id":1,"a":[[1,2],[1]]}`, update: `{"$pull":{"a":[1,2]}}`, want: `{"_id":1,"a":[[1]]}`, modified: true},
		{name: "pull non-array", doc: `{"_id":1,"a":1}`, update: `{"$pull":{"a":1}}`, code: cmderr.BadValue, msg: "Cannot apply $pull to a non-array value"},
		{name: "pullAll", doc: `{"_id":1,"a":[1,2,3,1]}`, update: `{"$pullAll":{"a":[1,3]}}`, want: `{"_id":1,"a":[2]}`, modified: true},
		{name: "pullAll non-array argument", doc: `{"_id":1}`, update: `{"$pullAll":{"a":1}}`, code: cmderr.BadValue, msg: "$pullAll requires an array argument but was given a int"},
		{name: "pullAll non-array field", doc: `{"_id":1,"a":{}}`, update: `{"$pullAll":{"a":[1]}}`, code: cmderr.BadValue},
		{name: "pop last", doc: `{"_id":1,"a":[1,2,3]}`, update: `{"$pop":{"a":1}}`, want: `{"_id":1,"a":[1,2]}`, modified: true},
		{name: "pop first", doc: `{"_id":1,"a":[1,2,3]}`, update: `{"$pop":{"a":-1}}`, want: `{"_id":1,"a":[2,3]}`, modified: true},
		{name: "pop empty", doc: `{"_id":1,"a":[]}`, update: `{"$pop":{"a":1}}`, want: `{"_id":1,"a":[]}`},
		{name: "pop missing", doc: `{"_id":1}`, update: `{"$pop":{"a":1}}`, want: `{"_id":1}`},
		{name: "pop non-array", doc: `{"_id":1,"a":{"b":"s"}}`, update: `{"$pop":{"a.b":1}}`, code: cmderr.TypeMismatch, msg: "Path 'a.b' contains an element of non-array type 'string'"},
		{name: "pop bad argument", doc: `{"_id":1}`, update: `{"$pop":{"a":2}}`, code: cmderr.FailedToParse, msg: "$pop expects 1 or -1, found: 2"},
		{name: "pop non-number", doc: `{"_id":1}`, update: `{"$pop":{"a":"x"}}`, code: cmderr.FailedToParse, msg: `Expected a number in: a: "x"`},
	})
}

func TestPositionalAndArrayFilters(t *testing.T) {
	pos := func(p int) *Env { return &Env{Position: p} }
	af := func(filters ...string) *Env {
		e := &Env{Position: -1}
		for _, f := range filters {
			e.ArrayFilters = append(e.ArrayFilters, D(f))
		}
		return e
	}
	runApplyCases(t, []applyCase{
		{name: "positional element", doc: `{"_id":1,"a":[1,2,3]}`, update: `{"$set":{"a.$":9}}`, env: pos(1), want: `{"_id":1,"a":[1,9,3]}`, modified: true},
		{name: "positional field of element", doc: `{"_id":1,"a":[{"x":1},{"x":2}]}`, update: `{"$inc":{"a.$.x":10}}`, env: pos(1), want: `{"_id":1,"a":[{"x":1},{"x":12}]}`, modified: true},
		{name: "positional without match", doc: `{"_id":1,"a":[1]}`, update: `{"$set":{"a.$":9}}`, code: cmderr.BadValue,
			msg: "The positional operator did not find the match needed from the query."},
		{name: "positional merges with concrete path", doc: `{"_id":1,"a":[{"x":1}]}`, update: `{"$set":{"a.$.x":5,"a.0.y":6}}`, env: pos(0), want: `{"_id":1,"a":[{"x":5,"y":6}]}`, modified: true},
		{name: "positional collides with concrete path", doc: `{"_id":1,"a":[1]}`, update: `{"$set":{"a.$":5,"a.0":6}}`, env: pos(0), code: cmderr.ConflictingUpdateOperators, msg: "Update created a conflict at 'a.0'"},
		{name: "all elements", doc: `{"_id":1,"a":[1,2,3]}`, update: `{"$set":{"a.$[]":0}}`, want: `{"_id":1,"a":[0,0,0]}`, modified: true},
		{name: "all elements field", doc: `{"_id":1,"a":[{"x":1},{"y":1}]}`, update: `{"$inc":{"a.$[].x":1}}`, want: `{"_id":1,"a":[{"x":2},{"y":1,"x":1}]}`, modified: true},
		{name: "all elements nested", doc: `{"_id":1,"a":[[1],[2,3]]}`, update: `{"$mul":{"a.$[].$[]":10}}`, want: `{"_id":1,"a":[[10],[20,30]]}`, modified: true},
		{name: "all elements on missing", doc: `{"_id":1}`, update: `{"$set":{"a.$[]":0}}`, code: cmderr.BadValue,
			msg: "The path 'a' must exist in the document in order to apply array updates."},
		{name: "all elements on non-array", doc: `{"_id":1,"a":1}`, update: `{"$set":{"a.$[]":0}}`, code: cmderr.BadValue,
			msg: "Cannot apply array updates to non-array element a: 1"},
		{name: "array filter", doc: `{"_id":1,"a":[1,5,2,7]}`, update: `{"$set":{"a.$[big]":0}}`, env: af(`{"big":{"$gte":5}}`), want: `{"_id":1,"a":[1,0,2,0]}`, modified: true},
		{name: "array filter on field", doc: `{"_id":1,"a":[{"k":1,"v":1},{"k":2,"v":1}]}`, update: `{"$inc":{"a.$[e].v":5}}`, env: af(`{"e.k":2}`),
			want: `{"_id":1,"a":[{"k":1,"v":1},{"k":2,"v":6}]}`, modified: true},
		{name: "array filter matches nothing", doc: `{"_id":1,"a":[1]}`, update: `{"$set":{"a.$[x]":0}}`, env: af(`{"x":5}`), want: `{"_id":1,"a":[1]}`},
		{name: "two filters overlapping", doc: `{"_id":1,"a":[1,5]}`, update: `{"$set":{"a.$[x]":0,"a.$[y]":1}}`, env: af(`{"x":{"$gt":0}}`, `{"y":5}`),
			code: cmderr.ConflictingUpdateOperators, msg: "Update created a conflict at 'a.1'"},
		{name: "missing filter", doc: `{"_id":1,"a":[1]}`, update: `{"$set":{"a.$[x]":0}}`, code: cmderr.BadValue,
			msg: "No array filter found for identifier 'x' in path 'a.$[x]'"},
		{name: "unused filter", doc: `{"_id":1,"a":[1]}`, update: `{"$set":{"a.$[]":0}}`, env: af(`{"x":5}`), code: cmderr.FailedToParse,
			msg: "The array filter for identifier 'x' was not used in the update { $set: { a.$[]: 0 } }"},
		{name: "bad identifier", doc: `{"_id":1,"a":[1]}`, update: `{"$set":{"a.$[X]":0}}`, env: af(`{"X":5}`), code: cmderr.BadValue},
		{name: "duplicate filter", doc: `{"_id":1,"a":[1]}`, update: `{"$set":{"a.$[x]":0}}`, env: af(`{"x":5}`, `{"x":6}`), code: cmderr.FailedToParse,
			msg: "Found multiple array filters with the same top-level field name x"},
		{name: "array node conflicts with concrete child", doc: `{"_id":1}`, update: `{"$set":{"a.$[].x":1,"a.0.y":2}}`, code: cmderr.ConflictingUpdateOperators,
			msg: "Updating the path 'a.0.y' would create a conflict at 'a'"},
	})
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name   string
		update any
		code   int32
		msg    string
	}{
		{"unknown modifier", D(`{"$foo":{"a":1}}`), cmderr.FailedToParse, "Unknown modifier: $foo. Expected a valid update modifier or pipeline-style update specified as an array"},
		{"plain field after operator", D(`{"$set":{"a":1},"b":1}`), cmderr.FailedToParse, "Unknown modifier: b. Expected a valid update modifier or pipeline-style update specified as an array"},
		{"operator after plain field", D(`{"b":1,"$set":{"a":1}}`), cmderr.DollarPrefixedFieldName,
			"The dollar ($) prefixed field '$set' in '$set' is not allowed in the context of an update's replacement document. Consider using an aggregation pipeline with $replaceWith."},
		{"operator argument not a document", D(`{"$set":1}`), cmderr.FailedToParse, "Modifiers operate on fields but we found type int instead. For example: {$mod: {<field>: ...}} not {$set: 1}"},
		{"conflict same path", D(`{"$set":{"a":1},"$inc":{"a":1}}`), cmderr.ConflictingUpdateOperators, "Updating the path 'a' would create a conflict at 'a'"},
		{"conflict child after parent", D(`{"$set":{"a":1,"a.b":2}}`), cmderr.ConflictingUpdateOperators, "Updating the path 'a.b' would create a conflict at 'a'"},
		{"conflict parent after child", D(`{"$set":{"a.b.c":1},"$unset":{"a.b":1}}`), cmderr.ConflictingUpdateOperators, "Updating the path 'a.b' would create a conflict at 'a.b'"},
		{"empty path", D(`{"$set":{"":1}}`), cmderr.EmptyFieldName, "An empty update path is not valid."},
		{"empty component", D(`{"$set":{"a..b":1}}`), cmderr.EmptyFieldName, "The update path 'a..b' contains an empty field name, which is not allowed."},
		{"positional first", D(`{"$set":{"$.a":1}}`), cmderr.BadValue, "Cannot have positional (i.e. '$') element in the first position in path '$.a'"},
		{"two positionals", D(`{"$set":{"a.$.b.$":1}}`), cmderr.BadValue, "Too many positional (i.e. '$') elements found in path 'a.$.b.$'"},
		{"not a document", int32(5), cmderr.FailedToParse, "Update argument must be either an object or an array"},
		{"nil", nil, cmderr.FailedToParse, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(tc.update)
			checkErr(t, err, tc.code, tc.msg)
		})
	}
}

func TestCompileNormalizesGoValues(t *testing.T) {
	u, err := Compile(bson.M{"$set": bson.M{"a": 1, "b": []any{int64(2)}}})
	if err != nil {
		t.Fatal(err)
	}
	out, modified, err := u.Apply(D(`{"_id":1}`), Env{Position: -1})
	if err != nil || !modified {
		t.Fatalf("Apply = %v, %v", modified, err)
	}
	if want := (bson.D{{Key: "_id", Value: int32(1)}, {Key: "a", Value: int32(1)}, {Key: "b", Value: bson.A{int64(2)}}}); !identicalDoc(want, out) {
		t.Fatalf("got %s want %s", show(out), show(want))
	}
}

func TestReplacement(t *testing.T) {
	runApplyCases(t, []applyCase{
		{name: "keeps _id first", doc: `{"_id":1,"a":1}`, update: `{"b":2}`, want: `{"_id":1,"b":2}`, modified: true},
		{name: "same _id moved first", doc: `{"_id":1,"a":1}`, update: `{"b":2,"_id":1}`, want: `{"_id":1,"b":2}`, modified: true},
		{name: "identical is not a modification", doc: `{"_id":1,"a":1}`, update: `{"a":1}`, want: `{"_id":1,"a":1}`},
		{name: "empty replacement", doc: `{"_id":1,"a":1}`, update: `{}`, want: `{"_id":1}`, modified: true},
		{name: "altered _id", doc: `{"_id":1,"a":1}`, update: `{"_id":2}`, code: cmderr.ImmutableField,
			msg: "After applying the update, the (immutable) field '_id' was found to have been altered to _id: 2"},
	})
	u, err := Compile(D(`{"x":1}`))
	if err != nil || !u.IsReplacement() {
		t.Fatalf("Compile = %v, IsReplacement %v", err, u != nil && u.IsReplacement())
	}
	if u, _ := Compile(D(`{"$set":{"x":1}}`)); u.IsReplacement() {
		t.Fatal("operator update reported as replacement")
	}
}

func TestUpsert(t *testing.T) {
	cases := []struct {
		name, seed, update string
		env                Env
		want               string // "" with code != 0
		code               int32
		msg                string
		generatedID        bool
	}{
		{name: "operators on seed", seed: `{"_id":"k","tag":"x"}`, update: `{"$set":{"b":1},"$inc":{"n":1},"$setOnInsert":{"c":2}}`,
			want: `{"_id":"k","tag":"x","b":1,"c":2,"n":1}`},
		{name: "_id set by update goes first", seed: `{"k":1}`, update: `{"$set":{"_id":5,"a":1}}`, want: `{"_id":5,"k":1,"a":1}`},
		{name: "_id generated", seed: `{"k":1}`, update: `{"$inc":{"n":1}}`, generatedID: true},
		{name: "replacement takes seed _id only", seed: `{"_id":3,"k":1}`, update: `{"a":1}`, want: `{"_id":3,"a":1}`},
		{name: "replacement with own _id", seed: `{"k":1}`, update: `{"a":1,"_id":9}`, want: `{"_id":9,"a":1}`},
		{name: "replacement _id differs from query", seed: `{"_id":3}`, update: `{"_id":4}`, code: cmderr.ImmutableField,
			msg: "After applying the update, the (immutable) field '_id' was found to have been altered to _id: 4"},
		{name: "update changes query _id", seed: `{"_id":3}`, update: `{"$set":{"_id":4}}`, code: cmderr.ImmutableField,
			msg: "Performing an update on the path '_id' would modify the immutable field '_id'"},
		{name: "array _id", seed: `{}`, update: `{"$set":{"_id":[1]}}`, code: cmderr.InvalidIdField, msg: "The '_id' value cannot be of type array"},
		{name: "positional without match", seed: `{}`, update: `{"$set":{"a.$":1}}`, env: Env{Position: -1}, code: cmderr.BadValue},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u, err := Compile(D(tc.update))
			if err != nil {
				t.Fatal(err)
			}
			seed := D(tc.seed)
			before := value.CloneDoc(seed)
			out, err := u.Upsert(seed, tc.env)
			if !identicalDoc(before, seed) {
				t.Fatal("seed mutated")
			}
			if tc.code != 0 {
				checkErr(t, err, tc.code, tc.msg)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.generatedID {
				if len(out) == 0 || out[0].Key != "_id" {
					t.Fatalf("no leading _id: %s", show(out))
				}
				if _, ok := out[0].Value.(bson.ObjectID); !ok {
					t.Fatalf("_id not an ObjectID: %s", show(out))
				}
				return
			}
			if want := D(tc.want); !identicalDoc(want, out) {
				t.Fatalf("got  %s\nwant %s", show(out), show(want))
			}
		})
	}
}

// TestResilientArticleCounterSteps runs the exactly-once counter of "How To Write
// Resilient MongoDB Applications": an upsert that records a pending token,
// then the step that consumes the token and increments the counter, then a
// replay of that step, which must be a no-op for $pull (token gone) — the
// caller's filter prevents the $inc.
func TestResilientArticleCounterSteps(t *testing.T) {
	token := bson.NewObjectID()
	record, err := Compile(bson.D{{Key: "$addToSet", Value: bson.D{{Key: "pending", Value: token}}}})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := record.Upsert(bson.D{{Key: "_id", Value: "counter"}}, Env{Position: -1})
	if err != nil {
		t.Fatal(err)
	}
	want := bson.D{{Key: "_id", Value: "counter"}, {Key: "pending", Value: bson.A{token}}}
	if !identicalDoc(want, doc) {
		t.Fatalf("after upsert: %s", show(doc))
	}
	// Recording the same token again (a retried step 1) changes nothing.
	again, modified, err := record.Apply(doc, Env{Position: -1})
	if err != nil || modified || !identicalDoc(doc, again) {
		t.Fatalf("re-record: modified=%v err=%v doc=%s", modified, err, show(again))
	}
	consume, err := Compile(bson.D{
		{Key: "$pull", Value: bson.D{{Key: "pending", Value: token}}},
		{Key: "$inc", Value: bson.D{{Key: "counter", Value: int32(1)}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	doc, modified, err = consume.Apply(doc, Env{Position: -1})
	if err != nil || !modified {
		t.Fatalf("consume: modified=%v err=%v", modified, err)
	}
	want = bson.D{{Key: "_id", Value: "counter"}, {Key: "pending", Value: bson.A{}}, {Key: "counter", Value: int32(1)}}
	if !identicalDoc(want, doc) {
		t.Fatalf("after consume: %s", show(doc))
	}
	pullOnly, _ := Compile(bson.D{{Key: "$pull", Value: bson.D{{Key: "pending", Value: token}}}})
	if _, modified, _ := pullOnly.Apply(doc, Env{Position: -1}); modified {
		t.Fatal("pulling an absent token reported a modification")
	}
}

// TestOptimisticLockingArticleUpsert runs the versioned write of "Optimistic Locking
// in MongoDB": the first upsert inserts version 1 with created set, the next
// update bumps the version and leaves created alone.
func TestOptimisticLockingArticleUpsert(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	u, err := Compile(bson.D{
		{Key: "$set", Value: bson.D{{Key: "name", Value: "n1"}, {Key: "state", Value: "active"}}},
		{Key: "$inc", Value: bson.D{{Key: "version", Value: int64(1)}}},
		{Key: "$setOnInsert", Value: bson.D{{Key: "created", Value: bson.NewDateTimeFromTime(now)}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := u.Upsert(bson.D{{Key: "_id", Value: "doc-1"}}, Env{Position: -1, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	created := bson.NewDateTimeFromTime(now)
	want := bson.D{{Key: "_id", Value: "doc-1"}, {Key: "created", Value: created}, {Key: "name", Value: "n1"},
		{Key: "state", Value: "active"}, {Key: "version", Value: int64(1)}}
	if !identicalDoc(want, doc) {
		t.Fatalf("inserted %s", show(doc))
	}
	doc, modified, err := u.Apply(doc, Env{Position: -1, Now: now.Add(time.Hour)})
	if err != nil || !modified {
		t.Fatalf("second write: modified=%v err=%v", modified, err)
	}
	want[4].Value = int64(2)
	if !identicalDoc(want, doc) {
		t.Fatalf("updated %s", show(doc))
	}
}

func TestApplyDoesNotShareSpecValues(t *testing.T) {
	u, err := Compile(D(`{"$set":{"a":{"b":[1]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	out1, _, _ := u.Apply(D(`{"_id":1}`), Env{Position: -1})
	// Mutating one result must not leak into the next application.
	out1[1].Value.(bson.D)[0].Value.(bson.A)[0] = int32(99)
	out2, _, _ := u.Apply(D(`{"_id":2}`), Env{Position: -1})
	if !identicalDoc(D(`{"_id":2,"a":{"b":[1]}}`), out2) {
		t.Fatalf("spec value shared between results: %s", show(out2))
	}
}

// Apply copies only the documents and arrays on the paths it changes: the
// rest of the result is the input's own values, which it leaves as they were.
func TestApplySharesUnchangedValues(t *testing.T) {
	doc := D(`{"_id":1,"a":{"b":1,"c":{"d":1}},"e":[1,2],"f":[{"g":1},{"g":2}]}`)
	before := value.CloneDoc(doc)
	out, modified, err := compileAndApply(D(`{"$inc":{"a.b":1,"f.1.g":1}}`), doc, Env{Position: -1})
	if err != nil || !modified {
		t.Fatal(out, modified, err)
	}
	if want := D(`{"_id":1,"a":{"b":2,"c":{"d":1}},"e":[1,2],"f":[{"g":1},{"g":3}]}`); !identicalDoc(want, out) {
		t.Fatalf("got %s", show(out))
	}
	if !identicalDoc(before, doc) {
		t.Fatalf("input changed: %s", show(doc))
	}
	same := func(name string, x, y any) {
		t.Helper()
		switch x := x.(type) {
		case bson.D:
			if &x[0] != &y.(bson.D)[0] {
				t.Errorf("%s was copied", name)
			}
		case bson.A:
			if &x[0] != &y.(bson.A)[0] {
				t.Errorf("%s was copied", name)
			}
		}
	}
	same("a.c", doc[1].Value.(bson.D)[1].Value, out[1].Value.(bson.D)[1].Value)
	same("e", doc[2].Value, out[2].Value)
	same("f.0", doc[3].Value.(bson.A)[0], out[3].Value.(bson.A)[0])
	if &doc[1].Value.(bson.D)[0] == &out[1].Value.(bson.D)[0] {
		t.Error("a was changed in place")
	}
}

func TestCheckArrayFilters(t *testing.T) {
	u, err := Compile(D(`{"$set":{"a.$[x]":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	checkErr(t, u.CheckArrayFilters(nil), cmderr.BadValue, "No array filter found for identifier 'x' in path 'a.$[x]'")
	if err := u.CheckArrayFilters([]bson.D{D(`{"x":{"$gt":1}}`)}); err != nil {
		t.Fatal(err)
	}
	if !(&Update{positional: true}).UsesPosition() {
		t.Fatal("UsesPosition")
	}
	p, _ := Compile(D(`{"$set":{"a.$":1}}`))
	if !p.UsesPosition() || u.UsesPosition() {
		t.Fatal("UsesPosition wrong")
	}
}

func TestFormatValue(t *testing.T) {
	cases := map[string]any{
		`1`:                       int32(1),
		`1.0`:                     1.0,
		`1.5`:                     1.5,
		`"s"`:                     "s",
		`{ a: 1, b: [ 1, "x" ] }`: D(`{"a":1,"b":[1,"x"]}`),
		`{}`:                      bson.D{},
		`[]`:                      bson.A{},
		`null`:                    nil,
		`true`:                    true,
		`new Date(5)`:             bson.DateTime(5),
	}
	for want, v := range cases {
		if got := formatValue(v); got != want {
			t.Errorf("formatValue(%#v) = %q, want %q", v, got, want)
		}
	}
}

func TestBackfillLimit(t *testing.T) {
	runApplyCases(t, []applyCase{
		{name: "padding within limit", doc: `{"_id":1,"a":[]}`, update: `{"$set":{"a.2":1}}`, want: `{"_id":1,"a":[null,null,1]}`, modified: true},
		{name: "padding past limit", doc: `{"_id":1,"a":[]}`, update: `{"$set":{"a.1500000":1}}`, code: 34, msg: "can't backfill more than 1500000 elements"},
		{name: "unset far index is a no-op", doc: `{"_id":1,"a":[]}`, update: `{"$unset":{"a.999999999":1}}`, want: `{"_id":1,"a":[]}`},
	})
}

func TestHugeIndex(t *testing.T) {
	runApplyCases(t, []applyCase{
		{name: "set huge index", doc: `{"_id":1,"a":[1]}`, update: `{"$set":{"a.99999999999999999999":1}}`, code: 34},
		{name: "inc huge index", doc: `{"_id":1,"a":[1]}`, update: `{"$inc":{"a.4294967296":1}}`, code: 34},
		{name: "pull huge index", doc: `{"_id":1,"a":[1]}`, update: `{"$pull":{"a.4294967296":1}}`, want: `{"_id":1,"a":[1]}`},
	})
}

func TestArrayFilterMerging(t *testing.T) {
	af := func(filters ...string) *Env {
		e := &Env{Position: -1}
		for _, f := range filters {
			e.ArrayFilters = append(e.ArrayFilters, D(f))
		}
		return e
	}
	runApplyCases(t, []applyCase{
		{name: "two filters on one element, different fields", doc: `{"_id":1,"a":[{"k":1},{"k":2}]}`,
			update: `{"$set":{"a.$[x].p":1,"a.$[y].q":2}}`, env: af(`{"x.k":{"$gte":1}}`, `{"y.k":2}`),
			want: `{"_id":1,"a":[{"k":1,"p":1},{"k":2,"p":1,"q":2}]}`, modified: true},
		{name: "all and filtered on one element, same field", doc: `{"_id":1,"a":[{"k":1}]}`,
			update: `{"$set":{"a.$[].p":1,"a.$[y].p":2}}`, env: af(`{"y.k":1}`),
			code: cmderr.ConflictingUpdateOperators, msg: "Update created a conflict at 'a.0.p'"},
		{name: "filter with $or", doc: `{"_id":1,"a":[1,2,3]}`, update: `{"$set":{"a.$[x]":0}}`,
			env: af(`{"$or":[{"x":1},{"x":3}]}`), want: `{"_id":1,"a":[0,2,0]}`, modified: true},
		{name: "filter with two identifiers", doc: `{"_id":1,"a":[1]}`, update: `{"$set":{"a.$[x]":0}}`,
			env: af(`{"x":1,"y":2}`), code: cmderr.FailedToParse},
		{name: "filter without identifier", doc: `{"_id":1,"a":[1]}`, update: `{"$set":{"a.$[x]":0}}`,
			env: af(`{}`), code: cmderr.FailedToParse, msg: "Cannot use an expression without a top-level field name in arrayFilters"},
		{name: "nested all-elements and filter", doc: `{"_id":1,"a":[{"b":[1,5]},{"b":[7]}]}`, update: `{"$inc":{"a.$[].b.$[n]":100}}`,
			env: af(`{"n":{"$gt":4}}`), want: `{"_id":1,"a":[{"b":[1,105]},{"b":[107]}]}`, modified: true},
		{name: "unset through all elements leaves nulls", doc: `{"_id":1,"a":[1,2]}`, update: `{"$unset":{"a.$[]":1}}`, want: `{"_id":1,"a":[null,null]}`, modified: true},
		{name: "push sort by field with scalars", doc: `{"_id":1,"a":[{"s":2},5]}`, update: `{"$push":{"a":{"$each":[{"s":1}],"$sort":{"s":1}}}}`,
			want: `{"_id":1,"a":[5,{"s":1},{"s":2}]}`, modified: true},
	})
}

func TestConcurrentApply(t *testing.T) {
	u, err := Compile(D(`{"$inc":{"n":1},"$push":{"a":{"$each":[1],"$slice":-3}},"$set":{"a.$[x]":0}}`))
	if err == nil {
		t.Fatal("conflicting update compiled") // a and a.$[x] conflict
	}
	u, err = Compile(D(`{"$inc":{"n":1},"$push":{"a":{"$each":[1],"$slice":-3}},"$set":{"b.$[x]":0}}`))
	if err != nil {
		t.Fatal(err)
	}
	doc := D(`{"_id":1,"n":1,"a":[5],"b":[1,2,3]}`)
	env := Env{Position: -1, ArrayFilters: []bson.D{D(`{"x":{"$gt":1}}`)}}
	want := D(`{"_id":1,"n":2,"a":[5,1],"b":[1,0,0]}`)
	done := make(chan error, 8)
	for range 8 {
		go func() {
			for range 100 {
				out, _, err := u.Apply(doc, env)
				if err != nil {
					done <- err
					return
				}
				if !identicalDoc(want, out) {
					done <- fmt.Errorf("got %s", show(out))
					return
				}
			}
			done <- nil
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// MongoDB 5.0+ stores $-prefixed field names: nested ones through any
// update, a top-level one only through an upsert's insert.
func TestDollarPrefixedFields(t *testing.T) {
	nested, err := Compile(D(`{"$set":{"a.$x":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := nested.Apply(D(`{"_id":1,"a":{}}`), Env{})
	if err != nil || fmt.Sprint(out) != fmt.Sprint(D(`{"_id":1,"a":{"$x":1}}`)) {
		t.Fatalf("nested: %v %v", out, err)
	}
	top, err := Compile(D(`{"$set":{"$hotel":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = top.Apply(D(`{"_id":1}`), Env{})
	checkErr(t, err, cmderr.DollarPrefixedFieldName, "The dollar ($) prefixed field '$hotel' in '$hotel' is not allowed in the context of an update's replacement document. Consider using an aggregation pipeline with $replaceWith.")
	ins, err := top.Upsert(D(`{"_id":2}`), Env{})
	if err != nil || fmt.Sprint(ins) != fmt.Sprint(D(`{"_id":2,"$hotel":1}`)) {
		t.Fatalf("upsert: %v %v", ins, err)
	}
}
