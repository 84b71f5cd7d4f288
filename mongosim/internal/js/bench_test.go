package js

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

var benchDoc = bson.D{{Key: "_id", Value: int32(1)}, {Key: "a", Value: int32(2)}, {Key: "s", Value: "text"},
	{Key: "sub", Value: bson.D{{Key: "x", Value: 1.5}, {Key: "arr", Value: bson.A{int32(1), int32(2), int32(3)}}}}}

// BenchmarkWherePooled is one $where test per document with pooled
// runtimes, as mongosim runs it.
func BenchmarkWherePooled(b *testing.B) {
	f, err := Compile("this.a == 2 && this.sub.arr.length == 3")
	if err != nil {
		b.Fatal(err)
	}
	env := &Env{}
	for b.Loop() {
		if ok, err := f.Test(env, Call{This: benchDoc, Globals: bson.D{{Key: "obj", Value: benchDoc}}}); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}

// BenchmarkWhereFreshRuntime is the same with a runtime created per
// document: what pooling saves.
func BenchmarkWhereFreshRuntime(b *testing.B) {
	f, err := Compile("this.a == 2 && this.sub.arr.length == 3")
	if err != nil {
		b.Fatal(err)
	}
	env := &Env{}
	for b.Loop() {
		pool.Put(newRunner())
		if ok, err := f.Test(env, Call{This: benchDoc, Globals: bson.D{{Key: "obj", Value: benchDoc}}}); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}
