package mongosim

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

func TestCappedCollectionEvictsOldest(t *testing.T) {
	c := Start(t)
	ctx := testCtx(t)
	db := connect(t, c.URI()).Database("db")
	if err := db.CreateCollection(ctx, "cap", options.CreateCollection().SetCapped(true).SetSizeInBytes(4096).SetMaxDocuments(3)); err != nil {
		t.Fatal(err)
	}
	coll := db.Collection("cap")
	for i := 1; i <= 5; i++ {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	var got []struct {
		ID int32 `bson:"_id"`
	}
	cur, err := coll.Find(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cur.All(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].ID != 3 || got[2].ID != 5 {
		t.Fatalf("capped max 3 holds %+v, want 3, 4, 5", got)
	}
	// The byte limit evicts too: 4096 bytes hold only a few 1 KiB documents.
	big := make([]byte, 1024)
	for i := 6; i <= 12; i++ {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "b", Value: big}}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n > 3 {
		t.Fatalf("%d documents (%v)", n, err)
	}
	res := db.RunCommand(ctx, bson.D{{Key: "collStats", Value: "cap"}})
	raw, err := res.Raw()
	if err != nil {
		t.Fatal(err)
	}
	if !raw.Lookup("capped").Boolean() || raw.Lookup("size").AsInt64() > 4096 {
		t.Fatalf("collStats: %v", raw)
	}
	// capped without size is refused.
	err = db.CreateCollection(ctx, "nosize", options.CreateCollection().SetCapped(true))
	commandError(t, err, cmderr.InvalidOptions)
}

func TestTailableAwaitCursor(t *testing.T) {
	c := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := connect(t, c.URI()).Database("db")
	if err := db.CreateCollection(ctx, "log", options.CreateCollection().SetCapped(true).SetSizeInBytes(1<<20)); err != nil {
		t.Fatal(err)
	}
	coll := db.Collection("log")
	for i := 1; i <= 2; i++ {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "even", Value: i%2 == 0}}); err != nil {
			t.Fatal(err)
		}
	}
	cur, err := coll.Find(ctx, bson.D{}, options.Find().SetCursorType(options.TailableAwait).SetBatchSize(2).SetMaxAwaitTime(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close(ctx)
	for want := int32(1); want <= 2; want++ {
		if !cur.Next(ctx) || cur.Current.Lookup("_id").Int32() != want {
			t.Fatalf("document %d: %v %v", want, cur.Current, cur.Err())
		}
	}
	// Nothing new: an empty batch after getMore's maxTimeMS, which on an
	// awaitData cursor is the await time (as on mongod), not a limit that
	// fails the getMore; the cursor stays open.
	start := time.Now()
	if cur.TryNext(ctx) {
		t.Fatalf("unexpected %v", cur.Current)
	}
	if took := time.Since(start); took < 90*time.Millisecond || took > 2*time.Second {
		t.Errorf("an empty awaitData getMore (maxAwaitTime 100ms) returned after %v", took)
	}
	if cur.Err() != nil || cur.ID() == 0 {
		t.Fatalf("after an empty batch: id %d, err %v", cur.ID(), cur.Err())
	}
	// The await starts when the getMore starts waiting, after a
	// failCommand block (mongod sets its wait-for-inserts deadline in
	// getMore itself): 60 ms blocked + 100 ms awaited.
	mustRun(t, ctx, connect(t, c.URI()).Database("admin"), bson.D{
		{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: int32(1)}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"getMore"}},
			{Key: "blockConnection", Value: true}, {Key: "blockTimeMS", Value: int32(60)}}},
	})
	start = time.Now()
	if cur.TryNext(ctx) || cur.Err() != nil {
		t.Fatalf("after a blocked getMore: %v %v", cur.Current, cur.Err())
	}
	if took := time.Since(start); took < 150*time.Millisecond {
		t.Errorf("a getMore blocked 60 ms with maxAwaitTime 100 ms returned after %v, want >= 160 ms", took)
	}
	// A later insert is returned, a getMore waiting for it is woken.
	go func() {
		time.Sleep(50 * time.Millisecond)
		_, _ = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}})
	}()
	if !cur.Next(ctx) || cur.Current.Lookup("_id").Int32() != 3 {
		t.Fatalf("tailed document: %v %v", cur.Current, cur.Err())
	}

	// Filters apply to new documents too.
	evens, err := coll.Find(ctx, bson.D{{Key: "even", Value: true}}, options.Find().SetCursorType(options.Tailable))
	if err != nil {
		t.Fatal(err)
	}
	defer evens.Close(ctx)
	if !evens.Next(ctx) || evens.Current.Lookup("_id").Int32() != 2 {
		t.Fatalf("first even: %v %v", evens.Current, evens.Err())
	}
	for _, d := range []bson.D{{{Key: "_id", Value: 5}, {Key: "even", Value: false}}, {{Key: "_id", Value: 6}, {Key: "even", Value: true}}} {
		if _, err := coll.InsertOne(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if !evens.Next(ctx) || evens.Current.Lookup("_id").Int32() != 6 {
		t.Fatalf("next even: %v %v", evens.Current, evens.Err())
	}

	// Only capped collections can be tailed.
	if _, err := db.Collection("plain").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	_, err = db.Collection("plain").Find(ctx, bson.D{}, options.Find().SetCursorType(options.Tailable))
	commandError(t, err, cmderr.BadValue)
}

// TestTailableCursorRules: mongod's rules for tailable cursors — maxTimeMS
// on a getMore only for awaitData cursors (2 BadValue otherwise), an
// awaitData getMore with maxTimeMS 0 does not wait, a tailable cursor on
// an empty capped collection is dead, and one whose position was evicted
// by the capped rollover dies with CappedPositionLost.
func TestTailableCursorRules(t *testing.T) {
	c := Start(t)
	ctx := testCtx(t)
	db := connect(t, c.URI()).Database("db")
	if err := db.CreateCollection(ctx, "cap", options.CreateCollection().SetCapped(true).SetSizeInBytes(1<<20).SetMaxDocuments(3)); err != nil {
		t.Fatal(err)
	}
	// The driver derives maxTimeMS from a context deadline; these
	// commands carry exactly the fields the test gives.
	ctx = context.WithoutCancel(ctx)
	find := func(extra ...bson.E) int64 {
		t.Helper()
		cmd := append(bson.D{{Key: "find", Value: "cap"}, {Key: "tailable", Value: true}}, extra...)
		return mustRun(t, ctx, db, cmd).Lookup("cursor", "id").Int64()
	}
	getMore := func(id int64, extra ...bson.E) (bson.Raw, error) {
		return runCmd(ctx, db, append(bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "cap"}}, extra...))
	}
	if id := find(); id != 0 {
		t.Fatalf("tailable find on an empty capped collection: id %d, want a dead cursor", id)
	}
	coll := db.Collection("cap")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	plain := find()
	if plain == 0 {
		t.Fatal("tailable find on a non-empty capped collection: dead cursor")
	}
	_, err := getMore(plain, bson.E{Key: "maxTimeMS", Value: 100})
	ce := commandError(t, err, cmderr.BadValue)
	if ce.Message != "cannot set maxTimeMS on getMore command for a non-awaitData cursor" {
		t.Fatalf("message %q", ce.Message)
	}
	// A plain find cursor is not awaitData either.
	if _, err := coll.InsertMany(ctx, []bson.D{{{Key: "_id", Value: 2}}, {{Key: "_id", Value: 3}}}); err != nil {
		t.Fatal(err)
	}
	id := mustRun(t, ctx, db, bson.D{{Key: "find", Value: "cap"}, {Key: "batchSize", Value: 1}}).Lookup("cursor", "id").Int64()
	_, err = getMore(id, bson.E{Key: "maxTimeMS", Value: 100})
	commandError(t, err, cmderr.BadValue)

	await := find(bson.E{Key: "awaitData", Value: true})
	start := time.Now()
	raw, err := getMore(await, bson.E{Key: "maxTimeMS", Value: 0})
	if err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited > 500*time.Millisecond || raw.Lookup("cursor", "id").Int64() != await {
		t.Fatalf("awaitData getMore maxTimeMS 0: waited %v, reply %s", waited, raw)
	}

	// The refused getMore left the cursor open: it reads _id 2 and 3, then
	// 4 and 5 (the collection then holds 3, 4, 5).
	expectIDs := func(want ...int32) {
		t.Helper()
		raw, err := getMore(plain)
		got := mustArray(raw)
		if err != nil || len(got) != len(want) {
			t.Fatalf("getMore: %s %v; want _id %v", raw, err, want)
		}
		for i, v := range got {
			if v.Document().Lookup("_id").Int32() != want[i] {
				t.Fatalf("getMore: %s; want _id %v", raw, want)
			}
		}
	}
	expectIDs(2, 3)
	if _, err := coll.InsertMany(ctx, []bson.D{{{Key: "_id", Value: 4}}, {{Key: "_id", Value: 5}}}); err != nil {
		t.Fatal(err)
	}
	expectIDs(4, 5)
	// Three more inserts roll the collection past _id 5, where the cursor
	// stands.
	if _, err := coll.InsertMany(ctx, []bson.D{{{Key: "_id", Value: 6}}, {{Key: "_id", Value: 7}}, {{Key: "_id", Value: 8}}}); err != nil {
		t.Fatal(err)
	}
	_, err = getMore(plain)
	commandError(t, err, cmderr.CappedPositionLost)
	_, err = getMore(plain)
	commandError(t, err, cmderr.CursorNotFound)
}

func mustArray(raw bson.Raw) []bson.RawValue {
	vals, _ := raw.Lookup("cursor", "nextBatch").Array().Values()
	return vals
}
