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

// skewedClock is a clock a test moves forward: real time plus an offset.
type skewedClock struct{ offset atomic.Int64 }

func (c *skewedClock) now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *skewedClock) advance(d time.Duration) { c.offset.Add(int64(d)) }

func ttlClient(t *testing.T, o Options) (*mongo.Client, *Cluster) {
	t.Helper()
	c := StartWithOptions(t, o)
	client, err := mongo.Connect(options.Client().ApplyURI(c.URI()).SetHeartbeatInterval(500 * time.Millisecond))
	sdNoErr(t, err)
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	return client, c
}

func TestTTLExpiresOnTheDeploymentClock(t *testing.T) {
	clock := &skewedClock{}
	client, sim := ttlClient(t, Options{Now: clock.now, TTLMonitorInterval: -1})
	ctx := sdCtx(t)
	coll := client.Database("ttl").Collection("sessions")
	name, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "at", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(3600)})
	sdNoErr(t, err)

	now := clock.now()
	_, err = coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: "old"}, {Key: "at", Value: now.Add(-2 * time.Hour)}},
		bson.D{{Key: "_id", Value: "fresh"}, {Key: "at", Value: now}},
		bson.D{{Key: "_id", Value: "array"}, {Key: "at", Value: bson.A{now.Add(90 * time.Minute), now.Add(30 * time.Minute)}}},
		bson.D{{Key: "_id", Value: "notADate"}, {Key: "at", Value: "yesterday"}},
		bson.D{{Key: "_id", Value: "missing"}},
	})
	sdNoErr(t, err)
	ids := func() []string {
		t.Helper()
		cur, err := coll.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
		sdNoErr(t, err)
		var docs []struct {
			ID string `bson:"_id"`
		}
		sdNoErr(t, cur.All(ctx, &docs))
		out := make([]string, len(docs))
		for i, d := range docs {
			out[i] = d.ID
		}
		return out
	}
	// A change stream sees the TTL deletes as deletes.
	cs, err := coll.Watch(ctx, mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "operationType", Value: "delete"}}}}})
	sdNoErr(t, err)
	defer cs.Close(ctx)

	if n := sim.ExpireTTL(ctx); n != 1 {
		t.Fatalf("first pass deleted %d, want 1 (old)", n)
	}
	if got := ids(); len(got) != 4 || got[0] != "array" {
		t.Fatalf("after first pass: %v", got)
	}
	// 45 minutes later the array's earliest date (now+30m) is 15 minutes
	// old: not expired. At 2 hours it and fresh are.
	clock.advance(45 * time.Minute)
	if n := sim.ExpireTTL(ctx); n != 0 {
		t.Fatalf("early pass deleted %d", n)
	}
	clock.advance(75 * time.Minute)
	if n := sim.ExpireTTL(ctx); n != 2 {
		t.Fatalf("second pass deleted %d, want 2", n)
	}
	if got := ids(); len(got) != 2 || got[0] != "missing" || got[1] != "notADate" {
		t.Fatalf("documents without a date must stay: %v", got)
	}
	var status bson.M
	sdNoErr(t, client.Database("admin").RunCommand(ctx, bson.D{{Key: "serverStatus", Value: 1}}).Decode(&status))
	if ttl := dm(dm(status["metrics"])["ttl"]); ttl["passes"] != int64(3) || ttl["deletedDocuments"] != int64(3) {
		t.Fatalf("serverStatus metrics.ttl = %v", ttl)
	}
	var deleted []any
	for len(deleted) < 3 && cs.Next(ctx) {
		deleted = append(deleted, cs.Current.Lookup("documentKey", "_id").StringValue())
	}
	sdNoErr(t, cs.Err())
	if len(deleted) != 3 || deleted[0] != "old" {
		t.Fatalf("change stream deletes = %v", deleted)
	}

	// listIndexes shows the TTL; collMod changes it.
	specs, err := coll.Indexes().ListSpecifications(ctx)
	sdNoErr(t, err)
	if specs[1].ExpireAfterSeconds == nil || *specs[1].ExpireAfterSeconds != 3600 {
		t.Fatalf("index specs = %+v", specs[1])
	}
	var reply bson.M
	sdNoErr(t, coll.Database().RunCommand(ctx, bson.D{{Key: "collMod", Value: "sessions"},
		{Key: "index", Value: bson.D{{Key: "name", Value: name}, {Key: "expireAfterSeconds", Value: int32(60)}}}}).Decode(&reply))
	if reply["expireAfterSeconds_old"] != int32(3600) || reply["expireAfterSeconds_new"] != int32(60) {
		t.Fatalf("collMod reply = %v", reply)
	}
	_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "minute"}, {Key: "at", Value: clock.now()}})
	sdNoErr(t, err)
	clock.advance(61 * time.Second)
	if n := sim.ExpireTTL(ctx); n != 1 {
		t.Fatalf("pass after collMod deleted %d, want 1", n)
	}
}

func TestTTLMonitorRunsPeriodically(t *testing.T) {
	clock := &skewedClock{}
	client, _ := ttlClient(t, Options{Now: clock.now, TTLMonitorInterval: 10 * time.Millisecond})
	ctx := sdCtx(t)
	coll := client.Database("ttl").Collection("events")
	_, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "meta.at", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(10)})
	sdNoErr(t, err)
	_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "meta", Value: bson.D{{Key: "at", Value: clock.now()}}}})
	sdNoErr(t, err)
	clock.advance(11 * time.Second)
	// Wait for the monitor (not a fixed sleep): poll until it has run.
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := coll.CountDocuments(ctx, bson.D{})
		sdNoErr(t, err)
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the TTL monitor did not delete the expired document")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestTTLIndexErrors(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("ttl")
	coll := db.Collection("bad")
	create := func(keys bson.D, ttl any) error {
		return db.RunCommand(ctx, bson.D{{Key: "createIndexes", Value: "bad"}, {Key: "indexes", Value: bson.A{
			bson.D{{Key: "key", Value: keys}, {Key: "name", Value: "i"}, {Key: "expireAfterSeconds", Value: ttl}},
		}}}).Err()
	}
	cases := []struct {
		name string
		keys bson.D
		ttl  any
		code int
	}{
		{"compound", bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 1}}, 10, 67},
		{"_id", bson.D{{Key: "_id", Value: 1}}, 10, 197},
		{"negative", bson.D{{Key: "a", Value: 1}}, -1, 67},
		{"string", bson.D{{Key: "a", Value: 1}}, "10", 67},
		{"too large", bson.D{{Key: "a", Value: 1}}, int64(1) << 40, 67},
	}
	for _, tc := range cases {
		if err := create(tc.keys, tc.ttl); cmdErrCode(err) != tc.code {
			t.Errorf("%s: %v, want code %d", tc.name, err, tc.code)
		}
	}
	sdNoErr(t, db.CreateCollection(ctx, "capped", options.CreateCollection().SetCapped(true).SetSizeInBytes(4096)))
	_, err := db.Collection("capped").Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "at", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(5)})
	if cmdErrCode(err) != 67 {
		t.Errorf("TTL on a capped collection: %v", err)
	}
	// collMod errors.
	_, err = coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 1}}})
	sdNoErr(t, err)
	collMod := func(index bson.D) error {
		return db.RunCommand(ctx, bson.D{{Key: "collMod", Value: "bad"}, {Key: "index", Value: index}}).Err()
	}
	if err := collMod(bson.D{{Key: "name", Value: "nope"}, {Key: "expireAfterSeconds", Value: 5}}); cmdErrCode(err) != 27 {
		t.Errorf("missing index: %v", err)
	}
	if err := collMod(bson.D{{Key: "keyPattern", Value: bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 1}}}, {Key: "expireAfterSeconds", Value: 5}}); cmdErrCode(err) != 72 {
		t.Errorf("compound TTL via collMod: %v", err)
	}
	if err := collMod(bson.D{{Key: "name", Value: "a_1_b_1"}}); cmdErrCode(err) != 72 {
		t.Errorf("nothing to change: %v", err)
	}
	var reply bson.M
	sdNoErr(t, db.RunCommand(ctx, bson.D{{Key: "collMod", Value: "bad"}, {Key: "index", Value: bson.D{{Key: "name", Value: "a_1_b_1"}, {Key: "hidden", Value: true}}}}).Decode(&reply))
	if reply["hidden_old"] != false || reply["hidden_new"] != true {
		t.Fatalf("hidden reply = %v", reply)
	}
	cur, err := coll.Indexes().List(ctx)
	sdNoErr(t, err)
	var docs []bson.M
	sdNoErr(t, cur.All(ctx, &docs))
	if docs[1]["hidden"] != true {
		t.Fatalf("listIndexes after hiding = %v", docs[1])
	}
	// A text index cannot be a TTL index.
	_, err = coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "t", Value: "text"}}, Options: options.Index().SetExpireAfterSeconds(10)})
	if cmdErrCode(err) != 238 {
		t.Errorf("TTL text index: %v", err)
	}
}

func TestTTLTimeSeriesAndClusteredCollections(t *testing.T) {
	clock := &skewedClock{}
	client, sim := ttlClient(t, Options{Now: clock.now, TTLMonitorInterval: -1})
	ctx := sdCtx(t)
	db := client.Database("ttl")
	sdNoErr(t, db.CreateCollection(ctx, "metrics", options.CreateCollection().
		SetTimeSeriesOptions(options.TimeSeries().SetTimeField("ts")).SetExpireAfterSeconds(60)))
	sdNoErr(t, db.CreateCollection(ctx, "clustered", options.CreateCollection().
		SetClusteredIndex(bson.D{{Key: "key", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "unique", Value: true}}).SetExpireAfterSeconds(60)))
	now := clock.now()
	_, err := db.Collection("metrics").InsertMany(ctx, []any{
		bson.D{{Key: "ts", Value: now.Add(-2 * time.Minute)}, {Key: "v", Value: 1}},
		bson.D{{Key: "ts", Value: now}, {Key: "v", Value: 2}},
	})
	sdNoErr(t, err)
	_, err = db.Collection("clustered").InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: now.Add(-2 * time.Minute)}},
		bson.D{{Key: "_id", Value: now}},
		bson.D{{Key: "_id", Value: "not a date"}},
	})
	sdNoErr(t, err)
	if n := sim.ExpireTTL(ctx); n != 2 {
		t.Fatalf("deleted %d, want 2", n)
	}
	// With expiry turned off by collMod nothing more goes.
	sdNoErr(t, db.RunCommand(ctx, bson.D{{Key: "collMod", Value: "metrics"}, {Key: "expireAfterSeconds", Value: "off"}}).Err())
	clock.advance(time.Hour)
	if n := sim.ExpireTTL(ctx); n != 1 {
		t.Fatalf("deleted %d after collMod off, want 1 (clustered)", n)
	}
	for coll, want := range map[string]int64{"metrics": 1, "clustered": 1} {
		n, err := db.Collection(coll).CountDocuments(ctx, bson.D{})
		sdNoErr(t, err)
		if n != want {
			t.Fatalf("%s has %d documents, want %d", coll, n, want)
		}
	}
}

func TestTTLOnEveryShard(t *testing.T) {
	clock := &skewedClock{}
	client, sim := routedClient(t, Options{Shards: 2, Routers: 1, Now: clock.now, TTLMonitorInterval: -1}, options.Client())
	ctx := sdCtx(t)
	shardCollection(t, ctx, client, "ttl.s", bson.D{{Key: "k", Value: "hashed"}})
	coll := client.Database("ttl").Collection("s")
	_, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "at", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(60)})
	sdNoErr(t, err)
	docs := make([]any, 20)
	for i := range docs {
		docs[i] = bson.D{{Key: "k", Value: i}, {Key: "at", Value: clock.now()}}
	}
	_, err = coll.InsertMany(ctx, docs)
	sdNoErr(t, err)
	clock.advance(2 * time.Minute)
	if n := sim.ExpireTTL(ctx); n != 20 {
		t.Fatalf("deleted %d across the shards, want 20", n)
	}
	n, err := coll.CountDocuments(ctx, bson.D{})
	sdNoErr(t, err)
	if n != 0 {
		t.Fatalf("%d documents left", n)
	}
}
