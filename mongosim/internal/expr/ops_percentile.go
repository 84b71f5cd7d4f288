package expr

import (
	"math"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// $percentile and $median: {input, p, method}. mongod 8.0 accepts only
// method "approximate"; on an array input (the expression form) it computes
// the discrete percentile exactly, which is what these functions answer.

func init() {
	operators["$percentile"] = compileQuantileExpr
	operators["$median"] = compileQuantileExpr
}

// QuantileSpec is a parsed $percentile or $median specification.
type QuantileSpec struct {
	Input  any       // the input expression's specification
	P      []float64 // the percentiles ({0.5} for $median)
	Median bool
}

// ParseQuantile parses the specification of $percentile or $median (also
// used by the accumulator and window function forms); notObject is the
// code mongod answers for a non-object specification.
func ParseQuantile(name string, spec any, notObject int32) (QuantileSpec, error) {
	d, ok := asDoc(spec)
	if !ok {
		return QuantileSpec{}, cmderr.New(notObject, "specification must be an object; found %s", render(spec))
	}
	q := QuantileSpec{Median: name == "$median"}
	var method any
	haveInput, haveP, haveMethod := false, false, false
	for _, e := range d {
		switch {
		case e.Key == "input":
			q.Input, haveInput = e.Value, true
		case e.Key == "method":
			method, haveMethod = e.Value, true
		case e.Key == "p" && !q.Median:
			x, err := Compile(e.Value)
			if err != nil {
				return QuantileSpec{}, err
			}
			c, isConst := x.Constant()
			if !isConst {
				// A literal array of numbers compiles as an array expression.
				if v, err := x.Eval(nil, nil); err == nil && !IsMissing(v) {
					c, isConst = v, isConstantArray(e.Value)
				}
			}
			if !isConst {
				return QuantileSpec{}, cmderr.New(7750300, "The $percentile 'p' field must be an array of constant values, but found value: %s.", render(e.Value))
			}
			a, ok := value.ToArray(c)
			if !ok || len(a) == 0 {
				return QuantileSpec{}, cmderr.New(7750301, "The $percentile 'p' field must be an array of numbers from [0.0, 1.0], but found: %s", render(c))
			}
			for _, x := range a {
				if !value.IsNumber(x) {
					return QuantileSpec{}, cmderr.New(7750302, "The $percentile 'p' field must be an array of numbers from [0.0, 1.0], but found: %s", render(x))
				}
				f, _ := value.ToFloat(x)
				if f < 0 || f > 1 {
					return QuantileSpec{}, cmderr.New(7750303, "The $percentile 'p' field must be an array of numbers from [0.0, 1.0], but found: %s", numberString(f))
				}
				q.P = append(q.P, f)
			}
			haveP = true
		default:
			return QuantileSpec{}, cmderr.New(40415, "BSON field '%s.%s' is an unknown field.", name, e.Key)
		}
	}
	if q.Median {
		q.P, haveP = []float64{0.5}, true
	}
	for _, f := range []struct {
		name string
		have bool
	}{{"input", haveInput}, {"p", haveP}, {"method", haveMethod}} {
		if !f.have {
			return QuantileSpec{}, cmderr.New(40414, "BSON field '%s.%s' is missing but a required field", name, f.name)
		}
	}
	m, ok := method.(string)
	if !ok {
		return QuantileSpec{}, cmderr.New(cmderr.TypeMismatch, "BSON field '%s.method' is the wrong type '%s', expected type 'string'", name, typeName(method))
	}
	if m != "approximate" {
		return QuantileSpec{}, cmderr.New(cmderr.BadValue, "Currently only 'approximate' can be used as percentile 'method'.")
	}
	return q, nil
}

func isConstantArray(spec any) bool {
	a, ok := value.ToArray(spec)
	if !ok {
		return false
	}
	for _, x := range a {
		if _, isDoc := asDoc(x); isDoc {
			return false
		}
		if s, isStr := x.(string); isStr && len(s) > 0 && s[0] == '$' {
			return false
		}
	}
	return true
}

// Result is the answer for the numeric samples (others ignored): one
// double per percentile, or nulls with no samples; $median answers the
// single value.
func (q QuantileSpec) Result(samples []float64) any {
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	out := make(bson.A, len(q.P))
	for i, p := range q.P {
		if len(sorted) == 0 {
			out[i] = nil
			continue
		}
		n := len(sorted)
		rank := n - 1
		if p < 1 {
			rank = max(0, int(math.Ceil(float64(n)*p))-1)
		}
		out[i] = sorted[rank]
	}
	if q.Median {
		return out[0]
	}
	return out
}

func compileQuantileExpr(name string, args any) (evalFn, error) {
	code := int32(7436200)
	if name == "$median" {
		code = 7436201
	}
	q, err := ParseQuantile(name, args, code)
	if err != nil {
		return nil, err
	}
	input, err := compile(q.Input)
	if err != nil {
		return nil, err
	}
	return func(s *scope) (any, error) {
		v, err := input(s)
		if err != nil {
			return nil, err
		}
		var samples []float64
		if value.IsNumber(v) {
			f, _ := value.ToFloat(v)
			samples = []float64{f}
		} else if a, ok := value.ToArray(v); ok {
			for _, x := range a {
				if value.IsNumber(x) {
					f, _ := value.ToFloat(x)
					samples = append(samples, f)
				}
			}
		}
		return q.Result(samples), nil
	}, nil
}
