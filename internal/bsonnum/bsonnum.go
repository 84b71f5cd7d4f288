package bsonnum

import "go.mongodb.org/mongo-driver/v2/bson"

// Int64 is a numeric value as an integer: an int32, an int64, or a double
// truncated toward zero if it lies within int64's range (NaN does not).
// Any other type is not a number: 0, false.
func Int64(v bson.RawValue) (int64, bool) {
	switch v.Type {
	case bson.TypeInt32:
		n, ok := v.Int32OK()
		return int64(n), ok
	case bson.TypeInt64:
		return v.Int64OK()
	case bson.TypeDouble:
		f, ok := v.DoubleOK()
		if ok && f >= -(1<<63) && f < 1<<63 {
			return int64(f), true
		}
	}
	return 0, false
}

// Field is doc's numeric field key as Int64 reads it; 0, false when it is
// absent or not a number.
func Field(doc bson.Raw, key string) (int64, bool) {
	v, err := doc.LookupErr(key)
	if err != nil {
		return 0, false
	}
	return Int64(v)
}

// Of is the same reading of a decoded Go value (int32, int64, int or
// float64), for documents built as bson.D.
func Of(v any) (int64, bool) {
	switch n := v.(type) {
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case int:
		return int64(n), true
	case float64:
		if n >= -(1<<63) && n < 1<<63 {
			return int64(n), true
		}
	}
	return 0, false
}
