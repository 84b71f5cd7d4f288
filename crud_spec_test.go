package sturdy_test

import (
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/mongosim"
)

// TestBypassDocumentValidationIsTriState checks that every write option's
// BypassDocumentValidation is sent as given, false included, and not at
// all when nil.
func TestBypassDocumentValidationIsTriState(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	rec := &recorder{}
	c := connect(t, cluster.URI(), func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	coll := c.Database("db").Collection("bdv")
	out := bson.A{d("$match", d()), d("$out", "bdv_out")}

	writes := []struct {
		name, command string
		run           func(bdv *bool) error
	}{
		{"InsertOne", "insert", func(b *bool) error {
			_, err := coll.InsertOne(ctx, d(), &sturdy.InsertOneOptions{BypassDocumentValidation: b})
			return err
		}},
		{"InsertMany", "insert", func(b *bool) error {
			_, err := coll.InsertMany(ctx, []any{d()}, &sturdy.InsertManyOptions{BypassDocumentValidation: b})
			return err
		}},
		{"UpdateOne", "update", func(b *bool) error {
			_, err := coll.UpdateOne(ctx, nil, d("$set", d("x", 1)), &sturdy.UpdateOptions{BypassDocumentValidation: b})
			return err
		}},
		{"ReplaceOne", "update", func(b *bool) error {
			_, err := coll.ReplaceOne(ctx, nil, d("x", 2), &sturdy.ReplaceOptions{BypassDocumentValidation: b})
			return err
		}},
		{"BulkWrite", "insert", func(b *bool) error {
			_, err := coll.BulkWrite(ctx, []sturdy.WriteModel{&sturdy.InsertOneModel{Document: d()}}, &sturdy.BulkWriteOptions{BypassDocumentValidation: b})
			return err
		}},
		{"FindOneAndUpdate", "findAndModify", func(b *bool) error {
			return coll.FindOneAndUpdate(ctx, nil, d("$set", d("y", 1)), &sturdy.FindOneAndUpdateOptions{BypassDocumentValidation: b}).Err()
		}},
		{"FindOneAndReplace", "findAndModify", func(b *bool) error {
			return coll.FindOneAndReplace(ctx, nil, d("y", 2), &sturdy.FindOneAndReplaceOptions{BypassDocumentValidation: b}).Err()
		}},
		{"Aggregate $out", "aggregate", func(b *bool) error {
			cur, err := coll.Aggregate(ctx, out, &sturdy.AggregateOptions{BypassDocumentValidation: b})
			if err == nil {
				err = cur.Close(ctx)
			}
			return err
		}},
	}
	for _, w := range writes {
		for _, bdv := range []*bool{nil, ptr(false), ptr(true)} {
			rec.reset()
			if err := w.run(bdv); err != nil {
				t.Fatalf("%s: %v", w.name, err)
			}
			evs := rec.startedNamed(w.command)
			if len(evs) != 1 {
				t.Fatalf("%s: %d %s commands", w.name, len(evs), w.command)
			}
			v, err := evs[0].Command.LookupErr("bypassDocumentValidation")
			switch {
			case bdv == nil && err == nil:
				t.Errorf("%s with nil BypassDocumentValidation sent %v", w.name, v)
			case bdv != nil && (err != nil || v.Type != bson.TypeBoolean || v.Boolean() != *bdv):
				t.Errorf("%s with BypassDocumentValidation %v sent %v (%v)", w.name, *bdv, v, err)
			}
		}
	}

	// A read-only aggregation never carries it.
	rec.reset()
	cur, err := coll.Aggregate(ctx, bson.A{d("$match", d())}, &sturdy.AggregateOptions{BypassDocumentValidation: ptr(false)})
	if err != nil {
		t.Fatal(err)
	}
	_ = cur.Close(ctx)
	if ev := rec.startedNamed("aggregate"); len(ev) != 1 || commandField(ev[0], "bypassDocumentValidation").Type != 0 {
		t.Errorf("read-only aggregate carries bypassDocumentValidation: %v", ev)
	}
}

// TestFindBatchSizeEqualToLimit checks the CRUD spec's limit+1 rule, which
// lets the server close the cursor with the first batch.
func TestFindBatchSizeEqualToLimit(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	rec := &recorder{}
	c := connect(t, cluster.URI(), func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	coll := c.Database("db").Collection("limits")
	if _, err := coll.InsertMany(ctx, []any{d("_id", 1), d("_id", 2), d("_id", 3), d("_id", 4), d("_id", 5)}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		limit           int64
		batchSize, sent int32
	}{{3, 3, 4}, {3, 2, 2}, {0, 2, 2}} {
		rec.reset()
		cur, err := coll.Find(ctx, nil, &sturdy.FindOptions{Limit: tc.limit, BatchSize: tc.batchSize, Sort: d("_id", 1)})
		if err != nil {
			t.Fatal(err)
		}
		var docs []bson.M
		if err := cur.All(ctx, &docs); err != nil {
			t.Fatal(err)
		}
		want := int(tc.limit)
		if want == 0 {
			want = 5
		}
		if len(docs) != want {
			t.Errorf("limit %d batchSize %d: %d documents, want %d", tc.limit, tc.batchSize, len(docs), want)
		}
		ev := rec.startedNamed("find")
		if len(ev) != 1 {
			t.Fatalf("%d find commands", len(ev))
		}
		if got := commandField(ev[0], "batchSize").AsInt64(); got != int64(tc.sent) {
			t.Errorf("limit %d batchSize %d: sent batchSize %d, want %d", tc.limit, tc.batchSize, got, tc.sent)
		}
		if tc.limit == int64(tc.batchSize) && len(rec.startedNamed("getMore"))+len(rec.startedNamed("killCursors")) > 0 {
			t.Errorf("limit == batchSize left a cursor open: getMore or killCursors sent")
		}
	}
}

// TestFindOneAndModifyUnacknowledged checks that w: 0 findAndModify is sent
// (with moreToCome) and reported as ErrUnacknowledgedWrite.
func TestFindOneAndModifyUnacknowledged(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	rec := &recorder{}
	c := connect(t, cluster.URI(), func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	acked := c.Database("db").Collection("fam")
	if _, err := acked.InsertMany(ctx, []any{d("_id", 1, "x", 1), d("_id", 2, "x", 1), d("_id", 3, "x", 1)}); err != nil {
		t.Fatal(err)
	}
	unacked := c.Database("db").Collection("fam", &sturdy.CollectionOptions{WriteConcern: &sturdy.WriteConcern{W: 0}})

	rec.reset()
	if err := unacked.FindOneAndUpdate(ctx, d("_id", 1), d("$inc", d("x", 1)), &sturdy.FindOneAndUpdateOptions{Hint: "_id_"}).Err(); !errors.Is(err, sturdy.ErrUnacknowledgedWrite) {
		t.Fatalf("FindOneAndUpdate w:0: %v, want ErrUnacknowledgedWrite", err)
	}
	if err := unacked.FindOneAndReplace(ctx, d("_id", 2), d("x", 7)).Err(); !errors.Is(err, sturdy.ErrUnacknowledgedWrite) {
		t.Fatalf("FindOneAndReplace w:0: %v", err)
	}
	if err := unacked.FindOneAndDelete(ctx, d("_id", 3)).Err(); !errors.Is(err, sturdy.ErrUnacknowledgedWrite) {
		t.Fatalf("FindOneAndDelete w:0: %v", err)
	}
	evs := rec.startedNamed("findAndModify")
	if len(evs) != 3 {
		t.Fatalf("%d findAndModify commands, want 3", len(evs))
	}
	for _, e := range evs {
		if w := commandField(e, "writeConcern").Document().Lookup("w").AsInt64(); w != 0 || e.TxnNumber != nil || e.LSID != nil {
			t.Errorf("unacknowledged findAndModify: w %d, txnNumber %v, lsid %v", w, e.TxnNumber, e.LSID)
		}
	}
	// The writes happened, though nobody waited for them.
	deadline := time.Now().Add(5 * time.Second)
	for {
		var got []bson.M
		cur, err := acked.Find(ctx, nil, &sturdy.FindOptions{Sort: d("_id", 1)})
		if err == nil {
			err = cur.All(ctx, &got)
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 2 && got[0]["x"] == int32(2) && got[1]["x"] == int32(7) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the unacknowledged writes: %v", got)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// An explicit session cannot be used unacknowledged.
	s, err := c.StartSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.EndSession(ctx)
	if err := unacked.FindOneAndDelete(ctx, d("_id", 1), &sturdy.FindOneAndDeleteOptions{Session: s}).Err(); !errors.Is(err, sturdy.ErrUnacknowledgedSession) {
		t.Errorf("w:0 findAndModify with a session: %v, want ErrUnacknowledgedSession", err)
	}
}

// TestOutAggregateCarriesReadPreference checks the CRUD spec's rule for
// $out and $merge on 5.0+ deployments: the collection's read preference
// selects the server and is sent along.
func TestOutAggregateCarriesReadPreference(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	rec := &recorder{}
	c := connect(t, cluster.URI(), func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	rp := &sturdy.ReadPreference{Mode: sturdy.SecondaryPreferredMode, MaxStaleness: 600 * time.Second}
	coll := c.Database("db").Collection("src", &sturdy.CollectionOptions{ReadPreference: rp})
	if _, err := coll.InsertOne(ctx, d("_id", 1)); err != nil {
		t.Fatal(err)
	}
	for _, stage := range []bson.D{d("$out", "dst"), d("$merge", d("into", "dst"))} {
		rec.reset()
		cur, err := coll.Aggregate(ctx, bson.A{d("$match", d()), stage})
		if err != nil {
			t.Fatal(err)
		}
		_ = cur.Close(ctx)
		ev := rec.startedNamed("aggregate")
		if len(ev) != 1 {
			t.Fatalf("%d aggregate commands", len(ev))
		}
		got := commandField(ev[0], "$readPreference")
		if got.Type != bson.TypeEmbeddedDocument || got.Document().Lookup("mode").StringValue() != "secondaryPreferred" ||
			got.Document().Lookup("maxStalenessSeconds").AsInt64() != 600 {
			t.Errorf("%v aggregate: $readPreference %v", stage, got)
		}
	}
	n, err := c.Database("db").Collection("dst").CountDocuments(ctx, nil)
	if err != nil || n != 1 {
		t.Fatalf("output collection: %d documents, %v", n, err)
	}
}
