package query

import (
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/js"
)

// whereNode is $where: a JavaScript function run with the document as
// this (and as the global obj), true when its result is.
type whereNode struct {
	fn  *js.Function
	env *js.Env
}

// matchAbort carries a script's error out of the predicate tree, which
// answers only booleans, to the Filter method that started the match.
type matchAbort struct{ err error }

func compileWhere(arg any, ctx compileCtx) (node, error) {
	if ctx.nested {
		return nil, cmderr.New(cmderr.BadValue, "$elemMatch cannot contain $where expression")
	}
	if ctx.scripts == nil {
		return nil, cmderr.New(cmderr.BadValue, "$where is not allowed in this context")
	}
	if err := ctx.scripts.Check(js.UseWhere); err != nil {
		return nil, err
	}
	switch arg.(type) {
	case string, bson.JavaScript, bson.CodeWithScope:
	default:
		return nil, cmderr.New(cmderr.BadValue, "$where got bad type")
	}
	fn, err := js.Compile(arg)
	if err != nil {
		return nil, err
	}
	*ctx.scripted = true
	return whereNode{fn: fn, env: ctx.scripts}, nil
}

func (n whereNode) match(v any, pos *int) bool {
	d, ok := v.(bson.D)
	return ok && n.matchDoc(d, pos)
}

func (n whereNode) matchDoc(d bson.D, _ *int) bool {
	ok, err := n.fn.Test(n.env, js.Call{This: d, Globals: bson.D{{Key: "obj", Value: d}}})
	if err != nil {
		panic(matchAbort{err})
	}
	return ok
}

// lastWhere moves $where predicates to the end of a conjunction, as
// mongod orders them: the script runs only for documents the cheaper
// predicates let through.
func lastWhere(nodes andNode) andNode {
	if !slices.ContainsFunc(nodes, isWhere) {
		return nodes // the common case, without a copy
	}
	out := make(andNode, 0, len(nodes))
	var wheres andNode
	for _, n := range nodes {
		if _, ok := n.(whereNode); ok {
			wheres = append(wheres, n)
			continue
		}
		out = append(out, n)
	}
	return append(out, wheres...)
}

func isWhere(n node) bool {
	_, ok := n.(whereNode)
	return ok
}

// matchScripted runs match, turning a script's error into a return value.
func matchScripted(match func() bool) (ok bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			a, isAbort := p.(matchAbort)
			if !isAbort {
				panic(p)
			}
			ok, err = false, a.err
		}
	}()
	return match(), nil
}

// Scripted reports whether the filter runs a script ($where): the caller
// should match copies outside its locks, since a script may run for long.
func (f *Filter) Scripted() bool { return f != nil && f.scripted }
