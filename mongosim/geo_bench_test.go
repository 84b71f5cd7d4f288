package mongosim

import (
	"math/rand"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// BenchmarkGeoNear100k compares $near over 100 000 points with a 2dsphere
// index against the same neighbourhood asked as a $geoWithin $centerSphere
// scan of an unindexed copy: the index search only measures the points in
// the cells around the query point. speedup is scan time / $near time;
// within-indexed is the same $geoWithin answered from the index.
func BenchmarkGeoNear100k(b *testing.B) {
	client, _ := dataClient(b)
	ctx := sdCtx(b)
	db := client.Database("geobench")
	indexed, plain := db.Collection("indexed"), db.Collection("plain")
	rng := rand.New(rand.NewSource(1))
	docs := make([]any, 100000)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "loc", Value: geoPoint(rng.Float64()*360-180, rng.Float64()*180-90)}}
	}
	for _, c := range []*mongo.Collection{indexed, plain} {
		if _, err := c.InsertMany(ctx, docs); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := indexed.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "loc", Value: "2dsphere"}}}); err != nil {
		b.Fatal(err)
	}
	const radius = 200000.0 // metres: about 10 of the 100 000 points
	near := bson.D{{Key: "loc", Value: bson.D{{Key: "$near", Value: bson.D{{Key: "$geometry", Value: geoPoint(2.35, 48.85)}, {Key: "$maxDistance", Value: radius}}}}}}
	within := bson.D{{Key: "loc", Value: bson.D{{Key: "$geoWithin", Value: bson.D{{Key: "$centerSphere", Value: bson.A{bson.A{2.35, 48.85}, radius / 6378100}}}}}}}
	run := func(c *mongo.Collection, f bson.D) int {
		cur, err := c.Find(ctx, f, options.Find().SetBatchSize(1000))
		if err != nil {
			b.Fatal(err)
		}
		var out []bson.D
		if err := cur.All(ctx, &out); err != nil {
			b.Fatal(err)
		}
		return len(out)
	}
	if n, m := run(indexed, near), run(plain, within); n != m || n == 0 {
		b.Fatalf("$near found %d, the scan %d", n, m)
	}
	b.ResetTimer()
	var nearT, scanT, withinT time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		run(indexed, near)
		t1 := time.Now()
		run(plain, within)
		t2 := time.Now()
		run(indexed, within)
		nearT, scanT, withinT = nearT+t1.Sub(t0), scanT+t2.Sub(t1), withinT+time.Since(t2)
	}
	b.ReportMetric(float64(nearT.Nanoseconds())/float64(b.N), "near-ns/op")
	b.ReportMetric(float64(withinT.Nanoseconds())/float64(b.N), "within-indexed-ns/op")
	b.ReportMetric(float64(scanT.Nanoseconds())/float64(b.N), "scan-ns/op")
	b.ReportMetric(float64(scanT)/float64(nearT), "speedup")
}

// BenchmarkGeoNearAfterWrite is an insert followed by a $near (limit 10)
// over 100 000 indexed points: each $near after a write rebuilds the
// sorted cell list, reusing the cells of the documents not written.
func BenchmarkGeoNearAfterWrite(b *testing.B) {
	client, _ := dataClient(b)
	ctx := sdCtx(b)
	coll := client.Database("geobench").Collection("writes")
	rng := rand.New(rand.NewSource(2))
	docs := make([]any, 100000)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "loc", Value: geoPoint(rng.Float64()*360-180, rng.Float64()*180-90)}}
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		b.Fatal(err)
	}
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "loc", Value: "2dsphere"}}}); err != nil {
		b.Fatal(err)
	}
	near := bson.D{{Key: "loc", Value: bson.D{{Key: "$near", Value: bson.D{{Key: "$geometry", Value: geoPoint(2.35, 48.85)}}}}}}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "loc", Value: geoPoint(rng.Float64()*360-180, rng.Float64()*180-90)}}); err != nil {
			b.Fatal(err)
		}
		cur, err := coll.Find(ctx, near, options.Find().SetLimit(10))
		if err != nil {
			b.Fatal(err)
		}
		var out []bson.D
		if err := cur.All(ctx, &out); err != nil || len(out) != 10 {
			b.Fatal(err, len(out))
		}
	}
}
