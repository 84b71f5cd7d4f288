package mongosim

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// expectClosed checks that an invalidated stream ends: no further event,
// no error, and the server cursor is gone (id 0).
func expectClosed(ctx context.Context, t *testing.T, cs *mongo.ChangeStream) {
	t.Helper()
	if cs.Next(ctx) {
		t.Fatalf("event after invalidate: %v", cs.Current)
	}
	if cs.Err() != nil {
		t.Fatalf("error after invalidate: %v", cs.Err())
	}
	if cs.ID() != 0 {
		t.Fatalf("cursor %d still open after invalidate", cs.ID())
	}
}

func TestChangeStreamDropInvalidatesCollectionStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, _ := specClient(t, true)
	db := client.Database("db")
	coll := db.Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	cs, err := coll.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	dbs, err := db.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	defer dbs.Close(ctx)

	if err := coll.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	// A write after the drop recreates the collection: the collection
	// stream must not see it, the database stream must.
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatal(err)
	}

	drop := nextEvent(ctx, t, cs)
	if drop.get("operationType") != "drop" || drop.get("ns", "db") != "db" || drop.get("ns", "coll") != "c" {
		t.Fatalf("drop event: %v", drop)
	}
	inv := nextEvent(ctx, t, cs)
	if inv.get("operationType") != "invalidate" || inv.get("ns") != "<missing>" {
		t.Fatalf("invalidate event: %v", inv)
	}
	if inv.get("_id", "_data").(string) <= drop.get("_id", "_data").(string) {
		t.Fatalf("invalidate token %v not after the drop's %v", inv.get("_id"), drop.get("_id"))
	}
	invToken := cs.ResumeToken()
	expectClosed(ctx, t, cs)

	// The database stream sees the drop and goes on.
	if ev := nextEvent(ctx, t, dbs); ev.get("operationType") != "drop" || ev.get("ns", "coll") != "c" {
		t.Fatalf("database stream: %v", ev)
	}
	if ev := nextEvent(ctx, t, dbs); ev.get("operationType") != "insert" || ev.get("documentKey", "_id") != int32(2) {
		t.Fatalf("database stream after the drop: %v", ev)
	}

	// resumeAfter an invalidate is refused; startAfter starts a new
	// stream after it, which sees the recreated collection's insert.
	_, err = coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(invToken))
	commandError(t, err, codeInvalidResumeToken)
	after, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetStartAfter(invToken))
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close(ctx)
	if ev := nextEvent(ctx, t, after); ev.get("operationType") != "insert" || ev.get("documentKey", "_id") != int32(2) {
		t.Fatalf("startAfter the invalidate: %v", ev)
	}

	// resumeAfter the drop itself gives the invalidate again.
	dropToken := bson.Raw(drop).Lookup("_id").Document()
	again, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(dropToken))
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close(ctx)
	if ev := nextEvent(ctx, t, again); ev.get("operationType") != "invalidate" {
		t.Fatalf("resumeAfter the drop: %v", ev)
	}
	expectClosed(ctx, t, again)
}

func TestChangeStreamRenameInvalidatesSourceAndTarget(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, _ := specClient(t, true)
	db := client.Database("db")
	src, dst := db.Collection("src"), db.Collection("dst")
	if _, err := src.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	watch := func(c *mongo.Collection) *mongo.ChangeStream {
		cs, err := c.Watch(ctx, mongo.Pipeline{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close(context.Background()) })
		return cs
	}
	onSrc, onDst := watch(src), watch(dst)
	onDB, err := db.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	defer onDB.Close(ctx)

	err = client.Database("admin").RunCommand(ctx, bson.D{{Key: "renameCollection", Value: "db.src"}, {Key: "to", Value: "db.dst"}}).Err()
	if err != nil {
		t.Fatal(err)
	}
	// Writes to the renamed collection are still logged.
	if _, err := dst.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	for name, cs := range map[string]*mongo.ChangeStream{"source": onSrc, "target": onDst} {
		ev := nextEvent(ctx, t, cs)
		if ev.get("operationType") != "rename" || ev.get("ns", "coll") != "src" || ev.get("to", "db") != "db" || ev.get("to", "coll") != "dst" {
			t.Fatalf("%s stream rename event: %v", name, ev)
		}
		if ev := nextEvent(ctx, t, cs); ev.get("operationType") != "invalidate" {
			t.Fatalf("%s stream after rename: %v", name, ev)
		}
		expectClosed(ctx, t, cs)
	}
	if ev := nextEvent(ctx, t, onDB); ev.get("operationType") != "rename" || ev.get("to", "coll") != "dst" {
		t.Fatalf("database stream rename: %v", ev)
	}
	if ev := nextEvent(ctx, t, onDB); ev.get("operationType") != "insert" || ev.get("ns", "coll") != "dst" {
		t.Fatalf("database stream after the rename: %v", ev)
	}
}

func TestChangeStreamDropDatabase(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, _ := specClient(t, true)
	db := client.Database("gone")
	for _, name := range []string{"a", "b"} {
		if _, err := db.Collection(name).InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	onDB, err := db.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	defer onDB.Close(ctx)
	onColl, err := db.Collection("b").Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	defer onColl.Close(ctx)
	onCluster, err := client.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	defer onCluster.Close(ctx)

	if err := db.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Database("other").Collection("x").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}

	// The database stream: a drop per collection, dropDatabase, invalidate.
	want := []struct{ op, coll string }{{"drop", "a"}, {"drop", "b"}, {"dropDatabase", "<missing>"}, {"invalidate", "<missing>"}}
	for _, w := range want {
		ev := nextEvent(ctx, t, onDB)
		if ev.get("operationType") != w.op || ev.get("ns", "coll") != w.coll {
			t.Fatalf("database stream: got %v, want %s %s", ev, w.op, w.coll)
		}
		if w.op == "dropDatabase" && ev.get("ns", "db") != "gone" {
			t.Fatalf("dropDatabase ns: %v", ev)
		}
	}
	expectClosed(ctx, t, onDB)

	// The collection stream: its drop, then invalidate.
	if ev := nextEvent(ctx, t, onColl); ev.get("operationType") != "drop" || ev.get("ns", "coll") != "b" {
		t.Fatalf("collection stream: %v", ev)
	}
	if ev := nextEvent(ctx, t, onColl); ev.get("operationType") != "invalidate" {
		t.Fatalf("collection stream: %v", ev)
	}
	expectClosed(ctx, t, onColl)

	// The cluster stream sees it all and is never invalidated.
	for _, w := range []string{"drop", "drop", "dropDatabase", "insert"} {
		if ev := nextEvent(ctx, t, onCluster); ev.get("operationType") != w {
			t.Fatalf("cluster stream: got %v, want %s", ev, w)
		}
	}
}

func TestChangeStreamPreAndPostImages(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, _ := specClient(t, true)
	db := client.Database("db")
	err := db.CreateCollection(ctx, "img", options.CreateCollection().SetChangeStreamPreAndPostImages(bson.D{{Key: "enabled", Value: true}}))
	if err != nil {
		t.Fatal(err)
	}
	coll := db.Collection("img")
	plain := db.Collection("plain")
	for _, c := range []*mongo.Collection{coll, plain} {
		if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	opts := options.ChangeStream().SetFullDocument(options.Required).SetFullDocumentBeforeChange(options.Required)
	cs, err := coll.Watch(ctx, mongo.Pipeline{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 2}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	upd := nextEvent(ctx, t, cs)
	if upd.get("fullDocument", "x") != int32(2) || upd.get("fullDocumentBeforeChange", "x") != int32(1) {
		t.Fatalf("update with images: %v", upd)
	}
	del := nextEvent(ctx, t, cs)
	if del.get("operationType") != "delete" || del.get("fullDocumentBeforeChange", "x") != int32(2) {
		t.Fatalf("delete with pre-image: %v", del)
	}

	// Without the collection option: whenAvailable gives null, required
	// fails the stream.
	avail, err := plain.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetFullDocumentBeforeChange(options.WhenAvailable))
	if err != nil {
		t.Fatal(err)
	}
	defer avail.Close(ctx)
	req, err := plain.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetFullDocumentBeforeChange(options.Required))
	if err != nil {
		t.Fatal(err)
	}
	defer req.Close(ctx)
	if _, err := plain.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 2}}}}); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(ctx, t, avail); ev.get("fullDocumentBeforeChange") != nil {
		t.Fatalf("whenAvailable without images: %v", ev)
	}
	if req.Next(ctx) {
		t.Fatalf("required without images gave %v", req.Current)
	}
	var se mongo.ServerError
	if !errors.As(req.Err(), &se) || !se.HasErrorCode(codeNoMatchingDocument) {
		t.Fatalf("required without images: %v", req.Err())
	}

	// collMod turns the images on for later writes.
	if err := db.RunCommand(ctx, bson.D{{Key: "collMod", Value: "plain"}, {Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: true}}}}).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 3}}}}); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(ctx, t, avail); ev.get("fullDocumentBeforeChange", "x") != int32(2) {
		t.Fatalf("whenAvailable after collMod: %v", ev)
	}
}

func TestChangeStreamProjectingOutIDIsFatal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, _ := specClient(t, true)
	coll := client.Database("db").Collection("c")
	cs, err := coll.Watch(ctx, mongo.Pipeline{{{Key: "$project", Value: bson.D{{Key: "_id", Value: 0}}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if cs.Next(ctx) {
		t.Fatalf("event without _id: %v", cs.Current)
	}
	var se mongo.ServerError
	if !errors.As(cs.Err(), &se) || !se.HasErrorCode(codeChangeStreamFatalError) || !se.HasErrorLabel(labelNonResumableChangeStream) {
		t.Fatalf("want 280 ChangeStreamFatalError labelled NonResumableChangeStreamError, got %v", cs.Err())
	}
}

func TestChangeStreamDisambiguatedPaths(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, _ := specClient(t, true)
	coll := client.Database("db").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: bson.A{bson.D{{Key: "1", Value: 1}}}}, {Key: "b", Value: bson.A{1, 2}}}); err != nil {
		t.Fatal(err)
	}
	cs, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetShowExpandedEvents(true))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "a.0.1", Value: 2}, {Key: "b.1", Value: 3}}}}); err != nil {
		t.Fatal(err)
	}
	ev := nextEvent(ctx, t, cs)
	paths := bson.Raw(ev).Lookup("updateDescription", "disambiguatedPaths").Document()
	// a.0.1 has a numeric field name: spelled out, the index as an int.
	got, err := paths.LookupErr("a.0.1")
	if err != nil {
		t.Fatalf("no a.0.1 in %v", paths)
	}
	vals, _ := got.Array().Values()
	if len(vals) != 3 || vals[0].StringValue() != "a" || vals[1].Type != bson.TypeInt32 || vals[1].Int32() != 0 || vals[2].StringValue() != "1" {
		t.Fatalf("a.0.1 → %v", got)
	}
	// b.1 is only an array index: not ambiguous.
	if _, err := paths.LookupErr("b.1"); err == nil {
		t.Fatalf("b.1 listed in %v", paths)
	}
	if ev.get("collectionUUID") == "<missing>" {
		t.Fatalf("showExpandedEvents without collectionUUID: %v", ev)
	}
}
