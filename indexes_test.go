package sturdy_test

import (
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/mongosim"
)

func TestIndexManagement(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	rec := &recorder{}
	c := connect(t, cluster.URI(), func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	coll := c.Database("db").Collection("ix")
	names := func() string {
		t.Helper()
		cur, err := coll.ListIndexes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var specs []bson.Raw
		if err := cur.All(ctx, &specs); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range specs {
			out = append(out, s.Lookup("name").StringValue())
		}
		return strings.Join(out, ",")
	}

	got, err := coll.CreateIndexes(ctx, []sturdy.IndexModel{
		{Keys: d("a", 1)},
		{Keys: d("b", -1, "c", 1), Options: &sturdy.IndexOptions{Unique: ptr(true)}},
		{Keys: d("d", 1), Options: &sturdy.IndexOptions{Name: ptr("by_d"), Sparse: ptr(true)}},
	}, &sturdy.CreateIndexOptions{Comment: "three"})
	if err != nil || strings.Join(got, ",") != "a_1,b_-1_c_1,by_d" {
		t.Fatalf("CreateIndexes: %v, %v", got, err)
	}
	if n := len(rec.startedNamed("createIndexes")); n != 1 {
		t.Fatalf("%d createIndexes commands for three indexes, want 1", n)
	}
	if names() != "_id_,a_1,b_-1_c_1,by_d" {
		t.Fatalf("indexes %s", names())
	}
	// The unique index is enforced: the command really created it.
	if _, err := coll.InsertMany(ctx, []any{d("b", 1, "c", 1), d("b", 1, "c", 1)}); !sturdy.IsDuplicateKey(err) {
		t.Fatalf("duplicate under the unique index: %v", err)
	}

	if err := coll.DropIndexByKeys(ctx, d("b", -1, "c", 1)); err != nil {
		t.Fatal(err)
	}
	if err := coll.DropIndex(ctx, "by_d", &sturdy.DropIndexOptions{Comment: "bye"}); err != nil {
		t.Fatal(err)
	}
	if names() != "_id_,a_1" {
		t.Fatalf("after dropping two: %s", names())
	}
	var ce *sturdy.CommandError
	if err := coll.DropIndexByKeys(ctx, d("zzz", 1)); !errors.As(err, &ce) || ce.Code != 27 {
		t.Fatalf("dropping a missing index: %v, want IndexNotFound (27)", err)
	}
	if _, err := coll.CreateIndex(ctx, sturdy.IndexModel{Keys: d("e", 1)}); err != nil {
		t.Fatal(err)
	}
	if err := coll.DropIndexes(ctx); err != nil {
		t.Fatal(err)
	}
	if names() != "_id_" {
		t.Fatalf("after DropIndexes: %s", names())
	}
	drops := rec.startedNamed("dropIndexes")
	last := drops[len(drops)-1].Command
	if last.Lookup("index").StringValue() != "*" {
		t.Fatalf("DropIndexes sent %v", last)
	}
	if drops[1].Command.Lookup("comment").StringValue() != "bye" {
		t.Fatalf("DropIndex options not sent: %v", drops[1].Command)
	}
	if _, err := coll.CreateIndexes(ctx, nil); !errors.Is(err, sturdy.ErrEmptySlice) {
		t.Fatalf("CreateIndexes without models: %v", err)
	}
}

func TestCollectionRename(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	c := connect(t, cluster.URI(), nil)
	db := c.Database("db")
	src, dst := db.Collection("src"), db.Collection("dst")
	if _, err := src.InsertOne(ctx, d("_id", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := dst.InsertOne(ctx, d("_id", 2)); err != nil {
		t.Fatal(err)
	}
	// An existing target is refused unless DropTarget.
	err := src.Rename(ctx, "dst")
	var ce *sturdy.CommandError
	if !errors.As(err, &ce) || ce.Code != 48 {
		t.Fatalf("rename onto an existing collection: %v, want 48 NamespaceExists", err)
	}
	if err := src.Rename(ctx, "dst", &sturdy.RenameOptions{DropTarget: true}); err != nil {
		t.Fatal(err)
	}
	if n, err := dst.CountDocuments(ctx, d("_id", 1)); err != nil || n != 1 {
		t.Fatalf("renamed document: %d, %v", n, err)
	}
	if n, err := dst.CountDocuments(ctx, d()); err != nil || n != 1 {
		t.Fatalf("target after dropTarget holds %d documents (%v), want 1", n, err)
	}
	names, err := db.ListCollectionNames(ctx, d())
	if err != nil || strings.Join(names, ",") != "dst" {
		t.Fatalf("collections %v (%v), want only dst", names, err)
	}
}

func TestRunCursorCommand(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	c := connect(t, cluster.URI(), nil)
	db := c.Database("db")
	if _, err := db.RunCommand(ctx, d("create", "log", "capped", true, "size", 4096)); err != nil {
		t.Fatal(err)
	}
	coll := db.Collection("log")
	for i := 1; i <= 3; i++ {
		if _, err := coll.InsertOne(ctx, d("_id", i)); err != nil {
			t.Fatal(err)
		}
	}
	cur, err := db.RunCursorCommand(ctx, d("find", "log", "tailable", true, "batchSize", 2), &sturdy.RunCursorCommandOptions{BatchSize: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close(ctx)
	for want := int32(1); want <= 3; want++ {
		if !cur.TryNext(ctx) || cur.Current.Lookup("_id").Int32() != want {
			t.Fatalf("document %d: %v, %v", want, cur.Current, cur.Err())
		}
	}
	// Nothing new: TryNext gives up after one empty batch, the cursor open.
	if cur.TryNext(ctx) || cur.Err() != nil || cur.ID() == 0 {
		t.Fatalf("empty batch: current %v, err %v, id %d", cur.Current, cur.Err(), cur.ID())
	}
	if _, err := coll.InsertOne(ctx, d("_id", 4)); err != nil {
		t.Fatal(err)
	}
	if !cur.TryNext(ctx) || cur.Current.Lookup("_id").Int32() != 4 {
		t.Fatalf("tailed document: %v, %v", cur.Current, cur.Err())
	}

	// A reply without a cursor is an error of the client, not the server.
	_, err = db.RunCursorCommand(ctx, d("ping", 1))
	var ce *sturdy.CommandError
	if err == nil || errors.As(err, &ce) || !strings.Contains(err.Error(), "no cursor") {
		t.Fatalf("ping as a cursor command: %v", err)
	}
}
