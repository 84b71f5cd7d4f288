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

// parseWithFormat parses s by a mongod format; the error is a reason. The
// format has passed checkDateFormat, so every '%' has a known specifier.
func parseWithFormat(s, format string) (time.Time, bool, string) {
	p := formatParse{s: s, year: 1970, month: 1, day: 1}
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' {
			if p.pos >= len(s) || s[p.pos] != c {
				return time.Time{}, false, "the string does not match the format"
			}
			p.pos++
			continue
		}
		i++
		if !p.field(format[i]) {
			return time.Time{}, false, "the string does not match the format"
		}
	}
	if p.pos != len(s) {
		return time.Time{}, false, "trailing data after the format"
	}
	return p.date()
}

// formatParse is the state of parseWithFormat: the input, the read position
// and the date parts read so far.
type formatParse struct {
	s   string
	pos int

	year, month, day, hour, minute, sec, ms, yday int

	offset  int // seconds east of UTC, when hasZone
	hasZone bool
}

var monthNames = []string{"january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"}

// field reads the part of the input for one format specifier.
func (p *formatParse) field(spec byte) bool {
	var ok bool
	switch spec {
	case 'Y':
		p.year, ok = p.digits(4, 4)
	case 'm':
		p.month, ok = p.digits(1, 2)
	case 'd':
		p.day, ok = p.digits(1, 2)
	case 'H':
		p.hour, ok = p.digits(1, 2)
	case 'M':
		p.minute, ok = p.digits(1, 2)
	case 'S':
		p.sec, ok = p.digits(1, 2)
	case 'L':
		// %L is milliseconds: "5" means 500, as in a decimal fraction.
		start := p.pos
		p.ms, ok = p.digits(1, 3)
		for n := p.pos - start; ok && n < 3; n++ {
			p.ms *= 10
		}
	case 'j':
		p.yday, ok = p.digits(1, 3)
	case '%':
		ok = p.pos < len(p.s) && p.s[p.pos] == '%'
		p.pos++
	case 'b', 'B':
		ok = p.monthName(spec == 'B')
	case 'z', 'Z':
		ok = p.zone(spec == 'Z')
	}
	return ok
}

// digits reads between minN and maxN decimal digits.
func (p *formatParse) digits(minN, maxN int) (int, bool) {
	n, i := 0, 0
	for i < maxN && p.pos+i < len(p.s) && p.s[p.pos+i] >= '0' && p.s[p.pos+i] <= '9' {
		n = n*10 + int(p.s[p.pos+i]-'0')
		i++
	}
	if i < minN {
		return 0, false
	}
	p.pos += i
	return n, true
}

// monthName reads a month's full name (%B) or its first three letters (%b),
// in any case.
func (p *formatParse) monthName(full bool) bool {
	rest := strings.ToLower(p.s[p.pos:])
	for k, name := range monthNames {
		if !full {
			name = name[:3]
		}
		if strings.HasPrefix(rest, name) {
			p.month = k + 1
			p.pos += len(name)
			return true
		}
	}
	return false
}

// zone reads a UTC offset: +/-hh[:]mm for %z, +/-minutes for %Z.
func (p *formatParse) zone(minutes bool) bool {
	if p.pos >= len(p.s) || (p.s[p.pos] != '+' && p.s[p.pos] != '-') {
		return false
	}
	sign := 1
	if p.s[p.pos] == '-' {
		sign = -1
	}
	p.pos++
	ok := false
	if minutes {
		var mins int
		if mins, ok = p.digits(1, 4); ok {
			p.offset = sign * mins * 60
		}
	} else {
		var hh, mm int
		if hh, ok = p.digits(2, 2); ok {
			if p.pos < len(p.s) && p.s[p.pos] == ':' {
				p.pos++
			}
			if mm, ok = p.digits(2, 2); ok {
				p.offset = sign * (hh*3600 + mm*60)
			}
		}
	}
	p.hasZone = ok
	return ok
}

// date checks the parts read and builds the time; %j (day of year) wins
// over month and day.
func (p *formatParse) date() (time.Time, bool, string) {
	if p.month < 1 || p.month > 12 || p.day < 1 || p.day > 31 || p.hour > 23 || p.minute > 59 || p.sec > 59 {
		return time.Time{}, false, "a date part is out of range"
	}
	loc := time.UTC
	if p.hasZone {
		loc = time.FixedZone("", p.offset)
	}
	t := time.Date(p.year, time.Month(p.month), p.day, p.hour, p.minute, p.sec, p.ms*1e6, loc)
	if p.yday > 0 {
		t = time.Date(p.year, 1, p.yday, p.hour, p.minute, p.sec, p.ms*1e6, loc)
	}
	if t.Day() != p.day && p.yday == 0 {
		return time.Time{}, false, "the day does not exist in that month"
	}
	return t, p.hasZone, ""
}
