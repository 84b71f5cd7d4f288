package mongosim

import (
	"crypto/md5"
	"encoding/binary"
	"hash"
	"math"
	"slices"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// Hashed shard keys as mongod hashes them (its BSONElementHasher with seed
// 0): the MD5 of the seed, then the value's canonical type and bytes, with
// numbers of every type squashed to a 64-bit integer (so 1, 1.0 and
// NumberLong(1) hash alike) and documents and arrays hashed element by
// element with their field names; the hash is the digest's first 8 bytes,
// little-endian. Documents therefore land on the shards they land on with
// mongos, and hashed split points are mongos' (hashedSplitPoints).

// hashKeyValue is mongod's hash of a hashed shard key field's value.
func hashKeyValue(v any) int64 {
	h := md5.New()
	writeInt32(h, 0) // the seed
	hashValue(h, v)
	return int64(binary.LittleEndian.Uint64(h.Sum(nil)[:8]))
}

func writeInt32(h hash.Hash, n int32) {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], uint32(n))
	h.Write(b[:])
}

func writeInt64(h hash.Hash, n int64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(n))
	h.Write(b[:])
}

// hashValue adds v's canonical type and its value.
func hashValue(h hash.Hash, v any) {
	writeInt32(h, canonicalTypeOf(v))
	hashBytes(h, v)
}

// hashElement adds an embedded element: its type, its name, its value.
func hashElement(h hash.Hash, name string, v any) {
	writeInt32(h, canonicalTypeOf(v))
	h.Write(append([]byte(name), 0))
	hashBytes(h, v)
}

// hashBytes adds v's value: numbers as 64-bit integers, documents and
// arrays element by element up to their end, the rest as BSON encodes
// it (null, undefined, MinKey and MaxKey have no value bytes).
func hashBytes(h hash.Hash, v any) {
	switch x := v.(type) {
	case int32:
		writeInt64(h, int64(x))
	case int64:
		writeInt64(h, x)
	case int:
		writeInt64(h, int64(x))
	case float64:
		writeInt64(h, hashableLong(x))
	case bson.Decimal128:
		f, _ := value.ToFloat(x)
		writeInt64(h, hashableLong(f))
	case string:
		hashString(h, x)
	case bson.Symbol:
		hashString(h, string(x))
	case bson.JavaScript:
		hashString(h, string(x))
	case bson.D:
		for _, e := range x {
			hashElement(h, e.Key, e.Value)
		}
		writeInt32(h, 0) // the end-of-object element
	case bson.M, bson.Raw:
		hashBytes(h, value.AsDoc(x))
	case bson.A:
		for i, e := range x {
			hashElement(h, strconv.Itoa(i), e)
		}
		writeInt32(h, 0)
	case bson.ObjectID:
		h.Write(x[:])
	case bool:
		if x {
			h.Write([]byte{1})
		} else {
			h.Write([]byte{0})
		}
	case bson.DateTime:
		writeInt64(h, int64(x))
	case bson.Timestamp:
		writeInt64(h, int64(uint64(x.T)<<32|uint64(x.I)))
	case bson.Binary:
		writeInt32(h, int32(len(x.Data)))
		h.Write([]byte{x.Subtype})
		h.Write(x.Data)
	case bson.Regex:
		h.Write(append(append([]byte(x.Pattern), 0), append([]byte(x.Options), 0)...))
	}
}

func hashString(h hash.Hash, s string) {
	writeInt32(h, int32(len(s)+1))
	h.Write(append([]byte(s), 0))
}

// hashableLong squashes a double to the 64-bit integer mongod hashes:
// truncated, NaN as 0, out of range as the nearest bound.
func hashableLong(f float64) int64 {
	switch {
	case math.IsNaN(f):
		return 0
	case f >= math.MaxInt64:
		return math.MaxInt64
	case f < math.MinInt64:
		return math.MinInt64
	}
	return int64(f)
}

// canonicalTypeOf is mongod's canonical type number of a value: the
// types that compare as one share it.
func canonicalTypeOf(v any) int32 {
	switch v.(type) {
	case bson.MinKey:
		return -1
	case bson.MaxKey:
		return 127
	case nil, bson.Null:
		return 5
	case bson.Undefined:
		return 0
	case int32, int64, int, float64, bson.Decimal128:
		return 10
	case string, bson.Symbol:
		return 15
	case bson.D, bson.M, bson.Raw:
		return 20
	case bson.A:
		return 25
	case bson.Binary:
		return 30
	case bson.ObjectID:
		return 35
	case bool:
		return 40
	case bson.DateTime:
		return 45
	case bson.Timestamp:
		return 47
	case bson.Regex:
		return 50
	case bson.DBPointer:
		return 55
	case bson.JavaScript:
		return 60
	case bson.CodeWithScope:
		return 65
	}
	return 0
}

// hashedSplitPoints are mongos' initial split points of a hashed key's
// space into n chunks: evenly spaced and symmetric around 0.
func hashedSplitPoints(n int) []int64 {
	interval := (math.MaxInt64 / int64(n)) * 2
	var splits []int64
	cur := int64(0)
	if n%2 == 0 {
		splits = append(splits, 0)
		cur += interval
	} else {
		cur += interval / 2
	}
	for i := 0; i < (n-1)/2; i++ {
		splits = append(splits, cur, -cur)
		cur += interval
	}
	slices.Sort(splits)
	return splits
}
