package mongosim

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// benchValidators are the validators the validated-insert benchmarks
// compare: none (the cost must be nil), a $jsonSchema and query operators.
var benchValidators = []struct {
	name string
	v    bson.D
}{
	{"none", nil},
	{"jsonSchema", bson.D{{Key: "$jsonSchema", Value: bson.D{
		{Key: "bsonType", Value: "object"},
		{Key: "required", Value: bson.A{"name", "n"}},
		{Key: "properties", Value: bson.D{
			{Key: "name", Value: bson.D{{Key: "bsonType", Value: "string"}, {Key: "maxLength", Value: 64}}},
			{Key: "n", Value: bson.D{{Key: "bsonType", Value: "long"}, {Key: "minimum", Value: 0}}},
		}},
	}}}},
	{"query", bson.D{{Key: "name", Value: bson.D{{Key: "$type", Value: "string"}}}, {Key: "n", Value: bson.D{{Key: "$gte", Value: 0}}}}},
}

// BenchmarkInsertManyValidated inserts batches of 100 documents over TCP
// into a collection with each validator.
func BenchmarkInsertManyValidated(b *testing.B) {
	for _, bv := range benchValidators {
		b.Run(bv.name, func(b *testing.B) {
			client, _ := dataClient(b)
			db := client.Database("bench")
			ctx := context.Background()
			opts := options.CreateCollection()
			if bv.v != nil {
				opts.SetValidator(bv.v)
			}
			if err := db.CreateCollection(ctx, "validated", opts); err != nil {
				b.Fatal(err)
			}
			coll := db.Collection("validated")
			batch := make([]any, 100)
			var n int64
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				for j := range batch {
					n++
					batch[j] = bson.D{{Key: "_id", Value: n}, {Key: "name", Value: "payload"}, {Key: "n", Value: n}}
				}
				if _, err := coll.InsertMany(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			if s := time.Since(start).Seconds(); s > 0 {
				b.ReportMetric(float64(b.N*len(batch))/s, "docs/s")
			}
		})
	}
}

// BenchmarkStorageInsertValidated measures the storage engine's insert
// alone, where the validator's cost is not hidden by the network.
func BenchmarkStorageInsertValidated(b *testing.B) {
	for _, bv := range benchValidators {
		b.Run(bv.name, func(b *testing.B) {
			s := newStorage(nil, nil)
			var val *validator
			if bv.v != nil {
				v, _, err := validatorArgs("create", bson.D{{Key: "validator", Value: bv.v}}, nil)
				if err != nil {
					b.Fatal(err)
				}
				val = v
			}
			if _, _, err := s.ensureWith("bench", "v", func(c *collection) { c.validator = val }); err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				doc := bson.D{{Key: "_id", Value: int64(i)}, {Key: "name", Value: "payload"}, {Key: "n", Value: int64(i)}}
				if _, err := s.insertOne(ctx, "bench", "v", doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
