package agg

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/expr"
	"github.com/sturdy-go/sturdy/mongosim/internal/js"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// jsAccSpec is a compiled $accumulator: its scripts and initArgs.
type jsAccSpec struct {
	init, accumulate, merge, finalize *js.Function
	initArgs                          *expr.Expr
}

// jsAcc is one group's $accumulator. As on mongod, init runs with the
// group's first document's initArgs, the accumulate calls are batched and
// run when the result is asked for, and finalize (if any) maps the state.
type jsAcc struct {
	spec    *jsAccSpec
	env     *js.Env
	started bool
	state   any
	pending []bson.A
}

// compileJSAcc parses {$accumulator: {init, initArgs, accumulate,
// accumulateArgs, merge, finalize, lang}}; the accumulateArgs expression
// becomes the accSpec's argument.
func compileJSAcc(field string, arg any) (accSpec, error) {
	d, ok := value.ToDoc(arg)
	if !ok {
		return accSpec{}, cmderr.New(4544703, "$accumulator expects an object as an argument; found: %s", value.TypeName(arg))
	}
	s := &jsAccSpec{}
	var accArgs *expr.Expr
	for _, e := range d {
		var err error
		switch e.Key {
		case "init":
			s.init, err = expr.CompileBody("$accumulator", e.Key, e.Value)
		case "accumulate":
			s.accumulate, err = expr.CompileBody("$accumulator", e.Key, e.Value)
		case "merge":
			s.merge, err = expr.CompileBody("$accumulator", e.Key, e.Value)
		case "finalize":
			s.finalize, err = expr.CompileBody("$accumulator", e.Key, e.Value)
		case "initArgs":
			s.initArgs, err = expr.Compile(e.Value)
		case "accumulateArgs":
			accArgs, err = expr.Compile(e.Value)
		case "lang":
			l, isStr := e.Value.(string)
			if !isStr {
				return accSpec{}, cmderr.New(4544704, "$accumulator lang must be a string; found: %s", value.TypeName(e.Value))
			}
			if l != "js" {
				return accSpec{}, cmderr.New(4544705, "$accumulator only supports lang: 'js'")
			}
		default:
			return accSpec{}, cmderr.New(4544706, "$accumulator got an unexpected field: %s", e.Key)
		}
		if err != nil {
			return accSpec{}, err
		}
	}
	for _, req := range []struct {
		missing bool
		name    string
		code    int32
	}{{s.init == nil, "init", 4544707}, {s.accumulate == nil, "accumulate", 4544708}, {s.merge == nil, "merge", 4544709}, {accArgs == nil, "accumulateArgs", 4544710}} {
		if req.missing {
			return accSpec{}, cmderr.New(req.code, "$accumulator missing required argument '%s'", req.name)
		}
	}
	if s.initArgs == nil {
		s.initArgs = expr.MustCompile(bson.D{{Key: "$literal", Value: bson.A{}}})
	}
	return accSpec{field: field, op: "$accumulator", arg: accArgs, js: s, make: func() accumulator { return &jsAcc{spec: s} }}, nil
}

// start runs init for the group whose first document is doc.
func (a *jsAcc) start(rt *runtime, doc bson.D) error {
	a.started, a.env = true, expr.Scripts(rt.vars)
	if err := a.env.Check(js.UseAccumulator); err != nil {
		return err
	}
	iv, err := a.spec.initArgs.Eval(doc, rt.vars)
	if err != nil {
		return err
	}
	args, ok := iv.(bson.A)
	if !ok {
		return cmderr.New(4544711, "$accumulator initArgs must evaluate to an array: %s", expr.Render(iv))
	}
	a.state, err = a.spec.init.Run(a.env, js.Call{Args: args})
	return err
}

func (a *jsAcc) add(v any) error {
	args, ok := v.(bson.A)
	if !ok {
		return cmderr.New(4544712, "$accumulator accumulateArgs must evaluate to an array: %s", expr.Render(v))
	}
	a.pending = append(a.pending, args)
	return nil
}

func (a *jsAcc) result() any { return a.state }

// finish runs the batched accumulate calls and finalize.
func (a *jsAcc) finish() (any, error) {
	if len(a.pending) > 0 {
		st, err := a.spec.accumulate.Fold(a.env, a.state, a.pending)
		if err != nil {
			return nil, err
		}
		a.state, a.pending = st, nil
	}
	if a.spec.finalize == nil {
		return a.state, nil
	}
	return a.spec.finalize.Run(a.env, js.Call{Args: []any{a.state}})
}
