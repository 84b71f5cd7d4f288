package query

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/expr"
)

// exprNode is $expr: an aggregation expression evaluated against the whole
// document, true when its result is truthy. An evaluation error makes the
// document not match; MatchErr reports it.
type exprNode struct {
	e    *expr.Expr
	vars map[string]any
}

func compileExpr(arg any, ctx compileCtx) (node, error) {
	e, err := expr.Compile(arg)
	if err != nil {
		return nil, err
	}
	if ctx.checkVars {
		// A command's filter: an undefined variable fails at parse time,
		// as on mongod, even when no document is examined.
		if err := expr.CheckVariables(arg, ctx.vars); err != nil {
			return nil, err
		}
	}
	if ctx.exprs != nil {
		*ctx.exprs = append(*ctx.exprs, e)
	}
	return exprNode{e, ctx.vars}, nil
}

func (n exprNode) match(v any, _ *int) bool {
	d, ok := v.(bson.D)
	return ok && n.matchDoc(d, nil)
}

func (n exprNode) matchDoc(d bson.D, _ *int) bool {
	r, err := n.e.Eval(d, n.vars)
	return err == nil && expr.Truthy(r)
}

// MatchErr is Match that also reports an error raised while evaluating a
// $expr (for example $divide by zero), which the server would return for the
// whole command.
func (f *Filter) MatchErr(doc bson.D) (bool, error) {
	if f == nil {
		return true, nil
	}
	if f.scripted {
		ok, err := matchScripted(func() bool { return f.root.matchDoc(doc, nil) })
		if err != nil {
			return false, err
		}
		if !ok {
			return false, nil
		}
	}
	ok := f.scripted || f.root.matchDoc(doc, nil)
	for _, e := range f.exprs {
		if _, err := e.Eval(doc, f.vars); err != nil {
			return false, err
		}
	}
	return ok, nil
}

// projExpr is a computed projection field: an aggregation expression.
type projExpr struct{ e *expr.Expr }

func compileProjExpr(spec any) (*projExpr, error) {
	e, err := expr.Compile(spec)
	if err != nil {
		return nil, err
	}
	return &projExpr{e}, nil
}

// eval returns the field's value; ok is false when the result is missing
// (the field is then left out).
func (p *projExpr) eval(doc bson.D, vars map[string]any) (any, bool, error) {
	v, err := p.e.Eval(doc, vars)
	if err != nil {
		return nil, false, err
	}
	if expr.IsMissing(v) {
		return nil, false, nil
	}
	return v, true, nil
}
