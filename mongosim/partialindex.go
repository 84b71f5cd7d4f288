package mongosim

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/query"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// Which indexes may answer a filter. mongod's planner uses a partial index
// only when the filter implies its partialFilterExpression (every document
// the filter matches is in the index), and a sparse index only when the
// condition on its field cannot match a document missing it. The
// implication test covers what partial filters are made of: equality,
// $exists: true, $gt/$gte/$lt/$lte, $type and $and; a filter implies such
// a term through a condition on the same field that is at least as narrow.

// answers reports whether ix holds every document filter can match, as
// far as its partial filter goes.
func (ix *index) answers(filter bson.D) bool {
	if ix.partial == nil {
		return true
	}
	pfe, _ := value.Get(ix.spec, "partialFilterExpression")
	d, _ := pfe.(bson.D)
	return implies(atomsOf(filter), d)
}

// matchesMissing reports whether cond matches a document without the field.
func matchesMissing(cond any) bool {
	f, err := query.CompileFilter(bson.D{{Key: "k", Value: cond}})
	return err != nil || f.Match(bson.D{})
}

// atom is one condition on one field: op is $eq, $gt, $gte, $lt, $lte,
// $in, $exists or $type.
type atom struct {
	field, op string
	val       any
}

// atomsOf flattens a filter's top-level conditions (and those of
// top-level $and) into atoms.
func atomsOf(filter bson.D) []atom {
	var out []atom
	for _, e := range filter {
		if e.Key == "$and" {
			arr, _ := e.Value.(bson.A)
			for _, sub := range arr {
				if d, ok := sub.(bson.D); ok {
					out = append(out, atomsOf(d)...)
				}
			}
			continue
		}
		if strings.HasPrefix(e.Key, "$") {
			continue
		}
		d, isDoc := e.Value.(bson.D)
		if !isDoc || len(d) == 0 || !strings.HasPrefix(d[0].Key, "$") {
			out = append(out, atom{field: e.Key, op: "$eq", val: e.Value})
			continue
		}
		for _, op := range d {
			out = append(out, atom{field: e.Key, op: op.Key, val: op.Value})
		}
	}
	return out
}

// implies reports whether the filter atoms imply every term of pfe.
func implies(have []atom, pfe bson.D) bool {
	for _, need := range atomsOf(pfe) {
		found := false
		for _, a := range have {
			if a.field == need.field && a.implies(need) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// implies reports whether every value matching a matches need.
func (a atom) implies(need atom) bool {
	switch need.op {
	case "$exists":
		return !asBool(need.val) || a.excludesMissing()
	case "$eq":
		return a.eachValue(func(v any) bool { return sameType(v, need.val) && value.Equal(v, need.val) })
	case "$type":
		return a.op == "$type" && value.Equal(a.val, need.val)
	case "$gt", "$gte", "$lt", "$lte":
		if !sameType(a.val, need.val) && a.op != "$in" {
			return false
		}
		lower := need.op == "$gt" || need.op == "$gte"
		switch {
		case a.op == "$eq" || a.op == "$in":
			return a.eachValue(func(v any) bool { return sameType(v, need.val) && satisfies(v, need.op, need.val) })
		case lower && (a.op == "$gt" || a.op == "$gte"), !lower && (a.op == "$lt" || a.op == "$lte"):
			c := value.Compare(a.val, need.val)
			strict := need.op == "$gt" || need.op == "$lt"
			if !lower {
				c = -c
			}
			return c > 0 || c == 0 && (!strict || a.op == need.op)
		}
	}
	return false
}

// eachValue reports whether a is an equality or $in and f holds for each
// of its values.
func (a atom) eachValue(f func(v any) bool) bool {
	switch a.op {
	case "$eq":
		return f(a.val)
	case "$in":
		arr, ok := a.val.(bson.A)
		if !ok || len(arr) == 0 {
			return false
		}
		for _, v := range arr {
			if !f(v) {
				return false
			}
		}
		return true
	}
	return false
}

// excludesMissing reports whether a cannot match a missing field.
func (a atom) excludesMissing() bool {
	switch a.op {
	case "$exists":
		return asBool(a.val)
	case "$type":
		return true
	case "$eq", "$in", "$gt", "$gte", "$lt", "$lte":
		return !matchesMissing(bson.D{{Key: a.op, Value: a.val}})
	}
	return false
}

// satisfies reports v op bound.
func satisfies(v any, op string, bound any) bool {
	c := value.Compare(v, bound)
	switch op {
	case "$gt":
		return c > 0
	case "$gte":
		return c >= 0
	case "$lt":
		return c < 0
	}
	return c <= 0
}

// sameType reports values a range compares (the same canonical type;
// ranges do not cross types).
func sameType(a, b any) bool {
	if _, isDoc := a.(bson.D); isDoc {
		return false
	}
	return value.TypeOrder(a) == value.TypeOrder(b)
}
