package expr

import (
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// maxRangeElements bounds $range the way the server's 64 MB memory limit
// for it does, so a client cannot make mongosim allocate without bound.
const maxRangeElements = 4 << 20

var arrayOps = map[string]opCompiler{
	"$size":            nary(1, 1, opSize),
	"$arrayElemAt":     nary(2, 2, opArrayElemAt),
	"$first":           nary(1, 1, opFirstLast),
	"$last":            nary(1, 1, opFirstLast),
	"$concatArrays":    nary(0, -1, opConcatArrays),
	"$in":              naryColl(2, 2, opIn),
	"$isArray":         nary(1, 1, opIsArray),
	"$range":           nary(2, 3, opRange),
	"$reverseArray":    nary(1, 1, opReverseArray),
	"$slice":           nary(2, 3, opSlice),
	"$indexOfArray":    naryColl(2, 4, opIndexOfArray),
	"$filter":          compileFilter,
	"$map":             compileMap,
	"$reduce":          compileReduce,
	"$setUnion":        naryColl(0, -1, opSetUnion),
	"$setIntersection": naryColl(0, -1, opSetIntersection),
	"$setDifference":   naryColl(2, 2, opSetDifference),
	"$setEquals":       naryColl(2, -1, opSetEquals),
	"$setIsSubset":     naryColl(2, 2, opSetIsSubset),
	"$anyElementTrue":  nary(1, 1, opElementsTrue),
	"$allElementsTrue": nary(1, 1, opElementsTrue),
	"$sum":             nary(0, -1, opAccumulate),
	"$avg":             nary(0, -1, opAccumulate),
	"$max":             naryColl(0, -1, opMinMax),
	"$min":             naryColl(0, -1, opMinMax),
}

func opSize(name string, vals []any) (any, error) {
	a, ok := value.ToArray(vals[0])
	if !ok {
		return nil, cmderr.New(17124, "The argument to $size must be an array. Type of argument: %s", typeName(vals[0]))
	}
	return int32(len(a)), nil
}

func opArrayElemAt(name string, vals []any) (any, error) {
	if IsNullish(vals[0]) || IsNullish(vals[1]) {
		return nil, nil
	}
	a, ok := value.ToArray(vals[0])
	if !ok {
		return nil, cmderr.New(28689, "$arrayElemAt's first argument must be an array, but is %s", typeName(vals[0]))
	}
	if !value.IsNumber(vals[1]) {
		return nil, cmderr.New(28690, "$arrayElemAt's second argument must be a numeric value, but is %s", typeName(vals[1]))
	}
	i, ok := value.ToInt64(vals[1])
	if !ok || i < math.MinInt32 || i > math.MaxInt32 {
		return nil, cmderr.New(28691, "$arrayElemAt's second argument must be representable as a 32-bit integer: %s", render(vals[1]))
	}
	return elemAt(a, i), nil
}

func elemAt(a bson.A, i int64) any {
	if i < 0 {
		i += int64(len(a))
	}
	if i < 0 || i >= int64(len(a)) {
		return Missing
	}
	return a[i]
}

func opFirstLast(name string, vals []any) (any, error) {
	v := vals[0]
	if IsNullish(v) {
		return nil, nil
	}
	a, ok := value.ToArray(v)
	if !ok {
		return nil, cmderr.New(28689, "%s's argument must be an array, but is %s", name, typeName(v))
	}
	if name == "$first" {
		return elemAt(a, 0), nil
	}
	return elemAt(a, -1), nil
}

func opConcatArrays(name string, vals []any) (any, error) {
	out := bson.A{}
	for _, v := range vals {
		if IsNullish(v) {
			return nil, nil
		}
		a, ok := value.ToArray(v)
		if !ok {
			return nil, cmderr.New(28664, "$concatArrays only supports arrays, not %s", typeName(v))
		}
		out = append(out, a...)
	}
	return out, nil
}

func opIn(coll value.Collator, name string, vals []any) (any, error) {
	a, ok := value.ToArray(vals[1])
	if !ok {
		return nil, cmderr.New(40081, "$in requires an array as a second argument, found: %s", typeName(vals[1]))
	}
	for _, el := range a {
		if CompareValuesWith(vals[0], el, coll) == 0 {
			return true, nil
		}
	}
	return false, nil
}

func opIsArray(name string, vals []any) (any, error) {
	_, ok := value.ToArray(vals[0])
	return ok, nil
}

func int32Arg(v any) (int64, bool) {
	if !value.IsNumber(v) {
		return 0, false
	}
	i, ok := value.ToInt64(v)
	if !ok || i < math.MinInt32 || i > math.MaxInt32 {
		return 0, false
	}
	return i, true
}

func opRange(name string, vals []any) (any, error) {
	start, ok := int32Arg(vals[0])
	if !ok {
		return nil, cmderr.New(34443, "$range requires a starting value that can be represented as a 32-bit integer, found value: %s", render(vals[0]))
	}
	end, ok := int32Arg(vals[1])
	if !ok {
		return nil, cmderr.New(34445, "$range requires an ending value that can be represented as a 32-bit integer, found value: %s", render(vals[1]))
	}
	step := int64(1)
	if len(vals) > 2 {
		if step, ok = int32Arg(vals[2]); !ok {
			return nil, cmderr.New(34447, "$range requires a step value that can be represented as a 32-bit integer, found value: %s", render(vals[2]))
		}
		if step == 0 {
			return nil, cmderr.New(34449, "$range requires a non-zero step value")
		}
	}
	n := int64(0)
	if step > 0 && end > start {
		n = (end - start + step - 1) / step
	} else if step < 0 && end < start {
		n = (start - end + (-step) - 1) / (-step)
	}
	if n > maxRangeElements {
		return nil, namedErr(146, "ExceededMemoryLimit", "$range would use too much memory (%d elements) and cannot spill to disk", n)
	}
	out := make(bson.A, 0, n)
	for i := int64(0); i < n; i++ {
		out = append(out, int32(start+i*step))
	}
	return out, nil
}

func opReverseArray(name string, vals []any) (any, error) {
	if IsNullish(vals[0]) {
		return nil, nil
	}
	a, ok := value.ToArray(vals[0])
	if !ok {
		return nil, cmderr.New(34435, "The argument to $reverseArray must be an array, but was of type: %s", typeName(vals[0]))
	}
	out := make(bson.A, len(a))
	for i, el := range a {
		out[len(a)-1-i] = el
	}
	return out, nil
}

func opSlice(name string, vals []any) (any, error) {
	for _, v := range vals {
		if IsNullish(v) {
			return nil, nil
		}
	}
	a, ok := value.ToArray(vals[0])
	if !ok {
		return nil, cmderr.New(28724, "First argument to $slice must be an array, but is of type: %s", typeName(vals[0]))
	}
	first, ok := int32Arg(vals[1])
	if !ok {
		return nil, cmderr.New(28725, "Second argument to $slice must be a numeric value, but is of type: %s", typeName(vals[1]))
	}
	size := int64(len(a))
	var start, n int64
	if len(vals) == 2 {
		if first >= 0 {
			start, n = 0, first
		} else {
			start, n = size+first, -first
			if start < 0 {
				start = 0
			}
		}
	} else {
		cnt, ok := int32Arg(vals[2])
		if !ok {
			return nil, cmderr.New(28727, "Third argument to $slice must be numeric, but is of type: %s", typeName(vals[2]))
		}
		if cnt <= 0 {
			return nil, cmderr.New(28729, "Third argument to $slice must be positive: %s", render(vals[2]))
		}
		start, n = first, cnt
		if start < 0 {
			start += size
			if start < 0 {
				start = 0
			}
		}
	}
	if start > size {
		start = size
	}
	end := start + n
	if end > size {
		end = size
	}
	return append(bson.A{}, a[start:end]...), nil
}

func opIndexOfArray(coll value.Collator, name string, vals []any) (any, error) {
	if IsNullish(vals[0]) {
		return nil, nil
	}
	a, ok := value.ToArray(vals[0])
	if !ok {
		return nil, cmderr.New(40090, "$indexOfArray requires an array as a first argument, found: %s", typeName(vals[0]))
	}
	start, end := int64(0), int64(len(a))
	if len(vals) > 2 {
		s, ok := int32Arg(vals[2])
		if !ok || s < 0 {
			return nil, cmderr.New(40097, "$indexOfArray requires an integral starting index, found a value of type: %s, with value: %s", typeName(vals[2]), render(vals[2]))
		}
		start = s
	}
	if len(vals) > 3 {
		e, ok := int32Arg(vals[3])
		if !ok || e < 0 {
			return nil, cmderr.New(40097, "$indexOfArray requires an integral ending index, found a value of type: %s, with value: %s", typeName(vals[3]), render(vals[3]))
		}
		end = min(e, end)
	}
	for i := start; i < end; i++ {
		if CompareValuesWith(a[i], vals[1], coll) == 0 {
			return int32(i), nil
		}
	}
	return int32(-1), nil
}

// bindAs reads the variable name a $map/$filter binds ("this" by default).
func bindAs(m map[string]any) (string, error) {
	as := "this"
	if v, ok := m["as"]; ok {
		s, ok := v.(string)
		if !ok {
			return "", cmderr.New(cmderr.FailedToParse, "'as' must be a string, found %s", typeName(v))
		}
		if err := checkVarName(s, false); err != nil {
			return "", err
		}
		as = s
	}
	return as, nil
}

func compileFilter(name string, args any) (evalFn, error) {
	m, err := namedArgs(name, args, []string{"input", "cond"}, "as", "limit")
	if err != nil {
		return nil, err
	}
	as, err := bindAs(m)
	if err != nil {
		return nil, err
	}
	fns, err := namedFns(m, "input", "cond", "limit")
	if err != nil {
		return nil, err
	}
	input, cond, limit := fns[0], fns[1], fns[2]
	return func(s *scope) (any, error) {
		a, ok, err := evalArray(s, input, func(v any) error {
			return cmderr.New(28651, "input to $filter must be an array not %s", typeName(v))
		})
		if !ok {
			return nil, err
		}
		max := int64(-1)
		if limit != nil {
			lv, err := limit(s)
			if err != nil {
				return nil, err
			}
			if !IsNullish(lv) {
				l, ok := int32Arg(lv)
				if !ok || l < 1 {
					return nil, cmderr.New(327391, "$filter: limit must be a positive integral value: %s", render(lv))
				}
				max = l
			}
		}
		out := bson.A{}
		for _, el := range a {
			if max >= 0 && int64(len(out)) >= max {
				break
			}
			c, err := cond(s.with(as, el))
			if err != nil {
				return nil, err
			}
			if Truthy(c) {
				out = append(out, el)
			}
		}
		return out, nil
	}, nil
}

func compileMap(name string, args any) (evalFn, error) {
	m, err := namedArgs(name, args, []string{"input", "in"}, "as")
	if err != nil {
		return nil, err
	}
	as, err := bindAs(m)
	if err != nil {
		return nil, err
	}
	fns, err := namedFns(m, "input", "in")
	if err != nil {
		return nil, err
	}
	input, in := fns[0], fns[1]
	return func(s *scope) (any, error) {
		a, ok, err := evalArray(s, input, func(v any) error {
			return cmderr.New(16883, "input to $map must be an array not %s", typeName(v))
		})
		if !ok {
			return nil, err
		}
		out := make(bson.A, len(a))
		for i, el := range a {
			r, err := in(s.with(as, el))
			if err != nil {
				return nil, err
			}
			if IsMissing(r) {
				r = nil
			}
			out[i] = r
		}
		return out, nil
	}, nil
}

func compileReduce(name string, args any) (evalFn, error) {
	m, err := namedArgs(name, args, []string{"input", "initialValue", "in"})
	if err != nil {
		return nil, err
	}
	fns, err := namedFns(m, "input", "initialValue", "in")
	if err != nil {
		return nil, err
	}
	input, initial, in := fns[0], fns[1], fns[2]
	return func(s *scope) (any, error) {
		a, ok, err := evalArray(s, input, func(v any) error {
			return cmderr.New(40080, "$reduce requires that 'input' be an array, found: %s", render(v))
		})
		if !ok {
			return nil, err
		}
		acc, err := initial(s)
		if err != nil {
			return nil, err
		}
		for _, el := range a {
			if acc, err = in(s.with("value", acc).with("this", el)); err != nil {
				return nil, err
			}
		}
		return acc, nil
	}, nil
}

// setOf returns the distinct elements of an array in first-seen order.
func setOf(a bson.A, coll value.Collator) bson.A {
	out := bson.A{}
	for _, el := range a {
		if !contains(out, el, coll) {
			out = append(out, el)
		}
	}
	return out
}

func contains(a bson.A, v any, coll value.Collator) bool {
	for _, el := range a {
		if CompareValuesWith(el, v, coll) == 0 {
			return true
		}
	}
	return false
}

func setArgs(name string, vals []any, nullOK bool) ([]bson.A, bool, error) {
	sets := make([]bson.A, len(vals))
	for i, v := range vals {
		if IsNullish(v) && nullOK {
			return nil, true, nil
		}
		a, ok := value.ToArray(v)
		if !ok {
			return nil, false, cmderr.New(17044, "All operands of %s must be arrays. One argument is of type: %s", name, typeName(v))
		}
		sets[i] = a
	}
	return sets, false, nil
}

func opSetUnion(coll value.Collator, name string, vals []any) (any, error) {
	sets, isNull, err := setArgs(name, vals, true)
	if err != nil || isNull {
		return nil, err
	}
	out := bson.A{}
	for _, s := range sets {
		for _, el := range s {
			if !contains(out, el, coll) {
				out = append(out, el)
			}
		}
	}
	return out, nil
}

func opSetIntersection(coll value.Collator, name string, vals []any) (any, error) {
	sets, isNull, err := setArgs(name, vals, true)
	if err != nil || isNull {
		return nil, err
	}
	if len(sets) == 0 {
		return bson.A{}, nil
	}
	out := bson.A{}
	for _, el := range setOf(sets[0], coll) {
		all := true
		for _, s := range sets[1:] {
			if !contains(s, el, coll) {
				all = false
				break
			}
		}
		if all {
			out = append(out, el)
		}
	}
	return out, nil
}

func opSetDifference(coll value.Collator, name string, vals []any) (any, error) {
	sets, isNull, err := setArgs(name, vals, true)
	if err != nil || isNull {
		return nil, err
	}
	out := bson.A{}
	for _, el := range setOf(sets[0], coll) {
		if !contains(sets[1], el, coll) {
			out = append(out, el)
		}
	}
	return out, nil
}

func opSetEquals(coll value.Collator, name string, vals []any) (any, error) {
	sets, _, err := setArgs(name, vals, false)
	if err != nil {
		return nil, err
	}
	for _, s := range sets[1:] {
		if !subset(sets[0], s, coll) || !subset(s, sets[0], coll) {
			return false, nil
		}
	}
	return true, nil
}

func subset(a, b bson.A, coll value.Collator) bool {
	for _, el := range a {
		if !contains(b, el, coll) {
			return false
		}
	}
	return true
}

func opSetIsSubset(coll value.Collator, name string, vals []any) (any, error) {
	sets, _, err := setArgs(name, vals, false)
	if err != nil {
		return nil, err
	}
	return subset(sets[0], sets[1], coll), nil
}

func opElementsTrue(name string, vals []any) (any, error) {
	a, ok := value.ToArray(vals[0])
	if !ok {
		return nil, cmderr.New(17041, "%s's argument must be an array, but is %s", name, typeName(vals[0]))
	}
	want := name == "$anyElementTrue"
	for _, el := range a {
		if Truthy(el) == want {
			return want, nil
		}
	}
	return !want, nil
}

// opMinMax is $max/$min, comparing strings under the collation.
func opMinMax(coll value.Collator, name string, vals []any) (any, error) {
	if coll == nil {
		return opAccumulate(name, vals)
	}
	if len(vals) == 1 {
		if a, ok := value.ToArray(vals[0]); ok {
			vals = a
		}
	}
	var best any = Missing
	for _, v := range vals {
		if IsNullish(v) {
			continue
		}
		if c := CompareValuesWith(v, best, coll); IsMissing(best) || (name == "$max" && c > 0) || (name == "$min" && c < 0) {
			best = v
		}
	}
	if IsMissing(best) {
		return nil, nil
	}
	return best, nil
}

// opAccumulate is $sum/$avg/$max/$min in expression context: one array
// argument is reduced over its elements, several arguments over the
// arguments.
func opAccumulate(name string, vals []any) (any, error) {
	if len(vals) == 1 {
		if a, ok := value.ToArray(vals[0]); ok {
			vals = a
		}
	}
	return Accumulate(name, vals), nil
}

// Accumulate reduces vals the way the $sum, $avg, $max and $min
// accumulators do; non-numeric values are ignored by $sum and $avg, null and
// Missing by $max and $min.
func Accumulate(name string, vals []any) any {
	switch name {
	case "$sum", "$avg":
		var sum any = int32(0)
		n := 0
		for _, v := range vals {
			if value.IsNumber(v) {
				sum = numAdd(sum, v)
				n++
			}
		}
		if name == "$sum" {
			return sum
		}
		if n == 0 {
			return nil
		}
		f, _ := value.ToFloat(sum)
		return f / float64(n)
	case "$max", "$min":
		var best any = Missing
		for _, v := range vals {
			if IsNullish(v) {
				continue
			}
			if IsMissing(best) {
				best = v
				continue
			}
			c := CompareValues(v, best)
			if (name == "$max" && c > 0) || (name == "$min" && c < 0) {
				best = v
			}
		}
		if IsMissing(best) {
			return nil
		}
		return best
	}
	return nil
}
