package fuzzdoc

import (
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Value is a value of the given kind built from n and s: the BSON types
// servers and clients read (numbers, strings, booleans, null, documents,
// arrays, operator documents, regular expressions, dates, keys, binary,
// decimals and timestamps).
func Value(kind uint8, n int64, s string) any {
	switch kind % 12 {
	case 0:
		return int32(n)
	case 1:
		return n
	case 2:
		return float64(n) / 7
	case 3:
		return s
	case 4:
		return n&1 == 1
	case 5:
		return nil
	case 6:
		return bson.D{{Key: s, Value: n}}
	case 7:
		return bson.A{n, s}
	case 8:
		return bson.D{{Key: "$" + s, Value: n}}
	case 9:
		return bson.D{{Key: "$" + s, Value: bson.A{"$" + s, n}}}
	case 10:
		return bson.Regex{Pattern: s, Options: "i"}
	default:
		switch n % 5 {
		case 0:
			return bson.NewDateTimeFromTime(time.Unix(n/1000, 0))
		case 1:
			return bson.MinKey{}
		case 2:
			return bson.Binary{Subtype: 4, Data: []byte(s)}
		case 3:
			d, _ := bson.ParseDecimal128(s)
			return d
		default:
			return bson.Timestamp{T: uint32(n), I: 1}
		}
	}
}

// Set returns d with the value at the dotted path set to val, sharing
// everything off the path with d (which it never changes): a missing field
// is appended, an array index past the end appends, and a value in the way
// is replaced by a document. An empty path returns d.
func Set(d bson.D, path string, val any) bson.D {
	if path == "" {
		return d
	}
	return set(d, strings.Split(path, "."), val).(bson.D)
}

func set(v any, parts []string, val any) any {
	if len(parts) == 0 {
		return val
	}
	switch x := v.(type) {
	case bson.D:
		out := append(bson.D(nil), x...)
		for i := range out {
			if out[i].Key == parts[0] {
				out[i].Value = set(out[i].Value, parts[1:], val)
				return out
			}
		}
		return append(out, bson.E{Key: parts[0], Value: set(nil, parts[1:], val)})
	case bson.A:
		out := append(bson.A(nil), x...)
		if i, err := strconv.Atoi(parts[0]); err == nil && i >= 0 && i < len(out) {
			out[i] = set(out[i], parts[1:], val)
			return out
		}
		return append(out, set(nil, parts[1:], val))
	default:
		return bson.D{{Key: parts[0], Value: set(nil, parts[1:], val)}}
	}
}
