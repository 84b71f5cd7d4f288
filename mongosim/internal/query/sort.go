package query

import (
	"sort"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/expr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// Sort is a compiled sort specification such as {a: 1, "b.c": -1}.
type Sort struct {
	keys []sortField
}

type sortField struct {
	path pathSpec
	desc bool
	coll value.Collator
	meta bool // {$meta: "textScore"}: by the document's textScore, highest first
}

// CompileSort compiles a sort specification. Each value must be a number
// equal to 1 or -1, or {$meta: "textScore"} (highest score first). An
// empty spec is valid and keeps the input order.
func CompileSort(spec bson.D) (*Sort, error) { return CompileSortWith(spec, nil) }

// CompileSortWith is CompileSort ordering strings by coll (nil: simple).
func CompileSortWith(spec bson.D, coll value.Collator) (*Sort, error) {
	s := &Sort{}
	for _, e := range spec {
		if d, ok := e.Value.(bson.D); ok && len(d) > 0 && d[0].Key == "$meta" {
			if err := expr.CheckMeta(d[0].Value); err != nil {
				return nil, err
			}
			s.keys = append(s.keys, sortField{meta: true, desc: true})
			continue
		}
		f, ok := value.ToFloat(e.Value)
		if !ok || (f != 1 && f != -1) {
			return nil, cmderr.New(cmderr.BadValue, "$sort key ordering must be 1 (for ascending) or -1 (for descending)")
		}
		if e.Key == "" {
			return nil, cmderr.New(cmderr.BadValue, "FieldPath cannot be constructed with empty string")
		}
		s.keys = append(s.keys, sortField{path: newPath(e.Key, compileCtx{}), desc: f == -1, coll: coll})
	}
	return s, nil
}

// NeedsTextScore reports whether the sort reads the textScore.
func (s *Sort) NeedsTextScore() bool {
	if s == nil {
		return false
	}
	for _, k := range s.keys {
		if k.meta {
			return true
		}
	}
	return false
}

// Len is the number of sort keys.
func (s *Sort) Len() int { return len(s.keys) }

// Compare orders a and b by the sort specification: negative when a sorts
// first.
func (s *Sort) Compare(a, b bson.D) int {
	for _, k := range s.keys {
		x, y := k.key(a), k.key(b)
		c := compareSortValues(x, y, k.coll)
		if k.desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

// SortDocs sorts docs in place, stably. Keys are extracted once per document.
func (s *Sort) SortDocs(docs []bson.D) {
	if len(s.keys) == 0 || len(docs) < 2 {
		return
	}
	type item struct {
		doc  bson.D
		keys []any
	}
	items := make([]item, len(docs))
	flat := make([]any, len(docs)*len(s.keys))
	for i, d := range docs {
		ks := flat[i*len(s.keys) : (i+1)*len(s.keys)]
		for j, k := range s.keys {
			ks[j] = k.key(d)
		}
		items[i] = item{doc: d, keys: ks}
	}
	sort.SliceStable(items, func(i, j int) bool {
		for n, k := range s.keys {
			c := compareSortValues(items[i].keys[n], items[j].keys[n], k.coll)
			if k.desc {
				c = -c
			}
			if c != 0 {
				return c < 0
			}
		}
		return false
	})
	for i := range items {
		docs[i] = items[i].doc
	}
}

// emptyArrayKey is the sort key of an empty array, which MongoDB orders
// before null (but after MinKey).
type emptyArrayKey struct{}

func compareSortValues(a, b any, coll value.Collator) int {
	_, ea := a.(emptyArrayKey)
	_, eb := b.(emptyArrayKey)
	return value.CompareLowWith(a, b, ea, eb, coll)
}

// key is the value doc sorts by for this field: among all values the path
// reaches (array elements included), the smallest ascending or the largest
// descending; missing is null.
func (k sortField) key(doc bson.D) any {
	if k.meta {
		score, _ := expr.TextScore(doc)
		return score
	}
	acc := sortAcc{desc: k.desc, coll: k.coll}
	k.collect(doc, 0, &acc)
	if !acc.have {
		return nil
	}
	return acc.best
}

type sortAcc struct {
	coll value.Collator
	desc bool
	have bool
	best any
}

func (a *sortAcc) add(v any) {
	if !a.have {
		a.best, a.have = v, true
		return
	}
	c := compareSortValues(v, a.best, a.coll)
	if (a.desc && c > 0) || (!a.desc && c < 0) {
		a.best = v
	}
}

func (k sortField) collect(v any, i int, acc *sortAcc) {
	parts := k.path.parts
	if i == len(parts) {
		if arr, ok := v.(bson.A); ok {
			if len(arr) == 0 {
				acc.add(emptyArrayKey{})
			}
			for _, e := range arr {
				acc.add(e)
			}
			return
		}
		acc.add(v)
		return
	}
	switch x := v.(type) {
	case bson.D:
		for _, e := range x {
			if e.Key == parts[i] {
				k.collect(e.Value, i+1, acc)
				return
			}
		}
	case bson.M:
		if child, ok := x[parts[i]]; ok {
			k.collect(child, i+1, acc)
			return
		}
	case bson.A:
		reached := false
		if n := k.path.index[i]; n >= 0 && n < len(x) {
			k.collect(x[n], i+1, acc)
			reached = true
		}
		for _, e := range x {
			switch e.(type) {
			case bson.D, bson.M:
				k.collect(e, i, acc)
				reached = true
			}
		}
		if reached {
			return
		}
	}
	acc.add(nil)
}
