package agg

import (
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/expr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// The n-accumulators of $group: $firstN, $lastN, $maxN, $minN, $top,
// $bottom, $topN and $bottomN. Their argument is an object, so compileNAcc
// turns it into one expression evaluated per document —
// {v: <input or output>, k0: <sort key 0>, …} — and an accumulator that
// keeps the n values it needs.

type sortKey struct {
	path string
	desc bool
}

var nAccumulators = map[string]bool{
	"$firstN": true, "$lastN": true, "$maxN": true, "$minN": true,
	"$top": true, "$bottom": true, "$topN": true, "$bottomN": true,
}

// compileNAcc compiles one n-accumulator: the per-document expression and
// the accumulator factory.
func compileNAcc(op string, argSpec any) (*expr.Expr, func() accumulator, error) {
	spec, ok := value.ToDoc(argSpec)
	if !ok {
		return nil, nil, cmderr.New(5787801, "specification must be an object; found %s", value.TypeName(argSpec))
	}
	single := op == "$top" || op == "$bottom"
	sorted := op == "$top" || op == "$bottom" || op == "$topN" || op == "$bottomN"
	valueField := "input"
	if sorted {
		valueField = "output"
	}
	var (
		input, nSpec any
		haveInput    bool
		keys         []sortKey
	)
	for _, e := range spec {
		switch e.Key {
		case valueField:
			input, haveInput = e.Value, true
		case "n":
			if single {
				return nil, nil, cmderr.New(5788002, "%s does not take an 'n' argument", op)
			}
			nSpec = e.Value
		case "sortBy":
			if !sorted {
				return nil, nil, cmderr.New(5787901, "Unknown argument for 'n' operator: sortBy")
			}
			d, ok := value.ToDoc(e.Value)
			if !ok || len(d) == 0 {
				return nil, nil, cmderr.New(5788604, "%s sortBy must be a non-empty object", op)
			}
			for _, k := range d {
				dir, ok := value.ToInt64(k.Value)
				if !ok || (dir != 1 && dir != -1) {
					return nil, nil, cmderr.New(15975, "$sort key ordering must be 1 (for ascending) or -1 (for descending)")
				}
				keys = append(keys, sortKey{path: k.Key, desc: dir == -1})
			}
		default:
			return nil, nil, cmderr.New(5787901, "Unknown argument for 'n' operator: %s", e.Key)
		}
	}
	if !haveInput {
		return nil, nil, cmderr.New(5787907, "%s requires an '%s' field", op, valueField)
	}
	if sorted && keys == nil {
		return nil, nil, cmderr.New(5788005, "%s requires a 'sortBy' field", op)
	}
	n := int64(1)
	if !single {
		if nSpec == nil {
			return nil, nil, cmderr.New(5787906, "%s requires an 'n' field", op)
		}
		if _, isExpr := value.ToDoc(nSpec); isExpr {
			return nil, nil, cmderr.Unsupported(op + " with an 'n' computed from the group key")
		}
		v, ok := value.ToInt64(nSpec)
		if !ok || v <= 0 {
			return nil, nil, cmderr.New(5787908, "'n' must be greater than 0, found %v", nSpec)
		}
		n = v
	}
	docSpec := bson.D{{Key: "v", Value: input}}
	for i, k := range keys {
		docSpec = append(docSpec, bson.E{Key: "k" + string(rune('0'+i)), Value: "$" + k.path})
	}
	x, err := expr.Compile(docSpec)
	if err != nil {
		return nil, nil, err
	}
	return x, func() accumulator { return &nAcc{op: op, n: int(n), single: single, keys: keys} }, nil
}

type nEntry struct {
	v    any
	keys []any
}

type nAcc struct {
	coll   value.Collator // the collation of $minN/$maxN/$top/$bottom orderings
	op     string
	n      int
	single bool
	keys   []sortKey
	items  []nEntry
}

func (a *nAcc) setCollator(c value.Collator) { a.coll = c }

func (a *nAcc) add(v any) error {
	d, _ := value.ToDoc(v)
	e := nEntry{v: expr.Missing}
	for _, el := range d {
		if el.Key == "v" {
			e.v = el.Value
		} else {
			e.keys = append(e.keys, el.Value)
		}
	}
	for len(e.keys) < len(a.keys) {
		e.keys = append(e.keys, nil) // a missing sort field sorts as null
	}
	switch a.op {
	case "$firstN":
		if len(a.items) < a.n {
			a.items = append(a.items, e)
		}
		return nil
	case "$lastN":
		a.items = append(a.items, e)
		if len(a.items) > a.n {
			a.items = a.items[1:]
		}
		return nil
	case "$maxN", "$minN":
		if expr.IsNullish(e.v) {
			return nil // nulls and missing values are not counted
		}
	}
	a.items = append(a.items, e)
	// Keep the list bounded: sort and trim once it doubles.
	if len(a.items) >= 2*a.n+16 {
		a.sortItems()
		if a.op == "$bottom" || a.op == "$bottomN" {
			a.items = slices.Clone(a.items[len(a.items)-a.n:])
		} else {
			a.items = a.items[:a.n]
		}
	}
	return nil
}

func (a *nAcc) sortItems() {
	slices.SortStableFunc(a.items, func(x, y nEntry) int {
		switch a.op {
		case "$maxN":
			return -expr.CompareValuesWith(x.v, y.v, a.coll)
		case "$minN":
			return expr.CompareValuesWith(x.v, y.v, a.coll)
		}
		for i, k := range a.keys {
			c := expr.CompareValuesWith(x.keys[i], y.keys[i], a.coll)
			if k.desc {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return 0
	})
}

func (a *nAcc) result() any {
	switch a.op {
	case "$maxN", "$minN", "$top", "$topN":
		a.sortItems()
		if len(a.items) > a.n {
			a.items = a.items[:a.n]
		}
	case "$bottom", "$bottomN":
		a.sortItems()
		if len(a.items) > a.n {
			a.items = a.items[len(a.items)-a.n:]
		}
	}
	out := bson.A{}
	for _, e := range a.items {
		v := e.v
		if expr.IsMissing(v) {
			v = nil
		}
		out = append(out, v)
	}
	if a.single {
		if len(out) == 0 {
			return nil
		}
		return out[0]
	}
	return out
}
