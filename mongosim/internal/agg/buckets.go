package agg

import (
	"math"
	"math/rand/v2"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/expr"
	"github.com/sturdy-go/sturdy/mongosim/internal/query"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// $bucket, $bucketAuto, $sample and $graphLookup.

// compileBucketOutput compiles a bucket stage's output accumulators; the
// default is {count: {$sum: 1}}.
func compileBucketOutput(stageName string, v any, have bool) ([]accSpec, error) {
	if !have {
		a, err := compileAcc("count", bson.D{{Key: "$sum", Value: int32(1)}})
		return []accSpec{a}, err
	}
	d, ok := value.ToDoc(v)
	if !ok {
		return nil, cmderr.New(40196, "The %s 'output' field must be an object, but found type: %s", stageName, value.TypeName(v))
	}
	var out []accSpec
	for _, e := range d {
		a, err := compileAcc(e.Key, e.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// bucketSpec holds the keys $bucket and $bucketAuto share.
type bucketSpec struct {
	groupBy    *expr.Expr
	output     any
	haveOutput bool
}

// walkBucketSpec reads spec's keys in order, stopping at the first error as
// mongod does: groupBy and output here, the stage's own keys in own, which
// says whether it knows the key; any other is answered with unknownCode.
func walkBucketSpec(stageName string, spec bson.D, unknownCode int32, own func(bson.E) (bool, error)) (bucketSpec, error) {
	var c bucketSpec
	for _, e := range spec {
		switch e.Key {
		case "groupBy":
			g, err := groupExpr(stageName, e.Value)
			if err != nil {
				return c, err
			}
			c.groupBy = g
		case "output":
			c.output, c.haveOutput = e.Value, true
		default:
			known, err := own(e)
			if err != nil {
				return c, err
			}
			if !known {
				return c, cmderr.New(unknownCode, "Unrecognized option to %s: %s.", stageName, e.Key)
			}
		}
	}
	return c, nil
}

// groupExpr compiles a bucket stage's groupBy, which must be a field path or
// an expression object.
func groupExpr(stageName string, v any) (*expr.Expr, error) {
	if s, ok := v.(string); ok && len(s) > 1 && s[0] == '$' {
		return expr.Compile(s)
	}
	if _, ok := value.ToDoc(v); ok {
		return expr.Compile(v)
	}
	return nil, cmderr.New(40202, "The %s 'groupBy' field must be defined as a $-prefixed path or an expression, but found: %s", stageName, expr.Render(v))
}

func newAccs(specs []accSpec, coll value.Collator) []accumulator {
	accs := make([]accumulator, len(specs))
	for k, a := range specs {
		accs[k] = a.newAcc()
		if ca, ok := accs[k].(collatedAcc); ok && coll != nil {
			ca.setCollator(coll)
		}
	}
	return accs
}

// accumulate adds doc to one group's accumulators; an $accumulator's
// state starts from the group's first document.
func accumulate(rt *runtime, specs []accSpec, accs []accumulator, doc bson.D) error {
	for k, a := range specs {
		if ja, ok := accs[k].(*jsAcc); ok && !ja.started {
			if err := ja.start(rt, doc); err != nil {
				return err
			}
		}
		x, err := a.arg.Eval(doc, rt.vars)
		if err != nil {
			return err
		}
		if err := accs[k].add(x); err != nil {
			return err
		}
	}
	return nil
}

// accResults appends the accumulators' results to d.
func accResults(d bson.D, specs []accSpec, accs []accumulator) (bson.D, error) {
	for k, a := range specs {
		v := accs[k].result()
		if ja, ok := accs[k].(*jsAcc); ok {
			var err error
			if v, err = ja.finish(); err != nil {
				return nil, err
			}
		}
		d = append(d, bson.E{Key: a.field, Value: v})
	}
	return d, nil
}

type bucketStage struct {
	groupBy    *expr.Expr
	boundaries bson.A
	def        any
	hasDefault bool
	output     []accSpec
}

func compileBucket(arg any) (stage, error) {
	spec, ok := value.ToDoc(arg)
	if !ok {
		return nil, cmderr.New(40201, "Argument to $bucket stage must be an object, but found type: %s.", value.TypeName(arg))
	}
	b := &bucketStage{}
	common, err := walkBucketSpec("$bucket", spec, 40197, func(e bson.E) (bool, error) {
		switch e.Key {
		case "boundaries":
			a, ok := value.ToArray(e.Value)
			if !ok {
				return true, cmderr.New(40200, "The $bucket 'boundaries' field must be an array, but found type: %s.", value.TypeName(e.Value))
			}
			b.boundaries = a
		case "default":
			b.def, b.hasDefault = e.Value, true
		default:
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	b.groupBy = common.groupBy
	if b.groupBy == nil || b.boundaries == nil {
		return nil, cmderr.New(40198, "$bucket requires 'groupBy' and 'boundaries' to be specified.")
	}
	if len(b.boundaries) < 2 {
		return nil, cmderr.New(40192, "The $bucket 'boundaries' field must have at least 2 values, but found %d value(s).", len(b.boundaries))
	}
	for i := 1; i < len(b.boundaries); i++ {
		lo, hi := b.boundaries[i-1], b.boundaries[i]
		if value.TypeOrder(lo) != value.TypeOrder(hi) {
			return nil, cmderr.New(40193, "All values in the the 'boundaries' option to $bucket must have the same type. Found conflicting types %s and %s.", value.TypeName(lo), value.TypeName(hi))
		}
		if value.Compare(lo, hi) >= 0 {
			return nil, cmderr.New(40194, "The 'boundaries' option to $bucket must be sorted in ascending order, but elements %d and %d are not in ascending order (%s is not less than %s).", i-1, i, expr.Render(lo), expr.Render(hi))
		}
	}
	if b.hasDefault && value.TypeOrder(b.def) == value.TypeOrder(b.boundaries[0]) &&
		value.Compare(b.def, b.boundaries[0]) >= 0 && value.Compare(b.def, b.boundaries[len(b.boundaries)-1]) < 0 {
		return nil, cmderr.New(40199, "The $bucket 'default' field must be less than the lowest boundary or greater than or equal to the highest boundary.")
	}
	if b.output, err = compileBucketOutput("$bucket", common.output, common.haveOutput); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *bucketStage) run(rt *runtime, in []bson.D) ([]bson.D, error) {
	n := len(b.boundaries) - 1
	groups := make([][]accumulator, n+1) // the last is the default bucket
	for i, doc := range in {
		if err := rt.checkEvery(i); err != nil {
			return nil, err
		}
		v, err := b.groupBy.Eval(doc, rt.vars)
		if err != nil {
			return nil, err
		}
		if expr.IsMissing(v) {
			v = nil
		}
		slot := n
		if value.TypeOrder(v) == value.TypeOrder(b.boundaries[0]) {
			// The bucket whose [lower, upper) holds v.
			j, found := slices.BinarySearchFunc(b.boundaries, v, func(bound, target any) int { return value.CompareWith(bound, target, rt.env.Collator) })
			switch {
			case found && j < n:
				slot = j // v is the lower bound of bucket j
			case !found && j > 0 && j <= n:
				slot = j - 1
			}
		}
		if slot == n && !b.hasDefault {
			return nil, cmderr.New(40066, "$switch could not find a matching branch for an input, and no default was specified.")
		}
		if groups[slot] == nil {
			groups[slot] = newAccs(b.output, rt.env.Collator)
		}
		if err := accumulate(rt, b.output, groups[slot], doc); err != nil {
			return nil, err
		}
	}
	var out []bson.D
	for slot, accs := range groups {
		if accs == nil {
			continue
		}
		id := b.def
		if slot < n {
			id = b.boundaries[slot]
		}
		d, err := accResults(bson.D{{Key: "_id", Value: id}}, b.output, accs)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

type bucketAutoStage struct {
	groupBy *expr.Expr
	buckets int
	output  []accSpec
	round   rounder // granularity, or nil
}

func compileBucketAuto(arg any) (stage, error) {
	spec, ok := value.ToDoc(arg)
	if !ok {
		return nil, cmderr.New(40240, "The argument to $bucketAuto must be an object, but found type: %s.", value.TypeName(arg))
	}
	b := &bucketAutoStage{}
	common, err := walkBucketSpec("$bucketAuto", spec, 40245, func(e bson.E) (bool, error) {
		switch e.Key {
		case "buckets":
			n, ok := value.ToInt64(e.Value)
			if !ok || n <= 0 || n > 1<<31-1 {
				return true, cmderr.New(40243, "The $bucketAuto 'buckets' field must be greater than 0, but found: %s.", expr.Render(e.Value))
			}
			b.buckets = int(n)
		case "granularity":
			r, err := newRounder(e.Value)
			if err != nil {
				return true, err
			}
			b.round = r
		default:
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	b.groupBy = common.groupBy
	if b.groupBy == nil || b.buckets == 0 {
		return nil, cmderr.New(40246, "$bucketAuto requires 'groupBy' and 'buckets' to be specified")
	}
	if b.output, err = compileBucketOutput("$bucketAuto", common.output, common.haveOutput); err != nil {
		return nil, err
	}
	return b, nil
}

// run sorts by the groupBy value and fills up to 'buckets' buckets with
// round(n/buckets) documents each (the last takes the rest), as mongod does:
// equal values are never split, and a bucket's _id is {min, max} where max is
// the next bucket's min (the last bucket's own maximum). With a granularity,
// max is rounded up (absorbing the values below it) and the first min down.
func (b *bucketAutoStage) run(rt *runtime, in []bson.D) ([]bson.D, error) {
	items, err := b.keyed(rt, in)
	if err != nil || len(items) == 0 {
		return nil, err
	}
	coll := rt.env.Collator
	slices.SortStableFunc(items, func(x, y keyedDoc) int { return value.CompareWith(x.key, y.key, coll) })
	size := max(int(math.Round(float64(len(items))/float64(b.buckets))), 1)
	var out []bson.D
	var prevMax any
	havePrev := false
	for i, n := 0, 1; i < len(items) && n <= b.buckets; n++ {
		mn := items[i].key
		if b.round != nil {
			if havePrev {
				mn = prevMax
			} else if mn, err = b.round.down(mn); err != nil {
				return nil, err
			}
		}
		end := i + size
		if n == b.buckets || end > len(items) {
			end = len(items)
		}
		mx, end, err := b.upperBound(items, end, coll)
		if err != nil {
			return nil, err
		}
		accs := newAccs(b.output, coll)
		for _, it := range items[i:end] {
			if err := accumulate(rt, b.output, accs, it.doc); err != nil {
				return nil, err
			}
		}
		d, err := accResults(bson.D{{Key: "_id", Value: bson.D{{Key: "min", Value: mn}, {Key: "max", Value: mx}}}}, b.output, accs)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
		prevMax, havePrev = mx, true
		i = end
	}
	return out, nil
}

// keyedDoc is an input document with its groupBy value.
type keyedDoc struct {
	key any
	doc bson.D
}

// keyed evaluates groupBy for each document; with a granularity, every
// value must be a non-negative number.
func (b *bucketAutoStage) keyed(rt *runtime, in []bson.D) ([]keyedDoc, error) {
	items := make([]keyedDoc, 0, len(in))
	for i, doc := range in {
		if err := rt.checkEvery(i); err != nil {
			return nil, err
		}
		v, err := b.groupBy.Eval(doc, rt.vars)
		if err != nil {
			return nil, err
		}
		if b.round != nil {
			if !value.IsNumber(v) {
				return nil, cmderr.New(40258, "$bucketAuto can specify a 'granularity' with numeric boundaries only, but found a value with type: %s", typeNameOf(v))
			}
			f, _ := value.ToFloat(v)
			if math.IsNaN(f) {
				return nil, cmderr.New(40259, "$bucketAuto can specify a 'granularity' with numeric boundaries only, but found a NaN")
			}
			if f < 0 {
				return nil, cmderr.New(40260, "$bucketAuto can specify a 'granularity' with non-negative numbers only, but found a negative number")
			}
		}
		if expr.IsMissing(v) {
			v = nil
		}
		items = append(items, keyedDoc{v, doc})
	}
	return items, nil
}

// upperBound extends a bucket that would end before items[end] past the
// values equal to its last one (or, with a granularity, below its rounded
// up maximum) and returns its max: the next bucket's first value, or the
// rounded bound.
func (b *bucketAutoStage) upperBound(items []keyedDoc, end int, coll value.Collator) (any, int, error) {
	mx := items[end-1].key
	if b.round == nil {
		for end < len(items) && value.CompareWith(mx, items[end].key, coll) == 0 {
			end++
		}
		if end < len(items) {
			mx = items[end].key
		}
		return mx, end, nil
	}
	bound, err := b.round.up(mx)
	if err != nil {
		return nil, 0, err
	}
	for end < len(items) && (value.CompareWith(bound, items[end].key, coll) > 0 || value.CompareWith(mx, items[end].key, coll) == 0) {
		mx = items[end].key
		end++
	}
	f, _ := value.ToFloat(bound)
	if f == 0 && end < len(items) {
		if bound, err = b.round.down(items[end].key); err != nil {
			return nil, 0, err
		}
	}
	return bound, end, nil
}

type sampleStage struct{ size int }

func compileSample(arg any) (stage, error) {
	spec, ok := value.ToDoc(arg)
	if !ok {
		return nil, cmderr.New(28745, "the $sample stage specification must be an object")
	}
	s := &sampleStage{size: -1}
	for _, e := range spec {
		if e.Key != "size" {
			return nil, cmderr.New(28748, "unrecognized option to $sample: %s", e.Key)
		}
		n, ok := value.ToInt64(e.Value)
		if !ok {
			return nil, cmderr.New(28746, "size argument to $sample must be a number")
		}
		if n < 0 {
			return nil, cmderr.New(28747, "size argument to $sample must not be negative")
		}
		s.size = int(n)
	}
	if s.size < 0 {
		return nil, cmderr.New(28749, "$sample stage must specify a size")
	}
	return s, nil
}

// run returns size documents chosen uniformly without replacement, in
// random order (all of them, shuffled, when there are fewer).
func (s *sampleStage) run(_ *runtime, in []bson.D) ([]bson.D, error) {
	idx := rand.Perm(len(in))
	out := make([]bson.D, 0, min(s.size, len(in)))
	for _, i := range idx[:min(s.size, len(in))] {
		out = append(out, in[i])
	}
	return out, nil
}

type graphLookupStage struct {
	from                 namespace
	startWith            *expr.Expr
	connectFrom          string
	connectTo            string
	as                   []string
	maxDepth             int64 // -1: unlimited
	depthField           string
	restrict             *query.Filter
	restrictSpec         bson.D // to compile under a collation
	fromPath, toPathExpr *expr.Expr
}

func compileGraphLookup(arg any) (stage, error) {
	spec, ok := value.ToDoc(arg)
	if !ok {
		return nil, cmderr.New(40327, "the $graphLookup stage specification must be an object, but found %s", value.TypeName(arg))
	}
	g := &graphLookupStage{maxDepth: -1}
	var err error
	haveFrom := false
	for _, e := range spec {
		switch e.Key {
		case "from":
			if g.from, err = parseNamespace("$graphLookup", "from", e.Value); err != nil {
				return nil, err
			}
			haveFrom = true
		case "startWith":
			if g.startWith, err = expr.Compile(e.Value); err != nil {
				return nil, err
			}
		case "connectFromField", "connectToField", "as", "depthField":
			s, ok := e.Value.(string)
			if !ok {
				return nil, cmderr.New(40103, "expected string as argument for %s, found: %s", e.Key, value.TypeName(e.Value))
			}
			if _, err := checkFieldPath("$graphLookup", s); err != nil {
				return nil, err
			}
			switch e.Key {
			case "connectFromField":
				g.connectFrom = s
			case "connectToField":
				g.connectTo = s
			case "as":
				g.as, _ = checkFieldPath("$graphLookup", s)
			default:
				g.depthField = s
			}
		case "maxDepth":
			n, ok := value.ToInt64(e.Value)
			if !ok {
				return nil, cmderr.New(40100, "maxDepth must be numeric, found type: %s", value.TypeName(e.Value))
			}
			if n < 0 {
				return nil, cmderr.New(40101, "maxDepth requires a nonnegative argument, found: %d", n)
			}
			g.maxDepth = n
		case "restrictSearchWithMatch":
			d, ok := value.ToDoc(e.Value)
			if !ok {
				return nil, cmderr.New(40185, "restrictSearchWithMatch must be an object, found %s", value.TypeName(e.Value))
			}
			g.restrictSpec = d
			if g.restrict, err = query.CompileFilter(d); err != nil {
				return nil, err
			}
		default:
			return nil, cmderr.New(40104, "Unknown argument to $graphLookup: %s", e.Key)
		}
	}
	if !haveFrom || g.startWith == nil || g.connectFrom == "" || g.connectTo == "" || g.as == nil {
		return nil, cmderr.New(40105, "from, as, startWith, connectFromField and connectToField must all be specified")
	}
	if g.fromPath, err = expr.Compile("$" + g.connectFrom); err != nil {
		return nil, err
	}
	if g.toPathExpr, err = expr.Compile("$" + g.connectTo); err != nil {
		return nil, err
	}
	return g, nil
}

// run does a breadth-first search per input document: documents of from
// whose connectToField equals a value reached so far join the result
// (each once, with the depth it was first found at), and their
// connectFromField values are searched next.
func (g *graphLookupStage) run(rt *runtime, in []bson.D) ([]bson.D, error) {
	foreign, err := g.readFrom(rt)
	if err != nil {
		return nil, err
	}
	byKey, err := g.indexByConnectTo(rt, foreign)
	if err != nil {
		return nil, err
	}
	out := make([]bson.D, 0, len(in))
	for i, doc := range in {
		if err := rt.checkEvery(i); err != nil {
			return nil, err
		}
		results, err := g.search(rt, doc, foreign, byKey)
		if err != nil {
			return nil, err
		}
		out = append(out, setPath(doc, g.as, results))
	}
	return out, nil
}

// readFrom reads the from collection, keeping the documents that match
// restrictSearchWithMatch (under the operation's collation).
func (g *graphLookupStage) readFrom(rt *runtime) ([]bson.D, error) {
	cat, err := rt.catalog("$graphLookup")
	if err != nil {
		return nil, err
	}
	db, coll := g.from.resolve(rt.env)
	foreign, err := cat.Read(db, coll)
	if err != nil || g.restrict == nil {
		return foreign, err
	}
	restrict := g.restrict
	if rt.env.Collator != nil {
		if restrict, err = query.CompileFilterWith(g.restrictSpec, query.Options{Collator: rt.env.Collator}); err != nil {
			return nil, err
		}
	}
	var kept []bson.D
	for _, d := range foreign {
		if restrict.Match(d) {
			kept = append(kept, d)
		}
	}
	return kept, nil
}

// indexByConnectTo maps each value of connectToField (by its group key)
// to the foreign documents holding it.
func (g *graphLookupStage) indexByConnectTo(rt *runtime, foreign []bson.D) (map[string][]int, error) {
	byKey := map[string][]int{}
	for i, d := range foreign {
		v, err := g.toPathExpr.Eval(d, rt.vars)
		if err != nil {
			return nil, err
		}
		for _, k := range flatten(v) {
			key := groupKeyWith(k, rt.env.Collator)
			byKey[key] = append(byKey[key], i)
		}
	}
	return byKey, nil
}

// search is the breadth-first search from one input document.
func (g *graphLookupStage) search(rt *runtime, doc bson.D, foreign []bson.D, byKey map[string][]int) (bson.A, error) {
	start, err := g.startWith.Eval(doc, rt.vars)
	if err != nil {
		return nil, err
	}
	frontier := flatten(start)
	seenKey := map[string]bool{}
	found := map[int]bool{}
	results := bson.A{}
	for depth := int64(0); len(frontier) > 0 && (g.maxDepth < 0 || depth <= g.maxDepth); depth++ {
		var next []any
		for _, v := range frontier {
			key := groupKeyWith(v, rt.env.Collator)
			if seenKey[key] {
				continue
			}
			seenKey[key] = true
			for _, j := range byKey[key] {
				if found[j] {
					continue
				}
				found[j] = true
				d := foreign[j]
				if g.depthField != "" {
					d = append(slices.Clone(d), bson.E{Key: g.depthField, Value: depth})
				}
				results = append(results, d)
				nv, err := g.fromPath.Eval(foreign[j], rt.vars)
				if err != nil {
					return nil, err
				}
				next = append(next, flatten(nv)...)
			}
		}
		frontier = next
	}
	return results, nil
}

// flatten is v's values for matching: an array's elements, nothing for a
// missing value, else v itself.
func flatten(v any) []any {
	if expr.IsMissing(v) {
		return nil
	}
	if a, ok := value.ToArray(v); ok {
		return a
	}
	return []any{v}
}
