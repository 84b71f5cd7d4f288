package value

import (
	"math"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func dec(t *testing.T, s string) bson.Decimal128 {
	t.Helper()
	d, err := bson.ParseDecimal128(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDecimalArithmeticIsExact(t *testing.T) {
	for _, c := range []struct {
		name string
		op   func(a, b any) (any, error)
		a, b any
		want string
	}{
		{"0.1+0.2", Add, dec(t, "0.1"), dec(t, "0.2"), "0.3"},
		{"decimal+int", Add, dec(t, "1.5"), int32(2), "3.5"},
		{"decimal+long", Add, dec(t, "0.01"), int64(100), "100.01"},
		{"decimal+double uses 15 digits", Add, dec(t, "0"), 0.1, "0.1000000000000000"},
		{"money", Multiply, dec(t, "19.99"), int32(3), "59.97"},
		{"34 digits, half even", Add, dec(t, "9999999999999999999999999999999999"), dec(t, "0.5"), "1.000000000000000000000000000000000E+34"},
		{"divide", Divide, dec(t, "1"), dec(t, "4"), "0.25"},
		{"divide by int", Divide, dec(t, "10"), int32(3), "3.333333333333333333333333333333333"},
	} {
		got, err := c.op(c.a, c.b)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		d, ok := got.(bson.Decimal128)
		if !ok {
			t.Errorf("%s: got %T %v, want a Decimal128", c.name, got, got)
			continue
		}
		if Compare(d, dec(t, c.want)) != 0 {
			t.Errorf("%s: got %v, want %s", c.name, d, c.want)
		}
	}
	if got, _ := Divide(int32(1), int32(4)); got != 0.25 {
		t.Errorf("1/4 without decimals = %v (%T), want the double 0.25", got, got)
	}
	if n, ok := NegateDecimal(dec(t, "0.3")); !ok || Compare(n, dec(t, "-0.3")) != 0 {
		t.Errorf("negate 0.3 = %v", n)
	}
	if n, ok := AbsDecimal(dec(t, "-2.50")); !ok || n.(bson.Decimal128).String() != "2.50" {
		t.Errorf("abs -2.50 = %v", n)
	}
}

func TestDecimalComparisonIsExact(t *testing.T) {
	for _, c := range []struct {
		a, b any
		want int
	}{
		{dec(t, "0.1"), 0.1, -1},             // the double 0.1 is 0.1000000000000000055…
		{dec(t, "0.3"), 0.3, 1},              // and 0.3 is 0.299999999999999988…
		{dec(t, "0.5"), 0.5, 0},              // exactly representable
		{dec(t, "1.00"), int32(1), 0},        // scale does not matter
		{dec(t, "1E+2"), int64(100), 0},      // nor exponent form
		{dec(t, "NaN"), math.Inf(-1), -1},    // NaN sorts first
		{dec(t, "NaN"), math.NaN(), 0},       // and equals NaN
		{dec(t, "Infinity"), math.Inf(1), 0}, // infinities
		{dec(t, "-Infinity"), int64(math.MinInt64), -1},
		{dec(t, "9223372036854775807"), int64(math.MaxInt64), 0},
	} {
		if got := Compare(c.a, c.b); got != c.want {
			t.Errorf("Compare(%v, %v) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := Compare(c.b, c.a); got != -c.want {
			t.Errorf("Compare(%v, %v) = %d, want %d", c.b, c.a, got, -c.want)
		}
	}
}
