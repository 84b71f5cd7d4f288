package value

import (
	"errors"
	"math"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestCompareOrdersAcrossTypes(t *testing.T) {
	oid := bson.NewObjectID()
	// Ascending in MongoDB's canonical order.
	ordered := []any{
		bson.MinKey{}, nil, int32(-5), 1.5, int64(2), "a", "b",
		bson.D{{Key: "a", Value: int32(1)}}, bson.A{int32(1)},
		bson.Binary{Data: []byte{1}}, oid, false, true,
		bson.DateTime(10), bson.Timestamp{T: 1}, bson.Regex{Pattern: "x"}, bson.MaxKey{},
	}
	for i := range ordered {
		for j := range ordered {
			got := Compare(ordered[i], ordered[j])
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got != want {
				t.Errorf("Compare(%#v, %#v) = %d, want %d", ordered[i], ordered[j], got, want)
			}
		}
	}
}

func TestCompareNumbersByValue(t *testing.T) {
	if !Equal(int32(3), 3.0) || !Equal(int64(3), int32(3)) {
		t.Error("numbers of different types with one value must be equal")
	}
	// Large int64s that round to one float64 still order exactly.
	if Compare(int64(math.MaxInt64), int64(math.MaxInt64-1)) != 1 {
		t.Error("large int64 comparison lost precision")
	}
	if Compare(math.NaN(), -math.MaxFloat64) != -1 {
		t.Error("NaN must sort below every number")
	}
	if Compare(bson.Null{}, nil) != 0 || Compare(bson.Undefined{}, nil) != 0 {
		t.Error("null and undefined compare equal to nil")
	}
}

func TestCompareDocumentsFieldByField(t *testing.T) {
	a := bson.D{{Key: "a", Value: int32(1)}, {Key: "b", Value: int32(2)}}
	b := bson.D{{Key: "a", Value: int32(1)}, {Key: "b", Value: int32(3)}}
	if Compare(a, b) != -1 || Compare(b, a) != 1 || Compare(a, a) != 0 {
		t.Error("documents must compare by values in order")
	}
	if Compare(a[:1], a) != -1 {
		t.Error("a prefix document sorts first")
	}
	if Compare(bson.D{{Key: "a", Value: "x"}}, bson.D{{Key: "a", Value: int32(9)}}) != 1 {
		t.Error("field types compare before values")
	}
}

func TestAddPromotion(t *testing.T) {
	cases := []struct {
		a, b, want any
	}{
		{int32(1), int32(2), int32(3)},
		{int32(math.MaxInt32), int32(1), int64(math.MaxInt32) + 1},
		{int32(1), int64(2), int64(3)},
		{int64(1), 0.5, 1.5},
	}
	for _, c := range cases {
		got, err := Add(c.a, c.b)
		if err != nil || got != c.want {
			t.Errorf("Add(%#v, %#v) = %#v, %v; want %#v", c.a, c.b, got, err, c.want)
		}
	}
	if _, err := Add(int64(math.MaxInt64), int32(1)); !errors.Is(err, ErrOverflow) {
		t.Errorf("int64 overflow: %v", err)
	}
	if _, err := Add("x", int32(1)); !errors.Is(err, ErrNotNumber) {
		t.Errorf("non-number: %v", err)
	}
	if got, _ := Multiply(int32(1<<20), int32(1<<20)); got != int64(1<<40) {
		t.Errorf("Multiply promotion: %#v", got)
	}
	if _, err := Multiply(int64(math.MaxInt64), int64(2)); !errors.Is(err, ErrOverflow) {
		t.Errorf("Multiply overflow: %v", err)
	}
}

func TestCloneIsDeep(t *testing.T) {
	orig := bson.D{{Key: "a", Value: bson.A{bson.D{{Key: "b", Value: int32(1)}}}}, {Key: "bin", Value: bson.Binary{Data: []byte{1}}}}
	c := CloneDoc(orig)
	c[0].Value.(bson.A)[0].(bson.D)[0].Value = int32(2)
	c[1].Value.(bson.Binary).Data[0] = 9
	if orig[0].Value.(bson.A)[0].(bson.D)[0].Value != int32(1) || orig[1].Value.(bson.Binary).Data[0] != 1 {
		t.Error("clone shares state with the original")
	}
}

func TestTypeNames(t *testing.T) {
	for v, want := range map[any]string{1.0: "double", "s": "string", int32(1): "int", int64(1): "long", true: "bool", nil: "null"} {
		if TypeName(v) != want {
			t.Errorf("TypeName(%#v) = %s", v, TypeName(v))
		}
	}
	if TypeNumber(bson.A{}) != 4 || TypeNumber(bson.D{}) != 3 || TypeNumber(bson.MaxKey{}) != 127 {
		t.Error("TypeNumber")
	}
}
