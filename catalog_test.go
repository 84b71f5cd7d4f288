package sturdy_test

import (
	"errors"
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/mongosim"
)

func TestListDatabases(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	rec := &recorder{}
	c := connect(t, cluster.URI(), func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	for _, db := range []string{"alpha", "beta"} {
		if _, err := c.Database(db).Collection("c").InsertOne(ctx, d("x", "some data")); err != nil {
			t.Fatal(err)
		}
	}

	rec.reset()
	res, err := c.ListDatabases(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, db := range res.Databases {
		names = append(names, db.Name)
		if (db.Name == "alpha" || db.Name == "beta") && (db.SizeOnDisk <= 0 || db.Empty) {
			t.Errorf("database %+v: want a positive size", db)
		}
	}
	if !slices.Contains(names, "alpha") || !slices.Contains(names, "beta") || res.TotalSize <= 0 || res.Raw == nil {
		t.Fatalf("ListDatabases = %+v", res)
	}
	cmd := rec.startedNamed("listDatabases")[0]
	if cmd.DatabaseName != "admin" || commandField(cmd, "nameOnly").Type != 0 || commandField(cmd, "filter").Type != 0 {
		t.Errorf("ListDatabases without options sent %v to %s", cmd.Command, cmd.DatabaseName)
	}

	rec.reset()
	res, err = c.ListDatabases(ctx, d("name", "beta"), &sturdy.ListDatabasesOptions{NameOnly: ptr(true), AuthorizedDatabases: ptr(false), Comment: "why"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Databases) != 1 || res.Databases[0].Name != "beta" || res.Databases[0].SizeOnDisk != 0 {
		t.Fatalf("filtered, nameOnly ListDatabases = %+v", res.Databases)
	}
	cmd = rec.startedNamed("listDatabases")[0]
	if !commandField(cmd, "nameOnly").Boolean() || commandField(cmd, "authorizedDatabases").Boolean() ||
		commandField(cmd, "comment").StringValue() != "why" || commandField(cmd, "filter").Document().Lookup("name").StringValue() != "beta" {
		t.Errorf("ListDatabases with options sent %v", cmd.Command)
	}

	rec.reset()
	got, err := c.ListDatabaseNames(ctx, d("name", d("$in", bson.A{"alpha", "beta"})), &sturdy.ListDatabasesOptions{AuthorizedDatabases: ptr(true)})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"alpha", "beta"}) {
		t.Errorf("ListDatabaseNames = %v", got)
	}
	cmd = rec.startedNamed("listDatabases")[0]
	if !commandField(cmd, "nameOnly").Boolean() || !commandField(cmd, "authorizedDatabases").Boolean() {
		t.Errorf("ListDatabaseNames sent %v", cmd.Command)
	}
}

func TestCreateAndListCollections(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	rec := &recorder{}
	c := connect(t, cluster.URI(), func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	db := c.Database("catalog", &sturdy.DatabaseOptions{WriteConcern: &sturdy.WriteConcern{W: "majority"}})

	for _, name := range []string{"a", "b", "c"} {
		if err := db.CreateCollection(ctx, name, &sturdy.CreateCollectionOptions{Comment: "create " + name}); err != nil {
			t.Fatalf("CreateCollection(%s): %v", name, err)
		}
	}
	create := rec.startedNamed("create")
	if len(create) != 3 || commandField(create[0], "create").StringValue() != "a" ||
		commandField(create[0], "writeConcern").Document().Lookup("w").StringValue() != "majority" ||
		commandField(create[0], "comment").StringValue() != "create a" {
		t.Fatalf("create commands: %v", create)
	}
	if err := db.CreateCollection(ctx, ""); !errors.Is(err, sturdy.ErrInvalidArgument) {
		t.Errorf("CreateCollection without a name: %v", err)
	}

	rec.reset()
	cur, err := db.ListCollections(ctx, d("name", d("$ne", "c")), &sturdy.ListCollectionsOptions{BatchSize: 1, AuthorizedCollections: ptr(true)})
	if err != nil {
		t.Fatal(err)
	}
	var docs []bson.Raw
	if err := cur.All(ctx, &docs); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, doc := range docs {
		names = append(names, doc.Lookup("name").StringValue())
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"a", "b"}) {
		t.Fatalf("ListCollections names %v", names)
	}
	lc := rec.startedNamed("listCollections")[0]
	if commandField(lc, "nameOnly").Type != 0 || !commandField(lc, "authorizedCollections").Boolean() ||
		commandField(lc, "cursor").Document().Lookup("batchSize").AsInt64() != 1 {
		t.Errorf("ListCollections sent %v", lc.Command)
	}
	if len(rec.startedNamed("getMore")) == 0 {
		t.Error("batchSize 1 over two collections needed no getMore")
	}

	specs, err := db.ListCollectionSpecifications(ctx, d("name", "b"))
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 1 {
		t.Fatalf("ListCollectionSpecifications = %+v", specs)
	}
	s := specs[0]
	if s.Name != "b" || s.Type != "collection" || s.ReadOnly || s.UUID == nil || s.UUID.Subtype != 4 || len(s.UUID.Data) != 16 ||
		s.Options == nil || s.IDIndex.Lookup("name").StringValue() != "_id_" || s.Raw.Lookup("name").StringValue() != "b" {
		t.Errorf("specification %+v", s)
	}

	rec.reset()
	got, err := db.ListCollectionNames(ctx, nil, &sturdy.ListCollectionsOptions{NameOnly: ptr(false)})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("ListCollectionNames = %v", got)
	}
	if lc := rec.startedNamed("listCollections")[0]; !commandField(lc, "nameOnly").Boolean() {
		t.Errorf("ListCollectionNames sent %v, want nameOnly: true", lc.Command)
	}
	if got, err := c.Database("nothing-here").ListCollectionNames(ctx, nil); err != nil || got == nil || len(got) != 0 {
		t.Errorf("ListCollectionNames of an empty database = %#v, %v; want an empty list", got, err)
	}
}
