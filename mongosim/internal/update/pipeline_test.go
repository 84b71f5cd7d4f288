package update

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// A parses a relaxed extended JSON array (a pipeline).
func A(js string) bson.A {
	d := D(`{"p":` + js + `}`)
	return d[0].Value.(bson.A)
}

func TestPipelineUpdate(t *testing.T) {
	cases := []struct {
		name, doc, pipeline, want string
		modified                  bool
		code                      int32
		msg                       string
	}{
		{name: "set computed field", doc: `{"_id":1,"a":1}`, pipeline: `[{"$set":{"b":{"$add":["$a",1]}}}]`, want: `{"_id":1,"a":1,"b":2}`, modified: true},
		{name: "unset then addFields", doc: `{"_id":1,"a":1,"b":2}`, pipeline: `[{"$unset":"a"},{"$addFields":{"c":"$b"}}]`, want: `{"_id":1,"b":2,"c":2}`, modified: true},
		{name: "removing _id keeps it", doc: `{"_id":1,"a":1}`, pipeline: `[{"$unset":"_id"}]`, want: `{"_id":1,"a":1}`},
		{name: "replaceWith keeps _id", doc: `{"_id":1,"a":{"x":5}}`, pipeline: `[{"$replaceWith":"$a"}]`, want: `{"_id":1,"x":5}`, modified: true},
		{name: "project", doc: `{"_id":1,"a":1,"b":2}`, pipeline: `[{"$project":{"b":1}}]`, want: `{"_id":1,"b":2}`, modified: true},
		{name: "no change", doc: `{"_id":1,"a":1}`, pipeline: `[{"$set":{"a":1}}]`, want: `{"_id":1,"a":1}`},
		{name: "changing _id", doc: `{"_id":1}`, pipeline: `[{"$set":{"_id":2}}]`, code: cmderr.ImmutableField,
			msg: "After applying the update, the (immutable) field '_id' was found to have been altered to _id: 2"},
		{name: "disallowed stage", doc: `{"_id":1}`, pipeline: `[{"$match":{}}]`, code: cmderr.InvalidOptions, msg: "$match is not allowed to be used within an update"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u, err := Compile(A(tc.pipeline))
			if err == nil {
				if !u.IsPipeline() || u.IsReplacement() {
					t.Fatal("kind not reported as pipeline")
				}
				var out bson.D
				var modified bool
				out, modified, err = u.Apply(D(tc.doc), Env{Position: -1, Now: testNow})
				if err == nil && tc.code == 0 {
					if !identicalDoc(D(tc.want), out) {
						t.Fatalf("got %s want %s", show(out), tc.want)
					}
					if modified != tc.modified {
						t.Fatalf("modified = %v", modified)
					}
					return
				}
			}
			if tc.code == 0 {
				t.Fatal(err)
			}
			checkErr(t, err, tc.code, tc.msg)
		})
	}
}

func TestPipelineUpsertAndNow(t *testing.T) {
	u, err := Compile(A(`[{"$set":{"n":1,"t":"$$NOW"}}]`))
	if err != nil {
		t.Fatal(err)
	}
	out, err := u.Upsert(D(`{"_id":3,"k":"x"}`), Env{Position: -1, Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	want := bson.D{{Key: "_id", Value: int32(3)}, {Key: "k", Value: "x"}, {Key: "n", Value: int32(1)}, {Key: "t", Value: bson.NewDateTimeFromTime(testNow)}}
	if !identicalDoc(want, out) {
		t.Fatalf("got %s", show(out))
	}
	if err := u.CheckArrayFilters([]bson.D{D(`{"x":1}`)}); err == nil {
		t.Fatal("arrayFilters accepted for a pipeline update")
	}
}
