package sturdy_test

import (
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/mongosim"
)

// txnRulesClient connects to a fresh mongosim replica set with command
// monitoring.
func txnRulesClient(t *testing.T, edit func(*sturdy.Options)) (*sturdy.Client, *recorder) {
	t.Helper()
	sim := mongosim.Start(t)
	rec := &recorder{}
	c := connect(t, sim.URI(), func(o *sturdy.Options) {
		o.Monitor = rec.monitor()
		if edit != nil {
			edit(o)
		}
	})
	return c, rec
}

// A collection whose write concern is w: 0 writes inside a transaction as
// ordinary statements (transactions spec, "writeConcern"): acknowledged,
// without a writeConcern field, part of the transaction (an abort undoes
// them, a commit with the transaction's write concern makes them visible).
func TestUnacknowledgedCollectionWritesInTransaction(t *testing.T) {
	c, rec := txnRulesClient(t, nil)
	ctx := testCtx(t)
	w0 := c.Database("db").Collection("c", &sturdy.CollectionOptions{WriteConcern: &sturdy.WriteConcern{W: 0}})
	if _, err := c.Database("db").Collection("c").InsertOne(ctx, d("_id", 0, "n", 0)); err != nil {
		t.Fatal(err)
	}
	s, err := c.StartSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.EndSession(ctx)

	run := func() {
		t.Helper()
		if r, err := w0.InsertOne(ctx, d("_id", 1), &sturdy.InsertOneOptions{Session: s}); err != nil || !r.Acknowledged {
			t.Fatalf("InsertOne in a transaction: %+v, %v", r, err)
		}
		if r, err := w0.InsertMany(ctx, []any{d("_id", 2), d("_id", 3)}, &sturdy.InsertManyOptions{Session: s}); err != nil || !r.Acknowledged {
			t.Fatalf("InsertMany: %+v, %v", r, err)
		}
		if r, err := w0.UpdateOne(ctx, d("_id", 0), d("$inc", d("n", 1)), &sturdy.UpdateOptions{Session: s}); err != nil || !r.Acknowledged || r.ModifiedCount != 1 {
			t.Fatalf("UpdateOne: %+v, %v", r, err)
		}
		if r, err := w0.DeleteOne(ctx, d("_id", 3), &sturdy.DeleteOptions{Session: s}); err != nil || !r.Acknowledged || r.DeletedCount != 1 {
			t.Fatalf("DeleteOne: %+v, %v", r, err)
		}
		if r, err := w0.BulkWrite(ctx, []sturdy.WriteModel{sturdy.InsertOneModel{Document: d("_id", 4)}},
			&sturdy.BulkWriteOptions{Session: s}); err != nil || !r.Acknowledged || r.InsertedCount != 1 {
			t.Fatalf("BulkWrite: %+v, %v", r, err)
		}
		var got bson.M
		if err := w0.FindOneAndUpdate(ctx, d("_id", 0), d("$inc", d("n", 1)),
			&sturdy.FindOneAndUpdateOptions{Session: s, ReturnDocument: sturdy.After}).Decode(&got); err != nil || got["n"] != int32(2) {
			t.Fatalf("FindOneAndUpdate: %v, %v", got, err)
		}
	}
	ids := func() []any {
		t.Helper()
		var docs []bson.M
		cur, err := c.Database("db").Collection("c").Find(ctx, d("_id", d("$gt", 0)))
		if err != nil {
			t.Fatal(err)
		}
		if err := cur.All(ctx, &docs); err != nil {
			t.Fatal(err)
		}
		var out []any
		for _, doc := range docs {
			out = append(out, doc["_id"])
		}
		return out
	}

	// Aborted: nothing of it stays, so every write was in the transaction.
	if err := s.StartTransaction(&sturdy.TransactionOptions{WriteConcern: &sturdy.WriteConcern{W: "majority"}}); err != nil {
		t.Fatal(err)
	}
	rec.reset()
	run()
	for _, e := range rec.started {
		if has(e.Command, "writeConcern") || !has(e.Command, "txnNumber") || commandField(e, "autocommit").Boolean() {
			t.Errorf("%s in a transaction: %s (want txnNumber, autocommit false, no writeConcern)", e.CommandName, e.Command)
		}
	}
	if err := s.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ids(); len(got) != 0 {
		t.Fatalf("after abort the transaction's documents are visible: %v", got)
	}

	// Committed with the transaction's write concern: all of it visible.
	if err := s.StartTransaction(&sturdy.TransactionOptions{WriteConcern: &sturdy.WriteConcern{W: "majority"}}); err != nil {
		t.Fatal(err)
	}
	run()
	rec.reset()
	if err := s.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	commits := rec.startedNamed("commitTransaction")
	if len(commits) != 1 || commandField(commits[0], "writeConcern").Document().Lookup("w").StringValue() != "majority" {
		t.Fatalf("commit: %v", commits)
	}
	if got := ids(); len(got) != 3 { // 1, 2 and 4; 3 was deleted
		t.Fatalf("after commit: %v", got)
	}

	// Outside a transaction the session is still refused for w: 0.
	if _, err := w0.InsertOne(ctx, d("_id", 9), &sturdy.InsertOneOptions{Session: s}); !errors.Is(err, sturdy.ErrUnacknowledgedSession) {
		t.Fatalf("w: 0 with a session outside a transaction: %v", err)
	}
}

// Client.BulkWrite inside a transaction: the client's w: 0 gives way to
// the transaction's write concern; an explicit write concern is refused
// before anything is sent.
func TestClientBulkWriteWriteConcernInTransaction(t *testing.T) {
	c, rec := txnRulesClient(t, func(o *sturdy.Options) { o.WriteConcern = &sturdy.WriteConcern{W: 0} })
	ctx := testCtx(t)
	s, err := c.StartSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.EndSession(ctx)
	if err := s.StartTransaction(&sturdy.TransactionOptions{WriteConcern: &sturdy.WriteConcern{W: 1}}); err != nil {
		t.Fatal(err)
	}
	models := []sturdy.ClientWriteModel{{Database: "db", Collection: "c", Model: sturdy.InsertOneModel{Document: d("_id", 1)}}}
	rec.reset()
	_, err = c.BulkWrite(ctx, models, &sturdy.ClientBulkWriteOptions{Session: s, WriteConcern: &sturdy.WriteConcern{W: 1}})
	if !errors.Is(err, sturdy.ErrTransactionWriteConcern) {
		t.Fatalf("explicit write concern in a transaction: %v", err)
	}
	if n := len(rec.startedNamed("bulkWrite")); n != 0 {
		t.Fatalf("%d bulkWrite commands sent for a refused write", n)
	}
	if s.TransactionState() != sturdy.TransactionStarting {
		t.Fatalf("transaction state %v after a refused write, want starting", s.TransactionState())
	}
	r, err := c.BulkWrite(ctx, models, &sturdy.ClientBulkWriteOptions{Session: s})
	if err != nil || !r.Acknowledged || r.InsertedCount != 1 {
		t.Fatalf("client w: 0 in a transaction: %+v, %v", r, err)
	}
	sent := rec.startedNamed("bulkWrite")
	if len(sent) != 1 || has(sent[0].Command, "writeConcern") || !commandField(sent[0], "startTransaction").Boolean() {
		t.Fatalf("bulkWrite in a transaction: %v", sent)
	}
	if err := s.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
}

// A transaction reads from the primary only: a read preference other than
// primary, the transaction's or RunCommand's own, is refused before
// anything is sent; a collection's or database's read preference gives way
// to the transaction's (transactions spec, "readPreference").
func TestTransactionReadPreference(t *testing.T) {
	c, rec := txnRulesClient(t, nil)
	ctx := testCtx(t)
	secondary := &sturdy.ReadPreference{Mode: sturdy.SecondaryMode}
	db := c.Database("db")
	if _, err := db.Collection("c").InsertOne(ctx, d("_id", 1)); err != nil {
		t.Fatal(err)
	}
	s, err := c.StartSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.EndSession(ctx)

	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, sturdy.ErrTransactionReadPreference) {
			t.Errorf("%s: %v, want ErrTransactionReadPreference", what, err)
		}
		if len(rec.started) != 0 {
			t.Errorf("%s: %d commands sent", what, len(rec.started))
		}
		rec.reset()
	}

	// The operation's own read preference, in a primary transaction.
	if err := s.StartTransaction(nil); err != nil {
		t.Fatal(err)
	}
	rec.reset()
	_, err = db.RunCommand(ctx, d("find", "c"), &sturdy.RunCommandOptions{Session: s, ReadPreference: secondary})
	refused("RunCommand with a secondary read preference", err)
	_, err = db.RunCursorCommand(ctx, d("find", "c"), &sturdy.RunCursorCommandOptions{Session: s, ReadPreference: secondary})
	refused("RunCursorCommand with a secondary read preference", err)
	// The collection's and database's read preference give way.
	onSecondary := c.Database("db", &sturdy.DatabaseOptions{ReadPreference: secondary})
	if n, err := onSecondary.Collection("c").CountDocuments(ctx, d(), &sturdy.CountOptions{Session: s}); err != nil || n != 1 {
		t.Fatalf("secondary collection in a primary transaction: %d, %v", n, err)
	}
	if _, err := onSecondary.RunCommand(ctx, d("find", "c"), &sturdy.RunCommandOptions{Session: s}); err != nil {
		t.Fatalf("RunCommand on a secondary database in a primary transaction: %v", err)
	}
	for _, e := range rec.started {
		if has(e.Command, "$readPreference") {
			t.Errorf("%s in a primary transaction sent %s", e.CommandName, e.Command)
		}
	}
	if err := s.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}

	// The transaction's read preference.
	if err := s.StartTransaction(&sturdy.TransactionOptions{ReadPreference: secondary}); err != nil {
		t.Fatal(err)
	}
	rec.reset()
	_, err = db.RunCommand(ctx, d("ping", 1), &sturdy.RunCommandOptions{Session: s})
	refused("RunCommand in a secondary transaction", err)
	_, err = db.Collection("c").Find(ctx, d(), &sturdy.FindOptions{Session: s})
	refused("Find in a secondary transaction", err)
	err = db.Collection("c").FindOne(ctx, d(), &sturdy.FindOneOptions{Session: s}).Err()
	refused("FindOne in a secondary transaction", err)
	// Writes are not checked (the spec forbids validating them).
	if _, err := db.Collection("c").InsertOne(ctx, d("_id", 2), &sturdy.InsertOneOptions{Session: s}); err != nil {
		t.Fatalf("write in a secondary transaction: %v", err)
	}
	if err := s.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
}

// An ordered BulkWrite whose first write fails writes nothing: the error
// comes with a partial result whose counts are all zero (CRUD spec,
// BulkWriteException's writeResult), whether the write failed on its own
// (a write error) or its whole command did (a command error).
func TestBulkWriteFirstWriteFailsHasZeroPartialResult(t *testing.T) {
	sim := mongosim.Start(t)
	c := connect(t, sim.URI(), nil)
	ctx := testCtx(t)
	coll := c.Database("db").Collection("c")
	if _, err := coll.InsertOne(ctx, d("_id", 1)); err != nil {
		t.Fatal(err)
	}
	models := []sturdy.WriteModel{
		sturdy.InsertOneModel{Document: d("_id", 1)},
		sturdy.InsertOneModel{Document: d("_id", 2)},
		sturdy.UpdateOneModel{Filter: d("_id", 1), Update: d("$set", d("x", 1))},
	}
	check := func(what string, err error) *sturdy.BulkWriteException {
		t.Helper()
		var bwe *sturdy.BulkWriteException
		if !errors.As(err, &bwe) {
			t.Fatalf("%s: %T %v, want a *BulkWriteException", what, err, err)
		}
		if pr := bwe.PartialResult; pr == nil || pr.InsertedCount+pr.MatchedCount+pr.ModifiedCount+pr.DeletedCount+pr.UpsertedCount != 0 || len(pr.UpsertedIDs) != 0 {
			t.Fatalf("%s: partial result %+v, want all zero", what, bwe.PartialResult)
		}
		return bwe
	}

	_, err := coll.BulkWrite(ctx, models)
	if bwe := check("duplicate key at index 0", err); len(bwe.WriteErrors) != 1 || bwe.WriteErrors[0].Index != 0 {
		t.Fatalf("write errors %+v", bwe.WriteErrors)
	}

	if err := sim.SetFailPoint(d("configureFailPoint", "failCommand", "mode", d("times", 1),
		"data", d("failCommands", bson.A{"insert"}, "errorCode", 8))); err != nil {
		t.Fatal(err)
	}
	models[0] = sturdy.InsertOneModel{Document: d("_id", 3)}
	_, err = coll.BulkWrite(ctx, models)
	var ce *sturdy.CommandError
	if bwe := check("command error on the first command", err); !errors.As(err, &ce) || ce.Code != 8 || len(bwe.WriteErrors) != 0 {
		t.Fatalf("command error: %v", err)
	}
	if n, err := coll.CountDocuments(ctx, d()); err != nil || n != 1 {
		t.Fatalf("%d documents after the failed writes, %v", n, err)
	}
}
