package query

import (
	"testing"
)

func TestExprFilter(t *testing.T) {
	runMatchCases(t, []matchCase{
		{`{"$expr": {"$gt": ["$a", "$b"]}}`, `{"a": 5, "b": 3}`, true},
		{`{"$expr": {"$gt": ["$a", "$b"]}}`, `{"a": 1, "b": 3}`, false},
		{`{"$expr": {"$eq": ["$a.b", 2]}, "c": 1}`, `{"a": {"b": 2}, "c": 1}`, true},
		{`{"$expr": {"$eq": ["$a.b", 2]}, "c": 1}`, `{"a": {"b": 2}, "c": 2}`, false},
		{`{"$or": [{"$expr": false}, {"x": 1}]}`, `{"x": 1}`, true},
		{`{"$expr": "$flag"}`, `{"flag": 0}`, false},
		{`{"$expr": "$flag"}`, `{"flag": "yes"}`, true},
		{`{"$expr": "$flag"}`, `{}`, false},
	})
}

func TestExprFilterErrors(t *testing.T) {
	if _, err := CompileFilter(doc(t, `{"$expr": {"$noSuchOp": 1}}`)); err == nil {
		t.Error("unknown expression operator should not compile")
	}
	f, err := CompileFilter(doc(t, `{"$expr": {"$eq": [{"$divide": [1, "$z"]}, 1]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := f.MatchErr(doc(t, `{"z": 0}`)); ok || err == nil {
		t.Errorf("divide by zero: got %v, %v; want an error", ok, err)
	}
	if ok, err := f.MatchErr(doc(t, `{"z": 1}`)); !ok || err != nil {
		t.Errorf("got %v, %v; want match", ok, err)
	}
}

func TestProjectionExpressions(t *testing.T) {
	src := `{"_id": 1, "a": 2, "b": {"c": 3}, "tags": ["x", "y"]}`
	cases := []struct{ spec, want string }{
		{`{"sum": {"$add": ["$a", "$b.c"]}}`, `{"_id": 1, "sum": 5}`},
		{`{"a": 1, "n": {"$size": "$tags"}, "_id": 0}`, `{"a": 2, "n": 2}`},
		{`{"lit": "hello", "_id": 0}`, `{"lit": "hello"}`},
		{`{"copy": "$b.c", "_id": 0}`, `{"copy": 3}`},
		{`{"gone": "$nope", "_id": 0}`, `{}`},
		{`{"b.d": {"$multiply": ["$a", 10]}, "_id": 0}`, `{"b": {"d": 20}}`},
		{`{"b.c": 1, "b.d": "$a", "_id": 0}`, `{"b": {"c": 3, "d": 2}}`},
	}
	for _, c := range cases {
		p, err := CompileProjection(doc(t, c.spec))
		if err != nil {
			t.Errorf("%s: %v", c.spec, err)
			continue
		}
		got, err := p.Project(doc(t, src), -1)
		if err != nil {
			t.Errorf("%s: %v", c.spec, err)
			continue
		}
		if !docEqual(got, doc(t, c.want)) {
			t.Errorf("%s: got %v, want %s", c.spec, got, c.want)
		}
	}
	if _, err := CompileProjection(doc(t, `{"a": 0, "x": {"$add": [1, 2]}}`)); err == nil {
		t.Error("expression in an exclusion projection should fail")
	}
}
