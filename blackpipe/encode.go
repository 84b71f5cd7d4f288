package blackpipe

import (
	"bytes"
	"errors"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// errSlowPath: appendD met a value it does not encode itself; the caller
// marshals the whole document with bson.Marshal instead.
var errSlowPath = errors.New("blackpipe: value needs bson.Marshal")

// marshalD encodes d as bson.Marshal does, without reflection for the
// types replies are made of (documents, arrays, strings, numbers, ...): a
// large find reply spent most of its server CPU in bson.Marshal's codec
// lookups. Anything else falls back to bson.Marshal, so the bytes are
// always the same.
func marshalD(d bson.D) (bson.Raw, error) {
	if d == nil {
		return bson.Marshal(d) // an error, as before
	}
	// Sizing first spares a large reply (a find's 16 MiB batch) the
	// regrowth and copies of its buffer; it also finds what only
	// bson.Marshal encodes.
	n, ok := sizeD(d)
	if !ok {
		return bson.Marshal(d)
	}
	if out, err := appendD(make([]byte, 0, n), d); err == nil {
		return out, nil
	}
	return bson.Marshal(d)
}

// sizeD is the encoded size of d, or !ok when appendD would leave it to
// bson.Marshal.
func sizeD(d bson.D) (int, bool) {
	n := 5
	for _, e := range d {
		m, ok := sizeElem(len(e.Key), e.Value)
		if !ok || hasNUL(e.Key) {
			return 0, false
		}
		n += m
	}
	return n, true
}

func sizeElem(keyLen int, v any) (int, bool) {
	n := 2 + keyLen // type byte, key, NUL
	switch v := v.(type) {
	case nil, bool:
		if _, isBool := v.(bool); isBool {
			n++
		}
	case string:
		n += 5 + len(v)
	case int32:
		n += 4
	case int64, float64, bson.DateTime, bson.Timestamp:
		n += 8
	case bson.ObjectID:
		n += 12
	case bson.Binary:
		n += 5 + len(v.Data)
		if v.Subtype == 2 {
			n += 4
		}
	case bson.D:
		if v != nil {
			m, ok := sizeD(v)
			if !ok {
				return 0, false
			}
			n += m
		}
	case bson.A:
		if v != nil {
			n += 5
			for i, x := range v {
				m, ok := sizeElem(decimalLen(i), x)
				if !ok {
					return 0, false
				}
				n += m
			}
		}
	default:
		return 0, false
	}
	return n, true
}

// hasNUL reports whether key holds a NUL byte, which BSON keys cannot. A
// plain loop: keys are short, and strings.IndexByte's call was 14% of a
// large find reply's server CPU.
func hasNUL(key string) bool {
	for i := 0; i < len(key); i++ {
		if key[i] == 0 {
			return true
		}
	}
	return false
}

// decimalLen is the number of digits of i >= 0.
func decimalLen(i int) int {
	n := 1
	for ; i >= 10; i /= 10 {
		n++
	}
	return n
}

func appendD(dst []byte, d bson.D) ([]byte, error) {
	idx, dst := bsoncore.AppendDocumentStart(dst)
	var err error
	for _, e := range d {
		if dst, err = appendElem(dst, e.Key, e.Value); err != nil {
			return nil, err
		}
	}
	return bsoncore.AppendDocumentEnd(dst, idx)
}

func appendA(dst []byte, a []any) ([]byte, error) {
	idx, dst := bsoncore.AppendArrayStart(dst)
	var (
		key [20]byte
		err error
	)
	for i, v := range a {
		if dst, err = appendElem(dst, string(strconv.AppendInt(key[:0], int64(i), 10)), v); err != nil {
			return nil, err
		}
	}
	return bsoncore.AppendArrayEnd(dst, idx)
}

// appendElem appends one element, or errSlowPath for a type it leaves to
// bson.Marshal. Keys holding a NUL are sizeD's to refuse.
func appendElem(dst []byte, key string, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return bsoncore.AppendNullElement(dst, key), nil
	case string:
		return bsoncore.AppendStringElement(dst, key, v), nil
	case int32:
		return bsoncore.AppendInt32Element(dst, key, v), nil
	case int64:
		return bsoncore.AppendInt64Element(dst, key, v), nil
	case float64:
		return bsoncore.AppendDoubleElement(dst, key, v), nil
	case bool:
		return bsoncore.AppendBooleanElement(dst, key, v), nil
	case bson.ObjectID:
		return bsoncore.AppendObjectIDElement(dst, key, v), nil
	case bson.DateTime:
		return bsoncore.AppendDateTimeElement(dst, key, int64(v)), nil
	case bson.Timestamp:
		return bsoncore.AppendTimestampElement(dst, key, v.T, v.I), nil
	case bson.Binary:
		return bsoncore.AppendBinaryElement(dst, key, v.Subtype, v.Data), nil
	case bson.D:
		if v == nil {
			return bsoncore.AppendNullElement(dst, key), nil
		}
		dst = bsoncore.AppendHeader(dst, bsoncore.TypeEmbeddedDocument, key)
		return appendD(dst, v)
	case bson.A:
		if v == nil {
			return bsoncore.AppendNullElement(dst, key), nil
		}
		dst = bsoncore.AppendHeader(dst, bsoncore.TypeArray, key)
		return appendA(dst, v)
	}
	return nil, errSlowPath
}

// unmarshalD decodes raw as bson.Unmarshal into a bson.D does, without
// reflection for the common types (an insert of 1 000 documents spent a
// fifth of mongosim's CPU in bson.Unmarshal); other types and malformed
// input go to bson.Unmarshal, which decodes or reports them.
func unmarshalD(raw []byte) (bson.D, error) {
	if d, ok := readD(raw); ok {
		return d, nil
	}
	var d bson.D
	err := bson.Unmarshal(raw, &d)
	return d, err
}

func readD(raw []byte) (bson.D, bool) {
	d := bson.D{}
	if !readElems(raw, func(key string, v any) { d = append(d, bson.E{Key: key, Value: v}) }) {
		return nil, false
	}
	return d, true
}

func readA(raw []byte) (bson.A, bool) {
	a := bson.A{}
	if !readElems(raw, func(_ string, v any) { a = append(a, v) }) {
		return nil, false
	}
	return a, true
}

// readElems passes each element of the document or array raw, decoded, to
// add; false if raw is malformed or holds a type readValue leaves out.
func readElems(raw []byte, add func(key string, v any)) bool {
	elems, ok := docElems(raw)
	if !ok {
		return false
	}
	for len(elems) > 0 {
		elem, rest, ok := bsoncore.ReadElement(elems)
		if !ok {
			return false
		}
		v, ok := readValue(elem.Value())
		if !ok {
			return false
		}
		add(elem.Key(), v)
		elems = rest
	}
	return true
}

// docElems returns the elements of a whole document: raw without its
// length and terminating NUL.
func docElems(raw []byte) ([]byte, bool) {
	n, _, ok := bsoncore.ReadLength(raw)
	if !ok || n < 5 || int(n) != len(raw) || raw[n-1] != 0 {
		return nil, false
	}
	return raw[4 : n-1], true
}

func readValue(v bsoncore.Value) (any, bool) {
	switch v.Type {
	case bsoncore.TypeDouble:
		return v.DoubleOK()
	case bsoncore.TypeString:
		return v.StringValueOK()
	case bsoncore.TypeEmbeddedDocument:
		return readD(v.Data)
	case bsoncore.TypeArray:
		return readA(v.Data)
	case bsoncore.TypeBinary:
		sub, data, ok := v.BinaryOK()
		return bson.Binary{Subtype: sub, Data: bytes.Clone(data)}, ok
	case bsoncore.TypeObjectID:
		oid, ok := v.ObjectIDOK()
		return bson.ObjectID(oid), ok
	case bsoncore.TypeBoolean:
		return v.BooleanOK()
	case bsoncore.TypeDateTime:
		dt, ok := v.DateTimeOK()
		return bson.DateTime(dt), ok
	case bsoncore.TypeNull:
		return nil, true
	case bsoncore.TypeInt32:
		return v.Int32OK()
	case bsoncore.TypeTimestamp:
		t, i, ok := v.TimestampOK()
		return bson.Timestamp{T: t, I: i}, ok
	case bsoncore.TypeInt64:
		return v.Int64OK()
	}
	return nil, false
}
