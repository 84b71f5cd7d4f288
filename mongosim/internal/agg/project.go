package agg

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/expr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

type fieldKind int

const (
	kindInclude fieldKind = iota
	kindExclude
	kindCompute
	kindNested
)

// projNode is one level of a projection tree ($project, $addFields, $unset).
type projNode struct {
	fields []*projField // in specification order
}

type projField struct {
	name  string
	kind  fieldKind
	expr  *expr.Expr
	child *projNode
}

func (n *projNode) get(name string) *projField {
	for _, f := range n.fields {
		if f.name == name {
			return f
		}
	}
	return nil
}

// hasCompute reports whether the subtree computes any field.
func (n *projNode) hasCompute() bool {
	for _, f := range n.fields {
		if f.kind == kindCompute || (f.kind == kindNested && f.child.hasCompute()) {
			return true
		}
	}
	return false
}

// insert adds a leaf at a dotted path, creating nested nodes; full is the
// whole path for error messages.
func (n *projNode) insert(parts []string, leaf *projField, full string) error {
	f := n.get(parts[0])
	if len(parts) == 1 {
		if f != nil {
			return cmderr.New(31250, "Invalid %s :: caused by :: Path collision at %s", "$project", full)
		}
		leaf.name = parts[0]
		n.fields = append(n.fields, leaf)
		return nil
	}
	if f == nil {
		f = &projField{name: parts[0], kind: kindNested, child: &projNode{}}
		n.fields = append(n.fields, f)
	} else if f.kind != kindNested {
		return cmderr.New(31249, "Invalid $project :: caused by :: Path collision at %s remaining portion %s", full, strings.Join(parts[1:], "."))
	}
	return f.child.insert(parts[1:], leaf, full)
}

// projMode is what kind of $project a specification is.
type projMode int

const (
	modeUnknown projMode = iota
	modeInclusion
	modeExclusion
)

type projParser struct {
	stage string
	mode  projMode
	// idSet records whether the top-level _id was mentioned.
	idSet bool
	// addFields: numbers and booleans are values, not inclusion flags.
	addFields bool
}

func (p *projParser) parse(n *projNode, spec bson.D, prefix string) error {
	for _, e := range spec {
		if e.Key == "" {
			return cmderr.New(40352, "Invalid %s :: caused by :: FieldPath cannot be constructed with empty string", p.stage)
		}
		if strings.HasPrefix(e.Key, "$") {
			return cmderr.New(16410, "Invalid %s :: caused by :: FieldPath field names may not start with '$'. Consider using $getField or $setField.", p.stage)
		}
		parts := strings.Split(e.Key, ".")
		for _, part := range parts {
			if part == "" {
				return cmderr.New(15998, "Invalid %s :: caused by :: FieldPath field names may not be empty strings.", p.stage)
			}
		}
		full := prefix + e.Key
		if prefix == "" && e.Key == "_id" {
			p.idSet = true
		}
		leaf, nested, err := p.leaf(e.Value, full)
		if err != nil {
			return err
		}
		if nested != nil {
			// a sub-object of field specifications: {a: {b: 1}} means "a.b"
			target := n
			for _, part := range parts {
				f := target.get(part)
				if f == nil {
					f = &projField{name: part, kind: kindNested, child: &projNode{}}
					target.fields = append(target.fields, f)
				} else if f.kind != kindNested {
					return cmderr.New(31250, "Invalid %s :: caused by :: Path collision at %s", p.stage, full)
				}
				target = f.child
			}
			if err := p.parse(target, nested, full+"."); err != nil {
				return err
			}
			continue
		}
		if err := n.insert(parts, leaf, full); err != nil {
			return err
		}
	}
	return nil
}

// leaf classifies one specification value: an inclusion/exclusion flag, an
// expression, or (returned as nested) a sub-object of field specifications.
func (p *projParser) leaf(v any, full string) (*projField, bson.D, error) {
	if d, ok := value.ToDoc(v); ok {
		if len(d) == 0 {
			if p.addFields {
				return &projField{kind: kindCompute, expr: expr.MustCompile(bson.D{{Key: "$literal", Value: bson.D{}}})}, nil, nil
			}
			return nil, nil, cmderr.New(51270, "Invalid %s :: caused by :: An empty sub-projection is not a valid value. Found empty object at path", p.stage)
		}
		if !strings.HasPrefix(d[0].Key, "$") {
			return nil, d, nil
		}
		return p.computed(d, full)
	}
	if !p.addFields {
		var flag, isFlag bool
		switch x := v.(type) {
		case bool:
			flag, isFlag = x, true
		default:
			if value.IsNumber(v) {
				flag, isFlag = expr.Truthy(v), true
			}
		}
		if isFlag {
			if flag {
				if err := p.setMode(modeInclusion, full, false); err != nil {
					return nil, nil, err
				}
				return &projField{kind: kindInclude}, nil, nil
			}
			if full != "_id" {
				if err := p.setMode(modeExclusion, full, false); err != nil {
					return nil, nil, err
				}
			}
			return &projField{kind: kindExclude}, nil, nil
		}
	}
	return p.computed(v, full)
}

// computed is a field set by the expression spec (which counts as
// inclusion in $project).
func (p *projParser) computed(spec any, full string) (*projField, bson.D, error) {
	e, err := expr.Compile(spec)
	if err != nil {
		return nil, nil, err
	}
	if err := p.setMode(modeInclusion, full, true); err != nil {
		return nil, nil, err
	}
	return &projField{kind: kindCompute, expr: e}, nil, nil
}

func (p *projParser) setMode(m projMode, full string, computed bool) error {
	if p.addFields {
		return nil
	}
	switch {
	case p.mode == modeUnknown:
		p.mode = m
	case p.mode == modeInclusion && m == modeExclusion:
		return cmderr.New(31254, "Invalid %s :: caused by :: Cannot do exclusion on field %s in inclusion projection", p.stage, full)
	case p.mode == modeExclusion && m == modeInclusion:
		if computed {
			return cmderr.New(31252, "Invalid %s :: caused by :: Cannot use expression other than $meta in exclusion projection", p.stage)
		}
		return cmderr.New(31253, "Invalid %s :: caused by :: Cannot do inclusion on field %s in exclusion projection", p.stage, full)
	}
	return nil
}

// projectStage is $project.
type projectStage struct {
	root *projNode
	mode projMode
}

func compileProject(arg any) (stage, error) {
	spec, ok := value.ToDoc(arg)
	if !ok {
		return nil, cmderr.New(15969, "$project specification must be an object")
	}
	if len(spec) == 0 {
		return nil, cmderr.New(51272, "Invalid $project :: caused by :: projection specification must have at least one field")
	}
	p := &projParser{stage: "$project"}
	root := &projNode{}
	if err := p.parse(root, spec, ""); err != nil {
		return nil, err
	}
	if p.mode == modeUnknown {
		// only _id was mentioned: {_id: 0} excludes, {_id: 1} includes
		if f := root.get("_id"); f != nil && f.kind == kindExclude {
			p.mode = modeExclusion
		} else {
			p.mode = modeInclusion
		}
	}
	if p.mode == modeInclusion && !p.idSet {
		root.fields = append([]*projField{{name: "_id", kind: kindInclude}}, root.fields...)
	}
	if p.mode == modeInclusion {
		// an _id: 0 in an inclusion projection simply drops it
		kept := root.fields[:0]
		for _, f := range root.fields {
			if f.kind != kindExclude {
				kept = append(kept, f)
			}
		}
		root.fields = kept
	}
	return &projectStage{root: root, mode: p.mode}, nil
}

func (s *projectStage) run(rt *runtime, in []bson.D) ([]bson.D, error) {
	return rt.mapDocs(in, func(doc bson.D) (bson.D, error) {
		if s.mode == modeExclusion {
			return exclude(s.root, doc), nil
		}
		out, err := include(s.root, doc, doc, rt.vars)
		if score, noScore := expr.TextScore(doc); err == nil && noScore == nil {
			// The textScore metadata stays with the document.
			out = append(out, bson.E{Key: expr.TextScoreField, Value: score})
		}
		return out, err
	})
}

// include applies an inclusion projection level to doc: included fields in
// the document's order, then computed fields in specification order.
func include(n *projNode, doc bson.D, root bson.D, vars map[string]any) (bson.D, error) {
	out := bson.D{}
	for _, e := range doc {
		f := n.get(e.Key)
		if f == nil {
			continue
		}
		switch f.kind {
		case kindInclude:
			out = append(out, e)
		case kindNested:
			v, keep, err := includeValue(f.child, e.Value, root, vars)
			if err != nil {
				return nil, err
			}
			if keep {
				out = append(out, bson.E{Key: e.Key, Value: v})
			}
		}
	}
	for _, f := range n.fields {
		switch f.kind {
		case kindCompute:
			v, err := f.expr.Eval(root, vars)
			if err != nil {
				return nil, err
			}
			if expr.IsMissing(v) {
				continue
			}
			out = value.Set(out, f.name, v)
		case kindNested:
			if !f.child.hasCompute() {
				continue
			}
			if _, present := value.Get(out, f.name); present {
				continue
			}
			sub, err := include(f.child, nil, root, vars)
			if err != nil {
				return nil, err
			}
			out = value.Set(out, f.name, sub)
		}
	}
	return out, nil
}

func includeValue(n *projNode, v any, root bson.D, vars map[string]any) (any, bool, error) {
	if d, ok := value.ToDoc(v); ok {
		sub, err := include(n, d, root, vars)
		return sub, true, err
	}
	if a, ok := value.ToArray(v); ok {
		out := bson.A{}
		for _, el := range a {
			r, keep, err := includeValue(n, el, root, vars)
			if err != nil {
				return nil, false, err
			}
			if keep {
				out = append(out, r)
			}
		}
		return out, true, nil
	}
	if n.hasCompute() {
		sub, err := include(n, nil, root, vars)
		return sub, true, err
	}
	return nil, false, nil
}

func exclude(n *projNode, doc bson.D) bson.D {
	out := make(bson.D, 0, len(doc))
	for _, e := range doc {
		f := n.get(e.Key)
		if f == nil {
			out = append(out, e)
			continue
		}
		switch f.kind {
		case kindExclude:
		case kindNested:
			out = append(out, bson.E{Key: e.Key, Value: excludeValue(f.child, e.Value)})
		default:
			out = append(out, e)
		}
	}
	return out
}

func excludeValue(n *projNode, v any) any {
	if d, ok := value.ToDoc(v); ok {
		return exclude(n, d)
	}
	if a, ok := value.ToArray(v); ok {
		out := make(bson.A, len(a))
		for i, el := range a {
			out[i] = excludeValue(n, el)
		}
		return out
	}
	return v
}

// addFieldsStage is $addFields / $set.
type addFieldsStage struct{ root *projNode }

func compileAddFields(name string, arg any) (stage, error) {
	spec, ok := value.ToDoc(arg)
	if !ok {
		return nil, cmderr.New(40272, "%s specification stage must be an object, got %s", name, value.TypeName(arg))
	}
	p := &projParser{stage: name, addFields: true}
	root := &projNode{}
	if err := p.parse(root, spec, ""); err != nil {
		return nil, err
	}
	return &addFieldsStage{root: root}, nil
}

func (s *addFieldsStage) run(rt *runtime, in []bson.D) ([]bson.D, error) {
	return rt.mapDocs(in, func(doc bson.D) (bson.D, error) {
		return addFields(s.root, doc, doc, rt.vars)
	})
}

// addFields returns a copy of doc with the tree's fields set (a Missing
// value removes the field, as $$REMOVE does).
func addFields(n *projNode, doc bson.D, root bson.D, vars map[string]any) (bson.D, error) {
	out := make(bson.D, len(doc), len(doc)+len(n.fields))
	copy(out, doc)
	for _, f := range n.fields {
		switch f.kind {
		case kindCompute:
			v, err := f.expr.Eval(root, vars)
			if err != nil {
				return nil, err
			}
			if expr.IsMissing(v) {
				out = removePath(out, []string{f.name})
				continue
			}
			out = value.Set(out, f.name, v)
		case kindNested:
			cur, _ := value.Get(out, f.name)
			v, err := addFieldsValue(f.child, cur, root, vars)
			if err != nil {
				return nil, err
			}
			out = value.Set(out, f.name, v)
		}
	}
	return out, nil
}

func addFieldsValue(n *projNode, cur any, root bson.D, vars map[string]any) (any, error) {
	if d, ok := value.ToDoc(cur); ok {
		return addFields(n, d, root, vars)
	}
	if a, ok := value.ToArray(cur); ok {
		out := make(bson.A, len(a))
		for i, el := range a {
			v, err := addFieldsValue(n, el, root, vars)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
	return addFields(n, nil, root, vars)
}

// unsetStage is $unset: an exclusion projection.
type unsetStage struct{ root *projNode }

func compileUnset(arg any) (stage, error) {
	var names []string
	switch x := arg.(type) {
	case string:
		names = []string{x}
	default:
		a, ok := value.ToArray(arg)
		if !ok {
			return nil, cmderr.New(31002, "$unset specification must be a string or an array")
		}
		if len(a) == 0 {
			return nil, cmderr.New(31119, "$unset specification must be a string or an array with at least one field")
		}
		for _, el := range a {
			s, ok := el.(string)
			if !ok {
				return nil, cmderr.New(31120, "$unset specification must be a string or an array containing only string values")
			}
			names = append(names, s)
		}
	}
	root := &projNode{}
	for _, name := range names {
		parts, err := checkFieldPath("$unset", name)
		if err != nil {
			return nil, err
		}
		if err := root.insert(parts, &projField{kind: kindExclude}, name); err != nil {
			return nil, err
		}
	}
	return &unsetStage{root: root}, nil
}

func (s *unsetStage) run(rt *runtime, in []bson.D) ([]bson.D, error) {
	out := make([]bson.D, 0, len(in))
	for _, doc := range in {
		out = append(out, exclude(s.root, doc))
	}
	return out, nil
}
