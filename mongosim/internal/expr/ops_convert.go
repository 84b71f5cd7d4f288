package expr

import (
	"math"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

const conversionFailure = 241

var convertOps = map[string]opCompiler{
	"$toString":   shortConvert("string"),
	"$toInt":      shortConvert("int"),
	"$toLong":     shortConvert("long"),
	"$toDouble":   shortConvert("double"),
	"$toBool":     shortConvert("bool"),
	"$toObjectId": shortConvert("objectId"),
	"$toDate":     shortConvert("date"),
	"$convert":    compileConvert,
}

func shortConvert(to string) opCompiler {
	return func(name string, args any) (evalFn, error) {
		fns, err := compileArgs(name, args, 1, 1)
		if err != nil {
			return nil, err
		}
		return func(s *scope) (any, error) {
			v, err := fns[0](s)
			if err != nil {
				return nil, err
			}
			if IsNullish(v) {
				return nil, nil
			}
			return convert(v, to)
		}, nil
	}
}

func compileConvert(name string, args any) (evalFn, error) {
	m, err := namedArgs(name, args, []string{"input", "to"}, "onError", "onNull", "format", "base", "byteOrder")
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"format", "base", "byteOrder"} {
		if _, ok := m[k]; ok {
			return nil, cmderr.Unsupported("$convert option '" + k + "'")
		}
	}
	fns, err := namedFns(m, "input", "to", "onError", "onNull")
	if err != nil {
		return nil, err
	}
	input, to, onError, onNull := fns[0], fns[1], fns[2], fns[3]
	return func(s *scope) (any, error) {
		v, err := input(s)
		if err != nil {
			return nil, err
		}
		tv, err := to(s)
		if err != nil {
			return nil, err
		}
		if IsNullish(tv) {
			return nil, nil
		}
		target, err := targetType(tv)
		if err != nil {
			return nil, err
		}
		if IsNullish(v) {
			if onNull != nil {
				return onNull(s)
			}
			return nil, nil
		}
		out, err := convert(v, target)
		if err != nil && onError != nil {
			if ce, ok := err.(*cmderr.Error); ok && ce.Code == conversionFailure {
				return onError(s)
			}
		}
		return out, err
	}, nil
}

func targetType(v any) (string, error) {
	names := map[int64]string{1: "double", 2: "string", 7: "objectId", 8: "bool", 9: "date", 16: "int", 18: "long", 19: "decimal"}
	switch x := v.(type) {
	case string:
		for _, n := range names {
			if n == x {
				return x, nil
			}
		}
		return "", cmderr.New(cmderr.BadValue, "Unknown type name: %s", x)
	}
	if n, ok := value.ToInt64(v); ok && value.IsNumber(v) {
		if name, ok := names[n]; ok {
			return name, nil
		}
		return "", cmderr.New(cmderr.FailedToParse, "In $convert, numeric value for 'to' does not correspond to a BSON type: %s", render(v))
	}
	return "", cmderr.New(cmderr.FailedToParse, "$convert's 'to' argument must be a string or number, but is %s", typeName(v))
}

func convFail(format string, args ...any) error {
	return namedErr(conversionFailure, "ConversionFailure", format, args...)
}

func unsupportedConv(v any, to string) error {
	return convFail("Unsupported conversion from %s to %s in $convert with no onError value", typeName(v), to)
}

// numberString formats a number as $toString does.
func numberString(v any) string {
	switch n := v.(type) {
	case int32:
		return strconv.FormatInt(int64(n), 10)
	case int64:
		return strconv.FormatInt(n, 10)
	case int:
		return strconv.Itoa(n)
	case bson.Decimal128:
		return n.String()
	}
	f, _ := value.ToFloat(v)
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func convert(v any, to string) (any, error) {
	switch to {
	case "decimal":
		return toDecimal(v)
	case "string":
		return convertToString(v)
	case "bool":
		return convertToBool(v)
	case "double":
		return convertToDouble(v)
	case "int", "long":
		return convertToInteger(v, to)
	case "objectId":
		return convertToObjectID(v)
	case "date":
		return convertToDate(v)
	}
	return nil, unsupportedConv(v, to)
}

func convertToString(v any) (any, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case bson.ObjectID:
		return x.Hex(), nil
	case bson.DateTime:
		return x.Time().UTC().Format("2006-01-02T15:04:05.000Z"), nil
	case bson.Symbol:
		return string(x), nil
	}
	if value.IsNumber(v) {
		return numberString(v), nil
	}
	return nil, unsupportedConv(v, "string")
}

func convertToBool(v any) (any, error) {
	switch x := v.(type) {
	case bool:
		return x, nil
	case string, bson.ObjectID, bson.DateTime, bson.D, bson.A, bson.Timestamp, bson.Regex, bson.Binary:
		return true, nil
	}
	if value.IsNumber(v) {
		return Truthy(v), nil
	}
	return nil, unsupportedConv(v, "bool")
}

func convertToDouble(v any) (any, error) {
	switch x := v.(type) {
	case bool:
		if x {
			return 1.0, nil
		}
		return 0.0, nil
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil || strings.TrimSpace(x) != x || x == "" || strings.ContainsAny(x, "xX_") {
			if x == "Infinity" || x == "-Infinity" || x == "NaN" {
				f, _ = strconv.ParseFloat(strings.Replace(x, "Infinity", "Inf", 1), 64)
				return f, nil
			}
			return nil, convFail("Failed to parse number '%s' in $convert with no onError value: Did not consume whole string.", x)
		}
		return f, nil
	case bson.DateTime:
		return float64(x), nil
	}
	if value.IsNumber(v) {
		f, _ := value.ToFloat(v)
		return f, nil
	}
	return nil, unsupportedConv(v, "double")
}

// convertToInteger converts to "int" (int32) or "long" (int64), failing
// on overflow of the target type.
func convertToInteger(v any, to string) (any, error) {
	lo, hi := int64(math.MinInt32), int64(math.MaxInt32)
	if to == "long" {
		lo, hi = math.MinInt64, math.MaxInt64
	}
	var n int64
	switch x := v.(type) {
	case bool:
		if x {
			n = 1
		}
	case string:
		i, err := strconv.ParseInt(x, 10, 64)
		if err != nil || strings.HasPrefix(x, "+") {
			return nil, convFail("Failed to parse number '%s' in $convert with no onError value: Did not consume whole string.", x)
		}
		if i < lo || i > hi {
			return nil, convFail("Failed to parse number '%s' in $convert with no onError value: Overflow", x)
		}
		n = i
	case bson.DateTime:
		if to == "int" {
			return nil, unsupportedConv(v, to)
		}
		n = int64(x)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, convFail("Attempt to convert NaN or infinity value to integer type in $convert with no onError value: %v", x)
		}
		t := math.Trunc(x)
		if t < float64(lo) || t >= -float64(lo) {
			return nil, convFail("Conversion would overflow target type in $convert with no onError value: %v", x)
		}
		n = int64(t)
	default:
		if !value.IsNumber(v) {
			return nil, unsupportedConv(v, to)
		}
		if i, ok := value.Integer(v); ok {
			if i < lo || i > hi {
				return nil, convFail("Conversion would overflow target type in $convert with no onError value: %d", i)
			}
			n = i
		} else {
			f, _ := value.ToFloat(v)
			return convert(f, to)
		}
	}
	if to == "int" {
		return int32(n), nil
	}
	return n, nil
}

func convertToObjectID(v any) (any, error) {
	switch x := v.(type) {
	case bson.ObjectID:
		return x, nil
	case string:
		id, err := bson.ObjectIDFromHex(x)
		if err != nil {
			return nil, convFail("Failed to parse objectId '%s' in $convert with no onError value: Invalid string length for parsing to OID, expected 24 but found %d", x, len(x))
		}
		return id, nil
	}
	return nil, unsupportedConv(v, "objectId")
}

func convertToDate(v any) (any, error) {
	switch x := v.(type) {
	case bson.DateTime:
		return x, nil
	case bson.ObjectID:
		return bson.NewDateTimeFromTime(x.Timestamp()), nil
	case bson.Timestamp:
		return bson.DateTime(int64(x.T) * 1000), nil
	case int64:
		return bson.DateTime(x), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) || x >= math.MaxInt64 || x < math.MinInt64 {
			return nil, convFail("Conversion would overflow target type in $convert with no onError value: %v", x)
		}
		return bson.DateTime(int64(x)), nil
	case string:
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.000Z07:00", "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02"} {
			if t, err := time.Parse(layout, x); err == nil {
				return bson.NewDateTimeFromTime(t), nil
			}
		}
		return nil, convFail("Error parsing date string '%s' in $convert with no onError value", x)
	}
	return nil, unsupportedConv(v, "date")
}
