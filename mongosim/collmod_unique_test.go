package mongosim

import (
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// TestCollModUniqueConversion: prepareUnique refuses new duplicates and
// keeps old ones; unique: true reports the violations (dryRun too) until
// they are resolved, then converts; forceNonUnique converts back.
func TestCollModUniqueConversion(t *testing.T) {
	c := Start(t)
	client := connect(t, c.URI())
	ctx := testCtx(t)
	db := client.Database("db")
	coll := db.Collection("u")
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "a", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}}, bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: 1}}, bson.D{{Key: "_id", Value: 3}, {Key: "a", Value: 2}}}); err != nil {
		t.Fatal(err)
	}
	collMod := func(index bson.D, extra ...bson.E) (bson.M, error) {
		var out bson.M
		cmd := append(bson.D{{Key: "collMod", Value: "u"}, {Key: "index", Value: append(bson.D{{Key: "keyPattern", Value: bson.D{{Key: "a", Value: 1}}}}, index...)}}, extra...)
		err := db.RunCommand(ctx, cmd).Decode(&out)
		return out, err
	}
	var ce mongo.CommandError
	if _, err := collMod(bson.D{{Key: "unique", Value: true}}); !errors.As(err, &ce) || ce.Code != 72 {
		t.Fatalf("unique before prepareUnique = %v, want InvalidOptions", err)
	}
	out, err := collMod(bson.D{{Key: "prepareUnique", Value: true}})
	if err != nil || out["prepareUnique_old"] != false || out["prepareUnique_new"] != true {
		t.Fatalf("prepareUnique: %v, %v", out, err)
	}
	var we mongo.WriteException
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "a", Value: 2}}); !errors.As(err, &we) || we.WriteErrors[0].Code != 11000 {
		t.Fatalf("new duplicate under prepareUnique = %v, want DuplicateKey", err)
	}
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: 1}}}}); err != nil {
		t.Fatalf("updating an old duplicate without changing its key: %v", err)
	}
	for _, dry := range []bool{true, false} {
		var extra []bson.E
		if dry {
			extra = append(extra, bson.E{Key: "dryRun", Value: true})
		}
		_, err := collMod(bson.D{{Key: "unique", Value: true}}, extra...)
		if !errors.As(err, &ce) || ce.Code != 359 {
			t.Fatalf("unique with duplicates (dryRun %v) = %v, want CannotConvertIndexToUnique", dry, err)
		}
		var reply struct {
			Violations []struct {
				IDs []int32 `bson:"ids"`
			} `bson:"violations"`
		}
		if err := bson.Unmarshal(ce.Raw, &reply); err != nil || len(reply.Violations) != 1 || len(reply.Violations[0].IDs) != 2 ||
			reply.Violations[0].IDs[0] != 1 || reply.Violations[0].IDs[1] != 2 {
			t.Fatalf("violations = %+v (%v), want ids [1, 2]", reply, err)
		}
	}
	if _, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	if out, err := collMod(bson.D{{Key: "unique", Value: true}}, bson.E{Key: "dryRun", Value: true}); err != nil || out["unique_new"] != nil {
		t.Fatalf("dryRun without duplicates: %v, %v", out, err)
	}
	if out, err := collMod(bson.D{{Key: "unique", Value: true}}); err != nil || out["unique_new"] != true {
		t.Fatalf("unique: %v, %v", out, err)
	}
	var specs []bson.M
	cur, err := coll.Indexes().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := cur.All(ctx, &specs); err != nil || len(specs) != 2 || specs[1]["unique"] != true || specs[1]["prepareUnique"] != nil {
		t.Fatalf("index specs after the conversion = %v, %v", specs, err)
	}
	if out, err := collMod(bson.D{{Key: "forceNonUnique", Value: true}}); err != nil || out["forceNonUnique_new"] != true {
		t.Fatalf("forceNonUnique: %v, %v", out, err)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "a", Value: 2}}); err != nil {
		t.Fatalf("duplicate after forceNonUnique: %v", err)
	}
}
