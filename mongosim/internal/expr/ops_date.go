package expr

import (
	"math"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// $dateAdd, $dateSubtract, $dateDiff and $dateTrunc. Units of a day or more
// are calendar units in the given timezone (so a day across a DST change
// is 23 or 25 hours, and Jan 31 plus a month is the last day of February);
// smaller units are fixed durations.

var dateArithOps = map[string]opCompiler{
	"$dateAdd":      compileDateAdd(1),
	"$dateSubtract": compileDateAdd(-1),
	"$dateDiff":     compileDateDiff,
	"$dateTrunc":    compileDateTrunc,
}

var fixedUnits = map[string]time.Duration{
	"hour": time.Hour, "minute": time.Minute, "second": time.Second, "millisecond": time.Millisecond,
}

func unitArg(name string, v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", cmderr.New(5439013, "%s requires 'unit' to be a string, but got %s", name, typeName(v))
	}
	switch s {
	case "year", "quarter", "month", "week", "day", "hour", "minute", "second", "millisecond":
		return s, nil
	}
	return "", cmderr.New(cmderr.FailedToParse, "%s parameter 'unit' value parsing failed :: caused by :: unknown time unit value: %s", name, s)
}

func startOfWeekArg(name string, v any) (time.Weekday, error) {
	if IsNullish(v) {
		return time.Sunday, nil
	}
	s, ok := v.(string)
	if ok {
		for d := time.Sunday; d <= time.Saturday; d++ {
			full := strings.ToLower(d.String())
			if strings.EqualFold(s, full) || strings.EqualFold(s, full[:3]) {
				return d, nil
			}
		}
	}
	return 0, cmderr.New(5439015, "%s parameter 'startOfWeek' value cannot be recognized as a day of a week: %s", name, render(v))
}

// addUnits adds n units to t (in t's location).
func addUnits(t time.Time, unit string, n int64) (time.Time, bool) {
	if d, ok := fixedUnits[unit]; ok {
		if n > math.MaxInt64/int64(d) || n < math.MinInt64/int64(d) {
			return time.Time{}, false
		}
		return t.Add(time.Duration(n) * d), true
	}
	if n > 1e6 || n < -1e6 {
		return time.Time{}, false // far beyond the dates BSON holds
	}
	switch unit {
	case "year":
		return addMonths(t, int(n)*12), true
	case "quarter":
		return addMonths(t, int(n)*3), true
	case "month":
		return addMonths(t, int(n)), true
	case "week":
		return t.AddDate(0, 0, int(n)*7), true
	}
	return t.AddDate(0, 0, int(n)), true // day
}

// addMonths adds months, clamping the day to the end of a shorter month.
func addMonths(t time.Time, n int) time.Time {
	y, m, d := t.Date()
	first := time.Date(y, m+time.Month(n), 1, t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), t.Location())
	last := first.AddDate(0, 1, -1).Day()
	return first.AddDate(0, 0, min(d, last)-1)
}

func compileDateAdd(sign int64) opCompiler {
	return func(name string, args any) (evalFn, error) {
		m, err := namedArgs(name, args, []string{"startDate", "unit", "amount"}, "timezone")
		if err != nil {
			return nil, err
		}
		fns, err := namedFns(m, "startDate", "unit", "amount", "timezone")
		if err != nil {
			return nil, err
		}
		start, unitFn, amount, tz := fns[0], fns[1], fns[2], fns[3]
		return func(s *scope) (any, error) {
			vals, err := evalAll(s, []evalFn{start, unitFn, amount})
			if err != nil {
				return nil, err
			}
			if IsNullish(vals[0]) || IsNullish(vals[1]) || IsNullish(vals[2]) {
				return nil, nil
			}
			t, _, err := dateArg(name, vals[0])
			if err != nil {
				return nil, cmderr.New(5166403, "%s requires startDate to be convertible to a date", name)
			}
			unit, err := unitArg(name, vals[1])
			if err != nil {
				return nil, err
			}
			n, ok := value.ToInt64(vals[2])
			if !ok {
				return nil, cmderr.New(5166405, "%s expects integer amount of time units", name)
			}
			if t, err = inTimezone(s, tz, t); err != nil {
				return nil, err
			}
			r, ok := addUnits(t, unit, sign*n)
			if !ok {
				return nil, cmderr.New(5166406, "%s overflowed", name)
			}
			return bson.NewDateTimeFromTime(r), nil
		}, nil
	}
}

// dayNumber counts days from 1970-01-01 to t's local date.
func dayNumber(t time.Time) int64 {
	y, m, d := t.Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// unitNumber numbers t's unit in a scale where consecutive units differ by
// one, so the difference of two numbers is the boundaries crossed.
func unitNumber(t time.Time, unit string, sow time.Weekday) int64 {
	switch unit {
	case "year":
		return int64(t.Year())
	case "quarter":
		return int64(t.Year())*4 + int64(t.Month()-1)/3
	case "month":
		return int64(t.Year())*12 + int64(t.Month()-1)
	case "week":
		// 1970-01-01 was a Thursday (weekday 4).
		return floorDiv(dayNumber(t)+int64((4-int(sow)+7)%7), 7)
	case "day":
		return dayNumber(t)
	}
	return floorDiv(t.UnixMilli(), fixedUnits[unit].Milliseconds())
}

func compileDateDiff(name string, args any) (evalFn, error) {
	m, err := namedArgs(name, args, []string{"startDate", "endDate", "unit"}, "timezone", "startOfWeek")
	if err != nil {
		return nil, err
	}
	fns, err := namedFns(m, "startDate", "endDate", "unit", "timezone", "startOfWeek")
	if err != nil {
		return nil, err
	}
	return func(s *scope) (any, error) {
		vals, err := evalAll(s, fns)
		if err != nil {
			return nil, err
		}
		if IsNullish(vals[0]) || IsNullish(vals[1]) || IsNullish(vals[2]) {
			return nil, nil
		}
		a, _, err := dateArg(name, vals[0])
		if err != nil {
			return nil, cmderr.New(5166307, "%s requires 'startDate' to be a date, but got %s", name, typeName(vals[0]))
		}
		b, _, err := dateArg(name, vals[1])
		if err != nil {
			return nil, cmderr.New(5166307, "%s requires 'endDate' to be a date, but got %s", name, typeName(vals[1]))
		}
		unit, err := unitArg(name, vals[2])
		if err != nil {
			return nil, err
		}
		sow, err := startOfWeekArg(name, vals[4])
		if err != nil {
			return nil, err
		}
		if a, err = inTimezone(s, fns[3], a); err != nil {
			return nil, err
		}
		if b, err = inTimezone(s, fns[3], b); err != nil {
			return nil, err
		}
		return unitNumber(b, unit, sow) - unitNumber(a, unit, sow), nil
	}, nil
}

// reference is 2000-01-01T00:00:00 in t's location, the origin of
// $dateTrunc's bins (for weeks, the first startOfWeek on or after it).
func reference(loc *time.Location, unit string, sow time.Weekday) time.Time {
	r := time.Date(2000, 1, 1, 0, 0, 0, 0, loc)
	if unit == "week" {
		r = r.AddDate(0, 0, (int(sow)-int(r.Weekday())+7)%7)
	}
	return r
}

func compileDateTrunc(name string, args any) (evalFn, error) {
	m, err := namedArgs(name, args, []string{"date", "unit"}, "binSize", "timezone", "startOfWeek")
	if err != nil {
		return nil, err
	}
	fns, err := namedFns(m, "date", "unit", "binSize", "timezone", "startOfWeek")
	if err != nil {
		return nil, err
	}
	return func(s *scope) (any, error) {
		vals, err := evalAll(s, fns)
		if err != nil {
			return nil, err
		}
		if _, given := m["binSize"]; !given {
			vals[2] = int64(1)
		}
		if IsNullish(vals[0]) || IsNullish(vals[1]) || IsNullish(vals[2]) {
			return nil, nil
		}
		t, _, err := dateArg(name, vals[0])
		if err != nil {
			return nil, cmderr.New(5439012, "%s requires 'date' to be a date, but got %s", name, typeName(vals[0]))
		}
		unit, err := unitArg(name, vals[1])
		if err != nil {
			return nil, err
		}
		bin, ok := value.ToInt64(vals[2])
		if !ok || bin <= 0 {
			return nil, cmderr.New(5439017, "%s requires 'binSize' to be a 64-bit integer greater than 0, but got value '%s' of type %s", name, render(vals[2]), typeName(vals[2]))
		}
		sow, err := startOfWeekArg(name, vals[4])
		if err != nil {
			return nil, err
		}
		if t, err = inTimezone(s, fns[3], t); err != nil {
			return nil, err
		}
		ref := reference(t.Location(), unit, sow)
		if unit == "week" {
			// Weeks are 7 calendar days: count them from the reference.
			n := floorDiv(dayNumber(t)-dayNumber(ref), 7*bin) * 7 * bin
			return bson.NewDateTimeFromTime(ref.AddDate(0, 0, int(n))), nil
		}
		n := unitNumber(t, unit, sow) - unitNumber(ref, unit, sow)
		n = floorDiv(n, bin) * bin
		r, ok := addUnits(ref, unit, n)
		if !ok {
			return nil, cmderr.New(5439018, "%s overflowed", name)
		}
		return bson.NewDateTimeFromTime(r), nil
	}, nil
}
