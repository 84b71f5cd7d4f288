package sturdy_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/blackpipe"
	"github.com/sturdy-go/sturdy/internal/fuzzdoc"
	"github.com/sturdy-go/sturdy/once"
	"github.com/sturdy-go/sturdy/optimistic"
)

// FuzzClientReplies runs one client operation against a blackpipe server
// that answers every command but the handshake's with a fuzzed reply: one
// of the seed replies below (write results, write and write-concern
// errors, cursors, retryable and overload errors, findAndModify, count,
// distinct, client bulkWrite, cluster times) with one value of a fuzzed
// type set at a fuzzed dotted path. Whatever the server says, the client
// (and the once and optimistic patterns over it) must return, with a
// result or an error, and never panic; the fuzzing engine reports a panic
// as a failure. The package's goleak check covers what a fuzzed reply
// might leave running.
func FuzzClientReplies(f *testing.F) {
	replies := fuzzReplySeeds()
	ops := fuzzClientOps()
	for i := range replies {
		for j := range ops {
			if (i+j)%3 == 0 { // every reply and every operation, not every pair
				f.Add(uint8(i), uint8(j), "", uint8(0), int64(0), "")
			}
		}
	}
	f.Add(uint8(4), uint8(3), "cursor.firstBatch.0", uint8(3), int64(0), "not a document")
	f.Add(uint8(5), uint8(4), "cursor.id", uint8(2), int64(7), "")
	f.Add(uint8(1), uint8(0), "writeErrors.0.index", uint8(1), int64(-1), "")
	f.Add(uint8(10), uint8(13), "cursor.firstBatch.0.idx", uint8(1), int64(99), "")

	var reply atomic.Pointer[bson.D]
	reply.Store(&replies[0]) // whatever the client sends before the first input
	srv := blackpipe.StartWithOptions(f, blackpipe.Options{
		Hello: bson.D{{Key: "msg", Value: "isdbgrid"}}, // a mongos: sessions and retryable writes, no replica-set discovery
		Handler: func(r *blackpipe.Request) bool {
			switch strings.ToLower(r.Name) {
			case "hello", "ismaster", "buildinfo", "ping", "endsessions":
				return false // the built-in answers: the client stays connected
			}
			_ = r.ReplyD(*reply.Load())
			return true
		},
	})
	o, err := sturdy.ParseURI(srv.URI())
	if err != nil {
		f.Fatal(err)
	}
	o.ServerSelectionTimeout = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, err := sturdy.ConnectWithOptions(ctx, o)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	coll := client.Database("db").Collection("c")

	f.Fuzz(func(t *testing.T, replyIdx, opIdx uint8, path string, kind uint8, n int64, s string) {
		d := fuzzdoc.Set(replies[int(replyIdx)%len(replies)], path, fuzzdoc.Value(kind, n, s))
		reply.Store(&d)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		ops[int(opIdx)%len(ops)](ctx, client, coll)
	})
}

// fuzzReplySeeds are the replies FuzzClientReplies starts from.
func fuzzReplySeeds() []bson.D {
	type D = bson.D
	type A = bson.A
	ct := D{{Key: "clusterTime", Value: bson.Timestamp{T: 100, I: 1}}, {Key: "signature", Value: D{{Key: "hash", Value: bson.Binary{Data: make([]byte, 20)}}, {Key: "keyId", Value: int64(0)}}}}
	return []D{
		{{Key: "n", Value: int32(1)}, {Key: "ok", Value: 1.0}},
		{{Key: "n", Value: int32(0)}, {Key: "writeErrors", Value: A{D{{Key: "index", Value: int32(0)}, {Key: "code", Value: int32(11000)}, {Key: "errmsg", Value: "E11000 duplicate key"}, {Key: "keyPattern", Value: D{{Key: "_id", Value: 1}}}}}}, {Key: "ok", Value: 1.0}},
		{{Key: "n", Value: int32(1)}, {Key: "writeConcernError", Value: D{{Key: "code", Value: int32(64)}, {Key: "codeName", Value: "WriteConcernTimeout"}, {Key: "errmsg", Value: "waiting for replication timed out"}, {Key: "errInfo", Value: D{{Key: "wtimeout", Value: true}}}}}, {Key: "ok", Value: 1.0}},
		{{Key: "n", Value: int32(1)}, {Key: "nModified", Value: int32(1)}, {Key: "upserted", Value: A{D{{Key: "index", Value: int32(0)}, {Key: "_id", Value: int32(5)}}}}, {Key: "ok", Value: 1.0}},
		{{Key: "cursor", Value: D{{Key: "firstBatch", Value: A{D{{Key: "_id", Value: int32(1)}, {Key: "v", Value: int64(2)}, {Key: "n", Value: int32(3)}}}}, {Key: "id", Value: int64(0)}, {Key: "ns", Value: "db.c"}}}, {Key: "ok", Value: 1.0}},
		{{Key: "cursor", Value: D{{Key: "firstBatch", Value: A{D{{Key: "_id", Value: int32(1)}}}}, {Key: "nextBatch", Value: A{D{{Key: "_id", Value: int32(2)}}}}, {Key: "id", Value: int64(7)}, {Key: "ns", Value: "db.c"}, {Key: "postBatchResumeToken", Value: D{{Key: "_data", Value: "8263"}}}}}, {Key: "ok", Value: 1.0}},
		{{Key: "ok", Value: 0.0}, {Key: "code", Value: int32(11600)}, {Key: "codeName", Value: "InterruptedAtShutdown"}, {Key: "errmsg", Value: "interrupted at shutdown"}, {Key: "errorLabels", Value: A{"RetryableWriteError"}}},
		{{Key: "ok", Value: 0.0}, {Key: "code", Value: int32(462)}, {Key: "codeName", Value: "IngressRequestRateLimitExceeded"}, {Key: "errmsg", Value: "overloaded"}, {Key: "errorLabels", Value: A{"SystemOverloadedError", "RetryableError"}}},
		{{Key: "lastErrorObject", Value: D{{Key: "n", Value: int32(1)}, {Key: "updatedExisting", Value: true}}}, {Key: "value", Value: D{{Key: "_id", Value: int32(1)}, {Key: "v", Value: int64(1)}}}, {Key: "ok", Value: 1.0}},
		{{Key: "n", Value: int32(3)}, {Key: "values", Value: A{int32(1), "two"}}, {Key: "ok", Value: 1.0}},
		{{Key: "cursor", Value: D{{Key: "firstBatch", Value: A{D{{Key: "ok", Value: 1.0}, {Key: "idx", Value: int32(0)}, {Key: "n", Value: int32(1)}}}}, {Key: "id", Value: int64(0)}, {Key: "ns", Value: "admin.$cmd.bulkWrite"}}}, {Key: "nErrors", Value: int32(0)}, {Key: "nInserted", Value: int32(1)}, {Key: "nMatched", Value: int32(0)}, {Key: "nModified", Value: int32(0)}, {Key: "nUpserted", Value: int32(0)}, {Key: "nDeleted", Value: int32(0)}, {Key: "ok", Value: 1.0}},
		{{Key: "ok", Value: 0.0}, {Key: "code", Value: int32(251)}, {Key: "codeName", Value: "NoSuchTransaction"}, {Key: "errmsg", Value: "no such transaction"}, {Key: "errorLabels", Value: A{"TransientTransactionError"}}},
		{{Key: "n", Value: int32(1)}, {Key: "ok", Value: 1.0}, {Key: "$clusterTime", Value: ct}, {Key: "operationTime", Value: bson.Timestamp{T: 100, I: 1}}},
		{{Key: "ok", Value: 0.0}, {Key: "code", Value: int32(10107)}, {Key: "codeName", Value: "NotWritablePrimary"}, {Key: "errmsg", Value: "not primary"}, {Key: "topologyVersion", Value: D{{Key: "processId", Value: bson.NewObjectID()}, {Key: "counter", Value: int64(1)}}}},
	}
}

// fuzzClientOps are the operations FuzzClientReplies runs, one per input;
// each ignores what it gets back, results and errors alike.
func fuzzClientOps() []func(ctx context.Context, client *sturdy.Client, coll *sturdy.Collection) {
	filter := bson.D{{Key: "_id", Value: int32(1)}}
	set := bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: int32(1)}}}}
	drain := func(ctx context.Context, cur *sturdy.Cursor, err error) {
		if err != nil {
			return
		}
		for cur.Next(ctx) {
			var m bson.M
			_ = cur.Decode(&m)
		}
		_ = cur.Close(ctx)
	}
	return []func(ctx context.Context, client *sturdy.Client, coll *sturdy.Collection){
		func(ctx context.Context, _ *sturdy.Client, coll *sturdy.Collection) {
			_, _ = coll.InsertOne(ctx, filter)
		},
		func(ctx context.Context, _ *sturdy.Client, coll *sturdy.Collection) {
			_, _ = coll.UpdateOne(ctx, filter, set, &sturdy.UpdateOptions{Upsert: true})
		},
		func(ctx context.Context, _ *sturdy.Client, coll *sturdy.Collection) {
			_, _ = coll.DeleteMany(ctx, filter)
		},
		func(ctx context.Context, _ *sturdy.Client, coll *sturdy.Collection) {
			var m bson.M
			_ = coll.FindOne(ctx, filter).Decode(&m)
		},
		func(ctx context.Context, _ *sturdy.Client, coll *sturdy.Collection) {
			cur, err := coll.Find(ctx, bson.D{}, &sturdy.FindOptions{BatchSize: 1})
			drain(ctx, cur, err)
		},
		func(ctx context.Context, _ *sturdy.Client, coll *sturdy.Collection) {
			cur, err := coll.Aggregate(ctx, bson.A{bson.D{{Key: "$match", Value: bson.D{}}}})
			drain(ctx, cur, err)
		},
		func(ctx context.Context, _ *sturdy.Client, coll *sturdy.Collection) {
			_, _ = coll.CountDocuments(ctx, bson.D{})
		},
		func(ctx context.Context, _ *sturdy.Client, coll *sturdy.Collection) {
			_, _ = coll.Distinct(ctx, "v", bson.D{})
		},
		func(ctx context.Context, _ *sturdy.Client, coll *sturdy.Collection) {
			var m bson.M
			_ = coll.FindOneAndUpdate(ctx, filter, set).Decode(&m)
		},
		func(ctx context.Context, _ *sturdy.Client, coll *sturdy.Collection) {
			_, _ = coll.InsertMany(ctx, []any{bson.D{{Key: "a", Value: 1}}, bson.D{{Key: "a", Value: 2}}})
		},
		func(ctx context.Context, _ *sturdy.Client, coll *sturdy.Collection) {
			_, _ = coll.BulkWrite(ctx, []sturdy.WriteModel{
				&sturdy.InsertOneModel{Document: bson.D{{Key: "a", Value: 1}}},
				&sturdy.UpdateOneModel{Filter: filter, Update: set, Upsert: true},
				&sturdy.DeleteManyModel{Filter: bson.D{{Key: "a", Value: 1}}},
			})
		},
		func(ctx context.Context, _ *sturdy.Client, coll *sturdy.Collection) {
			cur, err := coll.ListIndexes(ctx)
			drain(ctx, cur, err)
		},
		func(ctx context.Context, client *sturdy.Client, _ *sturdy.Collection) {
			_, _ = client.Database("db").ListCollectionNames(ctx, bson.D{})
		},
		func(ctx context.Context, client *sturdy.Client, _ *sturdy.Collection) {
			_, _ = client.BulkWrite(ctx, []sturdy.ClientWriteModel{
				{Database: "db", Collection: "c", Model: &sturdy.InsertOneModel{Document: bson.D{{Key: "a", Value: 1}}}},
				{Database: "db", Collection: "d", Model: &sturdy.UpdateManyModel{Filter: bson.D{}, Update: set}},
			})
		},
		func(ctx context.Context, client *sturdy.Client, coll *sturdy.Collection) {
			s, err := client.StartSession(ctx)
			if err != nil {
				return
			}
			defer s.EndSession(ctx)
			_ = s.WithTransaction(ctx, func(ctx context.Context) error {
				_, err := coll.InsertOne(ctx, bson.D{{Key: "a", Value: 1}})
				return err
			}, nil)
		},
		func(ctx context.Context, _ *sturdy.Client, coll *sturdy.Collection) {
			cs, err := coll.Watch(ctx, bson.A{})
			if err != nil {
				return
			}
			for i := 0; i < 3 && cs.TryNext(ctx); i++ {
			}
			_ = cs.Close(ctx)
		},
		func(ctx context.Context, _ *sturdy.Client, coll *sturdy.Collection) {
			_, _ = once.New(coll).Increment(ctx, int32(1), bson.D{{Key: "n", Value: int32(1)}})
		},
		func(ctx context.Context, _ *sturdy.Client, coll *sturdy.Collection) {
			_, _ = once.New(coll).Reconcile(ctx)
		},
		func(ctx context.Context, _ *sturdy.Client, coll *sturdy.Collection) {
			_, _ = optimistic.New(coll).Save(ctx, bson.D{{Key: "_id", Value: int32(1)}, {Key: "v", Value: int64(1)}, {Key: "x", Value: "y"}})
		},
		func(ctx context.Context, _ *sturdy.Client, coll *sturdy.Collection) {
			var m bson.M
			_, _ = optimistic.New(coll).Load(ctx, int32(1), &m)
		},
	}
}

// FuzzClientHello connects a new client to a blackpipe server whose every
// hello is a fuzzed one: a replica-set primary's hello (or, by the seed,
// a secondary's, a mongos's, a standalone's) with one value of a fuzzed
// type at a fuzzed path. The client then pings, inserts and finds, and
// disconnects. Monitoring, the handshake and topology discovery must take
// whatever the hello says without panicking or hanging. Host names in the
// hello are kept to this server and a closed local port, so discovery
// never reaches for the network.
func FuzzClientHello(f *testing.F) {
	var hello atomic.Pointer[bson.D]
	srv := blackpipe.StartWithOptions(f, blackpipe.Options{
		Handler: func(r *blackpipe.Request) bool {
			switch strings.ToLower(r.Name) {
			case "hello", "ismaster":
				_ = r.ReplyD(*hello.Load())
			case "insert":
				_ = r.ReplyD(bson.D{{Key: "n", Value: int32(1)}})
			case "find":
				_ = r.ReplyD(bson.D{{Key: "cursor", Value: bson.D{{Key: "firstBatch", Value: bson.A{}}, {Key: "id", Value: int64(0)}, {Key: "ns", Value: "db.c"}}}})
			default:
				return false
			}
			return true
		},
	})
	seeds := fuzzHelloSeeds(srv.Addr())
	hello.Store(&seeds[0]) // a hello before the first input (none is expected)
	for i := range seeds {
		f.Add(uint8(i), false, "", uint8(0), int64(0), "")
		f.Add(uint8(i), true, "", uint8(0), int64(0), "")
	}
	f.Add(uint8(0), false, "hosts.0", uint8(3), int64(0), "localhost:1")
	f.Add(uint8(0), false, "maxWireVersion", uint8(0), int64(2), "")
	f.Add(uint8(1), false, "setVersion", uint8(3), int64(0), "x")
	f.Add(uint8(0), false, "topologyVersion.counter", uint8(1), int64(-1), "")
	f.Fuzz(func(t *testing.T, seed uint8, direct bool, path string, kind uint8, n int64, s string) {
		d := fuzzdoc.Set(seeds[int(seed)%len(seeds)], path, fuzzdoc.Value(kind, n, s))
		d = keepHostsLocal(d, srv.Addr())
		hello.Store(&d)
		uri := "mongodb://" + srv.Addr() + "/?replicaSet=rs0"
		if direct {
			uri = "mongodb://" + srv.Addr() + "/?directConnection=true"
		}
		o, err := sturdy.ParseURI(uri)
		if err != nil {
			t.Fatal(err)
		}
		o.ServerSelectionTimeout = 200 * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		client, err := sturdy.ConnectWithOptions(ctx, o)
		if err != nil {
			return
		}
		_ = client.Ping(ctx)
		coll := client.Database("db").Collection("c")
		_, _ = coll.InsertOne(ctx, bson.D{{Key: "a", Value: int32(1)}})
		var m bson.M
		_ = coll.FindOne(ctx, bson.D{}).Decode(&m)
		dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer dcancel()
		if err := client.Disconnect(dctx); err != nil && dctx.Err() != nil {
			t.Fatalf("hello %v: Disconnect did not return: %v", d, err)
		}
	})
}

// fuzzHelloSeeds are FuzzClientHello's hellos: a primary, a secondary, a
// mongos and a standalone, all at addr.
func fuzzHelloSeeds(addr string) []bson.D {
	base := func(extra ...bson.E) bson.D {
		d := bson.D{
			{Key: "helloOk", Value: true},
			{Key: "maxBsonObjectSize", Value: int32(16 * 1024 * 1024)},
			{Key: "maxMessageSizeBytes", Value: int32(48000000)},
			{Key: "maxWriteBatchSize", Value: int32(100000)},
			{Key: "localTime", Value: bson.NewDateTimeFromTime(time.Unix(1700000000, 0))},
			{Key: "logicalSessionTimeoutMinutes", Value: int32(30)},
			{Key: "connectionId", Value: int32(1)},
			{Key: "minWireVersion", Value: int32(0)},
			{Key: "maxWireVersion", Value: int32(25)},
			{Key: "ok", Value: 1.0},
		}
		return append(extra, d...)
	}
	rs := func(primary bool) bson.D {
		return base(
			bson.E{Key: "isWritablePrimary", Value: primary},
			bson.E{Key: "secondary", Value: !primary},
			bson.E{Key: "setName", Value: "rs0"},
			bson.E{Key: "setVersion", Value: int32(1)},
			bson.E{Key: "electionId", Value: bson.ObjectID{0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 1}},
			bson.E{Key: "hosts", Value: bson.A{addr}},
			bson.E{Key: "primary", Value: addr},
			bson.E{Key: "me", Value: addr},
			bson.E{Key: "lastWrite", Value: bson.D{{Key: "lastWriteDate", Value: bson.NewDateTimeFromTime(time.Unix(1700000000, 0))}}},
		)
	}
	return []bson.D{
		rs(true),
		rs(false),
		base(bson.E{Key: "isWritablePrimary", Value: true}, bson.E{Key: "msg", Value: "isdbgrid"}),
		base(bson.E{Key: "isWritablePrimary", Value: true}),
	}
}

// keepHostsLocal replaces every string in the hello's host fields that is
// not addr with a closed local port, so that discovery dials nothing but
// loopback.
func keepHostsLocal(d bson.D, addr string) bson.D {
	local := func(v any) any {
		if s, ok := v.(string); ok && s != addr {
			return "localhost:1"
		}
		return v
	}
	out := append(bson.D(nil), d...)
	for i, e := range out {
		switch e.Key {
		case "hosts", "passives", "arbiters":
			if arr, ok := e.Value.(bson.A); ok {
				arr = append(bson.A(nil), arr...)
				for j := range arr {
					arr[j] = local(arr[j])
				}
				out[i].Value = arr
			}
		case "primary", "me":
			out[i].Value = local(e.Value)
		}
	}
	return out
}
