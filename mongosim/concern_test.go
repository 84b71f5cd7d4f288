package mongosim

import (
	"bytes"
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	mevent "go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// Tests of write concern, read concern and
// cluster time as mongod 8.0 answers them, with the official Go driver as
// the client.

// wceOf returns the write concern error of a driver write error.
func wceOf(t *testing.T, err error) *mongo.WriteConcernError {
	t.Helper()
	var we mongo.WriteException
	if !errors.As(err, &we) || we.WriteConcernError == nil {
		t.Fatalf("want a write concern error, got %T %v", err, err)
	}
	return we.WriteConcernError
}

func TestWriteConcernUnsatisfiable(t *testing.T) {
	c := StartWithOptions(t, Options{Members: 3})
	ctx := testCtx(t)
	client := connect(t, c.URI())
	db := client.Database("db")
	coll := db.Collection("wc")

	// w: 4 on three data-bearing members: the write is applied, and the
	// reply carries writeConcernError 100 (ok: 1), as on mongod.
	w4 := db.Collection("wc", options.Collection().SetWriteConcern(&writeconcern.WriteConcern{W: 4}))
	_, err := w4.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
	wce := wceOf(t, err)
	if wce.Code != cmderr.UnsatisfiableWriteConcern || wce.Name != "UnsatisfiableWriteConcern" || wce.Message != "Not enough data-bearing nodes" {
		t.Fatalf("write concern error %+v", wce)
	}
	if n, err := coll.CountDocuments(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil || n != 1 {
		t.Fatalf("the write must be applied: count %d, %v", n, err)
	}
	wantInfo := bson.D{{Key: "writeConcern", Value: bson.D{{Key: "w", Value: int32(4)}, {Key: "wtimeout", Value: int32(0)}, {Key: "provenance", Value: "clientSupplied"}}}}
	if want, _ := bson.Marshal(wantInfo); !bytes.Equal(wce.Details, want) {
		t.Fatalf("errInfo %v, want %v", wce.Details, bson.Raw(want))
	}

	// An unknown tag: 79, with mongod's message.
	tag := db.Collection("wc", options.Collection().SetWriteConcern(&writeconcern.WriteConcern{W: "blah"}))
	_, err = tag.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}})
	wce = wceOf(t, err)
	if wce.Code != cmderr.UnknownReplWriteConcern || wce.Name != "UnknownReplWriteConcern" ||
		wce.Message != "No write concern mode named 'blah' found in replica set configuration" {
		t.Fatalf("write concern error %+v", wce)
	}

	// The raw reply, as the read/write concern spec shows mongod's.
	_, err = runCmd(ctx, db, bson.D{{Key: "insert", Value: "wc"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 2}}}},
		{Key: "writeConcern", Value: bson.D{{Key: "w", Value: "blah"}}}})
	var wex mongo.WriteException
	if !errors.As(err, &wex) {
		t.Fatalf("want a write exception, got %v", err)
	}
	raw := wex.Raw
	if ok := raw.Lookup("ok").Double(); ok != 1 {
		t.Fatalf("ok %v in %v", ok, raw)
	}
	if n := raw.Lookup("n").Int32(); n != 1 {
		t.Fatalf("n %d in %v", n, raw)
	}
	for _, k := range []string{"opTime", "electionId", "writeConcernError", "$clusterTime", "operationTime"} {
		if _, err := raw.LookupErr(k); err != nil {
			t.Fatalf("reply lacks %s: %v", k, raw)
		}
	}
	if got := raw.Lookup("writeConcernError", "errInfo", "writeConcern", "w").StringValue(); got != "blah" {
		t.Fatalf("errInfo.writeConcern.w %q", got)
	}
	// A DDL command takes a write concern as well.
	_, err = runCmd(ctx, db, bson.D{{Key: "create", Value: "other"}, {Key: "writeConcern", Value: bson.D{{Key: "w", Value: 7}}}})
	var sErr mongo.ServerError
	if !errors.As(err, &sErr) || !sErr.HasErrorCode(cmderr.UnsatisfiableWriteConcern) {
		t.Fatalf("create with w: 7: %v", err)
	}

	// So does aggregate with $merge (and $out).
	_, err = runCmd(ctx, db, bson.D{{Key: "aggregate", Value: "wc"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$merge", Value: "merged"}}}},
		{Key: "cursor", Value: bson.D{}}, {Key: "writeConcern", Value: bson.D{{Key: "w", Value: 7}}}})
	if !errors.As(err, &sErr) || !sErr.HasErrorCode(cmderr.UnsatisfiableWriteConcern) {
		t.Fatalf("aggregate $merge with w: 7: %v", err)
	}
	if n, _ := db.Collection("merged").CountDocuments(ctx, bson.D{}); n != 2 {
		t.Fatalf("$merge with an unsatisfiable write concern must still write: %d", n)
	}

	// Commands that do not write refuse any writeConcern, even {}.
	for _, cmd := range []bson.D{
		{{Key: "find", Value: "wc"}},
		{{Key: "count", Value: "wc"}},
		{{Key: "ping", Value: 1}},
		{{Key: "aggregate", Value: "wc"}, {Key: "pipeline", Value: bson.A{}}, {Key: "cursor", Value: bson.D{}}},
	} {
		_, err := runCmd(ctx, db, append(cmd, bson.E{Key: "writeConcern", Value: bson.D{}}))
		if ce := commandError(t, err, cmderr.InvalidOptions); ce.Message != "Command does not support writeConcern" {
			t.Fatalf("%v: %q", cmd, ce.Message)
		}
	}

	// majority, a number of members, j and wtimeout succeed at once:
	// replication is instant.
	for _, wc := range []bson.D{
		{{Key: "w", Value: "majority"}},
		{{Key: "w", Value: 3}, {Key: "wtimeout", Value: 1}},
		{{Key: "w", Value: 1}, {Key: "j", Value: true}},
		{{Key: "w", Value: "majority"}, {Key: "j", Value: true}, {Key: "wtimeout", Value: 100}},
		{},
	} {
		raw := mustRun(t, ctx, db, bson.D{{Key: "delete", Value: "wc"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 99}}}, {Key: "limit", Value: 0}}}},
			{Key: "writeConcern", Value: wc}})
		if _, err := raw.LookupErr("writeConcernError"); err == nil {
			t.Fatalf("writeConcern %v: %v", wc, raw)
		}
	}

	// Malformed write concerns are command errors and nothing is written.
	for _, tc := range []struct {
		wc   any
		code int32
	}{
		{bson.D{{Key: "w", Value: -1}}, cmderr.FailedToParse},
		{bson.D{{Key: "w", Value: 51}}, cmderr.FailedToParse},
		{bson.D{{Key: "w", Value: math.NaN()}}, cmderr.FailedToParse},
		{bson.D{{Key: "wtimeout", Value: int64(1) << 40}}, cmderr.FailedToParse},
		{bson.D{{Key: "wTimeout", Value: 1}}, 40415},
		{bson.D{{Key: "w", Value: true}}, cmderr.FailedToParse},
		{bson.D{{Key: "j", Value: true}, {Key: "fsync", Value: true}}, cmderr.FailedToParse},
		{"majority", cmderr.TypeMismatch},
	} {
		_, err := runCmd(ctx, db, bson.D{{Key: "insert", Value: "wc"}, {Key: "documents", Value: bson.A{bson.D{{Key: "bad", Value: 1}}}}, {Key: "writeConcern", Value: tc.wc}})
		commandError(t, err, tc.code)
	}
	if n, _ := coll.CountDocuments(ctx, bson.D{{Key: "bad", Value: 1}}); n != 0 {
		t.Fatalf("a refused write concern must write nothing, %d written", n)
	}
}

func TestWriteConcernUnacknowledged(t *testing.T) {
	c := Start(t)
	ctx := testCtx(t)
	client := connect(t, c.URI())
	var mu sync.Mutex
	var replies int
	mon := &mevent.CommandMonitor{Succeeded: func(_ context.Context, e *mevent.CommandSucceededEvent) {
		if e.CommandName == "insert" {
			mu.Lock()
			replies++
			mu.Unlock()
		}
	}}
	w0client := connect(t, c.URI(), options.Client().SetMonitor(mon))
	w0 := w0client.Database("db").Collection("w0", options.Collection().SetWriteConcern(writeconcern.Unacknowledged()))
	// The driver sends w: 0 inserts with moreToCome: mongosim must send no
	// reply (a reply would be read as the answer to the next command).
	for i := range 20 {
		res, err := w0.InsertOne(ctx, bson.D{{Key: "_id", Value: i}})
		if err != nil || res.Acknowledged {
			t.Fatalf("w:0 insert %d: %v %+v", i, err, res)
		}
	}
	if err := w0client.Ping(ctx, readpref.Primary()); err != nil {
		t.Fatalf("ping after w:0 inserts: %v", err)
	}
	coll := client.Database("db").Collection("w0")
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := coll.CountDocuments(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		if n == 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 20 unacknowledged inserts applied", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// An unacknowledged write that fails is not reported either (the
	// duplicate key), and the connection stays usable.
	if _, err := w0.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := w0client.Ping(ctx, readpref.Primary()); err != nil {
		t.Fatalf("ping: %v", err)
	}
}

func TestWriteConcernStandalone(t *testing.T) {
	c := StartWithOptions(t, Options{Standalone: true})
	ctx := testCtx(t)
	db := connect(t, c.URI()).Database("db")
	_, err := runCmd(ctx, db, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}},
		{Key: "writeConcern", Value: bson.D{{Key: "w", Value: 2}}}})
	ce := commandError(t, err, cmderr.BadValue)
	if ce.Message != "cannot use 'w' > 1 when a host is not replicated" {
		t.Fatalf("message %q", ce.Message)
	}
	if n, _ := db.Collection("c").CountDocuments(ctx, bson.D{}); n != 0 {
		t.Fatalf("refused write applied")
	}
	_, err = runCmd(ctx, db, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}},
		{Key: "writeConcern", Value: bson.D{{Key: "w", Value: "blah"}}}})
	commandError(t, err, cmderr.BadValue)
	raw := mustRun(t, ctx, db, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}},
		{Key: "writeConcern", Value: bson.D{{Key: "w", Value: "majority"}, {Key: "j", Value: true}}}})
	// A standalone gossips no cluster time and reports no opTime.
	for _, k := range []string{"$clusterTime", "operationTime", "opTime", "electionId", "writeConcernError"} {
		if _, err := raw.LookupErr(k); err == nil {
			t.Fatalf("standalone reply has %s: %v", k, raw)
		}
	}
}

func TestReadConcernValidated(t *testing.T) {
	c := StartWithOptions(t, Options{Members: 2})
	ctx := testCtx(t)
	client := connect(t, c.URI())
	db := client.Database("db")
	mustRun(t, ctx, db, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}})
	find := func(db *mongo.Database, rc bson.D) error {
		_, err := runCmd(ctx, db, bson.D{{Key: "find", Value: "c"}, {Key: "readConcern", Value: rc}})
		return err
	}
	ce := commandError(t, find(db, bson.D{{Key: "level", Value: "fast"}}), cmderr.BadValue)
	if ce.Message != "Enumeration value 'fast' for field 'readConcern.level' is not a valid value." {
		t.Fatalf("message %q", ce.Message)
	}
	for _, level := range []string{"local", "majority", "available", "linearizable", "snapshot"} {
		if err := find(db, bson.D{{Key: "level", Value: level}}); err != nil {
			t.Fatalf("level %s: %v", level, err)
		}
	}
	commandError(t, find(db, bson.D{{Key: "level", Value: 1}}), cmderr.TypeMismatch)
	commandError(t, find(db, bson.D{{Key: "level", Value: "local"}, {Key: "atClusterTime", Value: bson.Timestamp{T: 1, I: 1}}}), cmderr.InvalidOptions)
	commandError(t, find(db, bson.D{{Key: "afterClusterTime", Value: bson.Timestamp{}}}), cmderr.InvalidOptions)
	// Later than the cluster time the deployment has: refused, not waited for.
	ce = commandError(t, find(db, bson.D{{Key: "afterClusterTime", Value: bson.Timestamp{T: 1<<32 - 1, I: 1}}}), cmderr.InvalidOptions)
	if !bytes.Contains([]byte(ce.Message), []byte("readConcern afterClusterTime value must not be greater than the current clusterTime")) {
		t.Fatalf("message %q", ce.Message)
	}
	// Writes read at local only; snapshot is for find, aggregate, distinct.
	_, err := runCmd(ctx, db, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}}, {Key: "readConcern", Value: bson.D{{Key: "level", Value: "majority"}}}})
	commandError(t, err, cmderr.InvalidOptions)
	for _, cmd := range []bson.D{
		{{Key: "count", Value: "c"}},
		{{Key: "listCollections", Value: 1}},
		{{Key: "listIndexes", Value: "c"}},
		{{Key: "ping", Value: 1}},
	} {
		_, err := runCmd(ctx, db, append(cmd, bson.E{Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}}}))
		commandError(t, err, cmderr.InvalidOptions)
	}
	_, err = runCmd(ctx, db, bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$out", Value: "o"}}}}, {Key: "cursor", Value: bson.D{}},
		{Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}}}})
	commandError(t, err, cmderr.InvalidOptions)

	// linearizable only on the primary.
	secondary := connect(t, c.Members()[1].URI()).Database("db")
	ce = commandError(t, find(secondary, bson.D{{Key: "level", Value: "linearizable"}}), cmderr.NotWritablePrimary)
	if ce.Message != "cannot satisfy linearizable read concern on non-primary node" {
		t.Fatalf("message %q", ce.Message)
	}
	if err := find(secondary, bson.D{{Key: "level", Value: "majority"}}); err != nil {
		t.Fatal(err)
	}

	// A standalone has no snapshot or linearizable reads and no cluster time.
	sa := StartWithOptions(t, Options{Standalone: true})
	sdb := connect(t, sa.URI()).Database("db")
	for _, rc := range []bson.D{{{Key: "level", Value: "snapshot"}}, {{Key: "level", Value: "linearizable"}}, {{Key: "afterClusterTime", Value: bson.Timestamp{T: 1, I: 1}}}} {
		commandError(t, find(sdb, rc), cmderr.NotAReplicaSet)
	}
	if err := find(sdb, bson.D{{Key: "level", Value: "majority"}}); err != nil {
		t.Fatal(err)
	}
}

func TestSnapshotReads(t *testing.T) {
	c := Start(t)
	ctx := testCtx(t)
	client := connect(t, c.URI())
	db := client.Database("db")
	coll := db.Collection("snap")
	if _, err := coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 1}}, bson.D{{Key: "_id", Value: 2}, {Key: "x", Value: 2}}}); err != nil {
		t.Fatal(err)
	}
	sess, err := client.StartSession(options.Session().SetSnapshot(true))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	sctx := mongo.NewSessionContext(ctx, sess)
	read := func(ctx context.Context) []bson.D {
		t.Helper()
		cur, err := coll.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
		if err != nil {
			t.Fatal(err)
		}
		var docs []bson.D
		if err := cur.All(ctx, &docs); err != nil {
			t.Fatal(err)
		}
		return docs
	}
	first := read(sctx)
	if len(first) != 2 {
		t.Fatalf("first snapshot read %v", first)
	}
	// Writes after the session's snapshot: an update, a delete, an insert.
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 10}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}}); err != nil {
		t.Fatal(err)
	}
	// The session keeps reading at its atClusterTime: the old documents.
	if again := read(sctx); !equalDocs(again, first) {
		t.Fatalf("snapshot read after writes\n got %v\nwant %v", again, first)
	}
	var n []any
	if err := coll.Distinct(sctx, "x", bson.D{}).Decode(&n); err != nil || len(n) != 2 || n[0] != int32(1) || n[1] != int32(2) {
		t.Fatalf("snapshot distinct %v %v", n, err)
	}
	if cnt, err := coll.CountDocuments(sctx, bson.D{}); err != nil || cnt != 2 {
		t.Fatalf("snapshot countDocuments %d %v", cnt, err)
	}
	// A new session given the first one's snapshot time (the driver's
	// snapshotTime option) reads the same point, also through aggregate.
	snapTime := sess.SnapshotTime()
	if snapTime.IsZero() {
		t.Fatal("the driver learned no atClusterTime from the snapshot read")
	}
	sess2, err := client.StartSession(options.Session().SetSnapshot(true).SetSnapshotTime(snapTime))
	if err != nil {
		t.Fatal(err)
	}
	defer sess2.EndSession(ctx)
	cur, err := coll.Aggregate(mongo.NewSessionContext(ctx, sess2), mongo.Pipeline{{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}}})
	if err != nil {
		t.Fatal(err)
	}
	var agg []bson.D
	if err := cur.All(ctx, &agg); err != nil || !equalDocs(agg, first) {
		t.Fatalf("aggregate at the snapshot time: %v %v", agg, err)
	}

	// Outside the session: the current state.
	if now := read(ctx); len(now) != 2 || now[1][0].Value != int32(3) {
		t.Fatalf("current read %v", now)
	}

	// The raw reply: cursor.atClusterTime and operationTime at that point.
	raw := mustRun(t, ctx, db, bson.D{{Key: "find", Value: "snap"}, {Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}}}})
	at, ai, ok := raw.Lookup("cursor", "atClusterTime").TimestampOK()
	if !ok {
		t.Fatalf("no cursor.atClusterTime: %v", raw)
	}
	if t2, i2, _ := raw.Lookup("operationTime").TimestampOK(); t2 != at || i2 != ai {
		t.Fatalf("operationTime %v vs atClusterTime %v", raw.Lookup("operationTime"), at)
	}
	// getMore of a snapshot cursor reports the same atClusterTime.
	raw = mustRun(t, ctx, db, bson.D{{Key: "find", Value: "snap"}, {Key: "batchSize", Value: 1}, {Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}}}})
	gt, gi, _ := raw.Lookup("cursor", "atClusterTime").TimestampOK()
	// Without a deadline: the driver would send it as maxTimeMS, which
	// mongod refuses on a getMore of a cursor that is not awaitData.
	more := mustRun(t, context.WithoutCancel(ctx), db, bson.D{{Key: "getMore", Value: raw.Lookup("cursor", "id").Int64()}, {Key: "collection", Value: "snap"}})
	if mt, mi, ok := more.Lookup("cursor", "atClusterTime").TimestampOK(); !ok || mt != gt || mi != gi {
		t.Fatalf("getMore of a snapshot cursor: %v", more)
	}
	if mt, mi, _ := more.Lookup("operationTime").TimestampOK(); mt != gt || mi != gi {
		t.Fatalf("getMore operationTime: %v", more)
	}
	// A snapshot time later than the cluster time is refused.
	_, err = runCmd(ctx, db, bson.D{{Key: "find", Value: "snap"}, {Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}, {Key: "atClusterTime", Value: bson.Timestamp{T: 1<<32 - 1}}}}})
	commandError(t, err, cmderr.InvalidOptions)
	// Every write of this deployment is in its change log, so a time
	// before the first write reads the collection as it was then: empty.
	raw = mustRun(t, ctx, db, bson.D{{Key: "find", Value: "snap"}, {Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}, {Key: "atClusterTime", Value: bson.Timestamp{T: 1, I: 1}}}}})
	if docs, _ := raw.Lookup("cursor", "firstBatch").Array().Values(); len(docs) != 0 {
		t.Fatalf("snapshot read at Timestamp(1, 1): %v", raw)
	}
	// A catalog change after the snapshot time is not in the change log:
	// the read fails loudly (mongosim tracks this per database, mongod per
	// collection) instead of answering wrong.
	mustRun(t, ctx, db, bson.D{{Key: "create", Value: "later"}})
	_, err = runCmd(ctx, db, bson.D{{Key: "find", Value: "snap"}, {Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}, {Key: "atClusterTime", Value: bson.Timestamp{T: at, I: ai}}}}})
	commandError(t, err, cmderr.SnapshotUnavailable)
	if _, err := runCmd(ctx, client.Database("other"), bson.D{{Key: "find", Value: "snap"}, {Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}, {Key: "atClusterTime", Value: bson.Timestamp{T: at, I: ai}}}}}); err != nil {
		t.Fatalf("another database is not affected: %v", err)
	}
}

func equalDocs(a, b []bson.D) bool {
	x, _ := bson.Marshal(bson.D{{Key: "a", Value: a}})
	y, _ := bson.Marshal(bson.D{{Key: "a", Value: b}})
	return bytes.Equal(x, y)
}

func TestClusterTimeOnEveryReply(t *testing.T) {
	c := StartWithOptions(t, Options{Members: 3})
	ctx := testCtx(t)
	client := connect(t, c.URI())
	db := client.Database("db")
	checkCT := func(raw bson.Raw) bson.Timestamp {
		t.Helper()
		ct, ok := raw.Lookup("$clusterTime").DocumentOK()
		if !ok {
			t.Fatalf("no $clusterTime in %v", raw)
		}
		ts := ct.Lookup("clusterTime")
		tt, ti, ok := ts.TimestampOK()
		if !ok || tt == 0 {
			t.Fatalf("clusterTime %v", ts)
		}
		sub, hash, ok := ct.Lookup("signature", "hash").BinaryOK()
		if !ok || sub != 0 || !bytes.Equal(hash, make([]byte, 20)) {
			t.Fatalf("signature hash %v", ct.Lookup("signature"))
		}
		if k, ok := ct.Lookup("signature", "keyId").Int64OK(); !ok || k != 0 {
			t.Fatalf("signature keyId %v", ct.Lookup("signature", "keyId"))
		}
		ot, oi, ok := raw.Lookup("operationTime").TimestampOK()
		if !ok || (bson.Timestamp{T: tt, I: ti}).Before(bson.Timestamp{T: ot, I: oi}) {
			t.Fatalf("operationTime %v after clusterTime %v", raw.Lookup("operationTime"), ts)
		}
		return bson.Timestamp{T: ot, I: oi}
	}
	checkCT(mustRun(t, ctx, db, bson.D{{Key: "ping", Value: 1}}))
	checkCT(mustRun(t, ctx, db, bson.D{{Key: "hello", Value: 1}}))
	// Error replies too (CommandNotFound, a command error).
	var prev bson.Timestamp
	for range 3 {
		raw := mustRun(t, ctx, db, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}}})
		op := checkCT(raw)
		if !prev.Before(op) {
			t.Fatalf("operationTime did not advance: %v then %v", prev, op)
		}
		prev = op
		if ts, _, ok := raw.Lookup("opTime", "ts").TimestampOK(); !ok || ts != op.T {
			t.Fatalf("opTime %v", raw.Lookup("opTime"))
		}
		if _, ok := raw.Lookup("electionId").ObjectIDOK(); !ok {
			t.Fatalf("electionId %v", raw)
		}
	}
	// DDL advances the cluster time as well.
	op := checkCT(mustRun(t, ctx, db, bson.D{{Key: "create", Value: "ddl"}}))
	if !prev.Before(op) {
		t.Fatalf("create did not advance the cluster time")
	}
	// A client's later $clusterTime advances the deployment's (gossip); one
	// more than a year ahead of the wall clock is refused.
	rc := dialRaw(t, c.Members()[1].Addr())
	ahead := bson.Timestamp{T: uint32(time.Now().Add(time.Hour).Unix()), I: 5}
	gossip := func(ts bson.Timestamp) (bson.Raw, error) {
		return rc.msg(bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"},
			{Key: "$clusterTime", Value: bson.D{{Key: "clusterTime", Value: ts}, {Key: "signature", Value: zeroSignature}}}})
	}
	raw, err := gossip(ahead)
	if err != nil {
		t.Fatal(err)
	}
	if got := checkCT(raw); got != ahead {
		t.Fatalf("operationTime %v after gossiping %v", got, ahead)
	}
	if op := checkCT(mustRun(t, ctx, db, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}}})); !ahead.Before(op) {
		t.Fatalf("a write after gossip of %v has operationTime %v", ahead, op)
	}
	raw, err = gossip(bson.Timestamp{T: uint32(time.Now().Add(400 * 24 * time.Hour).Unix())})
	if err != nil || raw.Lookup("code").Int32() != 209 {
		t.Fatalf("gossip too far ahead: %v %v", raw, err)
	}
	for _, cmd := range []bson.D{{{Key: "noSuchCommand", Value: 1}}, {{Key: "find", Value: 1}}} {
		_, err := runCmd(ctx, db, cmd)
		var ce mongo.CommandError
		if !errors.As(err, &ce) {
			t.Fatalf("%v: %v", cmd, err)
		}
		checkCT(ce.Raw)
	}
}

// TestCausalConsistencyOnSecondary reads a write back from a secondary in
// a causally consistent session: the driver sends afterClusterTime (the
// write's operationTime) and the secondary answers once it has applied it.
func TestCausalConsistencyOnSecondary(t *testing.T) {
	c := StartWithOptions(t, Options{Members: 3})
	ctx := testCtx(t)
	var mu sync.Mutex
	var finds []bson.Raw
	var opTimes []bson.Raw
	mon := &mevent.CommandMonitor{
		Started: func(_ context.Context, e *mevent.CommandStartedEvent) {
			if e.CommandName == "find" {
				mu.Lock()
				finds = append(finds, append(bson.Raw(nil), e.Command...))
				mu.Unlock()
			}
		},
		Succeeded: func(_ context.Context, e *mevent.CommandSucceededEvent) {
			if e.CommandName == "insert" {
				mu.Lock()
				opTimes = append(opTimes, append(bson.Raw(nil), e.Reply.Lookup("operationTime").Value...))
				mu.Unlock()
			}
		},
	}
	client := connect(t, c.URI(), options.Client().SetMonitor(mon).SetReadPreference(readpref.Secondary()))
	coll := client.Database("db").Collection("causal")
	sess, err := client.StartSession(options.Session().SetCausalConsistency(true))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	sctx := mongo.NewSessionContext(ctx, sess)
	for i := range 5 {
		if _, err := coll.InsertOne(sctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
		var got bson.D
		if err := coll.FindOne(sctx, bson.D{{Key: "_id", Value: i}}).Decode(&got); err != nil {
			t.Fatalf("causal read of write %d on a secondary: %v", i, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(finds) != 5 || len(opTimes) != 5 {
		t.Fatalf("%d finds, %d inserts", len(finds), len(opTimes))
	}
	for i, f := range finds {
		at, ai, ok := f.Lookup("readConcern", "afterClusterTime").TimestampOK()
		wt, wi, _ := bson.RawValue{Type: bson.TypeTimestamp, Value: opTimes[i]}.TimestampOK()
		if !ok || (bson.Timestamp{T: at, I: ai}).Before(bson.Timestamp{T: wt, I: wi}) {
			t.Fatalf("find %d: afterClusterTime %v, insert operationTime %v", i, f.Lookup("readConcern"), opTimes[i])
		}
	}
	if sess.OperationTime() == nil || sess.ClusterTime() == nil {
		t.Fatalf("the session learned no operation/cluster time")
	}
}
