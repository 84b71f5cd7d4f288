package mongosim

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// BenchmarkRouterInsertOne is BenchmarkInsertOne through two mongos
// routers: the cost of the router's extra hop.
func BenchmarkRouterInsertOne(b *testing.B) {
	c := StartWithOptions(b, Options{Routers: 2})
	client, err := mongo.Connect(options.Client().ApplyURI(c.URI()).SetHeartbeatInterval(500 * time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	coll := client.Database("bench").Collection("insert")
	ctx := context.Background()
	var next atomic.Int64
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: next.Add(1)}, {Key: "v", Value: "payload"}}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportOps(b, start)
}
