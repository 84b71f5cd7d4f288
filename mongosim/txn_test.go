package mongosim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// Transactions are driven by the official Go driver's session API: it is
// an independent client proving mongosim answers as mongod.

func txnSession(t *testing.T, client *mongo.Client) *mongo.Session {
	t.Helper()
	s, err := client.StartSession()
	sdNoErr(t, err)
	t.Cleanup(func() { s.EndSession(context.Background()) })
	return s
}

func labelsOf(err error) []string {
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return ce.Labels
	}
	var we mongo.WriteException
	if errors.As(err, &we) {
		return we.Labels
	}
	return nil
}

func wantCodeLabel(t *testing.T, err error, code int32, label string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want error %d with %s, got success", code, label)
	}
	if got := sdCode(err); got != code {
		t.Fatalf("want code %d, got %d (%v)", code, got, err)
	}
	if label != "" && !slices.Contains(labelsOf(err), label) {
		t.Fatalf("want label %s, got %v (%v)", label, labelsOf(err), err)
	}
}

func countDocs(t *testing.T, ctx context.Context, coll *mongo.Collection, filter any) int64 {
	t.Helper()
	n, err := coll.CountDocuments(ctx, filter)
	sdNoErr(t, err)
	return n
}

func TestTxnSnapshotIsolationAndCommit(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("txn").Collection("iso")
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: 0}})
	sdNoErr(t, err)

	s := txnSession(t, client)
	sdNoErr(t, s.StartTransaction())
	sctx := mongo.NewSessionContext(ctx, s)
	// The first statement fixes the snapshot.
	if n := countDocs(t, sctx, coll, bson.D{}); n != 1 {
		t.Fatalf("in txn: %d docs, want 1", n)
	}
	// A write outside after the snapshot is invisible inside.
	_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}})
	sdNoErr(t, err)
	_, err = coll.InsertOne(sctx, bson.D{{Key: "_id", Value: 2}})
	sdNoErr(t, err)
	_, err = coll.UpdateOne(sctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}})
	sdNoErr(t, err)

	inside := sdFindAll(t, sctx, coll, bson.D{})
	if fmt.Sprint(inside) != fmt.Sprint([]bson.D{{{Key: "_id", Value: int32(1)}, {Key: "v", Value: int32(1)}}, {{Key: "_id", Value: int32(2)}}}) {
		t.Fatalf("inside the transaction: %v", inside)
	}
	outside := sdFindAll(t, ctx, coll, bson.D{})
	if fmt.Sprint(outside) != fmt.Sprint([]bson.D{{{Key: "_id", Value: int32(1)}, {Key: "v", Value: int32(0)}}, {{Key: "_id", Value: int32(3)}}}) {
		t.Fatalf("outside before commit: %v", outside)
	}
	sdNoErr(t, s.CommitTransaction(ctx))
	after := sdFindAll(t, ctx, coll, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if fmt.Sprint(after) != fmt.Sprint([]bson.D{{{Key: "_id", Value: int32(1)}, {Key: "v", Value: int32(1)}}, {{Key: "_id", Value: int32(2)}}, {{Key: "_id", Value: int32(3)}}}) {
		t.Fatalf("after commit: %v", after)
	}
	// A retried commit (same txnNumber) answers as the first.
	sdNoErr(t, s.CommitTransaction(ctx))
	if n := countDocs(t, ctx, coll, bson.D{{Key: "_id", Value: 2}}); n != 1 {
		t.Fatalf("retried commit applied twice or not at all: %d", n)
	}
}

func TestTxnWriteConflict(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("txn").Collection("conflict")
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: 0}})
	sdNoErr(t, err)
	inc := bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 1}}}}

	s1, s2 := txnSession(t, client), txnSession(t, client)
	sdNoErr(t, s1.StartTransaction())
	sdNoErr(t, s2.StartTransaction())
	ctx1, ctx2 := mongo.NewSessionContext(ctx, s1), mongo.NewSessionContext(ctx, s2)
	_, err = coll.UpdateOne(ctx1, bson.D{{Key: "_id", Value: 1}}, inc)
	sdNoErr(t, err)
	// The second writer of an uncommitted document loses.
	_, err = coll.UpdateOne(ctx2, bson.D{{Key: "_id", Value: 1}}, inc)
	wantCodeLabel(t, err, 112, "TransientTransactionError")
	// ...and its transaction is gone.
	err = s2.CommitTransaction(ctx)
	wantCodeLabel(t, err, 251, "TransientTransactionError")
	if slices.Contains(labelsOf(err), "UnknownTransactionCommitResult") {
		t.Fatalf("NoSuchTransaction on commit must not carry UnknownTransactionCommitResult: %v", labelsOf(err))
	}
	sdNoErr(t, s1.CommitTransaction(ctx))

	// A document committed by someone else after the snapshot conflicts too.
	s3 := txnSession(t, client)
	sdNoErr(t, s3.StartTransaction())
	ctx3 := mongo.NewSessionContext(ctx, s3)
	countDocs(t, ctx3, coll, bson.D{})
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, inc)
	sdNoErr(t, err)
	_, err = coll.UpdateOne(ctx3, bson.D{{Key: "_id", Value: 1}}, inc)
	wantCodeLabel(t, err, 112, "TransientTransactionError")
	_ = s3.AbortTransaction(ctx)

	var doc struct{ V int }
	sdNoErr(t, coll.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&doc))
	if doc.V != 2 {
		t.Fatalf("v = %d, want 2 (one committed transaction, one plain update)", doc.V)
	}
}

func TestTxnAbortDiscards(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("txn").Collection("abort")
	s := txnSession(t, client)
	sdNoErr(t, s.StartTransaction())
	sctx := mongo.NewSessionContext(ctx, s)
	_, err := coll.InsertOne(sctx, bson.D{{Key: "_id", Value: 1}})
	sdNoErr(t, err)
	sdNoErr(t, s.AbortTransaction(ctx))
	if n := countDocs(t, ctx, coll, bson.D{}); n != 0 {
		t.Fatalf("aborted insert visible: %d", n)
	}
	// The document is free again for plain writes.
	_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
	sdNoErr(t, err)
}

func TestTxnPlainWriteWaitsForTransaction(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("txn").Collection("wait")
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: 0}})
	sdNoErr(t, err)
	inc := bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 1}}}}
	s := txnSession(t, client)
	sdNoErr(t, s.StartTransaction())
	sctx := mongo.NewSessionContext(ctx, s)
	_, err = coll.UpdateOne(sctx, bson.D{{Key: "_id", Value: 1}}, inc)
	sdNoErr(t, err)

	// maxTimeMS bounds the wait.
	err = client.Database("txn").RunCommand(ctx, bson.D{{Key: "update", Value: "wait"},
		{Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "u", Value: inc}}}},
		{Key: "maxTimeMS", Value: 50}}).Err()
	wantCodeLabel(t, err, 50, "")

	done := make(chan error, 1)
	go func() {
		_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, inc)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("plain write finished while the transaction held the document: %v", err)
	case <-time.After(100 * time.Millisecond):
		// still blocked, as on mongod (this only can fail, never flake into passing)
	}
	sdNoErr(t, s.CommitTransaction(ctx))
	sdNoErr(t, <-done)
	var doc struct{ V int }
	sdNoErr(t, coll.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&doc))
	if doc.V != 2 {
		t.Fatalf("v = %d, want 2: the plain write must apply after the commit", doc.V)
	}
}

func TestTxnWithTransactionConcurrentIncrements(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("txn").Collection("counter")
	_, err := coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: "a"}, {Key: "n", Value: 0}}, bson.D{{Key: "_id", Value: "b"}, {Key: "n", Value: 0}}})
	sdNoErr(t, err)
	const workers, each = 4, 10
	var wg sync.WaitGroup
	var attempts atomic.Int64
	errs := make(chan error, workers+1)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := client.StartSession()
			if err != nil {
				errs <- err
				return
			}
			defer s.EndSession(ctx)
			for i := 0; i < each; i++ {
				_, err := s.WithTransaction(ctx, func(sctx context.Context) (any, error) {
					attempts.Add(1)
					// Move one unit from a to b: both must move together.
					if _, err := coll.UpdateOne(sctx, bson.D{{Key: "_id", Value: "a"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: -1}}}}); err != nil {
						return nil, err
					}
					_, err := coll.UpdateOne(sctx, bson.D{{Key: "_id", Value: "b"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})
					return nil, err
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	// Plain writes to the same documents interleave: each waits for the
	// transaction holding its document.
	const plain = 10
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < plain; i++ {
			for _, id := range []string{"a", "b"} {
				if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}); err != nil {
					errs <- err
					return
				}
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var a, b struct{ N int }
	sdNoErr(t, coll.FindOne(ctx, bson.D{{Key: "_id", Value: "a"}}).Decode(&a))
	sdNoErr(t, coll.FindOne(ctx, bson.D{{Key: "_id", Value: "b"}}).Decode(&b))
	if a.N != -workers*each+plain || b.N != workers*each+plain {
		t.Fatalf("a=%d b=%d, want %d and %d", a.N, b.N, -workers*each+plain, workers*each+plain)
	}
	t.Logf("%d transactions committed in %d attempts", workers*each, attempts.Load())
	var status struct {
		Transactions struct{ TotalStarted, TotalCommitted, TotalAborted, CurrentOpen int64 }
	}
	sdNoErr(t, client.Database("admin").RunCommand(ctx, bson.D{{Key: "serverStatus", Value: 1}}).Decode(&status))
	if tx := status.Transactions; tx.TotalCommitted != workers*each || tx.TotalStarted != attempts.Load() ||
		tx.TotalAborted != tx.TotalStarted-tx.TotalCommitted || tx.CurrentOpen != 0 {
		t.Fatalf("serverStatus.transactions %+v after %d attempts", tx, attempts.Load())
	}
}

func TestTxnLifetimeLimitAborts(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c := StartWithOptions(t, Options{Now: clk.Now})
	client, err := mongo.Connect(options.Client().ApplyURI(c.URI()).SetHeartbeatInterval(500 * time.Millisecond))
	sdNoErr(t, err)
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	ctx := sdCtx(t)
	sdNoErr(t, client.Database("admin").RunCommand(ctx, bson.D{{Key: "setParameter", Value: 1}, {Key: "transactionLifetimeLimitSeconds", Value: 5}}).Err())
	coll := client.Database("txn").Collection("life")
	_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: 0}})
	sdNoErr(t, err)

	s := txnSession(t, client)
	sdNoErr(t, s.StartTransaction())
	sctx := mongo.NewSessionContext(ctx, s)
	_, err = coll.UpdateOne(sctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}})
	sdNoErr(t, err)
	clk.Advance(6 * time.Second)
	// A plain write waiting for the expired transaction's document gets it.
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 2}}}})
	sdNoErr(t, err)
	_, err = coll.InsertOne(sctx, bson.D{{Key: "_id", Value: 2}})
	wantCodeLabel(t, err, 251, "TransientTransactionError")
	_ = s.AbortTransaction(ctx)
	var doc struct{ V int }
	sdNoErr(t, coll.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&doc))
	if doc.V != 2 {
		t.Fatalf("v = %d, want 2 (expired transaction's write discarded)", doc.V)
	}

	// An idle expired transaction is reaped without anyone touching it.
	s2 := txnSession(t, client)
	sdNoErr(t, s2.StartTransaction())
	_, err = coll.InsertOne(mongo.NewSessionContext(ctx, s2), bson.D{{Key: "_id", Value: 3}})
	sdNoErr(t, err)
	aborted := c.Stats().TxnAborted
	clk.Advance(6 * time.Second)
	for deadline := time.Now().Add(10 * time.Second); c.Stats().TxnAborted == aborted; {
		if time.Now().After(deadline) {
			t.Fatal("expired transaction not reaped within 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	wantCodeLabel(t, s2.CommitTransaction(ctx), 251, "TransientTransactionError")
}

func TestTxnStepDownAborts(t *testing.T) {
	c := StartWithOptions(t, Options{Members: 2})
	client, err := mongo.Connect(options.Client().ApplyURI(c.URI()).SetHeartbeatInterval(500 * time.Millisecond))
	sdNoErr(t, err)
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	ctx := sdCtx(t)
	coll := client.Database("txn").Collection("stepdown")
	_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 0}})
	sdNoErr(t, err)
	s := txnSession(t, client)
	sdNoErr(t, s.StartTransaction())
	sctx := mongo.NewSessionContext(ctx, s)
	_, err = coll.InsertOne(sctx, bson.D{{Key: "_id", Value: 1}})
	sdNoErr(t, err)
	sdNoErr(t, c.StepDown(ctx))
	// The driver retries the commit on the new primary, which knows the
	// transaction was aborted.
	err = s.CommitTransaction(ctx)
	if err == nil {
		t.Fatal("commit after step-down succeeded")
	}
	if code := sdCode(err); code != 251 && code != 10107 {
		t.Fatalf("commit after step-down: %v", err)
	}
	if n := countDocs(t, ctx, coll, bson.D{{Key: "_id", Value: 1}}); n != 0 {
		t.Fatalf("aborted transaction's insert is visible")
	}
}

func TestTxnFailCommandOnCommit(t *testing.T) {
	client, c := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("txn").Collection("failcommit")
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 0}})
	sdNoErr(t, err)
	sdNoErr(t, c.SetFailPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"commitTransaction"}}, {Key: "errorCode", Value: 91}}}}))
	s := txnSession(t, client)
	_, err = s.WithTransaction(ctx, func(sctx context.Context) (any, error) {
		return coll.InsertOne(sctx, bson.D{{Key: "_id", Value: 1}})
	})
	// ShutdownInProgress on commit is retryable: the driver retries the
	// commit, which then succeeds.
	sdNoErr(t, err)
	if n := countDocs(t, ctx, coll, bson.D{{Key: "_id", Value: 1}}); n != 1 {
		t.Fatalf("committed %d docs, want 1", n)
	}
	if c.Stats().FailPointsFired < 1 {
		t.Fatal("fail point on commitTransaction never fired")
	}

	// An error on commit from the fail point keeps the transaction open.
	sdNoErr(t, c.SetFailPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"commitTransaction"}}, {Key: "errorCode", Value: 50}}}}))
	s2 := txnSession(t, client)
	sdNoErr(t, s2.StartTransaction())
	_, err = coll.InsertOne(mongo.NewSessionContext(ctx, s2), bson.D{{Key: "_id", Value: 2}})
	sdNoErr(t, err)
	fired := c.Stats().FailPointsFired
	err = s2.CommitTransaction(ctx)
	// MaxTimeMSExpired is not retried by the driver; mongod labels it.
	wantCodeLabel(t, err, 50, "UnknownTransactionCommitResult")
	if c.Stats().FailPointsFired != fired+1 {
		t.Fatal("fail point did not fire on the commit")
	}
	// The transaction is still open and commits.
	sdNoErr(t, s2.CommitTransaction(ctx))
	if n := countDocs(t, ctx, coll, bson.D{{Key: "_id", Value: 2}}); n != 1 {
		t.Fatalf("committed %d docs, want 1", n)
	}
}

func TestTxnRefusedCommandsAndOptions(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("txn")
	coll := db.Collection("refuse")
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 0}})
	sdNoErr(t, err)

	run := func(opts *options.TransactionOptionsBuilder, first bson.D, second bson.D) (error, error) {
		s := txnSession(t, client)
		sdNoErr(t, s.StartTransaction(opts))
		sctx := mongo.NewSessionContext(ctx, s)
		e1 := db.RunCommand(sctx, first).Err()
		var e2 error
		if second != nil {
			e2 = db.RunCommand(sctx, second).Err()
		}
		_ = s.AbortTransaction(ctx)
		return e1, e2
	}
	e, _ := run(nil, bson.D{{Key: "count", Value: "refuse"}}, nil)
	wantCodeLabel(t, e, 263, "")
	if slices.Contains(labelsOf(e), "TransientTransactionError") {
		t.Fatalf("count refusal labelled transient: %v", labelsOf(e))
	}
	_, e = run(nil, bson.D{{Key: "find", Value: "refuse"}}, bson.D{{Key: "find", Value: "refuse"}, {Key: "readConcern", Value: bson.D{{Key: "level", Value: "local"}}}})
	wantCodeLabel(t, e, 72, "")
	e, _ = run(nil, bson.D{{Key: "insert", Value: "refuse"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 5}}}}, {Key: "writeConcern", Value: bson.D{{Key: "w", Value: 1}}}}, nil)
	wantCodeLabel(t, e, 72, "")
	// create of an existing collection is an error inside a transaction.
	e, _ = run(nil, bson.D{{Key: "create", Value: "refuse"}}, nil)
	wantCodeLabel(t, e, 48, "")
	e, _ = run(nil, bson.D{{Key: "find", Value: "refuse"}, {Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}, {Key: "atClusterTime", Value: bson.Timestamp{T: 1}}}}}, nil)
	wantCodeLabel(t, e, 238, "")

	// Read concern snapshot and majority are accepted; a w:majority commit works.
	for _, rc := range []*readconcern.ReadConcern{readconcern.Snapshot(), readconcern.Majority(), readconcern.Local()} {
		s := txnSession(t, client)
		sdNoErr(t, s.StartTransaction(options.Transaction().SetReadConcern(rc).SetWriteConcern(writeconcern.Majority())))
		sctx := mongo.NewSessionContext(ctx, s)
		if n := countDocs(t, sctx, coll, bson.D{}); n != 1 {
			t.Fatalf("read concern %s: %d docs", rc.Level, n)
		}
		sdNoErr(t, s.CommitTransaction(ctx))
	}
	if n := countDocs(t, ctx, coll, bson.D{{Key: "_id", Value: 5}}); n != 0 {
		t.Fatal("refused statement's write is visible")
	}
}

func TestTxnCreatesCollectionAtCommit(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("txncreate")
	names := func() []string {
		n, err := db.ListCollectionNames(ctx, bson.D{})
		sdNoErr(t, err)
		slices.Sort(n)
		return n
	}
	s := txnSession(t, client)
	sdNoErr(t, s.StartTransaction())
	sctx := mongo.NewSessionContext(ctx, s)
	sdNoErr(t, db.CreateCollection(sctx, "explicit"))
	_, err := db.Collection("implicit").InsertOne(sctx, bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: 1}})
	sdNoErr(t, err)
	_, err = db.Collection("explicit").Indexes().CreateOne(sctx, mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}, Options: options.Index().SetUnique(true)})
	sdNoErr(t, err)
	if got := names(); len(got) != 0 {
		t.Fatalf("collections visible before commit: %v", got)
	}
	sdNoErr(t, s.CommitTransaction(ctx))
	if got := names(); fmt.Sprint(got) != "[explicit implicit]" {
		t.Fatalf("after commit: %v", got)
	}
	// The index built in the transaction is live.
	_, err = db.Collection("explicit").InsertMany(ctx, []any{bson.D{{Key: "k", Value: 1}}, bson.D{{Key: "k", Value: 1}}})
	if codes := sdWriteCodes(err); fmt.Sprint(codes) != "[11000]" {
		t.Fatalf("unique index from the transaction not enforced: %v", err)
	}
	// Indexes on an existing collection are refused inside a transaction.
	s2 := txnSession(t, client)
	sdNoErr(t, s2.StartTransaction())
	_, err = db.Collection("implicit").Indexes().CreateOne(mongo.NewSessionContext(ctx, s2), mongo.IndexModel{Keys: bson.D{{Key: "z", Value: 1}}})
	wantCodeLabel(t, err, 263, "")
	_ = s2.AbortTransaction(ctx)
}

func TestTxnPointReadsThenScanKeepNaturalOrder(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("txn").Collection("order")
	_, err := coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "_id", Value: 3}}})
	sdNoErr(t, err)
	s := txnSession(t, client)
	sdNoErr(t, s.StartTransaction())
	sctx := mongo.NewSessionContext(ctx, s)
	_, err = coll.UpdateOne(sctx, bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}})
	sdNoErr(t, err)
	_, err = coll.DeleteOne(sctx, bson.D{{Key: "_id", Value: 1}})
	sdNoErr(t, err)
	_, err = coll.InsertOne(sctx, bson.D{{Key: "_id", Value: 0}})
	sdNoErr(t, err)
	// Changed outside after the snapshot: unchanged inside.
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "$set", Value: bson.D{{Key: "y", Value: 1}}}})
	sdNoErr(t, err)
	got := sdFindAll(t, sctx, coll, bson.D{})
	want := []bson.D{{{Key: "_id", Value: int32(2)}}, {{Key: "_id", Value: int32(3)}, {Key: "x", Value: int32(1)}}, {{Key: "_id", Value: int32(0)}}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("inside: %v, want %v", got, want)
	}
	sdNoErr(t, s.CommitTransaction(ctx))
	got = sdFindAll(t, ctx, coll, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	want = []bson.D{{{Key: "_id", Value: int32(0)}}, {{Key: "_id", Value: int32(2)}, {Key: "y", Value: int32(1)}}, {{Key: "_id", Value: int32(3)}, {Key: "x", Value: int32(1)}}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after commit: %v, want %v", got, want)
	}
}

// TestTxnServerAnswersOnTheWire checks the exact answers (codes, labels,
// idempotent commit) a driver relies on, with hand-built commands.
func TestTxnServerAnswersOnTheWire(t *testing.T) {
	c := StartWithOptions(t, Options{})
	rc := dialRaw(t, c.Members()[0].Addr())
	lsid := bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: []byte("0123456789abcdef")}}}
	cmd := func(n int64, start bool, body ...bson.E) bson.Raw {
		t.Helper()
		d := bson.D(body)
		d = append(d, bson.E{Key: "lsid", Value: lsid}, bson.E{Key: "txnNumber", Value: n}, bson.E{Key: "autocommit", Value: false}, bson.E{Key: "$db", Value: "wire"})
		if start {
			d = append(d, bson.E{Key: "startTransaction", Value: true})
		}
		if body[0].Key == "commitTransaction" || body[0].Key == "abortTransaction" {
			d[len(d)-1-boolInt(start)].Value = "admin"
		}
		reply, err := rc.msg(d)
		sdNoErr(t, err)
		return reply
	}
	expect := func(reply bson.Raw, code int32, labels ...string) {
		t.Helper()
		got, _ := reply.Lookup("code").Int32OK()
		if code == 0 {
			if ok, _ := reply.Lookup("ok").AsFloat64OK(); ok != 1 {
				t.Fatalf("want ok, got %v", reply)
			}
			return
		}
		if got != code {
			t.Fatalf("want code %d, got %v", code, reply)
		}
		var have []string
		if arr, ok := reply.Lookup("errorLabels").ArrayOK(); ok {
			vals, _ := arr.Values()
			for _, v := range vals {
				have = append(have, v.StringValue())
			}
		}
		if fmt.Sprint(have) != fmt.Sprint(labels) && !(len(have) == 0 && len(labels) == 0) {
			t.Fatalf("code %d: labels %v, want %v", code, have, labels)
		}
	}
	ins := func(id int) bson.E { return bson.E{Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: id}}}} }
	coll := bson.E{Key: "insert", Value: "c"}

	expect(cmd(1, true, coll, ins(1)), 0)
	expect(cmd(1, true, coll, ins(2)), cmderr.ConflictingOperationInProgress)
	expect(cmd(2, false, coll, ins(2)), cmderr.NoSuchTransaction, "TransientTransactionError")
	expect(cmd(1, false, coll, ins(3), bson.E{Key: "readConcern", Value: bson.D{{Key: "level", Value: "local"}}}), cmderr.InvalidOptions)
	// That error aborted transaction 1.
	expect(cmd(1, false, bson.E{Key: "commitTransaction", Value: 1}), cmderr.NoSuchTransaction, "TransientTransactionError")

	expect(cmd(3, true, coll, ins(3)), 0)
	reply := cmd(3, false, bson.E{Key: "commitTransaction", Value: 1}, bson.E{Key: "writeConcern", Value: bson.D{{Key: "w", Value: 5}}})
	expect(reply, 0)
	if code, _ := reply.Lookup("writeConcernError", "code").Int32OK(); code != cmderr.UnsatisfiableWriteConcern {
		t.Fatalf("commit with w:5 on a one-member set: %v", reply)
	}
	reply = cmd(3, false, bson.E{Key: "commitTransaction", Value: 1})
	expect(reply, 0) // retried commit: ok again
	expect(cmd(3, false, bson.E{Key: "abortTransaction", Value: 1}), cmderr.TransactionCommitted)
	expect(cmd(3, false, coll, ins(4)), cmderr.TransactionCommitted)
	expect(cmd(2, true, coll, ins(4)), cmderr.TransactionTooOld)

	expect(cmd(4, true, coll, ins(5)), 0)
	expect(cmd(4, false, bson.E{Key: "abortTransaction", Value: 1}), 0)
	expect(cmd(4, false, bson.E{Key: "abortTransaction", Value: 1}), cmderr.NoSuchTransaction, "TransientTransactionError")

	reply, err := rc.msg(bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{}}, {Key: "$db", Value: "wire"}})
	sdNoErr(t, err)
	docs, _ := reply.Lookup("cursor", "firstBatch").Array().Values()
	if len(docs) != 1 || docs[0].Document().Lookup("_id").Int32() != 3 {
		t.Fatalf("committed documents: %v", reply)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestTxnCommitUniqueConflictAppliesNothing(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("txn").Collection("uniq")
	_, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}, Options: options.Index().SetUnique(true)})
	sdNoErr(t, err)
	s := txnSession(t, client)
	sdNoErr(t, s.StartTransaction())
	sctx := mongo.NewSessionContext(ctx, s)
	_, err = coll.InsertOne(sctx, bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: 0}})
	sdNoErr(t, err)
	_, err = coll.InsertOne(sctx, bson.D{{Key: "_id", Value: 2}, {Key: "k", Value: 1}})
	sdNoErr(t, err)
	_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}, {Key: "k", Value: 1}})
	sdNoErr(t, err)
	err = s.CommitTransaction(ctx)
	wantCodeLabel(t, err, 11000, "")
	if n := countDocs(t, ctx, coll, bson.D{}); n != 1 {
		t.Fatalf("%d documents after a failed commit, want only the outside one", n)
	}
}

func TestTxnConcurrentCreateSameIDConflictsAtCommit(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("txn").Collection("fresh")
	s1, s2 := txnSession(t, client), txnSession(t, client)
	sdNoErr(t, s1.StartTransaction())
	sdNoErr(t, s2.StartTransaction())
	_, err := coll.InsertOne(mongo.NewSessionContext(ctx, s1), bson.D{{Key: "_id", Value: 1}, {Key: "by", Value: "s1"}})
	sdNoErr(t, err)
	_, err = coll.InsertOne(mongo.NewSessionContext(ctx, s2), bson.D{{Key: "_id", Value: 1}, {Key: "by", Value: "s2"}})
	sdNoErr(t, err)
	sdNoErr(t, s1.CommitTransaction(ctx))
	err = s2.CommitTransaction(ctx)
	wantCodeLabel(t, err, 112, "TransientTransactionError")
	var doc struct{ By string }
	sdNoErr(t, coll.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&doc))
	if doc.By != "s1" {
		t.Fatalf("document by %q, want the first committer's", doc.By)
	}
}

func TestTxnKillAndEndSessionsAbort(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("txn").Collection("kill")
	for _, kill := range []func(s *mongo.Session) error{
		func(*mongo.Session) error {
			return client.Database("admin").RunCommand(ctx, bson.D{{Key: "killAllSessions", Value: bson.A{}}}).Err()
		},
		func(s *mongo.Session) error {
			return client.Database("admin").RunCommand(ctx, bson.D{{Key: "killSessions", Value: bson.A{s.ID()}}}).Err()
		},
	} {
		s := txnSession(t, client)
		sdNoErr(t, s.StartTransaction())
		_, err := coll.InsertOne(mongo.NewSessionContext(ctx, s), bson.D{{Key: "v", Value: 1}})
		sdNoErr(t, err)
		sdNoErr(t, kill(s))
		wantCodeLabel(t, s.CommitTransaction(ctx), 251, "TransientTransactionError")
	}
	// Ending a session aborts its transaction: the document it held is free.
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "held"}})
	sdNoErr(t, err)
	s, err := client.StartSession()
	sdNoErr(t, err)
	sdNoErr(t, s.StartTransaction())
	_, err = coll.UpdateOne(mongo.NewSessionContext(ctx, s), bson.D{{Key: "_id", Value: "held"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "by", Value: "txn"}}}})
	sdNoErr(t, err)
	sdNoErr(t, client.Database("admin").RunCommand(ctx, bson.D{{Key: "endSessions", Value: bson.A{s.ID()}}}).Err())
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = coll.UpdateOne(wctx, bson.D{{Key: "_id", Value: "held"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "by", Value: "plain"}}}})
	sdNoErr(t, err)
	s.EndSession(ctx)
	if n := countDocs(t, ctx, coll, bson.D{{Key: "v", Value: 1}}); n != 0 {
		t.Fatalf("killed transactions committed %d documents", n)
	}
}

func TestTxnCollectionDroppedUnderneathConflictsAtCommit(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("txn").Collection("dropped")
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
	sdNoErr(t, err)
	s := txnSession(t, client)
	sdNoErr(t, s.StartTransaction())
	_, err = coll.UpdateOne(mongo.NewSessionContext(ctx, s), bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}})
	sdNoErr(t, err)
	sdNoErr(t, coll.Drop(ctx))
	wantCodeLabel(t, s.CommitTransaction(ctx), 112, "TransientTransactionError")
	names, err := client.Database("txn").ListCollectionNames(ctx, bson.D{{Key: "name", Value: "dropped"}})
	sdNoErr(t, err)
	if len(names) != 0 {
		t.Fatal("the failed commit recreated the dropped collection")
	}
}
