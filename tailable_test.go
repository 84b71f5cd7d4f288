package sturdy_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/mongosim"
)

// cappedColl creates the capped collection db.name holding docs, with a
// client of its own (no timeoutMS).
func cappedColl(t *testing.T, cluster *mongosim.Cluster, name string, docs ...any) {
	t.Helper()
	ctx := testCtx(t)
	db := connect(t, cluster.URI(), nil).Database("db")
	yes, size := true, int64(1<<20)
	if err := db.CreateCollection(ctx, name, &sturdy.CreateCollectionOptions{Capped: &yes, SizeInBytes: &size}); err != nil {
		t.Fatal(err)
	}
	if len(docs) > 0 {
		if _, err := db.Collection(name).InsertMany(ctx, docs); err != nil {
			t.Fatal(err)
		}
	}
}

// A tailable cursor stays open past its last document; Next waits for the
// next one, and an awaitData cursor's getMores carry MaxAwaitTime.
func TestTailableCursorFollowsInserts(t *testing.T) {
	cluster := mongosim.Start(t)
	rec := &recorder{}
	c := connect(t, cluster.URI(), func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	ctx := testCtx(t)
	for _, ct := range []sturdy.CursorType{sturdy.Tailable, sturdy.TailableAwait} {
		name := fmt.Sprint("log", ct)
		cappedColl(t, cluster, name, d("_id", 1))
		coll := c.Database("db").Collection(name)
		rec.reset()
		cur, err := coll.Find(ctx, d(), &sturdy.FindOptions{CursorType: ct, MaxAwaitTime: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if !cur.Next(ctx) || cur.Current.Lookup("_id").Int32() != 1 {
			t.Fatalf("first document: %v %v", cur.Current, cur.Err())
		}
		// Nothing new yet: TryNext gives up after one empty batch; the
		// cursor stays open.
		if cur.TryNext(ctx) || cur.Err() != nil || cur.ID() == 0 {
			t.Fatalf("TryNext on nothing new: %v, err %v, id %d", cur.Current, cur.Err(), cur.ID())
		}
		// Next waits through empty batches until a document comes.
		inserted := make(chan error, 1)
		go func() {
			_, err := coll.InsertOne(ctx, d("_id", int32(ct)+10))
			inserted <- err
		}()
		if !cur.Next(ctx) || cur.Current.Lookup("_id").Int32() != int32(ct)+10 {
			t.Fatalf("tailed document: %v %v", cur.Current, cur.Err())
		}
		if err := <-inserted; err != nil {
			t.Fatal(err)
		}
		find := rec.startedNamed("find")[0]
		if !commandField(find, "tailable").Boolean() || commandField(find, "awaitData").Type != 0 != (ct == sturdy.TailableAwait) {
			t.Errorf("%v: find %s", ct, find.Command)
		}
		for _, g := range rec.startedNamed("getMore") {
			v := commandField(g, "maxTimeMS")
			if ct == sturdy.TailableAwait && v.AsInt64() != 50 || ct == sturdy.Tailable && v.Type != 0 {
				t.Errorf("%v: getMore %s", ct, g.Command)
			}
		}
		if err := cur.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// CSOT prose test 5 (tailable cursors), with longer times for a shared
// machine: under timeoutMS=300, with every getMore blocked 200 ms, a
// tailable cursor returns its first document without a getMore, and the
// next Next fails with a timeout after two getMores (the first returns an
// empty batch, the second outlives the 300 ms that the whole Next has).
func TestTimeoutTailableCursorProse5(t *testing.T) {
	cluster := mongosim.Start(t)
	cappedColl(t, cluster, "coll", d("x", 1))
	setFailPoint(t, cluster, d("configureFailPoint", "failCommand", "mode", "alwaysOn",
		"data", d("failCommands", bson.A{"getMore"}, "blockConnection", true, "blockTimeMS", 200)))
	t.Cleanup(func() { _ = cluster.SetFailPoint(failPointOff("failCommand")) })
	rec := &recorder{}
	c := connect(t, cluster.URI()+"&timeoutMS=300", func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	ctx := context.Background()
	cur, err := c.Database("db").Collection("coll").Find(ctx, d(), &sturdy.FindOptions{CursorType: sturdy.Tailable})
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close(ctx)
	if cur.ID() == 0 {
		t.Fatal("tailable cursor id 0")
	}
	if !cur.Next(ctx) || cur.Current.Lookup("x").Int32() != 1 || len(rec.startedNamed("getMore")) != 0 {
		t.Fatalf("first document: %v %v (%d getMores)", cur.Current, cur.Err(), len(rec.startedNamed("getMore")))
	}
	start := time.Now()
	if cur.Next(ctx) {
		t.Fatalf("Next returned %v", cur.Current)
	}
	took := time.Since(start)
	if err := cur.Err(); !errors.Is(err, context.DeadlineExceeded) || !sturdy.IsTimeout(err) {
		t.Fatalf("Next: %v, want a timeout", err)
	}
	if took < 250*time.Millisecond || took > 2*time.Second {
		t.Errorf("Next timed out after %v, want about 300 ms", took)
	}
	if n, m := len(rec.startedNamed("find")), len(rec.startedNamed("getMore")); n != 1 || m != 2 {
		t.Errorf("%d finds and %d getMores, want 1 and 2", n, m)
	}
	for _, e := range append(rec.startedNamed("find"), rec.startedNamed("getMore")...) {
		if v := commandField(e, "maxTimeMS"); v.Type != 0 {
			t.Errorf("a tailable (non-awaitData) cursor sent maxTimeMS: %s", e.Command)
		}
	}
}

// Under timeoutMS each Next of a tailable cursor gets the whole timeoutMS
// afresh: two Nexts that each wait 250 ms for their document both succeed
// under a 400 ms timeoutMS (a cursor-lifetime deadline would end the
// second). The awaitData find carries maxTimeMS, its getMores carry
// MaxAwaitTime.
func TestTailableAwaitTimeoutRefreshedPerNext(t *testing.T) {
	cluster := mongosim.Start(t)
	cappedColl(t, cluster, "coll", d("_id", 0))
	rec := &recorder{}
	c := connect(t, cluster.URI()+"&timeoutMS=400", func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	ctx := context.Background()
	coll := c.Database("db").Collection("coll")
	cur, err := coll.Find(ctx, d(), &sturdy.FindOptions{CursorType: sturdy.TailableAwait, MaxAwaitTime: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close(ctx)
	if !cur.Next(ctx) {
		t.Fatal(cur.Err())
	}
	if v := commandField(rec.startedNamed("find")[0], "maxTimeMS"); v.Type == 0 {
		t.Error("the awaitData find was sent without maxTimeMS")
	}
	t.Cleanup(func() { _ = cluster.SetFailPoint(failPointOff("failCommand")) })
	start := time.Now()
	for i := int32(1); i <= 2; i++ {
		if _, err := coll.InsertOne(ctx, d("_id", i)); err != nil {
			t.Fatal(err)
		}
		setFailPoint(t, cluster, d("configureFailPoint", "failCommand", "mode", d("times", 1),
			"data", d("failCommands", bson.A{"getMore"}, "blockConnection", true, "blockTimeMS", 250)))
		if !cur.Next(ctx) || cur.Current.Lookup("_id").Int32() != i {
			t.Fatalf("Next %d: %v %v", i, cur.Current, cur.Err())
		}
	}
	if took := time.Since(start); took < 500*time.Millisecond {
		t.Errorf("two 250 ms getMores took %v", took)
	}
	for _, g := range rec.startedNamed("getMore") {
		if n := commandField(g, "maxTimeMS").AsInt64(); n <= 0 || n > 100 {
			t.Errorf("getMore maxTimeMS %d, want in (0, 100]", n)
		}
	}

	// With nothing to return, Next ends at the timeout, its getMores
	// capped by the time left.
	rec.reset()
	start = time.Now()
	if cur.Next(ctx) {
		t.Fatalf("Next returned %v", cur.Current)
	}
	if err := cur.Err(); !sturdy.IsTimeout(err) {
		t.Fatalf("Next on nothing: %v, want a timeout", err)
	}
	if took := time.Since(start); took < 350*time.Millisecond || took > 2*time.Second {
		t.Errorf("Next timed out after %v, want about 400 ms", took)
	}
	if gm := rec.startedNamed("getMore"); len(gm) < 3 {
		t.Errorf("%d getMores in a 400 ms Next awaiting 100 ms each, want >= 3", len(gm))
	}
}

// The options the CSOT spec refuses client-side, before anything is sent:
// MaxAwaitTime not less than timeoutMS (find and aggregate), and the
// cursorLifetime timeoutMode on a tailable cursor.
func TestTailableTimeoutOptionsRefused(t *testing.T) {
	cluster := mongosim.Start(t)
	cappedColl(t, cluster, "coll", d("_id", 0))
	rec := &recorder{}
	c := connect(t, cluster.URI()+"&timeoutMS=200", func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	ctx := context.Background()
	coll := c.Database("db").Collection("coll")
	for name, open := range map[string]func() (*sturdy.Cursor, error){
		"find maxAwait = timeout": func() (*sturdy.Cursor, error) {
			return coll.Find(ctx, d(), &sturdy.FindOptions{CursorType: sturdy.TailableAwait, MaxAwaitTime: 200 * time.Millisecond})
		},
		"find maxAwait > operation timeout": func() (*sturdy.Cursor, error) {
			return coll.Find(sturdy.WithTimeout(ctx, 5*time.Millisecond), d(), &sturdy.FindOptions{CursorType: sturdy.TailableAwait, MaxAwaitTime: 10 * time.Millisecond})
		},
		"aggregate maxAwait > timeout": func() (*sturdy.Cursor, error) {
			return coll.Aggregate(ctx, bson.A{}, &sturdy.AggregateOptions{MaxAwaitTime: time.Second})
		},
		"tailable cursorLifetime": func() (*sturdy.Cursor, error) {
			return coll.Find(ctx, d(), &sturdy.FindOptions{CursorType: sturdy.Tailable, TimeoutMode: sturdy.TimeoutCursorLifetime})
		},
	} {
		if cur, err := open(); !errors.Is(err, sturdy.ErrInvalidArgument) || sturdy.IsTimeout(err) {
			t.Errorf("%s: got %v, %v; want an argument error", name, cur, err)
		}
	}
	if len(rec.started) != 0 {
		t.Errorf("%d commands sent for refused options", len(rec.started))
	}
	// Without a timeoutMS MaxAwaitTime is free.
	cur, err := coll.Find(sturdy.WithTimeout(ctx, 0), d(), &sturdy.FindOptions{CursorType: sturdy.TailableAwait, MaxAwaitTime: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_ = cur.Close(ctx)
}
