package value

import (
	"math"
	"math/big"
	"strconv"

	"github.com/cockroachdb/apd/v3"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// Decimal128 arithmetic is exact, as mongod's: 0.1 + 0.2 is 0.3. It is done
// with apd in IEEE 754-2008 decimal128's context (34 digits, exponents
// -6143..6144, round half even); an int converts exactly and a double
// converts to its 15 significant digits, as mongod converts a double it
// mixes with a decimal.

var decimal128 = apd.Context{
	Precision:   34,
	MaxExponent: 6144,
	MinExponent: -6143,
	Rounding:    apd.RoundHalfEven,
}

// toDecimal converts a BSON number to an apd decimal.
func toDecimal(v any) (*apd.Decimal, bool) {
	switch n := v.(type) {
	case int32:
		return apd.New(int64(n), 0), true
	case int64:
		return apd.New(n, 0), true
	case int:
		return apd.New(int64(n), 0), true
	case float64:
		d := new(apd.Decimal)
		switch {
		case math.IsNaN(n):
			d.Form = apd.NaN
		case math.IsInf(n, 0):
			d.Form, d.Negative = apd.Infinite, n < 0
		default:
			if _, _, err := d.SetString(strconv.FormatFloat(n, 'e', 14, 64)); err != nil {
				return nil, false
			}
		}
		return d, true
	case bson.Decimal128:
		d, _, err := apd.NewFromString(n.String())
		if err != nil {
			return nil, false
		}
		return d, true
	}
	return nil, false
}

// fromDecimal converts an apd decimal (already in decimal128's range) back.
func fromDecimal(d *apd.Decimal) bson.Decimal128 {
	var s string
	switch d.Form {
	case apd.NaN, apd.NaNSignaling:
		s = "NaN"
	case apd.Infinite:
		s = "Infinity"
		if d.Negative {
			s = "-Infinity"
		}
	default:
		s = d.Text('E')
	}
	r, err := bson.ParseDecimal128(s)
	if err != nil {
		r, _ = bson.ParseDecimal128("NaN")
	}
	return r
}

// decimalOp applies op to a and b as decimals.
func decimalOp(a, b any, op func(d, x, y *apd.Decimal) (apd.Condition, error)) (any, error) {
	x, ok1 := toDecimal(a)
	y, ok2 := toDecimal(b)
	if !ok1 || !ok2 {
		return nil, ErrNotNumber
	}
	d := new(apd.Decimal)
	if _, err := op(d, x, y); err != nil {
		return nil, err
	}
	return fromDecimal(d), nil
}

// Divide returns a/b: a decimal when either operand is one, else a double.
// It does not check for a zero divisor; callers report that as mongod does.
func Divide(a, b any) (any, error) {
	ka, ok1 := kindOf(a)
	kb, ok2 := kindOf(b)
	if !ok1 || !ok2 {
		return nil, ErrNotNumber
	}
	if max(ka, kb) == kDecimal {
		return decimalOp(a, b, quo)
	}
	x, _ := ToFloat(a)
	y, _ := ToFloat(b)
	return x / y, nil
}

// quo divides as IEEE 754 does: an exact quotient takes the exponent
// closest to the ideal one (the dividend's less the divisor's), so 10.29/2
// is 5.145, not 5.145000…; an inexact one has all 34 digits.
func quo(d, x, y *apd.Decimal) (apd.Condition, error) {
	cond, err := decimal128.Quo(d, x, y)
	if err != nil || cond.Inexact() || d.Form != apd.Finite {
		return cond, err
	}
	ideal := x.Exponent - y.Exponent
	var q, r apd.BigInt
	for d.Exponent < ideal && d.Coeff.Sign() != 0 {
		q.QuoRem(&d.Coeff, apd.NewBigInt(10), &r)
		if r.Sign() != 0 {
			break
		}
		d.Coeff.Set(&q)
		d.Exponent++
	}
	if d.Coeff.Sign() == 0 && d.Exponent < ideal {
		d.Exponent = ideal
	}
	return cond, nil
}

// NegateDecimal returns -v for a decimal (exactly); ok is false for other types.
func NegateDecimal(v any) (any, bool) { return decimalUnary(v, decimal128.Neg) }

// AbsDecimal returns |v| for a decimal; ok is false for other types.
func AbsDecimal(v any) (any, bool) { return decimalUnary(v, decimal128.Abs) }

func decimalUnary(v any, op func(d, x *apd.Decimal) (apd.Condition, error)) (any, bool) {
	d, ok := v.(bson.Decimal128)
	if !ok {
		return nil, false
	}
	x, ok := toDecimal(d)
	if !ok {
		return nil, false
	}
	r := new(apd.Decimal)
	if _, err := op(r, x); err != nil {
		return nil, false
	}
	return fromDecimal(r), true
}

// compareWithDecimal orders two numbers at least one of which is a
// decimal, exactly: a double is compared by its exact binary value, so
// NumberDecimal("0.1") and the double 0.1 differ, as on mongod. NaN sorts
// below every number and equals NaN.
func compareWithDecimal(a, b any) int {
	ra, nanA := exactRat(a)
	rb, nanB := exactRat(b)
	switch {
	case nanA && nanB:
		return 0
	case nanA:
		return -1
	case nanB:
		return 1
	}
	ia, ib := infSign(a), infSign(b)
	if ia != 0 || ib != 0 {
		return cmpInt(ia, ib)
	}
	return ra.Cmp(rb)
}

// exactRat is v's exact value (nil for infinities); nan reports NaN.
func exactRat(v any) (r *big.Rat, nan bool) {
	switch n := v.(type) {
	case float64:
		if math.IsNaN(n) {
			return nil, true
		}
		if math.IsInf(n, 0) {
			return nil, false
		}
		return new(big.Rat).SetFloat64(n), false
	case bson.Decimal128:
		if n.IsNaN() {
			return nil, true
		}
		if n.IsInf() != 0 {
			return nil, false
		}
		bi, exp, err := n.BigInt()
		if err != nil {
			return nil, true
		}
		r := new(big.Rat).SetInt(bi)
		scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(exp))), nil)
		if exp >= 0 {
			return r.Mul(r, new(big.Rat).SetInt(scale)), false
		}
		return r.Quo(r, new(big.Rat).SetInt(scale)), false
	}
	i, _ := Integer(v)
	return new(big.Rat).SetInt64(i), false
}

func infSign(v any) int {
	switch n := v.(type) {
	case float64:
		switch {
		case math.IsInf(n, 1):
			return 1
		case math.IsInf(n, -1):
			return -1
		}
	case bson.Decimal128:
		return n.IsInf()
	}
	return 0
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
