package value

import (
	"fmt"
	"math"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Key returns a canonical string for v such that two values equal under
// MongoDB's index comparison (1, 1.0 and NumberLong(1) alike) give the same
// key: the identity of a document, an index entry or a set member.
func Key(v any) string { return string(AppendKey(nil, v, nil)) }

// KeyWith is Key where strings equal under coll share a key.
func KeyWith(v any, coll Collator) string { return string(AppendKey(nil, v, coll)) }

// AppendKey appends v's key to b, strings keyed by their collation key
// (coll nil: simple); field names are never collated.
func AppendKey(b []byte, v any, coll Collator) []byte {
	switch x := v.(type) {
	case nil, bson.Null, bson.Undefined:
		return append(b, 'z')
	case int32:
		return appendIntKey(b, int64(x))
	case int64:
		return appendIntKey(b, x)
	case int:
		return appendIntKey(b, int64(x))
	case float64:
		return appendFloatKey(b, x)
	case bson.Decimal128:
		f, _ := ToFloat(x)
		return appendFloatKey(b, f)
	case string:
		if coll != nil {
			x = coll.Key(x)
		}
		return appendStr(append(b, 's'), x)
	case bson.Symbol:
		return AppendKey(b, string(x), coll)
	case bson.D:
		b = append(b, '{')
		for _, e := range x {
			b = appendStr(b, e.Key)
			b = AppendKey(b, e.Value, coll)
		}
		return append(b, '}')
	case bson.M, bson.Raw:
		return AppendKey(b, AsDoc(x), coll)
	case bson.A:
		b = append(b, '[')
		for _, e := range x {
			b = AppendKey(b, e, coll)
		}
		return append(b, ']')
	case bson.ObjectID:
		return append(append(b, 'o'), x[:]...)
	case bool:
		if x {
			return append(b, 'b', '1')
		}
		return append(b, 'b', '0')
	case bson.DateTime:
		return strconv.AppendInt(append(b, 'd'), int64(x), 10)
	case bson.Timestamp:
		b = strconv.AppendUint(append(b, 't'), uint64(x.T), 10)
		return strconv.AppendUint(append(b, '.'), uint64(x.I), 10)
	case bson.Binary:
		b = strconv.AppendInt(append(b, 'x'), int64(x.Subtype), 10)
		return appendStr(b, string(x.Data))
	case bson.Regex:
		return appendStr(appendStr(append(b, 'r'), x.Pattern), x.Options)
	case bson.MinKey:
		return append(b, 'm')
	case bson.MaxKey:
		return append(b, 'M')
	case bson.JavaScript:
		return appendStr(append(b, 'j'), string(x))
	}
	return appendStr(append(b, '?'), fmt.Sprintf("%T:%v", v, v))
}

func appendIntKey(b []byte, n int64) []byte { return strconv.AppendInt(append(b, 'n'), n, 10) }

func appendFloatKey(b []byte, f float64) []byte {
	if f == math.Trunc(f) && f >= -9.2e18 && f <= 9.2e18 {
		return appendIntKey(b, int64(f))
	}
	if math.IsNaN(f) {
		return append(b, 'n', 'N')
	}
	return strconv.AppendFloat(append(b, 'n', 'f'), f, 'g', -1, 64)
}

func appendStr(b []byte, s string) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	return append(b, s...)
}
