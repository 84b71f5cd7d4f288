package agg

import (
	"math"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/expr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// accumulator folds one group's values for one output field.
type accumulator interface {
	add(v any) error
	result() any
}

type accSpec struct {
	field string
	op    string
	arg   *expr.Expr
	// make, when set, creates the accumulator (the n-accumulators, whose
	// n and sort order come from the specification).
	make func() accumulator
	// js is set for $accumulator, whose state starts per group.
	js *jsAccSpec
}

func (a accSpec) newAcc() accumulator {
	if a.make != nil {
		return a.make()
	}
	return accumulators[a.op]()
}

var accumulators = map[string]func() accumulator{
	"$sum":          func() accumulator { return &sumAcc{sum: int32(0)} },
	"$count":        func() accumulator { return &sumAcc{sum: int32(0)} },
	"$avg":          func() accumulator { return &avgAcc{sum: int32(0)} },
	"$min":          func() accumulator { return &minMaxAcc{max: false, best: expr.Missing} },
	"$max":          func() accumulator { return &minMaxAcc{max: true, best: expr.Missing} },
	"$first":        func() accumulator { return &firstLastAcc{first: true} },
	"$last":         func() accumulator { return &firstLastAcc{} },
	"$push":         func() accumulator { return &pushAcc{out: bson.A{}} },
	"$addToSet":     func() accumulator { return &pushAcc{out: bson.A{}, set: true} },
	"$mergeObjects": func() accumulator { return &mergeAcc{out: bson.D{}} },
	"$stdDevPop":    func() accumulator { return &stdDevAcc{} },
	"$stdDevSamp":   func() accumulator { return &stdDevAcc{sample: true} },
}

var unsupportedAccumulators = map[string]bool{}

type sumAcc struct{ sum any }

func (a *sumAcc) add(v any) error {
	if value.IsNumber(v) {
		a.sum = expr.Accumulate("$sum", []any{a.sum, v})
	}
	return nil
}
func (a *sumAcc) result() any { return a.sum }

type avgAcc struct {
	sum any
	n   int
}

func (a *avgAcc) add(v any) error {
	if value.IsNumber(v) {
		a.sum = expr.Accumulate("$sum", []any{a.sum, v})
		a.n++
	}
	return nil
}

func (a *avgAcc) result() any {
	if a.n == 0 {
		return nil
	}
	if _, dec := a.sum.(bson.Decimal128); dec {
		avg, err := value.Divide(a.sum, int64(a.n)) // exact, as mongod's decimal $avg
		if err == nil {
			return avg
		}
	}
	f, _ := value.ToFloat(a.sum)
	return f / float64(a.n)
}

type minMaxAcc struct {
	max  bool
	best any
	coll value.Collator
}

// collatedAcc is an accumulator whose comparisons follow the collation.
type collatedAcc interface{ setCollator(value.Collator) }

func (a *minMaxAcc) setCollator(c value.Collator) { a.coll = c }
func (a *pushAcc) setCollator(c value.Collator)   { a.coll = c }

func (a *minMaxAcc) add(v any) error {
	if expr.IsNullish(v) {
		return nil
	}
	if expr.IsMissing(a.best) {
		a.best = v
		return nil
	}
	c := expr.CompareValuesWith(v, a.best, a.coll)
	if (a.max && c > 0) || (!a.max && c < 0) {
		a.best = v
	}
	return nil
}

func (a *minMaxAcc) result() any {
	if expr.IsMissing(a.best) {
		return nil
	}
	return a.best
}

type firstLastAcc struct {
	first bool
	seen  bool
	v     any
}

func (a *firstLastAcc) add(v any) error {
	if a.first && a.seen {
		return nil
	}
	a.seen, a.v = true, v
	return nil
}

func (a *firstLastAcc) result() any {
	if expr.IsMissing(a.v) {
		return nil
	}
	return a.v
}

type pushAcc struct {
	out  bson.A
	set  bool
	coll value.Collator
}

func (a *pushAcc) add(v any) error {
	if expr.IsMissing(v) {
		return nil
	}
	if a.set {
		for _, x := range a.out {
			if expr.CompareValuesWith(x, v, a.coll) == 0 {
				return nil
			}
		}
	}
	a.out = append(a.out, v)
	return nil
}
func (a *pushAcc) result() any { return a.out }

type mergeAcc struct{ out bson.D }

func (a *mergeAcc) add(v any) error {
	m, err := expr.MergeObjects([]any{a.out, v})
	if err != nil {
		return err
	}
	a.out = m
	return nil
}
func (a *mergeAcc) result() any { return a.out }

// stdDevAcc uses Welford's online algorithm.
type stdDevAcc struct {
	sample  bool
	n       float64
	mean, m float64
}

func (a *stdDevAcc) add(v any) error {
	if !value.IsNumber(v) {
		return nil
	}
	x, _ := value.ToFloat(v)
	a.n++
	d := x - a.mean
	a.mean += d / a.n
	a.m += d * (x - a.mean)
	return nil
}

func (a *stdDevAcc) result() any {
	if a.sample {
		if a.n < 2 {
			return nil
		}
		return math.Sqrt(a.m / (a.n - 1))
	}
	if a.n == 0 {
		return nil
	}
	return math.Sqrt(a.m / a.n)
}

type groupStage struct {
	id   *expr.Expr
	accs []accSpec
}

func compileGroup(arg any) (stage, error) {
	spec, ok := value.ToDoc(arg)
	if !ok {
		return nil, cmderr.New(15947, "a group's fields must be specified in an object")
	}
	g := &groupStage{}
	haveID := false
	seen := map[string]bool{}
	for _, e := range spec {
		if e.Key == "_id" {
			id, err := expr.Compile(e.Value)
			if err != nil {
				return nil, err
			}
			g.id, haveID = id, true
			continue
		}
		if strings.Contains(e.Key, ".") {
			return nil, cmderr.New(40235, "The field name '%s' cannot contain '.'", e.Key)
		}
		if strings.HasPrefix(e.Key, "$") {
			return nil, cmderr.New(40236, "The field name '%s' cannot be an operator name", e.Key)
		}
		if seen[e.Key] {
			return nil, cmderr.New(16406, "duplicate field name specified in object literal: %s", e.Key)
		}
		seen[e.Key] = true
		a, err := compileAcc(e.Key, e.Value)
		if err != nil {
			return nil, err
		}
		g.accs = append(g.accs, a)
	}
	if !haveID {
		return nil, cmderr.New(cmderr.Location15955, "a group specification must include an _id")
	}
	return g, nil
}

// compileAcc compiles one output field's accumulator, {op: arg}.
func compileAcc(field string, spec any) (accSpec, error) {
	acc, ok := value.ToDoc(spec)
	if !ok {
		return accSpec{}, cmderr.New(40234, "The field '%s' must be an accumulator object", field)
	}
	if len(acc) != 1 {
		return accSpec{}, cmderr.New(40238, "The field '%s' must specify one accumulator", field)
	}
	op, argSpec := acc[0].Key, acc[0].Value
	if op == "$accumulator" {
		return compileJSAcc(field, argSpec)
	}
	if quantileOps[op] {
		x, mk, err := compileQuantileAcc(op, argSpec)
		if err != nil {
			return accSpec{}, err
		}
		return accSpec{field: field, op: op, arg: x, make: mk}, nil
	}
	if nAccumulators[op] {
		x, mk, err := compileNAcc(op, argSpec)
		if err != nil {
			return accSpec{}, err
		}
		return accSpec{field: field, op: op, arg: x, make: mk}, nil
	}
	if _, ok := accumulators[op]; !ok {
		if unsupportedAccumulators[op] {
			return accSpec{}, cmderr.Unsupported("group accumulator " + op)
		}
		return accSpec{}, cmderr.New(15952, "unknown group operator '%s'", op)
	}
	if _, isArray := value.ToArray(argSpec); isArray {
		return accSpec{}, cmderr.New(40237, "The %s accumulator is a unary operator", op)
	}
	if op == "$count" {
		if d, ok := value.ToDoc(argSpec); !ok || len(d) != 0 {
			return accSpec{}, cmderr.New(cmderr.TypeMismatch, "$count takes no arguments, i.e. $count:{}")
		}
		argSpec = int32(1)
	}
	x, err := expr.Compile(argSpec)
	if err != nil {
		return accSpec{}, err
	}
	return accSpec{field: field, op: op, arg: x}, nil
}

type group struct {
	id   any
	accs []accumulator
}

func (g *groupStage) run(rt *runtime, in []bson.D) ([]bson.D, error) {
	index := map[string]*group{}
	var order []*group
	for i, doc := range in {
		if err := rt.checkEvery(i); err != nil {
			return nil, err
		}
		id, err := g.id.Eval(doc, rt.vars)
		if err != nil {
			return nil, err
		}
		if expr.IsMissing(id) {
			id = nil
		}
		key := groupKeyWith(id, rt.env.Collator)
		grp := index[key]
		if grp == nil {
			grp = &group{id: id, accs: newAccs(g.accs, rt.env.Collator)}
			index[key] = grp
			order = append(order, grp)
		}
		if err := accumulate(rt, g.accs, grp.accs, doc); err != nil {
			return nil, err
		}
	}
	out := make([]bson.D, 0, len(order))
	for _, grp := range order {
		d, err := accResults(append(make(bson.D, 0, len(g.accs)+1), bson.E{Key: "_id", Value: grp.id}), g.accs, grp.accs)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// groupKey is a canonical string for a group _id: values equal under the
// server's comparison (1, 1.0 and NumberLong(1); null and undefined) share it.
func groupKey(v any) string { return groupKeyWith(v, nil) }

// groupKeyWith is groupKey where strings equal under coll share a key.
func groupKeyWith(v any, coll value.Collator) string {
	var b strings.Builder
	writeKey(&b, v, coll)
	return b.String()
}

func writeKey(b *strings.Builder, v any, coll value.Collator) {
	switch x := v.(type) {
	case nil, bson.Null, bson.Undefined:
		b.WriteString("N")
		return
	case string:
		if coll != nil {
			x = coll.Key(x)
		}
		b.WriteString("s")
		b.WriteString(strconv.Itoa(len(x)))
		b.WriteString(":")
		b.WriteString(x)
		return
	case bson.Symbol:
		writeKey(b, string(x), coll)
		return
	}
	if value.IsNumber(v) {
		if i, ok := value.ToInt64(v); ok {
			b.WriteString("i")
			b.WriteString(strconv.FormatInt(i, 10))
			return
		}
		f, _ := value.ToFloat(v)
		if math.IsNaN(f) {
			b.WriteString("fNaN")
			return
		}
		b.WriteString("f")
		b.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
		return
	}
	if d, ok := value.ToDoc(v); ok {
		b.WriteString("{")
		for _, e := range d {
			writeKey(b, e.Key, nil) // field names are never collated
			writeKey(b, e.Value, coll)
		}
		b.WriteString("}")
		return
	}
	if a, ok := value.ToArray(v); ok {
		b.WriteString("[")
		for _, e := range a {
			writeKey(b, e, coll)
		}
		b.WriteString("]")
		return
	}
	b.WriteString("t")
	b.WriteString(strconv.Itoa(value.TypeOrder(v)))
	b.WriteString(":")
	b.WriteString(expr.Render(v))
}
