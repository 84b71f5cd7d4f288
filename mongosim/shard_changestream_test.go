package mongosim

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// nextKeys reads n insert events from cs and returns their k values.
func nextKeys(t *testing.T, ctx context.Context, cs *mongo.ChangeStream, n int) ([]int32, bson.Raw) {
	t.Helper()
	var ks []int32
	var last bson.Raw
	for len(ks) < n {
		if !cs.Next(ctx) {
			t.Fatalf("change stream ended after %d events: %v", len(ks), cs.Err())
		}
		var ev struct {
			OperationType string `bson:"operationType"`
			FullDocument  struct {
				K int32 `bson:"k"`
			} `bson:"fullDocument"`
		}
		if err := cs.Decode(&ev); err != nil {
			t.Fatal(err)
		}
		if ev.OperationType == "insert" {
			ks = append(ks, ev.FullDocument.K)
		}
		last = cs.ResumeToken()
	}
	return ks, last
}

func wantKeys(t *testing.T, what string, got []int32, from, to int) {
	t.Helper()
	if len(got) != to-from {
		t.Fatalf("%s: %d events %v, want k %d..%d", what, len(got), got, from, to-1)
	}
	for i, k := range got {
		if int(k) != from+i {
			t.Fatalf("%s: events %v, want k %d..%d in order", what, got, from, to-1)
		}
	}
}

// TestShardedChangeStreamsMerged: database, cluster and sharded-collection
// change streams over two shards return every shard's events in cluster
// time order, and resume with their tokens after a shard's primary steps
// down.
func TestShardedChangeStreamsMerged(t *testing.T) {
	client, c := shardedClient(t, 2, nil)
	ctx := testCtx(t)
	shardCollection(t, ctx, client, "db.cs", bson.D{{Key: "k", Value: "hashed"}})
	db := client.Database("db")
	dbStream, err := db.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	defer dbStream.Close(ctx)
	clusterStream, err := client.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	defer clusterStream.Close(ctx)
	collStream, err := db.Collection("cs").Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	defer collStream.Close(ctx)

	const n = 20
	for i := range n {
		if _, err := db.Collection("cs").InsertOne(ctx, bson.D{{Key: "k", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	if counts := directCounts(t, ctx, c, "db", "cs"); counts[0] == 0 || counts[1] == 0 {
		t.Fatalf("documents per shard = %v, want both shards written", counts)
	}
	got, _ := nextKeys(t, ctx, clusterStream, n)
	wantKeys(t, "cluster stream", got, 0, n)
	got, _ = nextKeys(t, ctx, collStream, n)
	wantKeys(t, "sharded collection stream", got, 0, n)
	got, token := nextKeys(t, ctx, dbStream, n/2)
	wantKeys(t, "database stream", got, 0, n/2)

	// Resume after the tenth event once shard 1's primary stepped down.
	if err := c.Shards()[1].StepDown(ctx); err != nil {
		t.Fatal(err)
	}
	resumed, err := db.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(token))
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Close(ctx)
	got, _ = nextKeys(t, ctx, resumed, n/2)
	wantKeys(t, "resumed database stream", got, n/2, n)
}
