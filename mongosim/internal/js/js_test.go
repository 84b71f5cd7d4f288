package js

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

func mustCompile(t *testing.T, code any) *Function {
	t.Helper()
	f, err := Compile(code)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func code(t *testing.T, err error) int32 {
	t.Helper()
	var ce *cmderr.Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %v is not a command error", err)
	}
	return ce.Code
}

func TestRoundTripKeepsBSONTypes(t *testing.T) {
	oid := bson.NewObjectID()
	dec, _ := bson.ParseDecimal128("1.25")
	doc := bson.D{
		{Key: "i32", Value: int32(7)}, {Key: "i64", Value: int64(1) << 60}, {Key: "f", Value: 1.5},
		{Key: "s", Value: "x"}, {Key: "b", Value: true}, {Key: "n", Value: nil},
		{Key: "oid", Value: oid}, {Key: "d", Value: bson.DateTime(1700000000123)}, {Key: "dec", Value: dec},
		{Key: "bin", Value: bson.Binary{Subtype: 4, Data: []byte("0123456789abcdef")}},
		{Key: "ts", Value: bson.Timestamp{T: 5, I: 6}}, {Key: "re", Value: bson.Regex{Pattern: "^a", Options: "i"}},
		{Key: "arr", Value: bson.A{int32(1), "two", bson.D{{Key: "x", Value: int64(3)}}}},
		{Key: "sub", Value: bson.D{{Key: "y", Value: int32(2)}}}, {Key: "min", Value: bson.MinKey{}}, {Key: "max", Value: bson.MaxKey{}},
	}
	f := mustCompile(t, "function() { return this; }")
	got, err := f.Run(&Env{}, Call{This: doc})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := bson.Marshal(doc)
	gotB, _ := bson.Marshal(got)
	if !bytes.Equal(gotB, want) {
		t.Fatalf("round trip changed the document:\n got %v\nwant %v", bson.Raw(gotB), bson.Raw(want))
	}
	// A computed number is a double; arithmetic on a NumberLong too.
	f = mustCompile(t, "function(a, b) { return [a + 1, b + 1, NumberLong(5), NumberInt(6), NumberDecimal('2.5'), ISODate('2020-01-02T03:04:05Z'), hex_md5('a'), tojson({a: 1}, '', true), Array.sum([1, 2, 3])]; }")
	got, err = f.Run(&Env{}, Call{Args: []any{int32(1), int64(2)}})
	if err != nil {
		t.Fatal(err)
	}
	a := got.(bson.A)
	d25, _ := bson.ParseDecimal128("2.5")
	wantA := bson.A{2.0, 3.0, int64(5), int32(6), d25, bson.DateTime(1577934245000), "0cc175b9c0f1b6a831c399e269772661", `{ "a" : 1 }`, 6.0}
	for i := range wantA {
		if a[i] != wantA[i] {
			t.Errorf("element %d: got %#v, want %#v", i, a[i], wantA[i])
		}
	}
}

func TestWhereForms(t *testing.T) {
	doc := bson.D{{Key: "a", Value: int32(2)}}
	for _, src := range []any{"this.a == 2", "return this.a == 2", "obj.a == 2;", bson.JavaScript("function() { return this.a == 2 }"),
		bson.CodeWithScope{Code: "function() { return this.a == want }", Scope: bson.D{{Key: "want", Value: int32(2)}}}} {
		ok, err := mustCompile(t, src).Test(&Env{}, Call{This: doc, Globals: bson.D{{Key: "obj", Value: doc}}})
		if err != nil || !ok {
			t.Errorf("%v: got %v, %v", src, ok, err)
		}
	}
}

func TestErrorsAndInterrupts(t *testing.T) {
	_, err := Compile("function( {")
	if code(t, err) != JSInterpreterFailure {
		t.Fatal(err)
	}
	_, err = mustCompile(t, "function f() { return a(); }").Run(&Env{}, Call{})
	if code(t, err) != JSInterpreterFailure {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = mustCompile(t, "while (true) {}").Run(&Env{Ctx: ctx}, Call{})
	if code(t, err) != cmderr.MaxTimeMSExpired {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel2() }()
	_, err = mustCompile(t, "sleep(100000); return 1").Run(&Env{Ctx: ctx2}, Call{})
	if code(t, err) != cmderr.Interrupted {
		t.Fatal(err)
	}
	// The pooled runtime is usable again.
	v, err := mustCompile(t, "1 + 1").Run(&Env{}, Call{})
	if err != nil || v != 2.0 {
		t.Fatal(v, err)
	}
	if code(t, (&Env{Disabled: true}).Check(UseWhere)) != 6108304 {
		t.Fatal("disabled $where")
	}
}

func TestBodyReturnsItsLastExpression(t *testing.T) {
	doc := bson.D{{Key: "a", Value: int32(2)}}
	for src, want := range map[string]bool{
		"var x = this.a; x == 2":       true,
		"var x = this.a; x == 3;":      false,
		"if (this.a == 2) return true": true,
		"return false":                 false,
		"  this.a == 2  ":              true,
		"function f() { return true }": true,
	} {
		ok, err := mustCompile(t, src).Test(&Env{}, Call{This: doc})
		if err != nil || ok != want {
			t.Errorf("%q: got %v, %v; want %v", src, ok, err, want)
		}
	}
}

func TestScriptsCannotBreakPooledRuntimes(t *testing.T) {
	// A script that replaces globals the helpers use leaves later scripts
	// (in whatever runtime they get) working.
	_, _ = mustCompile(t, "Object.defineProperty = null; NumberLong = null; return 1").Run(&Env{}, Call{})
	for i := 0; i < 4; i++ {
		v, err := mustCompile(t, "function(x) { return x; }").Run(&Env{}, Call{Args: []any{int64(7)}})
		if err != nil || v != int64(7) {
			t.Fatalf("after a script replaced globals: %v, %v", v, err)
		}
	}
}
