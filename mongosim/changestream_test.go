package mongosim

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// nextEvent waits for the next change event on cs.
func nextEvent(ctx context.Context, t *testing.T, cs *mongo.ChangeStream) event {
	t.Helper()
	if !cs.Next(ctx) {
		t.Fatalf("no event: %v", cs.Err())
	}
	return event(append(bson.Raw(nil), cs.Current...))
}

// event reads fields of a change event by dotted path.
type event bson.Raw

func (e event) get(path ...string) any {
	v, err := bson.Raw(e).LookupErr(path...)
	if err != nil {
		return "<missing>"
	}
	switch v.Type {
	case bson.TypeString:
		return v.StringValue()
	case bson.TypeInt32:
		return v.Int32()
	case bson.TypeBoolean:
		return v.Boolean()
	case bson.TypeNull:
		return nil
	}
	return v
}

func (e event) String() string { return bson.Raw(e).String() }

func TestChangeStreamCollectionEvents(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, _ := specClient(t, true)
	coll := client.Database("db").Collection("c")
	other := client.Database("db").Collection("other")

	cs, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetFullDocument(options.UpdateLookup))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)

	mustDo := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}, {Key: "b", Value: 1}})
	mustDo(err)
	_, err = other.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}) // another collection: not seen
	mustDo(err)
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 2}}}, {Key: "$unset", Value: bson.D{{Key: "b", Value: ""}}}})
	mustDo(err)
	_, err = coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "z", Value: true}})
	mustDo(err)
	_, err = coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: 1}})
	mustDo(err)

	ins := nextEvent(ctx, t, cs)
	if ins.get("operationType") != "insert" || ins.get("fullDocument", "a") != int32(1) ||
		ins.get("documentKey", "_id") != int32(1) || ins.get("ns", "coll") != "c" {
		t.Fatalf("insert event: %v", ins)
	}
	if ct, ok := ins.get("clusterTime").(bson.RawValue); !ok || ct.Type != bson.TypeTimestamp {
		t.Fatalf("clusterTime: %v", ins.get("clusterTime"))
	}
	upd := nextEvent(ctx, t, cs)
	if upd.get("operationType") != "update" || upd.get("updateDescription", "updatedFields", "a") != int32(2) ||
		upd.get("updateDescription", "removedFields", "0") != "b" || upd.get("updateDescription", "removedFields", "1") != "<missing>" {
		t.Fatalf("update event: %v", upd)
	}
	// updateLookup reads the document as it is now: already deleted.
	if fd := upd.get("fullDocument"); fd != nil {
		t.Fatalf("update event fullDocument (updateLookup after delete): %v", fd)
	}
	rep := nextEvent(ctx, t, cs)
	if rep.get("operationType") != "replace" || rep.get("fullDocument", "z") != true {
		t.Fatalf("replace event: %v", rep)
	}
	del := nextEvent(ctx, t, cs)
	if del.get("operationType") != "delete" || del.get("documentKey", "_id") != int32(1) {
		t.Fatalf("delete event: %v", del)
	}
	if del.get("fullDocument") != "<missing>" {
		t.Fatalf("delete event with fullDocument: %v", del)
	}
	// Tokens increase.
	if ins.get("_id", "_data").(string) >= del.get("_id", "_data").(string) {
		t.Fatalf("resume tokens do not increase: %v, %v", ins.get("_id"), del.get("_id"))
	}
}

func TestChangeStreamResumeAndFilter(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, _ := specClient(t, true)
	db := client.Database("db")
	coll := db.Collection("c")

	// A database stream with a $match on the operation type.
	cs, err := db.Watch(ctx, mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "operationType", Value: "insert"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Collection("c2").DeleteMany(ctx, bson.D{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	first := nextEvent(ctx, t, cs)
	if first.get("documentKey", "_id") != int32(1) {
		t.Fatalf("first event: %v", first)
	}
	token := cs.ResumeToken()
	_ = cs.Close(ctx)

	// Resuming after the first event sees the second and third inserts.
	cs2, err := db.Watch(ctx, mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "operationType", Value: "insert"}}}}},
		options.ChangeStream().SetResumeAfter(token))
	if err != nil {
		t.Fatal(err)
	}
	defer cs2.Close(ctx)
	for _, want := range []int32{2, 3} {
		ev := nextEvent(ctx, t, cs2)
		if ev.get("documentKey", "_id") != want || ev.get("operationType") != "insert" {
			t.Fatalf("resumed event: %v, want insert of %d", ev, want)
		}
	}
	// Nothing more: TryNext returns false without an error once the wait is over.
	short, cancelShort := context.WithTimeout(ctx, 5*time.Second)
	defer cancelShort()
	if cs2.TryNext(short) {
		t.Fatalf("unexpected event %v", cs2.Current)
	}
	if cs2.Err() != nil {
		t.Fatal(cs2.Err())
	}
}

func TestChangeStreamAwaitsAndWakes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, _ := specClient(t, true)
	coll := client.Database("db").Collection("c")
	cs, err := client.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetMaxAwaitTime(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	go func() {
		time.Sleep(200 * time.Millisecond)
		_, _ = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "late"}})
	}()
	start := time.Now()
	ev := nextEvent(ctx, t, cs)
	if ev.get("documentKey", "_id") != "late" {
		t.Fatalf("event: %v", ev)
	}
	// Woken by the write, not by the end of the 10s wait.
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the getMore was not woken by the write (%v)", d)
	}
}

func TestChangeStreamErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, _ := specClient(t, true)
	run := func(db string, cmd bson.D) error {
		return client.Database(db).RunCommand(ctx, cmd).Err()
	}
	stage := func(opts bson.D) bson.A { return bson.A{bson.D{{Key: "$changeStream", Value: opts}}} }
	cases := []struct {
		name string
		db   string
		cmd  bson.D
		code int32
	}{
		{"allChangesForCluster outside admin", "db", bson.D{{Key: "aggregate", Value: 1}, {Key: "pipeline", Value: stage(bson.D{{Key: "allChangesForCluster", Value: true}})}, {Key: "cursor", Value: bson.D{}}}, 72},
		{"startAtOperationTime not a timestamp", "db", bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: stage(bson.D{{Key: "startAtOperationTime", Value: int32(1)}})}, {Key: "cursor", Value: bson.D{}}}, 14},
		{"unknown option", "db", bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: stage(bson.D{{Key: "nope", Value: 1}})}, {Key: "cursor", Value: bson.D{}}}, 40415},
		{"bad resume token", "db", bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: stage(bson.D{{Key: "resumeAfter", Value: bson.D{{Key: "_data", Value: "zz"}}}})}, {Key: "cursor", Value: bson.D{}}}, 2},
	}
	for _, tc := range cases {
		err := run(tc.db, tc.cmd)
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != tc.code {
			t.Errorf("%s: got %v, want code %d", tc.name, err, tc.code)
		}
	}

	// A standalone server has no change streams.
	sc := StartWithOptions(t, Options{Standalone: true})
	sclient, err := mongo.Connect(options.Client().ApplyURI(sc.URI()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sclient.Disconnect(ctx) }()
	_, err = sclient.Database("db").Collection("c").Watch(ctx, mongo.Pipeline{})
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 40573 {
		t.Fatalf("standalone: got %v, want 40573", err)
	}
}

func TestChangeLogHistoryLost(t *testing.T) {
	l := newChangeLog(time.Now, newLogicalClock(time.Now))
	c := newCollection("db", "c")
	for i := 0; i < changeLogCap+10; i++ {
		l.recordBatch(c, []pendingChange{{kind: changeInsert, after: bson.D{{Key: "_id", Value: i}}}})
	}
	if _, ok := l.after(1, 1); ok {
		t.Fatal("resuming from a position older than the retained history should fail")
	}
	got, ok := l.after(l.seq-2, 0)
	if !ok || len(got) != 2 || got[1].seq != l.seq {
		t.Fatalf("after(seq-2) = %d changes, ok %v", len(got), ok)
	}
	seq, inv, _, err := parseResumeToken(resumeToken(12345))
	if err != nil || seq != 12345 || inv {
		t.Fatalf("token round trip: %d, %v, %v", seq, inv, err)
	}
	seq, inv, _, err = parseResumeToken(invalidateToken(12345))
	if err != nil || seq != 12345 || !inv {
		t.Fatalf("invalidate token round trip: %d, %v, %v", seq, inv, err)
	}
	ta, _ := value.Get(resumeToken(12345), "_data")
	tb, _ := value.Get(invalidateToken(12345), "_data")
	tc, _ := value.Get(resumeToken(12346), "_data")
	if !(ta.(string) < tb.(string) && tb.(string) < tc.(string)) {
		t.Fatalf("tokens out of order: %v %v %v", ta, tb, tc)
	}
}

// TestChangeLogRingKeepsWindow records more than three logs' worth of
// changes, singly and in batches, and checks at each step that the log
// keeps the same window as ever (the newest, dropping the older half when
// full), in order, by after, lookup and before, across the ring's wrap.
func TestChangeLogRingKeepsWindow(t *testing.T) {
	l := newChangeLog(time.Now, newLogicalClock(time.Now))
	c := newCollection("db", "c")
	kept, n := 0, 0
	check := func() {
		t.Helper()
		oldest := uint64(n - kept + 1)
		all, ok := l.after(oldest-1, 0)
		if !ok || len(all) != kept {
			t.Fatalf("after %d changes: after(%d) = %d changes, %v; want %d", n, oldest-1, len(all), ok, kept)
		}
		for i, ch := range all {
			if ch.seq != oldest+uint64(i) || ch.id != int(ch.seq) || (i > 0 && !all[i-1].at.Before(ch.at)) {
				t.Fatalf("after %d changes: change %d is seq %d, _id %v at %v", n, i, ch.seq, ch.id, ch.at)
			}
		}
		if _, ok := l.after(oldest-2, 0); oldest > 1 && ok {
			t.Fatalf("after %d changes: after(%d) covered: %v", n, oldest-2, ok)
		}
		if got, ok := l.lookup(oldest); !ok || got.seq != oldest {
			t.Fatalf("after %d changes: lookup(%d) = %d, %v", n, oldest, got.seq, ok)
		}
		if _, ok := l.lookup(oldest - 1); ok {
			t.Fatalf("after %d changes: lookup(%d) found a dropped change", n, oldest-1)
		}
		mid := all[kept/2]
		if pos, ok := l.before(mid.at); pos != mid.seq-1 || !ok {
			t.Fatalf("after %d changes: before(%v) = %d, %v", n, mid.at, pos, ok)
		}
		if got, ok := l.after(mid.seq-1, 3); !ok || len(got) != min(3, kept-kept/2) || got[0].seq != mid.seq {
			t.Fatalf("after %d changes: after(%d, 3) = %d changes", n, mid.seq-1, len(got))
		}
	}
	record := func(batch int) {
		var writes []pendingChange
		for range batch {
			n++
			if kept == changeLogCap {
				kept = changeLogCap / 2
			}
			kept++
			writes = append(writes, pendingChange{kind: changeInsert, after: bson.D{{Key: "_id", Value: n}}})
		}
		l.recordBatch(c, writes)
	}
	for step := 0; n < 37000; step++ {
		record(1 + step%97)
		if step%5 == 0 || n > 36900 {
			check()
		}
	}
}
