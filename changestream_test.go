package sturdy_test

import (
	"bytes"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/mongosim"
)

func TestChangeStreamEventsAndResumeToken(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	rec := &recorder{}
	client := connect(t, cluster.URI(), func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	coll := client.Database("db").Collection("c")

	cs, err := coll.Watch(ctx, bson.A{d("$match", d("operationType", d("$in", bson.A{"insert", "update"})))},
		&sturdy.ChangeStreamOptions{FullDocument: "updateLookup", MaxAwaitTime: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	agg := rec.startedNamed("aggregate")
	if len(agg) != 1 || commandField(agg[0], "aggregate").StringValue() != "c" {
		t.Fatalf("aggregate events: %v", agg)
	}
	stage := commandField(agg[0], "pipeline").Array().Index(0).Document()
	if v := stage.Lookup("$changeStream", "fullDocument").StringValue(); v != "updateLookup" {
		t.Fatalf("$changeStream stage: %s", stage)
	}
	initial := cs.ResumeToken()
	if initial == nil {
		t.Fatal("no resume token from the initial postBatchResumeToken")
	}

	if _, err := coll.InsertOne(ctx, d("_id", 1, "x", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.UpdateOne(ctx, d("_id", 1), d("$set", d("x", 2))); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.DeleteOne(ctx, d("_id", 1)); err != nil { // filtered out by $match
		t.Fatal(err)
	}
	var ev struct {
		OperationType string `bson:"operationType"`
		DocumentKey   struct {
			ID int32 `bson:"_id"`
		} `bson:"documentKey"`
	}
	if !cs.Next(ctx) {
		t.Fatalf("Next: %v", cs.Err())
	}
	if err := cs.Decode(&ev); err != nil || ev.OperationType != "insert" || ev.DocumentKey.ID != 1 {
		t.Fatalf("first event %+v (%v)", ev, err)
	}
	firstToken := cs.ResumeToken()
	if bytes.Equal(firstToken, initial) {
		t.Fatal("the resume token did not move")
	}
	if !cs.Next(ctx) || cs.Current.Lookup("operationType").StringValue() != "update" {
		t.Fatalf("second event: %s %v", cs.Current, cs.Err())
	}
	// TryNext: nothing more (the delete is filtered), no error.
	if cs.TryNext(ctx) {
		t.Fatalf("unexpected event %s", cs.Current)
	}
	if cs.Err() != nil {
		t.Fatal(cs.Err())
	}
	gm := rec.startedNamed("getMore")
	if len(gm) == 0 || commandField(gm[0], "maxTimeMS").AsInt64() != 2000 {
		t.Fatalf("getMore without maxTimeMS from MaxAwaitTime: %v", gm)
	}

	// A new stream resuming after the first event sees the update.
	cs2, err := coll.Watch(ctx, nil, &sturdy.ChangeStreamOptions{ResumeAfter: firstToken})
	if err != nil {
		t.Fatal(err)
	}
	defer cs2.Close(ctx)
	if !cs2.Next(ctx) || cs2.Current.Lookup("operationType").StringValue() != "update" {
		t.Fatalf("resumed stream: %s %v", cs2.Current, cs2.Err())
	}
}

func TestChangeStreamResumesAfterNetworkError(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	rec := &recorder{}
	client := connect(t, cluster.URI(), func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	db := client.Database("db")

	cs, err := db.Watch(ctx, nil, &sturdy.ChangeStreamOptions{MaxAwaitTime: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	if _, err := db.Collection("a").InsertOne(ctx, d("_id", "one")); err != nil {
		t.Fatal(err)
	}
	if !cs.Next(ctx) {
		t.Fatal(cs.Err())
	}
	if _, err := db.Collection("b").InsertOne(ctx, d("_id", "two")); err != nil {
		t.Fatal(err)
	}
	setFailPoint(t, cluster, d("configureFailPoint", "failCommand", "mode", d("times", 1),
		"data", d("failCommands", bson.A{"getMore"}, "closeConnection", true)))
	if !cs.Next(ctx) {
		t.Fatalf("Next after the network error: %v", cs.Err())
	}
	if id := cs.Current.Lookup("documentKey", "_id").StringValue(); id != "two" {
		t.Fatalf("event after resume: %s", cs.Current)
	}
	aggs := rec.startedNamed("aggregate")
	if len(aggs) != 2 {
		t.Fatalf("%d aggregates, want 2 (open + resume)", len(aggs))
	}
	stage := commandField(aggs[1], "pipeline").Array().Index(0).Document()
	if _, err := stage.LookupErr("$changeStream", "resumeAfter", "_data"); err != nil {
		t.Fatalf("resume aggregate without resumeAfter: %s", stage)
	}
	if commandField(aggs[1], "aggregate").AsInt64() != 1 {
		t.Fatalf("resume aggregate target: %s", aggs[1].Command)
	}
}

func TestChangeStreamErrorsAreNotResumed(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	client := connect(t, cluster.URI(), nil)

	cs, err := client.Watch(ctx, nil, &sturdy.ChangeStreamOptions{MaxAwaitTime: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	// A non-resumable server error on getMore ends the stream.
	setFailPoint(t, cluster, d("configureFailPoint", "failCommand", "mode", d("times", 1),
		"data", d("failCommands", bson.A{"getMore"}, "errorCode", 2)))
	if cs.Next(ctx) {
		t.Fatal("Next succeeded despite the error")
	}
	if errCode(cs.Err()) != 2 {
		t.Fatalf("Err = %v, want code 2", cs.Err())
	}
	// The options are validated client-side.
	if _, err := client.Watch(ctx, nil, &sturdy.ChangeStreamOptions{ResumeAfter: d("_data", "x"), StartAfter: d("_data", "x")}); err == nil {
		t.Fatal("ResumeAfter with StartAfter accepted")
	}
	// A standalone has no change streams: the aggregate's error is returned.
	single := mongosim.StartWithOptions(t, mongosim.Options{Standalone: true})
	sc := connect(t, single.URI(), nil)
	if _, err := sc.Database("db").Watch(ctx, nil); errCode(err) != 40573 {
		t.Fatalf("standalone Watch: %v", err)
	}
}
