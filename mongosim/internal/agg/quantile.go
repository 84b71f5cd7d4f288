package agg

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/expr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// $percentile and $median as $group accumulators and window functions.
// mongod 8.0 computes them with a t-digest ("approximate"); mongosim keeps
// the samples and answers the exact discrete percentile, which the t-digest
// approximates.

var quantileOps = map[string]bool{"$percentile": true, "$median": true}

// compileQuantileAcc compiles {$percentile: {input, p, method}} or
// {$median: {input, method}}.
func compileQuantileAcc(op string, argSpec any) (*expr.Expr, func() accumulator, error) {
	code := int32(7429703)
	if op == "$median" {
		code = 7436100
	}
	q, err := expr.ParseQuantile(op, argSpec, code)
	if err != nil {
		return nil, nil, err
	}
	x, err := expr.Compile(q.Input)
	if err != nil {
		return nil, nil, err
	}
	return x, func() accumulator { return &quantileAcc{q: q} }, nil
}

type quantileAcc struct {
	q       expr.QuantileSpec
	samples []float64
}

func (a *quantileAcc) add(v any) error {
	if value.IsNumber(v) {
		f, _ := value.ToFloat(v)
		a.samples = append(a.samples, f)
	}
	return nil
}

func (a *quantileAcc) result() any {
	r := a.q.Result(a.samples)
	if arr, ok := r.(bson.A); ok {
		return arr
	}
	return r
}
