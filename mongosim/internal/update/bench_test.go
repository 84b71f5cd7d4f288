package update

import (
	"testing"
)

// BenchmarkIncByID is the update of an updateOne {$inc: {n: 1}} by _id as
// mongosim runs it: compiled per statement, applied to the stored document.
func BenchmarkIncByID(b *testing.B) {
	var spec any = D(`{"$inc":{"n":1}}`) // boxed once, as a decoded command holds it
	doc := D(`{"_id":{"$oid":"65f000000000000000000001"},"n":5,"name":"x","tags":["a","b"]}`)
	env := Env{Position: -1}
	b.ReportAllocs()
	for b.Loop() {
		u, err := Compile(spec)
		if err != nil {
			b.Fatal(err)
		}
		out, modified, err := u.Apply(doc, env)
		if err != nil || !modified || len(out) != len(doc) {
			b.Fatal(out, modified, err)
		}
	}
}
