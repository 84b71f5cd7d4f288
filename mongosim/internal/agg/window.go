package agg

import (
	"sort"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/expr"
	"github.com/sturdy-go/sturdy/mongosim/internal/query"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// $setWindowFields: documents are ordered by the partition key and then by
// sortBy (mongod inserts the same $sort), split into partitions of equal
// keys (missing counts as null), and each output field gets one value per
// document computed by its window function over the partition.

type setWindowFieldsStage struct {
	partitionBy *expr.Expr
	sort        *query.Sort
	sortInfo    windowSort
	outputs     []windowOutput
}

// windowSort is what window functions need to know about sortBy.
type windowSort struct {
	present bool
	fields  int
	path    string     // the first sort field
	desc    bool       // the first field is descending
	expr    *expr.Expr // "$path", the first field's value as an expression
}

type windowOutput struct {
	parts []string
	fn    windowFn
}

// windowFn computes an output field for every document of a partition.
type windowFn interface {
	compute(p *partition) ([]any, error)
}

// partition is one partition's documents in window order.
type partition struct {
	rt       *runtime
	docs     []bson.D
	sort     windowSort
	sortVals []any
	typeRun  map[bool][2]int // the run of numbers (false) or dates (true) among sortVals
}

func compileSetWindowFields(arg any) (stage, error) {
	spec, ok := value.ToDoc(arg)
	if !ok {
		return nil, cmderr.New(cmderr.FailedToParse, "the $setWindowFields stage specification must be an object, found %s", value.TypeName(arg))
	}
	s := &setWindowFieldsStage{}
	var output bson.D
	haveOutput := false
	for _, e := range spec {
		switch e.Key {
		case "partitionBy":
			x, err := expr.Compile(e.Value)
			if err != nil {
				return nil, err
			}
			if c, isConst := x.Constant(); isConst {
				if _, isArr := value.ToArray(c); isArr {
					return nil, cmderr.New(cmderr.TypeMismatch, "An expression used to partition cannot evaluate to value of type array")
				}
			}
			s.partitionBy = x
		case "sortBy":
			d, ok := value.ToDoc(e.Value)
			if !ok {
				return nil, cmderr.New(cmderr.TypeMismatch, "BSON field '$setWindowFields.sortBy' is the wrong type '%s', expected type 'object'", value.TypeName(e.Value))
			}
			srt, err := query.CompileSort(d)
			if err != nil {
				return nil, err
			}
			s.sort = srt
			if len(d) > 0 {
				dir, _ := value.ToFloat(d[0].Value)
				s.sortInfo = windowSort{present: true, fields: len(d), path: d[0].Key, desc: dir < 0}
				x, err := expr.Compile("$" + d[0].Key)
				if err != nil {
					return nil, err
				}
				s.sortInfo.expr = x
			}
		case "output":
			d, ok := value.ToDoc(e.Value)
			if !ok {
				return nil, cmderr.New(cmderr.TypeMismatch, "BSON field '$setWindowFields.output' is the wrong type '%s', expected type 'object'", value.TypeName(e.Value))
			}
			output, haveOutput = d, true
		default:
			return nil, cmderr.New(40415, "BSON field '$setWindowFields.%s' is an unknown field.", e.Key)
		}
	}
	if !haveOutput {
		return nil, cmderr.New(40414, "BSON field '$setWindowFields.output' is missing but a required field")
	}
	var paths []string
	for _, e := range output {
		parts, err := checkFieldPath("$setWindowFields", e.Key)
		if err != nil {
			return nil, err
		}
		for _, p := range paths {
			if p == e.Key || strings.HasPrefix(p, e.Key+".") || strings.HasPrefix(e.Key, p+".") {
				return nil, cmderr.New(6307900, "$setWindowFields 'output' specification contains two conflicting paths")
			}
		}
		paths = append(paths, e.Key)
		fnSpec, ok := value.ToDoc(e.Value)
		if !ok {
			return nil, cmderr.New(cmderr.FailedToParse, "The field '%s' must be an object", e.Key)
		}
		fn, err := compileWindowFn(fnSpec, s.sortInfo)
		if err != nil {
			return nil, err
		}
		s.outputs = append(s.outputs, windowOutput{parts: parts, fn: fn})
	}
	return s, nil
}

func (s *setWindowFieldsStage) run(rt *runtime, in []bson.D) ([]bson.D, error) {
	type item struct {
		doc bson.D
		key any
	}
	items := make([]item, len(in))
	docs := append([]bson.D(nil), in...)
	if s.sort != nil {
		s.sort.SortDocs(docs)
	}
	for i, doc := range docs {
		if err := rt.checkEvery(i); err != nil {
			return nil, err
		}
		var key any
		if s.partitionBy != nil {
			k, err := s.partitionBy.Eval(doc, rt.vars)
			if err != nil {
				return nil, err
			}
			if _, isArr := value.ToArray(k); isArr {
				return nil, cmderr.New(cmderr.TypeMismatch, "Cannot 'partitionBy' an expression of type array")
			}
			if !expr.IsMissing(k) {
				key = k
			}
		}
		items[i] = item{doc: doc, key: key}
	}
	if s.partitionBy != nil {
		sort.SliceStable(items, func(i, j int) bool { return expr.CompareValues(items[i].key, items[j].key) < 0 })
	}
	out := make([]bson.D, 0, len(items))
	for start := 0; start < len(items); {
		end := start + 1
		for end < len(items) && expr.CompareValues(items[start].key, items[end].key) == 0 {
			end++
		}
		p := &partition{rt: rt, sort: s.sortInfo}
		for _, it := range items[start:end] {
			p.docs = append(p.docs, it.doc)
		}
		results := make([][]any, len(s.outputs))
		for j, o := range s.outputs {
			if err := rt.ctx.Err(); err != nil {
				return nil, err
			}
			vals, err := o.fn.compute(p)
			if err != nil {
				return nil, err
			}
			results[j] = vals
		}
		for i, doc := range p.docs {
			for j, o := range s.outputs {
				if v := results[j][i]; expr.IsMissing(v) {
					doc = removePath(doc, o.parts)
				} else {
					doc = setPath(doc, o.parts, v)
				}
			}
			out = append(out, doc)
		}
		start = end
	}
	return out, nil
}

// eval evaluates x against every document of the partition.
func (p *partition) eval(x *expr.Expr) ([]any, error) {
	out := make([]any, len(p.docs))
	for i, d := range p.docs {
		if err := p.rt.checkEvery(i); err != nil {
			return nil, err
		}
		v, err := x.Eval(d, p.rt.vars)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// sortValues are the first sortBy field's values, as an expression sees them.
func (p *partition) sortValues() ([]any, error) {
	if p.sortVals == nil {
		v, err := p.eval(p.sort.expr)
		if err != nil {
			return nil, err
		}
		p.sortVals = v
	}
	return p.sortVals, nil
}

// Window bounds.

const (
	boundUnbounded = iota
	boundCurrent
	boundValue
)

type windowBound struct {
	kind int
	n    int // documents
	v    any // range: a number (an integer with a unit)
}

type windowBounds struct {
	rangeBased bool
	unit       string
	lo, hi     windowBound
}

var wholePartition = windowBounds{lo: windowBound{kind: boundUnbounded}, hi: windowBound{kind: boundUnbounded}}

func (b windowBounds) unbounded() bool {
	return b.lo.kind == boundUnbounded && b.hi.kind == boundUnbounded
}

func parseWindowBounds(arg any, srt windowSort) (windowBounds, error) {
	spec, ok := value.ToDoc(arg)
	if !ok {
		return windowBounds{}, cmderr.New(cmderr.FailedToParse, "'window' field must be an object")
	}
	var docs, rng, unit any
	hasDocs, hasRange, hasUnit := false, false, false
	for _, e := range spec {
		switch e.Key {
		case "documents":
			docs, hasDocs = e.Value, true
		case "range":
			rng, hasRange = e.Value, true
		case "unit":
			unit, hasUnit = e.Value, true
		}
	}
	if hasDocs && hasRange {
		return windowBounds{}, cmderr.New(cmderr.FailedToParse, "Window bounds can specify either 'documents' or 'unit', not both.")
	}
	if !hasRange && hasUnit {
		return windowBounds{}, cmderr.New(cmderr.FailedToParse, "Window bounds can only specify 'unit' with range-based bounds.")
	}
	if !hasRange && !hasDocs {
		if len(spec) != 0 {
			return windowBounds{}, cmderr.New(cmderr.FailedToParse, "'window' field can only contain 'documents' as the only argument or 'range' with an optional 'unit' field")
		}
		return wholePartition, nil
	}
	var b windowBounds
	var err error
	if hasDocs {
		b, err = parseDocumentBounds(spec, docs)
	} else {
		b, err = parseRangeBounds(spec, rng, unit, hasUnit)
	}
	if err != nil {
		return windowBounds{}, err
	}
	if x, ok := boundOrderValue(b.lo); ok {
		if y, ok := boundOrderValue(b.hi); ok && expr.CompareValues(x, y) > 0 {
			return windowBounds{}, cmderr.New(5339900, "Lower bound must not exceed upper bound: [%s, %s]", expr.Render(x), expr.Render(y))
		}
	}
	if !b.rangeBased {
		if !b.unbounded() && !srt.present {
			return windowBounds{}, cmderr.New(5339901, "Document-based bounds require a sortBy")
		}
		return b, nil
	}
	if !srt.present || srt.fields != 1 {
		return windowBounds{}, cmderr.New(5339902, "Range-based bounds require sortBy a single field")
	}
	if srt.desc {
		return windowBounds{}, cmderr.New(8947401, "Range-based bounds require an ascending sortBy")
	}
	return b, nil
}

// parseDocumentBounds parses window: {documents: [lower, upper]}, bounds
// counted in documents from the current one.
func parseDocumentBounds(spec bson.D, docs any) (windowBounds, error) {
	var b windowBounds
	if len(spec) != 1 {
		return windowBounds{}, cmderr.New(cmderr.FailedToParse, "'window' field that specifies documents cannot have other fields")
	}
	l, u, err := windowBoundPair(docs)
	if err != nil {
		return windowBounds{}, err
	}
	isInt := func(v any) error {
		n, ok := value.ToInt64(v)
		if !value.IsNumber(v) || !ok || n != int64(int32(n)) {
			return cmderr.New(cmderr.FailedToParse, "Numeric document-based bounds must be an integer")
		}
		return nil
	}
	if b.lo, err = parseWindowBound(l, isInt); err != nil {
		return windowBounds{}, err
	}
	if b.hi, err = parseWindowBound(u, isInt); err != nil {
		return windowBounds{}, err
	}
	for _, x := range []*windowBound{&b.lo, &b.hi} {
		if x.kind == boundValue {
			n, _ := value.ToInt64(x.v)
			x.n = int(n)
		}
	}
	return b, nil
}

// parseRangeBounds parses window: {range: [lower, upper], unit}, bounds
// as offsets from the current document's sortBy value (in unit, for dates).
func parseRangeBounds(spec bson.D, rng, unit any, hasUnit bool) (windowBounds, error) {
	b := windowBounds{rangeBased: true}
	l, u, err := windowBoundPair(rng)
	if err != nil {
		return windowBounds{}, err
	}
	check := func(v any) error {
		if !value.IsNumber(v) {
			return cmderr.New(cmderr.FailedToParse, "Range-based bounds expression must be a number")
		}
		return nil
	}
	if hasUnit {
		if len(spec) != 2 {
			return windowBounds{}, cmderr.New(cmderr.FailedToParse, "'window' field that specifies unit cannot have other fields besides 'range'")
		}
		us, ok := unit.(string)
		if !ok {
			return windowBounds{}, cmderr.New(cmderr.FailedToParse, "'unit' must be a string")
		}
		if !expr.IsTimeUnit(us) {
			return windowBounds{}, cmderr.New(cmderr.FailedToParse, "unknown time unit value: %s", us)
		}
		b.unit = us
		check = func(v any) error {
			if _, ok := value.ToInt64(v); !value.IsNumber(v) || !ok {
				return cmderr.New(cmderr.FailedToParse, "With 'unit', range-based bounds must be an integer")
			}
			return nil
		}
	} else if len(spec) != 1 {
		return windowBounds{}, cmderr.New(cmderr.FailedToParse, "'window' field that specifies range cannot have other fields besides 'unit'")
	}
	if b.lo, err = parseWindowBound(l, check); err != nil {
		return windowBounds{}, err
	}
	if b.hi, err = parseWindowBound(u, check); err != nil {
		return windowBounds{}, err
	}
	return b, nil
}

// windowBoundPair splits [lower, upper].
func windowBoundPair(v any) (any, any, error) {
	a, ok := value.ToArray(v)
	if !ok || len(a) != 2 {
		return nil, nil, cmderr.New(cmderr.FailedToParse, "Window bounds must be a 2-element array: %s", expr.Render(v))
	}
	return a[0], a[1], nil
}

// parseWindowBound parses one bound: "unbounded", "current", or a constant
// expression that check accepts.
func parseWindowBound(v any, check func(any) error) (windowBound, error) {
	if s, ok := v.(string); ok {
		switch s {
		case "unbounded":
			return windowBound{kind: boundUnbounded}, nil
		case "current":
			return windowBound{kind: boundCurrent}, nil
		}
		return windowBound{}, cmderr.New(cmderr.FailedToParse, "Window bounds must be 'unbounded', 'current', or a number.")
	}
	x, err := expr.Compile(v)
	if err != nil {
		return windowBound{}, err
	}
	c, isConst := x.Constant()
	if !isConst {
		return windowBound{}, cmderr.New(cmderr.FailedToParse, "Window bounds expression must be a constant.")
	}
	if err := check(c); err != nil {
		return windowBound{}, err
	}
	return windowBound{kind: boundValue, v: c}, nil
}

// boundOrderValue is a bound's value for the lower-not-above-upper check:
// current is 0, unbounded has none.
func boundOrderValue(b windowBound) (any, bool) {
	switch b.kind {
	case boundCurrent:
		return int32(0), true
	case boundValue:
		return b.v, true
	}
	return nil, false
}

// window returns the first and last index of document i's window, or
// ok false when the window is empty.
func (p *partition) window(b windowBounds, i int) (lo, hi int, ok bool, err error) {
	n := len(p.docs)
	if !b.rangeBased {
		lo, hi, ok = documentWindow(b, i, n)
		return lo, hi, ok, nil
	}
	vals, err := p.sortValues()
	if err != nil {
		return 0, 0, false, err
	}
	base := vals[i]
	if err := checkRangeBase(base, b.unit); err != nil {
		return 0, 0, false, err
	}
	first, last := p.rangeTypeRun(vals, i, b.unit)
	switch b.lo.kind {
	case boundCurrent:
		lo = i
	case boundUnbounded:
		lo = first
	default:
		t, err := rangeBoundValue(base, b.unit, b.lo.v)
		if err != nil {
			return 0, 0, false, err
		}
		lo = sort.Search(n, func(j int) bool { return expr.CompareValues(vals[j], t) >= 0 })
		if lo == n || !rangeTyped(vals[lo], b.unit) {
			return 0, 0, false, nil
		}
	}
	switch b.hi.kind {
	case boundCurrent:
		hi = i
	case boundUnbounded:
		hi = last
	default:
		t, err := rangeBoundValue(base, b.unit, b.hi.v)
		if err != nil {
			return 0, 0, false, err
		}
		hi = sort.Search(n, func(j int) bool { return expr.CompareValues(vals[j], t) > 0 }) - 1
	}
	if hi < lo {
		return 0, 0, false, nil
	}
	return lo, hi, true, nil
}

// documentWindow is a documents window of document i among n, clipped to
// the partition.
func documentWindow(b windowBounds, i, n int) (lo, hi int, ok bool) {
	lo, hi = 0, n-1
	if b.lo.kind != boundUnbounded {
		lo = i + b.lo.n
	}
	if b.hi.kind != boundUnbounded {
		hi = i + b.hi.n
	}
	if lo > n-1 || hi < 0 {
		return 0, 0, false
	}
	return max(lo, 0), min(hi, n-1), true
}

// checkRangeBase checks the current document's sortBy value suits a range
// window: a date with a unit, a number without.
func checkRangeBase(base any, unit string) error {
	if unit != "" {
		if _, isDate := base.(bson.DateTime); !isDate {
			return cmderr.New(5429513, "Invalid range: Expected the sortBy field to be a Date, but it was %s", typeNameOf(base))
		}
		return nil
	}
	if _, isDate := base.(bson.DateTime); isDate {
		return cmderr.New(5429413, "Invalid range: For windows that involve date or time ranges, a unit must be provided.")
	}
	if !value.IsNumber(base) {
		return cmderr.New(5429414, "Invalid range: Expected the sortBy field to be a number, but it was %s", typeNameOf(base))
	}
	return nil
}

// rangeTyped reports whether v has the type a range window ranges over.
func rangeTyped(v any, unit string) bool {
	if unit != "" {
		_, isDate := v.(bson.DateTime)
		return isDate
	}
	return value.IsNumber(v)
}

// rangeBoundValue is base moved by a bound's delta (in unit for dates).
func rangeBoundValue(base any, unit string, delta any) (any, error) {
	if unit != "" {
		k, _ := value.ToInt64(delta)
		t, ok := expr.AddTimeUnits(base.(bson.DateTime).Time().UTC(), unit, k)
		if !ok {
			return nil, cmderr.New(cmderr.BadValue, "date overflow in $setWindowFields range")
		}
		return bson.NewDateTimeFromTime(t), nil
	}
	if s, err := value.Add(base, delta); err == nil {
		return s, nil
	}
	x, _ := value.ToFloat(base)
	y, _ := value.ToFloat(delta)
	return x + y, nil
}

// rangeTypeRun returns the first and last index of the run of values of
// the range's type that holds document i. The documents are in sortBy
// order, so those values form one run and thresholds inside it are found
// by binary search; the run is cached per type on the partition.
func (p *partition) rangeTypeRun(vals []any, i int, unit string) (first, last int) {
	dates := unit != ""
	run, ok := p.typeRun[dates]
	if !ok {
		run = [2]int{i, i}
		for run[0] > 0 && rangeTyped(vals[run[0]-1], unit) {
			run[0]--
		}
		for run[1] < len(vals)-1 && rangeTyped(vals[run[1]+1], unit) {
			run[1]++
		}
		if p.typeRun == nil {
			p.typeRun = map[bool][2]int{}
		}
		p.typeRun[dates] = run
	}
	return run[0], run[1]
}
