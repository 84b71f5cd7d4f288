package query

import (
	"fmt"
	"math"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// The bitwise query operators $bitsAllSet, $bitsAnySet, $bitsAllClear and
// $bitsAnyClear, as mongod's BitTestMatchExpression: the bit positions come
// from an array of positions, a non-negative integer mask or a BinData mask
// (byte i, bit j is position 8i+j); they test integral numbers that fit in
// 64 bits (two's complement, positions past 63 reading the sign) and BinData
// (positions past its end read as clear). Other values never match.

type bitsTest int

const (
	bitsAllSet bitsTest = iota
	bitsAnySet
	bitsAllClear
	bitsAnyClear
)

var bitsOps = map[string]bitsTest{
	"$bitsAllSet": bitsAllSet, "$bitsAnySet": bitsAnySet,
	"$bitsAllClear": bitsAllClear, "$bitsAnyClear": bitsAnyClear,
}

type bitsLeaf struct {
	test      bitsTest
	positions []uint32
}

// newBitsLeaf parses the operand of a bitwise operator on path.
func newBitsLeaf(path, op string, arg any) (bitsLeaf, error) {
	l := bitsLeaf{test: bitsOps[op]}
	switch x := arg.(type) {
	case bson.A:
		for i, e := range x {
			p, err := bitPosition(i, e)
			if err != nil {
				return l, err
			}
			l.positions = append(l.positions, p)
		}
	case bson.Binary:
		l.positions = maskPositions(x.Data)
	default:
		if !value.IsNumber(arg) {
			return l, cmderr.New(cmderr.BadValue, "%s takes an Array, a number, or a BinData but received: %s: %s", path, op, elemString(arg))
		}
		n, err := nonNegativeLong(op, arg)
		if err != nil {
			return l, err
		}
		for p := uint32(0); p < 64; p++ {
			if n&(1<<p) != 0 {
				l.positions = append(l.positions, p)
			}
		}
	}
	return l, nil
}

// bitPosition reads one element of a positions array.
func bitPosition(i int, e any) (uint32, error) {
	if !value.IsNumber(e) {
		return 0, cmderr.New(cmderr.BadValue, "bit positions must be an integer but got: %d: %s", i, elemString(e))
	}
	f, _ := value.ToFloat(e)
	switch {
	case math.IsNaN(f):
		return 0, cmderr.New(cmderr.BadValue, "bit positions cannot take a NaN: %d: %s", i, elemString(e))
	case f > math.MaxInt32 || f < math.MinInt32:
		return 0, cmderr.New(cmderr.BadValue, "bit positions cannot be represented as a 32-bit signed integer: %d: %s", i, elemString(e))
	case f != math.Trunc(f):
		return 0, cmderr.New(cmderr.BadValue, "bit positions must be an integer but got: %d: %s", i, elemString(e))
	case f < 0:
		return 0, cmderr.New(cmderr.BadValue, "bit positions must be >= 0 but got: %d: %s", i, elemString(e))
	}
	return uint32(f), nil
}

// nonNegativeLong reads an integral, non-negative 64-bit mask.
func nonNegativeLong(op string, v any) (int64, error) {
	var n int64
	switch x := v.(type) {
	case float64:
		switch {
		case math.IsNaN(x):
			return 0, cmderr.New(cmderr.FailedToParse, "Expected an integer, but found NaN in: %s: %s", op, elemString(v))
		case x >= math.Exp2(63) || x < -math.Exp2(63):
			return 0, cmderr.New(cmderr.FailedToParse, "Cannot represent as a 64-bit integer: %s: %s", op, elemString(v))
		case x != math.Trunc(x):
			return 0, cmderr.New(cmderr.FailedToParse, "Expected an integer: %s: %s", op, elemString(v))
		}
		n = int64(x)
	default:
		var ok bool
		if n, ok = value.ToInt64(v); !ok {
			return 0, cmderr.New(cmderr.FailedToParse, "Cannot represent as a 64-bit integer: %s: %s", op, elemString(v))
		}
	}
	if n < 0 {
		return 0, cmderr.New(cmderr.FailedToParse, "Expected a positive number in: %s: %s", op, elemString(v))
	}
	return n, nil
}

// maskPositions lists the set bits of a little-endian binary mask.
func maskPositions(b []byte) []uint32 {
	var out []uint32
	for i, c := range b {
		for j := uint32(0); j < 8; j++ {
			if c&(1<<j) != 0 {
				out = append(out, uint32(i)*8+j)
			}
		}
	}
	return out
}

// elemString prints a value as mongod prints an element's value in errors.
func elemString(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e15 {
			return strconv.FormatFloat(x, 'f', 1, 64)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return fmt.Sprint(v)
}

func (l bitsLeaf) matches(v any) bool {
	var isSet func(p uint32) bool
	switch x := v.(type) {
	case bson.Binary:
		isSet = func(p uint32) bool {
			i := int(p / 8)
			return i < len(x.Data) && x.Data[i]&(1<<(p%8)) != 0
		}
	default:
		n, ok := integral64(v)
		if !ok {
			return false
		}
		isSet = func(p uint32) bool {
			if p >= 64 {
				return n < 0 // the sign extends
			}
			return uint64(n)&(1<<p) != 0
		}
	}
	want := l.test == bitsAllSet || l.test == bitsAnySet
	all := l.test == bitsAllSet || l.test == bitsAllClear
	for _, p := range l.positions {
		if isSet(p) == want {
			if !all {
				return true
			}
		} else if all {
			return false
		}
	}
	return all
}

// integral64 reads a number a bit test applies to: an integer, or a
// double or decimal holding an integral value that fits in 64 bits.
func integral64(v any) (int64, bool) {
	switch x := v.(type) {
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case float64:
		if math.IsNaN(x) || x >= math.Exp2(63) || x < -math.Exp2(63) || x != math.Trunc(x) {
			return 0, false
		}
		return int64(x), true
	case bson.Decimal128:
		return value.ToInt64(x)
	}
	return 0, false
}
