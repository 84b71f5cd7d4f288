package bsonnum

import (
	"math"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestInt64(t *testing.T) {
	raw, err := bson.Marshal(bson.D{{Key: "i32", Value: int32(-7)}, {Key: "i64", Value: int64(1) << 40}, {Key: "f", Value: 2.9},
		{Key: "nan", Value: math.NaN()}, {Key: "big", Value: 1e30}, {Key: "s", Value: "3"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key  string
		want int64
		ok   bool
	}{{"i32", -7, true}, {"i64", 1 << 40, true}, {"f", 2, true}, {"nan", 0, false}, {"big", 0, false}, {"s", 0, false}, {"missing", 0, false}} {
		if n, ok := Field(raw, c.key); n != c.want || ok != c.ok {
			t.Errorf("%s: %d %v, want %d %v", c.key, n, ok, c.want, c.ok)
		}
	}
	for _, c := range []struct {
		v    any
		want int64
		ok   bool
	}{{int32(3), 3, true}, {int64(4), 4, true}, {5, 5, true}, {6.5, 6, true}, {math.Inf(1), 0, false}, {"7", 0, false}} {
		if n, ok := Of(c.v); n != c.want || ok != c.ok {
			t.Errorf("Of(%v): %d %v", c.v, n, ok)
		}
	}
}
