package expr

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// Operators added after the first set: string search and replace,
// $sortArray, $zip, the n-operators on arrays, trigonometry and the ISO
// week date parts. This file's init runs after ops.go's (file order), so
// these entries take precedence over the "unsupported" list there.

var extraOps = map[string]opCompiler{
	"$replaceOne":   compileReplace,
	"$replaceAll":   compileReplace,
	"$indexOfBytes": nary(2, 4, opIndexOfStr),
	"$indexOfCP":    nary(2, 4, opIndexOfStr),
	"$sortArray":    compileSortArray,
	"$zip":          compileZip,
	"$firstN":       compileArrayN,
	"$lastN":        compileArrayN,
	"$maxN":         compileArrayN,
	"$minN":         compileArrayN,
	"$isoWeek":      datePart(func(t time.Time) int { _, w := t.ISOWeek(); return w }),
	"$isoWeekYear":  datePart(func(t time.Time) int { y, _ := t.ISOWeek(); return y }),
	"$isoDayOfWeek": datePart(func(t time.Time) int { return (int(t.Weekday())+6)%7 + 1 }),
	// weeks start on Sunday; the days before the year's first Sunday are week 0
	"$week":             datePart(func(t time.Time) int { return (t.YearDay() - 1 + 7 - int(t.Weekday())) / 7 }),
	"$sin":              trig(math.Sin, finiteOnly),
	"$cos":              trig(math.Cos, finiteOnly),
	"$tan":              trig(math.Tan, finiteOnly),
	"$asin":             trig(math.Asin, within(-1, 1)),
	"$acos":             trig(math.Acos, within(-1, 1)),
	"$atan":             trig(math.Atan, nil),
	"$sinh":             trig(math.Sinh, nil),
	"$cosh":             trig(math.Cosh, nil),
	"$tanh":             trig(math.Tanh, nil),
	"$asinh":            trig(math.Asinh, nil),
	"$acosh":            trig(math.Acosh, within(1, math.Inf(1))),
	"$atanh":            trig(math.Atanh, within(-1, 1)),
	"$degreesToRadians": trig(func(x float64) float64 { return x * math.Pi / 180 }, nil),
	"$radiansToDegrees": trig(func(x float64) float64 { return x * 180 / math.Pi }, nil),
	"$atan2":            nary(2, 2, opAtan2),
	"$stdDevPop":        nary(0, -1, opStdDev),
	"$stdDevSamp":       nary(0, -1, opStdDev),
	"$bsonSize":         nary(1, 1, opBsonSize),
	"$binarySize":       nary(1, 1, opBinarySize),
	"$tsSecond":         nary(1, 1, opTimestampPart),
	"$tsIncrement":      nary(1, 1, opTimestampPart),
}

func init() {
	for name, c := range extraOps {
		operators[name] = c
	}
}

// keepNamed keeps an operator's named arguments by name; a name not among
// known is answered with unknown's error.
func keepNamed(d bson.D, unknown func(key string) error, known ...string) (map[string]any, error) {
	m := make(map[string]any, len(d))
	for _, e := range d {
		if !slices.Contains(known, e.Key) {
			return nil, unknown(e.Key)
		}
		m[e.Key] = e.Value
	}
	return m, nil
}

// $replaceOne / $replaceAll: {input, find, replacement}, all strings; a
// null or missing one makes the result null.
func compileReplace(name string, args any) (evalFn, error) {
	d, ok := asDoc(args)
	if !ok {
		return nil, cmderr.New(51751, "%s requires an object as an argument, found: %s", name, typeName(args))
	}
	m, err := keepNamed(d, func(key string) error { return cmderr.New(51750, "%s found an unknown argument: %s", name, key) }, "input", "find", "replacement")
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"input", "find", "replacement"} {
		if _, ok := m[k]; !ok {
			code := map[string]int32{"input": 51749, "find": 51748, "replacement": 51747}[k]
			return nil, cmderr.New(code, "%s requires '%s' to be specified", name, k)
		}
	}
	fns, err := namedFns(m, "input", "find", "replacement")
	if err != nil {
		return nil, err
	}
	return func(s *scope) (any, error) {
		vals, err := evalAll(s, fns)
		if err != nil {
			return nil, err
		}
		codes := []int32{51746, 51745, 51744}
		names := []string{"input", "find", "replacement"}
		strs := make([]string, 3)
		null := false
		for i, v := range vals {
			if IsNullish(v) {
				null = true
				continue
			}
			str, ok := v.(string)
			if !ok {
				return nil, cmderr.New(codes[i], "%s requires that '%s' be a string, found: %s", name, names[i], render(v))
			}
			strs[i] = str
		}
		if null {
			return nil, nil
		}
		n := -1
		if name == "$replaceOne" {
			n = 1
		}
		if c := strings.Count(strs[0], strs[1]); c > 0 && len(strs[2]) > len(strs[1]) &&
			len(strs[0])+c*(len(strs[2])-len(strs[1])) > maxStringBytes {
			return nil, cmderr.New(cmderr.BSONObjectTooLarge, "%s result exceeds the maximum BSON size", name)
		}
		return strings.Replace(strs[0], strs[1], strs[2], n), nil
	}, nil
}

// $indexOfBytes / $indexOfCP: [string, substring, start, end].
func opIndexOfStr(name string, vals []any) (any, error) {
	cp := name == "$indexOfCP"
	codeStr, codeSub, codeStart, codeEnd := int32(40091), int32(40092), int32(40096), int32(40097)
	if cp {
		codeStr, codeSub, codeStart, codeEnd = 40093, 40094, 40096, 40097
	}
	if IsNullish(vals[0]) {
		return nil, nil
	}
	str, ok := vals[0].(string)
	if !ok {
		return nil, cmderr.New(codeStr, "%s requires a string as the first argument, found: %s", name, typeName(vals[0]))
	}
	sub, ok := vals[1].(string)
	if !ok {
		return nil, cmderr.New(codeSub, "%s requires a string as the second argument, found: %s", name, typeName(vals[1]))
	}
	var units []string // code points, or nil for bytes
	length := len(str)
	if cp {
		for _, r := range str {
			units = append(units, string(r))
		}
		length = len(units)
	}
	start, end := 0, length
	if len(vals) > 2 {
		n, ok := value.ToInt64(vals[2])
		if !value.IsNumber(vals[2]) || !ok {
			return nil, cmderr.New(40096, "%s starting index must be numeric type (is BSON type %s)", name, typeName(vals[2]))
		}
		if n < 0 {
			return nil, cmderr.New(codeStart, "%s starting index must be a positive integer (is %d)", name, n)
		}
		start = int(min(n, int64(length)+1))
	}
	if len(vals) > 3 {
		n, ok := value.ToInt64(vals[3])
		if !value.IsNumber(vals[3]) || !ok {
			return nil, cmderr.New(40096, "%s ending index must be numeric type (is BSON type %s)", name, typeName(vals[3]))
		}
		if n < 0 {
			return nil, cmderr.New(codeEnd, "%s ending index must be a positive integer (is %d)", name, n)
		}
		end = int(min(n, int64(length)))
	}
	if start > length || start > end {
		return int32(-1), nil
	}
	if !cp {
		i := strings.Index(str[start:end], sub)
		if i < 0 {
			return int32(-1), nil
		}
		return int32(start + i), nil
	}
	subLen := utf8.RuneCountInString(sub)
	for i := start; i+subLen <= end; i++ {
		if strings.Join(units[i:i+subLen], "") == sub {
			return int32(i), nil
		}
	}
	return int32(-1), nil
}

// $sortArray: {input, sortBy: 1 | -1 | {field: ±1, …}}.
func compileSortArray(name string, args any) (evalFn, error) {
	input, sortBy, err := sortArrayArgs(args)
	if err != nil {
		return nil, err
	}
	order, err := parseSortArrayOrder(sortBy)
	if err != nil {
		return nil, err
	}
	in, err := compile(input)
	if err != nil {
		return nil, err
	}
	return func(s *scope) (any, error) {
		a, ok, err := evalArray(s, in, func(v any) error {
			return cmderr.New(2942504, "The input argument to $sortArray must be an array, but was of type: %s", typeName(v))
		})
		if !ok || err != nil {
			return nil, err
		}
		out := slices.Clone(a)
		slices.SortStableFunc(out, order.compare)
		return out, nil
	}, nil
}

// sortArrayArgs takes $sortArray's two required arguments.
func sortArrayArgs(args any) (input, sortBy any, err error) {
	d, ok := asDoc(args)
	if !ok {
		return nil, nil, cmderr.New(2942500, "$sortArray requires an object as an argument, found: %s", typeName(args))
	}
	haveInput, haveSort := false, false
	for _, e := range d {
		switch e.Key {
		case "input":
			input, haveInput = e.Value, true
		case "sortBy":
			sortBy, haveSort = e.Value, true
		default:
			return nil, nil, cmderr.New(2942501, "$sortArray found an unknown argument: %s", e.Key)
		}
	}
	if !haveInput {
		return nil, nil, cmderr.New(2942502, "$sortArray requires 'input' to be specified")
	}
	if !haveSort {
		return nil, nil, cmderr.New(2942503, "$sortArray requires 'sortBy' to be specified")
	}
	return input, sortBy, nil
}

// sortArrayOrder is a parsed sortBy: either whole values in one direction
// (whole is 1 or -1) or documents by field paths.
type sortArrayOrder struct {
	whole int
	keys  []sortArrayKey
}

type sortArrayKey struct {
	path []string
	desc bool
}

func parseSortArrayOrder(sortBy any) (sortArrayOrder, error) {
	badSort := func() error {
		return cmderr.New(2942505, "$sortArray sortBy must be 1, -1 or an object of field paths to 1 or -1")
	}
	var o sortArrayOrder
	if sd, ok := asDoc(sortBy); ok {
		if len(sd) == 0 {
			return o, badSort()
		}
		for _, e := range sd {
			f, ok := value.ToFloat(e.Value)
			if !ok || (f != 1 && f != -1) {
				return o, badSort()
			}
			o.keys = append(o.keys, sortArrayKey{path: strings.Split(e.Key, "."), desc: f < 0})
		}
	} else if f, ok := value.ToFloat(sortBy); ok && (f == 1 || f == -1) {
		o.whole = int(f)
	} else {
		return o, badSort()
	}
	return o, nil
}

func (o sortArrayOrder) compare(x, y any) int {
	if o.whole != 0 {
		return o.whole * CompareValues(x, y)
	}
	for _, k := range o.keys {
		c := CompareValues(sortArrayField(x, k.path), sortArrayField(y, k.path))
		if k.desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

// sortArrayField follows path through embedded documents only (not arrays);
// a missing field sorts as null.
func sortArrayField(v any, path []string) any {
	for _, p := range path {
		d, ok := asDoc(v)
		if !ok {
			return nil
		}
		found := false
		for _, e := range d {
			if e.Key == p {
				v, found = e.Value, true
				break
			}
		}
		if !found {
			return nil
		}
	}
	return v
}

// $zip: {inputs: [arrays], useLongestLength, defaults}.
func compileZip(name string, args any) (evalFn, error) {
	z, err := parseZipArgs(args)
	if err != nil {
		return nil, err
	}
	return z.eval, nil
}

// zipOp is a compiled $zip.
type zipOp struct {
	inputs, defaults []evalFn
	longest          bool
}

func parseZipArgs(args any) (zipOp, error) {
	var z zipOp
	d, ok := asDoc(args)
	if !ok {
		return z, cmderr.New(34460, "$zip only supports an object as an argument, found %s", typeName(args))
	}
	haveInputs, haveDefaults := false, false
	for _, e := range d {
		var fns []evalFn
		var err error
		switch e.Key {
		case "inputs":
			fns, err = compileExprArray(e.Value, 34461, "inputs")
			z.inputs, haveInputs = append(z.inputs, fns...), true
		case "defaults":
			fns, err = compileExprArray(e.Value, 34462, "defaults")
			z.defaults, haveDefaults = append(z.defaults, fns...), true
		case "useLongestLength":
			b, ok := e.Value.(bool)
			if !ok {
				return z, cmderr.New(34463, "useLongestLength must be a bool, found %s", typeName(e.Value))
			}
			z.longest = b
		default:
			return z, cmderr.New(34464, "$zip found an unknown argument: %s", e.Key)
		}
		if err != nil {
			return z, err
		}
	}
	if !haveInputs {
		return z, cmderr.New(34465, "$zip requires at least one input array")
	}
	if haveDefaults && !z.longest {
		return z, cmderr.New(34466, "cannot specify defaults unless useLongestLength is true")
	}
	if haveDefaults && len(z.defaults) != len(z.inputs) {
		return z, cmderr.New(34467, "defaults and inputs must have the same length")
	}
	return z, nil
}

// compileExprArray compiles an argument that must be an array of
// expressions; code and argName make the error when it is not.
func compileExprArray(v any, code int32, argName string) ([]evalFn, error) {
	a, ok := value.ToArray(v)
	if !ok {
		return nil, cmderr.New(code, "%s must be an array of expressions, found %s", argName, typeName(v))
	}
	var fns []evalFn
	for _, x := range a {
		fn, err := compile(x)
		if err != nil {
			return nil, err
		}
		fns = append(fns, fn)
	}
	return fns, nil
}

func (z zipOp) eval(s *scope) (any, error) {
	arrays := make([]bson.A, len(z.inputs))
	for i, fn := range z.inputs {
		v, err := fn(s)
		if err != nil {
			return nil, err
		}
		if IsNullish(v) {
			return nil, nil
		}
		a, ok := value.ToArray(v)
		if !ok {
			return nil, cmderr.New(34468, "$zip found a non-array expression in input: %s", render(v))
		}
		arrays[i] = a
	}
	defs, err := evalAll(s, z.defaults)
	if err != nil {
		return nil, err
	}
	return zipRows(arrays, defs, z.longest), nil
}

// zipRows transposes arrays, to the shortest length or, when longest, to
// the longest with defs (or null) filling the shorter ones.
func zipRows(arrays []bson.A, defs []any, longest bool) bson.A {
	n := -1
	for _, a := range arrays {
		if n < 0 || (longest && len(a) > n) || (!longest && len(a) < n) {
			n = len(a)
		}
	}
	out := make(bson.A, 0, max(n, 0))
	for j := 0; j < n; j++ {
		row := make(bson.A, len(arrays))
		for i, a := range arrays {
			switch {
			case j < len(a):
				row[i] = a[j]
			case i < len(defs):
				row[i] = defs[i]
			}
		}
		out = append(out, row)
	}
	return out
}

// $firstN / $lastN / $maxN / $minN on an array: {n, input}.
func compileArrayN(name string, args any) (evalFn, error) {
	m, err := namedArgs(name, args, []string{"n", "input"})
	if err != nil {
		return nil, err
	}
	fns, err := namedFns(m, "n", "input")
	if err != nil {
		return nil, err
	}
	return func(s *scope) (any, error) {
		nv, err := fns[0](s)
		if err != nil {
			return nil, err
		}
		n, ok := value.ToInt64(nv)
		if !value.IsNumber(nv) || !ok {
			return nil, cmderr.New(5787902, "Value for 'n' must be of integral type, but found %s", render(nv))
		}
		if n <= 0 {
			return nil, cmderr.New(5787908, "'n' must be greater than 0, found %d", n)
		}
		v, err := fns[1](s)
		if err != nil {
			return nil, err
		}
		a, ok := value.ToArray(v)
		if !ok {
			return nil, cmderr.New(5788200, "Input must be an array")
		}
		var out bson.A
		switch name {
		case "$firstN":
			out = slices.Clone(a[:min(int64(len(a)), n)])
		case "$lastN":
			out = slices.Clone(a[int64(len(a))-min(int64(len(a)), n):])
		default:
			for _, x := range a {
				if !IsNullish(x) {
					out = append(out, x)
				}
			}
			slices.SortStableFunc(out, func(x, y any) int {
				if name == "$maxN" {
					return CompareValues(y, x)
				}
				return CompareValues(x, y)
			})
			out = out[:min(int64(len(out)), n)]
		}
		if out == nil {
			out = bson.A{}
		}
		return out, nil
	}, nil
}

// trig applies a float function; check rejects inputs outside the domain.
func trig(f func(float64) float64, check func(name string, x float64) error) opCompiler {
	return nary(1, 1, func(name string, vals []any) (any, error) {
		v := vals[0]
		if IsNullish(v) {
			return nil, nil
		}
		if !value.IsNumber(v) {
			return nil, cmderr.New(28765, "%s only supports numeric types, not %s", name, typeName(v))
		}
		x, _ := value.ToFloat(v)
		if check != nil && !math.IsNaN(x) {
			if err := check(name, x); err != nil {
				return nil, err
			}
		}
		return floatLike(v, f(x)), nil
	})
}

// floatLike answers a decimal for a decimal input, else a double.
func floatLike(in any, r float64) any {
	if _, ok := in.(bson.Decimal128); ok {
		if d, err := bson.ParseDecimal128(strconv.FormatFloat(r, 'g', -1, 64)); err == nil {
			return d
		}
	}
	return r
}

func finiteOnly(name string, x float64) error {
	if math.IsInf(x, 0) {
		return cmderr.New(50989, "cannot apply %s to %s, value must in (-inf,inf)", name, numberString(x))
	}
	return nil
}

func within(lo, hi float64) func(string, float64) error {
	return func(name string, x float64) error {
		if x < lo || x > hi {
			return cmderr.New(50989, "cannot apply %s to %s, value must in [%s,%s]", name, numberString(x), boundString(lo), boundString(hi))
		}
		return nil
	}
}

func boundString(f float64) string {
	if math.IsInf(f, 1) {
		return "inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func opAtan2(name string, vals []any) (any, error) {
	if IsNullish(vals[0]) || IsNullish(vals[1]) {
		return nil, nil
	}
	for _, v := range vals {
		if !value.IsNumber(v) {
			return nil, cmderr.New(51044, "$atan2 only supports numeric types, not %s", typeName(v))
		}
	}
	y, _ := value.ToFloat(vals[0])
	x, _ := value.ToFloat(vals[1])
	r := math.Atan2(y, x)
	if _, ok := vals[0].(bson.Decimal128); ok {
		return floatLike(vals[0], r), nil
	}
	return floatLike(vals[1], r), nil
}

// $stdDevPop / $stdDevSamp as expressions: over one array argument's
// elements, or over the arguments; non-numbers are ignored.
func opStdDev(name string, vals []any) (any, error) {
	if len(vals) == 1 {
		if a, ok := value.ToArray(vals[0]); ok {
			vals = a
		}
	}
	var n, mean, m2 float64
	for _, v := range vals {
		if !value.IsNumber(v) {
			continue
		}
		x, _ := value.ToFloat(v)
		n++
		d := x - mean
		mean += d / n
		m2 += d * (x - mean)
	}
	if name == "$stdDevSamp" {
		if n < 2 {
			return nil, nil
		}
		return math.Sqrt(m2 / (n - 1)), nil
	}
	if n == 0 {
		return nil, nil
	}
	return math.Sqrt(m2 / n), nil
}

func opBsonSize(name string, vals []any) (any, error) {
	if IsNullish(vals[0]) {
		return nil, nil
	}
	d, ok := asDoc(vals[0])
	if !ok {
		return nil, cmderr.New(31393, "$bsonSize requires a document input, found: %s", typeName(vals[0]))
	}
	b, err := bson.Marshal(d)
	if err != nil {
		return nil, cmderr.New(cmderr.BadValue, "$bsonSize: %v", err)
	}
	return int32(len(b)), nil
}

func opBinarySize(name string, vals []any) (any, error) {
	switch x := vals[0].(type) {
	case string:
		return int32(len(x)), nil
	case bson.Binary:
		return int32(len(x.Data)), nil
	}
	if IsNullish(vals[0]) {
		return nil, nil
	}
	return nil, cmderr.New(51276, "$binarySize requires a string or BinData argument, found: %s", typeName(vals[0]))
}

func opTimestampPart(name string, vals []any) (any, error) {
	if IsNullish(vals[0]) {
		return nil, nil
	}
	ts, ok := vals[0].(bson.Timestamp)
	if !ok {
		code := int32(5687301)
		if name == "$tsIncrement" {
			code = 5687302
		}
		return nil, cmderr.New(code, "%s expects argument of type timestamp but received %s", name, typeName(vals[0]))
	}
	if name == "$tsSecond" {
		return int64(ts.T), nil
	}
	return int64(ts.I), nil
}
