package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// maxAppendDepth bounds the recursion of AppendDocument's own encoder;
// anything nested deeper is handed to bson.MarshalValue.
const maxAppendDepth = 32

// AppendDocument appends d encoded as a BSON document to dst, producing
// exactly the bytes bson.Marshal(d) produces, but without reflection for the
// value types commands are made of: string, bool, int, int32, int64,
// float64, nil, bson.ObjectID, bson.Raw, bson.RawValue, bson.D and bson.A.
// Any other value is encoded by bson.MarshalValue. Building a command costs
// then one append into a reused buffer instead of an encoder, a
// reflection walk and a fresh byte slice.
//
// On error dst is returned truncated to its original length.
func AppendDocument(dst []byte, d bson.D) ([]byte, error) {
	start := len(dst)
	out, err := appendD(dst, d, 0)
	if err != nil {
		return dst[:start], err
	}
	return out, nil
}

func appendD(dst []byte, d bson.D, depth int) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	var err error
	for i := range d {
		if dst, err = appendElem(dst, d[i].Key, d[i].Value, depth); err != nil {
			return dst, err
		}
	}
	dst = append(dst, 0)
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start))
	return dst, nil
}

func appendArray(dst []byte, a bson.A, depth int) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	var err error
	for i, v := range a {
		if dst, err = appendElem(dst, arrayKey(i), v, depth); err != nil {
			return dst, err
		}
	}
	dst = append(dst, 0)
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start))
	return dst, nil
}

// arrayKeys are the keys of the first elements of an array, made once.
var arrayKeys = func() []string {
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = strconv.Itoa(i)
	}
	return keys
}()

func arrayKey(i int) string {
	if i < len(arrayKeys) {
		return arrayKeys[i]
	}
	return strconv.Itoa(i)
}

func appendKey(dst []byte, t bson.Type, key string) []byte {
	dst = append(dst, byte(t))
	dst = append(dst, key...)
	return append(dst, 0)
}

// errNullInKey is what bson.Marshal reports for such a key, too.
var errNullInKey = errors.New("BSON element key cannot contain null bytes")

func appendElem(dst []byte, key string, v any, depth int) ([]byte, error) {
	if strings.IndexByte(key, 0) >= 0 {
		return dst, errNullInKey
	}
	switch x := v.(type) {
	case nil:
		return appendKey(dst, bson.TypeNull, key), nil
	case string:
		dst = appendKey(dst, bson.TypeString, key)
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(x)+1))
		dst = append(dst, x...)
		return append(dst, 0), nil
	case bool:
		dst = appendKey(dst, bson.TypeBoolean, key)
		if x {
			return append(dst, 1), nil
		}
		return append(dst, 0), nil
	case int32:
		dst = appendKey(dst, bson.TypeInt32, key)
		return binary.LittleEndian.AppendUint32(dst, uint32(x)), nil
	case int64:
		dst = appendKey(dst, bson.TypeInt64, key)
		return binary.LittleEndian.AppendUint64(dst, uint64(x)), nil
	case int:
		// As bson.Marshal: int32 when it fits, else int64.
		if x >= math.MinInt32 && x <= math.MaxInt32 {
			dst = appendKey(dst, bson.TypeInt32, key)
			return binary.LittleEndian.AppendUint32(dst, uint32(int32(x))), nil
		}
		dst = appendKey(dst, bson.TypeInt64, key)
		return binary.LittleEndian.AppendUint64(dst, uint64(x)), nil
	case float64:
		dst = appendKey(dst, bson.TypeDouble, key)
		return binary.LittleEndian.AppendUint64(dst, math.Float64bits(x)), nil
	case bson.ObjectID:
		dst = appendKey(dst, bson.TypeObjectID, key)
		return append(dst, x[:]...), nil
	case bson.Raw:
		if validDoc(x) {
			dst = appendKey(dst, bson.TypeEmbeddedDocument, key)
			return append(dst, x...), nil
		}
	case *bson.Raw:
		// As bson.Raw: a caller that keeps the document in storage of its
		// own can pass a pointer, which boxes without an allocation.
		if x != nil && validDoc(*x) {
			dst = appendKey(dst, bson.TypeEmbeddedDocument, key)
			return append(dst, *x...), nil
		}
	case bson.RawValue:
		if rawValueOK(x) {
			dst = appendKey(dst, x.Type, key)
			return append(dst, x.Value...), nil
		}
	case bson.D:
		if x != nil && depth < maxAppendDepth {
			return appendD(appendKey(dst, bson.TypeEmbeddedDocument, key), x, depth+1)
		}
	case bson.A:
		if x != nil && depth < maxAppendDepth {
			return appendArray(appendKey(dst, bson.TypeArray, key), x, depth+1)
		}
	}
	t, b, err := bson.MarshalValue(v)
	if err != nil {
		return dst, fmt.Errorf("field %q: %w", key, err)
	}
	dst = appendKey(dst, t, key)
	return append(dst, b...), nil
}

// validDoc reports whether b is a well-formed document (checked all the
// way down, as bson.Marshal's copy of a bson.Raw does). Anything else goes
// to bson.MarshalValue, which reports the error bson.Marshal would.
func validDoc(b []byte) bool {
	_, reason := validateBSON(b)
	return reason == ""
}

// rawValueOK reports whether v's bytes have the size its type calls for,
// for the types taken as they are; the others go to bson.MarshalValue.
func rawValueOK(v bson.RawValue) bool {
	switch v.Type {
	case bson.TypeEmbeddedDocument, bson.TypeArray:
		return validDoc(v.Value)
	case bson.TypeString:
		return len(v.Value) >= 5 && int(binary.LittleEndian.Uint32(v.Value)) == len(v.Value)-4 && v.Value[len(v.Value)-1] == 0
	case bson.TypeInt32:
		return len(v.Value) == 4
	case bson.TypeInt64, bson.TypeDouble, bson.TypeDateTime, bson.TypeTimestamp:
		return len(v.Value) == 8
	case bson.TypeBoolean:
		return len(v.Value) == 1 && v.Value[0] <= 1
	case bson.TypeNull:
		return len(v.Value) == 0
	case bson.TypeObjectID:
		return len(v.Value) == 12
	}
	return false
}
