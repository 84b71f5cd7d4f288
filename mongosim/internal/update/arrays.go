package update

import (
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/query"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// pushSpec is a compiled $push argument: a single value, or $each with the
// optional $position, $sort and $slice clauses.
type pushSpec struct {
	each     bson.A
	position *int64
	slice    *int64
	sort     *pushSort
}

type pushSort struct {
	dir    int         // whole-element sort direction, when fields is nil
	fields *query.Sort // sort of embedded documents by field
	spec   bson.D      // the field sort, to compile under a collation
}

func parsePush(v any) (*pushSpec, error) {
	d, ok := v.(bson.D)
	if !ok || !slices.ContainsFunc(d, func(e bson.E) bool { return e.Key == "$each" }) {
		return &pushSpec{each: bson.A{v}}, nil
	}
	spec := &pushSpec{}
	seen := map[string]bool{}
	for _, e := range d {
		if seen[e.Key] {
			return nil, cmderr.New(cmderr.BadValue, "Only one %s clause is supported.", e.Key)
		}
		seen[e.Key] = true
		switch e.Key {
		case "$each":
			arr, ok := e.Value.(bson.A)
			if !ok {
				return nil, cmderr.New(cmderr.BadValue,
					"The argument to $each in $push must be an array but it was of type: %s", typeName(e.Value))
			}
			spec.each = arr
		case "$slice":
			n, err := integerClause(e, "The value for $slice must be an integer value but was given type: %s")
			if err != nil {
				return nil, err
			}
			spec.slice = &n
		case "$position":
			n, err := integerClause(e, "The value for $position must be an integer value, not of type: %s")
			if err != nil {
				return nil, err
			}
			spec.position = &n
		case "$sort":
			s, err := parsePushSort(e.Value)
			if err != nil {
				return nil, err
			}
			spec.sort = s
		default:
			return nil, cmderr.New(cmderr.BadValue, "Unrecognized clause in $push: %s", e.Key)
		}
	}
	return spec, nil
}

func integerClause(e bson.E, typeMsg string) (int64, error) {
	if !value.IsNumber(e.Value) {
		return 0, cmderr.New(cmderr.BadValue, typeMsg, typeName(e.Value))
	}
	n, ok := value.ToInt64(e.Value)
	if !ok {
		return 0, cmderr.New(cmderr.BadValue, "The %s value in $push must be an integer value but was given: %s",
			e.Key, formatValue(e.Value))
	}
	return n, nil
}

func sortDirection(v any) (int, bool) {
	if !value.IsNumber(v) {
		return 0, false
	}
	f, _ := value.ToFloat(v)
	switch f {
	case 1:
		return 1, true
	case -1:
		return -1, true
	}
	return 0, false
}

func parsePushSort(v any) (*pushSort, error) {
	if value.IsNumber(v) {
		dir, ok := sortDirection(v)
		if !ok {
			return nil, cmderr.New(cmderr.BadValue, "The $sort element value must be either 1 or -1")
		}
		return &pushSort{dir: dir}, nil
	}
	d, ok := v.(bson.D)
	if !ok {
		return nil, cmderr.New(cmderr.BadValue,
			"The $sort is invalid: use 1/-1 to sort the whole element, or {field:1/-1} to sort embedded fields")
	}
	if len(d) == 0 {
		return nil, cmderr.New(cmderr.BadValue, "The $sort pattern is empty when it should be a set of fields.")
	}
	for _, e := range d {
		if e.Key == "" || strings.HasPrefix(e.Key, "$") || slices.Contains(strings.Split(e.Key, "."), "") {
			return nil, cmderr.New(cmderr.BadValue, "The $sort field is a dotted field but has an empty part: %s", e.Key)
		}
		if _, ok := sortDirection(e.Value); !ok {
			return nil, cmderr.New(cmderr.BadValue, "The $sort element value must be either 1 or -1")
		}
	}
	s, err := query.CompileSort(d)
	if err != nil {
		return nil, err
	}
	return &pushSort{fields: s, spec: d}, nil
}

// apply returns arr with the $push applied; arr is not modified. coll is
// the collation of a $sort (nil: simple).
func (p *pushSpec) apply(arr bson.A, coll value.Collator) bson.A {
	out := make(bson.A, 0, len(arr)+len(p.each))
	out = append(out, arr...)
	pos := int64(len(out))
	if p.position != nil {
		pos = *p.position
		if pos < 0 {
			pos = max(int64(len(out))+pos, 0)
		}
		pos = min(pos, int64(len(out)))
	}
	vals := make(bson.A, len(p.each))
	for i, v := range p.each {
		vals[i] = value.Clone(v)
	}
	out = slices.Insert(out, int(pos), vals...)
	if p.sort != nil {
		p.sort.sort(out, coll)
	}
	if p.slice != nil {
		n := *p.slice
		switch {
		case n >= 0 && n < int64(len(out)):
			out = out[:n]
		case n < 0 && -n < int64(len(out)):
			out = out[int64(len(out))+n:]
		}
	}
	return out
}

func (s *pushSort) sort(arr bson.A, coll value.Collator) {
	if s.fields == nil {
		slices.SortStableFunc(arr, func(a, b any) int { return s.dir * value.CompareWith(a, b, coll) })
		return
	}
	fields := s.fields
	if coll != nil {
		// The spec compiled once already; it cannot fail now.
		if f, err := query.CompileSortWith(s.spec, coll); err == nil {
			fields = f
		}
	}
	slices.SortStableFunc(arr, func(a, b any) int {
		da, _ := a.(bson.D)
		db, _ := b.(bson.D)
		return fields.Compare(da, db)
	})
}

// pullSpec is a compiled $pull argument: an equality value, a query on the
// fields of embedded documents, or an operator condition on each element.
type pullSpec struct {
	eq      any
	filter  *query.Filter
	spec    bson.D // the filter, to compile under a collation
	wrapped bool   // filter applies to {pullWrapKey: element}
}

const pullWrapKey = "v"

// logicalTopLevel are the $-keys that make a $pull condition a query on
// the fields of embedded documents rather than on the element itself.
var logicalTopLevel = map[string]bool{"$and": true, "$or": true, "$nor": true, "$where": true, "$expr": true, "$text": true, "$comment": true, "$jsonSchema": true, "$alwaysTrue": true, "$alwaysFalse": true}

func parsePull(v any) (*pullSpec, error) {
	d, ok := v.(bson.D)
	if !ok {
		return &pullSpec{eq: v}, nil
	}
	if len(d) > 0 && strings.HasPrefix(d[0].Key, "$") && !logicalTopLevel[d[0].Key] {
		spec := bson.D{{Key: pullWrapKey, Value: d}}
		f, err := query.CompileFilter(spec)
		if err != nil {
			return nil, err
		}
		return &pullSpec{filter: f, spec: spec, wrapped: true}, nil
	}
	f, err := query.CompileFilter(d)
	if err != nil {
		return nil, err
	}
	return &pullSpec{filter: f, spec: d}, nil
}

// under returns the $pull condition compiled under coll (nil: as is).
func (p *pullSpec) under(coll value.Collator) *pullSpec {
	if coll == nil || p.filter == nil {
		return p
	}
	f, err := query.CompileFilterWith(p.spec, query.Options{Collator: coll})
	if err != nil { // compiled once already; cannot fail now
		return p
	}
	c := *p
	c.filter = f
	return &c
}

func (p *pullSpec) matches(elem any, coll value.Collator) bool {
	switch {
	case p.filter == nil:
		return value.EqualWith(p.eq, elem, coll)
	case p.wrapped:
		return p.filter.Match(bson.D{{Key: pullWrapKey, Value: elem}})
	}
	d, ok := elem.(bson.D)
	return ok && p.filter.Match(d)
}

// bindArrayFilters compiles the arrayFilters of one update command and checks
// them against the identifiers the update uses, as the server does.
func (u *Update) bindArrayFilters(filters []bson.D, coll value.Collator) (map[string]*query.Filter, error) {
	if len(filters) == 0 && len(u.identifiers) == 0 {
		return nil, nil
	}
	bound := make(map[string]*query.Filter, len(filters))
	for _, f := range filters {
		id, err := filterIdentifier(f)
		if err != nil {
			return nil, err
		}
		if _, dup := bound[id]; dup {
			return nil, cmderr.New(cmderr.FailedToParse, "Found multiple array filters with the same top-level field name %s", id)
		}
		compiled, err := query.CompileFilterWith(f, query.Options{Collator: coll})
		if err != nil {
			return nil, err
		}
		bound[id] = compiled
	}
	for _, id := range sortedStrings(u.identifiers) {
		if _, ok := bound[id]; !ok {
			return nil, cmderr.New(cmderr.BadValue, "No array filter found for identifier '%s' in path '%s'", id, u.identifiers[id])
		}
	}
	for _, f := range filters {
		id, _ := filterIdentifier(f)
		if _, ok := u.identifiers[id]; !ok {
			return nil, cmderr.New(cmderr.FailedToParse, "The array filter for identifier '%s' was not used in the update %s",
				id, formatValue(u.spec))
		}
	}
	return bound, nil
}

func sortedStrings(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// filterIdentifier returns the one top-level field name every path of an
// array filter starts with.
func filterIdentifier(f bson.D) (string, error) {
	var ids []string
	collectIdentifiers(f, &ids, 0)
	if len(ids) == 0 {
		return "", cmderr.New(cmderr.FailedToParse, "Cannot use an expression without a top-level field name in arrayFilters")
	}
	for _, id := range ids[1:] {
		if id != ids[0] {
			return "", cmderr.New(cmderr.FailedToParse,
				"Error parsing array filter :: caused by :: Expected a single top-level field name, found '%s' and '%s'", ids[0], id)
		}
	}
	id := ids[0]
	valid := id[0] >= 'a' && id[0] <= 'z'
	for i := 0; i < len(id) && valid; i++ {
		c := id[i]
		valid = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
	}
	if !valid {
		return "", cmderr.New(cmderr.BadValue,
			"Error parsing array filter :: caused by :: The top-level field name must be an alphanumeric string beginning with a lowercase letter, found '%s'", id)
	}
	return id, nil
}

func collectIdentifiers(f bson.D, ids *[]string, depth int) {
	if depth > 32 {
		return
	}
	for _, e := range f {
		switch e.Key {
		case "$and", "$or", "$nor":
			arr, _ := e.Value.(bson.A)
			for _, sub := range arr {
				if d, ok := sub.(bson.D); ok {
					collectIdentifiers(d, ids, depth+1)
				}
			}
			continue
		}
		if strings.HasPrefix(e.Key, "$") {
			continue
		}
		id, _, _ := strings.Cut(e.Key, ".")
		if id != "" {
			*ids = append(*ids, id)
		}
	}
}
