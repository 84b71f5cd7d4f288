package query

import (
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

func ids(docs []bson.D) []any {
	out := make([]any, len(docs))
	for i, d := range docs {
		out[i], _ = Lookup(d, "_id")
	}
	return out
}

func docsOf(t *testing.T, js ...string) []bson.D {
	out := make([]bson.D, len(js))
	for i, s := range js {
		out[i] = doc(t, s)
	}
	return out
}

func TestSortDocs(t *testing.T) {
	cases := []struct {
		name string
		spec string
		docs []string
		want []int32
	}{
		{"numbers asc mixed types", `{"a": 1}`, []string{
			`{"_id": 1, "a": 3}`, `{"_id": 2, "a": 1.5}`, `{"_id": 3, "a": {"$numberLong": "2"}}`,
		}, []int32{2, 3, 1}},
		{"desc", `{"a": -1}`, []string{
			`{"_id": 1, "a": 3}`, `{"_id": 2, "a": 1.5}`, `{"_id": 3, "a": {"$numberLong": "2"}}`,
		}, []int32{1, 3, 2}},
		{"cross-type order: missing/null < numbers < strings < objects < arrays-by-element < bool < date", `{"a": 1}`, []string{
			`{"_id": 1, "a": true}`, `{"_id": 2, "a": "x"}`, `{"_id": 3, "a": {"b": 1}}`,
			`{"_id": 4}`, `{"_id": 5, "a": 7}`, `{"_id": 6, "a": {"$date": "2020-01-01T00:00:00Z"}}`,
		}, []int32{4, 5, 2, 3, 1, 6}},
		{"null and missing tie, stable", `{"a": 1}`, []string{
			`{"_id": 1, "a": null}`, `{"_id": 2}`, `{"_id": 3, "a": null}`,
		}, []int32{1, 2, 3}},
		{"arrays sort by min element ascending", `{"a": 1}`, []string{
			`{"_id": 1, "a": [5, 1]}`, `{"_id": 2, "a": 3}`, `{"_id": 3, "a": [2, 9]}`,
		}, []int32{1, 3, 2}},
		{"arrays sort by max element descending", `{"a": -1}`, []string{
			`{"_id": 1, "a": [5, 1]}`, `{"_id": 2, "a": 3}`, `{"_id": 3, "a": [2, 9]}`,
		}, []int32{3, 1, 2}},
		{"empty array before null", `{"a": 1}`, []string{
			`{"_id": 1, "a": null}`, `{"_id": 2, "a": []}`, `{"_id": 3, "a": 0}`,
		}, []int32{2, 1, 3}},
		{"dotted path through array", `{"a.b": 1}`, []string{
			`{"_id": 1, "a": [{"b": 4}, {"b": 2}]}`, `{"_id": 2, "a": {"b": 3}}`, `{"_id": 3, "a": [{"b": 5}]}`,
		}, []int32{1, 2, 3}},
		{"compound", `{"a": 1, "b": -1}`, []string{
			`{"_id": 1, "a": 1, "b": 1}`, `{"_id": 2, "a": 0, "b": 1}`, `{"_id": 3, "a": 1, "b": 2}`,
		}, []int32{2, 3, 1}},
		{"strings", `{"s": 1}`, []string{
			`{"_id": 1, "s": "b"}`, `{"_id": 2, "s": "B"}`, `{"_id": 3, "s": "a"}`,
		}, []int32{2, 3, 1}},
		{"double spec value", `{"a": -1.0}`, []string{
			`{"_id": 1, "a": 1}`, `{"_id": 2, "a": 2}`,
		}, []int32{2, 1}},
		{"empty spec keeps order", `{}`, []string{
			`{"_id": 2}`, `{"_id": 1}`,
		}, []int32{2, 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := CompileSort(doc(t, c.spec))
			if err != nil {
				t.Fatal(err)
			}
			docs := docsOf(t, c.docs...)
			s.SortDocs(docs)
			got := ids(docs)
			for i := range c.want {
				if got[i] != c.want[i] {
					t.Fatalf("got order %v, want %v", got, c.want)
				}
			}
			// Compare agrees with SortDocs.
			for i := 1; i < len(docs); i++ {
				if s.Compare(docs[i-1], docs[i]) > 0 {
					t.Errorf("Compare says %v > %v after sorting", got[i-1], got[i])
				}
			}
		})
	}
}

func TestCompileSortErrors(t *testing.T) {
	for _, spec := range []string{`{"a": 2}`, `{"a": 0}`, `{"a": "asc"}`, `{"a": true}`, `{"a": {"b": 1}}`} {
		_, err := CompileSort(doc(t, spec))
		var ce *cmderr.Error
		if !errors.As(err, &ce) || ce.Code != cmderr.BadValue ||
			ce.Message != "$sort key ordering must be 1 (for ascending) or -1 (for descending)" {
			t.Errorf("%s: got %v", spec, err)
		}
	}
	for spec, code := range map[string]int32{`{"score": {"$meta": "randVal"}}`: cmderr.NotImplemented, `{"score": {"$meta": "nope"}}`: 17308} {
		_, err := CompileSort(doc(t, spec))
		var ce *cmderr.Error
		if !errors.As(err, &ce) || ce.Code != code {
			t.Errorf("%s: got %v, want code %d", spec, err, code)
		}
	}
}

func TestUpsertSeed(t *testing.T) {
	cases := []struct {
		filter, want string
	}{
		{`{"a": 1, "b": {"$gt": 5}}`, `{"a": 1}`},
		{`{"x": 1, "_id": 7}`, `{"_id": 7, "x": 1}`},
		{`{"a.b": 1, "a.c": 2}`, `{"a": {"b": 1, "c": 2}}`},
		{`{"a": {"$eq": 3}, "c": {"$in": [1, 2]}}`, `{"a": 3}`},
		{`{"$and": [{"a": 1}, {"$and": [{"b.c": 2}]}], "$or": [{"d": 4}]}`, `{"a": 1, "b": {"c": 2}, "d": 4}`},
		{`{"$or": [{"d": 4}, {"e": 5}]}`, `{}`},
		{`{"a": {"$regularExpression": {"pattern": "x", "options": ""}}}`, `{}`},
		{`{"a": {"b": 1}}`, `{"a": {"b": 1}}`},
		{`{"a": [1, 2], "n": null}`, `{"a": [1, 2], "n": null}`},
	}
	for _, c := range cases {
		got, err := UpsertSeed(doc(t, c.filter))
		if err != nil {
			t.Errorf("%s: %v", c.filter, err)
			continue
		}
		if !docEqual(got, doc(t, c.want)) {
			t.Errorf("%s: got %v, want %s", c.filter, got, c.want)
		}
	}
	for _, f := range []string{`{"a": 1, "$and": [{"a": 2}]}`, `{"a": 1, "a.b": 2}`, `{"a.b": 1, "$and": [{"a": {"$eq": 2}}]}`} {
		_, err := UpsertSeed(doc(t, f))
		var ce *cmderr.Error
		if !errors.As(err, &ce) || ce.Code != cmderr.NotSingleValueField {
			t.Errorf("%s: want NotSingleValueField, got %v", f, err)
		}
	}
}

func TestUpsertSeedDoesNotAlias(t *testing.T) {
	filter := bson.D{{Key: "a", Value: bson.D{{Key: "b", Value: 1}}}}
	seed, err := UpsertSeed(filter)
	if err != nil {
		t.Fatal(err)
	}
	seed[0].Value.(bson.D)[0].Value = 99
	if filter[0].Value.(bson.D)[0].Value != 1 {
		t.Fatal("seed shares memory with the filter")
	}
}

// docEqual compares documents by their BSON encoding.
func docEqual(a, b bson.D) bool {
	x, err1 := bson.Marshal(a)
	y, err2 := bson.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}
