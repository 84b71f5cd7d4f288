package sturdy_test

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/mongosim"
)

func TestCursorDrainsAcrossGetMores(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	rec := &recorder{}
	c := connect(t, cluster.URI(), func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	coll := c.Database("db").Collection("cur")
	const n = 10_000
	docs := make([]any, n)
	for i := range docs {
		docs[i] = d("_id", i)
	}
	if _, err := coll.InsertMany(ctx, docs, nil); err != nil {
		t.Fatal(err)
	}
	rec.reset()

	cur, err := coll.Find(ctx, nil, &sturdy.FindOptions{BatchSize: 1000, Sort: d("_id", 1)})
	if err != nil {
		t.Fatal(err)
	}
	if cur.ID() == 0 {
		t.Fatal("cursor exhausted after the first batch")
	}
	seen := 0
	for cur.Next(ctx) {
		var doc struct {
			ID int `bson:"_id"`
		}
		if err := cur.Decode(&doc); err != nil {
			t.Fatal(err)
		}
		if doc.ID != seen {
			t.Fatalf("document %d has _id %d", seen, doc.ID)
		}
		seen++
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	if seen != n || cur.ID() != 0 {
		t.Fatalf("saw %d documents, cursor id %d", seen, cur.ID())
	}
	if err := cur.Close(ctx); err != nil {
		t.Fatal(err)
	}
	finds, getMores := rec.startedNamed("find"), rec.startedNamed("getMore")
	if len(finds) != 1 || len(getMores) < 9 {
		t.Fatalf("%d finds, %d getMores; want 1 and at least 9", len(finds), len(getMores))
	}
	for _, g := range getMores {
		// getMore goes to the cursor's server on the cursor's session.
		if g.ServerAddress != finds[0].ServerAddress || !bytesEqual(g.LSID, finds[0].LSID) || g.LSID == nil {
			t.Fatalf("getMore on %s lsid %v; find on %s lsid %v", g.ServerAddress, g.LSID, finds[0].ServerAddress, finds[0].LSID)
		}
	}
	if len(rec.startedNamed("killCursors")) != 0 {
		t.Fatal("killCursors sent for an exhausted cursor")
	}
}

func bytesEqual(a, b bson.Raw) bool { return string(a) == string(b) }

func TestCursorCloseKillsCursor(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	rec := &recorder{}
	c := connect(t, cluster.URI(), func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	coll := c.Database("db").Collection("kill")
	docs := make([]any, 50)
	for i := range docs {
		docs[i] = d("_id", i)
	}
	if _, err := coll.InsertMany(ctx, docs, nil); err != nil {
		t.Fatal(err)
	}
	cur, err := coll.Find(ctx, nil, &sturdy.FindOptions{BatchSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if !cur.Next(ctx) {
			t.Fatal(cur.Err())
		}
	}
	id := cur.ID()
	if id == 0 {
		t.Fatal("cursor already exhausted")
	}
	if err := cur.Close(ctx); err != nil {
		t.Fatal(err)
	}
	kills := rec.startedNamed("killCursors")
	if len(kills) != 1 {
		t.Fatalf("%d killCursors commands", len(kills))
	}
	arr, _ := commandField(kills[0], "cursors").ArrayOK()
	vals, _ := arr.Values()
	if len(vals) != 1 || vals[0].Int64() != id || commandField(kills[0], "killCursors").StringValue() != "kill" {
		t.Fatalf("killCursors command %v, want cursor %d", kills[0].Command, id)
	}
	reply := rec.succeededNamed("killCursors")
	if len(reply) != 1 {
		t.Fatal("killCursors did not succeed")
	}
	killed, _ := reply[0].Reply.Lookup("cursorsKilled").ArrayOK()
	if kv, _ := killed.Values(); len(kv) != 1 {
		t.Fatalf("server reply %v", reply[0].Reply)
	}
	if cur.Next(ctx) {
		t.Fatal("Next after Close")
	}

	// A limit smaller than the batch and a single batch: no cursor left.
	cur, err = coll.Find(ctx, nil, &sturdy.FindOptions{Limit: -3})
	if err != nil {
		t.Fatal(err)
	}
	if cur.ID() != 0 || cur.RemainingBatchLength() != 3 {
		t.Fatalf("single batch: id %d, %d docs", cur.ID(), cur.RemainingBatchLength())
	}
	_ = cur.Close(ctx)
}

func TestUnacknowledgedWrite(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	rec := &recorder{}
	c := connect(t, cluster.URI(), func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	w0 := c.Database("db").Collection("w0", &sturdy.CollectionOptions{WriteConcern: &sturdy.WriteConcern{W: 0}})
	res, err := w0.InsertOne(ctx, d("_id", "fire-and-forget"), nil)
	if err != nil || res.Acknowledged {
		t.Fatalf("w:0 InsertOne: %v %+v", err, res)
	}
	ur, err := w0.UpdateOne(ctx, d("_id", "fire-and-forget"), d("$set", d("x", 1)), nil)
	if err != nil || ur.Acknowledged {
		t.Fatalf("w:0 UpdateOne: %v %+v", err, ur)
	}
	ins := rec.startedNamed("insert")
	if len(ins) != 1 || ins[0].LSID != nil || ins[0].TxnNumber != nil {
		t.Fatalf("w:0 insert must carry no lsid/txnNumber: %+v", ins)
	}
	// The write arrives: a later read sees it.
	acked := c.Database("db").Collection("w0")
	deadline := time.Now().Add(5 * time.Second)
	for {
		var got bson.M
		err := acked.FindOne(ctx, d("_id", "fire-and-forget"), nil).Decode(&got)
		if err == nil && got["x"] == int32(1) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("w:0 writes never arrived: %v %v", err, got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// An explicit session cannot be used with w:0.
	s, err := c.StartSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.EndSession(ctx)
	if _, err := w0.InsertOne(ctx, d("a", 1), &sturdy.InsertOneOptions{Session: s}); err == nil {
		t.Fatal("w:0 with an explicit session succeeded")
	}
}
