package sturdy_test

import (
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/mongosim"
)

// DuplicateKeyIndex names the unique index a duplicate-key error is about,
// whichever way the error arrives: a write exception, a bulk write
// exception or findAndModify's command error.
func TestDuplicateKeyIndexNamesTheIndex(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, mongosim.Start(t).URI(), nil)
	coll := c.Database("db").Collection("users")
	unique := true
	if _, err := coll.CreateIndex(ctx, sturdy.IndexModel{Keys: bson.D{{Key: "email", Value: 1}}, Options: &sturdy.IndexOptions{Unique: &unique}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "email", Value: "a@x"}}); err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error, want string) {
		t.Helper()
		ix, ok := sturdy.DuplicateKeyIndex(err)
		if !ok || ix != want {
			t.Errorf("%s: DuplicateKeyIndex(%v) = %q, %v; want %q", what, err, ix, ok, want)
		}
	}
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "email", Value: "b@x"}})
	check("insert, same _id", err, "_id_")
	_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}, {Key: "email", Value: "a@x"}})
	check("insert, same email", err, "email_1")
	_, err = coll.BulkWrite(ctx, []sturdy.WriteModel{&sturdy.InsertOneModel{Document: bson.D{{Key: "_id", Value: 3}, {Key: "email", Value: "a@x"}}}})
	var bwe *sturdy.BulkWriteException
	if !errors.As(err, &bwe) {
		t.Fatalf("bulk write: %v", err)
	}
	check("bulk write", err, "email_1")
	err = coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 4}}, bson.D{{Key: "$set", Value: bson.D{{Key: "email", Value: "a@x"}}}},
		&sturdy.FindOneAndUpdateOptions{Upsert: true}).Err()
	check("findOneAndUpdate upsert", err, "email_1")

	if _, ok := sturdy.DuplicateKeyIndex(errors.New("other")); ok {
		t.Error("a plain error is not a duplicate-key error")
	}
}
