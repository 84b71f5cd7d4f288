package query

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// BenchmarkMatchSimple is the simple-collation filter path: an equality on
// a string field and a range on a number, over 200 documents.
func BenchmarkMatchSimple(b *testing.B) {
	docs := make([]bson.D, 200)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: int32(i)}, {Key: "name", Value: "User" + string(rune('A'+i%26)) + "x"}, {Key: "n", Value: int32(i)}}
	}
	f, err := CompileFilter(bson.D{{Key: "name", Value: "UserKx"}, {Key: "n", Value: bson.D{{Key: "$gt", Value: int32(10)}}}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := 0
		for _, d := range docs {
			if f.Match(d) {
				n++
			}
		}
		if n != 7 {
			b.Fatalf("matched %d", n)
		}
	}
}
