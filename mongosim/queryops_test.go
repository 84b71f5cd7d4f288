package mongosim

import (
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func TestBitwiseQueryOperators(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("ops").Collection("bits")
	_, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: int32(54)}}, // 0b110110
		bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: int64(20)}}, // 0b010100
		bson.D{{Key: "_id", Value: 3}, {Key: "a", Value: 20.0}},      // integral double
		bson.D{{Key: "_id", Value: 4}, {Key: "a", Value: 20.5}},      // never matches
		bson.D{{Key: "_id", Value: 5}, {Key: "a", Value: bson.Binary{Data: []byte{0x36}}}},
		bson.D{{Key: "_id", Value: 6}, {Key: "a", Value: int32(-1)}},    // every bit, past 63 too
		bson.D{{Key: "_id", Value: 7}, {Key: "a", Value: "string"}},     // never matches
		bson.D{{Key: "_id", Value: 8}, {Key: "a", Value: bson.A{1, 2}}}, // elements
	})
	sdNoErr(t, err)
	cases := []struct {
		op   string
		arg  any
		want string
	}{
		{"$bitsAllSet", bson.A{1, 5}, "1,5,6"},
		{"$bitsAllSet", int32(50), "1,5,6"}, // 0b110010
		{"$bitsAllSet", bson.Binary{Data: []byte{0x32}}, "1,5,6"},
		{"$bitsAllSet", bson.A{2, 4}, "1,2,3,5,6"},
		{"$bitsAllSet", bson.A{200}, "6"},
		{"$bitsAnySet", bson.A{0, 1}, "1,5,6,8"},
		{"$bitsAnySet", bson.A{}, ""},
		{"$bitsAllClear", bson.A{0, 1, 3}, "2,3"},
		{"$bitsAllClear", bson.A{}, "1,2,3,5,6,8"},
		{"$bitsAnyClear", 35.0, "1,2,3,5,8"}, // 0b100011
	}
	for _, tc := range cases {
		got := ids(sdFindAll(t, ctx, coll, bson.D{{Key: "a", Value: bson.D{{Key: tc.op, Value: tc.arg}}}}))
		if got != tc.want {
			t.Errorf("{a: {%s: %v}}: %s, want %s", tc.op, tc.arg, got, tc.want)
		}
	}
	errs := []struct {
		arg  any
		code int32
		msg  string
	}{
		{int32(-1), 9, "Expected a positive number in: $bitsAllSet: -1"},
		{-2.0, 9, "Expected a positive number in: $bitsAllSet: -2.0"},
		{1.5, 9, "Expected an integer: $bitsAllSet: 1.5"},
		{"x", 2, `a takes an Array, a number, or a BinData but received: $bitsAllSet: "x"`},
		{bson.A{1, -1}, 2, "bit positions must be >= 0 but got: 1: -1"},
		{bson.A{0.5}, 2, "bit positions must be an integer but got: 0: 0.5"},
		{bson.A{"x"}, 2, `bit positions must be an integer but got: 0: "x"`},
	}
	for _, tc := range errs {
		_, err := coll.Find(ctx, bson.D{{Key: "a", Value: bson.D{{Key: "$bitsAllSet", Value: tc.arg}}}})
		if code := sdCode(err); code != tc.code || err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("$bitsAllSet %v: %v (code %d), want %d %q", tc.arg, err, code, tc.code, tc.msg)
		}
	}
}

func TestPositionalProjectionWithElemMatch(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("ops").Collection("pos")
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "arr", Value: bson.A{
		bson.D{{Key: "k", Value: 1}, {Key: "v", Value: "a"}},
		bson.D{{Key: "k", Value: 2}, {Key: "v", Value: "b"}},
	}}})
	sdNoErr(t, err)
	filter := bson.D{{Key: "arr", Value: bson.D{{Key: "$elemMatch", Value: bson.D{{Key: "k", Value: 2}}}}}}
	want := `{"_id":{"$numberInt":"1"},"arr":[{"k":{"$numberInt":"2"},"v":"b"}]}`
	got := sdFindAll(t, ctx, coll, filter, options.Find().SetProjection(bson.D{{Key: "arr.$", Value: 1}}))
	if len(got) != 1 || bsonString(t, got[0]) != want {
		t.Fatalf("arr.$ with $elemMatch: %v", got)
	}
	got = sdFindAll(t, ctx, coll, bson.D{{Key: "arr.k", Value: 2}}, options.Find().SetProjection(bson.D{{Key: "arr.$", Value: 1}}))
	if len(got) != 1 || bsonString(t, got[0]) != want {
		t.Fatalf("arr.$ with arr.k: %v", got)
	}
	// The $elemMatch projection picks the first matching element itself.
	got = sdFindAll(t, ctx, coll, bson.D{}, options.Find().SetProjection(bson.D{{Key: "arr", Value: bson.D{{Key: "$elemMatch", Value: bson.D{{Key: "v", Value: "b"}}}}}}))
	if len(got) != 1 || bsonString(t, got[0]) != want {
		t.Fatalf("$elemMatch projection: %v", got)
	}
	// A filter matching no array element: mongod's error.
	_, err = coll.Find(ctx, bson.D{{Key: "_id", Value: 1}}, options.Find().SetProjection(bson.D{{Key: "arr.$", Value: 1}}))
	if sdCode(err) != 51246 {
		t.Fatalf("arr.$ without an array match: %v, want 51246", err)
	}
}

func bsonString(t *testing.T, d bson.D) string {
	t.Helper()
	b, err := bson.MarshalExtJSON(d, true, false)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestElemMatchOverDBRefs(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("ops").Collection("refs")
	_, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "refs", Value: bson.A{
			bson.D{{Key: "$ref", Value: "u"}, {Key: "$id", Value: 5}},
			bson.D{{Key: "$ref", Value: "w"}, {Key: "$id", Value: 6}, {Key: "$db", Value: "o"}},
		}}},
		bson.D{{Key: "_id", Value: 2}, {Key: "refs", Value: bson.A{bson.D{{Key: "$ref", Value: "u"}, {Key: "$id", Value: 6}}}}},
	})
	sdNoErr(t, err)
	em := func(d bson.D) bson.D { return bson.D{{Key: "refs", Value: bson.D{{Key: "$elemMatch", Value: d}}}} }
	cases := []struct {
		filter bson.D
		want   string
	}{
		{em(bson.D{{Key: "$id", Value: 6}}), "1,2"},
		{em(bson.D{{Key: "$ref", Value: "u"}, {Key: "$id", Value: 5}}), "1"},
		{em(bson.D{{Key: "$ref", Value: "u"}, {Key: "$id", Value: 6}}), "2"},
		{em(bson.D{{Key: "$ref", Value: "w"}, {Key: "$id", Value: 5}}), ""},
		{em(bson.D{{Key: "$db", Value: "o"}}), "1"},
		{em(bson.D{{Key: "$id", Value: bson.D{{Key: "$gt", Value: 5}}}}), ""}, // an equality with {$gt: 5}, as mongod
		{bson.D{{Key: "refs", Value: bson.D{{Key: "$ref", Value: "u"}, {Key: "$id", Value: 5}}}}, "1"},
		{bson.D{{Key: "refs", Value: bson.D{{Key: "$in", Value: bson.A{bson.D{{Key: "$ref", Value: "u"}, {Key: "$id", Value: 6}}}}}}}, "2"},
		{bson.D{{Key: "refs.$id", Value: 5}}, "1"},
	}
	for _, tc := range cases {
		if got := ids(sdFindAll(t, ctx, coll, tc.filter)); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.filter, got, tc.want)
		}
	}
}

// MongoDB 5.0+ stores field names starting with $ or holding dots: inserts
// and upsert inserts take them anywhere, replacements and update operators
// only below the top level, pipelines ($setField with $literal) anywhere.
func TestDollarAndDottedFieldNames(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("ops").Collection("dollars")
	docs := []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "$price", Value: 50}, {Key: "a.b", Value: 1}},
		bson.D{{Key: "_id", Value: 2}, {Key: "loc", Value: bson.D{{Key: "$db", Value: "n"}, {Key: "$ref", Value: "r"}, {Key: "$inc", Value: true}}}},
	}
	_, err := coll.InsertMany(ctx, docs)
	sdNoErr(t, err)
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$x", Value: 1}}}}); sdWriteCodes(err) == nil || sdWriteCodes(err)[0] != 52 {
		t.Fatalf("$-prefixed field in _id: %v, want 52", err)
	}
	// Nested $-prefixed and dotted names through a replacement and $set.
	_, err = coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "x.y", Value: 2}, {Key: "n", Value: bson.D{{Key: "$z", Value: 1}}}})
	sdNoErr(t, err)
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "m.$q", Value: 2}}}})
	sdNoErr(t, err)
	// Top level: refused for an update of an existing document...
	const msg = "The dollar ($) prefixed field '$hotel' in '$hotel' is not allowed in the context of an update's replacement document. Consider using an aggregation pipeline with $replaceWith."
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "$hotel", Value: 3}}}})
	var we mongo.WriteException
	if !errors.As(err, &we) || len(we.WriteErrors) != 1 || we.WriteErrors[0].Code != 52 || we.WriteErrors[0].Message != msg {
		t.Fatalf("$set of a top-level $ field: %v", err)
	}
	_, err = coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "b", Value: 1}, {Key: "$hotel", Value: 1}})
	if codes := sdWriteCodes(err); len(codes) != 1 || codes[0] != 52 {
		t.Fatalf("replacement with a top-level $ field: %v", err)
	}
	// ...accepted for an upsert's insert, and through a pipeline.
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "$set", Value: bson.D{{Key: "$hotel", Value: 3}}}}, options.UpdateOne().SetUpsert(true))
	sdNoErr(t, err)
	setField := bson.A{bson.D{{Key: "$replaceWith", Value: bson.D{{Key: "$setField", Value: bson.D{
		{Key: "field", Value: bson.D{{Key: "$literal", Value: "$p"}}}, {Key: "input", Value: "$$ROOT"}, {Key: "value", Value: 5},
	}}}}}}
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 2}}, setField)
	sdNoErr(t, err)
	want := []string{
		`{"_id":{"$numberInt":"1"},"$price":{"$numberInt":"50"},"a.b":{"$numberInt":"1"},"m":{"$q":{"$numberInt":"2"}}}`,
		`{"_id":{"$numberInt":"2"},"x.y":{"$numberInt":"2"},"n":{"$z":{"$numberInt":"1"}},"$p":{"$numberInt":"5"}}`,
		`{"_id":{"$numberInt":"3"},"$hotel":{"$numberInt":"3"}}`,
	}
	got := sdFindAll(t, ctx, coll, bson.D{})
	if len(got) != len(want) {
		t.Fatalf("documents: %v", got)
	}
	for i := range want {
		if s := bsonString(t, got[i]); s != want[i] {
			t.Errorf("document %d: %s, want %s", i, s, want[i])
		}
	}
}

// The router finishing a find across shards projects field.$ at the
// position where the filter matched, as mongos does.
func TestPositionalProjectionAcrossShards(t *testing.T) {
	client, _ := shardedClient(t, 2, nil)
	ctx := sdCtx(t)
	shardCollection(t, ctx, client, "ops.spos", bson.D{{Key: "_id", Value: "hashed"}})
	coll := client.Database("ops").Collection("spos")
	for i := 1; i <= 4; i++ {
		_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "arr", Value: bson.A{
			bson.D{{Key: "k", Value: 1}}, bson.D{{Key: "k", Value: i}},
		}}})
		sdNoErr(t, err)
	}
	filter := bson.D{{Key: "arr", Value: bson.D{{Key: "$elemMatch", Value: bson.D{{Key: "k", Value: bson.D{{Key: "$gte", Value: 3}}}}}}}}
	got := sdFindAll(t, ctx, coll, filter, options.Find().SetProjection(bson.D{{Key: "arr.$", Value: 1}}).SetSort(bson.D{{Key: "_id", Value: 1}}))
	want := []string{
		`{"_id":{"$numberInt":"3"},"arr":[{"k":{"$numberInt":"3"}}]}`,
		`{"_id":{"$numberInt":"4"},"arr":[{"k":{"$numberInt":"4"}}]}`,
	}
	if len(got) != len(want) {
		t.Fatalf("sharded arr.$: %v", got)
	}
	for i := range want {
		if s := bsonString(t, got[i]); s != want[i] {
			t.Errorf("document %d: %s, want %s", i, s, want[i])
		}
	}
}
