package expr

import (
	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// $bitAnd, $bitOr, $bitXor and $bitNot over ints and longs: an int result
// when every operand is an int, else a long; null when any is null.

func init() {
	operators["$bitAnd"] = nary(0, -1, opBitwise)
	operators["$bitOr"] = nary(0, -1, opBitwise)
	operators["$bitXor"] = nary(0, -1, opBitwise)
	operators["$bitNot"] = nary(1, 1, opBitNot)
}

func opBitwise(name string, vals []any) (any, error) {
	acc := int64(0)
	if name == "$bitAnd" {
		acc = -1
	}
	long := false
	for _, v := range vals {
		if IsNullish(v) {
			return nil, nil
		}
		var n int64
		switch x := v.(type) {
		case int32:
			n = int64(x)
		case int64:
			n, long = x, true
		default:
			return nil, cmderr.New(cmderr.TypeMismatch, "%s only supports int and long operands.", name)
		}
		switch name {
		case "$bitAnd":
			acc &= n
		case "$bitOr":
			acc |= n
		default:
			acc ^= n
		}
	}
	if long {
		return acc, nil
	}
	return int32(acc), nil
}

func opBitNot(name string, vals []any) (any, error) {
	switch x := vals[0].(type) {
	case int32:
		return ^x, nil
	case int64:
		return ^x, nil
	}
	if IsNullish(vals[0]) {
		return nil, nil
	}
	if value.IsNumber(vals[0]) {
		return nil, cmderr.New(cmderr.TypeMismatch, "$bitNot only supports int and long, not: %s.", typeName(vals[0]))
	}
	return nil, cmderr.New(28765, "$bitNot only supports numeric types, not %s", typeName(vals[0]))
}
