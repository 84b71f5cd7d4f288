package agg

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/expr"
	"github.com/sturdy-go/sturdy/mongosim/internal/query"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// namespace is a stage's target collection; db "" means the pipeline's.
type namespace struct{ db, coll string }

func (n namespace) resolve(env Env) (string, string) {
	if n.db == "" {
		return env.DB, n.coll
	}
	return n.db, n.coll
}

// parseNamespace reads "coll" or {db: "d", coll: "c"}.
func parseNamespace(stageName, field string, v any) (namespace, error) {
	switch x := v.(type) {
	case string:
		if x == "" {
			return namespace{}, cmderr.New(cmderr.InvalidNamespace, "Invalid %s namespace: empty collection name", stageName)
		}
		return namespace{coll: x}, nil
	}
	d, ok := value.ToDoc(v)
	if !ok {
		return namespace{}, cmderr.New(cmderr.FailedToParse, "%s '%s' must be a string or an object, found %s", stageName, field, value.TypeName(v))
	}
	var ns namespace
	for _, e := range d {
		s, ok := e.Value.(string)
		if !ok {
			return namespace{}, cmderr.New(cmderr.TypeMismatch, "BSON field '%s.%s.%s' is the wrong type '%s', expected type 'string'", stageName, field, e.Key, value.TypeName(e.Value))
		}
		switch e.Key {
		case "db":
			ns.db = s
		case "coll":
			ns.coll = s
		default:
			return namespace{}, cmderr.New(40415, "BSON field '%s.%s.%s' is an unknown field.", stageName, field, e.Key)
		}
	}
	if ns.coll == "" {
		return namespace{}, cmderr.New(cmderr.InvalidNamespace, "Invalid %s namespace: missing collection name", stageName)
	}
	return ns, nil
}

type lookupStage struct {
	from         namespace
	localField   string
	foreignField string
	as           []string
	let          []letVar
	pipeline     *Pipeline
	hasFrom      bool
}

type letVar struct {
	name string
	e    *expr.Expr
}

func compileLookup(arg any) (stage, error) {
	spec, ok := value.ToDoc(arg)
	if !ok {
		return nil, cmderr.New(cmderr.FailedToParse, "the $lookup stage specification must be an object, but found %s", value.TypeName(arg))
	}
	l := &lookupStage{}
	var haveLocal, haveForeign, haveAs, havePipeline bool
	for _, e := range spec {
		switch e.Key {
		case "from":
			ns, err := parseNamespace("$lookup", "from", e.Value)
			if err != nil {
				return nil, err
			}
			l.from, l.hasFrom = ns, true
		case "localField", "foreignField", "as":
			s, ok := e.Value.(string)
			if !ok {
				return nil, cmderr.New(cmderr.FailedToParse, "$lookup argument '%s: %s' must be a string, is type %s", e.Key, expr.Render(e.Value), value.TypeName(e.Value))
			}
			if _, err := checkFieldPath("$lookup", s); err != nil {
				return nil, err
			}
			switch e.Key {
			case "localField":
				l.localField, haveLocal = s, true
			case "foreignField":
				l.foreignField, haveForeign = s, true
			case "as":
				l.as, _ = checkFieldPath("$lookup", s)
				haveAs = true
			}
		case "let":
			d, ok := value.ToDoc(e.Value)
			if !ok {
				return nil, cmderr.New(cmderr.FailedToParse, "$lookup argument 'let' must be an object, is type %s", value.TypeName(e.Value))
			}
			for _, v := range d {
				if err := checkUserVar(v.Key); err != nil {
					return nil, err
				}
				x, err := expr.Compile(v.Value)
				if err != nil {
					return nil, err
				}
				l.let = append(l.let, letVar{v.Key, x})
			}
		case "pipeline":
			a, ok := value.ToArray(e.Value)
			if !ok {
				return nil, cmderr.New(cmderr.FailedToParse, "$lookup argument 'pipeline' must be an array, is type %s", value.TypeName(e.Value))
			}
			p, err := compilePipeline(a, inLookup)
			if err != nil {
				return nil, err
			}
			l.pipeline, havePipeline = p, true
		default:
			return nil, cmderr.New(cmderr.FailedToParse, "unknown argument to $lookup: %s", e.Key)
		}
	}
	if !haveAs {
		return nil, cmderr.New(cmderr.FailedToParse, "must specify 'as' field for a $lookup")
	}
	if haveLocal != haveForeign {
		return nil, cmderr.New(cmderr.FailedToParse, "$lookup requires both or neither of 'localField' and 'foreignField' to be specified")
	}
	if !haveLocal && !havePipeline {
		return nil, cmderr.New(cmderr.FailedToParse, "$lookup requires either 'pipeline' or both 'localField' and 'foreignField' to be specified")
	}
	if !l.hasFrom && !(havePipeline && len(l.pipeline.names) > 0 && l.pipeline.names[0] == "$documents") {
		return nil, cmderr.New(cmderr.FailedToParse, "must specify 'from' field for a $lookup")
	}
	return l, nil
}

// checkUserVar validates a let variable name as the server does.
func checkUserVar(name string) error {
	if name == "" {
		return cmderr.New(cmderr.FailedToParse, "empty variable names are not allowed")
	}
	c := name[0]
	if !(c >= 'a' && c <= 'z') && c < 0x80 {
		return cmderr.New(cmderr.FailedToParse, "'%s' starts with an invalid character for a user variable name", name)
	}
	for i := 0; i < len(name); i++ {
		ch := name[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '_' || ch >= 0x80) {
			return cmderr.New(cmderr.FailedToParse, "'%s' contains an invalid character for a variable name: '%c'", name, ch)
		}
	}
	return nil
}

func (l *lookupStage) run(rt *runtime, in []bson.D) ([]bson.D, error) {
	var foreign []bson.D
	if l.hasFrom {
		cat, err := rt.catalog("$lookup")
		if err != nil {
			return nil, err
		}
		db, coll := l.from.resolve(rt.env)
		if foreign, err = cat.Read(db, coll); err != nil {
			return nil, err
		}
	}
	var localPath *expr.Expr
	if l.localField != "" {
		var err error
		if localPath, err = expr.Compile("$" + l.localField); err != nil {
			return nil, err
		}
	}
	out := make([]bson.D, 0, len(in))
	for i, doc := range in {
		if err := rt.checkEvery(i); err != nil {
			return nil, err
		}
		matches := foreign
		if localPath != nil {
			var err error
			if matches, err = l.equalityMatches(doc, localPath, foreign, rt.env.Collator); err != nil {
				return nil, err
			}
		}
		if l.pipeline != nil {
			vars := map[string]any{}
			for _, lv := range l.let {
				v, err := lv.e.Eval(doc, rt.vars)
				if err != nil {
					return nil, err
				}
				if expr.IsMissing(v) {
					v = nil
				}
				vars[lv.name] = v
			}
			var err error
			if matches, err = l.pipeline.run(rt.withVars(vars), matches); err != nil {
				return nil, err
			}
		}
		joined := make(bson.A, len(matches))
		for j, m := range matches {
			joined[j] = m
		}
		out = append(out, setPath(doc, l.as, joined))
	}
	return out, nil
}

// equalityMatches returns the foreign documents whose foreignField equals
// the local value, or any element of it when it is an array; a missing local
// value matches null and missing foreign fields.
func (l *lookupStage) equalityMatches(doc bson.D, localPath *expr.Expr, foreign []bson.D, coll value.Collator) ([]bson.D, error) {
	v, err := localPath.Eval(doc, nil)
	if err != nil {
		return nil, err
	}
	var vals bson.A
	switch {
	case expr.IsMissing(v):
		vals = bson.A{nil}
	default:
		if a, ok := value.ToArray(v); ok {
			vals = a
		} else {
			vals = bson.A{v}
		}
	}
	// regular expressions are compared as values, not used as patterns
	var clauses bson.A
	for _, x := range vals {
		clauses = append(clauses, bson.D{{Key: l.foreignField, Value: bson.D{{Key: "$eq", Value: x}}}})
	}
	if len(clauses) == 0 {
		return nil, nil
	}
	f, err := query.CompileFilterWith(bson.D{{Key: "$or", Value: clauses}}, query.Options{Collator: coll})
	if err != nil {
		return nil, err
	}
	var out []bson.D
	for _, d := range foreign {
		if f.Match(d) {
			out = append(out, d)
		}
	}
	return out, nil
}

type facetStage struct {
	names     []string
	pipelines []*Pipeline
}

func compileFacet(arg any) (stage, error) {
	spec, ok := value.ToDoc(arg)
	if !ok {
		return nil, cmderr.New(15947, "the $facet specification must be a non-empty object")
	}
	if len(spec) == 0 {
		return nil, cmderr.New(40169, "the $facet specification must be a non-empty object")
	}
	f := &facetStage{}
	for _, e := range spec {
		if e.Key == "" || strings.HasPrefix(e.Key, "$") || strings.Contains(e.Key, ".") {
			return nil, cmderr.New(40174, "$facet pipeline names must be non-empty, not start with '$' and not contain '.': %s", e.Key)
		}
		a, ok := value.ToArray(e.Value)
		if !ok {
			return nil, cmderr.New(40170, "arguments to $facet must be arrays, %s is type %s", e.Key, value.TypeName(e.Value))
		}
		if len(a) == 0 {
			return nil, cmderr.New(40171, "sub-pipeline in $facet stage cannot be empty: %s", e.Key)
		}
		p, err := compilePipeline(a, inFacet)
		if err != nil {
			return nil, err
		}
		f.names = append(f.names, e.Key)
		f.pipelines = append(f.pipelines, p)
	}
	return f, nil
}

func (f *facetStage) run(rt *runtime, in []bson.D) ([]bson.D, error) {
	out := make(bson.D, 0, len(f.names))
	for i, p := range f.pipelines {
		docs, err := p.run(rt, in)
		if err != nil {
			return nil, err
		}
		a := make(bson.A, len(docs))
		for j, d := range docs {
			a[j] = d
		}
		out = append(out, bson.E{Key: f.names[i], Value: a})
	}
	return []bson.D{out}, nil
}

type unionWithStage struct {
	ns       namespace
	pipeline *Pipeline
}

func compileUnionWith(arg any) (stage, error) {
	u := &unionWithStage{}
	if s, ok := arg.(string); ok {
		ns, err := parseNamespace("$unionWith", "coll", s)
		if err != nil {
			return nil, err
		}
		u.ns = ns
		return u, nil
	}
	spec, ok := value.ToDoc(arg)
	if !ok {
		return nil, cmderr.New(cmderr.FailedToParse, "the $unionWith stage specification must be an object or string, but found %s", value.TypeName(arg))
	}
	haveColl := false
	for _, e := range spec {
		switch e.Key {
		case "coll":
			ns, err := parseNamespace("$unionWith", "coll", e.Value)
			if err != nil {
				return nil, err
			}
			u.ns, haveColl = ns, true
		case "pipeline":
			a, ok := value.ToArray(e.Value)
			if !ok {
				return nil, cmderr.New(cmderr.TypeMismatch, "BSON field '$unionWith.pipeline' is the wrong type '%s', expected type 'array'", value.TypeName(e.Value))
			}
			p, err := compilePipeline(a, inUnionWith)
			if err != nil {
				return nil, err
			}
			u.pipeline = p
		default:
			return nil, cmderr.New(40415, "BSON field '$unionWith.%s' is an unknown field.", e.Key)
		}
	}
	if !haveColl && (u.pipeline == nil || len(u.pipeline.names) == 0 || u.pipeline.names[0] != "$documents") {
		return nil, cmderr.New(40414, "BSON field '$unionWith.coll' is missing but a required field")
	}
	return u, nil
}

func (u *unionWithStage) run(rt *runtime, in []bson.D) ([]bson.D, error) {
	var other []bson.D
	if u.ns.coll != "" {
		cat, err := rt.catalog("$unionWith")
		if err != nil {
			return nil, err
		}
		db, coll := u.ns.resolve(rt.env)
		if other, err = cat.Read(db, coll); err != nil {
			return nil, err
		}
	}
	if u.pipeline != nil {
		var err error
		if other, err = u.pipeline.run(rt, other); err != nil {
			return nil, err
		}
	}
	out := make([]bson.D, 0, len(in)+len(other))
	out = append(out, in...)
	return append(out, other...), nil
}
