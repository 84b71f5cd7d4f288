package mongosim

import (
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// listSpec returns the listCollections document of one collection.
func listSpec(t *testing.T, db *mongo.Database, name string) bson.Raw {
	t.Helper()
	cur, err := db.ListCollections(testCtx(t), bson.D{{Key: "name", Value: name}})
	if err != nil {
		t.Fatal(err)
	}
	var docs []bson.Raw
	if err := cur.All(testCtx(t), &docs); err != nil || len(docs) != 1 {
		t.Fatalf("listCollections %s: %d documents, %v", name, len(docs), err)
	}
	return docs[0]
}

func TestCreateClusteredCollection(t *testing.T) {
	c := Start(t)
	ctx := testCtx(t)
	db := connect(t, c.URI()).Database("db")
	err := db.CreateCollection(ctx, "cl", options.CreateCollection().SetClusteredIndex(bson.D{
		{Key: "key", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "unique", Value: true}, {Key: "name", Value: "by id"}}))
	if err != nil {
		t.Fatal(err)
	}
	spec := listSpec(t, db, "cl")
	ci := spec.Lookup("options", "clusteredIndex").Document()
	if ci.Lookup("name").StringValue() != "by id" || !ci.Lookup("unique").Boolean() || ci.Lookup("v").Int32() != 2 {
		t.Fatalf("options.clusteredIndex: %v", ci)
	}
	if _, err := spec.LookupErr("idIndex"); err == nil {
		t.Fatalf("a clustered collection lists an idIndex: %v", spec)
	}
	specs, err := db.Collection("cl").Indexes().ListSpecifications(ctx)
	if err != nil || len(specs) != 1 || specs[0].Name != "by id" || specs[0].Clustered == nil || !*specs[0].Clustered {
		t.Fatalf("listIndexes: %+v, %v", specs, err)
	}
	// The clustered index keeps _id unique.
	coll := db.Collection("cl")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
	if !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("duplicate _id: %v", err)
	}
	// Only {_id: 1}, unique, can be clustered.
	err = db.CreateCollection(ctx, "bad", options.CreateCollection().SetClusteredIndex(bson.D{
		{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "unique", Value: true}}))
	commandError(t, err, cmderr.InvalidOptions)
	// Creating it again with other options fails; with the same, succeeds.
	commandError(t, db.CreateCollection(ctx, "cl"), cmderr.NamespaceExists)
}

func TestCreateTimeSeriesCollection(t *testing.T) {
	c := Start(t)
	ctx := testCtx(t)
	db := connect(t, c.URI()).Database("db")
	ts := options.TimeSeries().SetTimeField("time").SetMetaField("meta").SetGranularity("minutes")
	if err := db.CreateCollection(ctx, "ts", options.CreateCollection().SetTimeSeriesOptions(ts).SetExpireAfterSeconds(3600)); err != nil {
		t.Fatal(err)
	}
	spec := listSpec(t, db, "ts")
	if spec.Lookup("type").StringValue() != "timeseries" ||
		spec.Lookup("options", "timeseries", "bucketMaxSpanSeconds").Int32() != 86400 ||
		spec.Lookup("options", "expireAfterSeconds").AsInt64() != 3600 {
		t.Fatalf("listCollections: %v", spec)
	}
	coll := db.Collection("ts")
	now := time.Now()
	// Equal _id values are allowed in a time series collection.
	docs := []any{bson.D{{Key: "_id", Value: 1}, {Key: "time", Value: now}}, bson.D{{Key: "_id", Value: 1}, {Key: "time", Value: now.Add(time.Second)}}}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	if n, err := coll.CountDocuments(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil || n != 2 {
		t.Fatalf("documents with _id 1: %d, %v", n, err)
	}
	// The time field must be a date.
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}, {Key: "time", Value: "noon"}})
	var we mongo.WriteException
	if !errors.As(err, &we) || len(we.WriteErrors) != 1 || we.WriteErrors[0].Code != int(cmderr.BadValue) {
		t.Fatalf("insert without a date: %v", err)
	}
	// A time field is required; bucket options must match.
	commandError(t, db.RunCommand(ctx, bson.D{{Key: "create", Value: "x"}, {Key: "timeseries", Value: bson.D{{Key: "metaField", Value: "m"}}}}).Err(), 40414)
	commandError(t, db.RunCommand(ctx, bson.D{{Key: "create", Value: "y"}, {Key: "timeseries", Value: bson.D{
		{Key: "timeField", Value: "t"}, {Key: "bucketMaxSpanSeconds", Value: 60}}}}).Err(), cmderr.InvalidOptions)
	// expireAfterSeconds needs a clustered or time series collection.
	commandError(t, db.RunCommand(ctx, bson.D{{Key: "create", Value: "z"}, {Key: "expireAfterSeconds", Value: 5}}).Err(), cmderr.InvalidOptions)
}
