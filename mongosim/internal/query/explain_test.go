package query

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestFailureDetails checks the errInfo.details shapes mongod's
// doc_validation_error produces for query-operator validators.
func TestFailureDetails(t *testing.T) {
	cases := []struct{ validator, doc, want string }{
		{`{"a": {"$gt": 5}}`, `{"a": 3}`,
			`{"operatorName": "$gt", "specifiedAs": {"a": {"$gt": 5}}, "reason": "comparison failed", "consideredValue": 3}`},
		{`{"a": {"$gt": 5}}`, `{"b": 3}`,
			`{"operatorName": "$gt", "specifiedAs": {"a": {"$gt": 5}}, "reason": "field was missing"}`},
		{`{"a": {"$gt": 5}}`, `{"a": [1, 2]}`,
			`{"operatorName": "$gt", "specifiedAs": {"a": {"$gt": 5}}, "reason": "comparison failed", "consideredValues": [1, 2]}`},
		{`{"a": {"$gt": 1, "$lt": 5}, "b": {"$exists": true}}`, `{"a": 7}`,
			`{"operatorName": "$and", "clausesNotSatisfied": [
				{"index": 1, "details": {"operatorName": "$lt", "specifiedAs": {"a": {"$lt": 5}}, "reason": "comparison failed", "consideredValue": 7}},
				{"index": 2, "details": {"operatorName": "$exists", "specifiedAs": {"b": {"$exists": true}}, "reason": "path does not exist"}}]}`},
		{`{"$nor": [{"a": 1}, {"b": 1}]}`, `{"a": 1, "b": 2}`,
			`{"operatorName": "$nor", "clausesNotSatisfied": [
				{"index": 0, "details": {"operatorName": "$eq", "specifiedAs": {"a": 1}, "reason": "comparison succeeded", "consideredValue": 1}}]}`},
		{`{"$or": [{"a": {"$type": "string"}}, {"a": {"$in": [1, 2]}}]}`, `{"a": 5}`,
			`{"operatorName": "$or", "clausesNotSatisfied": [
				{"index": 0, "details": {"operatorName": "$type", "specifiedAs": {"a": {"$type": "string"}}, "reason": "type did not match", "consideredValue": 5, "consideredType": "int"}},
				{"index": 1, "details": {"operatorName": "$in", "specifiedAs": {"a": {"$in": [1, 2]}}, "reason": "no matching value found in array", "consideredValue": 5}}]}`},
		{`{"a": {"$regex": "^x"}}`, `{"a": 5}`,
			`{"operatorName": "$regex", "specifiedAs": {"a": {"$regex": "^x"}}, "reason": "type did not match", "consideredType": "int", "expectedTypes": ["regex", "string", "symbol"], "consideredValue": 5}`},
		{`{"a": {"$not": {"$gt": 5}}}`, `{"a": 7}`,
			`{"operatorName": "$not", "details": {"operatorName": "$gt", "specifiedAs": {"a": {"$gt": 5}}, "reason": "comparison succeeded", "consideredValue": 7}}`},
		{`{"$expr": {"$eq": ["$a", "$b"]}}`, `{"a": 1, "b": 2}`,
			`{"operatorName": "$expr", "specifiedAs": {"$expr": {"$eq": ["$a", "$b"]}}, "reason": "expression did not match", "expressionResult": false}`},
		{`{"$jsonSchema": {"required": ["x"], "properties": {"y": {"bsonType": "string"}}}}`, `{"y": 1}`,
			`{"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
				{"operatorName": "properties", "propertiesNotSatisfied": [{"propertyName": "y", "details": [
					{"operatorName": "bsonType", "specifiedAs": {"bsonType": "string"}, "reason": "type did not match", "consideredValue": 1, "consideredType": "int"}]}]},
				{"operatorName": "required", "specifiedAs": {"required": ["x"]}, "missingProperties": ["x"]}]}`},
		{`{"$jsonSchema": {"dependencies": {"a": ["b", "c"]}}}`, `{"a": 1, "c": 1}`,
			`{"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
				{"operatorName": "dependencies", "failingDependencies": [{"conditionalProperty": "a", "missingProperties": ["b"]}]}]}`},
	}
	for _, tc := range cases {
		got := FailureDetails(doc(t, tc.validator), doc(t, tc.doc))
		gotJS, err := bson.MarshalExtJSON(got, false, false)
		if err != nil {
			t.Fatal(err)
		}
		wantJS, _ := bson.MarshalExtJSON(doc(t, tc.want), false, false)
		if string(gotJS) != string(wantJS) {
			t.Errorf("validator %s, doc %s:\n got  %s\n want %s", tc.validator, tc.doc, gotJS, wantJS)
		}
	}
}

// TestJSONSchemaKeywords checks which documents each keyword accepts.
func TestJSONSchemaKeywords(t *testing.T) {
	cases := []struct {
		schema, doc string
		valid       bool
	}{
		{`{"bsonType": "object"}`, `{}`, true},
		{`{"properties": {"a": {"bsonType": ["int", "long"]}}}`, `{"a": 1}`, true},
		{`{"properties": {"a": {"bsonType": "number"}}}`, `{"a": 1.5}`, true},
		{`{"properties": {"a": {"type": "number"}}}`, `{"a": "x"}`, false},
		{`{"properties": {"a": {"minimum": 3}}}`, `{"a": "x"}`, true}, // keywords ignore other types
		{`{"properties": {"a": {"minimum": 3, "exclusiveMinimum": true}}}`, `{"a": 3}`, false},
		{`{"properties": {"a": {"maximum": 3}}}`, `{"a": 3}`, true},
		{`{"properties": {"a": {"multipleOf": 3}}}`, `{"a": 7}`, false},
		{`{"properties": {"a": {"enum": [1, "x"]}}}`, `{"a": "x"}`, true},
		{`{"properties": {"a": {"pattern": "^ab"}}}`, `{"a": "abc"}`, true},
		{`{"properties": {"a": {"minLength": 2, "maxLength": 3}}}`, `{"a": "ééé"}`, true},
		{`{"properties": {"a": {"items": {"bsonType": "int"}}}}`, `{"a": [1, 2.5]}`, false},
		{`{"properties": {"a": {"items": [{"bsonType": "int"}], "additionalItems": false}}}`, `{"a": [1, 2]}`, false},
		{`{"properties": {"a": {"minItems": 1, "maxItems": 2, "uniqueItems": true}}}`, `{"a": [1, 1]}`, false},
		{`{"additionalProperties": false, "properties": {"_id": {}}}`, `{"_id": 1}`, true},
		{`{"additionalProperties": {"bsonType": "int"}}`, `{"a": 1, "b": "x"}`, false},
		{`{"patternProperties": {"^n": {"bsonType": "int"}}}`, `{"n1": 1, "n2": "x"}`, false},
		{`{"minProperties": 2}`, `{"a": 1}`, false},
		{`{"anyOf": [{"required": ["a"]}, {"required": ["b"]}]}`, `{"b": 1}`, true},
		{`{"oneOf": [{"required": ["a"]}, {"required": ["b"]}]}`, `{"a": 1, "b": 1}`, false},
		{`{"allOf": [{"required": ["a"]}, {"required": ["b"]}]}`, `{"a": 1}`, false},
		{`{"not": {"required": ["a"]}}`, `{"a": 1}`, false},
		{`{"properties": {"o": {"properties": {"x": {"bsonType": "string"}}}}}`, `{"o": {"x": 1}}`, false},
		{`{"dependencies": {"a": ["b"]}}`, `{"a": 1}`, false},
		{`{"dependencies": {"a": ["b"]}}`, `{"c": 1}`, true},
		{`{"dependencies": {"a": {"required": ["c"]}}}`, `{"a": 1, "c": 2}`, true},
		{`{"dependencies": {"a": {"required": ["c"]}}}`, `{"a": 1}`, false},
	}
	for _, tc := range cases {
		f, err := CompileFilter(doc(t, `{"$jsonSchema": `+tc.schema+`}`))
		if err != nil {
			t.Fatalf("%s: %v", tc.schema, err)
		}
		if got := f.Match(doc(t, tc.doc)); got != tc.valid {
			t.Errorf("schema %s on %s: valid = %v, want %v", tc.schema, tc.doc, got, tc.valid)
		}
	}
	for _, bad := range []string{`{"format": "x"}`, `{"type": "integer"}`, `{"bsonType": "nope"}`, `{"type": "string", "bsonType": "string"}`, `{"required": []}`, `{"foo": 1}`} {
		if _, err := CompileFilter(doc(t, `{"$jsonSchema": `+bad+`}`)); err == nil {
			t.Errorf("schema %s compiled", bad)
		}
	}
}
