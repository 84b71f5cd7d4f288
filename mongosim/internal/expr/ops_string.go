package expr

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// maxStringBytes keeps string-building operators within the BSON document
// size limit instead of growing without bound.
const maxStringBytes = 16 << 20

var stringOps = map[string]opCompiler{
	"$concat":      nary(0, -1, opConcat),
	"$toUpper":     nary(1, 1, opCase),
	"$toLower":     nary(1, 1, opCase),
	"$substr":      nary(3, 3, opSubstrBytes),
	"$substrBytes": nary(3, 3, opSubstrBytes),
	"$substrCP":    nary(3, 3, opSubstrCP),
	"$strLenBytes": nary(1, 1, opStrLen),
	"$strLenCP":    nary(1, 1, opStrLen),
	"$split":       nary(2, 2, opSplit),
	"$strcasecmp":  nary(2, 2, opStrcasecmp),
	"$trim":        compileTrim,
	"$ltrim":       compileTrim,
	"$rtrim":       compileTrim,
}

func opConcat(name string, vals []any) (any, error) {
	var b strings.Builder
	for _, v := range vals {
		if IsNullish(v) {
			return nil, nil
		}
		s, ok := v.(string)
		if !ok {
			return nil, cmderr.New(16702, "$concat only supports strings, not %s", typeName(v))
		}
		if b.Len()+len(s) > maxStringBytes {
			return nil, cmderr.New(cmderr.BSONObjectTooLarge, "$concat result exceeds the maximum BSON size")
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

// coerceString converts a value to a string the way the string operators
// that accept non-strings ($toUpper, $substr...) do.
func coerceString(name string, v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bson.Symbol:
		return string(x), nil
	case missingValue, nil, bson.Null, bson.Undefined:
		return "", nil
	case bson.DateTime:
		return x.Time().UTC().Format("2006-01-02T15:04:05.000Z"), nil
	}
	if value.IsNumber(v) {
		return numberString(v), nil
	}
	return "", cmderr.New(16007, "can't convert from BSON type %s to String", typeName(v))
}

func opCase(name string, vals []any) (any, error) {
	s, err := coerceString(name, vals[0])
	if err != nil {
		return nil, err
	}
	// ASCII-only case mapping, as the server does
	b := []byte(s)
	for i, c := range b {
		if name == "$toUpper" && c >= 'a' && c <= 'z' {
			b[i] = c - 32
		}
		if name == "$toLower" && c >= 'A' && c <= 'Z' {
			b[i] = c + 32
		}
	}
	return string(b), nil
}

func opSubstrBytes(name string, vals []any) (any, error) {
	s, err := coerceString(name, vals[0])
	if err != nil {
		return nil, err
	}
	if !value.IsNumber(vals[1]) {
		return nil, cmderr.New(16034, "%s: starting index must be a numeric type (is BSON type %s)", name, typeName(vals[1]))
	}
	if !value.IsNumber(vals[2]) {
		return nil, cmderr.New(16035, "%s: length must be a numeric type (is BSON type %s)", name, typeName(vals[2]))
	}
	startF, _ := value.ToFloat(vals[1])
	lenF, _ := value.ToFloat(vals[2])
	if startF < 0 {
		if name == "$substr" {
			return "", nil
		}
		return nil, cmderr.New(50752, "%s: starting index must be non-negative (got: %v)", name, startF)
	}
	start := len(s)
	if startF < float64(len(s)) {
		start = int(startF)
	}
	end := len(s)
	if lenF >= 0 && float64(start)+lenF < float64(len(s)) {
		end = start + int(lenF)
	}
	if start < len(s) && !utf8.RuneStart(s[start]) {
		return nil, cmderr.New(28656, "%s: Invalid range, starting index is a UTF-8 continuation byte.", name)
	}
	if end < len(s) && !utf8.RuneStart(s[end]) {
		return nil, cmderr.New(28657, "%s: Invalid range, ending index is in the middle of a UTF-8 character.", name)
	}
	return s[start:end], nil
}

func opSubstrCP(name string, vals []any) (any, error) {
	s, err := coerceString(name, vals[0])
	if err != nil {
		return nil, err
	}
	start, ok := int32Arg(vals[1])
	if !ok {
		return nil, cmderr.New(34450, "%s: starting index must be a numeric type (is BSON type %s)", name, typeName(vals[1]))
	}
	n, ok := int32Arg(vals[2])
	if !ok {
		return nil, cmderr.New(34452, "%s: length must be a numeric type (is BSON type %s)", name, typeName(vals[2]))
	}
	if start < 0 {
		return nil, cmderr.New(34455, "%s: starting index must be non-negative (got: %d)", name, start)
	}
	if n < 0 {
		return nil, cmderr.New(34456, "%s: length must be a nonnegative integer.", name)
	}
	r := []rune(s)
	if start > int64(len(r)) {
		start = int64(len(r))
	}
	end := min(start+n, int64(len(r)))
	return string(r[start:end]), nil
}

func opStrLen(name string, vals []any) (any, error) {
	s, ok := vals[0].(string)
	if !ok {
		if name == "$strLenBytes" {
			return nil, cmderr.New(34473, "$strLenBytes requires a string argument, found: %s", typeName(vals[0]))
		}
		return nil, cmderr.New(34471, "$strLenCP requires a string argument, found: %s", typeName(vals[0]))
	}
	if name == "$strLenBytes" {
		return int32(len(s)), nil
	}
	return int32(utf8.RuneCountInString(s)), nil
}

func opSplit(name string, vals []any) (any, error) {
	if IsNullish(vals[0]) || IsNullish(vals[1]) {
		return nil, nil
	}
	s, ok := vals[0].(string)
	if !ok {
		return nil, cmderr.New(40085, "$split requires an expression that evaluates to a string as a first argument, found: %s", typeName(vals[0]))
	}
	sep, ok := vals[1].(string)
	if !ok {
		return nil, cmderr.New(40086, "$split requires an expression that evaluates to a string as a second argument, found: %s", typeName(vals[1]))
	}
	if sep == "" {
		return nil, cmderr.New(40087, "$split requires a non-empty separator")
	}
	parts := strings.Split(s, sep)
	out := make(bson.A, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return out, nil
}

func opStrcasecmp(name string, vals []any) (any, error) {
	a, err := coerceString(name, vals[0])
	if err != nil {
		return nil, err
	}
	b, err := coerceString(name, vals[1])
	if err != nil {
		return nil, err
	}
	return int32(strings.Compare(strings.ToLower(a), strings.ToLower(b))), nil
}

func compileTrim(name string, args any) (evalFn, error) {
	m, err := namedArgs(name, args, []string{"input"}, "chars")
	if err != nil {
		return nil, err
	}
	fns, err := namedFns(m, "input", "chars")
	if err != nil {
		return nil, err
	}
	input, chars := fns[0], fns[1]
	return func(s *scope) (any, error) {
		v, err := input(s)
		if err != nil {
			return nil, err
		}
		if IsNullish(v) {
			return nil, nil
		}
		str, ok := v.(string)
		if !ok {
			return nil, cmderr.New(50699, "%s requires its input to be a string, got %s (of type %s) instead.", name, render(v), typeName(v))
		}
		cut := func(r rune) bool { return r == 0 || unicode.IsSpace(r) }
		if chars != nil {
			cv, err := chars(s)
			if err != nil {
				return nil, err
			}
			if IsNullish(cv) {
				return nil, nil
			}
			cs, ok := cv.(string)
			if !ok {
				return nil, cmderr.New(50700, "%s requires 'chars' to be a string, got %s (of type %s) instead.", name, render(cv), typeName(cv))
			}
			cut = func(r rune) bool { return strings.ContainsRune(cs, r) }
		}
		switch name {
		case "$ltrim":
			return strings.TrimLeftFunc(str, cut), nil
		case "$rtrim":
			return strings.TrimRightFunc(str, cut), nil
		}
		return strings.TrimFunc(str, cut), nil
	}, nil
}
