package agg

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/expr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// $redact evaluates its expression on the document and, on $$DESCEND,
// again on every embedded document (also inside arrays) with $$CURRENT
// bound to it: $$KEEP keeps that (sub)document whole, $$PRUNE drops it.

type redactStage struct{ x *expr.Expr }

func compileRedact(arg any) (stage, error) {
	x, err := expr.Compile(arg)
	if err != nil {
		return nil, err
	}
	return &redactStage{x: x}, nil
}

func (s *redactStage) run(rt *runtime, in []bson.D) ([]bson.D, error) {
	out := make([]bson.D, 0, len(in))
	for i, doc := range in {
		if err := rt.checkEvery(i); err != nil {
			return nil, err
		}
		d, keep, err := s.redact(rt, doc, doc, 0)
		if err != nil {
			return nil, err
		}
		if keep {
			out = append(out, d)
		}
	}
	return out, nil
}

// maxRedactDepth bounds the recursion well past BSON's own nesting limit.
const maxRedactDepth = 200

func (s *redactStage) redact(rt *runtime, root, cur bson.D, depth int) (bson.D, bool, error) {
	if depth > maxRedactDepth {
		return nil, false, cmderr.New(cmderr.BadValue, "$redact: document nested too deeply")
	}
	vars := make(map[string]any, len(rt.vars)+1)
	for k, v := range rt.vars {
		vars[k] = v
	}
	vars["CURRENT"] = cur
	r, err := s.x.Eval(root, vars)
	if err != nil {
		return nil, false, err
	}
	switch r {
	case "KEEP":
		return cur, true, nil
	case "PRUNE":
		return nil, false, nil
	case "DESCEND":
	default:
		return nil, false, cmderr.New(17053, "$redact's expression should not return anything aside from the variables $$KEEP, $$DESCEND, and $$PRUNE, but returned %s", expr.Render(r))
	}
	out := make(bson.D, 0, len(cur))
	for _, e := range cur {
		if sub, ok := value.ToDoc(e.Value); ok {
			d, keep, err := s.redact(rt, root, sub, depth+1)
			if err != nil {
				return nil, false, err
			}
			if keep {
				out = append(out, bson.E{Key: e.Key, Value: d})
			}
			continue
		}
		if a, ok := value.ToArray(e.Value); ok {
			v, err := s.redactArray(rt, root, a, depth+1)
			if err != nil {
				return nil, false, err
			}
			out = append(out, bson.E{Key: e.Key, Value: v})
			continue
		}
		out = append(out, e)
	}
	return out, true, nil
}

func (s *redactStage) redactArray(rt *runtime, root bson.D, a bson.A, depth int) (bson.A, error) {
	out := make(bson.A, 0, len(a))
	for _, x := range a {
		if sub, ok := value.ToDoc(x); ok {
			d, keep, err := s.redact(rt, root, sub, depth)
			if err != nil {
				return nil, err
			}
			if keep {
				out = append(out, d)
			}
			continue
		}
		if inner, ok := value.ToArray(x); ok {
			v, err := s.redactArray(rt, root, inner, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
			continue
		}
		out = append(out, x)
	}
	return out, nil
}
