package mongosim

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// textColl returns a fresh collection of a mongosim replica set reached
// with the official driver.
func textColl(t *testing.T, name string) (*mongo.Collection, context.Context) {
	t.Helper()
	client, _ := dataClient(t)
	return client.Database("textdb").Collection(name), sdCtx(t)
}

func createTextIndex(t *testing.T, ctx context.Context, c *mongo.Collection, keys bson.D, opts *options.IndexOptionsBuilder) string {
	t.Helper()
	m := mongo.IndexModel{Keys: keys}
	if opts != nil {
		m.Options = opts
	}
	name, err := c.Indexes().CreateOne(ctx, m)
	if err != nil {
		t.Fatalf("createIndex %v: %v", keys, err)
	}
	return name
}

type scored struct {
	ID    int32   `bson:"_id"`
	Score float64 `bson:"score"`
}

// textFind runs a $text find sorted and projected by textScore.
func textFind(t *testing.T, ctx context.Context, c *mongo.Collection, filter bson.D) []scored {
	t.Helper()
	meta := bson.D{{Key: "$meta", Value: "textScore"}}
	cur, err := c.Find(ctx, filter, options.Find().
		SetProjection(bson.D{{Key: "score", Value: meta}}).
		SetSort(bson.D{{Key: "score", Value: meta}, {Key: "_id", Value: 1}}))
	if err != nil {
		t.Fatalf("find %v: %v", filter, err)
	}
	var out []scored
	if err := cur.All(ctx, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func search(s string) bson.D {
	return bson.D{{Key: "$text", Value: bson.D{{Key: "$search", Value: s}}}}
}

func scoredIDs(rs []scored) []int32 {
	out := []int32{}
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

func wantIDs(t *testing.T, what string, got []scored, want ...int32) {
	t.Helper()
	if want == nil {
		want = []int32{}
	}
	if g := scoredIDs(got); !reflect.DeepEqual(g, want) {
		t.Errorf("%s: got ids %v, want %v", what, g, want)
	}
}

// termScore is mongod's score of one term in one string: weight × (1 +
// 1/2 + ... for each repeat) × (0.5 + 0.5 × count / tokens), × 1.1 when
// the term is the whole string. Computed at run time in float64, in the
// server's order of operations.
func termScore(weight float64, count int, tokens int, whole bool) float64 {
	freq, exp := 0.0, 0.0
	for i := 0; i < count; i++ {
		if exp == 0 {
			exp = 1
		} else {
			exp *= 2
		}
		freq += 1 / exp
	}
	adjust := 1.0
	if whole {
		adjust += 0.1
	}
	return weight * freq * (0.5*float64(count)/float64(tokens) + 0.5) * adjust
}

func TestTextIndexSpecAndConflicts(t *testing.T) {
	c, ctx := textColl(t, "spec")
	name := createTextIndex(t, ctx, c, bson.D{{Key: "title", Value: "text"}, {Key: "body", Value: "text"}},
		options.Index().SetWeights(bson.D{{Key: "title", Value: 10}}))
	if name != "title_text_body_text" {
		t.Fatalf("name %q", name)
	}
	cur, err := c.Indexes().List(ctx)
	sdNoErr(t, err)
	var specs []bson.D
	sdNoErr(t, cur.All(ctx, &specs))
	want := bson.D{
		{Key: "v", Value: int32(2)},
		{Key: "key", Value: bson.D{{Key: "_fts", Value: "text"}, {Key: "_ftsx", Value: int32(1)}}},
		{Key: "name", Value: "title_text_body_text"},
		{Key: "weights", Value: bson.D{{Key: "body", Value: int32(1)}, {Key: "title", Value: int32(10)}}},
		{Key: "default_language", Value: "english"},
		{Key: "language_override", Value: "language"},
		{Key: "textIndexVersion", Value: int32(3)},
	}
	if len(specs) != 2 || !reflect.DeepEqual(specs[1], want) {
		t.Fatalf("listIndexes: %v\nwant %v", specs, want)
	}
	// The same index again is a no-op.
	createTextIndex(t, ctx, c, bson.D{{Key: "title", Value: "text"}, {Key: "body", Value: "text"}},
		options.Index().SetWeights(bson.D{{Key: "title", Value: 10}}))

	// A second text index: on the same (normalized) key pattern an
	// IndexOptionsConflict, on another CannotCreateIndex.
	_, err = c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "other", Value: "text"}}})
	ce := commandError(t, err, cmderr.IndexOptionsConflict)
	if want := "An equivalent index already exists with a different name and options."; len(ce.Message) < len(want) || ce.Message[:len(want)] != want {
		t.Errorf("message %q", ce.Message)
	}
	_, err = c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "a", Value: 1}, {Key: "other", Value: "text"}}})
	ce = commandError(t, err, cmderr.CannotCreateIndex)
	if ce.Message != `only one text index per collection allowed, found existing text index "title_text_body_text"` {
		t.Errorf("message %q", ce.Message)
	}

	bad := []struct {
		keys bson.D
		opts *options.IndexOptionsBuilder
		code int32
	}{
		{bson.D{{Key: "a", Value: "text"}, {Key: "b", Value: 1}, {Key: "c", Value: "text"}}, nil, cmderr.CannotCreateIndex},
		{bson.D{{Key: "a", Value: "text"}}, options.Index().SetWeights(bson.D{{Key: "a", Value: 0}}), cmderr.CannotCreateIndex},
		{bson.D{{Key: "a", Value: "text"}}, options.Index().SetDefaultLanguage("klingon"), cmderr.CannotCreateIndex},
		{bson.D{{Key: "a", Value: "text"}}, options.Index().SetDefaultLanguage("german"), cmderr.NotImplemented},
		{bson.D{{Key: "a", Value: "text"}}, options.Index().SetLanguageOverride("$lang"), cmderr.CannotCreateIndex},
	}
	other := c.Database().Collection("spec2")
	for _, b := range bad {
		m := mongo.IndexModel{Keys: b.keys}
		if b.opts != nil {
			m.Options = b.opts
		}
		_, err := other.Indexes().CreateOne(ctx, m)
		commandError(t, err, b.code)
	}
}

func TestTextSearchScoresMatchMongodFormula(t *testing.T) {
	c, ctx := textColl(t, "scores")
	createTextIndex(t, ctx, c, bson.D{{Key: "title", Value: "text"}, {Key: "body", Value: "text"}},
		options.Index().SetWeights(bson.D{{Key: "title", Value: 3}}))
	_, err := c.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "title", Value: "Coffee"}, {Key: "body", Value: "I like coffee and tea"}},
		bson.D{{Key: "_id", Value: 2}, {Key: "title", Value: "Tea time"}, {Key: "body", Value: "coffee coffee coffee"}},
		bson.D{{Key: "_id", Value: 3}, {Key: "title", Value: "Tea"}, {Key: "body", Value: "black tea, green tea and a biscuit"}},
		bson.D{{Key: "_id", Value: 4}, {Key: "title", Value: "Espresso"}, {Key: "body", Value: "espresso is coffee"}},
		bson.D{{Key: "_id", Value: 5}, {Key: "title", Value: "Water"}, {Key: "body", Value: 42}},
	})
	sdNoErr(t, err)

	// By hand, with mongod's formula (stop words "i", "and", "is", "a"
	// dropped; "coffee" stems to "coffe"):
	coffee := map[int32]float64{
		1: termScore(3, 1, 1, false) + termScore(1, 1, 3, false), // "Coffee"; like coffe tea
		2: termScore(1, 3, 3, false),                             // coffe coffe coffe
		4: termScore(1, 1, 2, false),                             // espresso coffe
	}
	tea := map[int32]float64{
		1: termScore(1, 1, 3, false),                            // like coffe tea
		2: termScore(3, 1, 2, false),                            // "Tea time"
		3: termScore(3, 1, 1, true) + termScore(1, 2, 5, false), // "Tea" is the whole title; black tea green tea biscuit
	}
	check := func(query string, want map[int32]float64, order ...int32) {
		t.Helper()
		got := textFind(t, ctx, c, search(query))
		wantIDs(t, query, got, order...)
		for _, g := range got {
			if g.Score != want[g.ID] {
				t.Errorf("%q: _id %d score %v, want %v", query, g.ID, g.Score, want[g.ID])
			}
		}
	}
	check("coffee", coffee, 1, 2, 4)
	check("TEA", tea, 3, 2, 1)
	both := map[int32]float64{}
	for id := int32(1); id <= 4; id++ {
		both[id] = coffee[id] + tea[id] // the terms' scores add up, "coffe" first
	}
	check("coffee tea teas", both, 3, 1, 2, 4)
	check("coffees -espresso", coffee, 1, 2)
	check("the and of", nil) // only stop words: nothing

	// A projection of the whole document carries no score inside it.
	var whole []bson.D
	cur, err := c.Find(ctx, search("espresso"), options.Find().SetProjection(bson.D{{Key: "root", Value: "$$ROOT"}}))
	sdNoErr(t, err)
	sdNoErr(t, cur.All(ctx, &whole))
	if len(whole) != 1 || len(whole[0][1].Value.(bson.D)) != 3 {
		t.Errorf("$$ROOT projection: %v", whole)
	}

	// count and a sort on textScore without projecting it.
	n, err := c.CountDocuments(ctx, search("coffee"))
	sdNoErr(t, err)
	if n != 3 {
		t.Errorf("count %d", n)
	}
	cur, err = c.Find(ctx, search("tea"), options.Find().SetSort(bson.D{{Key: "s", Value: bson.D{{Key: "$meta", Value: "textScore"}}}}).SetLimit(1))
	sdNoErr(t, err)
	var docs []bson.D
	sdNoErr(t, cur.All(ctx, &docs))
	if len(docs) != 1 || docs[0][0].Value != int32(3) || len(docs[0]) != 3 {
		t.Errorf("sorted without projection: %v", docs)
	}
}

func TestTextSearchPhrasesNegationsAndSensitivity(t *testing.T) {
	c, ctx := textColl(t, "phrases")
	createTextIndex(t, ctx, c, bson.D{{Key: "$**", Value: "text"}}, nil)
	_, err := c.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: "The coffee shop on Main Street"}},
		bson.D{{Key: "_id", Value: 2}, {Key: "nested", Value: bson.D{{Key: "b", Value: "shop for coffee beans"}}}},
		bson.D{{Key: "_id", Value: 3}, {Key: "list", Value: bson.A{"decaf coffee", "Café au lait"}}},
		bson.D{{Key: "_id", Value: 4}, {Key: "a", Value: "Running runners run"}},
	})
	sdNoErr(t, err)
	for _, tc := range []struct {
		query string
		want  []int32
	}{
		{`"coffee shop"`, []int32{1}},
		{`coffee -decaf`, []int32{1, 2}},
		{`coffee -"coffee shop"`, []int32{2, 3}},
		{`"coffee" "beans"`, []int32{2}},
		{`cafe`, []int32{3}},
		{`ran runs`, []int32{4}},
		{`- decaf`, []int32{3}}, // a '-' followed by a space negates nothing
		{`-decaf`, nil},         // only a negation: nothing
	} {
		got := textFind(t, ctx, c, search(tc.query))
		wantIDs(t, tc.query, sortIDs(got), tc.want...)
	}
	sensitive := func(s string, caseS, diaS bool) []scored {
		return textFind(t, ctx, c, bson.D{{Key: "$text", Value: bson.D{{Key: "$search", Value: s},
			{Key: "$caseSensitive", Value: caseS}, {Key: "$diacriticSensitive", Value: diaS}}}})
	}
	wantIDs(t, "Coffee case-sensitive", sensitive("Coffee", true, false))
	wantIDs(t, "Café case-sensitive", sortIDs(sensitive("Café", true, false)), 3)
	wantIDs(t, "café diacritic-sensitive", sortIDs(sensitive("café", false, true)), 3)
	wantIDs(t, "cafe diacritic-sensitive", sensitive("cafe", false, true))
	wantIDs(t, "Main case-sensitive phrase", sensitive(`"Main Street"`, true, false), 1)
	wantIDs(t, "main case-sensitive phrase", sensitive(`"main street"`, true, false))
}

func sortIDs(rs []scored) []scored {
	out := append([]scored(nil), rs...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j].ID < out[i].ID {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestTextSearchLanguages(t *testing.T) {
	c, ctx := textColl(t, "langs")
	createTextIndex(t, ctx, c, bson.D{{Key: "body", Value: "text"}}, options.Index().SetDefaultLanguage("spanish"))
	_, err := c.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "body", Value: "Las cafeterías de la ciudad"}},
		bson.D{{Key: "_id", Value: 2}, {Key: "body", Value: "The running of the bulls"}, {Key: "language", Value: "english"}},
		bson.D{{Key: "_id", Value: 3}, {Key: "body", Value: "Les cafés et les boulangeries"}, {Key: "language", Value: "fr"}},
		bson.D{{Key: "_id", Value: 4}, {Key: "body", Value: "Кошки и собаки"}, {Key: "language", Value: "russian"}},
	})
	sdNoErr(t, err)
	// Spanish: "cafetería" and "cafeterías" share a stem; "las" and "de"
	// are Spanish stop words.
	wantIDs(t, "cafetería", textFind(t, ctx, c, search("cafetería")), 1)
	wantIDs(t, "las (stop word)", textFind(t, ctx, c, search("las")))
	lang := func(s, l string) bson.D {
		return bson.D{{Key: "$text", Value: bson.D{{Key: "$search", Value: s}, {Key: "$language", Value: l}}}}
	}
	wantIDs(t, "runs in english", textFind(t, ctx, c, lang("runs", "en")), 2)
	wantIDs(t, "runs in spanish", textFind(t, ctx, c, lang("runs", "spanish")))
	wantIDs(t, "boulangerie in french", textFind(t, ctx, c, lang("boulangerie", "french")), 3)
	wantIDs(t, "кошка in russian", textFind(t, ctx, c, lang("кошки", "russian")), 4)
	wantIDs(t, "none keeps words as written", textFind(t, ctx, c, lang("running", "none")))

	_, err = c.Find(ctx, lang("x", "klingon"))
	commandError(t, err, cmderr.BadValue)
	_, err = c.Find(ctx, lang("x", "german"))
	commandError(t, err, cmderr.NotImplemented)
	_, err = c.InsertOne(ctx, bson.D{{Key: "body", Value: "x"}, {Key: "language", Value: "klingon"}})
	if codes := sdWriteCodes(err); !reflect.DeepEqual(codes, []int{17262}) {
		t.Errorf("unknown language override: %v", err)
	}
	_, err = c.InsertOne(ctx, bson.D{{Key: "body", Value: "x"}, {Key: "language", Value: 7}})
	if codes := sdWriteCodes(err); !reflect.DeepEqual(codes, []int{17261}) {
		t.Errorf("non-string language override: %v", err)
	}
}

func TestTextIndexMaintenance(t *testing.T) {
	client, cluster := dataClient(t)
	ctx := sdCtx(t)
	c := client.Database("textdb").Collection("maint")
	_, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "t", Value: "apples and pears"}})
	sdNoErr(t, err)
	createTextIndex(t, ctx, c, bson.D{{Key: "t", Value: "text"}}, nil) // built over the existing document
	_, err = c.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}, {Key: "t", Value: "pears"}})
	sdNoErr(t, err)
	wantIDs(t, "pear", sortIDs(textFind(t, ctx, c, search("pear"))), 1, 2)
	_, err = c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "t", Value: "plums"}}}})
	sdNoErr(t, err)
	wantIDs(t, "pear after update", textFind(t, ctx, c, search("pear")), 2)
	wantIDs(t, "plum after update", textFind(t, ctx, c, search("plum")), 1)
	_, err = c.ReplaceOne(ctx, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "t", Value: "plum pudding"}})
	sdNoErr(t, err)
	wantIDs(t, "plum after replace", sortIDs(textFind(t, ctx, c, search("plum"))), 1, 2)
	// Writes filtered by $text.
	res, err := c.UpdateMany(ctx, search("pudding"), bson.D{{Key: "$set", Value: bson.D{{Key: "hit", Value: true}}}})
	sdNoErr(t, err)
	if res.ModifiedCount != 1 {
		t.Errorf("updateMany by $text modified %d", res.ModifiedCount)
	}
	del, err := c.DeleteMany(ctx, search("plums"))
	sdNoErr(t, err)
	if del.DeletedCount != 2 {
		t.Errorf("deleteMany by $text deleted %d", del.DeletedCount)
	}
	wantIDs(t, "plum after delete", textFind(t, ctx, c, search("plum")))

	// The inverted index follows the writes: nothing is left in it.
	terms := -1
	err = cluster.data.read("textdb", "maint", func(col *collection) error {
		terms = col.textIndexOf().text.inv.Terms()
		return nil
	})
	sdNoErr(t, err)
	if terms != 0 {
		t.Errorf("inverted index keeps %d terms after every document was deleted", terms)
	}
}

func TestTextCompoundIndexPrefix(t *testing.T) {
	c, ctx := textColl(t, "compound")
	createTextIndex(t, ctx, c, bson.D{{Key: "shop", Value: 1}, {Key: "desc", Value: "text"}, {Key: "price", Value: 1}}, nil)
	_, err := c.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "shop", Value: "a"}, {Key: "desc", Value: "green tea"}},
		bson.D{{Key: "_id", Value: 2}, {Key: "shop", Value: "b"}, {Key: "desc", Value: "green tea"}},
	})
	sdNoErr(t, err)
	wantIDs(t, "shop a", textFind(t, ctx, c, append(bson.D{{Key: "shop", Value: "a"}}, search("tea")...)), 1)
	_, err = c.Find(ctx, search("tea"))
	commandError(t, err, cmderr.BadValue)
	_, err = c.Find(ctx, append(bson.D{{Key: "shop", Value: bson.D{{Key: "$gt", Value: "a"}}}}, search("tea")...))
	commandError(t, err, cmderr.BadValue)
	_, err = c.InsertOne(ctx, bson.D{{Key: "shop", Value: bson.A{"a", "b"}}, {Key: "desc", Value: "x"}})
	if codes := sdWriteCodes(err); !reflect.DeepEqual(codes, []int{16675}) {
		t.Errorf("array prefix: %v", err)
	}
}

func TestTextQueryErrors(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("textdb")
	plain := db.Collection("plain")
	_, err := plain.InsertOne(ctx, bson.D{{Key: "a", Value: "coffee"}})
	sdNoErr(t, err)
	_, err = plain.Find(ctx, search("coffee"))
	ce := commandError(t, err, cmderr.IndexNotFound)
	if ce.Message != "text index required for $text query" {
		t.Errorf("message %q", ce.Message)
	}
	_, err = db.Collection("missing").Find(ctx, search("coffee"))
	commandError(t, err, cmderr.IndexNotFound)

	c := db.Collection("errs")
	createTextIndex(t, ctx, c, bson.D{{Key: "a", Value: "text"}}, nil)
	_, err = c.InsertOne(ctx, bson.D{{Key: "a", Value: "coffee"}, {Key: "tags", Value: bson.A{bson.D{{Key: "x", Value: 1}}}}})
	sdNoErr(t, err)
	for _, tc := range []struct {
		filter bson.D
		code   int32
		msg    string
	}{
		{bson.D{{Key: "$and", Value: bson.A{search("a"), search("b")}}}, cmderr.BadValue, "Too many text expressions"},
		{bson.D{{Key: "$nor", Value: bson.A{search("a")}}}, cmderr.BadValue, "text expression not allowed in nor"},
		{bson.D{{Key: "tags", Value: bson.D{{Key: "$elemMatch", Value: search("a")}}}}, cmderr.BadValue, "$text can only be applied to the top-level document"},
		{bson.D{{Key: "$text", Value: bson.D{{Key: "$search", Value: 1}}}}, cmderr.TypeMismatch, "$search requires a string value"},
		{bson.D{{Key: "$text", Value: bson.D{{Key: "$search", Value: "a"}, {Key: "$foo", Value: 1}}}}, cmderr.BadValue, "extra fields in $text"},
		{bson.D{{Key: "$or", Value: bson.A{search("a"), bson.D{{Key: "b", Value: 1}}}}}, cmderr.NotImplemented, ""},
	} {
		_, err := c.Find(ctx, tc.filter)
		ce := commandError(t, err, tc.code)
		if tc.msg != "" && ce.Message != tc.msg {
			t.Errorf("%v: message %q, want %q", tc.filter, ce.Message, tc.msg)
		}
	}
	_, err = c.CountDocuments(ctx, search("coffee"), options.Count().SetHint("a_text"))
	commandError(t, err, cmderr.BadValue)
	for _, o := range []*options.FindOptionsBuilder{
		options.Find().SetSort(bson.D{{Key: "$natural", Value: 1}}),
		options.Find().SetHint("a_text"),
	} {
		_, err := c.Find(ctx, search("coffee"), o)
		commandError(t, err, cmderr.BadValue)
	}
	// {$meta: "textScore"} without $text.
	meta := bson.D{{Key: "$meta", Value: "textScore"}}
	_, err = c.Find(ctx, bson.D{}, options.Find().SetProjection(bson.D{{Key: "s", Value: meta}}))
	commandError(t, err, 40218)
	_, err = c.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "s", Value: meta}}))
	commandError(t, err, 40218)
	// Writes read documents without their scores: a textScore sort there
	// is NotImplemented.
	err = c.FindOneAndUpdate(ctx, search("coffee"), bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: 1}}}},
		options.FindOneAndUpdate().SetSort(bson.D{{Key: "s", Value: meta}})).Err()
	commandError(t, err, cmderr.NotImplemented)
	// findAndModify by $text alone works.
	if err := c.FindOneAndUpdate(ctx, search("coffee"), bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: 1}}}}).Err(); err != nil {
		t.Errorf("findAndModify by $text: %v", err)
	}
	// In a pipeline, $text only in the first $match.
	_, err = c.Aggregate(ctx, mongo.Pipeline{{{Key: "$match", Value: bson.D{}}}, {{Key: "$match", Value: search("coffee")}}})
	commandError(t, err, 17313)
	_, err = c.Aggregate(ctx, mongo.Pipeline{{{Key: "$project", Value: bson.D{{Key: "s", Value: meta}}}}})
	commandError(t, err, 40218)
	// Validators may not use $text.
	err = db.CreateCollection(ctx, "validated", options.CreateCollection().SetValidator(search("x")))
	var cmdErr mongo.CommandError
	if !errors.As(err, &cmdErr) {
		t.Errorf("validator with $text: %v", err)
	}
}

func TestTextSearchAggregate(t *testing.T) {
	c, ctx := textColl(t, "agg")
	createTextIndex(t, ctx, c, bson.D{{Key: "t", Value: "text"}}, nil)
	_, err := c.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "t", Value: "tea"}, {Key: "kind", Value: "x"}},
		bson.D{{Key: "_id", Value: 2}, {Key: "t", Value: "green tea leaves"}, {Key: "kind", Value: "x"}},
		bson.D{{Key: "_id", Value: 3}, {Key: "t", Value: "coffee"}, {Key: "kind", Value: "y"}},
	})
	sdNoErr(t, err)
	meta := bson.D{{Key: "$meta", Value: "textScore"}}
	cur, err := c.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$match", Value: append(search("tea"), bson.E{Key: "kind", Value: "x"})}},
		{{Key: "$project", Value: bson.D{{Key: "t", Value: 1}}}}, // the score survives $project
		{{Key: "$sort", Value: bson.D{{Key: "score", Value: meta}}}},
		{{Key: "$addFields", Value: bson.D{{Key: "score", Value: meta}}}},
	})
	sdNoErr(t, err)
	var got []bson.D
	sdNoErr(t, cur.All(ctx, &got))
	want := []bson.D{
		{{Key: "_id", Value: int32(1)}, {Key: "t", Value: "tea"}, {Key: "score", Value: termScore(1, 1, 1, true)}},
		{{Key: "_id", Value: int32(2)}, {Key: "t", Value: "green tea leaves"}, {Key: "score", Value: termScore(1, 1, 3, false)}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("pipeline:\n got %v\nwant %v", got, want)
	}
	// $group drops the metadata: the output has none left behind.
	cur, err = c.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$match", Value: search("tea coffee")}},
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$kind"}, {Key: "docs", Value: bson.D{{Key: "$push", Value: "$$ROOT"}}}}}},
		{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}},
	})
	sdNoErr(t, err)
	got = nil
	sdNoErr(t, cur.All(ctx, &got))
	if len(got) != 2 {
		t.Errorf("group: %v", got)
	}
	// $out and $merge write the documents without their scores.
	for _, stage := range []bson.D{{{Key: "$out", Value: "agg_out"}}, {{Key: "$merge", Value: "agg_merged"}}} {
		cur, err = c.Aggregate(ctx, mongo.Pipeline{{{Key: "$match", Value: search("tea")}}, stage})
		sdNoErr(t, err)
		sdNoErr(t, cur.Close(ctx))
		name := stage[0].Value.(string)
		cur, err = c.Database().Collection(name).Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
		sdNoErr(t, err)
		got = nil
		sdNoErr(t, cur.All(ctx, &got))
		if len(got) != 2 || len(got[0]) != 3 {
			t.Errorf("%s wrote %v", name, got)
		}
	}
}

// TestTextSearchInTransactionAndSnapshotRead: a transaction's $text sees
// its own writes through its copy of the text index, and a snapshot read
// (which matches without the index) finds and scores the same documents.
func TestTextSearchInTransactionAndSnapshotRead(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	c := client.Database("textdb").Collection("txn")
	createTextIndex(t, ctx, c, bson.D{{Key: "t", Value: "text"}}, nil)
	_, err := c.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "t", Value: "sourdough bread"}},
		bson.D{{Key: "_id", Value: 2}, {Key: "t", Value: "rye"}},
	})
	sdNoErr(t, err)
	sess, err := client.StartSession()
	sdNoErr(t, err)
	defer sess.EndSession(ctx)
	_, err = sess.WithTransaction(ctx, func(sctx context.Context) (any, error) {
		if _, err := c.InsertOne(sctx, bson.D{{Key: "_id", Value: 3}, {Key: "t", Value: "breads and rolls"}}); err != nil {
			return nil, err
		}
		if _, err := c.DeleteOne(sctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
			return nil, err
		}
		wantIDs(t, "bread in the transaction", textFind(t, sctx, c, search("bread")), 3)
		return nil, nil
	})
	sdNoErr(t, err)
	wantIDs(t, "bread after commit", textFind(t, ctx, c, search("bread")), 3)

	snap := client.Database("textdb", options.Database().SetReadConcern(readconcern.Snapshot())).Collection("txn")
	got := textFind(t, ctx, snap, search("breads rye"))
	wantIDs(t, "snapshot read", got, 2, 3)
	if len(got) == 2 && (got[0].Score != termScore(1, 1, 1, true) || got[1].Score != termScore(1, 1, 2, false)) {
		t.Errorf("snapshot read scores %v", got)
	}
}
