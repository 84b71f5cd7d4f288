package rawdoc

import (
	"bytes"
	"encoding/binary"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// FirstFields sets vals[i] to the value of the first top-level field of doc
// named keys[i], as bson.Raw.LookupErr finds it, and leaves a zero Type
// where there is none. Like a lookup, it finds nothing past a malformed
// element, nor in a document shorter than its declared length.
//
// Replies and commands are walked on every operation (a command's $db is
// usually its last field), so the walk sizes the common types itself, at
// a fraction of bsoncore.ReadElement's cost, and hands the rest of the
// document to ReadElement at the first type it does not size.
func FirstFields(doc bson.Raw, keys []string, vals []bson.RawValue) {
	length, _, ok := bsoncore.ReadLength(doc)
	if !ok || length < 5 || int(length) > len(doc) {
		return
	}
	end := int(length) - 1 // the terminating 0
	pos := 4
	for pos < end {
		t := doc[pos]
		k := bytes.IndexByte(doc[pos+1:end], 0)
		if k < 0 {
			return
		}
		v := pos + 2 + k
		n := valueLen(doc[:end], t, v)
		if n < 0 {
			break // a type sized by bsoncore, or a malformed length
		}
		if v+n > end {
			return
		}
		if i := wanted(doc[pos+1:pos+1+k], keys, vals); i >= 0 {
			vals[i] = bson.RawValue{Type: bson.Type(t), Value: doc[v : v+n]}
		}
		pos = v + n
	}
	for rem := doc[pos:end]; len(rem) > 0; {
		elem, next, ok := bsoncore.ReadElement(rem)
		if !ok {
			return
		}
		rem = next
		i := wanted(elem.KeyBytes(), keys, vals)
		if i < 0 {
			continue
		}
		v, err := elem.ValueErr()
		if err != nil {
			return
		}
		vals[i] = bson.RawValue{Type: bson.Type(v.Type), Value: v.Data}
	}
}

// wanted is the index of the first key not found yet that is key, or -1.
func wanted(key []byte, keys []string, vals []bson.RawValue) int {
	for i, k := range keys {
		if vals[i].Type == 0 && string(key) == k {
			return i
		}
	}
	return -1
}

// valueLen is the length of the value of type t at elems[v:], or -1 for a
// type it leaves to bsoncore (regular expression, DBPointer, code with
// scope) or a length that is not a value's.
func valueLen(elems []byte, t byte, v int) int {
	switch bson.Type(t) {
	case bson.TypeDouble, bson.TypeDateTime, bson.TypeTimestamp, bson.TypeInt64:
		return 8
	case bson.TypeInt32:
		return 4
	case bson.TypeBoolean:
		return 1
	case bson.TypeNull, bson.TypeUndefined, bson.TypeMinKey, bson.TypeMaxKey:
		return 0
	case bson.TypeObjectID:
		return 12
	case bson.TypeDecimal128:
		return 16
	case bson.TypeString, bson.TypeJavaScript, bson.TypeSymbol, bson.TypeEmbeddedDocument, bson.TypeArray, bson.TypeBinary:
		if v+4 > len(elems) {
			return -1
		}
		n := int(int32(binary.LittleEndian.Uint32(elems[v:])))
		switch bson.Type(t) {
		case bson.TypeString, bson.TypeJavaScript, bson.TypeSymbol:
			if n < 1 {
				return -1 // no room for the NUL
			}
			return n + 4
		case bson.TypeBinary:
			if n < 0 {
				return -1
			}
			return n + 5
		}
		if n < 5 {
			return -1
		}
		return n
	}
	return -1
}
