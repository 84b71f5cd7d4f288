package rawdoc

import (
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// FirstFields sets vals[i] to the value of the first top-level field of doc
// named keys[i], as bson.Raw.LookupErr finds it, and leaves a zero Type
// where there is none. Like a lookup, it finds nothing past a malformed
// element, nor in a document shorter than its declared length.
func FirstFields(doc bson.Raw, keys []string, vals []bson.RawValue) {
	length, rem, ok := bsoncore.ReadLength(doc)
	if !ok || length < 5 || int(length) > len(doc) {
		return
	}
	rem = rem[:length-5] // the elements, without the terminating 0
	for len(rem) > 0 {
		elem, next, ok := bsoncore.ReadElement(rem)
		if !ok {
			return
		}
		rem = next
		key := elem.KeyBytes()
		for i, k := range keys {
			if vals[i].Type != 0 || string(key) != k {
				continue
			}
			v, err := elem.ValueErr()
			if err != nil {
				return
			}
			vals[i] = bson.RawValue{Type: bson.Type(v.Type), Value: v.Data}
			break
		}
	}
}
