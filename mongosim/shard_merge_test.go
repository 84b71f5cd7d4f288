package mongosim

import (
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// TestShardedMergeAndOut: $merge into a sharded collection, from a sharded
// or an unsharded one, puts each document on the shard its key targets;
// $out into a sharded collection fails as on mongos.
func TestShardedMergeAndOut(t *testing.T) {
	client, c := shardedClient(t, 2, nil)
	ctx := testCtx(t)
	shardCollection(t, ctx, client, "db.src", bson.D{{Key: "k", Value: "hashed"}})
	shardCollection(t, ctx, client, "db.dst", bson.D{{Key: "k", Value: "hashed"}})
	db := client.Database("db")
	const n = 20
	var docs []any
	for i := range n {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "k", Value: i}, {Key: "v", Value: i}})
	}
	if _, err := db.Collection("src").InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	merge := func(from string, stage bson.D) error {
		_, err := db.Collection(from).Aggregate(ctx, mongo.Pipeline{
			{{Key: "$project", Value: bson.D{{Key: "k", Value: 1}, {Key: "v", Value: bson.D{{Key: "$multiply", Value: bson.A{"$v", 10}}}}}}}, stage})
		return err
	}
	if err := merge("src", bson.D{{Key: "$merge", Value: bson.D{{Key: "into", Value: "dst"}}}}); err != nil {
		t.Fatalf("$merge from a sharded into a sharded collection: %v", err)
	}
	sc := c.sharding.coll("db.dst")
	check := func(wantV func(k int32) int32, total int) {
		t.Helper()
		seen := 0
		for s := range c.Shards() {
			cur, err := shardDirect(t, c, s).Database("db").Collection("dst").Find(ctx, bson.D{})
			if err != nil {
				t.Fatal(err)
			}
			var got []struct {
				K int32 `bson:"k"`
				V int32 `bson:"v"`
			}
			if err := cur.All(ctx, &got); err != nil {
				t.Fatal(err)
			}
			for _, d := range got {
				seen++
				key, _ := sc.keyOfDoc(bson.D{{Key: "k", Value: d.K}})
				if owner := sc.shardFor(key); owner != s {
					t.Errorf("k=%d is on shard %d, its key targets shard %d", d.K, s, owner)
				}
				if d.V != wantV(d.K) {
					t.Errorf("k=%d has v=%d, want %d", d.K, d.V, wantV(d.K))
				}
			}
		}
		if seen != total {
			t.Errorf("%d documents in db.dst across the shards, want %d", seen, total)
		}
	}
	check(func(k int32) int32 { return 10 * k }, n)

	// Merging again matches each document on its shard (no duplicates).
	if err := merge("src", bson.D{{Key: "$merge", Value: bson.D{{Key: "into", Value: "dst"}, {Key: "whenMatched", Value: bson.A{
		bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: bson.D{{Key: "$add", Value: bson.A{"$v", "$$new.v"}}}}}}}}}}}}); err != nil {
		t.Fatalf("second $merge: %v", err)
	}
	check(func(k int32) int32 { return 20 * k }, n)

	// From an unsharded collection.
	if _, err := db.Collection("plain").InsertOne(ctx, bson.D{{Key: "_id", Value: 100}, {Key: "k", Value: 100}, {Key: "v", Value: 100}}); err != nil {
		t.Fatal(err)
	}
	if err := merge("plain", bson.D{{Key: "$merge", Value: bson.D{{Key: "into", Value: "dst"}}}}); err != nil {
		t.Fatalf("$merge from an unsharded into a sharded collection: %v", err)
	}
	check(func(k int32) int32 {
		if k == 100 {
			return 1000
		}
		return 20 * k
	}, n+1)

	err := merge("src", bson.D{{Key: "$out", Value: "dst"}})
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 28769 {
		t.Fatalf("$out into a sharded collection = %v, want 28769", err)
	}
}
