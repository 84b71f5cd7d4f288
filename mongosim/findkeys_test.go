package mongosim

import (
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// find's min/max walk the hinted index between the bounds (max exclusive)
// in its order, and returnKey answers the keys of the index the query used,
// as on mongod; through the official driver.
func TestFindMinMaxAndReturnKey(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("db").Collection("keys")
	var docs []any
	for i := 1; i <= 6; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "a", Value: 7 - i}, {Key: "b", Value: fmt.Sprint("x", i)}})
	}
	_, err := coll.InsertMany(ctx, docs)
	sdNoErr(t, err)
	_, err = coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "a", Value: -1}}})
	sdNoErr(t, err)

	ids := func(got []bson.D) string { return fmt.Sprint(idsOf(got)) }
	// On {a: -1}, min {a: 5} to max {a: 2} is a = 5, 4, 3 in that order.
	got := sdFindAll(t, ctx, coll, bson.D{}, options.Find().SetHint(bson.D{{Key: "a", Value: -1}}).
		SetMin(bson.D{{Key: "a", Value: 5}}).SetMax(bson.D{{Key: "a", Value: 2}}))
	if ids(got) != "[2 3 4]" {
		t.Fatalf("min/max on {a: -1}: ids %s, want [2 3 4]", ids(got))
	}
	// With a filter, a sort and skip, as the monitoring spec test does.
	got = sdFindAll(t, ctx, coll, bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: 1}}}}, options.Find().
		SetHint(bson.D{{Key: "_id", Value: 1}}).SetMin(bson.D{{Key: "_id", Value: 0}}).SetMax(bson.D{{Key: "_id", Value: 6}}).
		SetSort(bson.D{{Key: "a", Value: 1}}).SetSkip(1))
	if ids(got) != "[4 3 2]" {
		t.Fatalf("min/max with filter, sort and skip: ids %s, want [4 3 2]", ids(got))
	}
	// returnKey: the keys of the index the sort walks; {} without one.
	got = sdFindAll(t, ctx, coll, bson.D{}, options.Find().SetSort(bson.D{{Key: "a", Value: -1}}).SetReturnKey(true).SetLimit(2))
	if len(got) != 2 || len(got[0]) != 1 || got[0][0].Key != "a" || got[0][0].Value != int32(6) || len(got[1]) != 1 || got[1][0].Value != int32(5) {
		t.Fatalf("returnKey on the sort's index: %v", got)
	}
	got = sdFindAll(t, ctx, coll, bson.D{{Key: "b", Value: "x3"}}, options.Find().SetReturnKey(true).SetShowRecordID(true))
	if len(got) != 1 || len(got[0]) != 0 {
		t.Fatalf("returnKey with no index used: %v", got)
	}

	// Errors, as mongod answers them.
	for _, c := range []struct {
		name string
		opts *options.FindOptionsBuilder
		code int32
	}{
		{"min without hint", options.Find().SetMin(bson.D{{Key: "a", Value: 1}}), 51173},
		{"min on other fields", options.Find().SetHint(bson.D{{Key: "a", Value: -1}}).SetMin(bson.D{{Key: "b", Value: 1}}), 51174},
		{"hint of no index", options.Find().SetHint(bson.D{{Key: "zz", Value: 1}}).SetMax(bson.D{{Key: "zz", Value: 1}}), 2},
		{"showRecordId alone", options.Find().SetShowRecordID(true), 238},
	} {
		_, err := coll.Find(ctx, bson.D{}, c.opts)
		if sdCode(err) != c.code {
			t.Errorf("%s: %v, want code %d", c.name, err, c.code)
		}
	}
}

func idsOf(docs []bson.D) []any {
	out := make([]any, 0, len(docs))
	for _, d := range docs {
		for _, e := range d {
			if e.Key == "_id" {
				out = append(out, e.Value)
			}
		}
	}
	return out
}
