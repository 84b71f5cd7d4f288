package mongosim

// Fixes made where the unified spec tests (internal/harness/spectest) showed mongosim
// behaving differently from MongoDB. Each test drives mongosim with the
// official Go driver, as an independent client.

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// specClient connects the official driver to a fresh default deployment.
func specClient(t *testing.T, retryWrites bool) (*mongo.Client, *Cluster) {
	t.Helper()
	c := StartWithOptions(t, Options{})
	client, err := mongo.Connect(options.Client().ApplyURI(c.URI()).
		SetHeartbeatInterval(500 * time.Millisecond).SetRetryWrites(retryWrites))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	return client, c
}

// onPrimaryTransactionalWrite's closeConnection defaults to true even with
// failBeforeCommitExceptionCode: mongod then closes the connection without
// committing, so a retryable write is retried and applied once
// (retryable-writes "InsertOne is not committed on first attempt").
func TestSpecFixFailBeforeCommitClosesConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fp := bson.D{{Key: "configureFailPoint", Value: "onPrimaryTransactionalWrite"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failBeforeCommitExceptionCode", Value: 1}}}}

	// insertOnce sends one insert with a txnNumber (the fail point only
	// fires for retryable writes), without the driver retrying it.
	insertOnce := func(client *mongo.Client) error {
		sess, err := client.StartSession()
		if err != nil {
			t.Fatal(err)
		}
		defer sess.EndSession(ctx)
		return client.Database("db").RunCommand(mongo.NewSessionContext(ctx, sess), bson.D{{Key: "insert", Value: "c"},
			{Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}, {Key: "txnNumber", Value: int64(1)}}).Err()
	}
	t.Run("the client sees a network error and nothing is written", func(t *testing.T) {
		client, c := specClient(t, false)
		coll := client.Database("db").Collection("c")
		if err := client.Database("admin").RunCommand(ctx, fp).Err(); err != nil {
			t.Fatal(err)
		}
		err := insertOnce(client)
		if !mongo.IsNetworkError(err) {
			t.Fatalf("want a network error, got %v", err)
		}
		if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != 0 {
			t.Fatalf("count %d, %v: the write must not be committed", n, err)
		}
		if c.Stats().Hangups != 1 {
			t.Fatalf("hangups %d, want 1", c.Stats().Hangups)
		}
	})
	t.Run("a retried write is applied once", func(t *testing.T) {
		client, _ := specClient(t, true)
		coll := client.Database("db").Collection("c")
		if err := client.Database("admin").RunCommand(ctx, fp).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
			t.Fatal(err)
		}
		if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != 1 {
			t.Fatalf("count %d, %v", n, err)
		}
	})
	t.Run("closeConnection false returns the code", func(t *testing.T) {
		client, _ := specClient(t, false)
		coll := client.Database("db").Collection("c")
		fpNoClose := bson.D{fp[0], fp[1], {Key: "data", Value: bson.D{{Key: "failBeforeCommitExceptionCode", Value: 1}, {Key: "closeConnection", Value: false}}}}
		if err := client.Database("admin").RunCommand(ctx, fpNoClose).Err(); err != nil {
			t.Fatal(err)
		}
		err := insertOnce(client)
		if n, cerr := coll.CountDocuments(ctx, bson.D{}); cerr != nil || n != 0 {
			t.Fatalf("count %d, %v: the write must not be committed", n, cerr)
		}
		var se mongo.ServerError
		if err == nil || mongo.IsNetworkError(err) || !asServerError(err, &se) || !se.HasErrorCode(1) {
			t.Fatalf("want error code 1, got %v", err)
		}
	})
}

func asServerError(err error, target *mongo.ServerError) bool {
	se, ok := err.(mongo.ServerError)
	if ok {
		*target = se
	}
	return ok
}

// failCommand's writeConcernError is appended to the reply exactly as
// configured, as mongod does: no codeName is filled in (command monitoring
// "A retryable write with write concern errors publishes success event"
// matches the reply's writeConcernError exactly).
func TestSpecFixWriteConcernErrorVerbatim(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, _ := specClient(t, false)
	if err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"insert"}}, {Key: "writeConcernError", Value: bson.D{{Key: "code", Value: 91}}}}}}).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := client.Database("db").Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
	var we mongo.WriteException
	if !errors.As(err, &we) || we.WriteConcernError == nil {
		t.Fatalf("want a write concern error, got %v", err)
	}
	wce, err := we.Raw.LookupErr("writeConcernError")
	if err != nil {
		t.Fatalf("reply %v", we.Raw)
	}
	elems, _ := wce.Document().Elements()
	if len(elems) != 1 || elems[0].Key() != "code" || elems[0].Value().Int32() != 91 {
		t.Fatalf("writeConcernError %v, want exactly {code: 91}", wce)
	}
}

// $setField, $unsetField and $rand are supported, so pipeline updates can
// set dotted and dollar-prefixed field names (CRUD "*-dots_and_dollars").
func TestSpecFixSetField(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, _ := specClient(t, false)
	coll := client.Database("db").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "y", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	pipeline := bson.A{bson.D{{Key: "$replaceWith", Value: bson.D{{Key: "$setField", Value: bson.D{
		{Key: "field", Value: bson.D{{Key: "$literal", Value: "$a.b"}}}, {Key: "value", Value: 1}, {Key: "input", Value: "$$ROOT"}}}}}},
		bson.D{{Key: "$replaceWith", Value: bson.D{{Key: "$unsetField", Value: bson.D{{Key: "field", Value: "y"}, {Key: "input", Value: "$$ROOT"}}}}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "r", Value: bson.D{{Key: "$rand", Value: bson.D{}}}}}}}}
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, pipeline); err != nil {
		t.Fatal(err)
	}
	var got bson.Raw
	if err := coll.FindOne(ctx, bson.D{}).Decode(&got); err != nil {
		t.Fatal(err)
	}
	elems, _ := got.Elements()
	if len(elems) != 3 || elems[1].Key() != "$a.b" || elems[1].Value().Int32() != 1 || elems[2].Key() != "r" {
		t.Fatalf("got %v, want {_id: 1, $a.b: 1, r: <double>}", got)
	}
	if r := elems[2].Value().Double(); r < 0 || r >= 1 {
		t.Fatalf("$rand gave %v", r)
	}
}

// An aggregate's let values are expressions evaluated once, not literals:
// {$literal: "$bar"} binds the string "$bar" (CRUD "Aggregate with let
// option").
func TestSpecFixAggregateLetEvaluated(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, _ := specClient(t, false)
	coll := client.Database("db").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	cur, err := coll.Aggregate(ctx, bson.A{bson.D{{Key: "$project", Value: bson.D{{Key: "_id", Value: 0}, {Key: "y", Value: "$$y"}, {Key: "z", Value: "$$z"}}}}},
		options.Aggregate().SetLet(bson.D{{Key: "y", Value: bson.D{{Key: "$literal", Value: "$bar"}}}, {Key: "z", Value: bson.D{{Key: "$add", Value: bson.A{1, 2}}}}}))
	if err != nil {
		t.Fatal(err)
	}
	var docs []bson.Raw
	if err := cur.All(ctx, &docs); err != nil {
		t.Fatal(err)
	}
	if len(docs) != 1 || docs[0].Lookup("y").StringValue() != "$bar" || docs[0].Lookup("z").AsInt64() != 3 {
		t.Fatalf("got %v", docs)
	}
}

// $out and $merge refuse a linearizable read concern, as mongod does (CRUD
// "readConcern linearizable with out stage").
func TestSpecFixOutLinearizable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, _ := specClient(t, false)
	db := client.Database("db")
	if _, err := db.Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	run := func(level string) error {
		return db.RunCommand(ctx, bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$out", Value: "o"}}}},
			{Key: "readConcern", Value: bson.D{{Key: "level", Value: level}}}, {Key: "cursor", Value: bson.D{}}}).Err()
	}
	var ce mongo.CommandError
	if err := run("linearizable"); !errors.As(err, &ce) || ce.Code != 72 {
		t.Fatalf("linearizable $out: want InvalidOptions (72), got %v", err)
	}
	if err := run("majority"); err != nil {
		t.Fatalf("majority $out: %v", err)
	}
}

// $listLocalSessions lists the sessions commands used, and endSessions
// removes them (retryable-reads handshakeError runs it).
func TestSpecFixListLocalSessions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, _ := specClient(t, true)
	sess, err := client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	sctx := mongo.NewSessionContext(ctx, sess)
	if err := client.Database("db").RunCommand(sctx, bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
		t.Fatal(err)
	}
	want := sess.ID().Lookup("id")
	listed := func() bool {
		cur, err := client.Database("admin").Aggregate(ctx, mongo.Pipeline{{{Key: "$listLocalSessions", Value: bson.D{}}}})
		if err != nil {
			t.Fatal(err)
		}
		var docs []bson.Raw
		if err := cur.All(ctx, &docs); err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			if d.Lookup("_id", "id").Equal(want) {
				if _, ok := d.Lookup("lastUse").DateTimeOK(); !ok {
					t.Errorf("session without lastUse: %v", d)
				}
				return true
			}
		}
		return false
	}
	if !listed() {
		t.Fatal("the session a ping used is not listed")
	}
	if err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "endSessions", Value: bson.A{sess.ID()}}}).Err(); err != nil {
		t.Fatal(err)
	}
	if listed() {
		t.Error("the session is still listed after endSessions")
	}
	// Any database's aggregate: 1 may run it.
	if cur, err := client.Database("db").Aggregate(ctx, mongo.Pipeline{{{Key: "$listLocalSessions", Value: bson.D{}}}}); err != nil {
		t.Errorf("$listLocalSessions on a database other than admin: %v", err)
	} else {
		cur.Close(ctx)
	}
	sess.EndSession(ctx)
}

// mongod enters onPrimaryTransactionalWrite where a retryable write
// commits, so a retry answered from the transaction history is not dropped
// again: with {times: 2} the first attempt loses its reply, the retry
// succeeds, and one firing is left for the next real write.
func TestSpecFixTransactionalWriteFailPointSkipsReplays(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, c := specClient(t, true)
	coll := client.Database("db").Collection("c")
	fp := bson.D{{Key: "configureFailPoint", Value: "onPrimaryTransactionalWrite"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 2}}},
		{Key: "data", Value: bson.D{{Key: "closeConnection", Value: true}}}}
	if err := client.Database("admin").RunCommand(ctx, fp).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatalf("the driver's retry was dropped too: %v", err)
	}
	if s := c.Stats(); s.FailPointsFired != 1 || s.Replayed != 1 {
		t.Fatalf("fired %d, replayed %d; want 1 and 1", s.FailPointsFired, s.Replayed)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.FailPointsFired != 2 {
		t.Fatalf("the second real write did not enter the fail point: fired %d", s.FailPointsFired)
	}
	if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != 2 {
		t.Fatalf("%d documents, %v", n, err)
	}
}
