package expr

import (
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// $dateFromString: {dateString, format, timezone, onError, onNull}. With a
// format, the specifiers %Y %m %d %H %M %S %L %j %z %Z %b %B %% are parsed;
// without one, ISO 8601 forms are accepted (mongod's parser is more lenient
// still). A string with its own offset cannot also take 'timezone'.

func init() { operators["$dateFromString"] = compileDateFromString }

func compileDateFromString(name string, args any) (evalFn, error) {
	d, ok := asDoc(args)
	if !ok {
		return nil, cmderr.New(40540, "$dateFromString only supports an object as an argument, found: %s", typeName(args))
	}
	m, err := keepNamed(d, func(key string) error { return cmderr.New(40541, "Unrecognized argument to $dateFromString: %s", key) }, "dateString", "format", "timezone", "onError", "onNull")
	if err != nil {
		return nil, err
	}
	if _, ok := m["dateString"]; !ok {
		return nil, cmderr.New(40542, "Missing 'dateString' parameter to $dateFromString")
	}
	if f, ok := m["format"].(string); ok {
		if err := checkDateFormat(f); err != nil {
			return nil, err
		}
	}
	fns, err := namedFns(m, "dateString", "format", "timezone", "onError", "onNull")
	if err != nil {
		return nil, err
	}
	return func(s *scope) (any, error) {
		v, err := fns[0](s)
		if err != nil {
			return nil, err
		}
		if IsNullish(v) {
			if fns[4] != nil {
				return fns[4](s)
			}
			return nil, nil
		}
		vals, err := evalAll(s, []evalFn{fns[1], fns[2]})
		if err != nil {
			return nil, err
		}
		format := ""
		if fns[1] != nil {
			if IsNullish(vals[0]) {
				return nil, nil
			}
			f, ok := vals[0].(string)
			if !ok {
				return nil, cmderr.New(40684, "$dateFromString requires that 'format' be a string, found: %s with value %s", typeName(vals[0]), render(vals[0]))
			}
			if err := checkDateFormat(f); err != nil {
				return nil, err
			}
			format = f
		}
		var loc *time.Location
		if fns[2] != nil {
			if IsNullish(vals[1]) {
				return nil, nil
			}
			if loc, err = location(vals[1]); err != nil {
				return nil, err
			}
		}
		t, perr := parseDateString(v, format, loc)
		if perr != nil {
			if fns[3] != nil {
				return fns[3](s)
			}
			return nil, perr
		}
		return bson.NewDateTimeFromTime(t), nil
	}, nil
}

func checkDateFormat(f string) error {
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			continue
		}
		if i+1 >= len(f) {
			return cmderr.New(18535, "Unmatched '%%' at end of format string")
		}
		i++
		if !strings.ContainsRune("YmdHMSLjzZbB%", rune(f[i])) {
			if strings.ContainsRune("GVuUwa", rune(f[i])) {
				return cmderr.Unsupported("$dateFromString format specifier %" + string(f[i]))
			}
			return cmderr.New(18536, "Invalid format character '%%%c' in format string", f[i])
		}
	}
	return nil
}

func parseDateString(v any, format string, loc *time.Location) (time.Time, error) {
	str, ok := v.(string)
	if !ok {
		return time.Time{}, convFail("$dateFromString requires that 'dateString' be a string, found: %s with value %s", typeName(v), render(v))
	}
	fail := func(why string) (time.Time, error) {
		return time.Time{}, convFail("Error parsing date string '%s'; %s", str, why)
	}
	var t time.Time
	hasZone := false
	if format == "" {
		ok := false
		for _, layout := range []struct {
			l    string
			zone bool
		}{
			{"2006-01-02T15:04:05.999999999Z07:00", true}, {"2006-01-02T15:04:05.999999999Z0700", true},
			{"2006-01-02T15:04Z07:00", true}, {"2006-01-02T15:04:05.999999999", false}, {"2006-01-02 15:04:05.999999999", false},
			{"2006-01-02T15:04", false}, {"2006-01-02 15:04", false}, {"2006-01-02", false}, {"2006/01/02", false},
			{"2006-01-02 15:04:05.999999999Z07:00", true},
		} {
			if p, err := time.Parse(layout.l, str); err == nil {
				t, hasZone, ok = p, layout.zone, true
				break
			}
		}
		if !ok {
			return fail("the string is not an ISO 8601 date")
		}
	} else {
		p, zone, err := parseWithFormat(str, format)
		if err != "" {
			return fail(err)
		}
		t, hasZone = p, zone
	}
	if hasZone {
		if loc != nil {
			return time.Time{}, cmderr.New(40554, "you cannot pass in a date/time string with time zone information ('%s') together with a timezone argument", str)
		}
		return t.UTC(), nil
	}
	if loc == nil {
		loc = time.UTC
	}
	y, mo, d := t.Date()
	return time.Date(y, mo, d, t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), loc).UTC(), nil
}

// parseWithFormat parses s by a mongod format; the error is a reason.
func parseWithFormat(s, format string) (time.Time, bool, string) {
	year, month, day, hour, minute, sec, ms, yday := 1970, 1, 1, 0, 0, 0, 0, 0
	offset, hasZone := 0, false
	pos := 0
	digits := func(minN, maxN int) (int, bool) {
		n, i := 0, 0
		for i < maxN && pos+i < len(s) && s[pos+i] >= '0' && s[pos+i] <= '9' {
			n = n*10 + int(s[pos+i]-'0')
			i++
		}
		if i < minN {
			return 0, false
		}
		pos += i
		return n, true
	}
	months := []string{"january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"}
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' {
			if pos >= len(s) || s[pos] != c {
				return time.Time{}, false, "the string does not match the format"
			}
			pos++
			continue
		}
		i++
		var ok bool
		switch format[i] {
		case 'Y':
			year, ok = digits(4, 4)
		case 'm':
			month, ok = digits(1, 2)
		case 'd':
			day, ok = digits(1, 2)
		case 'H':
			hour, ok = digits(1, 2)
		case 'M':
			minute, ok = digits(1, 2)
		case 'S':
			sec, ok = digits(1, 2)
		case 'L':
			start := pos
			ms, ok = digits(1, 3)
			for n := pos - start; ok && n < 3; n++ {
				ms *= 10
			}
		case 'j':
			yday, ok = digits(1, 3)
		case '%':
			ok = pos < len(s) && s[pos] == '%'
			pos++
		case 'b', 'B':
			rest := strings.ToLower(s[pos:])
			for k, name := range months {
				if format[i] == 'B' && strings.HasPrefix(rest, name) {
					month, ok = k+1, true
					pos += len(name)
					break
				}
				if format[i] == 'b' && strings.HasPrefix(rest, name[:3]) {
					month, ok = k+1, true
					pos += 3
					break
				}
			}
		case 'z', 'Z':
			if pos >= len(s) || (s[pos] != '+' && s[pos] != '-') {
				break
			}
			sign := 1
			if s[pos] == '-' {
				sign = -1
			}
			pos++
			if format[i] == 'Z' {
				var mins int
				if mins, ok = digits(1, 4); ok {
					offset = sign * mins * 60
				}
			} else {
				var hh, mm int
				if hh, ok = digits(2, 2); ok {
					if pos < len(s) && s[pos] == ':' {
						pos++
					}
					if mm, ok = digits(2, 2); ok {
						offset = sign * (hh*3600 + mm*60)
					}
				}
			}
			hasZone = ok
		}
		if !ok {
			return time.Time{}, false, "the string does not match the format"
		}
	}
	if pos != len(s) {
		return time.Time{}, false, "trailing data after the format"
	}
	if month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false, "a date part is out of range"
	}
	loc := time.UTC
	if hasZone {
		loc = time.FixedZone("", offset)
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, ms*1e6, loc)
	if yday > 0 {
		t = time.Date(year, 1, yday, hour, minute, sec, ms*1e6, loc)
	}
	if t.Day() != day && yday == 0 {
		return time.Time{}, false, "the day does not exist in that month"
	}
	return t, hasZone, ""
}
