package expr

import (
	"go.mongodb.org/mongo-driver/v2/bson"
	"slices"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// opCompiler compiles the arguments of one operator.
type opCompiler func(name string, args any) (evalFn, error)

// operators is filled in init to break the initialization cycle
// compile → compileOperator → operators → operator compilers → compile.
var operators map[string]opCompiler

// unsupported names real MongoDB expression operators mongosim does not
// implement: they fail with NotImplemented rather than "unrecognized".
var unsupported = map[string]bool{
	"$regexFind": true, "$regexFindAll": true,
	"$regexMatch": true, "$dateFromString": true, "$dateFromParts": true, "$dateToParts": true,
	"$isoWeek": true, "$isoWeekYear": true, "$isoDayOfWeek": true, "$week": true,
	"$meta": true, "$sampleRate": true, "$binarySize": true, "$bsonSize": true,
	"$toHashedIndexKey": true, "$tsSecond": true, "$tsIncrement": true, "$sortArray": true, "$zip": true, "$firstN": true, "$lastN": true,
	"$maxN": true, "$minN": true, "$median": true, "$percentile": true, "$stdDevPop": true,
	"$stdDevSamp": true, "$sin": true, "$cos": true, "$tan": true, "$asin": true, "$acos": true,
	"$atan": true, "$atan2": true, "$asinh": true, "$acosh": true, "$atanh": true, "$sinh": true,
	"$cosh": true, "$tanh": true, "$degreesToRadians": true, "$radiansToDegrees": true,
	"$replaceOne": true, "$replaceAll": true, "$indexOfBytes": true, "$indexOfCP": true,
	"$toDecimal": true, "$toUUID": true, "$createObjectId": true,
	"$bitAnd": true, "$bitOr": true, "$bitXor": true, "$bitNot": true,
}

func init() {
	operators = map[string]opCompiler{}
	for name, c := range arithOps {
		operators[name] = c
	}
	for name, c := range arrayOps {
		operators[name] = c
	}
	for name, c := range logicOps {
		operators[name] = c
	}
	for name, c := range stringOps {
		operators[name] = c
	}
	for name, c := range convertOps {
		operators[name] = c
	}
	for name, c := range objectOps {
		operators[name] = c
	}
	for name, c := range dateOps {
		operators[name] = c
	}
	for name, c := range dateArithOps {
		operators[name] = c
	}
	operators["$function"] = compileFunctionOp
}

func compileOperator(name string, args any) (evalFn, error) {
	if c, ok := operators[name]; ok {
		return c(name, args)
	}
	if unsupported[name] {
		return nil, cmderr.Unsupported("expression operator " + name)
	}
	return nil, cmderr.New(cmderr.InvalidPipelineOperator, "Unrecognized expression '%s'", name)
}

// argList is the operator's argument list: an array is the list, anything
// else a single argument.
func argList(args any) []any {
	switch a := args.(type) {
	case bson.A:
		return a
	case []any:
		return a
	}
	return []any{args}
}

// compileArgs compiles the argument list, checking its length: max < 0 means
// no upper bound.
func compileArgs(name string, args any, minN, maxN int) ([]evalFn, error) {
	list := argList(args)
	n := len(list)
	switch {
	case minN == maxN && n != minN:
		return nil, cmderr.New(16020, "Expression %s takes exactly %d arguments. %d were passed in.", name, minN, n)
	case maxN < 0 && n < minN:
		return nil, cmderr.New(16020, "Expression %s takes at least %d arguments, but %d were passed in.", name, minN, n)
	case maxN >= 0 && (n < minN || n > maxN):
		return nil, cmderr.New(28667, "Expression %s takes at least %d arguments, and at most %d, but %d were passed in.", name, minN, maxN, n)
	}
	fns := make([]evalFn, n)
	for i, a := range list {
		fn, err := compile(a)
		if err != nil {
			return nil, err
		}
		fns[i] = fn
	}
	return fns, nil
}

// evalAll evaluates argument functions; an absent one (nil, an optional
// argument not given) evaluates to nil.
func evalAll(s *scope, fns []evalFn) ([]any, error) {
	vals := make([]any, len(fns))
	for i, fn := range fns {
		if fn == nil {
			continue
		}
		v, err := fn(s)
		if err != nil {
			return nil, err
		}
		vals[i] = v
	}
	return vals, nil
}

// nary compiles an operator over evaluated arguments.
func nary(minN, maxN int, f func(name string, vals []any) (any, error)) opCompiler {
	return func(name string, args any) (evalFn, error) {
		fns, err := compileArgs(name, args, minN, maxN)
		if err != nil {
			return nil, err
		}
		return func(s *scope) (any, error) {
			vals, err := evalAll(s, fns)
			if err != nil {
				return nil, err
			}
			return f(name, vals)
		}, nil
	}
}

// naryColl is nary for operators whose comparisons follow the collation.
func naryColl(minN, maxN int, f func(coll value.Collator, name string, vals []any) (any, error)) opCompiler {
	return func(name string, args any) (evalFn, error) {
		fns, err := compileArgs(name, args, minN, maxN)
		if err != nil {
			return nil, err
		}
		return func(s *scope) (any, error) {
			vals, err := evalAll(s, fns)
			if err != nil {
				return nil, err
			}
			return f(s.coll, name, vals)
		}, nil
	}
}

// namedArgs splits an operator's document argument into its named
// parameters, rejecting unknown ones and reporting missing required ones.
func namedArgs(name string, args any, required []string, optional ...string) (map[string]any, error) {
	d, ok := asDoc(args)
	if !ok {
		return nil, cmderr.New(cmderr.FailedToParse, "%s only supports an object as its argument", name)
	}
	out, err := keepNamed(d, func(key string) error {
		return cmderr.New(cmderr.FailedToParse, "%s found an unknown argument: %s", name, key)
	}, slices.Concat(required, optional)...)
	if err != nil {
		return nil, err
	}
	for _, k := range required {
		if _, ok := out[k]; !ok {
			return nil, cmderr.New(cmderr.FailedToParse, "Missing '%s' parameter to %s", k, name)
		}
	}
	return out, nil
}

// namedFns compiles the named parameters keys of m (as namedArgs returns
// it) in order; an absent optional parameter gives a nil evalFn.
func namedFns(m map[string]any, keys ...string) ([]evalFn, error) {
	fns := make([]evalFn, len(keys))
	for i, k := range keys {
		v, ok := m[k]
		if !ok {
			continue
		}
		fn, err := compile(v)
		if err != nil {
			return nil, err
		}
		fns[i] = fn
	}
	return fns, nil
}

// evalArray evaluates an operator's array input: ok is false for null or
// missing, and notArray builds the error for any other non-array value.
func evalArray(s *scope, input evalFn, notArray func(v any) error) (a bson.A, ok bool, err error) {
	v, err := input(s)
	if err != nil {
		return nil, false, err
	}
	if IsNullish(v) {
		return nil, false, nil
	}
	if a, ok = value.ToArray(v); !ok {
		return nil, false, notArray(v)
	}
	return a, true, nil
}

func asDoc(v any) (bson.D, bool) {
	switch d := v.(type) {
	case bson.D:
		return d, true
	case bson.M:
		out := make(bson.D, 0, len(d))
		for k, x := range d {
			out = append(out, bson.E{Key: k, Value: x})
		}
		return out, true
	}
	return nil, false
}

// namedErr builds a command error whose code cmderr has no name for.
func namedErr(code int32, codeName, format string, args ...any) *cmderr.Error {
	e := cmderr.New(code, format, args...)
	e.Name = codeName
	return e
}
