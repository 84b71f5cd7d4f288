package blackpipe

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Matcher selects requests for Receive and Autorespond.
type Matcher interface {
	Match(r *Request) bool
}

// Any matches every request.
var Any Matcher = anyMatcher{}

type anyMatcher struct{}

func (anyMatcher) Match(*Request) bool { return true }
func (anyMatcher) String() string      { return "Any" }

func describe(m Matcher) string {
	if s, ok := m.(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("%T", m)
}

// Command matches requests whose command name equals name, compared
// case-insensitively ("isMaster" matches "ismaster").
func Command(name string) Matcher { return commandMatcher(name) }

type commandMatcher string

func (m commandMatcher) Match(r *Request) bool { return strings.EqualFold(r.Name, string(m)) }
func (m commandMatcher) String() string        { return fmt.Sprintf("Command(%q)", string(m)) }

// Func matches requests for which f returns true.
func Func(f func(*Request) bool) Matcher { return funcMatcher(f) }

type funcMatcher func(*Request) bool

func (m funcMatcher) Match(r *Request) bool { return m(r) }
func (m funcMatcher) String() string        { return "Func(...)" }

// AllOf matches requests that every one of ms matches.
func AllOf(ms ...Matcher) Matcher { return allOf(ms) }

type allOf []Matcher

func (m allOf) Match(r *Request) bool {
	for _, x := range m {
		if !x.Match(r) {
			return false
		}
	}
	return true
}
func (m allOf) String() string { return "AllOf(" + describeAll(m) + ")" }

// AnyOf matches requests that at least one of ms matches.
func AnyOf(ms ...Matcher) Matcher { return anyOf(ms) }

type anyOf []Matcher

func (m anyOf) Match(r *Request) bool {
	for _, x := range m {
		if x.Match(r) {
			return true
		}
	}
	return false
}
func (m anyOf) String() string { return "AnyOf(" + describeAll(m) + ")" }

func describeAll(ms []Matcher) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = describe(m)
	}
	return strings.Join(parts, ", ")
}

// special is the type of the Absent and Anything pattern values.
type special struct{ name string }

func (s *special) String() string { return s.name }

var (
	// Absent, as a value in a Doc pattern, requires the field to be absent.
	Absent any = &special{"Absent"}
	// Anything, as a value in a Doc pattern, requires the field to be
	// present with any value.
	Anything any = &special{"Anything"}
)

type predicate struct{ f func(v any) bool }

func (predicate) String() string { return "Pred(...)" }

// Pred, as a value in a Doc pattern, requires the field to be present and f
// to return true for its decoded value (int32, int64, float64, string, bool,
// bson.D, bson.A, bson.ObjectID, ... as bson.Unmarshal into bson.D gives).
func Pred(f func(v any) bool) any { return predicate{f} }

// Doc matches requests whose command document (with document sequences
// folded in, see Request.Doc) contains subset: every field of the pattern
// must match and extra request fields are ignored. Nested documents match by
// subset, arrays element by element with the same length, numbers by value
// across int32/int64/double, and a top-level key equal to the command name
// ignoring case matches the command field. subset may be a bson.D, bson.M,
// map[string]any, bson.Raw or a struct; values may be Absent, Anything or
// Pred(...). Doc panics if subset cannot be converted, a programming error in
// the test.
func Doc(subset any) Matcher {
	p, err := normPattern(subset)
	if err != nil {
		panic(fmt.Sprintf("blackpipe.Doc: %v", err))
	}
	pd, ok := p.(patternDoc)
	if !ok {
		panic(fmt.Sprintf("blackpipe.Doc: pattern must be a document, got %T", subset))
	}
	return docMatcher{p: pd}
}

type docMatcher struct{ p patternDoc }

func (m docMatcher) String() string { return "Doc(" + formatPattern(m.p) + ")" }

// formatPattern writes a pattern in a compact, readable shell-like form.
func formatPattern(p any) string {
	switch x := p.(type) {
	case patternDoc:
		parts := make([]string, len(x))
		for i, f := range x {
			parts[i] = f.key + ": " + formatPattern(f.val)
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case patternArr:
		parts := make([]string, len(x))
		for i, v := range x {
			parts[i] = formatPattern(v)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case string:
		return fmt.Sprintf("%q", x)
	case fmt.Stringer:
		return x.String()
	}
	return fmt.Sprintf("%v", p)
}

func (m docMatcher) Match(r *Request) bool {
	d, err := r.matchDoc()
	if err != nil {
		return false
	}
	for _, f := range m.p {
		v, found := lookup(d, f.key)
		if !found && len(d) > 0 && strings.EqualFold(f.key, d[0].Key) {
			v, found = d[0].Value, true
		}
		if !matchField(f.val, v, found) {
			return false
		}
	}
	return true
}

type patternField struct {
	key string
	val any
}

type patternDoc []patternField

type patternArr []any

func lookup(d bson.D, key string) (any, bool) {
	for _, e := range d {
		if e.Key == key {
			return e.Value, true
		}
	}
	return nil, false
}

func matchField(p, v any, found bool) bool {
	if p == Absent {
		return !found
	}
	if !found {
		return false
	}
	return matchValue(p, v)
}

func matchValue(p, v any) bool {
	switch p := p.(type) {
	case *special:
		return p == Anything
	case predicate:
		return p.f(v)
	case patternDoc:
		d, ok := v.(bson.D)
		if !ok {
			return false
		}
		for _, f := range p {
			x, found := lookup(d, f.key)
			if !matchField(f.val, x, found) {
				return false
			}
		}
		return true
	case patternArr:
		a, ok := v.(bson.A)
		if !ok || len(a) != len(p) {
			return false
		}
		for i := range p {
			if !matchValue(p[i], a[i]) {
				return false
			}
		}
		return true
	}
	if pi, pf, pint, ok := number(p); ok {
		vi, vf, vint, ok := number(v)
		if !ok {
			return false
		}
		if pint && vint {
			return pi == vi
		}
		return pf == vf
	}
	return reflect.DeepEqual(p, v)
}

// number reports v as an integer (isInt) or a float.
func number(v any) (i int64, f float64, isInt, ok bool) {
	switch n := v.(type) {
	case int:
		return int64(n), float64(n), true, true
	case int8:
		return int64(n), float64(n), true, true
	case int16:
		return int64(n), float64(n), true, true
	case int32:
		return int64(n), float64(n), true, true
	case int64:
		return n, float64(n), true, true
	case uint8:
		return int64(n), float64(n), true, true
	case uint16:
		return int64(n), float64(n), true, true
	case uint32:
		return int64(n), float64(n), true, true
	case uint:
		if uint64(n) > math.MaxInt64 {
			return 0, float64(n), false, true
		}
		return int64(n), float64(n), true, true
	case uint64:
		if n > math.MaxInt64 {
			return 0, float64(n), false, true
		}
		return int64(n), float64(n), true, true
	case float32:
		return 0, float64(n), false, true
	case float64:
		if n == math.Trunc(n) && math.Abs(n) < 1<<62 {
			return int64(n), n, true, true
		}
		return 0, n, false, true
	}
	return 0, 0, false, false
}

// normPattern converts a pattern into patternDoc/patternArr trees, keeping
// the special values and numbers, and turning every other value into what
// bson.Unmarshal would give for it.
func normPattern(v any) (any, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case *special, predicate:
		return x, nil
	case bson.D:
		out := make(patternDoc, 0, len(x))
		for _, e := range x {
			nv, err := normPattern(e.Value)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", e.Key, err)
			}
			out = append(out, patternField{e.Key, nv})
		}
		return out, nil
	case bson.M:
		return normMap(x)
	case map[string]any:
		return normMap(x)
	case bson.Raw:
		var d bson.D
		if err := bson.Unmarshal(x, &d); err != nil {
			return nil, err
		}
		return normPattern(d)
	case bson.A:
		return normSlice([]any(x))
	case []any:
		return normSlice(x)
	}
	if _, _, _, ok := number(v); ok {
		return v, nil
	}
	rv := reflect.ValueOf(v)
	if (rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array) && rv.Type().Elem().Kind() != reflect.Uint8 {
		s := make([]any, rv.Len())
		for i := range s {
			s[i] = rv.Index(i).Interface()
		}
		return normSlice(s)
	}
	// Anything else: what it becomes after a BSON round trip (structs become
	// bson.D, time.Time becomes bson.DateTime, ...).
	b, err := bson.Marshal(bson.D{{Key: "v", Value: v}})
	if err != nil {
		return nil, err
	}
	var d bson.D
	if err := bson.Unmarshal(b, &d); err != nil {
		return nil, err
	}
	switch d[0].Value.(type) {
	case bson.D, bson.A:
		return normPattern(d[0].Value)
	}
	return d[0].Value, nil
}

func normMap[M ~map[string]any](m M) (any, error) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(patternDoc, 0, len(m))
	for _, k := range keys {
		nv, err := normPattern(m[k])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out = append(out, patternField{k, nv})
	}
	return out, nil
}

func normSlice(s []any) (any, error) {
	out := make(patternArr, len(s))
	for i, e := range s {
		nv, err := normPattern(e)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		out[i] = nv
	}
	return out, nil
}
