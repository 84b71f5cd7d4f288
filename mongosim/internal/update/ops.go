package update

import (
	"errors"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// applyLeaf applies one operator to a slot and returns the slot's new value
// and whether the field exists afterwards.
func (a *applier) applyLeaf(l *leaf, s slot) (any, bool, error) {
	switch l.kind {
	case opPlaceholder:
		return s.val, s.exists, nil
	case opSetOnInsert:
		if !a.env.Insert {
			return s.val, s.exists, nil
		}
		return store(s, value.Clone(l.arg))
	case opSet:
		return store(s, value.Clone(l.arg))
	case opUnset:
		return nil, false, nil
	case opInc, opMul:
		return a.applyArithmetic(l, s)
	case opMin, opMax:
		if !s.exists {
			return store(s, value.Clone(l.arg))
		}
		c := value.CompareWith(l.arg, s.val, a.env.Collator)
		if (l.kind == opMin && c < 0) || (l.kind == opMax && c > 0) {
			return value.Clone(l.arg), true, nil
		}
		return s.val, s.exists, nil
	case opCurrentDate:
		var v any = bson.NewDateTimeFromTime(a.now)
		if l.timestamp {
			v = bson.Timestamp{T: uint32(a.now.Unix()), I: 1}
		}
		return store(s, v)
	case opPush:
		return a.applyPush(l, s)
	case opAddToSet:
		return a.applyAddToSet(l, s)
	case opPull, opPullAll:
		return a.applyPull(l, s)
	case opPop:
		return applyPop(l, s)
	case opBit:
		return a.applyBitwise(l, s)
	case opRename:
		return a.applyRename(l, s)
	}
	return nil, false, cmderr.Unsupported("update operator " + l.op)
}

// store returns v as the slot's new value. A missing slot is created, which
// fails where its parent cannot hold a new field (see slot.creatable).
func store(s slot, v any) (any, bool, error) {
	if !s.exists {
		if err := s.creatable(); err != nil {
			return nil, false, err
		}
	}
	return v, true, nil
}

// applyArithmetic applies $inc and $mul. A missing field takes the
// increment, or for $mul a zero of the multiplier's type.
func (a *applier) applyArithmetic(l *leaf, s slot) (any, bool, error) {
	if !s.exists {
		if l.kind == opInc {
			return store(s, l.arg)
		}
		return store(s, zeroLike(l.arg))
	}
	if !value.IsNumber(s.val) {
		return nil, false, cmderr.New(cmderr.TypeMismatch,
			"Cannot apply %s to a value of non-numeric type. {%s} has the field '%s' of non-numeric type %s",
			l.op, a.idDesc(), s.name, typeName(s.val))
	}
	var v any
	var err error
	if l.kind == opInc {
		v, err = value.Add(s.val, l.arg)
	} else {
		v, err = value.Multiply(s.val, l.arg)
	}
	if errors.Is(err, value.ErrOverflow) {
		return nil, false, cmderr.New(cmderr.BadValue,
			"Failed to apply %s operations to current value (%s) for document {%s}", l.op, safeNumDebug(s.val), a.idDesc())
	}
	if err != nil {
		return nil, false, cmderr.New(cmderr.TypeMismatch, "Cannot apply %s: %v", l.op, err)
	}
	return v, true, nil
}

func (a *applier) applyPush(l *leaf, s slot) (any, bool, error) {
	if !s.exists {
		return store(s, l.push.apply(nil, a.env.Collator))
	}
	arr, ok := s.val.(bson.A)
	if !ok {
		return nil, false, cmderr.New(cmderr.BadValue,
			"The field '%s' must be an array but is of type %s in document {%s}", s.name, typeName(s.val), a.idDesc())
	}
	return l.push.apply(arr, a.env.Collator), true, nil
}

// applyAddToSet appends each value not already present (under the update's
// collation), copying the array rather than appending into shared storage.
func (a *applier) applyAddToSet(l *leaf, s slot) (any, bool, error) {
	var arr bson.A
	if s.exists {
		var ok bool
		if arr, ok = s.val.(bson.A); !ok {
			return nil, false, cmderr.New(cmderr.BadValue,
				"Cannot apply $addToSet to non-array field. Field named '%s' has non-array type %s", s.name, typeName(s.val))
		}
	} else if err := s.creatable(); err != nil {
		return nil, false, err
	}
	out := arr
	for _, v := range l.each {
		if !containsEqual(out, v, a.env.Collator) {
			out = append(out[:len(out):len(out)], value.Clone(v))
		}
	}
	if out == nil {
		out = bson.A{}
	}
	return out, true, nil
}

// applyPull removes the elements $pull's condition matches, or that equal
// one of $pullAll's values.
func (a *applier) applyPull(l *leaf, s slot) (any, bool, error) {
	if !s.exists {
		return s.val, s.exists, nil
	}
	arr, ok := s.val.(bson.A)
	if !ok {
		return nil, false, cmderr.New(cmderr.BadValue, "Cannot apply $pull to a non-array value")
	}
	out := make(bson.A, 0, len(arr))
	var pull *pullSpec
	if l.kind == opPull {
		pull = l.pull.under(a.env.Collator)
	}
	for _, e := range arr {
		var drop bool
		if l.kind == opPull {
			drop = pull.matches(e, a.env.Collator)
		} else {
			drop = containsEqual(l.pullAll, e, a.env.Collator)
		}
		if !drop {
			out = append(out, e)
		}
	}
	return out, true, nil
}

func applyPop(l *leaf, s slot) (any, bool, error) {
	if !s.exists {
		return s.val, s.exists, nil
	}
	arr, ok := s.val.(bson.A)
	if !ok {
		return nil, false, cmderr.New(cmderr.TypeMismatch,
			"Path '%s' contains an element of non-array type '%s'", s.dotted(), typeName(s.val))
	}
	// Clipped: the array stays shared with the document's, which an
	// append to it must not write into.
	switch {
	case len(arr) == 0:
		return arr, true, nil
	case l.popFirst:
		return arr[1:], true, nil
	}
	return slices.Clip(arr[:len(arr)-1]), true, nil
}

// applyBitwise applies $bit's and/or/xor in order; a missing field starts
// as int32 0.
func (a *applier) applyBitwise(l *leaf, s slot) (any, bool, error) {
	cur := any(int32(0))
	if s.exists {
		switch s.val.(type) {
		case int32, int64:
			cur = s.val
		default:
			return nil, false, cmderr.New(cmderr.BadValue,
				"Cannot apply $bit to a value of non-integral type.{%s} has the field %s of non-integer type %s",
				a.idDesc(), s.name, typeName(s.val))
		}
	}
	for _, b := range l.bits {
		cur = applyBit(b, cur)
	}
	return store(s, cur)
}

// applyRename stores the source field's value at the destination and
// records the source for removal; a missing source changes nothing.
func (a *applier) applyRename(l *leaf, s slot) (any, bool, error) {
	v, found, err := a.lookupSource(l)
	if err != nil || !found {
		return s.val, s.exists, err
	}
	if s.arrayField != "" {
		return nil, false, cmderr.New(cmderr.BadValue,
			"The destination field cannot be an array element, '%s' in doc with %s has an array field called '%s'",
			l.path, a.idDesc(), s.arrayField)
	}
	a.renamed = append(a.renamed, l.from)
	return store(s, value.Clone(v))
}

func containsEqual(arr bson.A, v any, coll value.Collator) bool {
	for _, e := range arr {
		if value.EqualWith(e, v, coll) {
			return true
		}
	}
	return false
}

// zeroLike is what $mul stores in a missing field: zero of the multiplier's type.
func zeroLike(v any) any {
	switch v.(type) {
	case int32:
		return int32(0)
	case int64:
		return int64(0)
	case bson.Decimal128:
		d, _ := bson.ParseDecimal128("0")
		return d
	}
	return float64(0)
}

// safeNumDebug renders a number as the server's SafeNum::debugString.
func safeNumDebug(v any) string {
	switch v.(type) {
	case int32:
		return "(NumberInt)" + formatValue(v)
	case int64:
		return "(NumberLong)" + formatValue(v)
	case float64:
		return "(NumberDouble)" + formatValue(v)
	}
	return "(NumberDecimal)" + formatValue(v)
}

func applyBit(b bitOp, cur any) any {
	x64, y64 := toI64(cur), toI64(b.arg)
	var r int64
	switch b.op {
	case "and":
		r = x64 & y64
	case "or":
		r = x64 | y64
	default:
		r = x64 ^ y64
	}
	_, curIs64 := cur.(int64)
	_, argIs64 := b.arg.(int64)
	if curIs64 || argIs64 {
		return r
	}
	return int32(r)
}

func toI64(v any) int64 {
	switch n := v.(type) {
	case int32:
		return int64(n)
	case int64:
		return n
	}
	return 0
}
