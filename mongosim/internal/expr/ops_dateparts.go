package expr

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// $dateToParts and $dateFromParts, in the given timezone (UTC by default).
// Out-of-range parts carry into the next larger unit, as on mongod.

func init() {
	operators["$dateToParts"] = compileDateToParts
	operators["$dateFromParts"] = compileDateFromParts
}

func compileDateToParts(name string, args any) (evalFn, error) {
	d, ok := asDoc(args)
	if !ok {
		return nil, cmderr.New(40524, "$dateToParts only supports an object as its argument")
	}
	m, err := keepNamed(d, func(key string) error { return cmderr.New(40520, "Unrecognized argument to $dateToParts: %s", key) }, "date", "timezone", "iso8601")
	if err != nil {
		return nil, err
	}
	if _, ok := m["date"]; !ok {
		return nil, cmderr.New(40522, "Missing 'date' parameter to $dateToParts")
	}
	fns, err := namedFns(m, "date", "timezone", "iso8601")
	if err != nil {
		return nil, err
	}
	return func(s *scope) (any, error) {
		vals, err := evalAll(s, []evalFn{fns[0], fns[2]})
		if err != nil {
			return nil, err
		}
		iso := false
		if fns[2] != nil && !IsNullish(vals[1]) {
			b, ok := vals[1].(bool)
			if !ok {
				return nil, cmderr.New(40521, "iso8601 must evaluate to a bool, found %s", typeName(vals[1]))
			}
			iso = b
		} else if fns[2] != nil {
			return nil, nil
		}
		t, ok, err := dateArg(name, vals[0])
		if !ok || err != nil {
			return nil, err
		}
		if t, err = inTimezone(s, fns[1], t); err != nil {
			return nil, err
		}
		rest := bson.D{
			{Key: "hour", Value: int32(t.Hour())}, {Key: "minute", Value: int32(t.Minute())},
			{Key: "second", Value: int32(t.Second())}, {Key: "millisecond", Value: int32(t.Nanosecond() / 1e6)},
		}
		if iso {
			y, w := t.ISOWeek()
			return append(bson.D{{Key: "isoWeekYear", Value: int32(y)}, {Key: "isoWeek", Value: int32(w)},
				{Key: "isoDayOfWeek", Value: int32((int(t.Weekday())+6)%7 + 1)}}, rest...), nil
		}
		return append(bson.D{{Key: "year", Value: int32(t.Year())}, {Key: "month", Value: int32(t.Month())},
			{Key: "day", Value: int32(t.Day())}}, rest...), nil
	}, nil
}

var (
	naturalParts = []string{"year", "month", "day", "hour", "minute", "second", "millisecond"}
	isoParts     = []string{"isoWeekYear", "isoWeek", "isoDayOfWeek", "hour", "minute", "second", "millisecond"}
)

func compileDateFromParts(name string, args any) (evalFn, error) {
	m, iso, err := dateFromPartsArgs(args)
	if err != nil {
		return nil, err
	}
	c := dateFromParts{parts: naturalParts, iso: iso}
	if iso {
		c.parts = isoParts
	}
	if c.fns, err = namedFns(m, append(append([]string(nil), c.parts...), "timezone")...); err != nil {
		return nil, err
	}
	return c.eval, nil
}

// dateFromPartsArgs checks the argument names of $dateFromParts and whether
// it names a calendar date (year, month, day) or an ISO week date; a mix of
// the two is an error.
func dateFromPartsArgs(args any) (m map[string]any, iso bool, err error) {
	d, ok := asDoc(args)
	if !ok {
		return nil, false, cmderr.New(40519, "$dateFromParts only supports an object as its argument")
	}
	m = map[string]any{}
	known := map[string]bool{"timezone": true}
	for _, k := range append(append([]string(nil), naturalParts...), isoParts...) {
		known[k] = true
	}
	for _, e := range d {
		if !known[e.Key] {
			return nil, false, cmderr.New(40518, "Unrecognized argument to $dateFromParts: %s", e.Key)
		}
		m[e.Key] = e.Value
	}
	_, natural := m["year"]
	_, iso = m["isoWeekYear"]
	mixed := false
	for _, k := range []string{"year", "month", "day"} {
		if _, ok := m[k]; ok && iso {
			mixed = true
		}
	}
	for _, k := range []string{"isoWeekYear", "isoWeek", "isoDayOfWeek"} {
		if _, ok := m[k]; ok && natural {
			mixed = true
		}
	}
	if mixed {
		return nil, false, cmderr.New(40489, "$dateFromParts does not allow mixing natural dates with ISO dates")
	}
	if !natural && !iso {
		return nil, false, cmderr.New(40516, "$dateFromParts requires either 'year' or 'isoWeekYear' to be present")
	}
	return m, iso, nil
}

// dateFromParts is a compiled $dateFromParts: fns holds one expression per
// name in parts (nil where absent), then the timezone's.
type dateFromParts struct {
	parts []string // naturalParts or isoParts
	fns   []evalFn
	iso   bool
}

func (c dateFromParts) eval(s *scope) (any, error) {
	n, null, err := c.ints(s)
	if err != nil || null {
		return nil, err
	}
	var zone any
	if tz := c.fns[len(c.parts)]; tz != nil {
		v, err := tz(s)
		if err != nil {
			return nil, err
		}
		zone = v
	}
	loc, err := location(zone)
	if err != nil {
		return nil, err
	}
	var t time.Time
	if c.iso {
		// ISO week 1 is the week (from Monday) holding January 4th.
		jan4 := time.Date(n[0], 1, 4, 0, 0, 0, 0, loc)
		monday := jan4.AddDate(0, 0, -((int(jan4.Weekday()) + 6) % 7))
		t = time.Date(monday.Year(), monday.Month(), monday.Day()+(n[1]-1)*7+n[2]-1, n[3], n[4], n[5], n[6]*1e6, loc)
	} else {
		t = time.Date(n[0], time.Month(n[1]), n[2], n[3], n[4], n[5], n[6]*1e6, loc)
	}
	return bson.NewDateTimeFromTime(t), nil
}

// ints evaluates the parts to integers, defaulting absent ones; null is
// true when a part is null or missing, which makes the result null.
func (c dateFromParts) ints(s *scope) (n []int, null bool, err error) {
	n = make([]int, len(c.parts))
	for i, p := range c.parts {
		def := 0
		if i > 0 && i < 3 {
			def = 1 // month, day, isoWeek, isoDayOfWeek
		}
		n[i] = def
		if c.fns[i] == nil {
			continue
		}
		v, err := c.fns[i](s)
		if err != nil {
			return nil, false, err
		}
		if IsNullish(v) {
			return nil, true, nil
		}
		k, ok := value.ToInt64(v)
		if !value.IsNumber(v) || !ok {
			return nil, false, cmderr.New(40515, "'%s' must evaluate to an integer, found %s with value %s", p, typeName(v), render(v))
		}
		if i == 0 {
			if k < 1 || k > 9999 {
				code := int32(40523)
				if c.iso {
					code = 31095
				}
				return nil, false, cmderr.New(code, "'%s' must evaluate to an integer in the range 1 to 9999, found %d", p, k)
			}
		} else if k < -32768 || k > 32767 {
			return nil, false, cmderr.New(31034, "'%s' must evaluate to a value in the range [-32768, 32767]; value %d is not in range", p, k)
		}
		n[i] = int(k)
	}
	return n, false, nil
}
