package agg

import (
	"math"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/expr"
	"github.com/sturdy-go/sturdy/mongosim/internal/query"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// matchStage is $match. Top-level $expr clauses (also inside a top-level
// $and) are evaluated here rather than by package query, so that they see
// the pipeline's variables ($lookup's let, the command's let) and so that
// their evaluation errors fail the command as on the server.
type matchStage struct {
	filter *query.Filter
	rest   bson.D // the filter without $expr, to compile under a collation
	exprs  []*expr.Expr
}

func compileMatch(arg any) (stage, error) {
	spec, ok := value.ToDoc(arg)
	if !ok {
		return nil, cmderr.New(15959, "the match filter must be an expression in an object")
	}
	if HasText(spec) {
		// The server answers a leading $text $match from the text index
		// before the pipeline runs; anywhere else it is refused.
		return nil, cmderr.New(17313, "$match with $text is only allowed as the first pipeline stage")
	}
	rest, exprSpecs := splitExpr(spec)
	m := &matchStage{}
	for _, es := range exprSpecs {
		e, err := expr.Compile(es)
		if err != nil {
			return nil, err
		}
		m.exprs = append(m.exprs, e)
	}
	f, err := query.CompileFilter(rest)
	if err != nil {
		return nil, err
	}
	m.filter, m.rest = f, rest
	return m, nil
}

// HasText reports whether a $match filter has a $text, at the top level or
// in a top-level $and.
func HasText(spec bson.D) bool {
	for _, e := range spec {
		switch e.Key {
		case "$text":
			return true
		case "$and":
			clauses, _ := value.ToArray(e.Value)
			for _, c := range clauses {
				if cd, ok := value.ToDoc(c); ok && HasText(cd) {
					return true
				}
			}
		}
	}
	return false
}

// splitExpr takes the top-level $expr clauses out of a filter.
func splitExpr(spec bson.D) (bson.D, []any) {
	var rest bson.D
	var exprs []any
	for _, e := range spec {
		switch e.Key {
		case "$expr":
			exprs = append(exprs, e.Value)
			continue
		case "$and":
			if clauses, ok := value.ToArray(e.Value); ok && len(clauses) > 0 {
				var kept bson.A
				for _, c := range clauses {
					if cd, ok := value.ToDoc(c); ok {
						r, ex := splitExpr(cd)
						exprs = append(exprs, ex...)
						if len(r) > 0 || len(ex) == 0 {
							kept = append(kept, r)
						}
						continue
					}
					kept = append(kept, c)
				}
				if len(kept) > 0 {
					rest = append(rest, bson.E{Key: "$and", Value: kept})
				}
				continue
			}
		}
		rest = append(rest, e)
	}
	return rest, exprs
}

func (m *matchStage) run(rt *runtime, in []bson.D) ([]bson.D, error) {
	filter := m.filter
	if rt.env.Collator != nil {
		var err error
		if filter, err = query.CompileFilterWith(m.rest, query.Options{Collator: rt.env.Collator}); err != nil {
			return nil, err
		}
	}
	out := make([]bson.D, 0, len(in))
docs:
	for i, doc := range in {
		if err := rt.checkEvery(i); err != nil {
			return nil, err
		}
		if !filter.Match(doc) {
			continue
		}
		for _, e := range m.exprs {
			v, err := e.Eval(doc, rt.vars)
			if err != nil {
				return nil, err
			}
			if !expr.Truthy(v) {
				continue docs
			}
		}
		out = append(out, doc)
	}
	return out, nil
}

type sortStage struct {
	sort *query.Sort
	spec bson.D // to compile under a collation
}

func compileSort(arg any) (stage, error) {
	spec, ok := value.ToDoc(arg)
	if !ok {
		return nil, cmderr.New(15973, "the $sort key specification must be an object")
	}
	if len(spec) == 0 {
		return nil, cmderr.New(15976, "$sort stage must have at least one sort key")
	}
	s, err := query.CompileSort(spec)
	if err != nil {
		return nil, err
	}
	return &sortStage{sort: s, spec: spec}, nil
}

func (s *sortStage) run(rt *runtime, in []bson.D) ([]bson.D, error) {
	if s.sort.NeedsTextScore() {
		for _, d := range in {
			if _, err := expr.TextScore(d); err != nil {
				return nil, err
			}
		}
	}
	out := append([]bson.D(nil), in...)
	sorter := s.sort
	if rt.env.Collator != nil {
		var err error
		if sorter, err = query.CompileSortWith(s.spec, rt.env.Collator); err != nil {
			return nil, err
		}
	}
	sorter.SortDocs(out)
	return out, nil
}

// integralArg reads a stage's numeric argument that must be a whole number.
func integralArg(stageName string, arg any) (int64, error) {
	if !value.IsNumber(arg) {
		return 0, cmderr.New(15957, "the %s must be specified as a number", strings.TrimPrefix(stageName, "$"))
	}
	n, ok := value.ToInt64(arg)
	if !ok {
		return 0, cmderr.New(cmderr.FailedToParse, "invalid argument to %s stage: Expected an integer: %s: %s", stageName, stageName, expr.Render(arg))
	}
	return n, nil
}

type limitStage struct{ n int64 }

func compileLimit(arg any) (stage, error) {
	n, err := integralArg("$limit", arg)
	if err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, cmderr.New(15958, "invalid argument to $limit stage: Expected a positive number in: $limit: %d", n)
	}
	return &limitStage{n: n}, nil
}

func (s *limitStage) run(rt *runtime, in []bson.D) ([]bson.D, error) {
	if int64(len(in)) > s.n {
		return in[:s.n:s.n], nil
	}
	return in, nil
}

type skipStage struct{ n int64 }

func compileSkip(arg any) (stage, error) {
	n, err := integralArg("$skip", arg)
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, cmderr.New(15956, "invalid argument to $skip stage: Expected a non-negative number in: $skip: %d", n)
	}
	return &skipStage{n: n}, nil
}

func (s *skipStage) run(rt *runtime, in []bson.D) ([]bson.D, error) {
	if int64(len(in)) <= s.n {
		return nil, nil
	}
	return in[s.n:], nil
}

type countStage struct{ field string }

func compileCount(arg any) (stage, error) {
	name, ok := arg.(string)
	if !ok {
		return nil, cmderr.New(40156, "the count field must be a non-empty string")
	}
	switch {
	case name == "":
		return nil, cmderr.New(40157, "the count field must be a non-empty string")
	case strings.HasPrefix(name, "$"):
		return nil, cmderr.New(40158, "the count field cannot be a $-prefixed path")
	case strings.Contains(name, "."):
		return nil, cmderr.New(40160, "the count field cannot contain '.'")
	case strings.ContainsRune(name, 0):
		return nil, cmderr.New(40159, "the count field cannot contain a null byte")
	}
	return &countStage{field: name}, nil
}

func (s *countStage) run(rt *runtime, in []bson.D) ([]bson.D, error) {
	if len(in) == 0 {
		return nil, nil
	}
	var n any = int32(len(in))
	if len(in) > math.MaxInt32 {
		n = int64(len(in))
	}
	return []bson.D{{{Key: s.field, Value: n}}}, nil
}

type unwindStage struct {
	path       []string
	indexField []string
	preserve   bool
}

func compileUnwind(arg any) (stage, error) {
	u := &unwindStage{}
	var path string
	switch x := arg.(type) {
	case string:
		path = x
	default:
		d, ok := value.ToDoc(arg)
		if !ok {
			return nil, cmderr.New(15981, "expected either a string or an object as specification for $unwind stage, got %s", value.TypeName(arg))
		}
		for _, e := range d {
			switch e.Key {
			case "path":
				s, ok := e.Value.(string)
				if !ok {
					return nil, cmderr.New(28808, "expected a string as the path for $unwind stage, got %s", value.TypeName(e.Value))
				}
				path = s
			case "includeArrayIndex":
				s, ok := e.Value.(string)
				if !ok {
					return nil, cmderr.New(28810, "expected a non-empty string for the includeArrayIndex option to $unwind stage, got %s", value.TypeName(e.Value))
				}
				if s == "" {
					return nil, cmderr.New(28810, "expected a non-empty string for the includeArrayIndex option to $unwind stage")
				}
				if strings.HasPrefix(s, "$") {
					return nil, cmderr.New(28822, "includeArrayIndex option to $unwind stage should not be prefixed with a '$': %s", s)
				}
				parts, err := checkFieldPath("$unwind", s)
				if err != nil {
					return nil, err
				}
				u.indexField = parts
			case "preserveNullAndEmptyArrays":
				b, ok := e.Value.(bool)
				if !ok {
					return nil, cmderr.New(28809, "expected a boolean for the preserveNullAndEmptyArrays option to $unwind stage, got %s", value.TypeName(e.Value))
				}
				u.preserve = b
			default:
				return nil, cmderr.New(28811, "unrecognized option to $unwind stage: %s", e.Key)
			}
		}
		if path == "" {
			if _, ok := value.Get(d, "path"); !ok {
				return nil, cmderr.New(28812, "no path specified to $unwind stage")
			}
		}
	}
	if path == "" {
		return nil, cmderr.New(40352, "FieldPath cannot be constructed with empty string")
	}
	if !strings.HasPrefix(path, "$") {
		return nil, cmderr.New(28818, "path option to $unwind stage should be prefixed with a '$': %s", path)
	}
	parts, err := checkFieldPath("$unwind", path[1:])
	if err != nil {
		return nil, err
	}
	u.path = parts
	return u, nil
}

func (u *unwindStage) run(rt *runtime, in []bson.D) ([]bson.D, error) {
	out := make([]bson.D, 0, len(in))
	for i, doc := range in {
		if err := rt.checkEvery(i); err != nil {
			return nil, err
		}
		v, ok := getPath(doc, u.path)
		arr, isArray := value.ToArray(v)
		switch {
		case isArray && len(arr) > 0:
			for j, el := range arr {
				d := setPath(doc, u.path, el)
				if u.indexField != nil {
					d = setPath(d, u.indexField, int64(j))
				}
				out = append(out, d)
			}
		case !ok || v == nil || isArray || isNullValue(v):
			if !u.preserve {
				continue
			}
			d := doc
			if isArray { // an empty array is removed
				d = removePath(doc, u.path)
			}
			if u.indexField != nil {
				d = setPath(d, u.indexField, nil)
			}
			out = append(out, d)
		default: // a non-array value unwinds as itself
			d := doc
			if u.indexField != nil {
				d = setPath(d, u.indexField, nil)
			}
			out = append(out, d)
		}
	}
	return out, nil
}

func isNullValue(v any) bool {
	switch v.(type) {
	case nil, bson.Null, bson.Undefined:
		return true
	}
	return false
}

type replaceRootStage struct {
	name    string
	newRoot *expr.Expr
}

func compileReplaceRoot(name string, arg any) (stage, error) {
	spec := arg
	if name == "$replaceRoot" {
		d, ok := value.ToDoc(arg)
		if !ok {
			return nil, cmderr.New(40228, "expected an object as specification for $replaceRoot stage, got %s", value.TypeName(arg))
		}
		spec = nil
		found := false
		for _, e := range d {
			if e.Key != "newRoot" {
				return nil, cmderr.New(40415, "BSON field '$replaceRoot.%s' is an unknown field.", e.Key)
			}
			spec, found = e.Value, true
		}
		if !found {
			return nil, cmderr.New(40414, "BSON field '$replaceRoot.newRoot' is missing but a required field")
		}
	}
	e, err := expr.Compile(spec)
	if err != nil {
		return nil, err
	}
	return &replaceRootStage{name: name, newRoot: e}, nil
}

func (s *replaceRootStage) run(rt *runtime, in []bson.D) ([]bson.D, error) {
	return rt.mapDocs(in, func(doc bson.D) (bson.D, error) {
		v, err := s.newRoot.Eval(doc, rt.vars)
		if err != nil {
			return nil, err
		}
		d, ok := value.ToDoc(v)
		if !ok {
			return nil, cmderr.New(40228, "'newRoot' expression must evaluate to an object, but resulting value was: %s. Type of resulting value: '%s'. Input document: %s",
				expr.Render(v), typeNameOf(v), expr.Render(doc))
		}
		return d, nil
	})
}

func typeNameOf(v any) string {
	if expr.IsMissing(v) {
		return "missing"
	}
	return value.TypeName(v)
}

// compileSortByCount rewrites {$sortByCount: e} to $group + $sort.
func compileSortByCount(arg any) (stage, error) {
	switch x := arg.(type) {
	case string:
		if !strings.HasPrefix(x, "$") {
			return nil, cmderr.New(40148, "the sortByCount field must be defined as a $-prefixed path or an expression")
		}
	default:
		d, ok := value.ToDoc(arg)
		if !ok || len(d) == 0 || !strings.HasPrefix(d[0].Key, "$") {
			return nil, cmderr.New(40149, "the sortByCount field must be specified as a string or as an object")
		}
	}
	g, err := compileGroup(bson.D{{Key: "_id", Value: arg}, {Key: "count", Value: bson.D{{Key: "$sum", Value: int32(1)}}}})
	if err != nil {
		return nil, err
	}
	s, err := compileSort(bson.D{{Key: "count", Value: int32(-1)}})
	if err != nil {
		return nil, err
	}
	return &seqStage{stages: []stage{g, s}}, nil
}

// seqStage runs stages one after the other (stages defined by rewriting).
type seqStage struct{ stages []stage }

func (s *seqStage) run(rt *runtime, in []bson.D) ([]bson.D, error) {
	var err error
	for _, st := range s.stages {
		if in, err = st.run(rt, in); err != nil {
			return nil, err
		}
	}
	return in, nil
}

type documentsStage struct{ docs *expr.Expr }

func compileDocuments(arg any) (stage, error) {
	e, err := expr.Compile(arg)
	if err != nil {
		return nil, err
	}
	return &documentsStage{docs: e}, nil
}

func (s *documentsStage) run(rt *runtime, _ []bson.D) ([]bson.D, error) {
	v, err := s.docs.Eval(bson.D{}, rt.vars)
	if err != nil {
		return nil, err
	}
	a, ok := value.ToArray(v)
	if !ok {
		return nil, cmderr.New(5858203, "error during lookup: $documents requires an array of objects, found %s", typeNameOf(v))
	}
	out := make([]bson.D, 0, len(a))
	for _, el := range a {
		d, ok := value.ToDoc(el)
		if !ok {
			return nil, cmderr.New(40228, "$documents requires an array of objects, found an element of type %s", typeNameOf(el))
		}
		out = append(out, d)
	}
	return out, nil
}
