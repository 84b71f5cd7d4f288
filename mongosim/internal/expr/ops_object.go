package expr

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

var objectOps = map[string]opCompiler{
	"$mergeObjects":  nary(0, -1, opMergeObjects),
	"$objectToArray": nary(1, 1, opObjectToArray),
	"$arrayToObject": nary(1, 1, opArrayToObject),
	"$getField":      compileGetField,
	"$setField":      compileSetField,
	"$unsetField":    compileSetField,
	"$rand":          compileRand,
}

// compileRand compiles {$rand: {}}: a double in [0, 1).
func compileRand(name string, args any) (evalFn, error) {
	if d, ok := asDoc(args); !ok || len(d) != 0 {
		return nil, cmderr.New(10065, "invalid parameter: expected an object ($rand)")
	}
	return func(*scope) (any, error) { return rand.Float64(), nil }, nil
}

// compileSetField compiles $setField {field, input, value} and $unsetField
// {field, input}: a copy of input with the field (taken literally, so it
// may contain '.' or start with '$') set, or removed when value is
// $$REMOVE or the operator is $unsetField.
func compileSetField(name string, args any) (evalFn, error) {
	required := []string{"field", "input", "value"}
	if name == "$unsetField" {
		required = required[:2]
	}
	m, err := namedArgs(name, args, required)
	if err != nil {
		return nil, err
	}
	fe, err := Compile(m["field"])
	if err != nil {
		return nil, err
	}
	var field string
	if lit, ok := fe.Constant(); ok {
		field, ok = lit.(string)
		if !ok {
			return nil, cmderr.New(4161107, "%s requires 'field' to evaluate to type String, but got %s", name, typeName(lit))
		}
	} else if d, isDoc := asDoc(m["field"]); isDoc && len(d) == 1 && d[0].Key == "$literal" {
		if field, ok = d[0].Value.(string); !ok {
			return nil, cmderr.New(4161107, "%s requires 'field' to evaluate to type String, but got %s", name, typeName(d[0].Value))
		}
	} else {
		return nil, cmderr.New(4161106, "%s requires 'field' to evaluate to a constant, but got a non-constant argument", name)
	}
	// $unsetField has no 'value' (namedArgs rejected one), so val is nil
	fns, err := namedFns(m, "input", "value")
	if err != nil {
		return nil, err
	}
	input, val := fns[0], fns[1]
	return func(s *scope) (any, error) {
		in, err := input(s)
		if err != nil {
			return nil, err
		}
		if IsNullish(in) {
			return nil, nil
		}
		d, ok := asDoc(in)
		if !ok {
			return nil, cmderr.New(4161105, "%s requires 'input' to evaluate to type Object", name)
		}
		var v any = Missing
		if val != nil {
			if v, err = val(s); err != nil {
				return nil, err
			}
		}
		out := make(bson.D, 0, len(d)+1)
		found := false
		for _, e := range d {
			if e.Key != field {
				out = append(out, e)
				continue
			}
			found = true
			if !IsMissing(v) {
				out = append(out, bson.E{Key: field, Value: v})
			}
		}
		if !found && !IsMissing(v) {
			out = append(out, bson.E{Key: field, Value: v})
		}
		return out, nil
	}, nil
}

// MergeObjects merges documents left to right, later fields overwriting
// earlier ones in place; null and Missing inputs are skipped.
func MergeObjects(vals []any) (bson.D, error) {
	out := bson.D{}
	for i, v := range vals {
		if IsNullish(v) {
			continue
		}
		d, ok := asDoc(v)
		if !ok {
			return nil, cmderr.New(40400, "$mergeObjects requires object inputs, but input %s is of type %s", render(v), typeName(v))
		}
		_ = i
		for _, e := range d {
			out = value.Set(out, e.Key, e.Value)
		}
	}
	return out, nil
}

func opMergeObjects(name string, vals []any) (any, error) {
	if len(vals) == 1 {
		// one array argument: merge its elements (the accumulator's form)
		if a, ok := value.ToArray(vals[0]); ok {
			return MergeObjects(a)
		}
	}
	return MergeObjects(vals)
}

func opObjectToArray(name string, vals []any) (any, error) {
	if IsNullish(vals[0]) {
		return nil, nil
	}
	d, ok := asDoc(vals[0])
	if !ok {
		return nil, cmderr.New(40390, "$objectToArray requires a document input, found: %s", typeName(vals[0]))
	}
	out := make(bson.A, len(d))
	for i, e := range d {
		out[i] = bson.D{{Key: "k", Value: e.Key}, {Key: "v", Value: e.Value}}
	}
	return out, nil
}

func opArrayToObject(name string, vals []any) (any, error) {
	if IsNullish(vals[0]) {
		return nil, nil
	}
	a, ok := value.ToArray(vals[0])
	if !ok {
		return nil, cmderr.New(40386, "$arrayToObject requires an array input, found: %s", typeName(vals[0]))
	}
	out := bson.D{}
	kvForm := -1 // 0: [k, v] pairs, 1: {k, v} documents; fixed by the first element
	for _, el := range a {
		var k, v any
		if pair, ok := value.ToArray(el); ok {
			if kvForm == 1 {
				return nil, cmderr.New(40391, "$arrayToObject requires a consistent input format. Elements must all be arrays or all be objects. Array was detected, now found: %s", typeName(el))
			}
			kvForm = 0
			if len(pair) != 2 {
				return nil, cmderr.New(40397, "$arrayToObject requires an array of size 2 arrays,found array of size: %d", len(pair))
			}
			k, v = pair[0], pair[1]
		} else if d, ok := asDoc(el); ok {
			if kvForm == 0 {
				return nil, cmderr.New(40391, "$arrayToObject requires a consistent input format. Elements must all be arrays or all be objects. Object was detected, now found: %s", typeName(el))
			}
			kvForm = 1
			if len(d) != 2 {
				return nil, cmderr.New(40392, "$arrayToObject requires an object keys of 'k' and 'v'. Found incorrect number of keys:%d", len(d))
			}
			var hk, hv bool
			for _, e := range d {
				switch e.Key {
				case "k":
					k, hk = e.Value, true
				case "v":
					v, hv = e.Value, true
				}
			}
			if !hk || !hv {
				return nil, cmderr.New(40393, "$arrayToObject requires an object with keys 'k' and 'v'. Missing either or both keys from: %s", render(d))
			}
		} else {
			return nil, cmderr.New(40398, "Unrecognised input type format for $arrayToObject: %s", typeName(el))
		}
		ks, ok := k.(string)
		if !ok {
			return nil, cmderr.New(40394, "$arrayToObject requires a consistent input format. Expected a string as the key, found: %s", typeName(k))
		}
		if strings.ContainsRune(ks, 0) {
			return nil, cmderr.New(4940400, "Key field cannot contain an embedded null byte")
		}
		out = value.Set(out, ks, v)
	}
	return out, nil
}

func compileGetField(name string, args any) (evalFn, error) {
	var fieldSpec, inputSpec any = args, "$$CURRENT"
	if d, ok := asDoc(args); ok && (len(d) == 0 || !strings.HasPrefix(d[0].Key, "$")) {
		m, err := namedArgs(name, d, []string{"field"}, "input")
		if err != nil {
			return nil, err
		}
		fieldSpec = m["field"]
		if in, ok := m["input"]; ok {
			inputSpec = in
		}
	}
	field, ok := fieldSpec.(string)
	if !ok {
		return nil, cmderr.New(5654602, "$getField requires 'field' to evaluate to a constant string, found %s", typeName(fieldSpec))
	}
	input, err := compile(inputSpec)
	if err != nil {
		return nil, err
	}
	return func(s *scope) (any, error) {
		v, err := input(s)
		if err != nil {
			return nil, err
		}
		if IsNullish(v) {
			if IsMissing(v) {
				return Missing, nil
			}
			return nil, nil
		}
		d, ok := asDoc(v)
		if !ok {
			return nil, cmderr.New(3041705, "$getField requires 'input' to evaluate to type Object, but got %s", typeName(v))
		}
		for _, e := range d {
			if e.Key == field {
				return e.Value, nil
			}
		}
		return Missing, nil
	}, nil
}

var dateOps = map[string]opCompiler{
	"$dateToString": compileDateToString,
	"$year":         datePart(func(t time.Time) int { return t.Year() }),
	"$month":        datePart(func(t time.Time) int { return int(t.Month()) }),
	"$dayOfMonth":   datePart(func(t time.Time) int { return t.Day() }),
	"$hour":         datePart(func(t time.Time) int { return t.Hour() }),
	"$minute":       datePart(func(t time.Time) int { return t.Minute() }),
	"$second":       datePart(func(t time.Time) int { return t.Second() }),
	"$millisecond":  datePart(func(t time.Time) int { return t.Nanosecond() / 1e6 }),
	"$dayOfWeek":    datePart(func(t time.Time) int { return int(t.Weekday()) + 1 }),
	"$dayOfYear":    datePart(func(t time.Time) int { return t.YearDay() }),
}

// location resolves a timezone: "UTC", "Z", an offset "+hh:mm"/"+hhmm"/"+hh",
// or an Olson name when the zone database is available.
func location(v any) (*time.Location, error) {
	if IsNullish(v) {
		return time.UTC, nil
	}
	s, ok := v.(string)
	if !ok {
		return nil, cmderr.New(40517, "timezone must evaluate to a string, found %s", typeName(v))
	}
	if s == "UTC" || s == "Z" || s == "GMT" {
		return time.UTC, nil
	}
	if len(s) > 1 && (s[0] == '+' || s[0] == '-') {
		for _, layout := range []string{"-07:00", "-0700", "-07"} {
			if t, err := time.Parse(layout, s); err == nil {
				_, off := t.Zone()
				return time.FixedZone(s, off), nil
			}
		}
	}
	if loc, err := time.LoadLocation(s); err == nil && s != "" && s != "Local" {
		return loc, nil
	}
	return nil, cmderr.New(40485, "unrecognized time zone identifier: \"%s\"", s)
}

// inTimezone returns t in the zone tz evaluates to; a nil tz (no
// 'timezone' given) or a null zone is UTC.
func inTimezone(s *scope, tz evalFn, t time.Time) (time.Time, error) {
	var zone any
	if tz != nil {
		v, err := tz(s)
		if err != nil {
			return time.Time{}, err
		}
		zone = v
	}
	loc, err := location(zone)
	if err != nil {
		return time.Time{}, err
	}
	return t.In(loc), nil
}

func dateArg(name string, v any) (time.Time, bool, error) {
	switch x := v.(type) {
	case bson.DateTime:
		return x.Time().UTC(), true, nil
	case bson.ObjectID:
		return x.Timestamp().UTC(), true, nil
	case bson.Timestamp:
		return time.Unix(int64(x.T), 0).UTC(), true, nil
	}
	if IsNullish(v) {
		return time.Time{}, false, nil
	}
	return time.Time{}, false, cmderr.New(16006, "can't convert from BSON type %s to Date", typeName(v))
}

func datePart(part func(time.Time) int) opCompiler {
	return func(name string, args any) (evalFn, error) {
		dateSpec, tzSpec := args, any(nil)
		if a, ok := value.ToArray(args); ok {
			if len(a) != 1 {
				return nil, cmderr.New(40536, "%s accepts exactly one argument if given an array, but was given %d", name, len(a))
			}
			dateSpec = a[0]
		} else if d, ok := asDoc(args); ok && (len(d) == 0 || !strings.HasPrefix(d[0].Key, "$")) {
			m, err := namedArgs(name, d, []string{"date"}, "timezone")
			if err != nil {
				return nil, err
			}
			dateSpec, tzSpec = m["date"], m["timezone"]
		}
		date, err := compile(dateSpec)
		if err != nil {
			return nil, err
		}
		tz, err := compile(tzSpec)
		if err != nil {
			return nil, err
		}
		return func(s *scope) (any, error) {
			v, err := date(s)
			if err != nil {
				return nil, err
			}
			t, ok, err := dateArg(name, v)
			if !ok || err != nil {
				return nil, err
			}
			if t, err = inTimezone(s, tz, t); err != nil {
				return nil, err
			}
			return int32(part(t)), nil
		}, nil
	}
}

func compileDateToString(name string, args any) (evalFn, error) {
	m, err := namedArgs(name, args, []string{"date"}, "format", "timezone", "onNull")
	if err != nil {
		return nil, err
	}
	fns, err := namedFns(m, "date", "format", "timezone", "onNull")
	if err != nil {
		return nil, err
	}
	date, format, tz, onNull := fns[0], fns[1], fns[2], fns[3]
	if format == nil {
		format = constFn("%Y-%m-%dT%H:%M:%S.%LZ")
	}
	return func(s *scope) (any, error) {
		fv, err := format(s)
		if err != nil {
			return nil, err
		}
		f, ok := fv.(string)
		if !ok {
			if IsNullish(fv) {
				return nil, nil
			}
			return nil, cmderr.New(18533, "$dateToString requires that 'format' be a string, found: %s with value %s", typeName(fv), render(fv))
		}
		v, err := date(s)
		if err != nil {
			return nil, err
		}
		t, ok, err := dateArg(name, v)
		if err != nil {
			return nil, err
		}
		if !ok {
			if onNull != nil {
				return onNull(s)
			}
			return nil, nil
		}
		if t, err = inTimezone(s, tz, t); err != nil {
			return nil, err
		}
		return formatDate(f, t)
	}, nil
}

func formatDate(f string, t time.Time) (string, error) {
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		c := f[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+1 >= len(f) {
			return "", cmderr.New(18535, "Unmatched '%%' at end of format string")
		}
		i++
		switch f[i] {
		case 'Y':
			fmt.Fprintf(&b, "%04d", t.Year())
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case 'L':
			fmt.Fprintf(&b, "%03d", t.Nanosecond()/1e6)
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case 'w':
			fmt.Fprintf(&b, "%d", int(t.Weekday())+1)
		case 'u':
			wd := int(t.Weekday())
			if wd == 0 {
				wd = 7
			}
			fmt.Fprintf(&b, "%d", wd)
		case 'U':
			fmt.Fprintf(&b, "%02d", (t.YearDay()+6-int(t.Weekday()))/7)
		case 'G':
			y, _ := t.ISOWeek()
			fmt.Fprintf(&b, "%04d", y)
		case 'V':
			_, w := t.ISOWeek()
			fmt.Fprintf(&b, "%02d", w)
		case 'z':
			b.WriteString(t.Format("-0700"))
		case 'Z':
			_, off := t.Zone()
			fmt.Fprintf(&b, "%d", off/60)
		case '%':
			b.WriteByte('%')
		default:
			return "", cmderr.New(18536, "Invalid format character '%%%c' in format string", f[i])
		}
	}
	return b.String(), nil
}
