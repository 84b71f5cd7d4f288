package expr

import (
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// exprSeeds reach every operator family; the fuzzer mutates their encodings.
var exprSeeds = []string{
	`{"$add": ["$a", "$d", {"$size": "$arr"}, "$date"]}`,
	`{"$subtract": ["$big", {"$multiply": ["$l", -1]}]}`,
	`{"$round": [{"$divide": ["$a", 3]}, 2]}`,
	`{"$pow": ["$neg", {"$mod": ["$a", 4]}]}`,
	`{"$slice": [{"$range": [0, 100, 7]}, -3, 2]}`,
	`{"$filter": {"input": "$objs", "as": "o", "cond": {"$isArray": "$$o"}, "limit": 2}}`,
	`{"$map": {"input": "$arr", "in": {"$arrayElemAt": ["$arr", "$$this"]}}}`,
	`{"$reduce": {"input": "$pending", "initialValue": "", "in": {"$concat": ["$$value", "$$this"]}}}`,
	`{"$let": {"vars": {"x": "$sub"}, "in": {"$objectToArray": "$$x"}}}`,
	`{"$switch": {"branches": [{"case": {"$in": [2, "$arr"]}, "then": {"$toUpper": "$s"}}], "default": null}}`,
	`{"$cond": {"if": {"$and": ["$a", {"$not": "$n"}]}, "then": {"$substrCP": ["$s", 1, 2]}, "else": 0}}`,
	`{"$convert": {"input": "$s", "to": "int", "onError": {"$strLenBytes": "$s"}}}`,
	`{"$arrayToObject": [[["k", 1], ["j", {"$setUnion": ["$arr", [9]]}]]]}`,
	`{"$dateToString": {"date": "$date", "format": "%Y-%j %U %V %G", "timezone": "-05:00"}}`,
	`{"$split": [{"$trim": {"input": "$str"}}, "a"]}`,
	`{"$mergeObjects": ["$sub", {"$getField": "sub"}]}`,
	`{"$dateTrunc": {"date": {"$dateAdd": {"startDate": "$date", "unit": "month", "amount": "$n"}}, "unit": "week", "binSize": 2, "startOfWeek": "tue"}}`,
	`{"$dateDiff": {"startDate": "$date", "endDate": {"$dateSubtract": {"startDate": "$date", "unit": "quarter", "amount": 7}}, "unit": "week", "timezone": "+05:45"}}`,
	`{"$divide": [{"$add": ["$n", {"$numberDecimal": "0.1"}, 0.2]}, {"$abs": {"$numberDecimal": "-3"}}]}`,
	`{"$zip": {"inputs": ["$arr", {"$sortArray": {"input": "$objs", "sortBy": {"x": -1}}}], "useLongestLength": true, "defaults": [0, {"$replaceAll": {"input": "$s", "find": "l", "replacement": "LL"}}]}}`,
	`{"$concatArrays": [{"$firstN": {"n": 2, "input": "$arr"}}, {"$maxN": {"n": "$b", "input": "$objs"}}, [{"$indexOfCP": ["$s", "l", 1, 9]}, {"$atan2": ["$d", {"$acos": 0.5}]}, {"$isoWeek": "$date"}]]}`,
	`{"$dateFromString": {"dateString": {"$concat": ["2024-0", {"$toString": "$b"}, "-1", {"$toString": "$a"}, " 10:00:00.5 +0200"]}, "format": "%Y-%m-%d %H:%M:%S.%L %z", "onError": {"$dateToParts": {"date": "$date", "iso8601": true}}}}`,
	`{"$percentile": {"input": ["$a", "$d", {"$bitXor": ["$a", "$b", "$l"]}, {"$dateFromParts": {"isoWeekYear": 2024, "isoWeek": "$a", "hour": "$neg"}}], "p": [0.1, 0.5, 1], "method": "approximate"}}`,
}

func FuzzExpr(f *testing.F) {
	for _, s := range exprSeeds {
		b, err := bson.Marshal(bson.D{{Key: "e", Value: parseVal(f, s)}})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	docs := []bson.D{parseDoc(f, testDoc), {}, parseDoc(f, `{"a": [1, {"a": 2}], "arr": "x", "s": 5}`)}
	f.Fuzz(func(t *testing.T, data []byte) {
		var d bson.D
		if err := bson.Unmarshal(data, &d); err != nil || len(d) == 0 {
			return
		}
		e, err := Compile(d[0].Value)
		if err != nil {
			var ce *cmderr.Error
			if !errors.As(err, &ce) {
				t.Fatalf("Compile error %T: %v", err, err)
			}
			return
		}
		for _, doc := range append(docs, d) {
			if _, err := e.Eval(doc, nil); err != nil {
				var ce *cmderr.Error
				if !errors.As(err, &ce) {
					t.Fatalf("Eval error %T: %v", err, err)
				}
			}
		}
	})
}

func TestExprSeedsCompile(t *testing.T) {
	for _, s := range exprSeeds {
		if _, err := Compile(parseVal(t, s)); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
}
