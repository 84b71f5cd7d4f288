package collation

import (
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

func mustParse(t *testing.T, spec bson.D) *Collation {
	t.Helper()
	c, err := Parse(spec)
	if err != nil {
		t.Fatalf("Parse(%v): %v", spec, err)
	}
	return c
}

func TestCompare(t *testing.T) {
	cases := []struct {
		spec bson.D
		a, b string
		want int
	}{
		{bson.D{{Key: "locale", Value: "en"}, {Key: "strength", Value: int32(2)}}, "ping", "PING", 0},
		{bson.D{{Key: "locale", Value: "en"}, {Key: "strength", Value: int32(2)}}, "cafe", "café", -1},
		{bson.D{{Key: "locale", Value: "en"}, {Key: "strength", Value: int32(1)}}, "cafe", "CAFÉ", 0},
		{bson.D{{Key: "locale", Value: "en"}}, "a", "A", -1},
		{bson.D{{Key: "locale", Value: "en"}, {Key: "caseFirst", Value: "upper"}}, "a", "A", 1},
		{bson.D{{Key: "locale", Value: "en"}, {Key: "caseFirst", Value: "upper"}}, "b", "A", 1},
		{bson.D{{Key: "locale", Value: "en"}}, "10", "9", -1},
		{bson.D{{Key: "locale", Value: "en"}, {Key: "numericOrdering", Value: true}}, "10", "9", 1},
		{bson.D{{Key: "locale", Value: "en"}, {Key: "strength", Value: int32(1)}, {Key: "caseLevel", Value: true}}, "cafe", "Cafe", -1},
		{bson.D{{Key: "locale", Value: "en"}, {Key: "strength", Value: int32(1)}, {Key: "caseLevel", Value: true}}, "cafe", "café", 0},
		{bson.D{{Key: "locale", Value: "en"}, {Key: "alternate", Value: "shifted"}}, "a-b", "ab", 0},
		{bson.D{{Key: "locale", Value: "en"}}, "a-b", "ab", -1},
	}
	for _, tc := range cases {
		c := mustParse(t, tc.spec)
		if got := c.CompareStrings(tc.a, tc.b); got != tc.want {
			t.Errorf("%v: compare(%q, %q) = %d, want %d", tc.spec, tc.a, tc.b, got, tc.want)
		}
		if eq := c.Key(tc.a) == c.Key(tc.b); eq != (tc.want == 0) {
			t.Errorf("%v: keys of %q and %q equal=%v, want %v", tc.spec, tc.a, tc.b, eq, tc.want == 0)
		}
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		spec bson.D
		code int32
	}{
		{bson.D{{Key: "locale", Value: "xx"}}, cmderr.BadValue},
		{bson.D{{Key: "locale", Value: ""}}, cmderr.BadValue},
		{bson.D{{Key: "strength", Value: int32(2)}}, cmderr.NoSuchKey},
		{bson.D{{Key: "locale", Value: int32(1)}}, cmderr.TypeMismatch},
		{bson.D{{Key: "locale", Value: "en"}, {Key: "strength", Value: int32(6)}}, cmderr.FailedToParse},
		{bson.D{{Key: "locale", Value: "en"}, {Key: "caseFirst", Value: "x"}}, cmderr.FailedToParse},
		{bson.D{{Key: "locale", Value: "en"}, {Key: "foo", Value: int32(1)}}, cmderr.FailedToParse},
		{bson.D{{Key: "locale", Value: "simple"}, {Key: "strength", Value: int32(1)}}, cmderr.FailedToParse},
		{bson.D{{Key: "locale", Value: "en"}, {Key: "version", Value: "1.0"}}, IncompatibleCollationVersion},
	}
	for _, tc := range cases {
		_, err := Parse(tc.spec)
		var ce *cmderr.Error
		if !errors.As(err, &ce) || ce.Code != tc.code {
			t.Errorf("Parse(%v) = %v, want code %d", tc.spec, err, tc.code)
		}
	}
	if c, err := Parse(bson.D{{Key: "locale", Value: "simple"}}); c != nil || err != nil {
		t.Errorf("simple: %v, %v", c, err)
	}
}

func TestSpecDefaults(t *testing.T) {
	c := mustParse(t, bson.D{{Key: "locale", Value: "fr_CA"}, {Key: "strength", Value: 2.0}})
	want := bson.D{{Key: "locale", Value: "fr_CA"}, {Key: "caseLevel", Value: false}, {Key: "caseFirst", Value: "off"},
		{Key: "strength", Value: int32(2)}, {Key: "numericOrdering", Value: false}, {Key: "alternate", Value: "non-ignorable"},
		{Key: "maxVariable", Value: "punct"}, {Key: "normalization", Value: false}, {Key: "backwards", Value: true},
		{Key: "version", Value: "57.1"}}
	got := c.Spec()
	if len(got) != len(want) {
		t.Fatalf("spec %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("field %d: %v, want %v", i, got[i], want[i])
		}
	}
}

func BenchmarkCompareStrings(b *testing.B) {
	c, err := Parse(bson.D{{Key: "locale", Value: "en"}, {Key: "strength", Value: int32(2)}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		c.CompareStrings("UserKx", "userkx")
	}
}

func BenchmarkKey(b *testing.B) {
	c, err := Parse(bson.D{{Key: "locale", Value: "en"}, {Key: "strength", Value: int32(2)}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = c.Key("UserKx")
	}
}

// A Collation is shared by concurrent operations.
func TestConcurrentUse(t *testing.T) {
	c := mustParse(t, bson.D{{Key: "locale", Value: "de"}, {Key: "strength", Value: int32(1)}})
	done := make(chan bool)
	for g := 0; g < 4; g++ {
		go func() {
			ok := true
			for i := 0; i < 200; i++ {
				ok = ok && c.CompareStrings("Straße", "strasse") == 0 && c.Key("Ä") == c.Key("a")
			}
			done <- ok
		}()
	}
	for g := 0; g < 4; g++ {
		if !<-done {
			t.Error("concurrent comparisons disagreed")
		}
	}
}
