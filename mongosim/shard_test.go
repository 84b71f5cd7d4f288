package mongosim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	mevent "go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// shardedClient starts a multi-shard deployment and connects the official
// driver to its routers.
func shardedClient(t *testing.T, shards int, co *options.ClientOptions) (*mongo.Client, *Cluster) {
	t.Helper()
	return routedClient(t, Options{Shards: shards, Routers: 2}, co)
}

// shardDirect connects to shard i's primary directly, bypassing the
// routers, to see what landed where.
func shardDirect(t *testing.T, c *Cluster, i int) *mongo.Client {
	t.Helper()
	return connect(t, c.Shards()[i].Primary().URI())
}

func shardCollection(t *testing.T, ctx context.Context, client *mongo.Client, ns string, key bson.D) {
	t.Helper()
	if err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "shardCollection", Value: ns}, {Key: "key", Value: key}}).Err(); err != nil {
		t.Fatalf("shardCollection %s: %v", ns, err)
	}
}

// directCounts counts coll's documents on each shard through the shard's
// own primary.
func directCounts(t *testing.T, ctx context.Context, c *Cluster, db, coll string) []int64 {
	t.Helper()
	var out []int64
	for i := range c.Shards() {
		n, err := shardDirect(t, c, i).Database(db).Collection(coll).CountDocuments(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

func TestShardedLaunchAndListShards(t *testing.T) {
	client, c := shardedClient(t, 3, nil)
	ctx := testCtx(t)
	if got := len(c.Shards()); got != 3 {
		t.Fatalf("Shards() = %d, want 3", got)
	}
	var res struct {
		Shards []struct {
			ID   string `bson:"_id"`
			Host string `bson:"host"`
		} `bson:"shards"`
	}
	if err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "listShards", Value: 1}}).Decode(&res); err != nil {
		t.Fatal(err)
	}
	if len(res.Shards) != 3 {
		t.Fatalf("listShards = %+v", res)
	}
	for i, s := range res.Shards {
		sh := c.Shards()[i]
		want := fmt.Sprintf("shard%d", i)
		if s.ID != want || s.Host != sh.setName+"/"+sh.Members()[0].Addr() {
			t.Errorf("shard %d = %+v, want _id %s host %s/%s", i, s, want, sh.setName, sh.Members()[0].Addr())
		}
	}
	if c.Shards()[1].setName == c.Shards()[0].setName {
		t.Error("shards share a replica-set name")
	}
}

// Unsharded collections live on their database's primary shard, which
// config.databases reports.
func TestShardedUnshardedOnPrimaryShard(t *testing.T) {
	client, c := shardedClient(t, 2, nil)
	ctx := testCtx(t)
	for _, db := range []string{"alpha", "beta"} {
		if _, err := client.Database(db).Collection("c").InsertOne(ctx, bson.D{{Key: "x", Value: db}}); err != nil {
			t.Fatal(err)
		}
	}
	cur, err := client.Database("config").Collection("databases").Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	var dbs []struct {
		ID      string `bson:"_id"`
		Primary string `bson:"primary"`
	}
	if err := cur.All(ctx, &dbs); err != nil {
		t.Fatal(err)
	}
	if len(dbs) != 2 || dbs[0].Primary == dbs[1].Primary {
		t.Fatalf("config.databases = %+v, want two databases on different primaries", dbs)
	}
	for _, d := range dbs {
		var primary int
		fmt.Sscanf(d.Primary, "shard%d", &primary)
		for i := range c.Shards() {
			n, err := shardDirect(t, c, i).Database(d.ID).Collection("c").CountDocuments(ctx, bson.D{})
			if err != nil {
				t.Fatal(err)
			}
			if want := int64(0); i == primary {
				if n != 1 {
					t.Errorf("db %s: primary shard %d holds %d documents, want 1", d.ID, i, n)
				}
			} else if n != want {
				t.Errorf("db %s: shard %d (not primary) holds %d documents", d.ID, i, n)
			}
		}
		// Reads through the router find it, also after a rename (an
		// admin command, run on the database's primary shard).
		if err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "renameCollection", Value: d.ID + ".c"}, {Key: "to", Value: d.ID + ".renamed"}}).Err(); err != nil {
			t.Fatalf("renameCollection in %s: %v", d.ID, err)
		}
		var got bson.M
		if err := client.Database(d.ID).Collection("renamed").FindOne(ctx, bson.D{}).Decode(&got); err != nil || got["x"] != d.ID {
			t.Errorf("find through router in %s = %v, %v", d.ID, got, err)
		}
	}
}

// A hashed shard key spreads documents over the shards; finds targeting
// the key go to one shard, others to all, and sorted finds merge with
// skip and limit applied across the shards, getMore included.
func TestShardedHashedSplitTargetAndMerge(t *testing.T) {
	var mu = make(chan struct{}, 1)
	mu <- struct{}{}
	var started []string
	mon := &mevent.CommandMonitor{Started: func(_ context.Context, e *mevent.CommandStartedEvent) {
		<-mu
		started = append(started, e.CommandName)
		mu <- struct{}{}
	}}
	client, c := shardedClient(t, 3, options.Client().SetMonitor(mon))
	ctx := testCtx(t)
	shardCollection(t, ctx, client, "db.h", bson.D{{Key: "k", Value: "hashed"}})
	coll := client.Database("db").Collection("h")
	var docs []any
	for i := 0; i < 300; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "k", Value: i}, {Key: "v", Value: 300 - i}})
	}
	res, err := coll.InsertMany(ctx, docs)
	if err != nil || len(res.InsertedIDs) != 300 {
		t.Fatalf("InsertMany = %v, %v", res, err)
	}
	counts := directCounts(t, ctx, c, "db", "h")
	var total int64
	for i, n := range counts {
		total += n
		if n == 0 {
			t.Errorf("shard %d holds no documents: %v", i, counts)
		}
	}
	if total != 300 {
		t.Fatalf("shards hold %v documents in all, want 300", counts)
	}
	// Targeted: the document is where its key hashes, on one shard only.
	for _, k := range []int{7, 123, 299} {
		var got bson.M
		if err := coll.FindOne(ctx, bson.D{{Key: "k", Value: k}}).Decode(&got); err != nil || got["v"] != int32(300-k) {
			t.Fatalf("FindOne k=%d = %v, %v", k, got, err)
		}
		holders := 0
		for i := range c.Shards() {
			n, err := shardDirect(t, c, i).Database("db").Collection("h").CountDocuments(ctx, bson.D{{Key: "k", Value: k}})
			if err != nil {
				t.Fatal(err)
			}
			holders += int(n)
		}
		if holders != 1 {
			t.Fatalf("k=%d held by %d shards", k, holders)
		}
	}
	// Broadcast sorted find with skip/limit across shards and getMores.
	cur, err := coll.Find(ctx, bson.D{{Key: "v", Value: bson.D{{Key: "$gt", Value: 10}}}},
		options.Find().SetSort(bson.D{{Key: "v", Value: 1}}).SetSkip(5).SetLimit(200).SetBatchSize(30).
			SetProjection(bson.D{{Key: "v", Value: 1}, {Key: "_id", Value: 0}}))
	if err != nil {
		t.Fatal(err)
	}
	var got []bson.M
	if err := cur.All(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 200 {
		t.Fatalf("sorted find returned %d documents, want 200", len(got))
	}
	for i, d := range got {
		if d["v"] != int32(16+i) || len(d) != 1 {
			t.Fatalf("document %d = %v, want {v: %d}", i, d, 16+i)
		}
	}
	<-mu
	getMores := 0
	for _, n := range started {
		if n == "getMore" {
			getMores++
		}
	}
	mu <- struct{}{}
	if getMores < 6 {
		t.Errorf("%d getMores for 200 documents in batches of 30, want at least 6", getMores)
	}
	n, err := coll.CountDocuments(ctx, bson.D{{Key: "v", Value: bson.D{{Key: "$lte", Value: 100}}}})
	if err != nil || n != 100 {
		t.Errorf("CountDocuments = %d, %v; want 100", n, err)
	}
	if n, err := coll.EstimatedDocumentCount(ctx); err != nil || n != 300 {
		t.Errorf("EstimatedDocumentCount = %d, %v; want 300", n, err)
	}
	var distinct []int32
	if err := coll.Distinct(ctx, "v", bson.D{{Key: "v", Value: bson.D{{Key: "$gt", Value: 295}}}}).Decode(&distinct); err != nil || !slices.Equal(distinct, []int32{296, 297, 298, 299, 300}) {
		t.Errorf("Distinct = %v, %v", distinct, err)
	}
}

// $group runs over every shard's documents: the sums are the whole
// collection's.
func TestShardedAggregateGroupMerge(t *testing.T) {
	client, c := shardedClient(t, 2, nil)
	ctx := testCtx(t)
	shardCollection(t, ctx, client, "db.sales", bson.D{{Key: "_id", Value: "hashed"}})
	coll := client.Database("db").Collection("sales")
	var docs []any
	want := map[string]int32{}
	for i := 0; i < 100; i++ {
		region := []string{"north", "south", "east"}[i%3]
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "region", Value: region}, {Key: "amount", Value: int32(i)}})
		if i >= 10 {
			want[region] += int32(i)
		}
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	if counts := directCounts(t, ctx, c, "db", "sales"); counts[0] == 0 || counts[1] == 0 {
		t.Fatalf("documents not split: %v", counts)
	}
	cur, err := coll.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: "amount", Value: bson.D{{Key: "$gte", Value: 10}}}}}},
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$region"}, {Key: "total", Value: bson.D{{Key: "$sum", Value: "$amount"}}}}}},
		{{Key: "$sort", Value: bson.D{{Key: "total", Value: -1}}}},
		{{Key: "$project", Value: bson.D{{Key: "region", Value: "$_id"}, {Key: "total", Value: 1}, {Key: "_id", Value: 0}}}},
		{{Key: "$limit", Value: 2}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []struct {
		Region string `bson:"region"`
		Total  int32  `bson:"total"`
	}
	if err := cur.All(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Total < got[1].Total || got[0].Total != want[got[0].Region] || got[1].Total != want[got[1].Region] {
		t.Fatalf("aggregate = %+v, want the top two of %v", got, want)
	}
	// $skip with a cursor through getMore.
	cur, err = coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}}, {{Key: "$skip", Value: 10}}},
		options.Aggregate().SetBatchSize(7))
	if err != nil {
		t.Fatal(err)
	}
	var all []bson.M
	if err := cur.All(ctx, &all); err != nil {
		t.Fatal(err)
	}
	if len(all) != 90 || all[0]["_id"] != int32(10) || all[89]["_id"] != int32(99) {
		t.Fatalf("aggregate $sort/$skip = %d documents, first %v", len(all), all[0])
	}
}

// Range keys start as one chunk on the primary shard; split and
// moveChunk place ranges on other shards, moving their documents.
func TestShardedRangeSplitMoveChunk(t *testing.T) {
	client, c := shardedClient(t, 2, nil)
	ctx := testCtx(t)
	admin := client.Database("admin")
	if err := admin.RunCommand(ctx, bson.D{{Key: "enableSharding", Value: "rdb"}, {Key: "primaryShard", Value: "shard0"}}).Err(); err != nil {
		t.Fatal(err)
	}
	shardCollection(t, ctx, client, "rdb.r", bson.D{{Key: "x", Value: 1}})
	coll := client.Database("rdb").Collection("r")
	var docs []any
	for i := 0; i < 20; i++ {
		docs = append(docs, bson.D{{Key: "x", Value: i}})
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	if got := directCounts(t, ctx, c, "rdb", "r"); !slices.Equal(got, []int64{20, 0}) {
		t.Fatalf("before split: %v", got)
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "split", Value: "rdb.r"}, {Key: "middle", Value: bson.D{{Key: "x", Value: 15}}}}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "moveChunk", Value: "rdb.r"}, {Key: "find", Value: bson.D{{Key: "x", Value: 17}}}, {Key: "to", Value: "shard1"}}).Err(); err != nil {
		t.Fatal(err)
	}
	if got := directCounts(t, ctx, c, "rdb", "r"); !slices.Equal(got, []int64{15, 5}) {
		t.Fatalf("after moveChunk: %v, want [15 5]", got)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "x", Value: 100}}); err != nil {
		t.Fatal(err)
	}
	n, err := shardDirect(t, c, 1).Database("rdb").Collection("r").CountDocuments(ctx, bson.D{{Key: "x", Value: 100}})
	if err != nil || n != 1 {
		t.Fatalf("x=100 on shard1: %d, %v", n, err)
	}
	var chunks []bson.M
	cur, err := client.Database("config").Collection("chunks").Find(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cur.All(ctx, &chunks); err != nil || len(chunks) != 2 {
		t.Fatalf("config.chunks = %v, %v", chunks, err)
	}
}

// Writes: multi-document writes without the key reach every shard; one
// without it matches on some shard; writeErrors keep the client's
// indexes; the shard key cannot change; an upsert needs the key.
func TestShardedWritesAndShardKeyErrors(t *testing.T) {
	client, c := shardedClient(t, 3, nil)
	ctx := testCtx(t)
	shardCollection(t, ctx, client, "db.w", bson.D{{Key: "k", Value: "hashed"}})
	coll := client.Database("db").Collection("w")
	// A unique index must start with the shard key (a shard enforces it
	// alone); u is unique per shard only here, through a plain index
	// created on the shards directly.
	_, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "u", Value: 1}}, Options: options.Index().SetUnique(true)})
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 67 {
		t.Fatalf("unique index without the shard key prefix = %v, want CannotCreateIndex (67)", err)
	}
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}, {Key: "u", Value: 1}}, Options: options.Index().SetUnique(true)}); err != nil {
		t.Fatalf("unique index prefixed by the shard key: %v", err)
	}
	for i := range c.Shards() {
		if _, err := shardDirect(t, c, i).Database("db").Collection("w").Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "u", Value: 1}}, Options: options.Index().SetUnique(true)}); err != nil {
			t.Fatal(err)
		}
	}
	var docs []any
	for i := 0; i < 30; i++ {
		docs = append(docs, bson.D{{Key: "k", Value: i}, {Key: "u", Value: i}, {Key: "n", Value: 0}})
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	// Unordered batch with duplicates spread over shards: every error
	// carries its index in the client's batch.
	batch := []any{
		bson.D{{Key: "k", Value: 100}, {Key: "u", Value: 100}},
		bson.D{{Key: "k", Value: 101}, {Key: "u", Value: 101}},
		bson.D{{Key: "k", Value: 5}, {Key: "u", Value: 5}}, // same k, same shard: duplicate u
		bson.D{{Key: "k", Value: 102}, {Key: "u", Value: 102}},
		bson.D{{Key: "k", Value: 9}, {Key: "u", Value: 9}}, // duplicate
	}
	_, err = coll.InsertMany(ctx, batch, options.InsertMany().SetOrdered(false))
	var bwe mongo.BulkWriteException
	if !errors.As(err, &bwe) {
		t.Fatalf("InsertMany with duplicates = %v", err)
	}
	var idx []int
	for _, we := range bwe.WriteErrors {
		if we.Code != 11000 {
			t.Errorf("write error %+v, want a duplicate key", we)
		}
		idx = append(idx, we.Index)
	}
	if !slices.Equal(idx, []int{2, 4}) {
		t.Fatalf("write error indexes %v, want [2 4]", idx)
	}
	// Ordered: the batch stops at the first error, index kept.
	_, err = coll.InsertMany(ctx, []any{
		bson.D{{Key: "k", Value: 200}, {Key: "u", Value: 200}},
		bson.D{{Key: "k", Value: 7}, {Key: "u", Value: 7}},
		bson.D{{Key: "k", Value: 201}, {Key: "u", Value: 201}},
	})
	if !errors.As(err, &bwe) || len(bwe.WriteErrors) != 1 || bwe.WriteErrors[0].Index != 1 {
		t.Fatalf("ordered InsertMany = %v", err)
	}
	if n, _ := coll.CountDocuments(ctx, bson.D{{Key: "k", Value: 201}}); n != 0 {
		t.Fatal("ordered insert went on after its error")
	}
	// Multi update without the shard key: every shard.
	ur, err := coll.UpdateMany(ctx, bson.D{{Key: "u", Value: bson.D{{Key: "$lt", Value: 30}}}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})
	if err != nil || ur.MatchedCount != 30 || ur.ModifiedCount != 30 {
		t.Fatalf("UpdateMany = %+v, %v", ur, err)
	}
	// updateOne / deleteOne without the shard key.
	ur, err = coll.UpdateOne(ctx, bson.D{{Key: "u", Value: 17}}, bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: 10}}}})
	if err != nil || ur.MatchedCount != 1 {
		t.Fatalf("UpdateOne without shard key = %+v, %v", ur, err)
	}
	dr, err := coll.DeleteOne(ctx, bson.D{{Key: "u", Value: bson.D{{Key: "$gte", Value: 20}}}})
	if err != nil || dr.DeletedCount != 1 {
		t.Fatalf("DeleteOne without shard key = %+v, %v", dr, err)
	}
	// Changing the shard key (see shard_keychange_test.go): a multi
	// update fails with InvalidOptions.
	_, err = coll.UpdateMany(ctx, bson.D{}, bson.D{{Key: "$inc", Value: bson.D{{Key: "k", Value: 1}}}})
	var we mongo.WriteException
	if !errors.As(err, &we) || we.WriteErrors[0].Code != 72 {
		t.Fatalf("multi update of the shard key = %v, want InvalidOptions (72)", err)
	}
	// Setting the key to its own value is fine.
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "k", Value: 3}}, bson.D{{Key: "$set", Value: bson.D{{Key: "k", Value: 3}, {Key: "n", Value: 5}}}}); err != nil {
		t.Fatalf("$set of the same key value: %v", err)
	}
	// Upsert without the full shard key.
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "u", Value: 999}}, bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: 1}}}}, options.UpdateOne().SetUpsert(true))
	if !(errors.As(err, &we) && len(we.WriteErrors) == 1 && we.WriteErrors[0].Code == 61) && !(errors.As(err, &ce) && ce.Code == 61) {
		t.Fatalf("upsert without shard key = %v, want ShardKeyNotFound (61)", err)
	}
	// Upsert with it lands on the key's shard.
	if ur, err := coll.UpdateOne(ctx, bson.D{{Key: "k", Value: 999}}, bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: 1}}}}, options.UpdateOne().SetUpsert(true)); err != nil || ur.UpsertedCount != 1 {
		t.Fatalf("upsert with shard key = %+v, %v", ur, err)
	}
	// An array shard key value cannot be routed.
	_, err = coll.InsertOne(ctx, bson.D{{Key: "k", Value: bson.A{1, 2}}})
	if !errors.As(err, &we) || we.WriteErrors[0].Code != 61 {
		t.Fatalf("array shard key = %v, want ShardKeyNotFound (61)", err)
	}
	// findAndModify without the key, sorted across shards.
	var fam bson.M
	if err := coll.FindOneAndUpdate(ctx, bson.D{{Key: "u", Value: bson.D{{Key: "$lt", Value: 20}}}}, bson.D{{Key: "$set", Value: bson.D{{Key: "picked", Value: true}}}},
		options.FindOneAndUpdate().SetSort(bson.D{{Key: "u", Value: -1}}).SetReturnDocument(options.After)).Decode(&fam); err != nil || fam["u"] != int32(19) {
		t.Fatalf("FindOneAndUpdate sorted = %v, %v", fam, err)
	}
	// Multi delete without key: every shard.
	dr, err = coll.DeleteMany(ctx, bson.D{{Key: "n", Value: bson.D{{Key: "$gte", Value: 1}}}})
	if err != nil || dr.DeletedCount < 29 {
		t.Fatalf("DeleteMany = %+v, %v", dr, err)
	}
	// A replacement upsert without the key in its filter is targeted by
	// the replacement's own full shard key.
	if ur, err := coll.ReplaceOne(ctx, bson.D{{Key: "u", Value: 5000}}, bson.D{{Key: "k", Value: 5000}, {Key: "u", Value: 5000}}, options.Replace().SetUpsert(true)); err != nil || ur.UpsertedCount != 1 {
		t.Fatalf("replacement upsert = %+v, %v", ur, err)
	}
	if n, err := coll.CountDocuments(ctx, bson.D{{Key: "k", Value: 5000}}); err != nil || n != 1 {
		t.Fatalf("replacement upsert landed where a targeted read cannot find it: %d, %v", n, err)
	}
}

// Retryable writes through the routers: a shard's step-down error is
// retried inside the router; a shard's retryable writeConcernError reaches
// the driver, whose retry replays on every shard instead of inserting
// twice.
func TestShardedRetryableWrite(t *testing.T) {
	var fams atomic.Int32
	mon := &mevent.CommandMonitor{Started: func(_ context.Context, e *mevent.CommandStartedEvent) {
		if e.CommandName == "findAndModify" {
			fams.Add(1)
		}
	}}
	client, c := shardedClient(t, 2, options.Client().SetMonitor(mon))
	ctx := testCtx(t)
	shardCollection(t, ctx, client, "db.rw", bson.D{{Key: "k", Value: "hashed"}})
	coll := client.Database("db").Collection("rw")
	shard1 := c.Shards()[1]
	if err := shard1.SetFailPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"insert"}}, {Key: "errorCode", Value: 189}}}}); err != nil {
		t.Fatal(err)
	}
	var docs []any
	for i := 0; i < 40; i++ {
		docs = append(docs, bson.D{{Key: "k", Value: i}})
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	if got := shard1.Stats().FailPointsFired; got != 1 {
		t.Fatalf("shard 1 fail point fired %d times, want 1", got)
	}
	if err := shard1.SetFailPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"insert"}},
			{Key: "writeConcernError", Value: bson.D{{Key: "code", Value: 6}, {Key: "errmsg", Value: "host unreachable"}}}}}}); err != nil {
		t.Fatal(err)
	}
	docs = docs[:0]
	for i := 100; i < 140; i++ {
		docs = append(docs, bson.D{{Key: "k", Value: i}})
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != 80 {
		t.Fatalf("count = %d, %v; want 80", n, err)
	}
	counts := directCounts(t, ctx, c, "db", "rw")
	if counts[0] == 0 || counts[1] == 0 {
		t.Fatalf("documents not split: %v", counts)
	}
	for i, sh := range c.Shards() {
		if sh.Stats().Replayed == 0 {
			t.Errorf("shard %d replayed nothing: the driver's retry ran the insert again", i)
		}
	}
	// A sorted findOneAndDelete without the shard key, retried by the
	// driver after the shard's writeConcernError: the retry goes to the
	// same shard and document, which replays; one document is deleted.
	// The next document in sort order is on the other shard, where a
	// retry choosing afresh would delete it.
	shard0 := shardDirect(t, c, 0).Database("db").Collection("rw")
	on0 := func(k int) bool {
		n, err := shard0.CountDocuments(ctx, bson.D{{Key: "k", Value: k}})
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	next := 101
	for on0(next) == on0(100) {
		next++
	}
	if _, err := coll.DeleteMany(ctx, bson.D{{Key: "k", Value: bson.D{{Key: "$gt", Value: 100}, {Key: "$lt", Value: next}}}}); err != nil {
		t.Fatal(err)
	}
	left, err := coll.CountDocuments(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range c.Shards() {
		if err := sh.SetFailPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
			{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"findAndModify"}},
				{Key: "writeConcernError", Value: bson.D{{Key: "code", Value: 91}, {Key: "errmsg", Value: "Replication is being shut down"}}}}}}); err != nil {
			t.Fatal(err)
		}
	}
	var deleted bson.M
	if err := coll.FindOneAndDelete(ctx, bson.D{{Key: "k", Value: bson.D{{Key: "$gte", Value: 100}}}}, options.FindOneAndDelete().SetSort(bson.D{{Key: "k", Value: 1}})).Decode(&deleted); err != nil || deleted["k"] != int32(100) {
		t.Fatalf("FindOneAndDelete = %v, %v; want k 100", deleted, err)
	}
	if got := fams.Load(); got != 2 {
		t.Fatalf("findAndModify sent %d times, want 2 (the driver's retry)", got)
	}
	if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != left-1 {
		t.Fatalf("after the retried findOneAndDelete: %d documents, %v; want %d", n, err, left-1)
	}
}

// A transaction that stays on one shard commits there, through either
// router; one that would span shards fails loudly, as do other things
// mongosim cannot do on several shards.
func TestShardedTransactionsAndUnsupported(t *testing.T) {
	client, c := shardedClient(t, 2, nil)
	ctx := testCtx(t)
	shardCollection(t, ctx, client, "db.u", bson.D{{Key: "k", Value: "hashed"}})
	coll := client.Database("db").Collection("u")
	sess, err := client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	_, err = sess.WithTransaction(ctx, func(ctx context.Context) (any, error) {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "k", Value: 1}}); err != nil {
			return nil, err
		}
		return coll.UpdateOne(ctx, bson.D{{Key: "k", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}})
	})
	if err != nil {
		t.Fatalf("one-shard transaction: %v", err)
	}
	if n, err := coll.CountDocuments(ctx, bson.D{{Key: "k", Value: 1}, {Key: "x", Value: 1}}); err != nil || n != 1 {
		t.Fatalf("committed document: %d, %v", n, err)
	}
	var docs []any
	for i := 10; i < 30; i++ {
		docs = append(docs, bson.D{{Key: "k", Value: i}})
	}
	_, err = sess.WithTransaction(ctx, func(ctx context.Context) (any, error) {
		return coll.InsertMany(ctx, docs)
	})
	if err != nil {
		t.Fatalf("transaction spanning shards: %v", err)
	}
	if counts := directCounts(t, ctx, c, "db", "u"); counts[0] == 0 || counts[1] == 0 || counts[0]+counts[1] != 21 {
		t.Fatalf("documents per shard after the two-shard transaction = %v, want 21 on both shards", counts)
	}
	// $out from a sharded collection writes the merged result to an
	// unsharded one (into a sharded one: shard_merge_test.go).
	if _, err := coll.InsertMany(ctx, []any{bson.D{{Key: "k", Value: 2}, {Key: "g", Value: "a"}}, bson.D{{Key: "k", Value: 3}, {Key: "g", Value: "a"}}, bson.D{{Key: "k", Value: 4}, {Key: "g", Value: "b"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "g", Value: bson.D{{Key: "$exists", Value: true}}}}}},
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$g"}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}}, {{Key: "$out", Value: "summary"}}}); err != nil {
		t.Fatalf("$out: %v", err)
	}
	var summary []bson.M
	cur, err := client.Database("db").Collection("summary").Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	if err := cur.All(ctx, &summary); err != nil || len(summary) != 2 || summary[0]["n"] != int32(2) || summary[1]["n"] != int32(1) {
		t.Fatalf("$out result = %v, %v", summary, err)
	}
	// An unsharded collection's pipeline reading a sharded one runs on
	// the router: $lookup sees every shard's documents.
	cur, err = client.Database("db").Collection("summary").Aggregate(ctx, mongo.Pipeline{
		{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "u"}, {Key: "localField", Value: "_id"}, {Key: "foreignField", Value: "g"}, {Key: "as", Value: "docs"}}}},
		{{Key: "$project", Value: bson.D{{Key: "n", Value: bson.D{{Key: "$size", Value: "$docs"}}}}}},
		{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}}})
	if err != nil {
		t.Fatal(err)
	}
	summary = nil
	if err := cur.All(ctx, &summary); err != nil || len(summary) != 2 || summary[0]["n"] != int32(2) || summary[1]["n"] != int32(1) {
		t.Fatalf("$lookup into a sharded collection = %v, %v", summary, err)
	}
}

// A read whose filter fixes the shard key goes to that key's shard only;
// other reads go to every shard. Fail points on the other shards prove it.
func TestShardedTargetedVersusBroadcast(t *testing.T) {
	client, c := shardedClient(t, 3, nil)
	ctx := testCtx(t)
	shardCollection(t, ctx, client, "db.t", bson.D{{Key: "k", Value: 1}, {Key: "j", Value: "hashed"}})
	shardCollection(t, ctx, client, "db.h", bson.D{{Key: "k", Value: "hashed"}})
	coll := client.Database("db").Collection("h")
	var docs []any
	for i := 0; i < 30; i++ {
		docs = append(docs, bson.D{{Key: "k", Value: i}})
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	holder := -1
	for i := range c.Shards() {
		n, err := shardDirect(t, c, i).Database("db").Collection("h").CountDocuments(ctx, bson.D{{Key: "k", Value: 7}})
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			holder = i
		}
	}
	if holder < 0 {
		t.Fatal("k=7 is on no shard")
	}
	fail := func(sh *Cluster, mode any) {
		t.Helper()
		if err := sh.SetFailPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: mode},
			{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"find", "aggregate", "count", "distinct", "update", "delete"}}, {Key: "errorCode", Value: 2}}}}); err != nil {
			t.Fatal(err)
		}
	}
	for i, sh := range c.Shards() {
		if i != holder {
			fail(sh, "alwaysOn")
		}
	}
	var got bson.M
	if err := coll.FindOne(ctx, bson.D{{Key: "k", Value: 7}}).Decode(&got); err != nil {
		t.Fatalf("targeted find touched another shard: %v", err)
	}
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "k", Value: bson.D{{Key: "$eq", Value: 7}}}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}); err != nil {
		t.Fatalf("targeted update touched another shard: %v", err)
	}
	if n, err := coll.CountDocuments(ctx, bson.D{{Key: "$and", Value: bson.A{bson.D{{Key: "k", Value: 7}}, bson.D{{Key: "x", Value: 1}}}}}); err != nil || n != 1 {
		t.Fatalf("targeted count = %d, %v", n, err)
	}
	var ce mongo.CommandError
	if err := coll.FindOne(ctx, bson.D{{Key: "k", Value: bson.D{{Key: "$gt", Value: 7}}}}).Err(); !errors.As(err, &ce) || ce.Code != 2 {
		t.Fatalf("broadcast find = %v, want the other shards' fail point", err)
	}
	for i, sh := range c.Shards() {
		if i != holder {
			fail(sh, "off")
		}
	}
	if n, err := coll.CountDocuments(ctx, bson.D{{Key: "k", Value: bson.D{{Key: "$gt", Value: 7}}}}); err != nil || n != 22 {
		t.Fatalf("broadcast count = %d, %v; want 22", n, err)
	}
	// A compound key needs every field to target.
	if err := client.Database("db").Collection("t").FindOne(ctx, bson.D{{Key: "k", Value: 1}}).Err(); !errors.Is(err, mongo.ErrNoDocuments) {
		t.Fatalf("find on a key prefix = %v", err)
	}
}

// Cursors through the router: a merged cursor's getMore works only on the
// router that opened it, killCursors ends it, and a cursor of an
// unsharded collection is relayed to its shard.
func TestShardedCursorsGetMoreAndKill(t *testing.T) {
	client, c := shardedClient(t, 2, nil)
	ctx := testCtx(t)
	shardCollection(t, ctx, client, "db.g", bson.D{{Key: "_id", Value: "hashed"}})
	var docs []any
	for i := 0; i < 50; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}})
	}
	for _, name := range []string{"g", "plain"} {
		if _, err := client.Database("db").Collection(name).InsertMany(ctx, docs); err != nil {
			t.Fatal(err)
		}
	}
	r0 := connect(t, c.Routers()[0].URI()+"?directConnection=true")
	r1 := connect(t, c.Routers()[1].URI()+"?directConnection=true")
	for _, name := range []string{"g", "plain"} {
		var first struct {
			Cursor struct {
				ID    int64    `bson:"id"`
				First []bson.M `bson:"firstBatch"`
			} `bson:"cursor"`
		}
		db0 := r0.Database("db")
		if err := db0.RunCommand(ctx, bson.D{{Key: "find", Value: name}, {Key: "sort", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "batchSize", Value: 10}}).Decode(&first); err != nil {
			t.Fatal(err)
		}
		if first.Cursor.ID == 0 || len(first.Cursor.First) != 10 || first.Cursor.First[9]["_id"] != int32(9) {
			t.Fatalf("%s: first batch = %+v", name, first.Cursor)
		}
		gm := bson.D{{Key: "getMore", Value: first.Cursor.ID}, {Key: "collection", Value: name}, {Key: "batchSize", Value: 15}}
		// Without a deadline: the driver would send it as maxTimeMS, which
		// mongod refuses on a getMore of a cursor that is not awaitData.
		ctx := context.WithoutCancel(ctx)
		var ce mongo.CommandError
		if err := r1.Database("db").RunCommand(ctx, gm).Err(); !errors.As(err, &ce) || ce.Code != 43 {
			t.Fatalf("%s: getMore on the other router = %v, want CursorNotFound", name, err)
		}
		var next struct {
			Cursor struct {
				ID   int64    `bson:"id"`
				Next []bson.M `bson:"nextBatch"`
			} `bson:"cursor"`
		}
		if err := db0.RunCommand(ctx, gm).Decode(&next); err != nil || len(next.Cursor.Next) != 15 || next.Cursor.Next[0]["_id"] != int32(10) {
			t.Fatalf("%s: getMore = %+v, %v", name, next.Cursor, err)
		}
		var killed struct {
			Killed []int64 `bson:"cursorsKilled"`
		}
		if err := db0.RunCommand(ctx, bson.D{{Key: "killCursors", Value: name}, {Key: "cursors", Value: bson.A{first.Cursor.ID}}}).Decode(&killed); err != nil || len(killed.Killed) != 1 {
			t.Fatalf("%s: killCursors = %+v, %v", name, killed, err)
		}
		if err := db0.RunCommand(ctx, gm).Err(); !errors.As(err, &ce) || ce.Code != 43 {
			t.Fatalf("%s: getMore after killCursors = %v, want CursorNotFound", name, err)
		}
	}
}

// The client-level bulkWrite across a sharded and an unsharded namespace:
// each op goes to its shard, and the counts cover all of them.
func TestShardedClientBulkWrite(t *testing.T) {
	client, c := shardedClient(t, 2, nil)
	ctx := testCtx(t)
	shardCollection(t, ctx, client, "db.cb", bson.D{{Key: "k", Value: "hashed"}})
	var writes []mongo.ClientBulkWrite
	for i := 0; i < 20; i++ {
		writes = append(writes, mongo.ClientBulkWrite{Database: "db", Collection: "cb", Model: &mongo.ClientInsertOneModel{Document: bson.D{{Key: "k", Value: i}}}})
	}
	writes = append(writes,
		mongo.ClientBulkWrite{Database: "other", Collection: "plain", Model: &mongo.ClientInsertOneModel{Document: bson.D{{Key: "x", Value: 1}}}},
		mongo.ClientBulkWrite{Database: "db", Collection: "cb", Model: &mongo.ClientUpdateManyModel{Filter: bson.D{}, Update: bson.D{{Key: "$set", Value: bson.D{{Key: "seen", Value: true}}}}}},
		mongo.ClientBulkWrite{Database: "db", Collection: "cb", Model: &mongo.ClientDeleteOneModel{Filter: bson.D{{Key: "k", Value: bson.D{{Key: "$gte", Value: 15}}}}}},
	)
	res, err := client.BulkWrite(ctx, writes)
	if err != nil {
		t.Fatal(err)
	}
	if res.InsertedCount != 21 || res.MatchedCount != 20 || res.ModifiedCount != 20 || res.DeletedCount != 1 {
		t.Fatalf("BulkWrite = %+v", res)
	}
	if counts := directCounts(t, ctx, c, "db", "cb"); counts[0] == 0 || counts[1] == 0 || counts[0]+counts[1] != 19 {
		t.Fatalf("documents per shard: %v, want 19 over both", counts)
	}
	// An array shard key value fails that op only (unordered), with its
	// index in the client's batch.
	_, err = client.BulkWrite(ctx, []mongo.ClientBulkWrite{
		{Database: "db", Collection: "cb", Model: &mongo.ClientInsertOneModel{Document: bson.D{{Key: "k", Value: 100}}}},
		{Database: "db", Collection: "cb", Model: &mongo.ClientInsertOneModel{Document: bson.D{{Key: "k", Value: bson.A{1}}}}},
		{Database: "db", Collection: "cb", Model: &mongo.ClientInsertOneModel{Document: bson.D{{Key: "k", Value: 101}}}},
	}, options.ClientBulkWrite().SetOrdered(false))
	var cbe mongo.ClientBulkWriteException
	if !errors.As(err, &cbe) || len(cbe.WriteErrors) != 1 || cbe.WriteErrors[1].Code != 61 {
		t.Fatalf("BulkWrite with an array key = %v", err)
	}
	if n, _ := client.Database("db").Collection("cb").CountDocuments(ctx, bson.D{{Key: "k", Value: bson.D{{Key: "$in", Value: bson.A{100, 101}}}}}); n != 2 {
		t.Fatalf("the other inserts: %d, want 2", n)
	}
}

// A transaction on shard 1 returns that shard as its recovery token; a
// commit sent with it to another router recovers from that shard (which
// has no commit decision: the transaction is aborted there).
func TestShardedTransactionRecoveryShard(t *testing.T) {
	_, c := shardedClient(t, 2, nil)
	ctx := testCtx(t)
	r0 := connect(t, c.Routers()[0].URI()+"?directConnection=true")
	r1 := connect(t, c.Routers()[1].URI()+"?directConnection=true")
	admin0 := r0.Database("admin")
	if err := admin0.RunCommand(ctx, bson.D{{Key: "enableSharding", Value: "tdb"}, {Key: "primaryShard", Value: "shard1"}}).Err(); err != nil {
		t.Fatal(err)
	}
	lsid := bson.D{{Key: "id", Value: newUUID()}}
	var ins bson.M
	if err := r0.Database("tdb").RunCommand(ctx, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "x", Value: 1}}}},
		{Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: int64(1)}, {Key: "startTransaction", Value: true}, {Key: "autocommit", Value: false}}).Decode(&ins); err != nil {
		t.Fatal(err)
	}
	token, _ := ins["recoveryToken"].(bson.D)
	if id, _ := lookupD(token, "recoveryShardId"); id != c.Shards()[1].setName {
		t.Fatalf("recoveryToken = %v, want shard 1's set %s", ins["recoveryToken"], c.Shards()[1].setName)
	}
	err := r1.Database("admin").RunCommand(ctx, bson.D{{Key: "commitTransaction", Value: 1}, {Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: int64(1)},
		{Key: "autocommit", Value: false}, {Key: "recoveryToken", Value: token}}).Err()
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 251 {
		t.Fatalf("commit on another router = %v, want NoSuchTransaction", err)
	}
	// The recovery aborted it on shard 1: the first router cannot commit.
	err = admin0.RunCommand(ctx, bson.D{{Key: "commitTransaction", Value: 1}, {Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: int64(1)}, {Key: "autocommit", Value: false}}).Err()
	if !errors.As(err, &ce) || ce.Code != 251 {
		t.Fatalf("commit after the recovery aborted it = %v, want NoSuchTransaction", err)
	}
	if n, err := shardDirect(t, c, 1).Database("tdb").Collection("c").CountDocuments(ctx, bson.D{}); err != nil || n != 0 {
		t.Fatalf("shard 1 holds %d documents (%v), want 0", n, err)
	}
}

// A range shard key on _id uses the _id index every collection has, as on
// mongod: shardCollection, split and moveChunk work, and each shard holds
// its range.
func TestShardCollectionOnIDRange(t *testing.T) {
	client, c := shardedClient(t, 2, nil)
	ctx := testCtx(t)
	coll := client.Database("db").Collection("ids")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil { // an existing collection
		t.Fatal(err)
	}
	shardCollection(t, ctx, client, "db.ids", bson.D{{Key: "_id", Value: 1}})
	admin := client.Database("admin")
	if err := admin.RunCommand(ctx, bson.D{{Key: "split", Value: "db.ids"}, {Key: "middle", Value: bson.D{{Key: "_id", Value: 10}}}}).Err(); err != nil {
		t.Fatal(err)
	}
	var primary struct {
		Primary string `bson:"primary"`
	}
	if err := client.Database("config").Collection("databases").FindOne(ctx, bson.D{{Key: "_id", Value: "db"}}).Decode(&primary); err != nil {
		t.Fatal(err)
	}
	to := "shard1"
	if primary.Primary == to {
		to = "shard0"
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "moveChunk", Value: "db.ids"}, {Key: "find", Value: bson.D{{Key: "_id", Value: 10}}}, {Key: "to", Value: to}}).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "_id", Value: 11}}, bson.D{{Key: "_id", Value: 12}}}); err != nil {
		t.Fatal(err)
	}
	counts := directCounts(t, ctx, c, "db", "ids")
	if slices.Max(counts) != 2 || slices.Min(counts) != 2 {
		t.Fatalf("documents per shard %v, want 2 and 2", counts)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 11}}); !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("a duplicate _id in the moved range: %v", err)
	}
}
