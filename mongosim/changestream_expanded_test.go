package mongosim

import (
	"bytes"
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// TestChangeStreamExpandedDDLEvents: with showExpandedEvents a stream
// reports create, createIndexes, modify (collMod), dropIndexes, rename and
// drop in mongod 8.0's shape; without it only rename and drop.
func TestChangeStreamExpandedDDLEvents(t *testing.T) {
	c := Start(t)
	ctx := testCtx(t)
	db := connect(t, c.URI()).Database("ddl")
	expanded, err := db.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetShowExpandedEvents(true))
	if err != nil {
		t.Fatal(err)
	}
	defer expanded.Close(ctx)
	plain, err := db.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close(ctx)

	if err := db.CreateCollection(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	coll := db.Collection("c")
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "a", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	mustRun(t, ctx, db, bson.D{{Key: "collMod", Value: "c"}, {Key: "validationLevel", Value: "moderate"}})
	mustRun(t, ctx, db, bson.D{{Key: "collMod", Value: "c"}, {Key: "index", Value: bson.D{{Key: "name", Value: "a_1"}, {Key: "hidden", Value: true}}}})
	if err := coll.Indexes().DropOne(ctx, "a_1"); err != nil {
		t.Fatal(err)
	}
	mustRun(t, ctx, connect(t, c.URI()).Database("admin"), bson.D{{Key: "renameCollection", Value: "ddl.c"}, {Key: "to", Value: "ddl.d"}})
	if err := db.Collection("d").Drop(ctx); err != nil {
		t.Fatal(err)
	}

	want := []string{"create", "createIndexes", "modify", "modify", "dropIndexes", "rename", "drop"}
	modifies := 0
	var uuid bson.RawValue
	for i, op := range want {
		ev := nextEvent(ctx, t, expanded)
		if ev.get("operationType") != op {
			t.Fatalf("event %d: %v, want %s", i, ev, op)
		}
		u, err := bson.Raw(ev).LookupErr("collectionUUID")
		if err != nil {
			t.Fatalf("%s without collectionUUID: %v", op, ev)
		}
		if i == 0 {
			uuid = u
		} else if !bytes.Equal(u.Value, uuid.Value) {
			t.Fatalf("%s: collectionUUID %v, create's %v", op, u, uuid)
		}
		if ev.get("ns", "db") != "ddl" || ev.get("ns", "coll") != "c" && op != "drop" {
			t.Fatalf("%s: ns %v", op, ev)
		}
		switch op {
		case "createIndexes", "dropIndexes":
			if ev.get("operationDescription", "indexes", "0", "name") != "a_1" || ev.get("operationDescription", "indexes", "0", "v") != int32(2) ||
				ev.get("operationDescription", "indexes", "0", "key", "a") != int32(1) {
				t.Fatalf("%s: operationDescription %v", op, ev)
			}
		case "modify":
			modifies++
			if modifies == 2 {
				if ev.get("operationDescription", "index", "hidden") != true || ev.get("stateBeforeChange", "indexOptions", "hidden") != false {
					t.Fatalf("index modify: %v", ev)
				}
				break
			}
			if ev.get("operationDescription", "validationLevel") != "moderate" || ev.get("operationDescription", "collMod") != "<missing>" {
				t.Fatalf("modify: operationDescription %v", ev)
			}
			if u, err := bson.Raw(ev).LookupErr("stateBeforeChange", "collectionOptions", "uuid"); err != nil || !bytes.Equal(u.Value, uuid.Value) {
				t.Fatalf("modify: stateBeforeChange %v", ev)
			}
		}
	}
	for _, op := range []string{"rename", "drop"} {
		if ev := nextEvent(ctx, t, plain); ev.get("operationType") != op {
			t.Fatalf("stream without showExpandedEvents: %v, want %s", ev, op)
		}
	}
}

// TestChangeStreamShardCollectionEvent: shardCollection through a router
// is reported to an expanded stream on the collection.
func TestChangeStreamShardCollectionEvent(t *testing.T) {
	client, _ := shardedClient(t, 2, nil)
	ctx := testCtx(t)
	coll := client.Database("db").Collection("s")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	cs, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetShowExpandedEvents(true))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	shardCollection(t, ctx, client, "db.s", bson.D{{Key: "k", Value: 1}})
	for {
		ev := nextEvent(ctx, t, cs)
		if ev.get("operationType") == "createIndexes" {
			continue // the shard key index, where it was missing
		}
		if ev.get("operationType") != "shardCollection" || ev.get("operationDescription", "shardKey", "k") != int32(1) ||
			ev.get("operationDescription", "unique") != false || ev.get("collectionUUID") == "<missing>" {
			t.Fatalf("event %v, want shardCollection", ev)
		}
		return
	}
}

// TestChangeStreamOptionsAsMongod: the aggregate's collation applies to
// the stream's stages, readConcern other than majority is refused,
// startAfter an invalidate starts a new stream while resumeAfter it is
// refused, and killCursors kills a stream by its namespace.
func TestChangeStreamOptionsAsMongod(t *testing.T) {
	c := Start(t)
	ctx := testCtx(t)
	client := connect(t, c.URI())
	db := client.Database("cs")
	coll := db.Collection("c")
	if err := db.CreateCollection(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	match := mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "fullDocument.name", Value: "abc"}}}}}
	ci := &options.Collation{Locale: "en", Strength: 2}
	cs, err := coll.Watch(ctx, match, options.ChangeStream().SetCollation(*ci))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	for _, name := range []string{"ABC", "abd", "abc"} {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "name", Value: name}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"ABC", "abc"} {
		if ev := nextEvent(ctx, t, cs); ev.get("fullDocument", "name") != want {
			t.Fatalf("collated stream: %v, want name %s", ev, want)
		}
	}

	agg := func(extra ...bson.E) (bson.Raw, error) {
		cmd := append(bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: bson.D{}}}}}, {Key: "cursor", Value: bson.D{}}}, extra...)
		return runCmd(ctx, db, cmd)
	}
	for _, level := range []string{"local", "available", "linearizable"} {
		_, err := agg(bson.E{Key: "readConcern", Value: bson.D{{Key: "level", Value: level}}})
		commandError(t, err, cmderr.InvalidOptions)
	}
	raw, err := agg(bson.E{Key: "readConcern", Value: bson.D{{Key: "level", Value: "majority"}}})
	if err != nil {
		t.Fatal(err)
	}

	// killCursors by the stream's namespace: a collection's, a database's.
	dbStream := mustRun(t, ctx, db, bson.D{{Key: "aggregate", Value: 1}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: bson.D{}}}}}, {Key: "cursor", Value: bson.D{}}})
	for _, k := range []struct {
		raw  bson.Raw
		coll string
	}{{raw, "c"}, {dbStream, "$cmd.aggregate"}} {
		id := k.raw.Lookup("cursor", "id").Int64()
		killed := mustRun(t, ctx, db, bson.D{{Key: "killCursors", Value: k.coll}, {Key: "cursors", Value: bson.A{id}}})
		if ids, _ := killed.Lookup("cursorsKilled").Array().Values(); len(ids) != 1 || ids[0].Int64() != id {
			t.Fatalf("killCursors %s: %v", k.coll, killed)
		}
		_, err := runCmd(context.WithoutCancel(ctx), db, bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: k.coll}})
		commandError(t, err, cmderr.CursorNotFound)
	}

	// Invalidate: startAfter its token starts a new stream, resumeAfter
	// answers 260 InvalidResumeToken.
	inv, err := coll.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	defer inv.Close(ctx)
	if err := coll.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	nextEvent(ctx, t, inv) // drop
	token := bson.Raw(nextEvent(ctx, t, inv)).Lookup("_id").Document()
	if _, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(token)); err == nil {
		t.Fatal("resumeAfter an invalidate token: no error")
	} else {
		commandError(t, err, 260)
	}
	after, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetStartAfter(token))
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close(ctx)
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "name", Value: "new"}}); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(ctx, t, after); ev.get("operationType") != "insert" || ev.get("fullDocument", "name") != "new" {
		t.Fatalf("startAfter the invalidate: %v", ev)
	}
}

// TestChangeStreamSplitLargeEvent: an event over 16 MiB answers
// BSONObjectTooLarge, or comes in fragments with splitEvent {fragment, of}
// when the pipeline ends with $changeStreamSplitLargeEvent; a stream
// resumed from the first fragment's token goes on with the second.
func TestChangeStreamSplitLargeEvent(t *testing.T) {
	c := Start(t)
	ctx := testCtx(t)
	db := connect(t, c.URI()).Database("big")
	if err := db.CreateCollection(ctx, "c", options.CreateCollection().SetChangeStreamPreAndPostImages(bson.D{{Key: "enabled", Value: true}})); err != nil {
		t.Fatal(err)
	}
	coll := db.Collection("c")
	blob := func(b byte) []byte { return bytes.Repeat([]byte{b}, 9<<20) }
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: blob('a')}}); err != nil {
		t.Fatal(err)
	}
	opts := func() *options.ChangeStreamOptionsBuilder {
		return options.ChangeStream().SetFullDocumentBeforeChange(options.Required).SetFullDocument(options.Required)
	}
	split := mongo.Pipeline{{{Key: "$changeStreamSplitLargeEvent", Value: bson.D{}}}}
	whole, err := coll.Watch(ctx, mongo.Pipeline{}, opts())
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Close(ctx)
	cs, err := coll.Watch(ctx, split, opts())
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	if _, err := coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "x", Value: blob('b')}}); err != nil {
		t.Fatal(err)
	}
	if whole.Next(ctx) {
		t.Fatal("an 18 MiB event came whole")
	}
	commandError(t, whole.Err(), cmderr.BSONObjectTooLarge)

	first := nextEvent(ctx, t, cs)
	second := nextEvent(ctx, t, cs)
	if first.get("splitEvent", "fragment") != int32(1) || first.get("splitEvent", "of") != int32(2) ||
		second.get("splitEvent", "fragment") != int32(2) || second.get("splitEvent", "of") != int32(2) {
		t.Fatalf("fragments: %v / %v", first.get("splitEvent"), second.get("splitEvent"))
	}
	if first.get("operationType") != "replace" || first.get("fullDocument") == "<missing>" && second.get("fullDocument") == "<missing>" ||
		first.get("fullDocumentBeforeChange") == "<missing>" && second.get("fullDocumentBeforeChange") == "<missing>" {
		t.Fatalf("fragments do not hold the event: %d and %d bytes", len(first), len(second))
	}
	// Resuming from the first fragment gives the second again.
	token := bson.Raw(first).Lookup("_id").Document()
	resumed, err := coll.Watch(ctx, split, opts().SetResumeAfter(token))
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Close(ctx)
	if again := nextEvent(ctx, t, resumed); again.get("splitEvent", "fragment") != int32(2) || !bytes.Equal(again, second) {
		t.Fatalf("resumed from fragment 1: %v", again.get("splitEvent"))
	}
	// The stage must come last.
	_, err = coll.Watch(ctx, mongo.Pipeline{split[0], {{Key: "$match", Value: bson.D{}}}})
	commandError(t, err, cmderr.BadValue)
}
