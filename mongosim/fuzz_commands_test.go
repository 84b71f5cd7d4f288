package mongosim

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/sturdy-go/sturdy/internal/fuzzdoc"
)

// fuzzSkipped are commands FuzzCommands does not send: they stop the
// server, hold it (fsync lock, a blocking fail point, a frozen or
// stepped-down primary) or change its limits for every later input.
var fuzzSkipped = map[string]bool{
	"shutdown": true, "fsync": true, "fsyncunlock": true, "configurefailpoint": true,
	"replsetstepdown": true, "replsetfreeze": true, "setparameter": true, "killallsessions": true,
	"killallsessionsbypattern": true, "killsessions": true, "killop": true, "sleep": true,
}

// fuzzAdminOnly are commands FuzzCommands sends to the admin database,
// the only one that runs them.
var fuzzAdminOnly = map[string]bool{"renamecollection": true, "bulkwrite": true, "listdatabases": true, "currentop": true, "getlog": true, "getparameter": true, "shardcollection": true, "enablesharding": true}

// FuzzCommands sends commands to a running mongosim through the official
// Go driver and fails when a command handler panicked. mongosim recovers
// from a panic, answers InternalError and logs it, so a panic never shows
// as a crash; it is still a bug. Each input is one of the seed commands
// (one or more of each family, over a small collection) with one value set
// at a dotted path (a field, an array index, or a new field), the value's
// type chosen by kind: every input is a well-formed command, so the fuzzer
// spends its time in the handlers rather than in BSON validation, which
// wire's fuzz targets cover.
func FuzzCommands(f *testing.F) { fuzzCommands(f, Options{}) }

// FuzzRouterCommands is FuzzCommands through a mongos router in front of
// two shards, whose routing, scatter-gather and merging code is its own.
func FuzzRouterCommands(f *testing.F) { fuzzCommands(f, Options{Routers: 1, Shards: 2}) }

func fuzzCommands(f *testing.F, o Options) {
	seeds := fuzzCommandSeeds()
	for i := range seeds {
		f.Add(uint8(i), "", uint8(0), int64(0), "")
	}
	f.Add(uint8(0), "filter.a", uint8(8), int64(3), "gt")
	f.Add(uint8(6), "updates.0.u.$inc.a", uint8(2), int64(-1), "")
	f.Add(uint8(12), "pipeline.1.$group._id", uint8(3), int64(0), "$s")
	f.Add(uint8(13), "pipeline.0.$unwind", uint8(6), int64(1), "path")
	var logs logBuffer
	o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := StartWithOptions(f, o)
	client, err := mongo.Connect(options.Client().ApplyURI(c.URI()).SetHeartbeatInterval(500 * time.Millisecond))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	db, admin := client.Database("fz"), client.Database("admin")
	{
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		docs := []any{
			bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}, {Key: "s", Value: "red apple"}, {Key: "arr", Value: bson.A{1, 2, 3}}, {Key: "loc", Value: bson.D{{Key: "type", Value: "Point"}, {Key: "coordinates", Value: bson.A{1.0, 2.0}}}}},
			bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: 2}, {Key: "s", Value: "green pear"}, {Key: "sub", Value: bson.D{{Key: "x", Value: "y"}}}},
			bson.D{{Key: "_id", Value: "three"}, {Key: "a", Value: nil}},
		}
		if _, err := db.Collection("c").InsertMany(ctx, docs); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, seed uint8, path string, kind uint8, n int64, s string) {
		cmd := seeds[int(seed)%len(seeds)]
		cmd = fuzzdoc.Set(cmd, path, fuzzdoc.Value(kind, n, s))
		if len(cmd) == 0 || fuzzSkipped[strings.ToLower(cmd[0].Key)] {
			return
		}
		for _, e := range cmd {
			// The driver adds these itself; a command that brings its own is
			// refused before it is sent.
			if k := e.Key; k == "$db" || k == "lsid" || k == "txnNumber" || k == "$clusterTime" {
				return
			}
		}
		target := db
		if fuzzAdminOnly[strings.ToLower(cmd[0].Key)] {
			target = admin
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = target.RunCommand(ctx, cmd).Err()
		if i := strings.Index(logs.text(), "panicked"); i >= 0 {
			t.Fatalf("command %v made a handler panic:\n%s", cmd, logs.text()[max(0, i-200):])
		}
		pingCtx, cancelPing := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancelPing()
		if err := db.RunCommand(pingCtx, bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
			t.Fatalf("after command %v, ping failed: %v", cmd, err)
		}
	})
}

func fuzzCommandSeeds() []bson.D {
	type D = bson.D
	type A = bson.A
	eq := func(k string, v any) D { return D{{Key: k, Value: v}} }
	return []D{
		{{Key: "find", Value: "c"}, {Key: "filter", Value: eq("a", eq("$gte", 1))}, {Key: "sort", Value: eq("a", -1)}, {Key: "projection", Value: eq("s", 1)}, {Key: "limit", Value: 2}, {Key: "batchSize", Value: 1}},
		{{Key: "find", Value: "c"}, {Key: "filter", Value: eq("$text", eq("$search", "apple"))}},
		{{Key: "find", Value: "c"}, {Key: "filter", Value: eq("loc", eq("$geoWithin", eq("$centerSphere", A{A{1.0, 2.0}, 0.1})))}},
		{{Key: "find", Value: "c"}, {Key: "filter", Value: eq("$expr", eq("$gt", A{"$a", 1}))}, {Key: "collation", Value: D{{Key: "locale", Value: "en"}, {Key: "strength", Value: 2}}}},
		{{Key: "find", Value: "c"}, {Key: "filter", Value: eq("arr", eq("$elemMatch", eq("$gt", 1)))}, {Key: "hint", Value: eq("_id", 1)}, {Key: "skip", Value: 1}},
		{{Key: "insert", Value: "c"}, {Key: "documents", Value: A{D{{Key: "a", Value: 5}, {Key: "d", Value: bson.NewDateTimeFromTime(time.Unix(0, 0))}}}}, {Key: "ordered", Value: false}},
		{{Key: "update", Value: "c"}, {Key: "updates", Value: A{D{{Key: "q", Value: eq("a", 1)}, {Key: "u", Value: eq("$inc", eq("a", 1))}, {Key: "upsert", Value: true}, {Key: "multi", Value: true}}}}},
		{{Key: "update", Value: "c"}, {Key: "updates", Value: A{D{{Key: "q", Value: D{}}, {Key: "u", Value: A{eq("$set", eq("b", eq("$concat", A{"$s", "!"})))}}, {Key: "multi", Value: true}}}}},
		{{Key: "update", Value: "c"}, {Key: "updates", Value: A{D{{Key: "q", Value: eq("_id", 1)}, {Key: "u", Value: eq("$push", eq("arr", D{{Key: "$each", Value: A{4, 5}}, {Key: "$slice", Value: -3}, {Key: "$sort", Value: 1}}))}, {Key: "arrayFilters", Value: A{}}}}}},
		{{Key: "update", Value: "c"}, {Key: "updates", Value: A{D{{Key: "q", Value: eq("_id", 1)}, {Key: "u", Value: eq("$set", eq("arr.$[e]", 0))}, {Key: "arrayFilters", Value: A{eq("e", eq("$gt", 1))}}}}}},
		{{Key: "delete", Value: "c"}, {Key: "deletes", Value: A{D{{Key: "q", Value: eq("a", 2)}, {Key: "limit", Value: 1}}}}},
		{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: eq("a", 1)}, {Key: "update", Value: eq("$set", eq("z", 1))}, {Key: "new", Value: true}, {Key: "upsert", Value: true}, {Key: "fields", Value: eq("z", 1)}},
		{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: A{eq("$match", eq("a", eq("$exists", true))), eq("$group", D{{Key: "_id", Value: "$a"}, {Key: "n", Value: eq("$sum", 1)}, {Key: "all", Value: eq("$push", "$$ROOT")}}), eq("$sort", eq("n", -1))}}, {Key: "cursor", Value: D{}}},
		{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: A{eq("$unwind", "$arr"), eq("$project", D{{Key: "v", Value: eq("$multiply", A{"$arr", 2})}, {Key: "t", Value: eq("$toString", "$arr")}}), eq("$facet", eq("x", A{eq("$count", "n")}))}}, {Key: "cursor", Value: D{}}},
		{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: A{eq("$lookup", D{{Key: "from", Value: "c"}, {Key: "localField", Value: "a"}, {Key: "foreignField", Value: "a"}, {Key: "as", Value: "m"}}), eq("$bucketAuto", D{{Key: "groupBy", Value: "$a"}, {Key: "buckets", Value: 2}})}}, {Key: "cursor", Value: D{}}},
		{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: A{eq("$geoNear", D{{Key: "near", Value: D{{Key: "type", Value: "Point"}, {Key: "coordinates", Value: A{1.0, 2.0}}}}, {Key: "distanceField", Value: "d"}, {Key: "spherical", Value: true}})}}, {Key: "cursor", Value: D{}}},
		{{Key: "aggregate", Value: 1}, {Key: "pipeline", Value: A{eq("$documents", A{eq("x", 1)}), eq("$setWindowFields", D{{Key: "sortBy", Value: eq("x", 1)}, {Key: "output", Value: eq("r", eq("$rank", D{}))}})}}, {Key: "cursor", Value: D{}}},
		{{Key: "count", Value: "c"}, {Key: "query", Value: eq("a", eq("$in", A{1, 2}))}, {Key: "limit", Value: 1}},
		{{Key: "distinct", Value: "c"}, {Key: "key", Value: "a"}, {Key: "query", Value: D{}}},
		{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: A{D{{Key: "key", Value: D{{Key: "a", Value: 1}, {Key: "s", Value: -1}}}, {Key: "name", Value: "a_s"}, {Key: "unique", Value: false}, {Key: "partialFilterExpression", Value: eq("a", eq("$gt", 0))}}}}},
		{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: A{D{{Key: "key", Value: eq("s", "text")}, {Key: "name", Value: "s_text"}, {Key: "weights", Value: eq("s", 2)}}, D{{Key: "key", Value: eq("loc", "2dsphere")}, {Key: "name", Value: "loc"}}}}},
		{{Key: "listIndexes", Value: "c"}},
		{{Key: "dropIndexes", Value: "c"}, {Key: "index", Value: "a_s"}},
		{{Key: "create", Value: "v"}, {Key: "viewOn", Value: "c"}, {Key: "pipeline", Value: A{eq("$match", eq("a", 1))}}},
		{{Key: "create", Value: "capped"}, {Key: "capped", Value: true}, {Key: "size", Value: 4096}, {Key: "max", Value: 3}},
		{{Key: "create", Value: "val"}, {Key: "validator", Value: eq("$jsonSchema", D{{Key: "bsonType", Value: "object"}, {Key: "required", Value: A{"a"}}})}},
		{{Key: "collMod", Value: "val"}, {Key: "validationLevel", Value: "moderate"}},
		{{Key: "renameCollection", Value: "fz.capped"}, {Key: "to", Value: "fz.capped2"}, {Key: "dropTarget", Value: true}},
		{{Key: "listCollections", Value: 1}, {Key: "filter", Value: eq("name", eq("$regex", "^c"))}, {Key: "nameOnly", Value: true}},
		{{Key: "drop", Value: "v"}},
		{{Key: "explain", Value: D{{Key: "find", Value: "c"}, {Key: "filter", Value: eq("a", 1)}}}, {Key: "verbosity", Value: "executionStats"}},
		{{Key: "getMore", Value: int64(12345)}, {Key: "collection", Value: "c"}},
		{{Key: "killCursors", Value: "c"}, {Key: "cursors", Value: A{int64(12345)}}},
		{{Key: "bulkWrite", Value: 1}, {Key: "ops", Value: A{D{{Key: "insert", Value: 0}, {Key: "document", Value: eq("a", 9)}}, D{{Key: "update", Value: 0}, {Key: "filter", Value: eq("a", 9)}, {Key: "updateMods", Value: eq("$set", eq("b", 1))}}}}, {Key: "nsInfo", Value: A{eq("ns", "fz.c")}}},
		{{Key: "find", Value: "c"}, {Key: "filter", Value: eq("$where", "this.a > 1")}},
		{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: A{eq("$project", eq("f", eq("$function", D{{Key: "body", Value: "function(a) { return a * 2 }"}, {Key: "args", Value: A{"$a"}}, {Key: "lang", Value: "js"}})))}}, {Key: "cursor", Value: D{}}},
		{{Key: "dbStats", Value: 1}},
		{{Key: "collStats", Value: "c"}},
		{{Key: "validate", Value: "c"}},
		{{Key: "serverStatus", Value: 1}},
		{{Key: "hello", Value: 1}},
		{{Key: "buildInfo", Value: 1}},
		{{Key: "createUser", Value: "u"}, {Key: "pwd", Value: "p"}, {Key: "roles", Value: A{}}},
		{{Key: "usersInfo", Value: 1}},
		{{Key: "profile", Value: 2}},
		{{Key: "listDatabases", Value: 1}, {Key: "nameOnly", Value: true}},
		{{Key: "currentOp", Value: 1}, {Key: "$all", Value: true}},
		{{Key: "getParameter", Value: "*"}},
		{{Key: "enableSharding", Value: "fz"}},
		{{Key: "shardCollection", Value: "fz.c"}, {Key: "key", Value: eq("_id", "hashed")}},
		{{Key: "dropDatabase", Value: 1}},
	}
}
