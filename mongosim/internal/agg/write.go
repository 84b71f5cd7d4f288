package agg

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/expr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

type outStage struct{ ns namespace }

func compileOut(arg any) (stage, error) {
	if s, ok := arg.(string); ok {
		ns, err := parseNamespace("$out", "coll", s)
		if err != nil {
			return nil, err
		}
		return &outStage{ns: ns}, nil
	}
	spec, ok := value.ToDoc(arg)
	if !ok {
		return nil, cmderr.New(16990, "$out only supports a string or object argument, not %s", value.TypeName(arg))
	}
	for _, e := range spec {
		if e.Key == "timeseries" {
			return nil, cmderr.Unsupported("$out to a time-series collection")
		}
	}
	ns, err := parseNamespace("$out", "coll", spec)
	if err != nil {
		return nil, err
	}
	if ns.db == "" {
		return nil, cmderr.New(40414, "BSON field '$out.db' is missing but a required field")
	}
	return &outStage{ns: ns}, nil
}

func (s *outStage) run(rt *runtime, in []bson.D) ([]bson.D, error) {
	cat, err := rt.catalog("$out")
	if err != nil {
		return nil, err
	}
	db, coll := s.ns.resolve(rt.env)
	if err := cat.Out(db, coll, cloneDocs(in)); err != nil {
		return nil, err
	}
	return []bson.D{}, nil
}

// cloneDocs copies the documents a stage writes, without the textScore
// they may carry (expr.TextScoreField is no storable field name).
func cloneDocs(in []bson.D) []bson.D {
	out := make([]bson.D, len(in))
	for i, d := range in {
		out[i] = expr.StripTextScore(value.CloneDoc(d))
	}
	return out
}

type mergeStage struct {
	ns             namespace
	on             []string
	whenMatched    any
	whenNotMatched string
}

var (
	whenMatchedModes    = map[string]bool{"replace": true, "keepExisting": true, "merge": true, "fail": true}
	whenNotMatchedModes = map[string]bool{"insert": true, "discard": true, "fail": true}
)

func compileMerge(arg any) (stage, error) {
	m := &mergeStage{on: []string{"_id"}, whenMatched: "merge", whenNotMatched: "insert"}
	if s, ok := arg.(string); ok {
		ns, err := parseNamespace("$merge", "into", s)
		if err != nil {
			return nil, err
		}
		m.ns = ns
		return m, nil
	}
	spec, ok := value.ToDoc(arg)
	if !ok {
		return nil, cmderr.New(51182, "$merge only supports a string or object argument, not %s", value.TypeName(arg))
	}
	haveInto := false
	for _, e := range spec {
		var err error
		switch e.Key {
		case "into":
			m.ns, err = parseNamespace("$merge", "into", e.Value)
			haveInto = true
		case "on":
			m.on, err = parseMergeOn(e.Value)
		case "whenMatched":
			m.whenMatched, err = parseWhenMatched(e.Value)
		case "whenNotMatched":
			m.whenNotMatched, err = parseWhenNotMatched(e.Value)
		case "let", "targetCollectionVersion":
			return nil, cmderr.Unsupported("$merge option '" + e.Key + "'")
		default:
			return nil, cmderr.New(40415, "BSON field '$merge.%s' is an unknown field.", e.Key)
		}
		if err != nil {
			return nil, err
		}
	}
	if !haveInto {
		return nil, cmderr.New(40414, "BSON field '$merge.into' is missing but a required field")
	}
	return m, nil
}

// parseMergeOn reads 'on': a field path or an array of distinct ones.
func parseMergeOn(v any) ([]string, error) {
	var on []string
	if x, ok := v.(string); ok {
		on = []string{x}
	} else {
		a, ok := value.ToArray(v)
		if !ok || len(a) == 0 {
			return nil, cmderr.New(51186, "$merge 'on' field must be either a string or an array of strings, but found %s", value.TypeName(v))
		}
		seen := map[string]bool{}
		for _, el := range a {
			s, ok := el.(string)
			if !ok {
				return nil, cmderr.New(51134, "$merge 'on' array elements must be strings, but found %s", value.TypeName(el))
			}
			if seen[s] {
				return nil, cmderr.New(31465, "Found a duplicate field '%s'", s)
			}
			seen[s] = true
			on = append(on, s)
		}
	}
	for _, f := range on {
		if _, err := checkFieldPath("$merge", f); err != nil {
			return nil, err
		}
	}
	return on, nil
}

// parseWhenMatched reads 'whenMatched': a mode name or an update pipeline.
func parseWhenMatched(v any) (any, error) {
	if x, ok := v.(string); ok {
		if !whenMatchedModes[x] {
			return nil, cmderr.New(cmderr.BadValue, "Enumeration value '%s' for field '$merge.whenMatched' is not a valid value.", x)
		}
		return x, nil
	}
	a, ok := value.ToArray(v)
	if !ok {
		return nil, cmderr.New(51191, "$merge 'whenMatched' field must be either a string or an array, but found %s", value.TypeName(v))
	}
	if err := checkMergePipeline(a); err != nil {
		return nil, err
	}
	return a, nil
}

func parseWhenNotMatched(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", cmderr.New(cmderr.TypeMismatch, "BSON field '$merge.whenNotMatched' is the wrong type '%s', expected type 'string'", value.TypeName(v))
	}
	if !whenNotMatchedModes[s] {
		return "", cmderr.New(cmderr.BadValue, "Enumeration value '%s' for field '$merge.whenNotMatched' is not a valid value.", s)
	}
	return s, nil
}

// checkMergePipeline validates a whenMatched pipeline: it must compile and
// use only the stages an update pipeline allows.
func checkMergePipeline(a bson.A) error {
	p, err := compilePipeline(a, inLookup)
	if err != nil {
		return err
	}
	for _, name := range p.names {
		switch name {
		case "$addFields", "$set", "$project", "$unset", "$replaceRoot", "$replaceWith":
		default:
			return cmderr.New(cmderr.InvalidOptions, "%s is not allowed to be used within an update", name)
		}
	}
	return nil
}

func (s *mergeStage) run(rt *runtime, in []bson.D) ([]bson.D, error) {
	cat, err := rt.catalog("$merge")
	if err != nil {
		return nil, err
	}
	db, coll := s.ns.resolve(rt.env)
	if err := cat.Merge(db, coll, cloneDocs(in), append([]string(nil), s.on...), s.whenMatched, s.whenNotMatched); err != nil {
		return nil, err
	}
	return []bson.D{}, nil
}
