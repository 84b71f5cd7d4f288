package mongosim

import (
	"context"
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// shardOfK finds which shard holds the document with k == v, reading each
// shard directly; -1 when none does.
func shardOfK(t *testing.T, ctx context.Context, c *Cluster, coll string, v int) int {
	t.Helper()
	found := -1
	for i := range c.Shards() {
		n, err := shardDirect(t, c, i).Database("db").Collection(coll).CountDocuments(ctx, bson.D{{Key: "k", Value: v}})
		if err != nil {
			t.Fatal(err)
		}
		if n > 1 || (n == 1 && found >= 0) {
			t.Fatalf("k=%d found more than once across the shards", v)
		}
		if n == 1 {
			found = i
		}
	}
	return found
}

// movingKeys returns a key value held by shard 0 and one held by shard 1,
// from documents {k: 0..n-1}.
func movingKeys(t *testing.T, ctx context.Context, c *Cluster, coll string, n int) (on0, on1 int) {
	t.Helper()
	on0, on1 = -1, -1
	for v := range n {
		switch shardOfK(t, ctx, c, coll, v) {
		case 0:
			on0 = v
		case 1:
			on1 = v
		}
	}
	if on0 < 0 || on1 < 0 {
		t.Fatal("no key on each shard")
	}
	return on0, on1
}

// TestShardedShardKeyUpdate: an update changing the shard key moves the
// document to its new shard as a retryable write and in a transaction,
// and fails as mongos fails it otherwise.
func TestShardedShardKeyUpdate(t *testing.T) {
	client, c := shardedClient(t, 2, nil)
	ctx := testCtx(t)
	shardCollection(t, ctx, client, "db.m", bson.D{{Key: "k", Value: "hashed"}})
	coll := client.Database("db").Collection("m")
	var docs []any
	for i := range 20 {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "k", Value: i}})
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	on0, _ := movingKeys(t, ctx, c, "m", 20)
	// A new key value that shard 1 owns.
	sc := c.sharding.coll("db.m")
	to1 := 1000
	for ; ; to1++ {
		if key, err := sc.keyOfDoc(bson.D{{Key: "k", Value: to1}}); err == nil && sc.shardFor(key) == 1 {
			break
		}
	}

	// A retryable write (the driver's default): moved to shard 1.
	if ur, err := coll.UpdateOne(ctx, bson.D{{Key: "k", Value: on0}}, bson.D{{Key: "$set", Value: bson.D{{Key: "k", Value: to1}, {Key: "moved", Value: true}}}}); err != nil || ur.ModifiedCount != 1 {
		t.Fatalf("retryable shard key update: %+v, %v", ur, err)
	}
	if shardOfK(t, ctx, c, "m", on0) != -1 {
		t.Fatalf("the old document k=%d is still stored", on0)
	}
	if s := shardOfK(t, ctx, c, "m", to1); s != 1 {
		t.Fatalf("the moved document is on shard %d, want 1", s)
	}

	// findAndModify in a transaction moves it back; the reply is the
	// document after the update.
	sess, err := client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	got, err := sess.WithTransaction(ctx, func(ctx context.Context) (any, error) {
		var d bson.M
		err := coll.FindOneAndUpdate(ctx, bson.D{{Key: "k", Value: to1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "k", Value: on0}}}},
			options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&d)
		return d, err
	})
	if err != nil {
		t.Fatalf("findAndModify of the shard key in a transaction: %v", err)
	}
	if d := got.(bson.M); d["k"] != int32(on0) || d["moved"] != true {
		t.Fatalf("findAndModify returned %v, want the document after the update", d)
	}
	if shardOfK(t, ctx, c, "m", on0) != 0 || shardOfK(t, ctx, c, "m", to1) != -1 {
		t.Fatal("the transaction did not move the document back to shard 0")
	}

	// Neither a retryable write nor in a transaction: IllegalOperation.
	plain := connect(t, c.URI()+"?retryWrites=false")
	_, err = plain.Database("db").Collection("m").UpdateOne(ctx, bson.D{{Key: "k", Value: on0}}, bson.D{{Key: "$set", Value: bson.D{{Key: "k", Value: to1 + 1}}}})
	var we mongo.WriteException
	if !errors.As(err, &we) || len(we.WriteErrors) != 1 || we.WriteErrors[0].Code != 20 {
		t.Fatalf("shard key update without retryWrites = %v, want IllegalOperation (20)", err)
	}
	err = plain.Database("db").Collection("m").FindOneAndUpdate(ctx, bson.D{{Key: "k", Value: on0}}, bson.D{{Key: "$set", Value: bson.D{{Key: "k", Value: to1 + 1}}}}).Err()
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 20 {
		t.Fatalf("findAndModify of the shard key without retryWrites = %v, want IllegalOperation (20)", err)
	}
	if shardOfK(t, ctx, c, "m", on0) != 0 {
		t.Fatal("a refused shard key update changed the document")
	}
}

// A retry of a retryable update that moved a document (same lsid and
// txnNumber) gets the first attempt's answer, as mongos replays it.
func TestShardedShardKeyUpdateRetried(t *testing.T) {
	client, c := shardedClient(t, 2, nil)
	ctx := testCtx(t)
	shardCollection(t, ctx, client, "db.r", bson.D{{Key: "k", Value: "hashed"}})
	if _, err := client.Database("db").Collection("r").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: 1}, {Key: "n", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	router := connect(t, c.Routers()[0].URI()+"?directConnection=true")
	lsid := bson.D{{Key: "id", Value: newUUID()}}
	update := bson.D{{Key: "update", Value: "r"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "k", Value: 1}}},
		{Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "k", Value: 2}}}, {Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}}}}},
		{Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: int64(7)}}
	for attempt := range 2 {
		var reply struct {
			N         int32 `bson:"n"`
			NModified int32 `bson:"nModified"`
		}
		if err := router.Database("db").RunCommand(ctx, update).Decode(&reply); err != nil || reply.N != 1 || reply.NModified != 1 {
			t.Fatalf("attempt %d: %+v, %v; want n 1, nModified 1", attempt, reply, err)
		}
	}
	var doc bson.M
	if err := client.Database("db").Collection("r").FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&doc); err != nil || doc["k"] != int32(2) || doc["n"] != int32(1) {
		t.Fatalf("document after a retried move = %v, %v; want k 2, n 1", doc, err)
	}
}
