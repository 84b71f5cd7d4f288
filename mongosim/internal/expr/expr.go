package expr

import (
	"fmt"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// missingValue is the type of Missing.
type missingValue struct{}

func (missingValue) String() string { return "missing" }

// Missing is what an expression evaluates to when it names a field the
// document does not have (or $$REMOVE). It is distinct from BSON null:
// $ifNull treats both as absent, but $project and $addFields omit a field
// whose value is Missing while they keep a null.
var Missing any = missingValue{}

// IsMissing reports whether v is Missing.
func IsMissing(v any) bool { _, ok := v.(missingValue); return ok }

// IsNullish reports whether v is Missing, null or undefined: the values
// most operators answer null for.
func IsNullish(v any) bool {
	switch v.(type) {
	case missingValue, nil, bson.Null, bson.Undefined:
		return true
	}
	return false
}

// Expr is a compiled aggregation expression. It is immutable and safe for
// concurrent use.
type Expr struct {
	eval evalFn
	// constant is set when the expression is a literal, so callers can tell
	// e.g. a $group _id of null from an expression that evaluates to null.
	constant bool
	lit      any
}

type evalFn func(s *scope) (any, error)

// scope is the evaluation state: the document, the caller's variables and
// the variables bound by enclosing $let/$map/$filter/$reduce.
type scope struct {
	root  bson.D
	vars  map[string]any
	local *frame
	now   *any
	// coll is the command's collation (nil: simple), for the comparison
	// operators.
	coll value.Collator
}

type frame struct {
	name string
	val  any
	next *frame
}

func (s *scope) with(name string, v any) *scope {
	c := *s
	c.local = &frame{name: name, val: v, next: s.local}
	return &c
}

func (s *scope) lookup(name string) (any, bool) {
	for f := s.local; f != nil; f = f.next {
		if f.name == name {
			return f.val, true
		}
	}
	v, ok := s.vars[name]
	return v, ok
}

func (s *scope) current() any {
	if v, ok := s.lookup("CURRENT"); ok {
		return v
	}
	return s.root
}

// Compile parses an aggregation expression: a "$field.path", a "$$variable",
// an operator document {$op: args}, an object expression {field: expr, ...},
// an array of expressions, or a literal.
func Compile(spec any) (*Expr, error) {
	fn, err := compile(spec)
	if err != nil {
		return nil, err
	}
	e := &Expr{eval: fn}
	if isLiteral(spec) {
		e.constant, e.lit = true, spec
	}
	return e, nil
}

// MustCompile is Compile for specs known to be valid (tests, built-in
// rewrites); it panics on error and must never see client input.
func MustCompile(spec any) *Expr {
	e, err := Compile(spec)
	if err != nil {
		panic(err)
	}
	return e
}

// Constant reports whether the expression is a literal and its value.
func (e *Expr) Constant() (any, bool) { return e.lit, e.constant }

// Eval evaluates the expression against root (which is also $$CURRENT unless
// vars binds "CURRENT"). vars holds user variables by name without the "$$"
// prefix; "NOW" (a bson.DateTime or time.Time), when present, fixes $$NOW.
// The result may be Missing.
func (e *Expr) Eval(root bson.D, vars map[string]any) (any, error) {
	s := &scope{root: root, vars: vars, now: new(any)}
	if len(vars) > 0 {
		s.coll, _ = vars[collatorVar].(value.Collator)
	}
	return e.eval(s)
}

// collatorVar is the vars key WithCollator uses: no variable name can
// contain a NUL byte, so it never collides with one.
const collatorVar = "\x00collation"

// WithCollator returns a copy of vars that also carries coll, the
// collation the comparison operators ($eq, $lt, $cmp, $in, ...) use.
// A nil coll returns vars unchanged.
func WithCollator(vars map[string]any, coll value.Collator) map[string]any {
	if coll == nil {
		return vars
	}
	out := make(map[string]any, len(vars)+1)
	for k, v := range vars {
		out[k] = v
	}
	out[collatorVar] = coll
	return out
}

// Collator returns the collation WithCollator put into vars, or nil.
func Collator(vars map[string]any) value.Collator {
	c, _ := vars[collatorVar].(value.Collator)
	return c
}

func isLiteral(spec any) bool {
	switch x := spec.(type) {
	case string:
		return !strings.HasPrefix(x, "$")
	case bson.D, bson.M, bson.A, []any:
		return false
	}
	return true
}

func compile(spec any) (evalFn, error) {
	switch x := spec.(type) {
	case string:
		if strings.HasPrefix(x, "$") {
			return compilePath(x)
		}
		return constFn(x), nil
	case bson.M:
		return compile(value.AsDoc(x))
	case bson.D:
		return compileDoc(x)
	case []any:
		return compile(bson.A(x))
	case bson.A:
		fns := make([]evalFn, len(x))
		for i, el := range x {
			fn, err := compile(el)
			if err != nil {
				return nil, err
			}
			fns[i] = fn
		}
		return func(s *scope) (any, error) {
			out := make(bson.A, len(fns))
			for i, fn := range fns {
				v, err := fn(s)
				if err != nil {
					return nil, err
				}
				if IsMissing(v) {
					v = nil
				}
				out[i] = v
			}
			return out, nil
		}, nil
	case bson.Raw:
		return compile(value.AsDoc(x))
	}
	return constFn(spec), nil
}

func constFn(v any) evalFn {
	return func(*scope) (any, error) { return v, nil }
}

func compileDoc(d bson.D) (evalFn, error) {
	if len(d) > 0 && strings.HasPrefix(d[0].Key, "$") {
		if len(d) != 1 {
			return nil, cmderr.New(15983, "an expression specification must contain exactly one field, the name of the expression. Found %d fields in %s", len(d), render(d))
		}
		return compileOperator(d[0].Key, d[0].Value)
	}
	type field struct {
		key string
		fn  evalFn
	}
	fields := make([]field, 0, len(d))
	seen := map[string]bool{}
	for _, e := range d {
		if strings.HasPrefix(e.Key, "$") {
			return nil, cmderr.New(16404, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
		}
		if e.Key == "" {
			return nil, cmderr.New(16410, "FieldPath field names may not be empty strings.")
		}
		if strings.Contains(e.Key, ".") {
			return nil, cmderr.New(16412, "FieldPath field names may not contain '.'. Consider using $getField or $setField.")
		}
		if seen[e.Key] {
			return nil, cmderr.New(16406, "duplicate field name specified in object literal: %s", render(d))
		}
		seen[e.Key] = true
		fn, err := compile(e.Value)
		if err != nil {
			return nil, err
		}
		fields = append(fields, field{e.Key, fn})
	}
	return func(s *scope) (any, error) {
		out := make(bson.D, 0, len(fields))
		for _, f := range fields {
			v, err := f.fn(s)
			if err != nil {
				return nil, err
			}
			if IsMissing(v) {
				continue
			}
			out = append(out, bson.E{Key: f.key, Value: v})
		}
		return out, nil
	}, nil
}

// compilePath compiles "$a.b" and "$$var.a.b".
func compilePath(p string) (evalFn, error) {
	if p == "$" {
		return nil, cmderr.New(16872, "'$' by itself is not a valid FieldPath")
	}
	if strings.HasPrefix(p, "$$") {
		name, rest, _ := strings.Cut(p[2:], ".")
		if err := checkVarName(name, true); err != nil {
			return nil, err
		}
		var parts []string
		if rest != "" || strings.Contains(p[2:], ".") {
			var err error
			if parts, err = splitPath(rest); err != nil {
				return nil, err
			}
		}
		get := varGetter(name)
		if get == nil {
			return nil, cmderr.Unsupported("system variable $$" + name)
		}
		if len(parts) == 0 {
			return get, nil
		}
		return func(s *scope) (any, error) {
			v, err := get(s)
			if err != nil {
				return nil, err
			}
			return walk(v, parts), nil
		}, nil
	}
	parts, err := splitPath(p[1:])
	if err != nil {
		return nil, err
	}
	return func(s *scope) (any, error) {
		return walk(s.current(), parts), nil
	}, nil
}

func splitPath(p string) ([]string, error) {
	if p == "" {
		return nil, cmderr.New(40352, "FieldPath cannot be constructed with empty string")
	}
	parts := strings.Split(p, ".")
	for _, part := range parts {
		if part == "" {
			return nil, cmderr.New(15998, "FieldPath field names may not be empty strings.")
		}
		if strings.HasPrefix(part, "$") {
			return nil, cmderr.New(16410, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
		}
	}
	return parts, nil
}

func varGetter(name string) evalFn {
	switch name {
	case "ROOT":
		return func(s *scope) (any, error) { return s.root, nil }
	case "CURRENT":
		return func(s *scope) (any, error) { return s.current(), nil }
	case "REMOVE":
		return constFn(Missing)
	case "NOW":
		return func(s *scope) (any, error) {
			if v, ok := s.vars["NOW"]; ok {
				if t, ok := v.(time.Time); ok {
					return bson.NewDateTimeFromTime(t), nil
				}
				return v, nil
			}
			if s.now != nil && *s.now == nil {
				*s.now = bson.NewDateTimeFromTime(time.Now())
			}
			if s.now == nil {
				return bson.NewDateTimeFromTime(time.Now()), nil
			}
			return *s.now, nil
		}
	case "CLUSTER_TIME":
		// The caller binds it to the command's cluster time; without one
		// (a standalone mongod) it is unavailable.
		return func(s *scope) (any, error) {
			if v, ok := s.vars["CLUSTER_TIME"]; ok {
				return v, nil
			}
			return nil, cmderr.New(51144, "Builtin variable '$$CLUSTER_TIME' is not available")
		}
	case "SEARCH_META", "USER_ROLES", "SEARCH_SCORE":
		return nil
	case "DESCEND", "PRUNE", "KEEP":
		return constFn(name)
	}
	return func(s *scope) (any, error) {
		if v, ok := s.lookup(name); ok {
			return v, nil
		}
		return nil, cmderr.New(17276, "Use of undefined variable: %s", name)
	}
}

// checkVarName validates a variable name: user variables must start with a
// lower-case letter or a non-ASCII character; system ones are upper-case.
func checkVarName(name string, reading bool) error {
	if name == "" {
		return cmderr.New(9, "empty variable names are not allowed")
	}
	c := name[0]
	if reading && c >= 'A' && c <= 'Z' {
		return nil // system variable, checked by varGetter
	}
	if !(c >= 'a' && c <= 'z') && c < 0x80 {
		return cmderr.New(9, "'%s' starts with an invalid character for a user variable name", name)
	}
	for i := 0; i < len(name); i++ {
		ch := name[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '_' || ch >= 0x80) {
			return cmderr.New(9, "'%s' contains an invalid character for a variable name: '%c'", name, ch)
		}
	}
	return nil
}

// walk follows an aggregation field path: arrays are traversed, giving an
// array of the values found in their (document) elements.
func walk(v any, parts []string) any {
	for i, part := range parts {
		switch x := v.(type) {
		case bson.D:
			f, ok := value.Get(x, part)
			if !ok {
				return Missing
			}
			v = f
		case bson.M:
			return walk(value.AsDoc(x), parts[i:])
		case bson.A:
			return walkArray(x, parts[i:])
		case []any:
			return walkArray(bson.A(x), parts[i:])
		default:
			return Missing
		}
	}
	return v
}

func walkArray(a bson.A, parts []string) any {
	out := bson.A{}
	for _, el := range a {
		switch x := el.(type) {
		case bson.D, bson.M:
			if r := walk(x, parts); !IsMissing(r) {
				out = append(out, r)
			}
		case bson.A:
			out = append(out, walkArray(x, parts))
		case []any:
			out = append(out, walkArray(bson.A(x), parts))
		}
	}
	return out
}

// Truthy is aggregation's notion of truth: false, null, undefined, Missing
// and numeric zero are false; everything else (including "" and []) is true.
func Truthy(v any) bool {
	switch x := v.(type) {
	case missingValue, nil, bson.Null, bson.Undefined:
		return false
	case bool:
		return x
	case int32:
		return x != 0
	case int64:
		return x != 0
	case int:
		return x != 0
	case float64:
		return x != 0
	case bson.Decimal128:
		f, _ := value.ToFloat(x)
		return f != 0
	}
	return true
}

// CompareValues orders two values the way aggregation expressions do: like
// value.Compare, except that Missing sorts below null.
func CompareValues(a, b any) int { return CompareValuesWith(a, b, nil) }

// CompareValuesWith is CompareValues under a collation (nil: simple).
func CompareValuesWith(a, b any, coll value.Collator) int {
	am, bm := IsMissing(a), IsMissing(b)
	return value.CompareLowWith(a, b, am, bm, coll)
}

// typeName is $type's answer, including "missing".
func typeName(v any) string {
	if IsMissing(v) {
		return "missing"
	}
	return value.TypeName(v)
}

// render formats a value roughly as the server's error messages do.
func render(v any) string {
	switch x := v.(type) {
	case missingValue:
		return "missing"
	case nil, bson.Null:
		return "null"
	case string:
		return fmt.Sprintf("%q", x)
	case bson.D:
		var b strings.Builder
		b.WriteString("{")
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(e.Key)
			b.WriteString(": ")
			b.WriteString(render(e.Value))
		}
		b.WriteString("}")
		return b.String()
	case bson.M:
		return render(value.AsDoc(x))
	case bson.A:
		var b strings.Builder
		b.WriteString("[")
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(render(e))
		}
		b.WriteString("]")
		return b.String()
	case []any:
		return render(bson.A(x))
	case bson.DateTime:
		return x.Time().UTC().Format("2006-01-02T15:04:05.000Z")
	}
	return fmt.Sprint(v)
}

// Render formats a value the way mongosim's error messages show values.
func Render(v any) string { return render(v) }

// CheckUserVarName validates the name of a user variable being defined
// (a command's or $let's let), as the server does.
func CheckUserVarName(name string) error { return checkVarName(name, false) }

// CheckConstant rejects a command-level let expression that reads the
// document ("$field", "$$ROOT", "$$CURRENT"): those run before any document
// is seen. $literal arguments are not inspected.
func CheckConstant(spec any) error {
	switch x := spec.(type) {
	case string:
		if strings.HasPrefix(x, "$") && (!strings.HasPrefix(x, "$$") ||
			x == "$$ROOT" || x == "$$CURRENT" || strings.HasPrefix(x, "$$ROOT.") || strings.HasPrefix(x, "$$CURRENT.")) {
			return cmderr.New(4890500, "Command let Expression tried to access a field, but this is not allowed because command let expressions run before the query examines any documents.")
		}
	case bson.D:
		for _, e := range x {
			if e.Key == "$literal" {
				continue
			}
			if err := CheckConstant(e.Value); err != nil {
				return err
			}
		}
	case bson.A:
		for _, el := range x {
			if err := CheckConstant(el); err != nil {
				return err
			}
		}
	}
	return nil
}

// CheckVariables reports, as the server does when it parses a command, a
// user variable that spec reads ("$$name") but neither defined (the
// command's let) nor any $let, $map, $filter or $reduce inside spec binds.
// It is conservative: a name bound anywhere in spec counts as bound
// everywhere, so it never rejects a valid expression.
func CheckVariables(spec any, defined map[string]any) error {
	bound := map[string]bool{"this": true, "value": true}
	collectBound(spec, bound)
	return checkUses(spec, defined, bound)
}

func collectBound(spec any, bound map[string]bool) {
	switch x := spec.(type) {
	case bson.D:
		for _, e := range x {
			switch e.Key {
			case "$literal":
				continue
			case "$let":
				if d, ok := e.Value.(bson.D); ok {
					if vars, ok := value.Get(d, "vars"); ok {
						if vd, ok := vars.(bson.D); ok {
							for _, v := range vd {
								bound[v.Key] = true
							}
						}
					}
				}
			case "as":
				if s, ok := e.Value.(string); ok {
					bound[s] = true
				}
			}
			collectBound(e.Value, bound)
		}
	case bson.A:
		for _, el := range x {
			collectBound(el, bound)
		}
	}
}

func checkUses(spec any, defined map[string]any, bound map[string]bool) error {
	switch x := spec.(type) {
	case string:
		if !strings.HasPrefix(x, "$$") || len(x) < 3 {
			return nil
		}
		name, _, _ := strings.Cut(x[2:], ".")
		if c := name[0]; c >= 'A' && c <= 'Z' {
			return nil // system variable
		}
		if _, ok := defined[name]; ok || bound[name] {
			return nil
		}
		return cmderr.New(17276, "Use of undefined variable: %s", name)
	case bson.D:
		for _, e := range x {
			if e.Key == "$literal" {
				continue
			}
			if err := checkUses(e.Value, defined, bound); err != nil {
				return err
			}
		}
	case bson.A:
		for _, el := range x {
			if err := checkUses(el, defined, bound); err != nil {
				return err
			}
		}
	}
	return nil
}
