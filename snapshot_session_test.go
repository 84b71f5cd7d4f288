package sturdy_test

import (
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/mongosim"
)

// A snapshot session reads one point in time: writes made after its first
// read are invisible to it, a second session given its SnapshotTime reads
// the same point, and the commands carry readConcern snapshot with
// atClusterTime from the second one on.
func TestSnapshotSessionReadsOneSnapshot(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	rec := &recorder{}
	c := connect(t, cluster.URI(), func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	coll := c.Database("db").Collection("snap")
	if _, err := coll.InsertMany(ctx, []any{d("_id", 1), d("_id", 2)}); err != nil {
		t.Fatal(err)
	}
	count := func(s *sturdy.Session) int {
		t.Helper()
		var opts *sturdy.FindOptions
		if s != nil {
			opts = &sturdy.FindOptions{Session: s}
		}
		cur, err := coll.Find(ctx, nil, opts)
		if err != nil {
			t.Fatal(err)
		}
		var docs []bson.D
		if err := cur.All(ctx, &docs); err != nil {
			t.Fatal(err)
		}
		return len(docs)
	}

	s, err := c.StartSession(ctx, &sturdy.SessionOptions{Snapshot: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.EndSession(ctx)
	if _, ok := s.SnapshotTime(); ok {
		t.Fatal("snapshot time known before the first read")
	}
	if n := count(s); n != 2 {
		t.Fatalf("first snapshot read: %d documents, want 2", n)
	}
	at, ok := s.SnapshotTime()
	if !ok || at.IsZero() {
		t.Fatalf("no snapshot time after the first read: %v %v", at, ok)
	}
	if _, err := coll.InsertOne(ctx, d("_id", 3)); err != nil {
		t.Fatal(err)
	}
	if n := count(s); n != 2 {
		t.Fatalf("snapshot read after a later insert: %d documents, want 2", n)
	}
	if n := count(nil); n != 3 {
		t.Fatalf("read outside the session: %d documents, want 3", n)
	}
	s2, err := c.StartSession(ctx, &sturdy.SessionOptions{Snapshot: true, SnapshotTime: &at})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.EndSession(ctx)
	if n := count(s2); n != 2 {
		t.Fatalf("session started at the first one's snapshot time: %d documents, want 2", n)
	}

	finds := rec.startedNamed("find")
	if len(finds) != 4 {
		t.Fatalf("%d finds started, want 4", len(finds))
	}
	for i, want := range []struct {
		snapshot, at bool
	}{{true, false}, {true, true}, {false, false}, {true, true}} {
		rc, _ := finds[i].Command.Lookup("readConcern").DocumentOK()
		level, _ := rc.Lookup("level").StringValueOK()
		_, _, hasAt := rc.Lookup("atClusterTime").TimestampOK()
		if (level == "snapshot") != want.snapshot || hasAt != want.at {
			t.Errorf("find %d: readConcern %v, want snapshot %v with atClusterTime %v", i, rc, want.snapshot, want.at)
		}
	}

	if err := s.StartTransaction(nil); !errors.Is(err, sturdy.ErrInvalidArgument) {
		t.Fatalf("transaction in a snapshot session: %v", err)
	}
	yes := true
	if _, err := c.StartSession(ctx, &sturdy.SessionOptions{Snapshot: true, CausalConsistency: &yes}); !errors.Is(err, sturdy.ErrInvalidArgument) {
		t.Fatalf("snapshot and causally consistent: %v", err)
	}
	if _, err := c.StartSession(ctx, &sturdy.SessionOptions{SnapshotTime: &at}); !errors.Is(err, sturdy.ErrInvalidArgument) {
		t.Fatalf("SnapshotTime without Snapshot: %v", err)
	}
}
