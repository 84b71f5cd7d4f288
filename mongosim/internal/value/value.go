package value

import (
	"bytes"
	"math"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Canonical type ranks for comparison (MongoDB's BSON comparison order).
const (
	rankMinKey = iota
	rankNull   // null and undefined (and a missing field)
	rankNumber
	rankString // string and symbol
	rankObject
	rankArray
	rankBinary
	rankObjectID
	rankBool
	rankDate
	rankTimestamp
	rankRegex
	rankDBPointer
	rankJavaScript
	rankJavaScriptScope
	rankMaxKey
)

// TypeOrder returns v's rank in MongoDB's cross-type comparison order.
func TypeOrder(v any) int {
	switch v.(type) {
	case bson.MinKey:
		return rankMinKey
	case nil, bson.Null, bson.Undefined:
		return rankNull
	case int32, int64, float64, bson.Decimal128, int:
		return rankNumber
	case string, bson.Symbol:
		return rankString
	case bson.D, bson.M, bson.Raw:
		return rankObject
	case bson.A, []any:
		return rankArray
	case bson.Binary:
		return rankBinary
	case bson.ObjectID:
		return rankObjectID
	case bool:
		return rankBool
	case bson.DateTime:
		return rankDate
	case bson.Timestamp:
		return rankTimestamp
	case bson.Regex:
		return rankRegex
	case bson.DBPointer:
		return rankDBPointer
	case bson.JavaScript:
		return rankJavaScript
	case bson.CodeWithScope:
		return rankJavaScriptScope
	case bson.MaxKey:
		return rankMaxKey
	}
	return rankMaxKey
}

// IsNumber reports whether v is a BSON number.
func IsNumber(v any) bool { return TypeOrder(v) == rankNumber }

// ToFloat converts a BSON number to float64.
func ToFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case float64:
		return n, true
	case bson.Decimal128:
		f, err := decimalToFloat(n)
		return f, err == nil
	}
	return 0, false
}

// ToInt64 converts a BSON number holding an integral value to int64.
func ToInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case int:
		return int64(n), true
	case float64:
		if n != math.Trunc(n) || math.IsInf(n, 0) || n > math.MaxInt64 || n < math.MinInt64 {
			return 0, false
		}
		return int64(n), true
	case bson.Decimal128:
		f, err := decimalToFloat(n)
		if err != nil || f != math.Trunc(f) {
			return 0, false
		}
		return int64(f), true
	}
	return 0, false
}

func decimalToFloat(d bson.Decimal128) (float64, error) {
	bi, exp, err := d.BigInt()
	if err != nil {
		return 0, err
	}
	f, _ := bi.Float64()
	return f * math.Pow10(exp), nil
}

// Collator compares strings under a non-simple collation. A nil Collator
// is the simple (binary) collation.
type Collator interface {
	// CompareStrings orders a and b under the collation.
	CompareStrings(a, b string) int
	// Key returns a string equal for exactly the strings the collation
	// deems equal, for hashing (group keys, unique index entries).
	Key(s string) string
}

// Compare orders two BSON values as MongoDB does: first by canonical type,
// then by value. Numbers of different types compare by numeric value.
func Compare(a, b any) int { return CompareWith(a, b, nil) }

// CompareWith is Compare with strings (and symbols), also inside documents
// and arrays, ordered by coll; field names stay binary, as on mongod. A nil
// coll is Compare.
func CompareWith(a, b any, coll Collator) int {
	ra, rb := TypeOrder(a), TypeOrder(b)
	if ra != rb {
		return cmpInt(ra, rb)
	}
	switch ra {
	case rankMinKey, rankNull, rankMaxKey:
		return 0
	case rankNumber:
		return compareNumbers(a, b)
	case rankString:
		if coll != nil {
			return coll.CompareStrings(stringOf(a), stringOf(b))
		}
		return strings.Compare(stringOf(a), stringOf(b))
	case rankObject:
		return compareDocs(AsDoc(a), AsDoc(b), coll)
	case rankArray:
		return compareArrays(AsArray(a), AsArray(b), coll)
	case rankBinary:
		x, y := a.(bson.Binary), b.(bson.Binary)
		if len(x.Data) != len(y.Data) {
			return cmpInt(len(x.Data), len(y.Data))
		}
		if x.Subtype != y.Subtype {
			return cmpInt(int(x.Subtype), int(y.Subtype))
		}
		return bytes.Compare(x.Data, y.Data)
	case rankObjectID:
		x, y := a.(bson.ObjectID), b.(bson.ObjectID)
		return bytes.Compare(x[:], y[:])
	case rankBool:
		x, y := a.(bool), b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	case rankDate:
		return cmpInt64(int64(a.(bson.DateTime)), int64(b.(bson.DateTime)))
	case rankTimestamp:
		x, y := a.(bson.Timestamp), b.(bson.Timestamp)
		if x.T != y.T {
			return cmpInt64(int64(x.T), int64(y.T))
		}
		return cmpInt64(int64(x.I), int64(y.I))
	case rankRegex:
		x, y := a.(bson.Regex), b.(bson.Regex)
		if c := strings.Compare(x.Pattern, y.Pattern); c != 0 {
			return c
		}
		return strings.Compare(x.Options, y.Options)
	case rankJavaScript:
		return strings.Compare(string(a.(bson.JavaScript)), string(b.(bson.JavaScript)))
	case rankDBPointer:
		x, y := a.(bson.DBPointer), b.(bson.DBPointer)
		if c := strings.Compare(x.DB, y.DB); c != 0 {
			return c
		}
		return bytes.Compare(x.Pointer[:], y.Pointer[:])
	case rankJavaScriptScope:
		x, y := a.(bson.CodeWithScope), b.(bson.CodeWithScope)
		return strings.Compare(string(x.Code), string(y.Code))
	}
	return 0
}

// Equal reports whether a and b are equal under Compare.
func Equal(a, b any) bool { return Compare(a, b) == 0 }

// EqualWith reports whether a and b are equal under CompareWith.
func EqualWith(a, b any, coll Collator) bool { return CompareWith(a, b, coll) == 0 }

func stringOf(v any) string {
	if s, ok := v.(bson.Symbol); ok {
		return string(s)
	}
	return v.(string)
}

func compareNumbers(a, b any) int {
	_, aDec := a.(bson.Decimal128)
	_, bDec := b.(bson.Decimal128)
	if aDec || bDec {
		return compareWithDecimal(a, b)
	}
	// Exact integer comparison when both sides are integers, so large int64
	// values that share a float64 still order correctly.
	ai, aInt := Integer(a)
	bi, bInt := Integer(b)
	if aInt && bInt {
		return cmpInt64(ai, bi)
	}
	x, _ := ToFloat(a)
	y, _ := ToFloat(b)
	switch {
	case math.IsNaN(x) && math.IsNaN(y):
		return 0
	case math.IsNaN(x): // NaN sorts below every other number
		return -1
	case math.IsNaN(y):
		return 1
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// Integer returns the value of a BSON integer type (int32, int64); a double
// is not an integer here, even when integral.
func Integer(v any) (int64, bool) {
	switch n := v.(type) {
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case int:
		return int64(n), true
	}
	return 0, false
}

func compareDocs(x, y bson.D, coll Collator) int {
	for i := 0; i < len(x) && i < len(y); i++ {
		if c := cmpInt(TypeOrder(x[i].Value), TypeOrder(y[i].Value)); c != 0 {
			return c
		}
		if c := strings.Compare(x[i].Key, y[i].Key); c != 0 {
			return c
		}
		if c := CompareWith(x[i].Value, y[i].Value, coll); c != 0 {
			return c
		}
	}
	return cmpInt(len(x), len(y))
}

func compareArrays(x, y bson.A, coll Collator) int {
	for i := 0; i < len(x) && i < len(y); i++ {
		if c := CompareWith(x[i], y[i], coll); c != 0 {
			return c
		}
	}
	return cmpInt(len(x), len(y))
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// AsDoc returns v as a bson.D; bson.M and bson.Raw are converted, anything
// else gives nil.
func AsDoc(v any) bson.D {
	d, _ := ToDoc(v)
	return d
}

// ToDoc is AsDoc that also reports whether v is a document, so a nil
// bson.D still counts as one.
func ToDoc(v any) (bson.D, bool) {
	switch d := v.(type) {
	case bson.D:
		return d, true
	case bson.M:
		out := make(bson.D, 0, len(d))
		for k, x := range d {
			out = append(out, bson.E{Key: k, Value: x})
		}
		return out, true
	case bson.Raw:
		var out bson.D
		if err := bson.Unmarshal(d, &out); err != nil {
			return nil, false
		}
		return out, true
	}
	return nil, false
}

// AsArray returns v as a bson.A, or nil when v is not an array.
func AsArray(v any) bson.A {
	a, _ := ToArray(v)
	return a
}

// ToArray is AsArray that also reports whether v is an array.
func ToArray(v any) (bson.A, bool) {
	switch a := v.(type) {
	case bson.A:
		return a, true
	case []any:
		return bson.A(a), true
	}
	return nil, false
}

// Get returns the value of top-level field key in doc.
func Get(doc bson.D, key string) (any, bool) {
	for _, e := range doc {
		if e.Key == key {
			return e.Value, true
		}
	}
	return nil, false
}

// Set sets top-level field key of d to v, in place where d has the field,
// else appended; the caller owns d.
func Set(d bson.D, key string, v any) bson.D {
	for i := range d {
		if d[i].Key == key {
			d[i].Value = v
			return d
		}
	}
	return append(d, bson.E{Key: key, Value: v})
}

// Clone deep-copies v so that stored documents never share mutable state
// with a caller or a reply.
func Clone(v any) any {
	switch x := v.(type) {
	case bson.D:
		return CloneDoc(x)
	case bson.A:
		out := make(bson.A, len(x))
		for i, e := range x {
			out[i] = Clone(e)
		}
		return out
	case bson.Binary:
		return bson.Binary{Subtype: x.Subtype, Data: append([]byte(nil), x.Data...)}
	}
	return v
}

// CloneDoc deep-copies a document.
func CloneDoc(d bson.D) bson.D {
	if d == nil {
		return nil
	}
	out := make(bson.D, len(d))
	for i, e := range d {
		out[i] = bson.E{Key: e.Key, Value: Clone(e.Value)}
	}
	return out
}

// TypeName returns the $type alias of v ("double", "string", "object", ...).
func TypeName(v any) string {
	switch v.(type) {
	case float64:
		return "double"
	case string:
		return "string"
	case bson.D, bson.M, bson.Raw:
		return "object"
	case bson.A, []any:
		return "array"
	case bson.Binary:
		return "binData"
	case bson.Undefined:
		return "undefined"
	case bson.ObjectID:
		return "objectId"
	case bool:
		return "bool"
	case bson.DateTime:
		return "date"
	case nil, bson.Null:
		return "null"
	case bson.Regex:
		return "regex"
	case bson.DBPointer:
		return "dbPointer"
	case bson.JavaScript:
		return "javascript"
	case bson.Symbol:
		return "symbol"
	case bson.CodeWithScope:
		return "javascriptWithScope"
	case int32, int:
		return "int"
	case bson.Timestamp:
		return "timestamp"
	case int64:
		return "long"
	case bson.Decimal128:
		return "decimal"
	case bson.MinKey:
		return "minKey"
	case bson.MaxKey:
		return "maxKey"
	}
	return "unknown"
}

// TypeNumber returns the BSON type number of v, as $type accepts it.
func TypeNumber(v any) int {
	switch v.(type) {
	case float64:
		return 1
	case string:
		return 2
	case bson.D, bson.M, bson.Raw:
		return 3
	case bson.A, []any:
		return 4
	case bson.Binary:
		return 5
	case bson.Undefined:
		return 6
	case bson.ObjectID:
		return 7
	case bool:
		return 8
	case bson.DateTime:
		return 9
	case nil, bson.Null:
		return 10
	case bson.Regex:
		return 11
	case bson.DBPointer:
		return 12
	case bson.JavaScript:
		return 13
	case bson.Symbol:
		return 14
	case bson.CodeWithScope:
		return 15
	case int32, int:
		return 16
	case bson.Timestamp:
		return 17
	case int64:
		return 18
	case bson.Decimal128:
		return 19
	case bson.MinKey:
		return -1
	case bson.MaxKey:
		return 127
	}
	return 0
}

// CompareLowWith is CompareWith for two values of which either may be a
// stand-in that sorts after MinKey and before every other value (aggregation's
// Missing, a sort's empty array): aLow and bLow say which are.
func CompareLowWith(a, b any, aLow, bLow bool, coll Collator) int {
	switch {
	case aLow && bLow:
		return 0
	case aLow:
		if _, ok := b.(bson.MinKey); ok {
			return 1
		}
		return -1
	case bLow:
		if _, ok := a.(bson.MinKey); ok {
			return -1
		}
		return 1
	}
	return CompareWith(a, b, coll)
}
