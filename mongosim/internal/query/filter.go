package query

import (
	"math"
	"sort"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/expr"
	"github.com/sturdy-go/sturdy/mongosim/internal/js"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// Filter is a compiled query filter. It is immutable and safe for
// concurrent use.
type Filter struct {
	root  node
	exprs []*expr.Expr // every $expr, for MatchErr
	vars  map[string]any
	coll  value.Collator
	near  *NearClause // the filter's $near or $nearSphere (geo.go)
	// regions are its top-level $geoWithin/$geoIntersects (geo.go).
	regions []GeoRegion
	text    TextSearch // the $text predicate, nil without one
	// scripted: the filter has a $where, whose errors abort a match.
	scripted bool
}

// Collator returns the collation the filter compares strings with (nil:
// simple); a nil Filter has none.
func (f *Filter) Collator() value.Collator {
	if f == nil {
		return nil
	}
	return f.coll
}

// Options are what a filter depends on besides its document. The zero
// value is the simple collation and no variables.
type Options struct {
	// Collator orders and equates strings (nil: simple, binary).
	Collator value.Collator
	// Scripts, when set, allows $where and runs its scripts under the
	// operation's context; nil (validators, partial indexes, $match)
	// refuses $where as mongod does there.
	Scripts *js.Env
	// Vars are the command's let variables (and $$NOW, $$CLUSTER_TIME) by
	// name without "$$", for $expr. When set, a $expr reading an undefined
	// user variable fails compilation (17276), as on mongod.
	Vars map[string]any
	// AllowNear admits $near and $nearSphere (find only, as on mongod,
	// where they order the results by distance).
	AllowNear bool
	// Text compiles a $text argument against the collection's text index
	// (nil: $text is not allowed in this context).
	Text TextIndex
}

// node is one compiled predicate. v is the value the predicate is rooted at:
// the document for a top-level filter, an array element for $elemMatch.
// pos, when non-nil and still -1, receives the index of the array element
// through which the first array-traversing predicate matched.
type node interface {
	match(v any, pos *int) bool
	// matchDoc is match for a document root; it spares Match the
	// allocation of boxing a bson.D into an interface.
	matchDoc(d bson.D, pos *int) bool
}

// compileCtx carries what changes while compiling nested parts of a filter.
type compileCtx struct {
	// valueForm: compiling the operators of a value-form $elemMatch, where
	// each operator applies to the element itself, without array expansion.
	valueForm bool
	// nested: inside $elemMatch, where $expr is not allowed.
	nested bool
	// exprs collects the compiled $expr expressions.
	exprs *[]*expr.Expr
	// coll is the collation of comparisons (nil: simple).
	coll value.Collator
	// vars are the variables $expr sees (with the collation in them).
	vars map[string]any
	// checkVars: the variables are the command's complete set, so a
	// $expr reading another one is an error at compile time.
	checkVars bool
	// geo collects the $near clause (geo.go); notTop is set below $or,
	// $nor and $not, where $near may not appear.
	geo    *geoState
	notTop bool
	// text is the filter's $text state; underOr and underNor say where a
	// $text would be.
	text              *textState
	underOr, underNor bool
	// scripts is where $where runs (nil: not allowed); scripted is set
	// when one is compiled.
	scripts  *js.Env
	scripted *bool
}

// CompileFilter compiles a MongoDB query filter. Errors are *cmderr.Error
// shaped like the server's.
func CompileFilter(filter bson.D) (*Filter, error) {
	return CompileFilterWith(filter, Options{})
}

// CompileFilterWith is CompileFilter with a collation and variables.
func CompileFilterWith(filter bson.D, o Options) (*Filter, error) {
	// The filter and its compile state in one allocation.
	b := &struct {
		f    Filter
		geo  geoState
		text textState
	}{f: Filter{coll: o.Collator}, geo: geoState{allowNear: o.AllowNear}, text: textState{index: o.Text}}
	f, gs, ts := &b.f, &b.geo, &b.text
	if ReadsVariables(filter) {
		// Only a $expr reads the variables: a filter without one is
		// spared the copies of them WithCollator and WithScripts make.
		f.vars = expr.WithScripts(expr.WithCollator(o.Vars, o.Collator), o.Scripts)
	}
	n, err := compileDoc(filter, compileCtx{exprs: &f.exprs, coll: o.Collator, vars: f.vars, checkVars: o.Vars != nil, geo: gs, text: ts,
		scripts: o.Scripts, scripted: &f.scripted})
	if err != nil {
		return nil, err
	}
	f.root, f.near, f.text, f.regions = n, gs.near, ts.found, gs.regions
	if f.near != nil && f.text != nil {
		return nil, cmderr.New(cmderr.BadValue, "text and geoNear not allowed in same query")
	}
	return f, nil
}

// ReadsVariables reports whether filter may read Options.Vars: whether it
// holds a $expr at any depth. A caller whose variables take work to build
// builds them only then.
func ReadsVariables(filter bson.D) bool { return mayHoldExpr(filter) }

// mayHoldExpr reports whether v (a filter or part of one) holds a $expr
// at any depth; a value of a type it does not know may.
func mayHoldExpr(v any) bool {
	switch x := v.(type) {
	case bson.D:
		for _, e := range x {
			if e.Key == "$expr" || mayHoldExpr(e.Value) {
				return true
			}
		}
		return false
	case bson.A:
		for _, e := range x {
			if mayHoldExpr(e) {
				return true
			}
		}
		return false
	case nil, string, int32, int64, int, float64, bool, bson.ObjectID, bson.DateTime, bson.Timestamp,
		bson.Binary, bson.Decimal128, bson.Regex, bson.Null, bson.Undefined, bson.MinKey, bson.MaxKey:
		return false
	}
	return true
}

// Match reports whether doc satisfies the filter. A nil Filter matches
// everything.
func (f *Filter) Match(doc bson.D) bool {
	if f == nil {
		return true
	}
	if f.scripted {
		ok, _ := matchScripted(func() bool { return f.root.matchDoc(doc, nil) })
		return ok
	}
	return f.root.matchDoc(doc, nil)
}

// MatchPosition is Match that also reports, for the positional $ update
// operator and the field.$ projection, the index of the array element
// through which the first array-traversing predicate matched (-1 if none).
func (f *Filter) MatchPosition(doc bson.D) (ok bool, pos int) {
	pos = -1
	if f == nil {
		return true, -1
	}
	if f.scripted {
		ok, _ := matchScripted(func() bool { return f.root.matchDoc(doc, &pos) })
		if !ok {
			return false, -1
		}
		return true, pos
	}
	if !f.root.matchDoc(doc, &pos) {
		return false, -1
	}
	return true, pos
}

// ---- logical nodes ----

type andNode []node

func (a andNode) match(v any, pos *int) bool {
	for _, n := range a {
		if !n.match(v, pos) {
			return false
		}
	}
	return true
}

func (a andNode) matchDoc(d bson.D, pos *int) bool {
	for _, n := range a {
		if !n.matchDoc(d, pos) {
			return false
		}
	}
	return true
}

type orNode []node

func (o orNode) matchDoc(d bson.D, pos *int) bool {
	for _, n := range o {
		if n.matchDoc(d, pos) {
			return true
		}
	}
	return false
}

func (o orNode) match(v any, pos *int) bool {
	for _, n := range o {
		if n.match(v, pos) {
			return true
		}
	}
	return false
}

type norNode []node

func (o norNode) matchDoc(d bson.D, _ *int) bool {
	for _, n := range o {
		if n.matchDoc(d, nil) {
			return false
		}
	}
	return true
}

func (o norNode) match(v any, _ *int) bool {
	for _, n := range o {
		if n.match(v, nil) {
			return false
		}
	}
	return true
}

// notNode negates a whole path predicate: {a: {$ne: 1}} is false when any
// element of a is 1, so the negation wraps the traversal, not each element.
type notNode struct{ inner node }

func (n notNode) match(v any, _ *int) bool { return !n.inner.match(v, nil) }

func (n notNode) matchDoc(d bson.D, _ *int) bool { return !n.inner.matchDoc(d, nil) }

type constNode bool

func (c constNode) match(any, *int) bool { return bool(c) }

func (c constNode) matchDoc(bson.D, *int) bool { return bool(c) }

// ---- compilation ----

var topLevelUnsupported = map[string]bool{
	"$sampleRate": true,
}

func compileDoc(filter bson.D, ctx compileCtx) (node, error) {
	if len(filter) == 1 && !strings.HasPrefix(filter[0].Key, "$") {
		// One field, the usual filter ({_id: v}): no conjunction to build.
		return compileField(filter[0].Key, filter[0].Value, ctx)
	}
	var nodes andNode
	for _, e := range filter {
		if strings.HasPrefix(e.Key, "$") {
			n, err := compileTopLevel(e.Key, e.Value, ctx)
			if err != nil {
				return nil, err
			}
			if n != nil {
				nodes = append(nodes, n)
			}
			continue
		}
		n, err := compileField(e.Key, e.Value, ctx)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, n)
	}
	return simplifyAnd(lastWhere(nodes)), nil
}

func simplifyAnd(nodes andNode) node {
	switch len(nodes) {
	case 0:
		return constNode(true)
	case 1:
		return nodes[0]
	}
	return nodes
}

func compileTopLevel(op string, arg any, ctx compileCtx) (node, error) {
	switch op {
	case "$and", "$or", "$nor":
		arr := value.AsArray(arg)
		if len(arr) == 0 {
			return nil, cmderr.New(cmderr.BadValue, "%s must be a nonempty array", op)
		}
		kids := make([]node, 0, len(arr))
		kidCtx := ctx
		kidCtx.notTop = ctx.notTop || op != "$and"
		kidCtx.underNor = ctx.underNor || op == "$nor"
		kidCtx.underOr = ctx.underOr || (op == "$or" && len(arr) > 1)
		for _, x := range arr {
			d, ok := x.(bson.D)
			if !ok {
				return nil, cmderr.New(cmderr.BadValue, "$or/$and/$nor entries need to be full objects")
			}
			n, err := compileDoc(d, kidCtx)
			if err != nil {
				return nil, err
			}
			kids = append(kids, n)
		}
		switch op {
		case "$and":
			return simplifyAnd(kids), nil
		case "$or":
			if len(kids) == 1 {
				return kids[0], nil
			}
			return orNode(kids), nil
		}
		return norNode(kids), nil
	case "$comment":
		return nil, nil
	case "$text":
		return compileText(arg, ctx)
	case "$ref", "$id", "$db":
		// A DBRef's fields (in $elemMatch over DBRefs): an equality on
		// the field, only $id under the collation.
		coll := ctx.coll
		if op != "$id" {
			coll = nil
		}
		return newPath(op, ctx).with(newEqLeaf(arg, coll)), nil
	case "$alwaysTrue", "$alwaysFalse":
		if n, ok := value.ToFloat(arg); !ok || n != 1 {
			return nil, cmderr.New(cmderr.FailedToParse, "%s must be an integer value of 1", op)
		}
		return constNode(op == "$alwaysTrue"), nil
	case "$expr":
		if ctx.nested {
			return nil, cmderr.New(cmderr.BadValue, "$expr can only be applied to the top-level document")
		}
		return compileExpr(arg, ctx)
	case "$where":
		return compileWhere(arg, ctx)
	case "$jsonSchema":
		sch, err := CompileSchema(arg)
		if err != nil {
			return nil, err
		}
		return schemaNode{sch}, nil
	}
	if topLevelUnsupported[op] {
		return nil, cmderr.Unsupported("query operator " + op)
	}
	return nil, cmderr.New(cmderr.BadValue, "unknown top level operator: %s", op)
}

// isOperatorDoc reports whether v is an operator object such as {$gt: 1}
// rather than a literal document to compare against: MongoDB decides by the
// first field name.
func isOperatorDoc(v any) (bson.D, bool) {
	d, ok := v.(bson.D)
	if !ok || len(d) == 0 || !strings.HasPrefix(d[0].Key, "$") || isDBRef(d, false) {
		return nil, false
	}
	return d, true
}

// isDBRef reports a DBRef document, which mongod compares as a value
// although its field names start with $: one with $ref and $id or, where
// incomplete ones are allowed (in $elemMatch), any of $ref, $id and $db.
func isDBRef(d bson.D, incomplete bool) bool {
	var ref, id, db bool
	for _, e := range d {
		switch e.Key {
		case "$ref":
			ref = true
		case "$id":
			id = true
		case "$db":
			db = true
		}
	}
	if incomplete {
		return ref || id || db
	}
	return ref && id
}

func compileField(path string, v any, ctx compileCtx) (node, error) {
	if d, ok := isOperatorDoc(v); ok {
		return compileOps(newPath(path, ctx), d, ctx)
	}
	if re, ok := v.(bson.Regex); ok {
		l, err := newRegexLeaf(re.Pattern, re.Options)
		if err != nil {
			return nil, err
		}
		return newPath(path, ctx).with(l), nil
	}
	return newEqNode(path, v, ctx), nil
}

// compileOps compiles {$op: arg, ...} for one path. Each operator is its own
// path predicate, so {a: {$gt: 1, $lt: 5}} can be satisfied by different
// elements of an array a, as in MongoDB.
func compileOps(p pathSpec, ops bson.D, ctx compileCtx) (node, error) {
	if hasNear(ops) {
		return compileNear(p, ops, ctx)
	}
	var nodes andNode
	var regex *bson.Regex
	var options *string
	for _, e := range ops {
		op, arg := e.Key, e.Value
		switch op {
		case "$regex":
			switch r := arg.(type) {
			case string:
				regex = &bson.Regex{Pattern: r}
			case bson.Regex:
				regex = &r
			default:
				return nil, cmderr.New(cmderr.BadValue, "$regex has to be a string")
			}
			continue
		case "$options":
			s, ok := arg.(string)
			if !ok {
				return nil, cmderr.New(cmderr.BadValue, "$options has to be a string")
			}
			options = &s
			continue
		case "$comment":
			continue
		}
		n, err := compileOp(p, op, arg, ctx)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, n)
	}
	if options != nil && regex == nil {
		return nil, cmderr.New(cmderr.BadValue, "$options needs a $regex")
	}
	if regex != nil {
		opts := regex.Options
		if options != nil {
			if opts != "" {
				return nil, cmderr.New(cmderr.BadValue, "options set in both $regex and $options")
			}
			opts = *options
		}
		l, err := newRegexLeaf(regex.Pattern, opts)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, p.with(l))
	}
	return simplifyAnd(nodes), nil
}

var fieldUnsupported = map[string]bool{
	"$text": true, "$jsonSchema": true,
}

func compileOp(p pathSpec, op string, arg any, ctx compileCtx) (node, error) {
	if compile, ok := fieldOps[op]; ok {
		return compile(p, op, arg, ctx)
	}
	if fieldUnsupported[op] {
		return nil, cmderr.Unsupported("query operator " + op)
	}
	return nil, cmderr.New(cmderr.BadValue, "unknown operator: %s", op)
}

// fieldOpCompiler compiles one operator of a field's predicate,
// {path: {op: arg}}.
type fieldOpCompiler func(p pathSpec, op string, arg any, ctx compileCtx) (node, error)

// fieldOps are the field operators; set in init because $not's compiler
// leads back to compileOp.
var fieldOps map[string]fieldOpCompiler

func init() {
	fieldOps = map[string]fieldOpCompiler{
		"$eq":            compileEqOp,
		"$ne":            compileNeOp,
		"$gt":            compileCmpOp,
		"$gte":           compileCmpOp,
		"$lt":            compileCmpOp,
		"$lte":           compileCmpOp,
		"$in":            compileInOp,
		"$nin":           compileInOp,
		"$exists":        compileExistsOp,
		"$type":          compileTypeOp,
		"$size":          compileSizeOp,
		"$mod":           compileModOp,
		"$bitsAllSet":    compileBitsOp,
		"$bitsAnySet":    compileBitsOp,
		"$bitsAllClear":  compileBitsOp,
		"$bitsAnyClear":  compileBitsOp,
		"$all":           func(p pathSpec, _ string, arg any, ctx compileCtx) (node, error) { return compileAll(p, arg, ctx) },
		"$geoWithin":     compileGeo,
		"$within":        compileGeo,
		"$geoIntersects": compileGeo,
		"$elemMatch":     compileElemMatchOp,
		"$not":           compileNotOp,
	}
}

func compileEqOp(p pathSpec, _ string, arg any, ctx compileCtx) (node, error) {
	return p.with(newEqLeaf(arg, ctx.coll)), nil
}

func compileNeOp(p pathSpec, _ string, arg any, ctx compileCtx) (node, error) {
	return notNode{p.with(newEqLeaf(arg, ctx.coll))}, nil
}

func compileCmpOp(p pathSpec, op string, arg any, ctx compileCtx) (node, error) {
	if _, ok := arg.(bson.Regex); ok {
		return nil, cmderr.New(cmderr.BadValue, "Can't have RegEx as arg to predicate over field '%s'.", p.path)
	}
	return p.with(cmpLeaf{op: cmpOps[op], rhs: arg, coll: ctx.coll}), nil
}

func compileInOp(p pathSpec, op string, arg any, ctx compileCtx) (node, error) {
	l, err := newInLeaf(op, arg, ctx.coll)
	if err != nil {
		return nil, err
	}
	if op == "$nin" {
		return notNode{p.with(l)}, nil
	}
	return p.with(l), nil
}

func compileExistsOp(p pathSpec, _ string, arg any, _ compileCtx) (node, error) {
	if truthy(arg) {
		return p.with(existsLeaf{}), nil
	}
	return notNode{p.with(existsLeaf{})}, nil
}

func compileTypeOp(p pathSpec, _ string, arg any, _ compileCtx) (node, error) {
	l, err := newTypeLeaf(arg)
	if err != nil {
		return nil, err
	}
	return p.with(l), nil
}

// compileSizeOp and compileElemMatchOp look at an array as a whole, not at
// its elements.
func compileSizeOp(p pathSpec, _ string, arg any, _ compileCtx) (node, error) {
	n, err := parseSize(arg)
	if err != nil {
		return nil, err
	}
	return p.withNoExpand(sizeLeaf(n)), nil
}

func compileElemMatchOp(p pathSpec, _ string, arg any, ctx compileCtx) (node, error) {
	l, err := newElemMatchLeaf(arg, ctx)
	if err != nil {
		return nil, err
	}
	return p.withNoExpand(l), nil
}

func compileModOp(p pathSpec, _ string, arg any, _ compileCtx) (node, error) {
	l, err := newModLeaf(arg)
	if err != nil {
		return nil, err
	}
	return p.with(l), nil
}

func compileBitsOp(p pathSpec, op string, arg any, _ compileCtx) (node, error) {
	l, err := newBitsLeaf(p.path, op, arg)
	if err != nil {
		return nil, err
	}
	return p.with(l), nil
}

// compileNotOp negates a regex or a document of operators.
func compileNotOp(p pathSpec, _ string, arg any, ctx compileCtx) (node, error) {
	switch x := arg.(type) {
	case bson.Regex:
		l, err := newRegexLeaf(x.Pattern, x.Options)
		if err != nil {
			return nil, err
		}
		return notNode{p.with(l)}, nil
	case bson.D:
		if len(x) == 0 {
			return nil, cmderr.New(cmderr.BadValue, "$not cannot be empty")
		}
		if !strings.HasPrefix(x[0].Key, "$") {
			return nil, cmderr.New(cmderr.BadValue, "unknown operator: %s", x[0].Key)
		}
		notCtx := ctx
		notCtx.notTop = true
		n, err := compileOps(p, x, notCtx)
		if err != nil {
			return nil, err
		}
		return notNode{n}, nil
	}
	return nil, cmderr.New(cmderr.BadValue, "$not needs a regex or a document")
}

func compileAll(p pathSpec, arg any, ctx compileCtx) (node, error) {
	arr, ok := arg.(bson.A)
	if !ok {
		return nil, cmderr.New(cmderr.BadValue, "$all needs an array")
	}
	if len(arr) == 0 {
		return constNode(false), nil
	}
	var nodes andNode
	elemMatches := 0
	for _, x := range arr {
		if d, ok := isOperatorDoc(x); ok && d[0].Key == "$elemMatch" {
			elemMatches++
			l, err := newElemMatchLeaf(d[0].Value, ctx)
			if err != nil {
				return nil, err
			}
			nodes = append(nodes, p.withNoExpand(l))
			continue
		}
		if _, ok := isOperatorDoc(x); ok {
			return nil, cmderr.New(cmderr.BadValue, "no $ expressions in $all")
		}
		if re, ok := x.(bson.Regex); ok {
			l, err := newRegexLeaf(re.Pattern, re.Options)
			if err != nil {
				return nil, err
			}
			nodes = append(nodes, p.with(l))
			continue
		}
		nodes = append(nodes, p.with(newEqLeaf(x, ctx.coll)))
	}
	if elemMatches > 0 && elemMatches != len(arr) {
		return nil, cmderr.New(cmderr.BadValue, "$all/$elemMatch has to be consistent")
	}
	return simplifyAnd(nodes), nil
}

// truthy is the boolean reading of $exists' argument.
func truthy(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case nil, bson.Null, bson.Undefined:
		return false
	}
	if f, ok := value.ToFloat(v); ok {
		return f != 0
	}
	return true
}

// ---- leaves ----

// leaf is a predicate on one value reached by a path. v is missingValue when
// the path does not exist.
type leaf interface {
	matches(v any) bool
}

// indexedLeaf is a leaf that looks inside an array itself ($elemMatch) and
// reports which element matched.
type indexedLeaf interface {
	matchIndex(v any) (bool, int)
}

type missingValue struct{}

// missing stands for a path that does not exist in the document.
var missing any = missingValue{}

func isNull(v any) bool {
	switch v.(type) {
	case nil, bson.Null:
		return true
	}
	return false
}

func newEqLeaf(v any, coll value.Collator) leaf {
	if isNull(v) {
		return nullLeaf{}
	}
	return eqLeaf{v: v, coll: coll}
}

// nullLeaf is {$eq: null}: null or missing (not undefined, as in 8.0).
type nullLeaf struct{}

func (nullLeaf) matches(v any) bool { return v == missing || isNull(v) }

type eqLeaf struct {
	v    any
	coll value.Collator
}

func (l eqLeaf) matches(v any) bool {
	if v == missing {
		return false
	}
	return value.CompareWith(v, l.v, l.coll) == 0
}

type cmpOp int

const (
	opGT cmpOp = iota
	opGTE
	opLT
	opLTE
)

var cmpOps = map[string]cmpOp{"$gt": opGT, "$gte": opGTE, "$lt": opLT, "$lte": opLTE}

type cmpLeaf struct {
	op   cmpOp
	rhs  any
	coll value.Collator
}

func (l cmpLeaf) matches(v any) bool {
	inclusive := l.op == opGTE || l.op == opLTE
	if isNull(l.rhs) {
		// Only $gte/$lte null match, and then null and missing alike.
		return inclusive && (v == missing || isNull(v))
	}
	if v == missing {
		return false
	}
	rv, rr := value.TypeOrder(v), value.TypeOrder(l.rhs)
	if rv != rr {
		// Type bracketing, except that MinKey and MaxKey bound everything.
		switch l.rhs.(type) {
		case bson.MaxKey:
			return l.op == opLT || l.op == opLTE
		case bson.MinKey:
			return l.op == opGT || l.op == opGTE
		}
		return false
	}
	if value.IsNumber(v) {
		vn, rn := isNaN(v), isNaN(l.rhs)
		if vn || rn {
			return vn && rn && inclusive
		}
	}
	c := value.CompareWith(v, l.rhs, l.coll)
	switch l.op {
	case opGT:
		return c > 0
	case opGTE:
		return c >= 0
	case opLT:
		return c < 0
	}
	return c <= 0
}

func isNaN(v any) bool {
	switch x := v.(type) {
	case float64:
		return math.IsNaN(x)
	case bson.Decimal128:
		return x.IsNaN()
	}
	return false
}

// inLeaf is $in: the non-null values sorted for binary search, plus regexes.
type inLeaf struct {
	sorted  []any
	regexes []*regexLeaf
	null    bool
	coll    value.Collator
}

func newInLeaf(op string, arg any, coll value.Collator) (*inLeaf, error) {
	arr, ok := arg.(bson.A)
	if !ok {
		return nil, cmderr.New(cmderr.BadValue, "%s needs an array", op)
	}
	l := &inLeaf{coll: coll}
	for _, x := range arr {
		if _, ok := isOperatorDoc(x); ok {
			return nil, cmderr.New(cmderr.BadValue, "cannot nest $ under %s", op)
		}
		switch r := x.(type) {
		case bson.Regex:
			rl, err := newRegexLeaf(r.Pattern, r.Options)
			if err != nil {
				return nil, err
			}
			l.regexes = append(l.regexes, rl)
		case nil, bson.Null:
			l.null = true
			continue
		}
		l.sorted = append(l.sorted, x)
	}
	sort.SliceStable(l.sorted, func(i, j int) bool { return value.CompareWith(l.sorted[i], l.sorted[j], coll) < 0 })
	return l, nil
}

func (l *inLeaf) matches(v any) bool {
	if v == missing || isNull(v) {
		return l.null
	}
	if len(l.sorted) > 0 {
		lo, hi := 0, len(l.sorted)
		for lo < hi {
			mid := int(uint(lo+hi) >> 1)
			c := value.CompareWith(l.sorted[mid], v, l.coll)
			if c == 0 {
				return true
			}
			if c < 0 {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
	}
	for _, r := range l.regexes {
		if r.matches(v) {
			return true
		}
	}
	return false
}

type existsLeaf struct{}

func (existsLeaf) matches(v any) bool { return v != missing }

type sizeLeaf int

func (n sizeLeaf) matches(v any) bool {
	a, ok := v.(bson.A)
	return ok && len(a) == int(n)
}

func parseSize(arg any) (int, error) {
	if !value.IsNumber(arg) {
		return 0, cmderr.New(cmderr.BadValue, "$size needs a number")
	}
	n, ok := value.ToInt64(arg)
	if !ok {
		f, _ := value.ToFloat(arg)
		return 0, cmderr.New(cmderr.BadValue, "Failed to parse $size. Expected an integer, but found %v", f)
	}
	if n < 0 {
		return 0, cmderr.New(cmderr.BadValue, "Failed to parse $size. Expected a non-negative number, but found %d", n)
	}
	if n > math.MaxInt32 {
		return 0, cmderr.New(cmderr.BadValue, "Failed to parse $size. Cannot represent as a 32-bit integer: %d", n)
	}
	return int(n), nil
}

type modLeaf struct{ divisor, remainder int64 }

func newModLeaf(arg any) (modLeaf, error) {
	arr, ok := arg.(bson.A)
	if !ok {
		return modLeaf{}, cmderr.New(cmderr.BadValue, "malformed mod, needs to be an array")
	}
	if len(arr) < 2 {
		return modLeaf{}, cmderr.New(cmderr.BadValue, "malformed mod, not enough elements")
	}
	if len(arr) > 2 {
		return modLeaf{}, cmderr.New(cmderr.BadValue, "malformed mod, too many elements")
	}
	d, ok1 := truncInt(arr[0])
	r, ok2 := truncInt(arr[1])
	if !value.IsNumber(arr[0]) {
		return modLeaf{}, cmderr.New(cmderr.BadValue, "malformed mod, divisor not a number")
	}
	if !value.IsNumber(arr[1]) {
		return modLeaf{}, cmderr.New(cmderr.BadValue, "malformed mod, remainder not a number")
	}
	if !ok1 || !ok2 {
		return modLeaf{}, cmderr.New(cmderr.BadValue, "malformed mod, divisor and remainder must be finite numbers")
	}
	if d == 0 {
		return modLeaf{}, cmderr.New(cmderr.BadValue, "divisor cannot be 0")
	}
	return modLeaf{d, r}, nil
}

// truncInt converts a number to int64 truncating toward zero, as $mod does.
func truncInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case int:
		return int64(x), true
	}
	f, ok := value.ToFloat(v)
	if !ok || math.IsNaN(f) || math.IsInf(f, 0) || f >= 9.223372036854775807e18 || f < -9.223372036854775808e18 {
		return 0, false
	}
	return int64(math.Trunc(f)), true
}

func (l modLeaf) matches(v any) bool {
	n, ok := truncInt(v)
	if !ok {
		return false
	}
	if l.divisor == -1 { // avoid MinInt64 % -1 overflow
		return l.remainder == 0
	}
	return n%l.divisor == l.remainder
}

// typeLeaf is $type: a set of BSON type numbers, or "number".
type typeLeaf struct {
	codes  []int
	number bool
}

var typeAliases = map[string]int{
	"double": 1, "string": 2, "object": 3, "array": 4, "binData": 5, "undefined": 6,
	"objectId": 7, "bool": 8, "date": 9, "null": 10, "regex": 11, "dbPointer": 12,
	"javascript": 13, "symbol": 14, "javascriptWithScope": 15, "int": 16,
	"timestamp": 17, "long": 18, "decimal": 19, "minKey": -1, "maxKey": 127,
}

func newTypeLeaf(arg any) (*typeLeaf, error) {
	l := &typeLeaf{}
	add := func(x any) error {
		switch t := x.(type) {
		case string:
			if t == "number" {
				l.number = true
				return nil
			}
			code, ok := typeAliases[t]
			if !ok {
				return cmderr.New(cmderr.BadValue, "Unknown type name alias: %s", t)
			}
			l.codes = append(l.codes, code)
			return nil
		}
		if !value.IsNumber(x) {
			return cmderr.New(cmderr.TypeMismatch, "type must be represented as a number or a string")
		}
		n, ok := value.ToInt64(x)
		valid := ok && (n == -1 || n == 127 || (n >= 1 && n <= 19))
		if !valid {
			f, _ := value.ToFloat(x)
			return cmderr.New(cmderr.BadValue, "Invalid numerical type code: %v", f)
		}
		l.codes = append(l.codes, int(n))
		return nil
	}
	if arr, ok := arg.(bson.A); ok {
		if len(arr) == 0 {
			return nil, cmderr.New(cmderr.FailedToParse, "%v must match at least one type", "$type")
		}
		for _, x := range arr {
			if err := add(x); err != nil {
				return nil, err
			}
		}
		return l, nil
	}
	if err := add(arg); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *typeLeaf) matches(v any) bool {
	if v == missing {
		return false
	}
	if l.number && value.IsNumber(v) {
		return true
	}
	code := value.TypeNumber(v)
	for _, c := range l.codes {
		if c == code {
			return true
		}
	}
	return false
}

// elemMatchLeaf is $elemMatch: some element of the array satisfies inner,
// which is either a filter on element documents or, in the value form
// ({$elemMatch: {$gt: 1}}), predicates on the element itself.
type elemMatchLeaf struct {
	inner   node
	docForm bool
}

var elemMatchTopLevel = map[string]bool{
	"$and": true, "$or": true, "$nor": true, "$expr": true, "$text": true,
	"$comment": true, "$jsonSchema": true, "$alwaysTrue": true, "$alwaysFalse": true,
}

func newElemMatchLeaf(arg any, ctx compileCtx) (*elemMatchLeaf, error) {
	d, ok := arg.(bson.D)
	if !ok {
		return nil, cmderr.New(cmderr.BadValue, "$elemMatch needs an Object")
	}
	ctx.nested = true
	if len(d) > 0 && strings.HasPrefix(d[0].Key, "$") && !elemMatchTopLevel[d[0].Key] && !isDBRef(d, true) {
		ctx.valueForm = true
		for _, e := range d {
			if !strings.HasPrefix(e.Key, "$") {
				return nil, cmderr.New(cmderr.BadValue, "unknown operator: %s", e.Key)
			}
		}
		n, err := compileOps(newPath("", ctx), d, ctx)
		if err != nil {
			return nil, err
		}
		return &elemMatchLeaf{inner: n}, nil
	}
	ctx.valueForm = false
	n, err := compileDoc(d, ctx)
	if err != nil {
		return nil, err
	}
	return &elemMatchLeaf{inner: n, docForm: true}, nil
}

func (l *elemMatchLeaf) matches(v any) bool {
	ok, _ := l.matchIndex(v)
	return ok
}

func (l *elemMatchLeaf) matchIndex(v any) (bool, int) {
	arr, ok := v.(bson.A)
	if !ok {
		return false, -1
	}
	for i, e := range arr {
		if l.docForm {
			switch e.(type) {
			case bson.D, bson.M:
			default:
				continue
			}
		}
		if l.inner.match(e, nil) {
			return true, i
		}
	}
	return false, -1
}
