package expr

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/js"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// scriptsVar is the vars key WithScripts uses (a NUL byte: no variable
// name can collide with it).
const scriptsVar = "\x00js"

// WithScripts returns a copy of vars that also carries env, under which
// $function runs its scripts. A nil env returns vars unchanged, and
// $function then fails as on a mongod with scripting disabled.
func WithScripts(vars map[string]any, env *js.Env) map[string]any {
	if env == nil {
		return vars
	}
	out := make(map[string]any, len(vars)+1)
	for k, v := range vars {
		out[k] = v
	}
	out[scriptsVar] = env
	return out
}

// Scripts returns the env WithScripts put into vars, or nil.
func Scripts(vars map[string]any) *js.Env {
	e, _ := vars[scriptsVar].(*js.Env)
	return e
}

// CompileBody compiles the script of $function (body) or of $accumulator
// (init, accumulate, merge, finalize): a constant string or code.
func CompileBody(op, field string, spec any) (*js.Function, error) {
	if !isLiteral(spec) {
		if op == "$function" {
			return nil, cmderr.New(31432, "The body function must be a constant expression")
		}
		return nil, cmderr.New(4544711, "%s '%s' must be a constant expression", op, field)
	}
	switch spec.(type) {
	case string, bson.JavaScript:
	default:
		if op == "$function" {
			return nil, cmderr.New(31262, "The body function must evaluate to type string or code")
		}
		return nil, cmderr.New(4544712, "%s '%s' must be a string or code", op, field)
	}
	return js.Compile(spec)
}

// checkLang checks an operator's lang field, which must be "js".
func checkLang(d bson.D, missingCode, badCode int32) error {
	lang, ok := value.Get(d, "lang")
	if !ok {
		return cmderr.New(missingCode, "The lang field must be specified.")
	}
	if s, isStr := lang.(string); !isStr || s != "js" {
		return cmderr.New(badCode, "Currently the only supported language specifier is 'js'.")
	}
	return nil
}

func compileFunctionOp(name string, args any) (evalFn, error) {
	d, ok := value.ToDoc(args)
	if !ok {
		return nil, cmderr.New(31260, "$function requires an object as an argument, found: %s", value.TypeName(args))
	}
	body, ok := value.Get(d, "body")
	if !ok {
		return nil, cmderr.New(31261, "The body function must be specified.")
	}
	fn, err := CompileBody(name, "body", body)
	if err != nil {
		return nil, err
	}
	argSpec, ok := value.Get(d, "args")
	if !ok {
		return nil, cmderr.New(31263, "The args field must be specified.")
	}
	argFn, err := compile(argSpec)
	if err != nil {
		return nil, err
	}
	if err := checkLang(d, 31418, 31419); err != nil {
		return nil, err
	}
	return func(s *scope) (any, error) {
		env := Scripts(s.vars)
		if err := env.Check(js.UseFunction); err != nil {
			return nil, err
		}
		av, err := argFn(s)
		if err != nil {
			return nil, err
		}
		list, isArr := av.(bson.A)
		if !isArr {
			return nil, cmderr.New(31266, "The args field must be of type array")
		}
		return fn.Run(env, js.Call{This: bson.D{}, Args: list})
	}, nil
}
