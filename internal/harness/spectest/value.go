package spectest

import (
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// toRawValue converts a Go value (a driver result, a decoded document...)
// into a BSON value by marshalling it as the only field of a document.
func toRawValue(x any) (bson.RawValue, error) {
	b, err := bson.Marshal(bson.D{{Key: "v", Value: x}})
	if err != nil {
		return bson.RawValue{}, fmt.Errorf("converting %T to BSON: %w", x, err)
	}
	return bson.Raw(b).Lookup("v"), nil
}

// mustRawValue is toRawValue for values that are known to marshal.
func mustRawValue(x any) bson.RawValue {
	v, err := toRawValue(x)
	if err != nil {
		panic(err)
	}
	return v
}

// native converts a BSON value into the Go value the driver expects:
// documents become bson.D, arrays bson.A, scalars their natural Go types
// (int32, int64, float64, string, bool, nil, bson.ObjectID...).
func native(v bson.RawValue) any {
	switch v.Type {
	case bson.TypeEmbeddedDocument:
		var d bson.D
		if err := bson.Unmarshal(v.Document(), &d); err == nil {
			return d
		}
	case bson.TypeArray:
		vals, err := v.Array().Values()
		if err == nil {
			a := make(bson.A, 0, len(vals))
			for _, e := range vals {
				a = append(a, native(e))
			}
			return a
		}
	case bson.TypeNull:
		return nil
	}
	var x any
	if err := v.Unmarshal(&x); err != nil {
		return v
	}
	return x
}

// docValue returns v as a document, or an error naming what it is.
func docValue(v bson.RawValue, what string) (bson.Raw, error) {
	d, ok := v.DocumentOK()
	if !ok {
		return nil, fmt.Errorf("%s: want a document, got %s", what, v.Type)
	}
	return d, nil
}

// firstKey returns the first key of d, or "".
func firstKey(d bson.Raw) string {
	elems, err := d.Elements()
	if err != nil || len(elems) == 0 {
		return ""
	}
	return elems[0].Key()
}

// operatorOf reports whether v is a special matching operator: a document
// whose first and only key starts with "$$".
func operatorOf(v bson.RawValue) (name string, arg bson.RawValue, ok bool) {
	d, isDoc := v.DocumentOK()
	if !isDoc {
		return "", bson.RawValue{}, false
	}
	elems, err := d.Elements()
	if err != nil || len(elems) != 1 || !strings.HasPrefix(elems[0].Key(), "$$") {
		return "", bson.RawValue{}, false
	}
	return elems[0].Key(), elems[0].Value(), true
}

// asInt returns a numeric BSON value as an int64.
func asInt(v bson.RawValue) (int64, bool) {
	switch v.Type {
	case bson.TypeInt32:
		return int64(v.Int32()), true
	case bson.TypeInt64:
		return v.Int64(), true
	case bson.TypeDouble:
		f := v.Double()
		if f == float64(int64(f)) {
			return int64(f), true
		}
	}
	return 0, false
}

// asFloat returns a numeric BSON value (not Decimal128) as a float64.
func asFloat(v bson.RawValue) (float64, bool) {
	switch v.Type {
	case bson.TypeInt32:
		return float64(v.Int32()), true
	case bson.TypeInt64:
		return float64(v.Int64()), true
	case bson.TypeDouble:
		return v.Double(), true
	}
	return 0, false
}

func isNumber(v bson.RawValue) bool {
	return v.Type == bson.TypeInt32 || v.Type == bson.TypeInt64 || v.Type == bson.TypeDouble
}

// shortJSON renders a value as relaxed extended JSON for messages, cut to a
// readable length.
func shortJSON(v bson.RawValue) string {
	var s string
	if v.Type == 0 {
		return "<absent>"
	}
	switch v.Type {
	case bson.TypeEmbeddedDocument:
		s = v.Document().String()
	case bson.TypeArray:
		s = v.Array().String()
	default:
		s = v.String()
	}
	if len(s) > 600 {
		s = s[:600] + "..."
	}
	return s
}

// docJSON renders a document for messages.
func docJSON(d bson.Raw) string {
	return shortJSON(bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: d})
}
