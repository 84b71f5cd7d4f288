package mongosim

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/query"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// explain's index plans. mongosim's reads scan the collection, but an
// application asking explain whether its query can use its indexes should
// get mongod's answer for the simple cases: a filter with an equality,
// range or $in on the first field of a regular (not hidden, text
// or geo) index, or a hinted index, is planned as FETCH over IXSCAN, with
// the keys and documents such a scan examines. A sparse index serves a
// condition that cannot match a missing field, a partial index a filter
// implying its partialFilterExpression (partialindex.go). The other usable
// indexes are the rejected plans. Anything else stays a COLLSCAN.

// ixPlan is an index scan considered for a query.
type ixPlan struct {
	ix       *index
	cond     any // the filter's condition on the index's first field; nil: full scan
	keys     int64
	multikey bool
	backward bool // the scan walks the index backwards (for a sort)
}

// indexPlans returns the index scans usable for filter in c, the hinted
// one (or the best: an equality before a range) first.
func indexPlans(c *collection, filter bson.D, hint any) []*ixPlan {
	plans := filterPlans(c, filter, hint)
	return plans
}

// sortPlan makes plans answer a one-field sort from an index, as mongod
// does, when the winning index (or, with none, any regular index) leads
// with the sort field: the scan walks it in the sort's direction and no
// SORT stage is needed. It returns the plans and whether the sort is
// provided.
func sortPlan(c *collection, plans []*ixPlan, sortDoc bson.D, hinted bool) ([]*ixPlan, bool) {
	if len(sortDoc) != 1 {
		return plans, false
	}
	field := sortDoc[0].Key
	dir, ok := asFloat(sortDoc[0].Value)
	if !ok || dir == 0 {
		return plans, false
	}
	walk := func(p *ixPlan) bool {
		if p.ix.fields[0] != field {
			return false
		}
		keyDir, _ := asFloat(p.ix.key[0].Value)
		p.backward = (dir < 0) != (keyDir < 0)
		return true
	}
	if len(plans) > 0 {
		return plans, walk(plans[0])
	}
	if hinted {
		return plans, false
	}
	for _, ix := range c.indexes {
		if ix.sparse || ix.partial != nil || ix.hidden || !plainKey(ix.key) {
			continue
		}
		p := &ixPlan{ix: ix}
		if walk(p) {
			return []*ixPlan{p}, true
		}
	}
	return plans, false
}

// filterPlans returns the index scans the filter (or hint) can use.
func filterPlans(c *collection, filter bson.D, hint any) []*ixPlan {
	var hinted *index
	if hint != nil {
		hinted = c.findIndex(hint)
	}
	var out []*ixPlan
	for _, ix := range c.indexes {
		if ix != hinted && (ix.hidden || !plainKey(ix.key) || !ix.answers(filter)) {
			continue
		}
		cond, ok := lookupD(filter, ix.fields[0])
		if ok && (!indexable(cond) || ix.sparse && matchesMissing(cond)) {
			ok = false
		}
		if !ok && ix != hinted {
			continue
		}
		p := &ixPlan{ix: ix}
		if ok {
			p.cond = cond
		}
		out = append(out, p)
	}
	if hinted != nil {
		// A hint is the only plan mongod considers.
		for _, p := range out {
			if p.ix == hinted {
				return []*ixPlan{p}
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return isEquality(out[i].cond) && !isEquality(out[j].cond) })
	return out
}

// plainKey reports an ascending/descending key pattern.
func plainKey(key bson.D) bool {
	for _, e := range key {
		if _, ok := asFloat(e.Value); !ok {
			return false
		}
	}
	return true
}

// indexable reports conditions an index scan answers: a plain value, or
// only $eq, $gt, $gte, $lt, $lte and $in.
func indexable(cond any) bool {
	switch v := cond.(type) {
	case bson.Regex, bson.A, nil:
		return false
	case bson.D:
		if len(v) == 0 || !strings.HasPrefix(v[0].Key, "$") {
			return false
		}
		for _, e := range v {
			switch e.Key {
			case "$eq", "$gt", "$gte", "$lt", "$lte":
				if _, isDoc := e.Value.(bson.D); isDoc {
					return false
				}
			case "$in":
				if _, ok := e.Value.(bson.A); !ok {
					return false
				}
			default:
				return false
			}
		}
	}
	return true
}

func isEquality(cond any) bool {
	if d, ok := cond.(bson.D); ok {
		return len(d) == 1 && (d[0].Key == "$eq" || d[0].Key == "$in")
	}
	return cond != nil
}

// examine counts the keys p's scan examines in c (documents whose field
// satisfies the condition) and whether the field holds an array anywhere.
func (p *ixPlan) examine(c *collection, full *query.Filter, stopAfter int64) error {
	f := p.ix.fields[0]
	var m *query.Filter
	if p.cond != nil {
		var err error
		if m, err = query.CompileFilter(bson.D{{Key: f, Value: p.cond}}); err != nil {
			return err
		}
	}
	var err error
	var inBounds []*record
	c.each(func(rec *record) bool {
		if !p.ix.holds(rec.doc) {
			return true
		}
		for _, field := range p.ix.fields {
			if v, _ := value.Get(rec.doc, field); v != nil {
				if _, isArr := v.(bson.A); isArr {
					p.multikey = true
				}
			}
		}
		ok := true
		if m != nil {
			var e error
			if ok, e = m.MatchErr(rec.doc); e != nil {
				err = e
				return false
			}
		}
		if ok {
			inBounds = append(inBounds, rec)
		}
		return true
	})
	if err != nil {
		return err
	}
	p.keys = int64(len(inBounds))
	if stopAfter <= 0 {
		return nil
	}
	// The scan returns documents in index order and stops once the limit
	// is met: count the keys it reads until then.
	sort.SliceStable(inBounds, func(i, j int) bool {
		a, _ := value.Get(inBounds[i].doc, f)
		b, _ := value.Get(inBounds[j].doc, f)
		if p.backward {
			return value.Compare(b, a) < 0
		}
		return value.Compare(a, b) < 0
	})
	var keys, matched int64
	for _, rec := range inBounds {
		keys++
		ok, err := full.MatchErr(rec.doc)
		if err != nil {
			return err
		}
		if ok {
			if matched++; matched == stopAfter {
				break
			}
		}
	}
	p.keys = keys
	return nil
}

// stage renders p as FETCH over IXSCAN; rest is the filter FETCH applies.
func (p *ixPlan) stage(rest bson.D, matched int64) *plan {
	paths := bson.D{}
	for _, f := range p.ix.fields {
		paths = append(paths, bson.E{Key: f, Value: bson.A{}})
	}
	bounds := bson.D{}
	for i, e := range p.ix.key {
		ivs := fullRange
		if i == 0 && p.cond != nil {
			ivs = boundsOf(p.cond)
		}
		// A backward scan walks the intervals, and each one, in reverse;
		// a descending key field reverses them again.
		desc, _ := asFloat(e.Value)
		back := p.backward != (desc < 0)
		b := bson.A{}
		for k := range ivs {
			iv := ivs[k]
			if back {
				iv = ivs[len(ivs)-1-k]
			}
			b = append(b, iv.render(back))
		}
		bounds = append(bounds, bson.E{Key: e.Key, Value: b})
	}
	direction := "forward"
	if p.backward {
		direction = "backward"
	}
	scan := &plan{stage: "IXSCAN", n: p.keys, works: p.keys + 1,
		spec: bson.D{
			{Key: "keyPattern", Value: p.ix.key},
			{Key: "indexName", Value: p.ix.name},
			{Key: "isMultiKey", Value: p.multikey},
			{Key: "multiKeyPaths", Value: paths},
			{Key: "isUnique", Value: p.ix.unique || p.ix.name == "_id_"},
			{Key: "isSparse", Value: p.ix.sparse},
			{Key: "isPartial", Value: p.ix.partial != nil},
			{Key: "indexVersion", Value: int32(2)},
			{Key: "direction", Value: direction},
			{Key: "indexBounds", Value: bounds},
		},
		stats: bson.D{
			{Key: "keysExamined", Value: int32(p.keys)},
			{Key: "seeks", Value: int32(1)},
			{Key: "dupsTested", Value: int32(0)},
			{Key: "dupsDropped", Value: int32(0)},
		}}
	spec := bson.D{}
	if len(rest) > 0 {
		spec = append(spec, bson.E{Key: "filter", Value: parsedQuery(rest)})
	}
	fetch := scan.wrap("FETCH", spec, matched)
	fetch.stats = bson.D{{Key: "docsExamined", Value: int32(p.keys)}, {Key: "alreadyHasObj", Value: int32(0)}}
	return fetch
}

// interval is one index bound: lo to hi, each end open or closed.
type interval struct {
	lo, hi         string
	loIncl, hiIncl bool
}

// render prints the interval as mongod does, reversed for a backward scan.
func (iv interval) render(backward bool) string {
	lo, hi, loIncl, hiIncl := iv.lo, iv.hi, iv.loIncl, iv.hiIncl
	if backward {
		lo, hi, loIncl, hiIncl = hi, lo, hiIncl, loIncl
	}
	open, closeB := "[", "]"
	if !loIncl {
		open = "("
	}
	if !hiIncl {
		closeB = ")"
	}
	return open + lo + ", " + hi + closeB
}

var fullRange = []interval{{lo: "MinKey", hi: "MaxKey", loIncl: true, hiIncl: true}}

func point(v any) interval {
	s := boundValue(v)
	return interval{lo: s, hi: s, loIncl: true, hiIncl: true}
}

// boundsOf turns a condition into index bound intervals, in key order.
func boundsOf(cond any) []interval {
	d, ok := cond.(bson.D)
	if !ok {
		return []interval{point(cond)}
	}
	iv := interval{lo: "MinKey", hi: "MaxKey", loIncl: true, hiIncl: true}
	ranged := false
	for _, e := range d {
		switch e.Key {
		case "$eq":
			return []interval{point(e.Value)}
		case "$in":
			vals := append(bson.A(nil), e.Value.(bson.A)...)
			sort.SliceStable(vals, func(i, j int) bool { return value.Compare(vals[i], vals[j]) < 0 })
			var out []interval
			for _, v := range vals {
				out = append(out, point(v))
			}
			return out
		case "$gt", "$gte":
			iv.lo, iv.loIncl, ranged = boundValue(e.Value), e.Key == "$gte", true
			if iv.hi == "MaxKey" {
				iv.hi = upperOfType(e.Value)
			}
		case "$lt", "$lte":
			iv.hi, iv.hiIncl, ranged = boundValue(e.Value), e.Key == "$lte", true
			if iv.lo == "MinKey" {
				iv.lo = lowerOfType(e.Value)
			}
		}
	}
	if !ranged {
		return fullRange
	}
	return []interval{iv}
}

// boundValue formats a value as mongod prints it in index bounds.
func boundValue(v any) string {
	switch t := v.(type) {
	case string:
		return strconv.Quote(t)
	case int32:
		return strconv.FormatInt(int64(t), 10)
	case int64:
		return strconv.FormatInt(t, 10)
	case float64:
		switch {
		case math.IsInf(t, 1):
			return "inf.0"
		case math.IsInf(t, -1):
			return "-inf.0"
		case t == math.Trunc(t) && math.Abs(t) < 1e15:
			return strconv.FormatFloat(t, 'f', 1, 64)
		}
		return strconv.FormatFloat(t, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(t)
	case nil, bson.Null:
		return "null"
	case bson.DateTime:
		return fmt.Sprintf("new Date(%d)", int64(t))
	case bson.ObjectID:
		return "ObjectId('" + t.Hex() + "')"
	}
	return fmt.Sprint(v)
}

// Type bracketing: a range on a number stays among numbers, on a string
// among strings.
func upperOfType(v any) string {
	switch v.(type) {
	case string:
		return "{}"
	case bson.DateTime:
		return "new Date(9223372036854775807)"
	}
	if _, ok := asFloat(v); ok {
		return "inf.0"
	}
	return "MaxKey"
}

func lowerOfType(v any) string {
	switch v.(type) {
	case string:
		return `""`
	case bson.DateTime:
		return "new Date(-9223372036854775808)"
	}
	if _, ok := asFloat(v); ok {
		return "-inf.0"
	}
	return "MinKey"
}
