package update

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

var fuzzDocs = []string{
	`{"_id":1}`,
	`{"_id":1,"a":1,"b":{"c":[1,{"d":2}],"e":"x"},"arr":[1,2,3],"s":"str"}`,
	`{"_id":{"$oid":"65f0a1b2c3d4e5f607182930"},"a":[[1,2],[3]],"n":{"$numberLong":"9223372036854775807"},"x":null}`,
}

var fuzzSeeds = []string{
	`{"$set":{"a.b.c":1,"arr.5":2}}`,
	`{"$inc":{"a":1,"n":1},"$mul":{"b.c.0":2}}`,
	`{"$unset":{"a":1},"$rename":{"s":"t"}}`,
	`{"$push":{"arr":{"$each":[4,5],"$position":-1,"$slice":-3,"$sort":1}}}`,
	`{"$addToSet":{"arr":{"$each":[1,9]}},"$pull":{"b.c":{"d":2}}}`,
	`{"$pullAll":{"arr":[1]},"$pop":{"a":-1},"$min":{"q":1},"$max":{"r":2}}`,
	`{"$set":{"arr.$[]":0,"a.$":1}}`,
	`{"$set":{"arr.$[x]":0}}`,
	`{"$currentDate":{"d":{"$type":"timestamp"}},"$setOnInsert":{"z":1},"$bit":{"a":{"xor":3}}}`,
	`{"a":1,"_id":1}`,
	`{"$set":{"_id":2}}`,
	`{"p":[{"$set":{"a":{"$add":["$a",1]}}},{"$unset":"b"}]}`,
}

// fuzzFollowUps update the fuzzed update's results once more, growing and
// shrinking the arrays of fuzzDocs.
var fuzzFollowUps = func() []*Update {
	var out []*Update
	for _, s := range []string{
		`{"$addToSet":{"arr":99,"a":99,"b.c":99}}`,
		`{"$push":{"arr":99,"b.c":{"$each":[7],"$position":0}}}`,
		`{"$pop":{"arr":1,"b.c":-1,"a":1}}`,
		`{"$set":{"arr.1":0,"b.c.1.d":0,"b.e":"y"}}`,
	} {
		u, err := Compile(D(s))
		if err != nil {
			panic(err)
		}
		out = append(out, u)
	}
	return out
}()

// FuzzCompileApply feeds arbitrary BSON as an update spec and applies it to a
// few documents: whatever the input, Compile, Apply and Upsert must return an
// error or a result, never panic, and never modify their input, nor the
// document a result was made from when the result is updated in turn.
func FuzzCompileApply(f *testing.F) {
	for _, s := range fuzzSeeds {
		b, err := bson.Marshal(D(s))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, 1, true)
		f.Add([]byte(s), 2, false)
	}
	docs := make([]bson.D, len(fuzzDocs))
	for i, js := range fuzzDocs {
		docs[i] = D(js)
	}
	f.Fuzz(func(t *testing.T, raw []byte, position int, withFilters bool) {
		// Raw BSON, or extended JSON, which the mutator reaches far more
		// easily than valid BSON bytes.
		var spec bson.D
		if bson.Unmarshal(raw, &spec) != nil && bson.UnmarshalExtJSON(raw, false, &spec) != nil {
			return
		}
		var arg any = spec
		if len(spec) == 1 && spec[0].Key == "p" {
			arg = spec[0].Value // lets the fuzzer reach pipeline updates
		}
		u, err := Compile(arg)
		if err != nil {
			return
		}
		env := Env{Position: position%4 - 1, Now: testNow}
		if withFilters {
			env.ArrayFilters = []bson.D{{{Key: "x", Value: bson.D{{Key: "$gt", Value: int32(1)}}}}}
		}
		for _, doc := range docs {
			before := shallowCopyForCheck(doc)
			out, modified, err := u.Apply(doc, env)
			if !identicalDoc(before, doc) {
				t.Fatalf("Apply mutated its input")
			}
			if err == nil && modified == identicalDoc(doc, out) {
				t.Fatalf("modified=%v inconsistent with result", modified)
			}
			// The result shares what the update left alone with doc (stored
			// documents are replaced, never changed in place): updating
			// the result again, by this update or another, must not reach
			// doc either.
			if err == nil {
				for _, next := range append([]*Update{u}, fuzzFollowUps...) {
					_, _, _ = next.Apply(out, env)
					if !identicalDoc(before, doc) {
						t.Fatalf("updating the result changed the original document")
					}
				}
			}
			if _, err := u.Upsert(doc, env); err != nil {
				continue
			}
		}
	})
}

func shallowCopyForCheck(d bson.D) bson.D {
	b, _ := bson.Marshal(d)
	var out bson.D
	_ = bson.Unmarshal(b, &out)
	return out
}
