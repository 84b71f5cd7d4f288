package mongosim

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// Tests of smaller divergences from mongod 8.0 that were found and closed, each through the
// official Go driver over TCP.

func TestDistinctSortedAsMongod(t *testing.T) {
	c := Start(t)
	ctx := testCtx(t)
	coll := connect(t, c.URI()).Database("db").Collection("distinct")
	// Inserted out of order and across types; arrays contribute their
	// elements, duplicates (1 and 1.0) collapse to the first seen.
	docs := []any{
		bson.D{{Key: "a", Value: "x"}},
		bson.D{{Key: "a", Value: true}},
		bson.D{{Key: "a", Value: int32(3)}},
		bson.D{{Key: "a", Value: bson.D{{Key: "b", Value: int32(1)}}}},
		bson.D{{Key: "a", Value: bson.A{int32(2), 1.5}}},
		bson.D{{Key: "a", Value: nil}},
		bson.D{{Key: "a", Value: "b"}},
		bson.D{{Key: "a", Value: int64(-7)}},
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	res := coll.Distinct(ctx, "a", bson.D{})
	var got []any
	if err := res.Decode(&got); err != nil {
		t.Fatal(err)
	}
	// BSON comparison order: null < numbers < strings < objects < booleans.
	want := []any{nil, int64(-7), 1.5, int32(2), int32(3), "b", "x", bson.D{{Key: "b", Value: int32(1)}}, true}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("distinct values\n got %#v\nwant %#v", got, want)
	}
}

func TestMaxTimeMS(t *testing.T) {
	c := Start(t)
	ctx := testCtx(t)
	client := connect(t, c.URI())
	db := client.Database("db")
	if _, err := db.Collection("c").InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatal(err)
	}

	for _, bad := range []any{int32(-1), "100", 1.5, int64(1) << 40} {
		_, err := runCmd(ctx, db, bson.D{{Key: "find", Value: "c"}, {Key: "maxTimeMS", Value: bad}})
		commandError(t, err, cmderr.BadValue)
	}
	// 0 means no limit, as on mongod.
	mustRun(t, ctx, db, bson.D{{Key: "find", Value: "c"}, {Key: "maxTimeMS", Value: int32(0)}})

	// A blocking fail point is work the command does: maxTimeMS cuts it
	// short with MaxTimeMSExpired, long before the block would end.
	admin := client.Database("admin")
	setFailCommand(t, ctx, admin, bson.D{{Key: "times", Value: int32(1)}}, bson.D{
		{Key: "failCommands", Value: bson.A{"find"}},
		{Key: "blockConnection", Value: true},
		{Key: "blockTimeMS", Value: int32(10000)},
	})
	start := time.Now()
	_, err := runCmd(ctx, db, bson.D{{Key: "find", Value: "c"}, {Key: "maxTimeMS", Value: int32(50)}})
	ce := commandError(t, err, cmderr.MaxTimeMSExpired)
	if ce.Name != "MaxTimeMSExpired" || ce.Message != "operation exceeded time limit" {
		t.Fatalf("error %+v", ce)
	}
	if d := time.Since(start); d >= 10*time.Second {
		t.Fatalf("answered after the whole block (%v)", d)
	}
	// The connection stays usable and the fail point is used up.
	mustRun(t, ctx, db, bson.D{{Key: "find", Value: "c"}, {Key: "maxTimeMS", Value: int32(5000)}})
}

func TestBypassEmptyTsReplacementAccepted(t *testing.T) {
	c := Start(t)
	ctx := testCtx(t)
	client := connect(t, c.URI())
	db := client.Database("db")
	ts := bson.Timestamp{T: 5, I: 1}
	cmds := []bson.D{
		{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}, {Key: "ts", Value: ts}}}}, {Key: "bypassEmptyTsReplacement", Value: true}},
		{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "y", Value: 1}}}}}}}}, {Key: "bypassEmptyTsReplacement", Value: true}},
		{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "update", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "z", Value: 1}}}}}, {Key: "bypassEmptyTsReplacement", Value: true}},
	}
	for _, cmd := range cmds {
		mustRun(t, ctx, db, cmd)
	}
	mustRun(t, ctx, client.Database("admin"), bson.D{
		{Key: "bulkWrite", Value: 1},
		{Key: "ops", Value: bson.A{bson.D{{Key: "insert", Value: int32(0)}, {Key: "document", Value: bson.D{{Key: "_id", Value: 2}}}}}},
		{Key: "nsInfo", Value: bson.A{bson.D{{Key: "ns", Value: "db.c"}}}},
		{Key: "bypassEmptyTsReplacement", Value: true},
	})
	var got bson.D
	if err := db.Collection("c").FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&got); err != nil {
		t.Fatal(err)
	}
	want := bson.D{{Key: "_id", Value: int32(1)}, {Key: "ts", Value: ts}, {Key: "y", Value: int32(1)}, {Key: "z", Value: int32(1)}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("document %v, want %v", got, want)
	}
	if n, err := db.Collection("c").CountDocuments(ctx, bson.D{}); err != nil || n != 2 {
		t.Fatalf("count %d %v", n, err)
	}
}

func TestPLAINAuth(t *testing.T) {
	c := StartWithOptions(t, Options{Auth: AuthOptions{Username: "alice", Password: "s3cret"}})
	ctx := testCtx(t)

	// The official driver sends PLAIN to $external (LDAP on mongod
	// Enterprise). mongosim has no external users, so it fails as a mongod
	// without that user does: AuthenticationFailed, whatever the password.
	for _, pw := range []string{"s3cret", "wrong"} {
		ext := connect(t, c.URI(), options.Client().SetAuth(options.Credential{AuthMechanism: "PLAIN", Username: "alice", Password: pw}))
		err := ext.Ping(ctx, readpref.Primary())
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != cmderr.AuthenticationFailed || ce.Message != "Authentication failed." {
			t.Fatalf("PLAIN on $external with password %q: %T %v", pw, err, err)
		}
	}

	// The server's answer itself: mongod's code and message, whatever was
	// wrong (password, user, database, payload shape). One pooled
	// connection, so the last check sees what the earlier ones did to it.
	anon := connect(t, c.URI(), options.Client().SetMaxPoolSize(1))
	for _, tc := range []struct{ db, payload string }{
		{"admin", "\x00alice\x00wrong"},
		{"admin", "\x00bob\x00s3cret"},
		{"admin", "alice"},
		{"admin", "carol\x00alice\x00s3cret"},
		{"test", "\x00alice\x00s3cret"},
	} {
		_, err := runCmd(ctx, anon.Database(tc.db), bson.D{
			{Key: "saslStart", Value: 1},
			{Key: "mechanism", Value: "PLAIN"},
			{Key: "payload", Value: bson.Binary{Data: []byte(tc.payload)}},
		})
		ce := commandError(t, err, cmderr.AuthenticationFailed)
		if ce.Name != "AuthenticationFailed" || ce.Message != "Authentication failed." {
			t.Fatalf("%q: %+v", tc.payload, ce)
		}
	}
	_, err := runCmd(ctx, anon.Database("admin"), bson.D{{Key: "serverStatus", Value: 1}})
	commandError(t, err, cmderr.Unauthorized)

	// A local user authenticates with PLAIN on its own database, as on a
	// mongod with PLAIN enabled.
	raw := mustRun(t, ctx, anon.Database("admin"), bson.D{
		{Key: "saslStart", Value: 1},
		{Key: "mechanism", Value: "PLAIN"},
		{Key: "payload", Value: bson.Binary{Data: []byte("\x00alice\x00s3cret")}},
	})
	if !raw.Lookup("done").Boolean() {
		t.Fatalf("saslStart PLAIN %v", raw)
	}
	raw = mustRun(t, ctx, anon.Database("admin"), bson.D{{Key: "connectionStatus", Value: 1}})
	users, _ := raw.Lookup("authInfo", "authenticatedUsers").Array().Values()
	if len(users) != 1 || users[0].Document().Lookup("user").StringValue() != "alice" {
		t.Fatalf("connectionStatus %v", raw)
	}
	mustRun(t, ctx, anon.Database("admin"), bson.D{{Key: "serverStatus", Value: 1}})
}

func TestUndefinedVariableInExpr(t *testing.T) {
	c := Start(t)
	ctx := testCtx(t)
	db := connect(t, c.URI()).Database("db")
	coll := db.Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	filter := bson.D{{Key: "$expr", Value: bson.D{{Key: "$eq", Value: bson.A{"$a", "$$nope"}}}}}
	want := func(what string, err error) {
		t.Helper()
		var se mongo.ServerError
		if !errors.As(err, &se) || !se.HasErrorCode(17276) || !se.HasErrorMessage("Use of undefined variable: nope") {
			t.Fatalf("%s: want 17276 Use of undefined variable: nope, got %T %v", what, err, err)
		}
	}
	_, err := coll.Find(ctx, filter)
	want("find", err)
	_, err = coll.CountDocuments(ctx, filter)
	want("countDocuments", err)
	_, err = runCmd(ctx, db, bson.D{{Key: "count", Value: "c"}, {Key: "query", Value: filter}})
	want("count", err)
	_, err = coll.UpdateOne(ctx, filter, bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: 1}}}})
	want("updateOne", err)
	_, err = coll.UpdateMany(ctx, filter, bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: 1}}}})
	want("updateMany", err)
	_, err = coll.DeleteOne(ctx, filter)
	want("deleteOne", err)
	_, err = coll.DeleteMany(ctx, filter)
	want("deleteMany", err)
	want("findOneAndUpdate", coll.FindOneAndUpdate(ctx, filter, bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: 1}}}}).Err())
	want("findOneAndDelete", coll.FindOneAndDelete(ctx, filter).Err())
	_, err = coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$match", Value: filter}}})
	want("aggregate", err)

	// Nothing was changed, and a defined variable still works.
	var got bson.D
	if err := coll.FindOne(ctx, bson.D{{Key: "$expr", Value: bson.D{{Key: "$eq", Value: bson.A{"$_id", "$$ROOT._id"}}}}}).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, bson.D{{Key: "_id", Value: int32(1)}, {Key: "a", Value: int32(1)}}) {
		t.Fatalf("document %v", got)
	}
}

func TestDuplicateKeyErrorsAsMongod(t *testing.T) {
	c := Start(t)
	ctx := testCtx(t)
	db := connect(t, c.URI()).Database("db")
	coll := db.Collection("c")
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "a", Value: 1}}, Options: options.Index().SetUnique(true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	const msgA = "E11000 duplicate key error collection: db.c index: a_1 dup key: { a: 1 }"
	keyA := bson.D{{Key: "a", Value: int32(1)}}

	// check asserts a write error's or command error's 11000 shape.
	check := func(what string, err error, msg string, pattern, key bson.D) {
		t.Helper()
		var raw bson.Raw
		var we mongo.WriteException
		var ce mongo.CommandError
		switch {
		case errors.As(err, &we) && len(we.WriteErrors) == 1:
			e := we.WriteErrors[0]
			if e.Code != 11000 || e.Message != msg {
				t.Fatalf("%s: write error %d %q", what, e.Code, e.Message)
			}
			raw = e.Raw
		case errors.As(err, &ce):
			if ce.Code != 11000 || ce.Name != "DuplicateKey" || ce.Message != msg {
				t.Fatalf("%s: command error %d %s %q", what, ce.Code, ce.Name, ce.Message)
			}
			raw = ce.Raw
		default:
			t.Fatalf("%s: want a duplicate key error, got %T %v", what, err, err)
		}
		var got struct {
			KeyPattern bson.D `bson:"keyPattern"`
			KeyValue   bson.D `bson:"keyValue"`
		}
		if err := bson.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.KeyPattern, pattern) || !reflect.DeepEqual(got.KeyValue, key) {
			t.Fatalf("%s: keyPattern %v keyValue %v, want %v %v", what, got.KeyPattern, got.KeyValue, pattern, key)
		}
	}

	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: 1}})
	check("insert", err, msgA, keyA, keyA)
	_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
	check("insert _id", err, "E11000 duplicate key error collection: db.c index: _id_ dup key: { _id: 1 }",
		bson.D{{Key: "_id", Value: int32(1)}}, bson.D{{Key: "_id", Value: int32(1)}})
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}}, options.UpdateOne().SetUpsert(true))
	check("update upsert", err, msgA, keyA, keyA)
	err = coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 4}}, bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}}, options.FindOneAndUpdate().SetUpsert(true)).Err()
	check("findAndModify upsert", err, msgA, keyA, keyA)

	// $merge inserting a document whose a collides.
	src := db.Collection("src")
	if _, err := src.InsertOne(ctx, bson.D{{Key: "_id", Value: 9}, {Key: "a", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	_, err = src.Aggregate(ctx, mongo.Pipeline{{{Key: "$merge", Value: bson.D{{Key: "into", Value: "c"}, {Key: "whenNotMatched", Value: "insert"}}}}})
	check("$merge", err, msgA, keyA, keyA)
	_, err = src.Aggregate(ctx, mongo.Pipeline{{{Key: "$merge", Value: bson.D{{Key: "into", Value: "c"}, {Key: "whenMatched", Value: "fail"}}}}})
	check("$merge whenMatched fail", err, msgA, keyA, keyA)

	// A unique index over existing duplicates: mongod's build error.
	dups := db.Collection("dups")
	if _, err := dups.InsertMany(ctx, []any{bson.D{{Key: "b", Value: "x"}}, bson.D{{Key: "b", Value: "x"}}}); err != nil {
		t.Fatal(err)
	}
	_, err = dups.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "b", Value: 1}}, Options: options.Index().SetUnique(true)})
	var ce mongo.CommandError
	if !errors.As(err, &ce) {
		t.Fatalf("createIndexes over duplicates: %T %v", err, err)
	}
	const suffix = " :: caused by :: E11000 duplicate key error collection: db.dups index: b_1 dup key: { b: \"x\" }"
	if !strings.HasPrefix(ce.Message, "Index build failed: ") || !strings.Contains(ce.Message, ": Collection db.dups ( ") || !strings.HasSuffix(ce.Message, suffix) {
		t.Fatalf("createIndexes message %q", ce.Message)
	}
	check("createIndexes", err, ce.Message, bson.D{{Key: "b", Value: int32(1)}}, bson.D{{Key: "b", Value: "x"}})
}

func TestChangeStreamUpdateDescriptionPaths(t *testing.T) {
	c := Start(t)
	ctx := testCtx(t)
	coll := connect(t, c.URI()).Database("db").Collection("paths")
	if _, err := coll.InsertOne(ctx, bson.D{
		{Key: "_id", Value: 1},
		{Key: "a", Value: bson.D{{Key: "b", Value: 1}, {Key: "c", Value: 1}}},
		{Key: "arr", Value: bson.A{1, 1, 1}},
		{Key: "short", Value: bson.A{1, 2, 3, 4}},
		{Key: "list", Value: bson.A{"x"}},
		{Key: "gone", Value: 1},
		{Key: "sub", Value: bson.D{{Key: "x", Value: 1}, {Key: "y", Value: 1}}},
		{Key: "t", Value: bson.D{{Key: "k", Value: 1}}},
	}); err != nil {
		t.Fatal(err)
	}
	cs, err := coll.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{
		{Key: "$set", Value: bson.D{{Key: "a.b", Value: 2}, {Key: "arr.1", Value: 2}, {Key: "t", Value: "scalar"}}},
		{Key: "$push", Value: bson.D{{Key: "list", Value: 9}}},
		{Key: "$pop", Value: bson.D{{Key: "short", Value: 1}}},
		{Key: "$unset", Value: bson.D{{Key: "gone", Value: ""}, {Key: "sub.y", Value: ""}}},
	}); err != nil {
		t.Fatal(err)
	}
	if !cs.Next(ctx) {
		t.Fatalf("no event: %v", cs.Err())
	}
	var ev struct {
		OperationType     string `bson:"operationType"`
		UpdateDescription struct {
			UpdatedFields   bson.D   `bson:"updatedFields"`
			RemovedFields   []string `bson:"removedFields"`
			TruncatedArrays []bson.D `bson:"truncatedArrays"`
		} `bson:"updateDescription"`
	}
	if err := cs.Decode(&ev); err != nil {
		t.Fatal(err)
	}
	ud := ev.UpdateDescription
	wantUpdated := bson.D{
		{Key: "a.b", Value: int32(2)},
		{Key: "arr.1", Value: int32(2)},
		{Key: "list.1", Value: int32(9)},
		{Key: "t", Value: "scalar"},
	}
	if ev.OperationType != "update" || !reflect.DeepEqual(ud.UpdatedFields, wantUpdated) {
		t.Fatalf("updatedFields %v, want %v", ud.UpdatedFields, wantUpdated)
	}
	if !reflect.DeepEqual(ud.RemovedFields, []string{"gone", "sub.y"}) {
		t.Fatalf("removedFields %v", ud.RemovedFields)
	}
	wantTrunc := []bson.D{{{Key: "field", Value: "short"}, {Key: "newSize", Value: int32(3)}}}
	if !reflect.DeepEqual(ud.TruncatedArrays, wantTrunc) {
		t.Fatalf("truncatedArrays %v, want %v", ud.TruncatedArrays, wantTrunc)
	}
}

func TestChangeStreamStartAtOperationTime(t *testing.T) {
	c := Start(t)
	ctx := testCtx(t)
	client := connect(t, c.URI())
	coll := client.Database("db").Collection("sat")
	// A first stream learns the clusterTime of the second of three
	// inserts; a stream started at it sees the second and third only.
	first, err := coll.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close(ctx)
	for i := int32(1); i <= 3; i++ {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	var at *bson.Timestamp
	for i := 1; i <= 2; i++ {
		if !first.Next(ctx) {
			t.Fatalf("first stream: %v", first.Err())
		}
		ts := bson.Timestamp{}
		ts.T, ts.I = first.Current.Lookup("clusterTime").Timestamp()
		at = &ts
	}
	cs, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetStartAtOperationTime(at))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	for _, want := range []int32{2, 3} {
		if !cs.Next(ctx) {
			t.Fatalf("no event for %d: %v", want, cs.Err())
		}
		var ev struct {
			DocumentKey struct {
				ID int32 `bson:"_id"`
			} `bson:"documentKey"`
			ClusterTime bson.Timestamp `bson:"clusterTime"`
		}
		if err := cs.Decode(&ev); err != nil {
			t.Fatal(err)
		}
		if ev.DocumentKey.ID != want || ev.ClusterTime.Before(*at) {
			t.Fatalf("event %+v, want _id %d at or after %v", ev, want, *at)
		}
	}

	_, err = coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$changeStream", Value: bson.D{
		{Key: "startAtOperationTime", Value: *at},
		{Key: "resumeAfter", Value: bson.D{{Key: "_data", Value: "820000000000000001"}}},
	}}}})
	commandError(t, err, 40674)
	_, err = coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$changeStream", Value: bson.D{{Key: "startAtOperationTime", Value: int32(5)}}}}})
	commandError(t, err, cmderr.TypeMismatch)
}

// nested returns {a: {a: … 1}} with n embedded documents.
func nested(n int) any {
	var d any = int32(1)
	for i := 0; i < n; i++ {
		d = bson.D{{Key: "a", Value: d}}
	}
	return d
}

func TestStoredDocumentDepthLimit(t *testing.T) {
	c := Start(t)
	ctx := testCtx(t)
	coll := connect(t, c.URI()).Database("db").Collection("deep")
	overflow := func(what string, err error) {
		t.Helper()
		var se mongo.ServerError
		if !errors.As(err, &se) || !se.HasErrorCode(cmderr.Overflow) || !se.HasErrorMessage("Document exceeds maximum nesting depth of 100") {
			t.Fatalf("%s: want 15 Overflow, got %T %v", what, err, err)
		}
	}
	// x is level 1 and its 99 embedded documents reach level 100: stored.
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: nested(99)}}); err != nil {
		t.Fatal(err)
	}
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}, {Key: "x", Value: nested(100)}})
	overflow("insert", err)
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "y", Value: bson.A{nested(99)}}}}})
	overflow("update", err)
	_, err = coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "x", Value: nested(150)}})
	overflow("replace", err)
	// The connection survives, and only the first document was stored.
	if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != 1 {
		t.Fatalf("count %d %v", n, err)
	}
}
