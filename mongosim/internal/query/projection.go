package query

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/expr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// Projection is a compiled find projection.
type Projection struct {
	root       *projNode
	inclusion  bool
	idSet      bool // _id given explicitly as 0/1/true/false
	idInclude  bool
	positional bool // has a field.$ projection: needs the match position
	empty      bool
	vars       map[string]any // the command's let variables, for computed fields
	// meta are the top-level fields set to {$meta: "textScore"}, added
	// after the rest of the projection.
	meta []string
}

type projNode struct {
	fields []*projField // in spec order
	byName map[string]*projField
	// computed: this node or a descendant has a computed (expression) field.
	computed bool
}

type projField struct {
	name       string
	include    bool // a 1/true leaf (inclusion mode) or not (0/false, exclusion mode)
	leaf       bool // include is meaningful
	child      *projNode
	slice      *sliceSpec
	elemMatch  *Filter
	expr       *projExpr
	positional bool
}

type sliceSpec struct {
	skip     int64
	limit    int64
	hasSkip  bool
	fromBack bool // single negative number: the last |limit| elements
}

// Server error codes for projection parse errors.
const (
	codeExclusionInInclusion = 31254
	codeInclusionInExclusion = 31253
	codePathCollision        = 31250
	codePositionalNoMatch    = 51246
)

// CompileProjection compiles a find projection: inclusion or exclusion of
// (dotted) fields with MongoDB's _id rules, $slice, $elemMatch and the
// positional field.$. Computed fields (aggregation expressions) need
// package expr.
func CompileProjection(spec bson.D) (*Projection, error) {
	return compileProjection(spec, Options{})
}

func compileProjection(spec bson.D, o Options) (*Projection, error) {
	c := &projCompiler{p: &Projection{root: newProjNode(), empty: len(spec) == 0, vars: o.Vars}, o: o}
	for _, e := range spec {
		if err := c.add(e.Key, e.Value); err != nil {
			return nil, err
		}
	}
	p := c.p
	p.inclusion = c.inclusionSeen || (p.idSet && p.idInclude && !c.exclusionSeen && !c.sliceSeen)
	return p, nil
}

// errMidPathPositional is mongod's error for a positional operator that is
// not at the end of a projection path.
const errMidPathPositional = "As of 4.4, it's illegal to specify positional operator in the middle of a path.Positional projection may only be used at the end, for example: a.b.$. If the query previously used a form like a.b.$.d, remove the parts following the '$' and the results will be equivalent."

// projCompiler builds a Projection one spec field at a time, tracking
// whether it has seen inclusions, exclusions and $slice so it can reject a
// projection that mixes inclusion and exclusion.
type projCompiler struct {
	p                                       *Projection
	o                                       Options
	inclusionSeen, exclusionSeen, sliceSeen bool
}

// mark records an inclusion or exclusion at path, rejecting a mix.
func (c *projCompiler) mark(path string, inclusion bool) error {
	if inclusion {
		if c.exclusionSeen {
			return cmderr.New(codeInclusionInExclusion, "Cannot do inclusion on field %s in exclusion projection", path)
		}
		c.inclusionSeen = true
		return nil
	}
	if c.inclusionSeen {
		return cmderr.New(codeExclusionInInclusion, "Cannot do exclusion on field %s in inclusion projection", path)
	}
	c.exclusionSeen = true
	return nil
}

// add compiles one projection field: path and its value.
func (c *projCompiler) add(path string, v any) error {
	p := c.p
	if path == "" {
		return cmderr.New(cmderr.BadValue, "FieldPath cannot be constructed with empty string")
	}
	if strings.HasPrefix(path, "$") {
		return cmderr.New(16410, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
	}
	if path == "_id" {
		if b, ok := boolish(v); ok {
			p.idSet, p.idInclude = true, b
			return nil
		}
	}
	if strings.HasSuffix(path, ".$") || path == "$" {
		return c.addPositional(strings.TrimSuffix(path, ".$"), v)
	}
	if strings.Contains(path, ".$.") {
		return cmderr.New(31394, errMidPathPositional)
	}
	f := &projField{}
	if b, ok := boolish(v); ok {
		f.leaf, f.include = true, b
		if err := c.mark(path, b); err != nil {
			return err
		}
		return p.root.insert(path, f)
	}
	if d, ok := v.(bson.D); ok {
		if len(d) == 0 {
			return cmderr.New(51270, "An empty sub-projection is not a valid value. Found empty object at path")
		}
		if !strings.HasPrefix(d[0].Key, "$") {
			// A nested projection: {a: {b: 1}} is {"a.b": 1}.
			for _, e := range d {
				if err := c.add(path+"."+e.Key, e.Value); err != nil {
					return err
				}
			}
			return nil
		}
		if done, err := c.addOperator(path, d); done || err != nil {
			return err
		}
		// An aggregation expression such as {$add: [...]}.
	}
	x, err := compileProjExpr(v)
	if err != nil {
		return err
	}
	if c.exclusionSeen {
		return cmderr.New(31252, "Cannot use expression other than $meta in exclusion projection")
	}
	c.inclusionSeen = true
	f.expr = x
	return p.root.insert(path, f)
}

// addPositional compiles "path.$": true, the positional projection.
func (c *projCompiler) addPositional(path string, v any) error {
	p := c.p
	if strings.Contains(path, ".$.") || strings.HasPrefix(path, "$.") {
		return cmderr.New(31394, errMidPathPositional)
	}
	if p.positional {
		return cmderr.New(31276, "Cannot specify more than one positional projection per query.")
	}
	if b, ok := boolish(v); !ok || !b {
		return cmderr.New(31308, "positional projection cannot be used with exclusion or a literal")
	}
	f := &projField{positional: true}
	p.positional = true
	if err := c.mark(path+".$", true); err != nil {
		return err
	}
	return p.root.insert(path, f)
}

// addOperator compiles a projection operator ($slice, $elemMatch, $meta)
// at path. It reports done=false for any other $-key, which the caller
// compiles as an aggregation expression.
func (c *projCompiler) addOperator(path string, d bson.D) (done bool, err error) {
	p := c.p
	f := &projField{}
	switch d[0].Key {
	case "$slice":
		s, err := parseSlice(d[0].Value)
		if err != nil {
			return true, err
		}
		if len(d) > 1 {
			return true, cmderr.New(cmderr.BadValue, "unknown operator in $slice projection: %s", d[1].Key)
		}
		f.slice, c.sliceSeen = s, true
		return true, p.root.insert(path, f)
	case "$elemMatch":
		if strings.Contains(path, ".") {
			return true, cmderr.New(31275, "Cannot use $elemMatch projection on a nested field.")
		}
		if _, ok := d[0].Value.(bson.D); !ok {
			return true, cmderr.New(cmderr.BadValue, "elemMatch: Invalid argument, object required.")
		}
		flt, err := CompileFilterWith(bson.D{{Key: path, Value: bson.D{{Key: "$elemMatch", Value: d[0].Value}}}}, Options{Collator: c.o.Collator})
		if err != nil {
			return true, err
		}
		f.elemMatch = flt
		if err := c.mark(path, true); err != nil {
			return true, err
		}
		return true, p.root.insert(path, f)
	case "$meta":
		if err := expr.CheckMeta(d[0].Value); err != nil {
			return true, err
		}
		if strings.Contains(path, ".") {
			return true, cmderr.Unsupported("$meta projection on a dotted field")
		}
		for _, m := range p.meta {
			if m == path {
				return true, cmderr.New(codePathCollision, "Path collision at %s", path)
			}
		}
		p.meta = append(p.meta, path)
		return true, nil
	}
	return false, nil
}

func boolish(v any) (bool, bool) {
	switch x := v.(type) {
	case bool:
		return x, true
	}
	if f, ok := value.ToFloat(v); ok {
		return f != 0, true
	}
	return false, false
}

func parseSlice(v any) (*sliceSpec, error) {
	if value.IsNumber(v) {
		n, ok := truncInt(v)
		if !ok {
			return nil, cmderr.New(cmderr.BadValue, "$slice only supports numbers and [skip, limit] arrays")
		}
		if n < 0 {
			return &sliceSpec{limit: -n, fromBack: true}, nil
		}
		return &sliceSpec{limit: n}, nil
	}
	arr, ok := v.(bson.A)
	if !ok || len(arr) != 2 || !value.IsNumber(arr[0]) || !value.IsNumber(arr[1]) {
		return nil, cmderr.New(28724, "First argument to $slice must be an array")
	}
	skip, ok1 := truncInt(arr[0])
	limit, ok2 := truncInt(arr[1])
	if !ok1 || !ok2 {
		return nil, cmderr.New(cmderr.BadValue, "$slice only supports numbers and [skip, limit] arrays")
	}
	if limit <= 0 {
		return nil, cmderr.New(28724, "$slice limit must be positive")
	}
	return &sliceSpec{skip: skip, limit: limit, hasSkip: true}, nil
}

func (s *sliceSpec) apply(a bson.A) bson.A {
	n := int64(len(a))
	var start, end int64
	switch {
	case s.fromBack:
		start, end = max(n-s.limit, 0), n
	case s.hasSkip:
		if s.skip < 0 {
			start = max(n+s.skip, 0)
		} else {
			start = min(s.skip, n)
		}
		end = start + min(s.limit, n-start)
	default:
		start, end = 0, min(s.limit, n)
	}
	out := make(bson.A, 0, end-start)
	for _, e := range a[start:end] {
		out = append(out, value.Clone(e))
	}
	return out
}

func newProjNode() *projNode { return &projNode{byName: map[string]*projField{}} }

// insert places f at a dotted path, creating intermediate nodes; a path that
// is both a leaf and a prefix of another is a collision, as on the server.
func (n *projNode) insert(path string, f *projField) error {
	parts := strings.Split(path, ".")
	cur := n
	for i, part := range parts {
		if f.expr != nil {
			cur.computed = true
		}
		existing := cur.byName[part]
		if i == len(parts)-1 {
			if existing != nil {
				return cmderr.New(codePathCollision, "Path collision at %s", path)
			}
			f.name = part
			cur.fields = append(cur.fields, f)
			cur.byName[part] = f
			return nil
		}
		if existing == nil {
			existing = &projField{name: part, child: newProjNode()}
			cur.fields = append(cur.fields, existing)
			cur.byName[part] = existing
		} else if existing.child == nil {
			return cmderr.New(codePathCollision, "Path collision at %s remaining portion %s", path, strings.Join(parts[i+1:], "."))
		}
		cur = existing.child
	}
	return nil
}

// NeedsPosition reports whether the projection has a positional field.$,
// which needs the position from Filter.MatchPosition (use Project).
func (p *Projection) NeedsPosition() bool { return p.positional }

// Apply projects doc into a new document. It is Project without a match
// position; a projection with field.$ or a computed field whose evaluation
// fails must go through Project, which reports the error (Apply then returns
// nil).
func (p *Projection) Apply(doc bson.D) bson.D {
	out, err := p.Project(doc, -1)
	if err != nil {
		return nil
	}
	return out
}

// Project projects doc into a new document. pos is the match position from
// Filter.MatchPosition, used by a positional field.$ projection (-1: none).
func (p *Projection) Project(doc bson.D, pos int) (bson.D, error) {
	if p.empty {
		return StripTextScore(value.CloneDoc(doc)), nil
	}
	a := applier{p: p, root: doc, pos: pos}
	var out bson.D
	if p.inclusion {
		out = a.include(p.root, doc, true)
	} else {
		out = a.exclude(p.root, doc, true)
	}
	if a.err != nil {
		return nil, a.err
	}
	for _, m := range p.meta {
		score, err := expr.TextScore(doc)
		if err != nil {
			return nil, err
		}
		out = value.Set(out, m, score)
	}
	return StripTextScore(out), nil
}

// StripTextScore removes the textScore a document carries (TextScoreField),
// in place.
func StripTextScore(d bson.D) bson.D {
	for i := len(d) - 1; i >= 0; i-- {
		if d[i].Key == TextScoreField {
			return append(d[:i], d[i+1:]...)
		}
	}
	return d
}

// NeedsTextScore reports whether the projection reads the textScore.
func (p *Projection) NeedsTextScore() bool { return p != nil && len(p.meta) > 0 }

type applier struct {
	p    *Projection
	root bson.D
	pos  int
	err  error
}

func (a *applier) include(n *projNode, doc bson.D, top bool) bson.D {
	out := bson.D{}
	for _, e := range doc {
		if top && e.Key == "_id" && !a.p.idSet && n.byName["_id"] == nil {
			out = append(out, bson.E{Key: e.Key, Value: value.Clone(e.Value)})
			continue
		}
		if top && e.Key == "_id" && a.p.idSet {
			if a.p.idInclude {
				out = append(out, bson.E{Key: e.Key, Value: value.Clone(e.Value)})
			}
			continue
		}
		f := n.byName[e.Key]
		if f == nil || f.expr != nil {
			continue
		}
		if v, ok := a.includeField(f, e.Value); ok {
			out = append(out, bson.E{Key: e.Key, Value: v})
		}
	}
	if n.computed {
		out = a.addComputed(n, out)
	}
	return out
}

func (a *applier) includeField(f *projField, v any) (any, bool) {
	switch {
	case f.positional:
		arr, ok := v.(bson.A)
		if !ok {
			return value.Clone(v), true
		}
		if a.pos < 0 || a.pos >= len(arr) {
			if a.err == nil {
				a.err = cmderr.New(codePositionalNoMatch, "Executor error during find command :: caused by :: positional operator '.$' couldn't find a matching element in the array")
			}
			return nil, false
		}
		return bson.A{value.Clone(arr[a.pos])}, true
	case f.elemMatch != nil:
		ok, i := f.elemMatch.MatchPosition(bson.D{{Key: f.name, Value: v}})
		arr, isArr := v.(bson.A)
		if !ok || !isArr || i < 0 || i >= len(arr) {
			return nil, false
		}
		return bson.A{value.Clone(arr[i])}, true
	case f.slice != nil:
		if arr, ok := v.(bson.A); ok {
			return f.slice.apply(arr), true
		}
		return value.Clone(v), true
	case f.leaf:
		return value.Clone(v), true
	case f.child != nil:
		return a.includeValue(f.child, v)
	}
	return nil, false
}

// CompileProjectionWith is CompileProjection whose computed fields see
// the command's variables (let, $$NOW) and whose $elemMatch compares under
// the command's collation.
func CompileProjectionWith(spec bson.D, o Options) (*Projection, error) {
	return compileProjection(spec, o)
}

// includeValue applies an inclusion sub-projection to a value: into
// documents, and through arrays, whose non-document elements are dropped.
func (a *applier) includeValue(n *projNode, v any) (any, bool) {
	switch x := v.(type) {
	case bson.D:
		return a.include(n, x, false), true
	case bson.A:
		out := make(bson.A, 0, len(x))
		for _, e := range x {
			if r, ok := a.includeValue(n, e); ok {
				out = append(out, r)
			}
		}
		return out, true
	}
	return nil, false
}

// addComputed appends the node's computed fields in spec order, and
// sub-documents holding nested computed fields the document lacked.
func (a *applier) addComputed(n *projNode, out bson.D) bson.D {
	for _, f := range n.fields {
		switch {
		case f.expr != nil:
			v, ok, err := f.expr.eval(a.root, a.p.vars)
			if err != nil {
				if a.err == nil {
					a.err = err
				}
				continue
			}
			if ok {
				out = value.Set(out, f.name, v)
			}
		case f.child != nil && f.child.computed:
			if _, present := value.Get(out, f.name); !present {
				out = append(out, bson.E{Key: f.name, Value: a.include(f.child, bson.D{}, false)})
			}
		}
	}
	return out
}

func (a *applier) exclude(n *projNode, doc bson.D, top bool) bson.D {
	out := make(bson.D, 0, len(doc))
	for _, e := range doc {
		if top && e.Key == "_id" && a.p.idSet {
			if a.p.idInclude {
				out = append(out, bson.E{Key: e.Key, Value: value.Clone(e.Value)})
			}
			continue
		}
		f := n.byName[e.Key]
		switch {
		case f == nil:
			out = append(out, bson.E{Key: e.Key, Value: value.Clone(e.Value)})
		case f.leaf:
			// excluded
		case f.slice != nil:
			if arr, ok := e.Value.(bson.A); ok {
				out = append(out, bson.E{Key: e.Key, Value: f.slice.apply(arr)})
			} else {
				out = append(out, bson.E{Key: e.Key, Value: value.Clone(e.Value)})
			}
		case f.child != nil:
			out = append(out, bson.E{Key: e.Key, Value: a.excludeValue(f.child, e.Value)})
		}
	}
	return out
}

// excludeValue applies an exclusion sub-projection: into documents and
// through arrays, keeping non-document elements.
func (a *applier) excludeValue(n *projNode, v any) any {
	switch x := v.(type) {
	case bson.D:
		return a.exclude(n, x, false)
	case bson.A:
		out := make(bson.A, len(x))
		for i, e := range x {
			out[i] = a.excludeValue(n, e)
		}
		return out
	}
	return value.Clone(v)
}
