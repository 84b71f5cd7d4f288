package mongosim

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// names returns the "name" field of each document, in order.
func names(docs []bson.D) []string {
	out := make([]string, 0, len(docs))
	for _, d := range docs {
		for _, e := range d {
			if s, ok := e.Value.(string); ok && e.Key == "name" {
				out = append(out, s)
			}
		}
	}
	return out
}

func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestCollationFindCaseInsensitive(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("db").Collection("people")
	_, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "name", Value: "Alice"}},
		bson.D{{Key: "_id", Value: 2}, {Key: "name", Value: "alice"}},
		bson.D{{Key: "_id", Value: 3}, {Key: "name", Value: "ALICE"}},
		bson.D{{Key: "_id", Value: 4}, {Key: "name", Value: "Bob"}},
	})
	sdNoErr(t, err)
	ci := &options.Collation{Locale: "en", Strength: 2}

	// Without a collation the comparison is binary: one match.
	if got := sdFindAll(t, ctx, coll, bson.D{{Key: "name", Value: "alice"}}); len(got) != 1 {
		t.Fatalf("simple find: %v", got)
	}
	got := sdFindAll(t, ctx, coll, bson.D{{Key: "name", Value: "alice"}}, options.Find().SetCollation(ci).SetSort(bson.D{{Key: "_id", Value: 1}}))
	if len(got) != 3 {
		t.Fatalf("strength 2 find: %v", got)
	}
	n, err := coll.CountDocuments(ctx, bson.D{{Key: "name", Value: bson.D{{Key: "$in", Value: bson.A{"ALICE", "bob"}}}}}, options.Count().SetCollation(ci))
	sdNoErr(t, err)
	if n != 4 {
		t.Fatalf("count $in under collation = %d, want 4", n)
	}
	var distinct []string
	res := coll.Distinct(ctx, "name", bson.D{}, options.Distinct().SetCollation(ci))
	sdNoErr(t, res.Decode(&distinct))
	if len(distinct) != 2 {
		t.Fatalf("distinct under strength 2 = %v, want one alice and one bob", distinct)
	}
	// $gt follows the collation too: "alice" < "Bob" < "bob" in en.
	got = sdFindAll(t, ctx, coll, bson.D{{Key: "name", Value: bson.D{{Key: "$gt", Value: "b"}}}}, options.Find().SetCollation(&options.Collation{Locale: "en"}))
	if !sameStrings(names(got), []string{"Bob"}) {
		t.Fatalf("en $gt b: %v", names(got))
	}
	// Updates and deletes take the statement's collation.
	ur, err := coll.UpdateMany(ctx, bson.D{{Key: "name", Value: "ALICE"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "seen", Value: true}}}}, options.UpdateMany().SetCollation(ci))
	sdNoErr(t, err)
	if ur.MatchedCount != 3 {
		t.Fatalf("updateMany matched %d, want 3", ur.MatchedCount)
	}
	dr, err := coll.DeleteOne(ctx, bson.D{{Key: "name", Value: "BOB"}}, options.DeleteOne().SetCollation(ci))
	sdNoErr(t, err)
	if dr.DeletedCount != 1 {
		t.Fatalf("deleteOne deleted %d, want 1", dr.DeletedCount)
	}
	// Aggregate: $match and $group keys under the collation.
	cur, err := coll.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: "name", Value: "alice"}}}},
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$name"}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}},
	}, options.Aggregate().SetCollation(ci))
	sdNoErr(t, err)
	var groups []bson.M
	sdNoErr(t, cur.All(ctx, &groups))
	if len(groups) != 1 || groups[0]["n"] != int32(3) {
		t.Fatalf("collated $group = %v, want one group of 3", groups)
	}
}

func TestCollationStrength1AccentInsensitive(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("db").Collection("cafes")
	_, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "name", Value: "café"}},
		bson.D{{Key: "_id", Value: 2}, {Key: "name", Value: "Cafe"}},
		bson.D{{Key: "_id", Value: 3}, {Key: "name", Value: "tea"}},
	})
	sdNoErr(t, err)
	got := sdFindAll(t, ctx, coll, bson.D{{Key: "name", Value: "CAFE"}}, options.Find().SetCollation(&options.Collation{Locale: "fr", Strength: 1}))
	if len(got) != 2 {
		t.Fatalf("strength 1 find: %v", got)
	}
	// Strength 2 still tells accents apart.
	got = sdFindAll(t, ctx, coll, bson.D{{Key: "name", Value: "CAFE"}}, options.Find().SetCollation(&options.Collation{Locale: "fr", Strength: 2}))
	if !sameStrings(names(got), []string{"Cafe"}) {
		t.Fatalf("strength 2 find: %v", names(got))
	}
	// findAndModify with a collation.
	var doc bson.M
	err = coll.FindOneAndUpdate(ctx, bson.D{{Key: "name", Value: "CAFÉ"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}},
		options.FindOneAndUpdate().SetCollation(&options.Collation{Locale: "fr", Strength: 2}).SetReturnDocument(options.After)).Decode(&doc)
	sdNoErr(t, err)
	if doc["_id"] != int32(1) || doc["x"] != int32(1) {
		t.Fatalf("findOneAndUpdate = %v", doc)
	}
}

func TestCollationNumericOrderingSort(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("db").Collection("files")
	for i, n := range []string{"file10", "file2", "file1", "file20"} {
		_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "name", Value: n}})
		sdNoErr(t, err)
	}
	sorted := bson.D{{Key: "name", Value: 1}}
	got := names(sdFindAll(t, ctx, coll, bson.D{}, options.Find().SetSort(sorted)))
	if !sameStrings(got, []string{"file1", "file10", "file2", "file20"}) {
		t.Fatalf("binary sort: %v", got)
	}
	got = names(sdFindAll(t, ctx, coll, bson.D{}, options.Find().SetSort(sorted).SetCollation(&options.Collation{Locale: "en", NumericOrdering: true})))
	if !sameStrings(got, []string{"file1", "file2", "file10", "file20"}) {
		t.Fatalf("numericOrdering sort: %v", got)
	}
	cur, err := coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$sort", Value: bson.D{{Key: "name", Value: -1}}}}},
		options.Aggregate().SetCollation(&options.Collation{Locale: "en", NumericOrdering: true}))
	sdNoErr(t, err)
	var docs []bson.D
	sdNoErr(t, cur.All(ctx, &docs))
	if got := names(docs); !sameStrings(got, []string{"file20", "file10", "file2", "file1"}) {
		t.Fatalf("numericOrdering $sort: %v", got)
	}
	cur, err = coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil},
		{Key: "top", Value: bson.D{{Key: "$topN", Value: bson.D{{Key: "n", Value: 2}, {Key: "sortBy", Value: bson.D{{Key: "name", Value: -1}}}, {Key: "output", Value: "$name"}}}}},
		{Key: "max", Value: bson.D{{Key: "$max", Value: "$name"}}}}}}},
		options.Aggregate().SetCollation(&options.Collation{Locale: "en", NumericOrdering: true}))
	sdNoErr(t, err)
	var grp []struct {
		Top []string `bson:"top"`
		Max string   `bson:"max"`
	}
	sdNoErr(t, cur.All(ctx, &grp))
	if len(grp) != 1 || !sameStrings(grp[0].Top, []string{"file20", "file10"}) || grp[0].Max != "file20" {
		t.Fatalf("numericOrdering $topN/$max: %+v", grp)
	}
}

func TestCollationUniqueIndexAndDefault(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("db")
	users := db.Collection("users")
	_, err := users.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys:    bson.D{{Key: "email", Value: 1}},
		Options: options.Index().SetUnique(true).SetCollation(&options.Collation{Locale: "en", Strength: 2}),
	})
	sdNoErr(t, err)
	_, err = users.InsertOne(ctx, bson.D{{Key: "email", Value: "a@example.com"}})
	sdNoErr(t, err)
	_, err = users.InsertOne(ctx, bson.D{{Key: "email", Value: "A@Example.COM"}})
	if codes := sdWriteCodes(err); len(codes) != 1 || codes[0] != 11000 {
		t.Fatalf("case-variant insert into strength-2 unique index: %v", err)
	}
	// listIndexes reports the full spec.
	specs, err := users.Indexes().ListSpecifications(ctx)
	sdNoErr(t, err)
	var raw bson.Raw
	for _, s := range specs {
		if s.Name == "email_1" {
			cur, err := users.Indexes().List(ctx)
			sdNoErr(t, err)
			for cur.Next(ctx) {
				if n, _ := cur.Current.Lookup("name").StringValueOK(); n == "email_1" {
					raw = append(bson.Raw(nil), cur.Current...)
				}
			}
			sdNoErr(t, cur.Close(ctx))
		}
	}
	if raw == nil {
		t.Fatalf("no email_1 index in %v", specs)
	}
	var ix struct {
		Collation bson.D `bson:"collation"`
	}
	sdNoErr(t, bson.Unmarshal(raw, &ix))
	want := bson.D{{Key: "locale", Value: "en"}, {Key: "caseLevel", Value: false}, {Key: "caseFirst", Value: "off"},
		{Key: "strength", Value: int32(2)}, {Key: "numericOrdering", Value: false}, {Key: "alternate", Value: "non-ignorable"},
		{Key: "maxVariable", Value: "punct"}, {Key: "normalization", Value: false}, {Key: "backwards", Value: false},
		{Key: "version", Value: "57.1"}}
	if len(ix.Collation) != len(want) {
		t.Fatalf("index collation = %v", ix.Collation)
	}
	for i := range want {
		if ix.Collation[i] != want[i] {
			t.Fatalf("index collation field %d = %v, want %v", i, ix.Collation[i], want[i])
		}
	}

	// A collection default collation applies to operations without one
	// and to its indexes; an explicit simple collation overrides it.
	sdNoErr(t, db.CreateCollection(ctx, "tags", options.CreateCollection().SetCollation(&options.Collation{Locale: "en", Strength: 2})))
	tags := db.Collection("tags")
	_, err = tags.InsertMany(ctx, []any{bson.D{{Key: "t", Value: "Go"}}, bson.D{{Key: "t", Value: "go"}}})
	sdNoErr(t, err)
	if got := sdFindAll(t, ctx, tags, bson.D{{Key: "t", Value: "GO"}}); len(got) != 2 {
		t.Fatalf("default collation find: %v", got)
	}
	if got := sdFindAll(t, ctx, tags, bson.D{{Key: "t", Value: "GO"}}, options.Find().SetCollation(&options.Collation{Locale: "simple"})); len(got) != 0 {
		t.Fatalf("simple-collation find on collated collection: %v", got)
	}
	_, err = tags.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "t", Value: 1}}, Options: options.Index().SetUnique(true)})
	if err == nil {
		t.Fatal("unique index inheriting strength 2 built over Go/go without a duplicate-key error")
	}
	// The _id index has the default collation too: "k1" and "K1" collide.
	_, err = tags.InsertOne(ctx, bson.D{{Key: "_id", Value: "k1"}})
	sdNoErr(t, err)
	_, err = tags.InsertOne(ctx, bson.D{{Key: "_id", Value: "K1"}})
	if codes := sdWriteCodes(err); len(codes) != 1 || codes[0] != 11000 {
		t.Fatalf("case-variant _id in a strength-2 collection: %v", err)
	}
	icur, err := tags.Indexes().List(ctx)
	sdNoErr(t, err)
	var idx []struct {
		Name      string `bson:"name"`
		Collation struct {
			Locale string `bson:"locale"`
		} `bson:"collation"`
	}
	sdNoErr(t, icur.All(ctx, &idx))
	if len(idx) == 0 || idx[0].Name != "_id_" || idx[0].Collation.Locale != "en" {
		t.Fatalf("listIndexes of a collated collection: %+v", idx)
	}
	if got := sdFindAll(t, ctx, tags, bson.D{{Key: "_id", Value: "K1"}}); len(got) != 1 {
		t.Fatalf("find by case-variant _id: %v", got)
	}
	if got := sdFindAll(t, ctx, tags, bson.D{{Key: "_id", Value: "K1"}}, options.Find().SetCollation(&options.Collation{Locale: "simple"})); len(got) != 0 {
		t.Fatalf("simple-collation find by case-variant _id: %v", got)
	}
	colls, err := db.ListCollectionSpecifications(ctx, bson.D{{Key: "name", Value: "tags"}})
	sdNoErr(t, err)
	if len(colls) != 1 {
		t.Fatalf("listCollections: %v", colls)
	}
	var opts struct {
		Collation struct {
			Locale   string `bson:"locale"`
			Strength int32  `bson:"strength"`
			Version  string `bson:"version"`
		} `bson:"collation"`
	}
	sdNoErr(t, bson.Unmarshal(colls[0].Options, &opts))
	if colls[0].IDIndex.Name != "_id_" {
		t.Fatalf("listCollections idIndex = %+v", colls[0].IDIndex)
	}
	if opts.Collation.Locale != "en" || opts.Collation.Strength != 2 || opts.Collation.Version != "57.1" {
		t.Fatalf("listCollections options = %v", colls[0].Options)
	}
}

func TestCollationInvalid(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("db").Collection("c")
	cases := []struct {
		c    bson.D
		code int32
	}{
		{bson.D{{Key: "locale", Value: "xx_nope"}}, 2},
		{bson.D{{Key: "locale", Value: "en"}, {Key: "strength", Value: 7}}, 9},
		{bson.D{{Key: "locale", Value: "en"}, {Key: "bogus", Value: true}}, 9},
		{bson.D{{Key: "strength", Value: 2}}, 4},
	}
	for _, tc := range cases {
		err := coll.Database().RunCommand(ctx, bson.D{{Key: "find", Value: "c"}, {Key: "collation", Value: tc.c}}).Err()
		if sdCode(err) != tc.code {
			t.Errorf("find with collation %v: %v, want code %d", tc.c, err, tc.code)
		}
	}
}

func TestLetVariables(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("db").Collection("let")
	_, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "name", Value: "a"}, {Key: "n", Value: 5}},
		bson.D{{Key: "_id", Value: 2}, {Key: "name", Value: "b"}, {Key: "n", Value: 10}},
		bson.D{{Key: "_id", Value: 3}, {Key: "name", Value: "c"}, {Key: "n", Value: 15}},
	})
	sdNoErr(t, err)
	gt := func(v string) bson.D {
		return bson.D{{Key: "$expr", Value: bson.D{{Key: "$gt", Value: bson.A{"$n", v}}}}}
	}
	// let values are expressions evaluated once: {$add: [4, 3]} is 7.
	got := sdFindAll(t, ctx, coll, gt("$$min"), options.Find().SetLet(bson.D{{Key: "min", Value: bson.D{{Key: "$add", Value: bson.A{4, 3}}}}}))
	if !sameStrings(names(got), []string{"b", "c"}) {
		t.Fatalf("find let: %v", names(got))
	}
	// ... and computed projection fields see them.
	got = sdFindAll(t, ctx, coll, bson.D{{Key: "_id", Value: 1}}, options.Find().
		SetProjection(bson.D{{Key: "_id", Value: 0}, {Key: "scaled", Value: bson.D{{Key: "$multiply", Value: bson.A{"$n", "$$k"}}}}}).
		SetLet(bson.D{{Key: "k", Value: 3}}))
	if len(got) != 1 || len(got[0]) != 1 || got[0][0].Value != int32(15) {
		t.Fatalf("projection with let: %v", got)
	}
	ur, err := coll.UpdateMany(ctx, gt("$$min"), bson.A{bson.D{{Key: "$set", Value: bson.D{{Key: "tag", Value: "$$tag"}, {Key: "at", Value: "$$NOW"}}}}},
		options.UpdateMany().SetLet(bson.D{{Key: "min", Value: 12}, {Key: "tag", Value: "big"}}))
	sdNoErr(t, err)
	if ur.ModifiedCount != 1 {
		t.Fatalf("updateMany let modified %d", ur.ModifiedCount)
	}
	var c bson.M
	sdNoErr(t, coll.FindOne(ctx, bson.D{{Key: "_id", Value: 3}}).Decode(&c))
	if c["tag"] != "big" {
		t.Fatalf("updated doc = %v", c)
	}
	if _, ok := c["at"].(bson.DateTime); !ok {
		t.Fatalf("$$NOW in a pipeline update gave %T", c["at"])
	}
	var fam bson.M
	err = coll.FindOneAndUpdate(ctx, bson.D{{Key: "$expr", Value: bson.D{{Key: "$eq", Value: bson.A{"$name", "$$who"}}}}},
		bson.A{bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: bson.D{{Key: "$add", Value: bson.A{"$n", "$$inc"}}}}}}}},
		options.FindOneAndUpdate().SetLet(bson.D{{Key: "who", Value: "a"}, {Key: "inc", Value: 100}}).SetReturnDocument(options.After)).Decode(&fam)
	sdNoErr(t, err)
	if fam["n"] != int32(105) {
		t.Fatalf("findOneAndUpdate let = %v", fam)
	}
	dr, err := coll.DeleteMany(ctx, gt("$$min"), options.DeleteMany().SetLet(bson.D{{Key: "min", Value: 100}}))
	sdNoErr(t, err)
	if dr.DeletedCount != 1 {
		t.Fatalf("deleteMany let deleted %d, want 1 (the 105)", dr.DeletedCount)
	}
	// An update statement's constants ("c") are variables of its pipeline.
	var reply bson.M
	sdNoErr(t, coll.Database().RunCommand(ctx, bson.D{{Key: "update", Value: coll.Name()}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 2}}}, {Key: "u", Value: bson.A{bson.D{{Key: "$set", Value: bson.D{{Key: "k", Value: "$$k"}}}}}}, {Key: "c", Value: bson.D{{Key: "k", Value: "const"}}}},
	}}}).Decode(&reply))
	if reply["nModified"] != int32(1) {
		t.Fatalf("update with c: %v", reply)
	}
	err = coll.Database().RunCommand(ctx, bson.D{{Key: "update", Value: coll.Name()}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 2}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "k", Value: 1}}}}}, {Key: "c", Value: bson.D{{Key: "k", Value: 1}}}},
	}}}).Err()
	if codes := sdWriteCodes(err); len(codes) != 1 || codes[0] != 51198 {
		t.Fatalf("c on a non-pipeline update: %v", err)
	}
	var b bson.M
	sdNoErr(t, coll.FindOne(ctx, bson.D{{Key: "_id", Value: 2}}).Decode(&b))
	if b["k"] != "const" {
		t.Fatalf("doc after c update: %v", b)
	}
	// $$CLUSTER_TIME is the command's cluster time on a replica set.
	got = sdFindAll(t, ctx, coll, bson.D{{Key: "$expr", Value: bson.D{{Key: "$eq", Value: bson.A{bson.D{{Key: "$type", Value: "$$CLUSTER_TIME"}}, "timestamp"}}}}})
	if len(got) != 2 {
		t.Fatalf("$$CLUSTER_TIME find: %v", got)
	}
}

func TestLetErrors(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("db")
	coll := db.Collection("letErr")
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 1}})
	sdNoErr(t, err)
	_, err = coll.Find(ctx, bson.D{{Key: "$expr", Value: bson.D{{Key: "$eq", Value: bson.A{"$n", "$$nope"}}}}})
	if sdCode(err) != 17276 {
		t.Fatalf("undefined variable in find: %v", err)
	}
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "$expr", Value: bson.D{{Key: "$eq", Value: bson.A{"$n", "$$nope"}}}}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}})
	if codes := sdWriteCodes(err); len(codes) != 1 || codes[0] != 17276 {
		t.Fatalf("undefined variable in update: %v", err)
	}
	// The check is at parse time, as on mongod: no document is needed.
	_, err = db.Collection("empty").Find(ctx, bson.D{{Key: "$expr", Value: bson.D{{Key: "$eq", Value: bson.A{"$n", "$$nope"}}}}})
	if sdCode(err) != 17276 {
		t.Fatalf("undefined variable in find on an empty collection: %v", err)
	}
	// Variables bound inside the expression are defined.
	_, err = db.Collection("empty").Find(ctx, bson.D{{Key: "$expr", Value: bson.D{{Key: "$let", Value: bson.D{
		{Key: "vars", Value: bson.D{{Key: "x", Value: 1}}}, {Key: "in", Value: bson.D{{Key: "$eq", Value: bson.A{"$n", "$$x"}}}}}}}}})
	sdNoErr(t, err)
	// So is one in a pipeline update, even when nothing matches.
	_, err = db.Collection("empty").UpdateOne(ctx, bson.D{}, bson.A{bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: "$$nope"}}}}})
	if codes := sdWriteCodes(err); len(codes) != 1 || codes[0] != 17276 {
		t.Fatalf("undefined variable in a pipeline update: %v", err)
	}
	// A let expression may not read the document.
	_, err = coll.Find(ctx, bson.D{}, options.Find().SetLet(bson.D{{Key: "v", Value: "$n"}}))
	if sdCode(err) != 4890500 {
		t.Fatalf("let reading a field: %v", err)
	}
	// Variable names follow the server's rules.
	_, err = coll.Find(ctx, bson.D{}, options.Find().SetLet(bson.D{{Key: "Bad", Value: 1}}))
	if sdCode(err) != 9 {
		t.Fatalf("let with an upper-case name: %v", err)
	}
}

// benchCollationSetup fills a 200-document collection for the collated
// and simple find/update benchmarks.
func benchCollationSetup(b *testing.B) *mongo.Collection {
	client, _ := dataClient(b)
	coll := client.Database("bench").Collection("coll")
	ctx := sdCtx(b)
	docs := make([]any, 200)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "name", Value: "User" + string(rune('A'+i%26)) + "x"}, {Key: "n", Value: i}}
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		b.Fatal(err)
	}
	return coll
}

func benchFind(b *testing.B, c *options.Collation) {
	coll := benchCollationSetup(b)
	ctx := sdCtx(b)
	// Both variants match the same 8 documents: the simple one by the
	// exact spelling, the collated one case-insensitively.
	opts, name := options.Find(), "UserKx"
	if c != nil {
		opts.SetCollation(c)
		name = "userkx"
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cur, err := coll.Find(ctx, bson.D{{Key: "name", Value: name}}, opts)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for cur.Next(ctx) {
			n++
		}
		_ = cur.Close(ctx)
		if n != 8 {
			b.Fatalf("matched %d, want 8", n)
		}
	}
}

func benchUpdate(b *testing.B, c *options.Collation) {
	coll := benchCollationSetup(b)
	ctx := sdCtx(b)
	opts, name := options.UpdateOne(), "UserZx"
	if c != nil {
		opts.SetCollation(c)
		name = "userzx"
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := coll.UpdateOne(ctx, bson.D{{Key: "name", Value: name}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}, opts); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFindSimple(b *testing.B)   { benchFind(b, nil) }
func BenchmarkFindCollated(b *testing.B) { benchFind(b, &options.Collation{Locale: "en", Strength: 2}) }
func BenchmarkUpdateSimple(b *testing.B) { benchUpdate(b, nil) }
func BenchmarkUpdateCollated(b *testing.B) {
	benchUpdate(b, &options.Collation{Locale: "en", Strength: 2})
}

func TestCollationPartialUniqueIndex(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("db").Collection("partial")
	// Unique among active accounts, where "Active" and "active" are the
	// same status under the index's strength-2 collation.
	_, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys: bson.D{{Key: "user", Value: 1}},
		Options: options.Index().SetUnique(true).SetCollation(&options.Collation{Locale: "en", Strength: 2}).
			SetPartialFilterExpression(bson.D{{Key: "status", Value: "active"}}),
	})
	sdNoErr(t, err)
	_, err = coll.InsertOne(ctx, bson.D{{Key: "user", Value: "ann"}, {Key: "status", Value: "Active"}})
	sdNoErr(t, err)
	_, err = coll.InsertOne(ctx, bson.D{{Key: "user", Value: "ANN"}, {Key: "status", Value: "closed"}})
	sdNoErr(t, err)
	_, err = coll.InsertOne(ctx, bson.D{{Key: "user", Value: "Ann"}, {Key: "status", Value: "ACTIVE"}})
	if codes := sdWriteCodes(err); len(codes) != 1 || codes[0] != 11000 {
		t.Fatalf("second active Ann: %v", err)
	}
}

func TestCollationUpdateOperators(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("db").Collection("arrays")
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "tags", Value: bson.A{"Go", "go", "rust", "GO"}}, {Key: "v", Value: bson.A{"v10", "v9"}}})
	sdNoErr(t, err)
	ci := &options.Collation{Locale: "en", Strength: 2}
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{
		{Key: "$pull", Value: bson.D{{Key: "tags", Value: "gO"}}},
		{Key: "$push", Value: bson.D{{Key: "v", Value: bson.D{{Key: "$each", Value: bson.A{"v100"}}, {Key: "$sort", Value: 1}}}}},
	}, options.UpdateOne().SetCollation(&options.Collation{Locale: "en", Strength: 2, NumericOrdering: true}))
	sdNoErr(t, err)
	var doc struct {
		Tags []string `bson:"tags"`
		V    []string `bson:"v"`
	}
	sdNoErr(t, coll.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&doc))
	if !sameStrings(doc.Tags, []string{"rust"}) {
		t.Fatalf("$pull under strength 2 left %v", doc.Tags)
	}
	if !sameStrings(doc.V, []string{"v9", "v10", "v100"}) {
		t.Fatalf("$push $sort under numericOrdering gave %v", doc.V)
	}
	// $addToSet treats a case variant as present.
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$addToSet", Value: bson.D{{Key: "tags", Value: "RUST"}}}}, options.UpdateOne().SetCollation(ci))
	sdNoErr(t, err)
	sdNoErr(t, coll.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&doc))
	if !sameStrings(doc.Tags, []string{"rust"}) {
		t.Fatalf("$addToSet under strength 2 gave %v", doc.Tags)
	}
}

func TestCollationLookup(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("db")
	_, err := db.Collection("orders").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "sku", Value: "ABC"}})
	sdNoErr(t, err)
	_, err = db.Collection("items").InsertMany(ctx, []any{bson.D{{Key: "sku", Value: "abc"}}, bson.D{{Key: "sku", Value: "Abc"}}, bson.D{{Key: "sku", Value: "xyz"}}})
	sdNoErr(t, err)
	pipeline := mongo.Pipeline{{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "items"}, {Key: "localField", Value: "sku"}, {Key: "foreignField", Value: "sku"}, {Key: "as", Value: "items"}}}}}
	count := func(opts ...options.Lister[options.AggregateOptions]) int {
		cur, err := db.Collection("orders").Aggregate(ctx, pipeline, opts...)
		sdNoErr(t, err)
		var out []struct {
			Items []bson.M `bson:"items"`
		}
		sdNoErr(t, cur.All(ctx, &out))
		if len(out) != 1 {
			t.Fatalf("lookup output %v", out)
		}
		return len(out[0].Items)
	}
	if n := count(); n != 0 {
		t.Fatalf("simple $lookup joined %d items", n)
	}
	if n := count(options.Aggregate().SetCollation(&options.Collation{Locale: "en", Strength: 2})); n != 2 {
		t.Fatalf("strength-2 $lookup joined %d items, want 2", n)
	}
}

func TestCollationIDInTransaction(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("db")
	sdNoErr(t, db.CreateCollection(ctx, "txc", options.CreateCollection().SetCollation(&options.Collation{Locale: "en", Strength: 2})))
	coll := db.Collection("txc")
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "x"}})
	sdNoErr(t, err)
	sess, err := client.StartSession()
	sdNoErr(t, err)
	defer sess.EndSession(ctx)
	_, err = sess.WithTransaction(ctx, func(sc context.Context) (any, error) {
		return coll.InsertOne(sc, bson.D{{Key: "_id", Value: "X"}})
	})
	if codes := sdWriteCodes(err); len(codes) != 1 || codes[0] != 11000 {
		t.Fatalf("case-variant _id inside a transaction: %v", err)
	}
	_, err = sess.WithTransaction(ctx, func(sc context.Context) (any, error) {
		if _, err := coll.InsertOne(sc, bson.D{{Key: "_id", Value: "y"}}); err != nil {
			return nil, err
		}
		return coll.UpdateOne(sc, bson.D{{Key: "_id", Value: "Y"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}})
	})
	sdNoErr(t, err)
	var doc bson.M
	sdNoErr(t, coll.FindOne(ctx, bson.D{{Key: "_id", Value: "Y"}}).Decode(&doc))
	if doc["_id"] != "y" || doc["v"] != int32(1) {
		t.Fatalf("after the transaction: %v", doc)
	}
}

// An _id equality uses the _id index only where that is exact: a query
// collation other than the index's scans instead.
func TestCollationIDLookup(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("db")
	plain := db.Collection("idplain")
	_, err := plain.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: "e"}}, bson.D{{Key: "_id", Value: "é"}}, bson.D{{Key: "_id", Value: "E"}}})
	sdNoErr(t, err)
	s1 := options.Find().SetCollation(&options.Collation{Locale: "fr", Strength: 1})
	if got := sdFindAll(t, ctx, plain, bson.D{{Key: "_id", Value: "E"}}, s1); len(got) != 3 {
		t.Fatalf("strength-1 _id find on a binary collection: %v", got)
	}
	if got := sdFindAll(t, ctx, plain, bson.D{{Key: "_id", Value: "E"}}); len(got) != 1 {
		t.Fatalf("binary _id find: %v", got)
	}
	sdNoErr(t, db.CreateCollection(ctx, "ids2", options.CreateCollection().SetCollation(&options.Collation{Locale: "fr", Strength: 2})))
	s2 := db.Collection("ids2")
	_, err = s2.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: "e"}}, bson.D{{Key: "_id", Value: "é"}}})
	sdNoErr(t, err)
	if got := sdFindAll(t, ctx, s2, bson.D{{Key: "_id", Value: "E"}}); len(got) != 1 {
		t.Fatalf("default-collation _id find: %v", got)
	}
	if got := sdFindAll(t, ctx, s2, bson.D{{Key: "_id", Value: "E"}}, s1); len(got) != 2 {
		t.Fatalf("strength-1 _id find on a strength-2 collection: %v", got)
	}
	n, err := s2.CountDocuments(ctx, bson.D{{Key: "_id", Value: "É"}})
	sdNoErr(t, err)
	if n != 1 {
		t.Fatalf("count by _id under the default collation = %d", n)
	}
}

func TestCollationProjectionElemMatch(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("db").Collection("pem")
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "tags", Value: bson.A{
		bson.D{{Key: "t", Value: "x"}}, bson.D{{Key: "t", Value: "GO"}}}}})
	sdNoErr(t, err)
	proj := bson.D{{Key: "tags", Value: bson.D{{Key: "$elemMatch", Value: bson.D{{Key: "t", Value: "go"}}}}}}
	var doc struct {
		Tags []struct {
			T string `bson:"t"`
		} `bson:"tags"`
	}
	sdNoErr(t, coll.FindOne(ctx, bson.D{}, options.FindOne().SetProjection(proj).SetCollation(&options.Collation{Locale: "en", Strength: 2})).Decode(&doc))
	if len(doc.Tags) != 1 || doc.Tags[0].T != "GO" {
		t.Fatalf("collated $elemMatch projection: %+v", doc)
	}
	doc.Tags = nil
	sdNoErr(t, coll.FindOne(ctx, bson.D{}, options.FindOne().SetProjection(proj)).Decode(&doc))
	if len(doc.Tags) != 0 {
		t.Fatalf("binary $elemMatch projection: %+v", doc)
	}
}
