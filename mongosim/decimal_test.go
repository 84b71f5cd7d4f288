package mongosim

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

func mustDec(t *testing.T, s string) bson.Decimal128 {
	t.Helper()
	d, err := bson.ParseDecimal128(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Decimal128 is exact end to end, as on mongod: $inc of 0.2 on 0.1 stores
// 0.3, the double 9.99 does not match NumberDecimal("9.99"), and
// aggregation sums and averages decimals exactly.
func TestDecimal128IsExact(t *testing.T) {
	c := Start(t)
	ctx := testCtx(t)
	coll := connect(t, c.URI()).Database("money").Collection("accounts")
	if _, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "balance", Value: mustDec(t, "0.1")}},
		bson.D{{Key: "_id", Value: 2}, {Key: "balance", Value: mustDec(t, "9.99")}},
		bson.D{{Key: "_id", Value: 3}, {Key: "balance", Value: 9.99}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "balance", Value: mustDec(t, "0.2")}}}}); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Balance bson.Decimal128 `bson:"balance"`
	}
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if doc.Balance.String() != "0.3" {
		t.Errorf("0.1 $inc 0.2 stored %s, want 0.3", doc.Balance)
	}
	if n, err := coll.CountDocuments(ctx, bson.D{{Key: "balance", Value: mustDec(t, "0.3")}}); err != nil || n != 1 {
		t.Errorf("find balance = 0.3: %d, %v", n, err)
	}
	// The double 9.99 is not the decimal 9.99.
	if n, err := coll.CountDocuments(ctx, bson.D{{Key: "balance", Value: 9.99}}); err != nil || n != 1 {
		t.Errorf("find the double 9.99: %d documents (%v), want 1", n, err)
	}

	cur, err := coll.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{1, 2}}}}}}},
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil},
			{Key: "sum", Value: bson.D{{Key: "$sum", Value: "$balance"}}},
			{Key: "avg", Value: bson.D{{Key: "$avg", Value: "$balance"}}},
			{Key: "tripled", Value: bson.D{{Key: "$sum", Value: bson.D{{Key: "$multiply", Value: bson.A{"$balance", 3}}}}}},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []struct {
		Sum     bson.Decimal128 `bson:"sum"`
		Avg     bson.Decimal128 `bson:"avg"`
		Tripled bson.Decimal128 `bson:"tripled"`
	}
	if err := cur.All(ctx, &out); err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0].Sum.String() != "10.29" || out[0].Avg.String() != "5.145" || out[0].Tripled.String() != "30.87" {
		t.Errorf("aggregate over decimals: %+v, want sum 10.29, avg 5.145, tripled 30.87", out)
	}
}
