package expr

import "testing"

func TestExtraOperators(t *testing.T) {
	runCases(t, []exprCase{
		{name: "replaceOne", spec: `{"$replaceOne": {"input": "a.b.c", "find": ".", "replacement": "-"}}`, want: `"a-b.c"`},
		{name: "replaceAll", spec: `{"$replaceAll": {"input": "a.b.c", "find": ".", "replacement": "-"}}`, want: `"a-b-c"`},
		{name: "replace null", spec: `{"$replaceAll": {"input": "abc", "find": null, "replacement": "-"}}`, want: `null`},
		{name: "replace non-string", spec: `{"$replaceOne": {"input": 5, "find": "5", "replacement": "-"}}`, code: 51746},
		{name: "replace needs find", spec: `{"$replaceOne": {"input": "a", "replacement": "-"}}`, code: 51748},
		{name: "indexOfBytes multibyte", spec: `{"$indexOfBytes": ["cafétéria", "t"]}`, want: `5`},
		{name: "indexOfCP multibyte", spec: `{"$indexOfCP": ["cafétéria", "t"]}`, want: `4`},
		{name: "indexOfBytes from start", spec: `{"$indexOfBytes": ["abcabc", "b", 2]}`, want: `4`},
		{name: "indexOfBytes not in range", spec: `{"$indexOfBytes": ["abc", "c", 0, 2]}`, want: `-1`},
		{name: "indexOfBytes empty at end", spec: `{"$indexOfBytes": ["abc", "", 3]}`, want: `3`},
		{name: "indexOfCP null", spec: `{"$indexOfCP": [null, "a"]}`, want: `null`},
		{name: "indexOfBytes non-string", spec: `{"$indexOfBytes": [1, "a"]}`, code: 40091},
		{name: "sortArray descending", spec: `{"$sortArray": {"input": [3, 1, 2], "sortBy": -1}}`, want: `[3, 2, 1]`},
		{name: "sortArray by field", spec: `{"$sortArray": {"input": [{"a": 2, "b": 1}, {"a": 1}], "sortBy": {"a": 1}}}`, want: `[{"a": 1}, {"a": 2, "b": 1}]`},
		{name: "sortArray non-array", spec: `{"$sortArray": {"input": "x", "sortBy": 1}}`, code: 2942504},
		{name: "zip shortest", spec: `{"$zip": {"inputs": [[1, 2, 3], ["a", "b"]]}}`, want: `[[1, "a"], [2, "b"]]`},
		{name: "zip longest with defaults", spec: `{"$zip": {"inputs": [[1, 2, 3], ["a", "b"]], "useLongestLength": true, "defaults": [0, "z"]}}`, want: `[[1, "a"], [2, "b"], [3, "z"]]`},
		{name: "zip longest", spec: `{"$zip": {"inputs": [[1, 2, 3], ["a", "b"]], "useLongestLength": true}}`, want: `[[1, "a"], [2, "b"], [3, null]]`},
		{name: "zip null input", spec: `{"$zip": {"inputs": [[1], "$nope"]}}`, want: `null`},
		{name: "zip defaults need longest", spec: `{"$zip": {"inputs": [[1]], "defaults": [0]}}`, code: 34466},
		{name: "firstN", spec: `{"$firstN": {"n": 2, "input": [1, 2, 3]}}`, want: `[1, 2]`},
		{name: "lastN", spec: `{"$lastN": {"n": 2, "input": [1, 2, 3]}}`, want: `[2, 3]`},
		{name: "maxN skips null", spec: `{"$maxN": {"n": 2, "input": [1, null, 3, 2]}}`, want: `[3, 2]`},
		{name: "minN", spec: `{"$minN": {"n": 5, "input": [3, 1, 2]}}`, want: `[1, 2, 3]`},
		{name: "firstN n positive", spec: `{"$firstN": {"n": 0, "input": [1]}}`, code: 5787908},
		{name: "isoWeek", spec: `{"$isoWeek": "$date"}`, want: `10`},
		{name: "isoWeekYear", spec: `{"$isoWeekYear": "$date"}`, want: `2024`},
		{name: "isoDayOfWeek", spec: `{"$isoDayOfWeek": "$date"}`, want: `2`},
		{name: "week", spec: `{"$week": "$date"}`, want: `9`},
		{name: "sin", spec: `{"$sin": 0}`, want: `0.0`},
		{name: "cos", spec: `{"$cos": 0}`, want: `1.0`},
		{name: "acos domain", spec: `{"$acos": 2}`, code: 50989},
		{name: "degreesToRadians", spec: `{"$degreesToRadians": 180}`, want: `3.141592653589793`},
		{name: "atan2", spec: `{"$atan2": [1, 1]}`, want: `0.7853981633974483`},
		{name: "trig null", spec: `{"$tan": null}`, want: `null`},
		{name: "trig non-number", spec: `{"$sin": "x"}`, code: 28765},
	})
}

func TestDateParts(t *testing.T) {
	runCases(t, []exprCase{
		{name: "dateToParts", spec: `{"$dateToParts": {"date": "$date"}}`, want: `{"year": 2024, "month": 3, "day": 5, "hour": 6, "minute": 7, "second": 8, "millisecond": 9}`},
		{name: "dateToParts timezone", spec: `{"$dateToParts": {"date": "$date", "timezone": "+02:00"}}`, want: `{"year": 2024, "month": 3, "day": 5, "hour": 8, "minute": 7, "second": 8, "millisecond": 9}`},
		{name: "dateToParts iso", spec: `{"$dateToParts": {"date": "$date", "iso8601": true}}`, want: `{"isoWeekYear": 2024, "isoWeek": 10, "isoDayOfWeek": 2, "hour": 6, "minute": 7, "second": 8, "millisecond": 9}`},
		{name: "dateToParts null", spec: `{"$dateToParts": {"date": "$n"}}`, want: `null`},
		{name: "dateFromParts carries", spec: `{"$dateFromParts": {"year": 2024, "month": 14, "day": 1}}`, want: `{"$date": "2025-02-01T00:00:00Z"}`},
		{name: "dateFromParts iso", spec: `{"$dateFromParts": {"isoWeekYear": 2024, "isoWeek": 10, "isoDayOfWeek": 2, "hour": 6}}`, want: `{"$date": "2024-03-05T06:00:00Z"}`},
		{name: "dateFromParts timezone", spec: `{"$dateFromParts": {"year": 2024, "timezone": "-05:00"}}`, want: `{"$date": "2024-01-01T05:00:00Z"}`},
		{name: "dateFromParts null part", spec: `{"$dateFromParts": {"year": 2024, "day": "$n"}}`, want: `null`},
		{name: "dateFromParts mixed", spec: `{"$dateFromParts": {"year": 2024, "isoWeek": 2}}`, code: 40489},
		{name: "dateFromParts year range", spec: `{"$dateFromParts": {"year": 0}}`, code: 40523},
		{name: "dateFromParts needs a year", spec: `{"$dateFromParts": {"month": 1}}`, code: 40516},
	})
}

func TestBitwise(t *testing.T) {
	runCases(t, []exprCase{
		{name: "bitAnd", spec: `{"$bitAnd": [12, 10]}`, want: `8`},
		{name: "bitOr long", spec: `{"$bitOr": [12, {"$numberLong": "3"}]}`, want: `{"$numberLong": "15"}`},
		{name: "bitXor", spec: `{"$bitXor": [12, 10]}`, want: `6`},
		{name: "bitAnd empty", spec: `{"$bitAnd": []}`, want: `-1`},
		{name: "bitNot", spec: `{"$bitNot": 5}`, want: `-6`},
		{name: "bit null", spec: `{"$bitAnd": [1, null]}`, want: `null`},
		{name: "bit double", spec: `{"$bitOr": [1, 1.5]}`, code: 14},
		{name: "bitNot string", spec: `{"$bitNot": "a"}`, code: 28765},
	})
}

func TestDateFromString(t *testing.T) {
	runCases(t, []exprCase{
		{name: "iso local", spec: `{"$dateFromString": {"dateString": "2017-02-08T12:10:40.787"}}`, want: `{"$date": "2017-02-08T12:10:40.787Z"}`},
		{name: "iso in a timezone", spec: `{"$dateFromString": {"dateString": "2017-02-08T12:10:40.787", "timezone": "+05:00"}}`, want: `{"$date": "2017-02-08T07:10:40.787Z"}`},
		{name: "iso with offset", spec: `{"$dateFromString": {"dateString": "2017-02-08T12:10:40+02:00"}}`, want: `{"$date": "2017-02-08T10:10:40Z"}`},
		{name: "offset and timezone", spec: `{"$dateFromString": {"dateString": "2017-02-08T12:10:40Z", "timezone": "+01:00"}}`, code: 40554},
		{name: "format", spec: `{"$dateFromString": {"dateString": "15/06/2018", "format": "%d/%m/%Y"}}`, want: `{"$date": "2018-06-15T00:00:00Z"}`},
		{name: "format with zone", spec: `{"$dateFromString": {"dateString": "2018-06-15 10:00:00.5 +0200", "format": "%Y-%m-%d %H:%M:%S.%L %z"}}`, want: `{"$date": "2018-06-15T08:00:00.500Z"}`},
		{name: "format month name", spec: `{"$dateFromString": {"dateString": "Feb 8, 2017", "format": "%b %d, %Y"}}`, want: `{"$date": "2017-02-08T00:00:00Z"}`},
		{name: "unparseable", spec: `{"$dateFromString": {"dateString": "oops"}}`, code: 241},
		{name: "onError", spec: `{"$dateFromString": {"dateString": "oops", "onError": "bad"}}`, want: `"bad"`},
		{name: "onNull", spec: `{"$dateFromString": {"dateString": "$n", "onNull": 0}}`, want: `0`},
		{name: "bad format character", spec: `{"$dateFromString": {"dateString": "x", "format": "%Q"}}`, code: 18536},
	})
}

func TestSmallOperators(t *testing.T) {
	runCases(t, []exprCase{
		{name: "stdDevPop of an array", spec: `{"$stdDevPop": [[2, 4, 4, 4, 5, 5, 7, 9]]}`, want: `2.0`},
		{name: "stdDevSamp of arguments", spec: `{"$stdDevSamp": [1, 3, "x"]}`, want: `1.4142135623730951`},
		{name: "stdDevSamp of one", spec: `{"$stdDevSamp": [[1]]}`, want: `null`},
		{name: "bsonSize", spec: `{"$bsonSize": {"$literal": {"a": 1}}}`, want: `12`},
		{name: "bsonSize of a string", spec: `{"$bsonSize": "x"}`, code: 31393},
		{name: "binarySize", spec: `{"$binarySize": "héllo"}`, want: `6`},
		{name: "tsSecond", spec: `{"$tsSecond": {"$literal": {"$timestamp": {"t": 1700000000, "i": 3}}}}`, want: `{"$numberLong": "1700000000"}`},
		{name: "tsIncrement", spec: `{"$tsIncrement": {"$literal": {"$timestamp": {"t": 1700000000, "i": 3}}}}`, want: `{"$numberLong": "3"}`},
		{name: "tsSecond of a date", spec: `{"$tsSecond": "$date"}`, code: 5687301},
	})
}
