package expr

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

var logicOps = map[string]opCompiler{
	"$eq":       naryColl(2, 2, opCompare),
	"$ne":       naryColl(2, 2, opCompare),
	"$gt":       naryColl(2, 2, opCompare),
	"$gte":      naryColl(2, 2, opCompare),
	"$lt":       naryColl(2, 2, opCompare),
	"$lte":      naryColl(2, 2, opCompare),
	"$cmp":      naryColl(2, 2, opCompare),
	"$and":      compileAndOr,
	"$or":       compileAndOr,
	"$not":      nary(1, 1, func(_ string, v []any) (any, error) { return !Truthy(v[0]), nil }),
	"$cond":     compileCond,
	"$ifNull":   compileIfNull,
	"$switch":   compileSwitch,
	"$let":      compileLet,
	"$literal":  compileLiteral,
	"$type":     nary(1, 1, func(_ string, v []any) (any, error) { return typeName(v[0]), nil }),
	"$isNumber": nary(1, 1, func(_ string, v []any) (any, error) { return value.IsNumber(v[0]), nil }),
}

func opCompare(coll value.Collator, name string, vals []any) (any, error) {
	c := CompareValuesWith(vals[0], vals[1], coll)
	switch name {
	case "$eq":
		return c == 0, nil
	case "$ne":
		return c != 0, nil
	case "$gt":
		return c > 0, nil
	case "$gte":
		return c >= 0, nil
	case "$lt":
		return c < 0, nil
	case "$lte":
		return c <= 0, nil
	}
	return int32(c), nil
}

// compileAndOr short-circuits like the server.
func compileAndOr(name string, args any) (evalFn, error) {
	fns, err := compileArgs(name, args, 0, -1)
	if err != nil {
		return nil, err
	}
	isAnd := name == "$and"
	return func(s *scope) (any, error) {
		for _, fn := range fns {
			v, err := fn(s)
			if err != nil {
				return nil, err
			}
			if Truthy(v) != isAnd {
				return !isAnd, nil
			}
		}
		return isAnd, nil
	}, nil
}

func compileCond(name string, args any) (evalFn, error) {
	var parts [3]any
	if d, ok := asDoc(args); ok {
		have := map[string]bool{}
		for _, e := range d {
			switch e.Key {
			case "if":
				parts[0] = e.Value
			case "then":
				parts[1] = e.Value
			case "else":
				parts[2] = e.Value
			default:
				return nil, cmderr.New(17083, "Unrecognized parameter to $cond: %s", e.Key)
			}
			have[e.Key] = true
		}
		for _, k := range []string{"if", "then", "else"} {
			if !have[k] {
				return nil, cmderr.New(17080+map[string]int32{"if": 0, "then": 1, "else": 2}[k], "Missing '%s' parameter to $cond", k)
			}
		}
	} else {
		list := argList(args)
		if len(list) != 3 {
			return nil, cmderr.New(16020, "Expression $cond takes exactly 3 arguments. %d were passed in.", len(list))
		}
		copy(parts[:], list)
	}
	var fns [3]evalFn
	for i, p := range parts {
		fn, err := compile(p)
		if err != nil {
			return nil, err
		}
		fns[i] = fn
	}
	return func(s *scope) (any, error) {
		c, err := fns[0](s)
		if err != nil {
			return nil, err
		}
		if Truthy(c) {
			return fns[1](s)
		}
		return fns[2](s)
	}, nil
}

func compileIfNull(name string, args any) (evalFn, error) {
	fns, err := compileArgs(name, args, 2, -1)
	if err != nil {
		return nil, err
	}
	return func(s *scope) (any, error) {
		for i, fn := range fns {
			v, err := fn(s)
			if err != nil {
				return nil, err
			}
			if !IsNullish(v) || i == len(fns)-1 {
				return v, nil
			}
		}
		return nil, nil
	}, nil
}

func compileSwitch(name string, args any) (evalFn, error) {
	d, ok := asDoc(args)
	if !ok {
		return nil, cmderr.New(40060, "$switch requires an object as an argument, found: %s", typeName(args))
	}
	type branch struct{ cond, then evalFn }
	var branches []branch
	var def evalFn
	haveBranches := false
	for _, e := range d {
		switch e.Key {
		case "branches":
			haveBranches = true
			list, ok := value.ToArray(e.Value)
			if !ok {
				return nil, cmderr.New(40061, "$switch expected an array for 'branches', found: %s", typeName(e.Value))
			}
			for _, b := range list {
				bd, ok := asDoc(b)
				if !ok {
					return nil, cmderr.New(40062, "$switch expected each branch to be an object, found: %s", typeName(b))
				}
				var br branch
				for _, be := range bd {
					fn, err := compile(be.Value)
					if err != nil {
						return nil, err
					}
					switch be.Key {
					case "case":
						br.cond = fn
					case "then":
						br.then = fn
					default:
						return nil, cmderr.New(40063, "$switch found an unknown argument to a branch: %s", be.Key)
					}
				}
				if br.cond == nil {
					return nil, cmderr.New(40064, "$switch requires each branch have a 'case' expression")
				}
				if br.then == nil {
					return nil, cmderr.New(40065, "$switch requires each branch have a 'then' expression.")
				}
				branches = append(branches, br)
			}
		case "default":
			fn, err := compile(e.Value)
			if err != nil {
				return nil, err
			}
			def = fn
		default:
			return nil, cmderr.New(40067, "$switch found an unknown argument: %s", e.Key)
		}
	}
	if !haveBranches || len(branches) == 0 {
		return nil, cmderr.New(40068, "$switch requires at least one branch.")
	}
	return func(s *scope) (any, error) {
		for _, b := range branches {
			c, err := b.cond(s)
			if err != nil {
				return nil, err
			}
			if Truthy(c) {
				return b.then(s)
			}
		}
		if def == nil {
			return nil, cmderr.New(40066, "$switch could not find a matching branch for an input, and no default was specified.")
		}
		return def(s)
	}, nil
}

func compileLet(name string, args any) (evalFn, error) {
	m, err := namedArgs(name, args, []string{"vars", "in"})
	if err != nil {
		return nil, err
	}
	vd, ok := asDoc(m["vars"])
	if !ok {
		return nil, cmderr.New(10065, "invalid parameter: expected an object (vars)")
	}
	type binding struct {
		name string
		fn   evalFn
	}
	binds := make([]binding, 0, len(vd))
	for _, e := range vd {
		if err := checkVarName(e.Key, false); err != nil {
			return nil, err
		}
		fn, err := compile(e.Value)
		if err != nil {
			return nil, err
		}
		binds = append(binds, binding{e.Key, fn})
	}
	in, err := compile(m["in"])
	if err != nil {
		return nil, err
	}
	return func(s *scope) (any, error) {
		inner := s
		for _, b := range binds {
			// every binding sees the outer scope only, as in the server
			v, err := b.fn(s)
			if err != nil {
				return nil, err
			}
			inner = inner.with(b.name, v)
		}
		return in(inner)
	}, nil
}

func compileLiteral(name string, args any) (evalFn, error) {
	if d, ok := args.(bson.M); ok {
		args = value.AsDoc(d)
	}
	return constFn(args), nil
}
