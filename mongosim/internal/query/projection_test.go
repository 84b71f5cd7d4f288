package query

import (
	"errors"
	"testing"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

func TestProjection(t *testing.T) {
	src := `{"_id": 1, "a": 1, "b": {"c": 2, "d": 3}, "arr": [{"x": 1, "y": 2}, {"x": 3}, 5, [{"x": 4, "y": 5}]], "n": [1, 2, 3, 4, 5]}`
	cases := []struct {
		spec, want string
	}{
		{`{}`, src},
		{`{"a": 1}`, `{"_id": 1, "a": 1}`},
		{`{"a": true}`, `{"_id": 1, "a": 1}`},
		{`{"a": 1, "_id": 0}`, `{"a": 1}`},
		{`{"_id": 0, "a": 1.0}`, `{"a": 1}`},
		{`{"_id": 1}`, `{"_id": 1}`},
		{`{"_id": 0}`, `{"a": 1, "b": {"c": 2, "d": 3}, "arr": [{"x": 1, "y": 2}, {"x": 3}, 5, [{"x": 4, "y": 5}]], "n": [1, 2, 3, 4, 5]}`},
		{`{"a": 0}`, `{"_id": 1, "b": {"c": 2, "d": 3}, "arr": [{"x": 1, "y": 2}, {"x": 3}, 5, [{"x": 4, "y": 5}]], "n": [1, 2, 3, 4, 5]}`},
		{`{"a": false, "_id": 0, "arr": 0, "n": 0}`, `{"b": {"c": 2, "d": 3}}`},
		{`{"b.c": 1}`, `{"_id": 1, "b": {"c": 2}}`},
		{`{"b": {"c": 1}}`, `{"_id": 1, "b": {"c": 2}}`},
		{`{"b.zz": 1}`, `{"_id": 1, "b": {}}`},
		{`{"a.zz": 1}`, `{"_id": 1}`},
		{`{"b.c": 0, "arr": 0, "n": 0}`, `{"_id": 1, "a": 1, "b": {"d": 3}}`},
		// inclusion through arrays drops scalars, exclusion keeps them
		{`{"arr.x": 1, "_id": 0}`, `{"arr": [{"x": 1}, {"x": 3}, [{"x": 4}]]}`},
		{`{"arr.x": 0, "_id": 0, "a": 0, "b": 0, "n": 0}`, `{"arr": [{"y": 2}, {}, 5, [{"y": 5}]]}`},
		// field order follows the document, not the spec
		{`{"n": 1, "a": 1}`, `{"_id": 1, "a": 1, "n": [1, 2, 3, 4, 5]}`},
		// $slice
		{`{"n": {"$slice": 2}, "_id": 0, "a": 0, "b": 0, "arr": 0}`, `{"n": [1, 2]}`},
		{`{"n": {"$slice": 2}}`, `{"_id": 1, "a": 1, "b": {"c": 2, "d": 3}, "arr": [{"x": 1, "y": 2}, {"x": 3}, 5, [{"x": 4, "y": 5}]], "n": [1, 2]}`},
		{`{"n": {"$slice": -2}, "a": 1}`, `{"_id": 1, "a": 1, "n": [4, 5]}`},
		{`{"n": {"$slice": [1, 2]}, "a": 1}`, `{"_id": 1, "a": 1, "n": [2, 3]}`},
		{`{"n": {"$slice": [-2, 5]}, "a": 1}`, `{"_id": 1, "a": 1, "n": [4, 5]}`},
		{`{"n": {"$slice": [10, 5]}, "a": 1}`, `{"_id": 1, "a": 1, "n": []}`},
		{`{"n": {"$slice": [-10, 2]}, "a": 1}`, `{"_id": 1, "a": 1, "n": [1, 2]}`},
		{`{"n": {"$slice": 10}, "a": 1}`, `{"_id": 1, "a": 1, "n": [1, 2, 3, 4, 5]}`},
		// $elemMatch
		{`{"arr": {"$elemMatch": {"x": 3}}}`, `{"_id": 1, "arr": [{"x": 3}]}`},
		{`{"arr": {"$elemMatch": {"x": {"$gte": 1}}}, "a": 1}`, `{"_id": 1, "a": 1, "arr": [{"x": 1, "y": 2}]}`},
		{`{"arr": {"$elemMatch": {"x": 99}}}`, `{"_id": 1}`},
		{`{"n": {"$elemMatch": {"$gt": 3}}}`, `{"_id": 1, "n": [4]}`},
	}
	for _, c := range cases {
		p, err := CompileProjection(doc(t, c.spec))
		if err != nil {
			t.Errorf("%s: %v", c.spec, err)
			continue
		}
		in := doc(t, src)
		got, err := p.Project(in, -1)
		if err != nil {
			t.Errorf("%s: %v", c.spec, err)
			continue
		}
		if !docEqual(got, doc(t, c.want)) {
			t.Errorf("%s: got %v, want %s", c.spec, got, c.want)
		}
		if !docEqual(in, doc(t, src)) {
			t.Errorf("%s: projection modified its input", c.spec)
		}
		if !docEqual(p.Apply(in), got) {
			t.Errorf("%s: Apply differs from Project", c.spec)
		}
	}
}

func TestProjectionPositional(t *testing.T) {
	f, err := CompileFilter(doc(t, `{"grades": {"$gte": 85}}`))
	if err != nil {
		t.Fatal(err)
	}
	d := doc(t, `{"_id": 1, "x": 0, "grades": [80, 85, 90]}`)
	ok, pos := f.MatchPosition(d)
	if !ok || pos != 1 {
		t.Fatalf("MatchPosition = %v %d", ok, pos)
	}
	p, err := CompileProjection(doc(t, `{"grades.$": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	if !p.NeedsPosition() {
		t.Error("NeedsPosition should be true")
	}
	got, err := p.Project(d, pos)
	if err != nil {
		t.Fatal(err)
	}
	if !docEqual(got, doc(t, `{"_id": 1, "grades": [85]}`)) {
		t.Errorf("got %v", got)
	}
	_, err = p.Project(d, -1)
	var ce *cmderr.Error
	if !errors.As(err, &ce) || ce.Code != 51246 {
		t.Errorf("no position: got %v", err)
	}
	if p.Apply(d) != nil {
		t.Error("Apply without a position should fail (nil), not guess")
	}
}

func TestProjectionErrors(t *testing.T) {
	cases := []struct {
		spec string
		code int32
		msg  string
	}{
		{`{"a": 1, "b": 0}`, 31254, "Cannot do exclusion on field b in inclusion projection"},
		{`{"a": 0, "b": 1}`, 31253, "Cannot do inclusion on field b in exclusion projection"},
		{`{"a": 0, "b": {"$elemMatch": {"x": 1}}}`, 31253, "Cannot do inclusion on field b in exclusion projection"},
		{`{"a": 1, "a.b": 1}`, 31250, ""},
		{`{"a.b": 1, "a": 1}`, 31250, ""},
		{`{"a": {}}`, 51270, ""},
		{`{"a.b": {"$elemMatch": {"x": 1}}}`, 31275, "Cannot use $elemMatch projection on a nested field."},
		{`{"a.$": 1, "b.$": 1}`, 31276, ""},
		{`{"a.$.b": 1}`, 31394, ""},
		{`{"a": {"$slice": "x"}}`, 28724, ""},
		{`{"a": {"$slice": [1, 0]}}`, 28724, "$slice limit must be positive"},
		{`{"a": {"$meta": "searchScore"}}`, cmderr.NotImplemented, ""},
		{`{"a": {"$meta": 1}}`, 17308, "Unsupported argument to $meta: int"},
		{`{"$a": 1}`, 16410, ""},
	}
	for _, c := range cases {
		_, err := CompileProjection(doc(t, c.spec))
		var ce *cmderr.Error
		if !errors.As(err, &ce) {
			t.Errorf("%s: want *cmderr.Error, got %v", c.spec, err)
			continue
		}
		if ce.Code != c.code || (c.msg != "" && ce.Message != c.msg) {
			t.Errorf("%s: got %d %q, want %d %q", c.spec, ce.Code, ce.Message, c.code, c.msg)
		}
	}
}
