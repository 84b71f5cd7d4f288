package text

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// FuzzSearch feeds arbitrary $search strings and document text through
// the parser, tokenizer, scorer and matcher: none may panic, and a
// document's score for a query is never negative.
func FuzzSearch(f *testing.F) {
	for _, seed := range [][2]string{
		{`coffee -"tea time" "shop`, "The coffee shop"},
		{`--"-" ""`, "\xff\xfe invalid utf-8"},
		{`'don't' l'église`, "İstanbul ﬁne Ǆ ß"},
		{`"`, "a^b`c"},
	} {
		f.Add(seed[0], seed[1])
	}
	spec, err := ParseSpec(bson.D{{Key: "$**", Value: "text"}}, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, search, body string) {
		for _, lang := range []string{"english", "french", "russian", "none"} {
			l, err := Lookup(lang)
			if err != nil {
				t.Fatal(err)
			}
			for _, sens := range [][2]bool{{false, false}, {true, true}} {
				q := ParseQuery(search, l, sens[0], sens[1])
				doc := bson.D{{Key: "body", Value: body}, {Key: "language", Value: lang}}
				scores, err := spec.Score(doc)
				if err != nil {
					t.Fatal(err)
				}
				if s := QueryScore(scores, q); s < 0 {
					t.Fatalf("negative score %v", s)
				}
				if _, err := spec.Matches(doc, q, false); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}
