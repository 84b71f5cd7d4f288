package js

import (
	"context"
	"fmt"
	"strings"

	"github.com/dop251/goja"
	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/parser"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// Function is a compiled script function. It is immutable and safe for
// concurrent use: each run evaluates it in a pooled runtime.
type Function struct {
	prog  *goja.Program
	scope bson.D // a CodeWithScope's scope: globals set before each call
}

// Call is one invocation of a Function.
type Call struct {
	// This is the function's this (nil: undefined).
	This bson.D
	// Args are the function's arguments, as BSON values.
	Args []any
	// Globals are set as global variables for the call ($where's obj,
	// mapReduce's scope), after the function's own scope.
	Globals bson.D
	// Emit, when set, receives emit(key, value) (mapReduce's map).
	Emit func(key, value any) error
}

// Compile compiles code, a string, bson.JavaScript or bson.CodeWithScope
// holding a function ("function (a) { ... }"). As on mongod, code that is
// not a function is taken as a function body, where a single expression is
// returned: "this.a > 1" and "return this.a > 1" are the same function.
func Compile(code any) (*Function, error) {
	var src string
	var scope bson.D
	switch c := code.(type) {
	case string:
		src = c
	case bson.JavaScript:
		src = string(c)
	case bson.CodeWithScope:
		src = string(c.Code)
		if d, ok := c.Scope.(bson.D); ok {
			scope = d
		} else if raw, ok := c.Scope.(bson.Raw); ok {
			if err := bson.Unmarshal(raw, &scope); err != nil {
				return nil, cmderr.New(cmderr.BadValue, "invalid scope: %v", err)
			}
		}
	default:
		return nil, cmderr.New(cmderr.BadValue, "code must be a string or JavaScript code")
	}
	prog, err := compileSource(src)
	if err != nil {
		return nil, err
	}
	return &Function{prog: prog, scope: scope}, nil
}

// compileSource compiles src into a program whose value is the function.
// As mongod's parser does, source that is not a function expression is a
// function body in which the last statement, if it is an expression, is
// returned: "this.a > 1" and "var x = this.a; x > 1" both return the test.
func compileSource(src string) (*goja.Program, error) {
	t := strings.TrimSpace(src)
	if strings.HasPrefix(t, "function") {
		if p, err := goja.Compile("", "("+t+"\n)", false); err == nil {
			return p, nil
		}
	}
	body := t
	if prog, err := parser.ParseFile(nil, "", t, 0); err == nil && len(prog.Body) > 0 {
		if last, ok := prog.Body[len(prog.Body)-1].(*ast.ExpressionStatement); ok {
			i := int(last.Idx0()) - 1 // file.Idx is 1-based
			if i >= 0 && i <= len(t) {
				body = t[:i] + "return " + t[i:]
			}
		}
	}
	p, err := goja.Compile("", "(function() {\n"+body+"\n})", false)
	if err != nil {
		return nil, syntaxErr(err)
	}
	return p, nil
}

func syntaxErr(err error) error {
	msg := err.Error()
	if se, ok := err.(*goja.CompilerSyntaxError); ok {
		msg = "SyntaxError: " + se.Message
	}
	return cmderr.New(JSInterpreterFailure, "%s :\n", msg)
}

// Run calls f under env and returns its result as a BSON value.
func (f *Function) Run(env *Env, c Call) (any, error) {
	var out any
	err := f.run(env, c, func(r *runner, v goja.Value) error {
		var err error
		out, err = r.export(v, nil, 0)
		return err
	})
	return out, err
}

// Test calls f under env and reports whether its result is true in
// JavaScript ($where's test).
func (f *Function) Test(env *Env, c Call) (bool, error) {
	var out bool
	err := f.run(env, c, func(_ *runner, v goja.Value) error {
		out = v.ToBoolean()
		return nil
	})
	return out, err
}

func (f *Function) run(env *Env, c Call, result func(*runner, goja.Value) error) error {
	ctx := env.ctx()
	if ctx.Err() != nil {
		return interruptErr(ctx)
	}
	r := getRunner()
	defer putRunner(r)
	return r.guard(ctx, c.Emit, func() error {
		fn, err := r.function(f)
		if err != nil {
			return err
		}
		for _, e := range f.scope {
			r.vm.Set(e.Key, r.toJS(e.Value, 0))
		}
		for _, e := range c.Globals {
			r.vm.Set(e.Key, r.toJS(e.Value, 0))
		}
		this := goja.Undefined()
		if c.This != nil {
			this = r.toJS(c.This, 0)
		}
		args := make([]goja.Value, len(c.Args))
		for i, a := range c.Args {
			args[i] = r.toJS(a, 0)
		}
		v, err := fn(this, args...)
		if err != nil {
			return err
		}
		return result(r, v)
	})
}

// scriptErr converts what a run raised into mongod's error.
func scriptErr(ctx context.Context, err error) error {
	switch e := err.(type) {
	case *goja.InterruptedError:
		return interruptErr(ctx)
	case *goja.StackOverflowError:
		return cmderr.New(JSInterpreterFailure, "InternalError: too much recursion :\n")
	case *goja.Exception:
		if ce, ok := e.Unwrap().(*cmderr.Error); ok {
			return ce // a conversion error raised inside a helper
		}
		var stack strings.Builder
		for _, fr := range e.Stack() {
			pos := fr.Position()
			fmt.Fprintf(&stack, "%s@:%d:%d\n", fr.FuncName(), pos.Line, pos.Column)
		}
		return cmderr.New(JSInterpreterFailure, "%s :\n%s", e.Value().String(), stack.String())
	case *cmderr.Error:
		return e
	}
	return cmderr.New(JSInterpreterFailure, "%v", err)
}

// Fold calls f(state, args...) for each args in calls, keeping the state
// in the runtime from one call to the next, as mongod runs a batch of
// $accumulator accumulate calls, and returns the last state as BSON.
func (f *Function) Fold(env *Env, state any, calls []bson.A) (any, error) {
	ctx := env.ctx()
	if ctx.Err() != nil {
		return nil, interruptErr(ctx)
	}
	r := getRunner()
	defer putRunner(r)
	var out any
	err := r.guard(ctx, nil, func() error {
		fn, err := r.function(f)
		if err != nil {
			return err
		}
		for _, e := range f.scope {
			r.vm.Set(e.Key, r.toJS(e.Value, 0))
		}
		st := r.toJS(state, 0)
		for _, call := range calls {
			args := make([]goja.Value, 0, len(call)+1)
			args = append(args, st)
			for _, a := range call {
				args = append(args, r.toJS(a, 0))
			}
			if st, err = fn(goja.Undefined(), args...); err != nil {
				return err
			}
		}
		out, err = r.export(st, nil, 0)
		return err
	})
	return out, err
}
