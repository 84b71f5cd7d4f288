package text

import (
	"errors"
	"reflect"
	"sort"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func tokens(l *Language, s string, o TokenOptions) []string {
	out := []string{}
	l.Tokenize(s, o, func(t string) { out = append(out, t) })
	return out
}

func TestTokenize(t *testing.T) {
	en := English()
	cases := []struct {
		in   string
		o    TokenOptions
		want []string
	}{
		{"The quick brown foxes are jumping!", TokenOptions{FilterStopWords: true}, []string{"quick", "brown", "fox", "jump"}},
		{"The quick", TokenOptions{}, []string{"the", "quick"}},
		// The apostrophe is part of an English word: "don't" is a stop word.
		{"don't stop-believing", TokenOptions{FilterStopWords: true}, []string{"stop", "believ"}},
		{"Café RÉSUMÉ", TokenOptions{}, []string{"cafe", "resume"}},
		{"Café RÉSUMÉ", TokenOptions{DiacriticSensitive: true}, []string{"café", "résumé"}},
		{"Running Dogs", TokenOptions{CaseSensitive: true}, []string{"Run", "Dog"}},
		{"a^b`c", TokenOptions{}, []string{"a", "b", "c"}}, // ^ and ` are delimiters (Pattern_Syntax)
		{"snake_case x1", TokenOptions{}, []string{"snake_cas", "x1"}},
	}
	for _, c := range cases {
		if got := tokens(en, c.in, c.o); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q %+v: got %q, want %q", c.in, c.o, got, c.want)
		}
	}
	fr, err := Lookup("FR")
	if err != nil {
		t.Fatal(err)
	}
	// Outside English the apostrophe separates words; "l" is a stop word.
	if got := tokens(fr, "l'église", TokenOptions{FilterStopWords: true}); !reflect.DeepEqual(got, []string{"eglis"}) {
		t.Errorf("french: %q", got)
	}
}

func TestLookup(t *testing.T) {
	for _, name := range []string{"english", "EN", "Spanish", "es", "ru", "sv", "nb", "hungarian", "none"} {
		if _, err := Lookup(name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, name := range []string{"german", "de", "turkish", "pt"} {
		if _, err := Lookup(name); !errors.Is(err, ErrUnsupportedLanguage) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := Lookup("klingon"); !errors.Is(err, ErrUnknownLanguage) {
		t.Errorf("klingon: %v", err)
	}
}

func TestParseQuery(t *testing.T) {
	en := English()
	cases := []struct {
		in                 string
		terms, neg         []string
		phrases, negPhrase []string
	}{
		{"coffee tea the", []string{"coffe", "tea"}, nil, nil, nil},
		{`"coffee shop" -decaf`, []string{"coffe", "shop"}, []string{"decaf"}, []string{"coffee shop"}, nil},
		{`- decaf`, []string{"decaf"}, nil, nil, nil},                       // '-' then a space negates nothing
		{`-foo-bar baz`, []string{"baz"}, []string{"bar", "foo"}, nil, nil}, // a negation runs to the next space
		{`cafe -"bad brew"`, []string{"cafe"}, nil, nil, []string{"bad brew"}},
		{`"a-b" c`, []string{"b", "c"}, nil, []string{"a-b"}, nil}, // no negation inside a phrase; "a" is a stop word
	}
	for _, c := range cases {
		q := ParseQuery(c.in, en, false, false)
		neg := []string{}
		for k := range q.negated {
			neg = append(neg, k)
		}
		sort.Strings(neg)
		if c.neg == nil {
			c.neg = []string{}
		}
		if !reflect.DeepEqual(q.Terms, c.terms) || !reflect.DeepEqual(neg, c.neg) ||
			!reflect.DeepEqual(q.Phrases, c.phrases) || !reflect.DeepEqual(q.NegatedPhrases, c.negPhrase) {
			t.Errorf("%q: terms %q neg %q phrases %q negated %q", c.in, q.Terms, neg, q.Phrases, q.NegatedPhrases)
		}
	}
}

func TestScoreByHand(t *testing.T) {
	spec, err := ParseSpec(bson.D{{Key: "title", Value: "text"}, {Key: "body", Value: "text"}},
		bson.D{{Key: "weights", Value: bson.D{{Key: "title", Value: 10.9}}}})
	if err != nil {
		t.Fatal(err)
	}
	scores, err := spec.Score(bson.D{
		{Key: "title", Value: "Tea"},
		{Key: "body", Value: "tea and coffee, coffee, coffee"},
		{Key: "other", Value: "tea"}, // not indexed
	})
	if err != nil {
		t.Fatal(err)
	}
	// title (weight 10: mongod keeps the integer part): "tea" is the whole
	// string, one token: 10 × 1 × (0.5 + 0.5 × 1/1) × 1.1 = 11.
	// body: tokens tea coffe coffe coffe (4; "and" is a stop word):
	//   tea:   1 × 1 × (0.5 + 0.5 × 1/4)                 = 0.625
	//   coffe: 1 × (1 + 1/2 + 1/4) × (0.5 + 0.5 × 3/4)   = 1.53125
	title, body := 10.0*1*(0.5+0.5*1/1), 1.0*1*(0.5+0.5*1.0/4) // run-time float64 arithmetic, as the server's
	title *= 1.1
	want := map[string]float64{"tea": title + body, "coffe": 1.53125}
	if !reflect.DeepEqual(scores, want) {
		t.Errorf("scores %v, want %v", scores, want)
	}
	q := ParseQuery("tea coffee", English(), false, false)
	coffe := 1.53125
	if got := QueryScore(scores, q); got != coffe+want["tea"] {
		t.Errorf("query score %v", got)
	}
}

func TestWildcardAndLanguageOverride(t *testing.T) {
	spec, err := ParseSpec(bson.D{{Key: "$**", Value: "text"}}, bson.D{{Key: "language_override", Value: "lang"}})
	if err != nil {
		t.Fatal(err)
	}
	doc := bson.D{
		{Key: "a", Value: "running"},
		{Key: "sub", Value: bson.D{{Key: "lang", Value: "spanish"}, {Key: "b", Value: "corriendo"}}},
		{Key: "arr", Value: bson.A{"dogs", bson.D{{Key: "c", Value: "cats"}}}},
		{Key: "lang", Value: "english"}, // skipped: the override field itself
	}
	scores, err := spec.Score(doc)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for k := range scores {
		got = append(got, k)
	}
	sort.Strings(got)
	if want := []string{"cat", "corr", "dog", "run"}; !reflect.DeepEqual(got, want) {
		t.Errorf("terms %q, want %q", got, want)
	}
	if _, err := spec.Score(bson.D{{Key: "lang", Value: 1}}); err == nil {
		t.Error("non-string override accepted")
	}
}

func TestIndexAddRemove(t *testing.T) {
	ix := NewIndex[int]()
	ix.Add(1, map[string]float64{"a": 1, "b": 2})
	ix.Add(2, map[string]float64{"b": 0.5})
	if got := ix.Search([]string{"a", "b"}); !reflect.DeepEqual(got, map[int]float64{1: 3, 2: 0.5}) {
		t.Errorf("search %v", got)
	}
	ix.Remove(1, map[string]float64{"a": 1, "b": 2})
	ix.Remove(2, map[string]float64{"b": 0.5})
	if ix.Terms() != 0 {
		t.Errorf("%d terms left", ix.Terms())
	}
}

// TestWildcardWeightsFollowMongodLowerBound pins a mongod quirk: with "$**"
// and explicit weights, a field gets the weight of the first weighted
// field at or after its name (mongod's lower bound in its sorted weights),
// 1 past the last one.
func TestWildcardWeightsFollowMongodLowerBound(t *testing.T) {
	spec, err := ParseSpec(bson.D{{Key: "$**", Value: "text"}}, bson.D{{Key: "weights", Value: bson.D{{Key: "title", Value: 10}}}})
	if err != nil {
		t.Fatal(err)
	}
	scores, err := spec.Score(bson.D{{Key: "body", Value: "alpha"}, {Key: "title", Value: "beta"}, {Key: "zeta", Value: "gamma"}})
	if err != nil {
		t.Fatal(err)
	}
	// Each string is one word that stems to itself, so the term is the
	// whole string (× 1.1).
	w := func(weight float64) float64 { return weight * 1 * (0.5*1/1 + 0.5) * 1.1 }
	want := map[string]float64{"alpha": w(10), "beta": w(10), "gamma": w(1)}
	if !reflect.DeepEqual(scores, want) {
		t.Errorf("scores %v, want %v", scores, want)
	}
}
