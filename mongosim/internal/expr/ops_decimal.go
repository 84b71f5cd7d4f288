package expr

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// $toDecimal and $convert to "decimal": integers exactly, doubles to 15
// significant digits (as mongod converts them: 2.5 is 2.50000000000000),
// strings parsed as decimals, dates as milliseconds, booleans as 1 or 0.

func init() { operators["$toDecimal"] = shortConvert("decimal") }

var decimalZero, _ = bson.ParseDecimal128("0")

func toDecimal(v any) (any, error) {
	switch x := v.(type) {
	case bson.Decimal128:
		return x, nil
	case bool:
		if x {
			return bson.ParseDecimal128("1")
		}
		return decimalZero, nil
	case bson.DateTime:
		return value.Add(int64(x), decimalZero)
	case string:
		s := strings.TrimSpace(x)
		d, err := bson.ParseDecimal128(s)
		if err != nil || s != x || x == "" {
			return nil, convFail("Failed to parse number '%s' in $convert with no onError value: Failed to parse string to decimal", x)
		}
		return d, nil
	}
	if value.IsNumber(v) {
		return value.Add(v, decimalZero)
	}
	return nil, unsupportedConv(v, "decimal")
}
