package mongosim

import (
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// mongod checks its hash function against this value at startup.
func TestShardedHashMatchesMongod(t *testing.T) {
	if got := hashKeyValue(int32(42)); got != -944302157085130861 {
		t.Fatalf("hash of 42 = %d, want mongod's -944302157085130861", got)
	}
	if hashKeyValue(int64(42)) != hashKeyValue(42.0) || hashKeyValue(42.5) != hashKeyValue(int32(42)) {
		t.Fatal("numbers must hash as mongod squashes them to 64-bit integers")
	}
	if got := hashedSplitPoints(2); !slices.Equal(got, []int64{0}) {
		t.Fatalf("split points of 2 chunks = %v, want [0]", got)
	}
	if got := hashedSplitPoints(4); len(got) != 3 || got[1] != 0 || got[0] != -got[2] {
		t.Fatalf("split points of 4 chunks = %v, want symmetric around 0", got)
	}
}

// A hashed collection on two shards has mongos' chunks: [MinKey, 0) on
// shard0 and [0, MaxKey) on shard1, and a document lands where mongod's
// hash puts it.
func TestShardedHashedChunksAsMongos(t *testing.T) {
	client, c := shardedClient(t, 2, nil)
	ctx := testCtx(t)
	shardCollection(t, ctx, client, "db.h", bson.D{{Key: "k", Value: "hashed"}})
	cur, err := client.Database("config").Collection("chunks").Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "min", Value: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	var chunks []struct {
		Min   bson.D `bson:"min"`
		Max   bson.D `bson:"max"`
		Shard string `bson:"shard"`
	}
	if err := cur.All(ctx, &chunks); err != nil {
		t.Fatal(err)
	}
	if len(chunks) != 2 || chunks[0].Shard != "shard0" || chunks[1].Shard != "shard1" ||
		chunks[0].Max[0].Value != int64(0) || chunks[1].Min[0].Value != int64(0) {
		t.Fatalf("chunks = %+v, want [MinKey, 0) on shard0 and [0, MaxKey) on shard1", chunks)
	}
	if _, err := client.Database("db").Collection("h").InsertOne(ctx, bson.D{{Key: "k", Value: int32(42)}}); err != nil {
		t.Fatal(err)
	}
	// mongod's hash of 42 is negative: shard0.
	if counts := directCounts(t, ctx, c, "db", "h"); counts[0] != 1 || counts[1] != 0 {
		t.Fatalf("documents per shard = %v, want k=42 on shard0", counts)
	}
}
