package spectest

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func ej(t *testing.T, s string) bson.RawValue {
	t.Helper()
	var d bson.Raw
	if err := bson.UnmarshalExtJSON([]byte(`{"v": `+s+`}`), false, &d); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return d.Lookup("v")
}

func TestMatchRules(t *testing.T) {
	m := &matcher{entities: newEntityMap()}
	_ = m.entities.add("saved", ej(t, `{"a": 1}`))
	cases := []struct {
		name, expected, actual string
		ok                     bool
	}{
		{"root allows extra keys", `{"x": 1}`, `{"x": 1, "y": 2}`, true},
		{"missing key", `{"x": 1, "y": 1}`, `{"x": 1}`, false},
		{"nested must be exact", `{"x": {"y": 1}}`, `{"x": {"y": 1, "z": 1}}`, false},
		{"key order does not matter", `{"x": 1, "y": 1}`, `{"y": 1, "x": 1}`, true},
		{"int matches double", `{"ok": 1}`, `{"ok": 1.0}`, true},
		{"int does not match 1.5", `{"ok": 1}`, `{"ok": 1.5}`, false},
		{"long matches int", `{"n": {"$numberLong": "3"}}`, `{"n": 3}`, true},
		{"string is not a number", `{"n": 1}`, `{"n": "1"}`, false},
		{"arrays need the same length", `{"a": [1, 2]}`, `{"a": [1, 2, 3]}`, false},
		{"array elements are nested", `{"a": [{"x": 1}]}`, `{"a": [{"x": 1, "y": 2}]}`, false},
		{"$$exists true", `{"x": {"$$exists": true}}`, `{"x": null}`, true},
		{"$$exists false", `{"x": {"$$exists": false}}`, `{"x": 1}`, false},
		{"$$exists false absent", `{"x": {"$$exists": false}}`, `{}`, true},
		{"$$unsetOrMatches absent", `{"x": {"$$unsetOrMatches": 1}}`, `{}`, true},
		{"$$unsetOrMatches differs", `{"x": {"$$unsetOrMatches": 1}}`, `{"x": 2}`, false},
		{"$$type one", `{"x": {"$$type": "string"}}`, `{"x": "s"}`, true},
		{"$$type list", `{"x": {"$$type": ["int", "long"]}}`, `{"x": {"$numberLong": "1"}}`, true},
		{"$$type wrong", `{"x": {"$$type": "int"}}`, `{"x": 1.5}`, false},
		{"$$type absent", `{"x": {"$$type": "int"}}`, `{}`, false},
		{"$$lte", `{"x": {"$$lte": 5}}`, `{"x": 5.0}`, true},
		{"$$lte over", `{"x": {"$$lte": 5}}`, `{"x": 6}`, false},
		{"$$matchesEntity", `{"x": {"$$matchesEntity": "saved"}}`, `{"x": {"a": 1}}`, true},
		{"$$matchesHexBytes", `{"x": {"$$matchesHexBytes": "0aff"}}`, `{"x": {"$binary": {"base64": "Cv8=", "subType": "00"}}}`, true},
		{"whole result unset", `{"$$unsetOrMatches": {"n": 1}}`, ``, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var actual bson.RawValue
			if c.actual != "" {
				actual = ej(t, c.actual)
			}
			err := m.matchRoot(ej(t, c.expected), actual)
			if (err == nil) != c.ok {
				t.Fatalf("match(%s, %s) = %v, want ok=%v", c.expected, c.actual, err, c.ok)
			}
		})
	}
}

func TestMatchIterableElementsAreRoots(t *testing.T) {
	m := &matcher{entities: newEntityMap()}
	if err := m.matchIterable(ej(t, `[{"x": 1}]`), ej(t, `[{"x": 1, "y": 2}]`)); err != nil {
		t.Fatalf("find results are root documents: %v", err)
	}
	if err := m.matchValue(ej(t, `[{"x": 1}]`), ej(t, `[{"x": 1, "y": 2}]`)); err == nil {
		t.Fatal("distinct results are not root documents")
	}
}

func TestBuildURI(t *testing.T) {
	got, err := buildURI("mongodb://127.0.0.1:1,127.0.0.1:2/?replicaSet=rs0",
		map[string]string{"retryWrites": "false", "appname": "a b"}, "retryWrites=true&heartbeatFrequencyMS=500")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"replicaSet=rs0", "retryWrites=false", "appname=a+b", "heartbeatFrequencyMS=500"} {
		if !strings.Contains(got, want) {
			t.Errorf("%s lacks %s", got, want)
		}
	}
	if strings.Contains(got, "retryWrites=true") {
		t.Errorf("%s: the entity's option must win over the defaults", got)
	}
	direct, err := buildURI("mongodb://127.0.0.1:1,127.0.0.1:2/?replicaSet=rs0", map[string]string{"directConnection": "true"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(direct, "replicaSet") || strings.Contains(direct, "127.0.0.1:2") {
		t.Errorf("%s: directConnection needs one seed and no replicaSet", direct)
	}
}

func TestVersions(t *testing.T) {
	v, err := parseVersion("4.9.0-alpha4-271-g7d5cf02")
	if err != nil || v != [3]int{4, 9, 0} {
		t.Fatalf("parseVersion = %v, %v", v, err)
	}
	if compareVersion([3]int{8, 0, 0}, [3]int{4, 3, 1}) <= 0 || compareVersion([3]int{4, 2, 0}, [3]int{4, 2, 0}) != 0 {
		t.Fatal("compareVersion")
	}
}
