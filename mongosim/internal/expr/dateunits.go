package expr

import "time"

// Time units for the stages outside this package that step through dates
// ($densify, $setWindowFields range windows): the same calendar rules as
// $dateAdd, in UTC.

// IsTimeUnit reports whether s names a time unit ("year" … "millisecond").
func IsTimeUnit(s string) bool {
	_, err := unitArg("", s)
	return err == nil
}

// AddTimeUnits adds n units to t as $dateAdd does (calendar units clamp the
// day to the end of a shorter month); ok is false past the dates BSON holds.
func AddTimeUnits(t time.Time, unit string, n int64) (time.Time, bool) {
	return addUnits(t, unit, n)
}

// TimeUnitMillis is a unit's length in milliseconds for the fixed units
// "week" and smaller, and 0 for month, quarter and year.
func TimeUnitMillis(unit string) int64 {
	switch unit {
	case "week":
		return 7 * 24 * 3600 * 1000
	case "day":
		return 24 * 3600 * 1000
	}
	if d, ok := fixedUnits[unit]; ok {
		return d.Milliseconds()
	}
	return 0
}
