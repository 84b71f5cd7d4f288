package query

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// fuzzDocs are matched, sorted and projected with whatever compiles.
var fuzzDocs = []string{
	`{"_id": 1, "a": 1, "b": "x", "c": [1, 2, {"d": null}], "e": {"f": [{"g": 1.5}, [3]]}}`,
	`{"_id": 2, "a": [], "b": {"$regularExpression": {"pattern": "x", "options": "i"}}, "c": null}`,
	`{"_id": 3, "a": {"$numberLong": "9223372036854775807"}, "c": [[[]]], "n": {"$numberDecimal": "NaN"}}`,
	`{}`,
}

func FuzzCompileFilter(f *testing.F) {
	seeds := []string{
		`{"a": 1}`, `{"a.b": {"$gt": 1}}`, `{"$or": [{"a": null}, {"c.0": {"$exists": true}}]}`,
		`{"c": {"$elemMatch": {"d": {"$type": "null"}}}}`, `{"a": {"$mod": [-1, 0]}}`,
		`{"b": {"$regex": "^X", "$options": "im"}}`, `{"c": {"$all": [1, 2]}, "a": {"$size": 0}}`,
		`{"$expr": {"$gt": ["$a", 0]}}`, `{"a": {"$not": {"$in": [1, {"$regularExpression": {"pattern": "a", "options": ""}}]}}}`,
		`{"e.f.g": {"$gte": 1}, "e.f.0.g": {"$lt": 2}}`, `{"$nor": [{"a": {"$type": ["number", "array"]}}]}`,
		`{"$jsonSchema": {"required": ["a"], "properties": {"c": {"bsonType": "array", "items": {"bsonType": "int"}, "uniqueItems": true}}}}`,
		`{"$jsonSchema": {"additionalProperties": false, "patternProperties": {"^e": {"minProperties": 2}}, "dependencies": {"a": ["z"]}}}`,
		`{"$jsonSchema": {"oneOf": [{"properties": {"b": {"enum": ["x"]}}}, {"not": {"required": ["_id"]}}]}}`,
		`{"e": {"$geoWithin": {"$centerSphere": [[0, 0], 1]}}, "c": {"$geoIntersects": {"$geometry": {"type": "Point", "coordinates": [1, 2]}}}}`,
		`{"a": {"$geoWithin": {"$box": [[0, 0], [2, 2]]}}}`,
		`{"c": {"$near": {"$geometry": {"type": "Point", "coordinates": [0, 0]}, "$maxDistance": 5}}}`,
	}
	for _, s := range seeds {
		var d bson.D
		if err := bson.UnmarshalExtJSON([]byte(s), false, &d); err != nil {
			f.Fatal(err)
		}
		raw, err := bson.Marshal(d)
		if err != nil {
			f.Fatal(err)
		}
		f.Add([]byte(raw))
	}
	docs := make([]bson.D, len(fuzzDocs))
	for i, s := range fuzzDocs {
		docs[i] = doc(f, s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var filter bson.D
		if err := bson.Unmarshal(data, &filter); err != nil {
			return
		}
		if flt, err := CompileFilter(filter); err == nil {
			for _, d := range docs {
				ok := flt.Match(d)
				ok2, pos := flt.MatchPosition(d)
				if ok != ok2 || (!ok && pos != -1) {
					t.Fatalf("Match %v vs MatchPosition %v %d", ok, ok2, pos)
				}
				if ok, _ := flt.MatchErr(d); !ok {
					_ = FailureDetails(filter, d) // a validator's errInfo
				}
			}
		}
		if flt, err := CompileFilterWith(filter, Options{AllowNear: true}); err == nil && flt.Near() != nil {
			for _, d := range docs {
				_, _ = flt.Near().Distance(d)
			}
		}
		_, _ = UpsertSeed(filter)
		if s, err := CompileSort(filter); err == nil {
			cp := append([]bson.D(nil), docs...)
			s.SortDocs(cp)
		}
		if p, err := CompileProjection(filter); err == nil {
			for _, d := range docs {
				_, _ = p.Project(d, 0)
				_, _ = p.Project(d, -1)
			}
		}
	})
}
