package value

import (
	"errors"
	"math"

	"github.com/cockroachdb/apd/v3"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// ErrNotNumber is returned by the arithmetic helpers for a non-numeric operand.
var ErrNotNumber = errors.New("value: operand is not a number")

// ErrOverflow is returned when integer arithmetic overflows int64.
var ErrOverflow = errors.New("value: integer overflow")

// numeric kinds in promotion order
const (
	kInt32 = iota
	kInt64
	kDouble
	kDecimal
)

func kindOf(v any) (int, bool) {
	switch v.(type) {
	case int32:
		return kInt32, true
	case int64, int:
		return kInt64, true
	case float64:
		return kDouble, true
	case bson.Decimal128:
		return kDecimal, true
	}
	return 0, false
}

// Add returns a+b with MongoDB's promotion: int32+int32 stays int32 unless it
// overflows (then int64); int64 overflow is an error; any double gives a double.
// A Decimal128 operand makes the result an exact Decimal128 (decimal.go).
func Add(a, b any) (any, error) {
	return arith(a, b, decimal128.Add,
		func(x, y int64) (int64, bool) {
			s := x + y
			return s, (x >= 0) == (y >= 0) && (s >= 0) != (x >= 0)
		},
		func(x, y float64) float64 { return x + y })
}

// Multiply returns a*b with the same promotion rules as Add.
func Multiply(a, b any) (any, error) {
	return arith(a, b, decimal128.Mul,
		func(x, y int64) (int64, bool) {
			if x == 0 || y == 0 {
				return 0, false
			}
			p := x * y
			return p, p/y != x || (x == -1 && y == math.MinInt64) || (y == -1 && x == math.MinInt64)
		},
		func(x, y float64) float64 { return x * y })
}

func arith(a, b any, decOp func(d, x, y *apd.Decimal) (apd.Condition, error), intOp func(x, y int64) (int64, bool), floatOp func(x, y float64) float64) (any, error) {
	ka, ok1 := kindOf(a)
	kb, ok2 := kindOf(b)
	if !ok1 || !ok2 {
		return nil, ErrNotNumber
	}
	k := max(ka, kb)
	if k == kDecimal {
		return decimalOp(a, b, decOp)
	}
	if k >= kDouble {
		x, _ := ToFloat(a)
		y, _ := ToFloat(b)
		return floatOp(x, y), nil
	}
	x, _ := Integer(a)
	y, _ := Integer(b)
	r, overflow := intOp(x, y)
	if overflow {
		return nil, ErrOverflow
	}
	if k == kInt32 && r >= math.MinInt32 && r <= math.MaxInt32 {
		return int32(r), nil
	}
	return r, nil
}
