package agg

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/expr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// The window functions of $setWindowFields, parsed with mongod's rules
// and error codes. Those of later versions ($concatArrays, $setUnion,
// $minMaxScalar) are unrecognized, as on mongod 8.0.

var windowFnNames = map[string]bool{
	"$sum": true, "$avg": true, "$min": true, "$max": true, "$count": true, "$first": true, "$last": true,
	"$push": true, "$addToSet": true, "$stdDevPop": true, "$stdDevSamp": true,
	"$covariancePop": true, "$covarianceSamp": true, "$rank": true, "$denseRank": true,
	"$documentNumber": true, "$shift": true, "$derivative": true, "$integral": true,
	"$expMovingAvg": true, "$locf": true, "$linearFill": true,
	"$firstN": true, "$lastN": true, "$maxN": true, "$minN": true,
	"$top": true, "$bottom": true, "$topN": true, "$bottomN": true,
	"$median": true, "$percentile": true,
}

func compileWindowFn(spec bson.D, srt windowSort) (windowFn, error) {
	name, err := windowFnName(spec)
	if err != nil {
		return nil, err
	}
	if compile, ok := ownArgWindowFns[name]; ok {
		return compile(name, spec, srt)
	}
	return compileAccWindowFn(name, spec, srt)
}

// windowFnName is the function a window function spec names: its first
// $-prefixed key.
func windowFnName(spec bson.D) (string, error) {
	for _, e := range spec {
		if !strings.HasPrefix(e.Key, "$") {
			continue
		}
		if !windowFnNames[e.Key] {
			return "", cmderr.New(cmderr.FailedToParse, "Unrecognized window function, %s", e.Key)
		}
		return e.Key, nil
	}
	first := ""
	if len(spec) > 0 && spec[0].Key != "" {
		first = ", " + spec[0].Key
	}
	return "", cmderr.New(cmderr.FailedToParse, "Expected a $-prefixed window function%s", first)
}

// ownArgWindowFns are the window functions with their own argument rules;
// the others are accumulators over a window.
var ownArgWindowFns = map[string]func(name string, spec bson.D, srt windowSort) (windowFn, error){
	"$rank":           compileRankFn,
	"$denseRank":      compileRankFn,
	"$documentNumber": compileRankFn,
	"$shift":          func(_ string, spec bson.D, srt windowSort) (windowFn, error) { return compileShiftFn(spec, srt) },
	"$expMovingAvg":   func(_ string, spec bson.D, srt windowSort) (windowFn, error) { return compileExpMovingAvg(spec, srt) },
	"$locf":           compileFillFn,
	"$linearFill":     compileFillFn,
	"$derivative":     compileCalculusFn,
	"$integral":       compileCalculusFn,
}

// compileAccWindowFn compiles an accumulator-style function:
// {$op: <arg>, window: {...}}.
func compileAccWindowFn(name string, spec bson.D, srt windowSort) (windowFn, error) {
	bounds := wholePartition
	var arg any
	for _, e := range spec {
		switch {
		case e.Key == "window":
			b, err := parseWindowBounds(e.Value, srt)
			if err != nil {
				return nil, err
			}
			bounds = b
		case e.Key == name:
			arg = e.Value
		case windowFnNames[e.Key]:
			return nil, cmderr.New(cmderr.FailedToParse, "Cannot specify two functions in window function spec")
		default:
			return nil, cmderr.New(cmderr.FailedToParse, "Window function found an unknown argument: %s", e.Key)
		}
	}
	f := &accWindowFn{bounds: bounds}
	if err := f.setAccumulator(name, arg); err != nil {
		return nil, err
	}
	return f, nil
}

// setAccumulator compiles the function's argument and picks its
// accumulator.
func (f *accWindowFn) setAccumulator(name string, arg any) error {
	var err error
	switch {
	case name == "$first", name == "$last":
		f.endpoint = name
		f.input, err = expr.Compile(arg)
	case name == "$count":
		if d, ok := value.ToDoc(arg); !ok || len(d) != 0 {
			return cmderr.New(cmderr.FailedToParse, "$count only accepts an empty object as input")
		}
		f.input = expr.MustCompile(int32(1))
		f.newAcc = accumulators["$sum"]
	case name == "$covariancePop", name == "$covarianceSamp":
		f.input, err = expr.Compile(arg)
		sample := name == "$covarianceSamp"
		f.newAcc = func() accumulator { return &covarianceAcc{sample: sample} }
	case quantileOps[name]:
		f.input, f.newAcc, err = compileQuantileAcc(name, arg)
	case nAccumulators[name]:
		f.input, f.newAcc, err = compileNAcc(name, arg)
	default:
		f.input, err = expr.Compile(arg)
		f.newAcc = accumulators[name]
		f.sortResult = name == "$addToSet"
	}
	return err
}

// accWindowFn folds the documents of each window with an accumulator. A
// window that only grows to the right (a left-unbounded one) extends the
// previous document's accumulator instead of starting again.
type accWindowFn struct {
	input      *expr.Expr
	bounds     windowBounds
	newAcc     func() accumulator
	endpoint   string // "$first" or "$last": the value at that end of the window
	sortResult bool
}

func (f *accWindowFn) compute(p *partition) ([]any, error) {
	vals, err := p.eval(f.input)
	if err != nil {
		return nil, err
	}
	out := make([]any, len(p.docs))
	var (
		acc          accumulator
		accLo, accHi = -1, -1
		last         any
		lastLo       = -1
		lastHi       = -1
	)
	for i := range p.docs {
		lo, hi, ok, err := p.window(f.bounds, i)
		if err != nil {
			return nil, err
		}
		if f.endpoint != "" {
			v := any(nil)
			if ok {
				v = vals[lo]
				if f.endpoint == "$last" {
					v = vals[hi]
				}
				if expr.IsMissing(v) {
					v = nil
				}
			}
			out[i] = v
			continue
		}
		if !ok {
			out[i] = f.result(f.newAcc())
			continue
		}
		if lo == lastLo && hi == lastHi {
			out[i] = last
			continue
		}
		if acc == nil || lo != accLo || hi < accHi {
			acc, accLo, accHi = f.newAcc(), lo, lo-1
		}
		for j := accHi + 1; j <= hi; j++ {
			if err := acc.add(vals[j]); err != nil {
				return nil, err
			}
		}
		accHi = hi
		last, lastLo, lastHi = f.result(acc), lo, hi
		out[i] = last
	}
	return out, nil
}

func (f *accWindowFn) result(acc accumulator) any {
	r := acc.result()
	if f.sortResult {
		// A window's $addToSet holds its values ordered (mongod keeps them
		// in an ordered multiset); copy, as the accumulator keeps growing.
		a, _ := r.(bson.A)
		s := slices.Clone(a)
		slices.SortStableFunc(s, expr.CompareValues)
		return s
	}
	return r
}

// covarianceAcc is $covariancePop/$covarianceSamp over [x, y] pairs of
// numbers; anything else is ignored.
type covarianceAcc struct {
	sample       bool
	n            float64
	meanX, meanY float64
	c            float64
}

func (a *covarianceAcc) add(v any) error {
	pair, ok := value.ToArray(v)
	if !ok || len(pair) != 2 || !value.IsNumber(pair[0]) || !value.IsNumber(pair[1]) {
		return nil
	}
	x, _ := value.ToFloat(pair[0])
	y, _ := value.ToFloat(pair[1])
	a.n++
	dx := x - a.meanX
	a.meanX += dx / a.n
	a.meanY += (y - a.meanY) / a.n
	a.c += dx * (y - a.meanY)
	return nil
}

func (a *covarianceAcc) result() any {
	if a.sample {
		if a.n < 2 {
			return nil
		}
		return a.c / (a.n - 1)
	}
	if a.n == 0 {
		return nil
	}
	return a.c / a.n
}

// $rank, $denseRank and $documentNumber.

type rankFn struct{ op string }

func compileRankFn(name string, spec bson.D, srt windowSort) (windowFn, error) {
	if len(spec) != 1 {
		return nil, cmderr.New(5371601, "Rank style window functions take no other arguments")
	}
	if d, ok := value.ToDoc(spec[0].Value); !ok || len(d) != 0 {
		return nil, cmderr.New(5371603, "%s must be specified with '{}' as the value", name)
	}
	if !srt.present || srt.fields != 1 {
		return nil, cmderr.New(5371602, "%s must be specified with a top level sortBy expression with exactly one element", name)
	}
	return &rankFn{op: name}, nil
}

func (f *rankFn) compute(p *partition) ([]any, error) {
	out := make([]any, len(p.docs))
	if f.op == "$documentNumber" {
		for i := range out {
			out[i] = intOrLong(int64(i + 1))
		}
		return out, nil
	}
	vals, err := p.sortValues()
	if err != nil {
		return nil, err
	}
	rank := int64(0)
	for i, v := range vals {
		same := i > 0 && ((expr.IsNullish(v) && expr.IsNullish(vals[i-1])) || expr.CompareValues(v, vals[i-1]) == 0)
		if !same {
			if f.op == "$rank" {
				rank = int64(i + 1)
			} else {
				rank++
			}
		}
		out[i] = intOrLong(rank)
	}
	return out, nil
}

func intOrLong(n int64) any {
	if n == int64(int32(n)) {
		return int32(n)
	}
	return n
}

// $shift: the output expression evaluated on the document "by" places away.

type shiftFn struct {
	output *expr.Expr
	by     int
	def    any
}

func compileShiftFn(spec bson.D, srt windowSort) (windowFn, error) {
	var args bson.D
	for _, e := range spec {
		switch {
		case e.Key == "window":
			return nil, cmderr.New(cmderr.FailedToParse, "$shift does not accept a 'window' field")
		case e.Key == "$shift":
			d, ok := value.ToDoc(e.Value)
			if !ok {
				return nil, cmderr.New(cmderr.FailedToParse, "Argument to $shift must be an object")
			}
			args = d
		case windowFnNames[e.Key]:
			return nil, cmderr.New(cmderr.FailedToParse, "Cannot specify multiple functions in window function spec")
		default:
			return nil, cmderr.New(cmderr.FailedToParse, "Window function found an unknown argument: %s", e.Key)
		}
	}
	f := &shiftFn{}
	haveBy := false
	for _, e := range args {
		switch e.Key {
		case "output":
			x, err := expr.Compile(e.Value)
			if err != nil {
				return nil, err
			}
			f.output = x
		case "default":
			x, err := expr.Compile(e.Value)
			if err != nil {
				return nil, err
			}
			c, isConst := x.Constant()
			if !isConst {
				return nil, cmderr.New(cmderr.FailedToParse, "'$shift:default' expression must yield a constant value.")
			}
			f.def = c
		case "by":
			n, ok := value.ToInt64(e.Value)
			if !value.IsNumber(e.Value) || !ok || n != int64(int32(n)) {
				return nil, cmderr.New(cmderr.FailedToParse, "'$shift:by' field must be an integer, but found  by: %s", expr.Render(e.Value))
			}
			f.by, haveBy = int(n), true
		default:
			return nil, cmderr.New(cmderr.FailedToParse, "Unknown argument in $shift")
		}
	}
	if f.output == nil {
		return nil, cmderr.New(cmderr.FailedToParse, "$shift requires an 'output' expression.")
	}
	if !haveBy {
		return nil, cmderr.New(cmderr.FailedToParse, "$shift requires 'by' as an integer value.")
	}
	if !srt.present {
		return nil, cmderr.New(cmderr.FailedToParse, "'$shift' requires a sortBy")
	}
	return f, nil
}

func (f *shiftFn) compute(p *partition) ([]any, error) {
	out := make([]any, len(p.docs))
	for i := range p.docs {
		j := i + f.by
		if j < 0 || j >= len(p.docs) {
			out[i] = f.def
			continue
		}
		v, err := f.output.Eval(p.docs[j], p.rt.vars)
		if err != nil {
			return nil, err
		}
		if expr.IsMissing(v) {
			v = nil
		}
		out[i] = v
	}
	return out, nil
}

// $expMovingAvg, computed in decimal as mongod does and answered as a
// double unless an input was a decimal.

type expMovingAvgFn struct {
	input *expr.Expr
	alpha any // a decimal
}

func compileExpMovingAvg(spec bson.D, srt windowSort) (windowFn, error) {
	var args bson.D
	if len(spec) == 1 && spec[0].Key == "$expMovingAvg" {
		args, _ = value.ToDoc(spec[0].Value)
	}
	if args == nil {
		return nil, cmderr.New(cmderr.FailedToParse, "$expMovingAvg must have exactly one argument that is an object")
	}
	var input, n, alpha any
	haveInput, haveN, haveAlpha := false, false, false
	for _, e := range args {
		switch e.Key {
		case "input":
			input, haveInput = e.Value, true
		case "N":
			n, haveN = e.Value, true
		case "alpha":
			alpha, haveAlpha = e.Value, true
		}
	}
	if len(args) != 2 || !haveInput {
		return nil, cmderr.New(cmderr.FailedToParse, "$expMovingAvg sub object must have exactly two fields: An 'input' field, and either an 'N' field or an 'alpha' field")
	}
	if !srt.present {
		return nil, cmderr.New(cmderr.FailedToParse, "$expMovingAvg requires an explicit 'sortBy'")
	}
	x, err := expr.Compile(input)
	if err != nil {
		return nil, err
	}
	f := &expMovingAvgFn{input: x}
	switch {
	case haveN:
		if !value.IsNumber(n) {
			return nil, cmderr.New(cmderr.FailedToParse, "'N' field must be an integer, but found type %s", value.TypeName(n))
		}
		k, ok := value.ToInt64(n)
		if !ok {
			return nil, cmderr.New(cmderr.FailedToParse, "'N' field must be an integer, but found  N: %s. To use a non-integer, use the 'alpha' argument instead", expr.Render(n))
		}
		if k <= 0 {
			return nil, cmderr.New(cmderr.FailedToParse, "'N' must be greater than zero. Got %d", k)
		}
		a, err := value.Divide(decimalOf(2), decimalOf(k+1))
		if err != nil {
			return nil, err
		}
		f.alpha = a
	case haveAlpha:
		if !value.IsNumber(alpha) {
			return nil, cmderr.New(cmderr.FailedToParse, "'alpha' must be a number")
		}
		if af, _ := value.ToFloat(alpha); !(af > 0 && af < 1) {
			return nil, cmderr.New(cmderr.FailedToParse, "'alpha' must be between 0 and 1 (exclusive), found alpha: %s", expr.Render(alpha))
		}
		a, err := value.Add(alpha, decimalOf(0))
		if err != nil {
			return nil, err
		}
		f.alpha = a
	default:
		return nil, cmderr.New(cmderr.FailedToParse, "Got unrecognized field in $expMovingAvg$expMovingAvg sub object must have exactly two fields: An 'input' field, and either an 'N' field or an 'alpha' field")
	}
	return f, nil
}

func decimalOf(n int64) bson.Decimal128 {
	d, _ := bson.ParseDecimal128(intString(n))
	return d
}

func intString(n int64) string {
	if n == 0 {
		return "0"
	}
	neg := n < 0
	var b []byte
	for n != 0 {
		d := n % 10
		if d < 0 {
			d = -d
		}
		b = append(b, byte('0'+d))
		n /= 10
	}
	if neg {
		b = append(b, '-')
	}
	slices.Reverse(b)
	return string(b)
}

func (f *expMovingAvgFn) compute(p *partition) ([]any, error) {
	vals, err := p.eval(f.input)
	if err != nil {
		return nil, err
	}
	oneMinus, err := value.Add(decimalOf(1), negate(f.alpha))
	if err != nil {
		return nil, err
	}
	out := make([]any, len(vals))
	var cur any
	isDecimal := false
	for i, v := range vals {
		if value.IsNumber(v) {
			if _, ok := v.(bson.Decimal128); ok {
				isDecimal = true
			}
			if cur == nil {
				cur, err = value.Add(v, decimalOf(0))
			} else {
				var a, b any
				if a, err = value.Multiply(v, f.alpha); err == nil {
					if b, err = value.Multiply(cur, oneMinus); err == nil {
						cur, err = value.Add(a, b)
					}
				}
			}
			if err != nil {
				return nil, err
			}
		}
		switch {
		case cur == nil:
			out[i] = nil
		case isDecimal:
			out[i] = cur
		default:
			out[i] = decimalToDouble(cur)
		}
	}
	return out, nil
}

// decimalToDouble rounds a decimal to the nearest double (value.ToFloat
// may be off by an ulp).
func decimalToDouble(v any) float64 {
	if d, ok := v.(bson.Decimal128); ok {
		if f, err := strconv.ParseFloat(d.String(), 64); err == nil {
			return f
		}
	}
	f, _ := value.ToFloat(v)
	return f
}

func negate(d any) any {
	if n, ok := value.NegateDecimal(d); ok {
		return n
	}
	return d
}

// $locf and $linearFill.

type fillFn struct {
	op    string
	input *expr.Expr
}

func compileFillFn(name string, spec bson.D, srt windowSort) (windowFn, error) {
	var arg any
	haveFn, haveWindow := false, false
	for _, e := range spec {
		switch {
		case e.Key == "window":
			haveWindow = true
		case windowFnNames[e.Key]:
			if haveFn {
				return nil, cmderr.New(cmderr.FailedToParse, "Cannot specify two functions in window function spec")
			}
			arg, haveFn = e.Value, true
		default:
			return nil, cmderr.New(cmderr.FailedToParse, "Window function found an unknown argument: %s", e.Key)
		}
	}
	if haveWindow {
		return nil, cmderr.New(cmderr.FailedToParse, "'window' field is not allowed in %s", name)
	}
	if name == "$linearFill" && (!srt.present || srt.fields != 1) {
		return nil, cmderr.New(605001, "$linearFill must be specified with a top level sortBy expression with exactly one element")
	}
	x, err := expr.Compile(arg)
	if err != nil {
		return nil, err
	}
	return &fillFn{op: name, input: x}, nil
}

func (f *fillFn) compute(p *partition) ([]any, error) {
	vals, err := p.eval(f.input)
	if err != nil {
		return nil, err
	}
	if f.op == "$locf" {
		return locf(vals), nil
	}
	xs, err := p.sortValues()
	if err != nil {
		return nil, err
	}
	if err := checkLinearFill(vals, xs); err != nil {
		return nil, err
	}
	out := make([]any, len(vals))
	for i, v := range vals {
		if !expr.IsNullish(v) {
			out[i] = v
			continue
		}
		if out[i], err = linearFillAt(vals, xs, i); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// locf carries the last non-null value forward.
func locf(vals []any) []any {
	out := make([]any, len(vals))
	var last any
	for i, v := range vals {
		if !expr.IsNullish(v) {
			last = v
		}
		out[i] = last
	}
	return out
}

func isDateTime(v any) bool { _, ok := v.(bson.DateTime); return ok }

// checkLinearFill checks $linearFill's inputs: numeric or null values
// against distinct sortBy values, all numbers or all dates.
func checkLinearFill(vals, xs []any) error {
	for i, v := range vals {
		if !value.IsNumber(v) && !expr.IsNullish(v) {
			return cmderr.New(cmderr.TypeMismatch, "Value to be filled must be numeric or nullish, but found %s", value.TypeName(v))
		}
		x := xs[i]
		if !value.IsNumber(x) && !isDateTime(x) {
			return cmderr.New(cmderr.TypeMismatch, "Value of the sortBy field must be numeric or a date, but found %s", typeNameOf(x))
		}
		if i > 0 {
			if expr.CompareValues(x, xs[i-1]) == 0 {
				return cmderr.New(6050106, "There can be no repeated values in the sort field")
			}
			if isDateTime(x) != isDateTime(xs[i-1]) {
				return cmderr.New(cmderr.TypeMismatch, "Conflicting sort value types, previously received type %s, but found %s", value.TypeName(xs[i-1]), value.TypeName(x))
			}
		}
	}
	return nil
}

// linearFillAt interpolates the null value i between its nearest non-null
// neighbours; it stays null without one on each side.
func linearFillAt(vals, xs []any, i int) (any, error) {
	l, r := -1, -1
	for j := i - 1; j >= 0; j-- {
		if !expr.IsNullish(vals[j]) {
			l = j
			break
		}
	}
	for j := i + 1; j < len(vals); j++ {
		if !expr.IsNullish(vals[j]) {
			r = j
			break
		}
	}
	if l < 0 || r < 0 {
		return nil, nil
	}
	// y1 + (x - x1) * ((y2 - y1) / (x2 - x1))
	dy, err := arith("$subtract", vals[r], vals[l])
	if err != nil {
		return nil, err
	}
	dx, err := arith("$subtract", xs[r], xs[l])
	if err != nil {
		return nil, err
	}
	slope, err := arith("$divide", dy, dx)
	if err != nil {
		return nil, err
	}
	off, err := arith("$subtract", xs[i], xs[l])
	if err != nil {
		return nil, err
	}
	prod, err := arith("$multiply", off, slope)
	if err != nil {
		return nil, err
	}
	return arith("$add", vals[l], prod)
}

// arith applies an arithmetic expression operator to two values, with the
// operator's own type rules (dates, decimals, overflow).
func arith(op string, a, b any) (any, error) {
	return arithExprs[op].Eval(nil, map[string]any{"x": a, "y": b})
}

var arithExprs = map[string]*expr.Expr{}

func init() {
	for _, op := range []string{"$add", "$subtract", "$multiply", "$divide"} {
		arithExprs[op] = expr.MustCompile(bson.D{{Key: op, Value: bson.A{"$$x", "$$y"}}})
	}
}

// $derivative and $integral: the input against the single sortBy field,
// in milliseconds scaled to 'unit' when the sortBy field holds dates.

type calculusFn struct {
	op         string
	input      *expr.Expr
	bounds     windowBounds
	unitMillis int64
}

func compileCalculusFn(name string, spec bson.D, srt windowSort) (windowFn, error) {
	if !srt.present {
		return nil, cmderr.New(cmderr.FailedToParse, "%s requires a sortBy", name)
	}
	if srt.fields != 1 {
		return nil, cmderr.New(cmderr.FailedToParse, "%s requires a non-compound sortBy", name)
	}
	f := &calculusFn{op: name, bounds: wholePartition}
	haveWindow := false
	var args any
	for _, e := range spec {
		switch e.Key {
		case "window":
			if haveWindow {
				return nil, cmderr.New(cmderr.FailedToParse, "There can be only one 'window' field for %s", name)
			}
			b, err := parseWindowBounds(e.Value, srt)
			if err != nil {
				return nil, err
			}
			f.bounds, haveWindow = b, true
		case name:
			args = e.Value
		default:
			return nil, cmderr.New(cmderr.FailedToParse, "%s got unexpected argument: %s", name, e.Key)
		}
	}
	d, ok := value.ToDoc(args)
	if !ok {
		return nil, cmderr.New(cmderr.FailedToParse, "%s expects an object, but got a %s: %s", name, value.TypeName(args), expr.Render(args))
	}
	var input any
	haveInput := false
	for _, e := range d {
		switch e.Key {
		case "input":
			input, haveInput = e.Value, true
		case "unit":
			u, ok := e.Value.(string)
			if !ok {
				return nil, cmderr.New(cmderr.FailedToParse, "unit' must be a string, but got %s", value.TypeName(e.Value))
			}
			if !expr.IsTimeUnit(u) {
				return nil, cmderr.New(cmderr.FailedToParse, "unknown time unit value: %s", u)
			}
			if f.unitMillis = expr.TimeUnitMillis(u); f.unitMillis == 0 {
				return nil, cmderr.New(5490710, "unit must be 'week' or smaller")
			}
		default:
			return nil, cmderr.New(cmderr.FailedToParse, "%s got unexpected argument: %s", name, e.Key)
		}
	}
	if !haveInput {
		return nil, cmderr.New(cmderr.FailedToParse, "%s requires an 'input' expression", name)
	}
	if name == "$derivative" && !haveWindow {
		return nil, cmderr.New(cmderr.FailedToParse, "$derivative requires explicit window bounds")
	}
	x, err := expr.Compile(input)
	if err != nil {
		return nil, err
	}
	f.input = x
	return f, nil
}

func (f *calculusFn) compute(p *partition) ([]any, error) {
	ys, err := p.eval(f.input)
	if err != nil {
		return nil, err
	}
	xs, err := p.sortValues()
	if err != nil {
		return nil, err
	}
	out := make([]any, len(ys))
	for i := range ys {
		lo, hi, ok, err := p.window(f.bounds, i)
		if err != nil {
			return nil, err
		}
		if f.op == "$derivative" {
			if !ok {
				out[i] = nil
				continue
			}
			if out[i], err = f.derivative(xs[lo], xs[hi], ys[lo], ys[hi]); err != nil {
				return nil, err
			}
			continue
		}
		// $integral: the trapezoidal rule over the window's points.
		total := 0.0
		points := 0
		if ok {
			for j := lo; j <= hi; j++ {
				if !value.IsNumber(ys[j]) || !(value.IsNumber(xs[j]) || isDateTime(xs[j])) {
					return nil, cmderr.New(5423900, "The input value of $integral window function must be a vector of 2 value, the first value must be numeric or date type and the second must be numeric.")
				}
				if f.unitMillis != 0 && !isDateTime(xs[j]) {
					return nil, cmderr.New(5423901, "$integral with 'outputUnit' expects the sortBy field to be a Date")
				}
				if f.unitMillis == 0 && !value.IsNumber(xs[j]) {
					return nil, cmderr.New(5423902, "$integral (with no 'outputUnit') expects the sortBy field to be numeric")
				}
				if j > lo {
					x0, x1 := axis(xs[j-1]), axis(xs[j])
					y0, _ := value.ToFloat(ys[j-1])
					y1, _ := value.ToFloat(ys[j])
					total += (y0 + y1) * (x1 - x0) / 2
				}
				points++
			}
		}
		switch {
		case f.unitMillis != 0:
			out[i] = total / float64(f.unitMillis)
		case points < 2:
			out[i] = int32(0)
		default:
			out[i] = total
		}
	}
	return out, nil
}

// axis is a sortBy value as a number: dates in milliseconds.
func axis(v any) float64 {
	if d, ok := v.(bson.DateTime); ok {
		return float64(d)
	}
	f, _ := value.ToFloat(v)
	return f
}

func (f *calculusFn) derivative(x0, x1, y0, y1 any) (any, error) {
	_, d0 := x0.(bson.DateTime)
	_, d1 := x1.(bson.DateTime)
	if f.unitMillis != 0 {
		if !d0 || !d1 {
			return nil, cmderr.New(5624900, "$derivative with 'unit' expects the sortBy field to be a Date")
		}
	} else {
		if d0 || d1 {
			return nil, cmderr.New(5624901, "$derivative where the sortBy is a Date requires an 'unit'")
		}
		if !value.IsNumber(x0) || !value.IsNumber(x1) {
			return nil, cmderr.New(5624902, "$derivative (with no 'unit') expects the sortBy field to be numeric")
		}
	}
	run, err := arith("$subtract", x1, x0)
	if err != nil {
		return nil, err
	}
	rise, err := arith("$subtract", y1, y0)
	if err != nil {
		return nil, err
	}
	if expr.IsNullish(rise) {
		return nil, cmderr.New(5624903, "$derivative input must not be null or missing")
	}
	if r, _ := value.ToFloat(run); r == 0 {
		return nil, nil
	}
	res, err := arith("$divide", rise, run)
	if err != nil {
		return nil, err
	}
	if f.unitMillis != 0 {
		return arith("$multiply", res, int64(f.unitMillis))
	}
	if fl, ok := res.(float64); ok && math.IsNaN(fl) {
		return fl, nil
	}
	return res, nil
}
