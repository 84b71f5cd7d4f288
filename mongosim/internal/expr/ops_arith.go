package expr

import (
	"errors"
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

var arithOps = map[string]opCompiler{
	"$add":      nary(0, -1, opAdd),
	"$subtract": nary(2, 2, opSubtract),
	"$multiply": nary(0, -1, opMultiply),
	"$divide":   nary(2, 2, opDivide),
	"$mod":      nary(2, 2, opMod),
	"$abs":      nary(1, 1, opAbs),
	"$ceil":     nary(1, 1, unaryFloat(math.Ceil)),
	"$floor":    nary(1, 1, unaryFloat(math.Floor)),
	"$sqrt":     nary(1, 1, opSqrt),
	"$exp":      nary(1, 1, opExp),
	"$ln":       nary(1, 1, opLn),
	"$log10":    nary(1, 1, opLog10),
	"$log":      nary(2, 2, opLog),
	"$pow":      nary(2, 2, opPow),
	"$round":    nary(1, 2, opRound),
	"$trunc":    nary(1, 2, opRound),
}

// numAdd adds two numbers; integer overflow falls back to double, as the
// server's $add does.
func numAdd(a, b any) any {
	r, err := value.Add(a, b)
	if errors.Is(err, value.ErrOverflow) {
		x, _ := value.ToFloat(a)
		y, _ := value.ToFloat(b)
		return x + y
	}
	return r
}

func numMul(a, b any) any {
	r, err := value.Multiply(a, b)
	if errors.Is(err, value.ErrOverflow) {
		x, _ := value.ToFloat(a)
		y, _ := value.ToFloat(b)
		return x * y
	}
	return r
}

func negate(v any) any {
	switch n := v.(type) {
	case int32:
		if n == math.MinInt32 {
			return -int64(n)
		}
		return -n
	case int64:
		if n == math.MinInt64 {
			return -float64(n)
		}
		return -n
	case int:
		return negate(int64(n))
	}
	if d, ok := value.NegateDecimal(v); ok {
		return d
	}
	f, _ := value.ToFloat(v)
	return -f
}

func opAdd(name string, vals []any) (any, error) {
	var sum any = int32(0)
	var date *bson.DateTime
	for _, v := range vals {
		switch x := v.(type) {
		case bson.DateTime:
			if date != nil {
				return nil, cmderr.New(16612, "only one date allowed in an $add expression")
			}
			d := x
			date = &d
			continue
		}
		if IsNullish(v) {
			return nil, nil
		}
		if !value.IsNumber(v) {
			return nil, cmderr.New(16554, "$add only supports numeric or date types, not %s", typeName(v))
		}
		sum = numAdd(sum, v)
	}
	if date != nil {
		ms, ok := roundToInt64(sum)
		if !ok {
			return nil, cmderr.New(cmderr.Overflow, "date overflow in $add")
		}
		return bson.DateTime(int64(*date) + ms), nil
	}
	return sum, nil
}

func roundToInt64(v any) (int64, bool) {
	if i, ok := value.ToInt64(v); ok {
		return i, true
	}
	f, _ := value.ToFloat(v)
	r := math.Round(f)
	if math.IsNaN(r) || r >= math.MaxInt64 || r < math.MinInt64 {
		return 0, false
	}
	return int64(r), true
}

func opSubtract(name string, vals []any) (any, error) {
	a, b := vals[0], vals[1]
	if IsNullish(a) || IsNullish(b) {
		return nil, nil
	}
	da, aDate := a.(bson.DateTime)
	db, bDate := b.(bson.DateTime)
	switch {
	case aDate && bDate:
		return int64(da) - int64(db), nil
	case aDate && value.IsNumber(b):
		ms, ok := roundToInt64(b)
		if !ok {
			return nil, cmderr.New(cmderr.Overflow, "date overflow in $subtract")
		}
		return bson.DateTime(int64(da) - ms), nil
	case value.IsNumber(a) && value.IsNumber(b):
		if y, ok := b.(int64); ok && y == math.MinInt64 {
			x, _ := value.ToFloat(a)
			return x - float64(y), nil
		}
		return numAdd(a, negate(b)), nil
	}
	return nil, cmderr.New(16556, "can't $subtract %s from %s", typeName(b), typeName(a))
}

func opMultiply(name string, vals []any) (any, error) {
	var prod any = int32(1)
	for _, v := range vals {
		if IsNullish(v) {
			return nil, nil
		}
		if !value.IsNumber(v) {
			return nil, cmderr.New(16555, "$multiply only supports numeric types, not %s", typeName(v))
		}
		prod = numMul(prod, v)
	}
	return prod, nil
}

func opDivide(name string, vals []any) (any, error) {
	a, b := vals[0], vals[1]
	if IsNullish(a) || IsNullish(b) {
		return nil, nil
	}
	if !value.IsNumber(a) || !value.IsNumber(b) {
		return nil, cmderr.New(16609, "$divide only supports numeric types, not %s and %s", typeName(a), typeName(b))
	}
	if y, _ := value.ToFloat(b); y == 0 {
		return nil, cmderr.New(16608, "can't $divide by zero")
	}
	return value.Divide(a, b)
}

func opMod(name string, vals []any) (any, error) {
	a, b := vals[0], vals[1]
	if IsNullish(a) || IsNullish(b) {
		return nil, nil
	}
	if !value.IsNumber(a) || !value.IsNumber(b) {
		return nil, cmderr.New(16611, "$mod only supports numeric types, not %s and %s", typeName(a), typeName(b))
	}
	_, aInt := value.Integer(a)
	_, bInt := value.Integer(b)
	if aInt && bInt {
		x, _ := value.Integer(a)
		y, _ := value.Integer(b)
		if y == 0 {
			return nil, cmderr.New(16610, "can't $mod by zero")
		}
		var r int64
		if y != -1 {
			r = x % y
		}
		_, a32 := a.(int32)
		_, b32 := b.(int32)
		if a32 && b32 {
			return int32(r), nil
		}
		return r, nil
	}
	x, _ := value.ToFloat(a)
	y, _ := value.ToFloat(b)
	if y == 0 {
		return nil, cmderr.New(16610, "can't $mod by zero")
	}
	return math.Mod(x, y), nil
}

func numericArg(name string, v any) error {
	return cmderr.New(28765, "%s only supports numeric types, not %s", name, typeName(v))
}

func opAbs(name string, vals []any) (any, error) {
	v := vals[0]
	if IsNullish(v) {
		return nil, nil
	}
	switch n := v.(type) {
	case int32:
		if n == math.MinInt32 {
			return -int64(n), nil
		}
		if n < 0 {
			return -n, nil
		}
		return n, nil
	case int64:
		if n == math.MinInt64 {
			return nil, cmderr.New(28680, "can't take $abs of long long min")
		}
		if n < 0 {
			return -n, nil
		}
		return n, nil
	case int:
		return opAbs(name, []any{int64(n)})
	}
	if !value.IsNumber(v) {
		return nil, numericArg(name, v)
	}
	if d, ok := value.AbsDecimal(v); ok {
		return d, nil
	}
	f, _ := value.ToFloat(v)
	return math.Abs(f), nil
}

// unaryFloat applies f to doubles and leaves integers as they are ($ceil, $floor).
func unaryFloat(f func(float64) float64) func(string, []any) (any, error) {
	return func(name string, vals []any) (any, error) {
		v := vals[0]
		if IsNullish(v) {
			return nil, nil
		}
		if !value.IsNumber(v) {
			return nil, numericArg(name, v)
		}
		if _, ok := value.Integer(v); ok {
			return v, nil
		}
		x, _ := value.ToFloat(v)
		return f(x), nil
	}
}

func floatArg(name string, v any) (float64, bool, error) {
	if IsNullish(v) {
		return 0, false, nil
	}
	if !value.IsNumber(v) {
		return 0, false, numericArg(name, v)
	}
	f, _ := value.ToFloat(v)
	return f, true, nil
}

func opSqrt(name string, vals []any) (any, error) {
	x, ok, err := floatArg(name, vals[0])
	if !ok || err != nil {
		return nil, err
	}
	if x < 0 {
		return nil, cmderr.New(28714, "$sqrt's argument must be greater than or equal to 0")
	}
	return math.Sqrt(x), nil
}

func opExp(name string, vals []any) (any, error) {
	x, ok, err := floatArg(name, vals[0])
	if !ok || err != nil {
		return nil, err
	}
	return math.Exp(x), nil
}

func opLn(name string, vals []any) (any, error) {
	x, ok, err := floatArg(name, vals[0])
	if !ok || err != nil {
		return nil, err
	}
	if !(x > 0) && !math.IsNaN(x) {
		return nil, cmderr.New(28766, "$ln's argument must be a positive number, but is %v", x)
	}
	return math.Log(x), nil
}

func opLog10(name string, vals []any) (any, error) {
	x, ok, err := floatArg(name, vals[0])
	if !ok || err != nil {
		return nil, err
	}
	if !(x > 0) && !math.IsNaN(x) {
		return nil, cmderr.New(28761, "$log10's argument must be a positive number, but is %v", x)
	}
	return math.Log10(x), nil
}

func opLog(name string, vals []any) (any, error) {
	if IsNullish(vals[0]) || IsNullish(vals[1]) {
		return nil, nil
	}
	if !value.IsNumber(vals[0]) {
		return nil, cmderr.New(28756, "$log's argument must be numeric, not %s", typeName(vals[0]))
	}
	if !value.IsNumber(vals[1]) {
		return nil, cmderr.New(28757, "$log's base must be numeric, not %s", typeName(vals[1]))
	}
	x, _ := value.ToFloat(vals[0])
	b, _ := value.ToFloat(vals[1])
	if !(x > 0) {
		return nil, cmderr.New(28758, "$log's argument must be a positive number, but is %v", x)
	}
	if !(b > 0) || b == 1 {
		return nil, cmderr.New(28759, "$log's base must be a positive number not equal to 1, but is %v", b)
	}
	return math.Log(x) / math.Log(b), nil
}

func opPow(name string, vals []any) (any, error) {
	a, b := vals[0], vals[1]
	if IsNullish(a) || IsNullish(b) {
		return nil, nil
	}
	if !value.IsNumber(a) {
		return nil, cmderr.New(28762, "$pow's base must be numeric, not %s", typeName(a))
	}
	if !value.IsNumber(b) {
		return nil, cmderr.New(28763, "$pow's exponent must be numeric, not %s", typeName(b))
	}
	x, _ := value.ToFloat(a)
	y, _ := value.ToFloat(b)
	if x == 0 && y < 0 {
		return nil, cmderr.New(28764, "$pow cannot take a base of 0 and a negative exponent")
	}
	base, bInt := value.Integer(a)
	exp, eInt := value.Integer(b)
	if bInt && eInt && exp >= 0 {
		// exact integer power while it fits in int64
		result, overflow := int64(1), false
		for i := int64(0); i < exp && !overflow; i++ {
			if base == 0 || base == 1 || result == 0 {
				break
			}
			if base == -1 {
				if exp%2 == 1 {
					result = -1
				}
				break
			}
			r := result * base
			if r/base != result {
				overflow = true
			}
			result = r
		}
		if !overflow {
			if base == 0 && exp > 0 {
				result = 0
			}
			_, a32 := a.(int32)
			_, b32 := b.(int32)
			if a32 && b32 && result >= math.MinInt32 && result <= math.MaxInt32 {
				return int32(result), nil
			}
			return result, nil
		}
	}
	return math.Pow(x, y), nil
}

// opRound implements $round (half to even) and $trunc with an optional
// place argument in [-20, 100].
func opRound(name string, vals []any) (any, error) {
	v := vals[0]
	place := int64(0)
	if len(vals) > 1 {
		p := vals[1]
		if IsNullish(p) {
			return nil, nil
		}
		i, ok := value.ToInt64(p)
		if !value.IsNumber(p) || !ok {
			return nil, cmderr.New(51081, "%s requires \"place\" argument to be an integer between -20 and 100, but got %s", name, render(p))
		}
		if i < -20 || i > 100 {
			return nil, cmderr.New(51083, "cannot apply %s with precision value %d value must be in [-20, 100]", name, i)
		}
		place = i
	}
	if IsNullish(v) {
		return nil, nil
	}
	if !value.IsNumber(v) {
		return nil, cmderr.New(51081, "%s only supports numeric types, not %s", name, typeName(v))
	}
	apply := math.RoundToEven
	if name == "$trunc" {
		apply = math.Trunc
	}
	if n, ok := value.Integer(v); ok {
		if place >= 0 {
			return v, nil
		}
		if place < -18 {
			return zeroLike(v), nil
		}
		p := int64(math.Pow10(int(-place)))
		q := n / p
		rem := n % p
		if name == "$round" {
			// half to even on the quotient
			twice := 2 * absInt64(rem)
			if twice > p || (twice == p && q%2 != 0) {
				if n < 0 {
					q--
				} else {
					q++
				}
			}
		}
		r := q * p
		if r/p != q {
			return nil, cmderr.New(51080, "invalid conversion from %s: overflow", typeName(v))
		}
		if _, ok := v.(int32); ok && r >= math.MinInt32 && r <= math.MaxInt32 {
			return int32(r), nil
		}
		return r, nil
	}
	x, _ := value.ToFloat(v)
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return x, nil
	}
	if place == 0 {
		return apply(x), nil
	}
	scale := math.Pow10(int(place))
	r := apply(x*scale) / scale
	if math.IsInf(x*scale, 0) {
		return x, nil
	}
	return r, nil
}

func zeroLike(v any) any {
	switch v.(type) {
	case int32:
		return int32(0)
	case int64, int:
		return int64(0)
	}
	return 0.0
}

func absInt64(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}
