package query

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/expr"
)

// TextScoreField is the field under which a document carries its $text
// score (the textScore metadata) between the read that computed it and the
// projection or sort that reads it with {$meta: "textScore"}. BSON field
// names cannot hold a NUL byte, so it never collides with a stored field,
// and a document that still had it could not be sent.
const TextScoreField = expr.TextScoreField

// TextSearch is a compiled $text predicate, supplied by the caller, which
// knows the collection's text index, through Options.Text.
type TextSearch interface {
	// MatchDoc reports whether doc satisfies the predicate on its own:
	// it holds a term, no negated term, every phrase and no negated one.
	MatchDoc(doc bson.D) bool
}

// textNode is the $text predicate in a filter.
type textNode struct{ ts TextSearch }

func (t textNode) match(v any, _ *int) bool {
	d, ok := v.(bson.D)
	return ok && t.ts.MatchDoc(d)
}

func (t textNode) matchDoc(d bson.D, _ *int) bool { return t.ts.MatchDoc(d) }

// compileText compiles a top-level $text: allowed once per filter, at the
// top level or under $and, never under $nor or in $elemMatch, and only
// where the caller supplies Options.Text (find, count, distinct, writes,
// an aggregation's first $match).
func compileText(arg any, ctx compileCtx) (node, error) {
	if ctx.nested {
		return nil, cmderr.New(cmderr.BadValue, "$text can only be applied to the top-level document")
	}
	if ctx.text == nil || ctx.text.index == nil {
		return nil, cmderr.New(cmderr.BadValue, "$text is not allowed in this context")
	}
	if ctx.text.found != nil {
		return nil, cmderr.New(cmderr.BadValue, "Too many text expressions")
	}
	if ctx.underNor {
		return nil, cmderr.New(cmderr.BadValue, "text expression not allowed in nor")
	}
	if ctx.underOr {
		return nil, cmderr.Unsupported("$text under $or")
	}
	ts, err := ctx.text.index.CompileText(arg)
	if err != nil {
		return nil, err
	}
	ctx.text.found = ts
	return textNode{ts}, nil
}

// TextIndex is the text index of the collection a filter reads: it
// compiles the filter's $text argument.
type TextIndex interface {
	CompileText(arg any) (TextSearch, error)
}

// textState tracks the $text of the filter being compiled.
type textState struct {
	index TextIndex
	found TextSearch
}

// Text returns the filter's $text predicate, nil without one.
func (f *Filter) Text() TextSearch {
	if f == nil {
		return nil
	}
	return f.text
}

// WithoutText returns the filter with its $text predicate taken as true:
// what the documents a text index found must still satisfy.
func (f *Filter) WithoutText() *Filter {
	if f == nil || f.text == nil {
		return f
	}
	c := *f
	c.root = stripText(f.root)
	c.text = nil
	return &c
}

func stripText(n node) node {
	switch x := n.(type) {
	case textNode:
		return constNode(true)
	case andNode:
		out := make(andNode, len(x))
		for i, k := range x {
			out[i] = stripText(k)
		}
		return out
	}
	return n
}
