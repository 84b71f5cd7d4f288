package update

import (
	"encoding/hex"
	"math"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// formatValue renders v the way the server's BSONElement::toString does in
// error messages, so that mongosim's messages read like mongod's.
func formatValue(v any) string {
	var sb strings.Builder
	writeValue(&sb, v, 0)
	return sb.String()
}

// formatElem renders "key: value" as the server prints a BSON element.
func formatElem(key string, v any) string { return key + ": " + formatValue(v) }

// maxFormatDepth bounds recursion on deeply nested input.
const maxFormatDepth = 64

func writeValue(sb *strings.Builder, v any, depth int) {
	if depth > maxFormatDepth {
		sb.WriteString("...")
		return
	}
	switch x := v.(type) {
	case nil, bson.Null:
		sb.WriteString("null")
	case bson.Undefined:
		sb.WriteString("undefined")
	case int32:
		sb.WriteString(strconv.FormatInt(int64(x), 10))
	case int64:
		sb.WriteString(strconv.FormatInt(x, 10))
	case int:
		sb.WriteString(strconv.Itoa(x))
	case float64:
		sb.WriteString(formatDouble(x))
	case string:
		sb.WriteString(strconv.Quote(x))
	case bson.Symbol:
		sb.WriteString(strconv.Quote(string(x)))
	case bool:
		sb.WriteString(strconv.FormatBool(x))
	case bson.ObjectID:
		sb.WriteString("ObjectId('" + x.Hex() + "')")
	case bson.DateTime:
		sb.WriteString("new Date(" + strconv.FormatInt(int64(x), 10) + ")")
	case bson.Timestamp:
		sb.WriteString("Timestamp(" + strconv.FormatUint(uint64(x.T), 10) + ", " + strconv.FormatUint(uint64(x.I), 10) + ")")
	case bson.Decimal128:
		sb.WriteString("NumberDecimal(\"" + x.String() + "\")")
	case bson.Binary:
		sb.WriteString("BinData(" + strconv.Itoa(int(x.Subtype)) + ", " + strings.ToUpper(hex.EncodeToString(x.Data)) + ")")
	case bson.Regex:
		sb.WriteString("/" + x.Pattern + "/" + x.Options)
	case bson.JavaScript:
		sb.WriteString("JavaScript(" + strconv.Quote(string(x)) + ")")
	case bson.CodeWithScope:
		sb.WriteString("CodeWScope(" + strconv.Quote(string(x.Code)) + ")")
	case bson.DBPointer:
		sb.WriteString("DBRef('" + x.DB + "', '" + x.Pointer.Hex() + "')")
	case bson.MinKey:
		sb.WriteString("MinKey")
	case bson.MaxKey:
		sb.WriteString("MaxKey")
	case bson.D:
		if len(x) == 0 {
			sb.WriteString("{}")
			return
		}
		sb.WriteString("{ ")
		for i, e := range x {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(e.Key + ": ")
			writeValue(sb, e.Value, depth+1)
		}
		sb.WriteString(" }")
	case bson.A:
		if len(x) == 0 {
			sb.WriteString("[]")
			return
		}
		sb.WriteString("[ ")
		for i, e := range x {
			if i > 0 {
				sb.WriteString(", ")
			}
			writeValue(sb, e, depth+1)
		}
		sb.WriteString(" ]")
	default:
		sb.WriteString("?")
	}
}

// formatDouble mirrors the server's "nice" double rendering: integral values
// keep a trailing ".0" so they read as doubles.
func formatDouble(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}

// idDesc renders a document's _id for messages: "_id: 1", or "no id".
func idDesc(doc bson.D) string {
	for _, e := range doc {
		if e.Key == "_id" {
			return formatElem("_id", e.Value)
		}
	}
	return "no id"
}
