package value

import (
	"math"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestKeyEquality(t *testing.T) {
	same := [][2]any{
		{int32(1), 1.0}, {int32(1), int64(1)}, {0.0, math.Copysign(0, -1)},
		{nil, bson.Null{}}, {bson.D{{Key: "a", Value: int32(1)}}, bson.D{{Key: "a", Value: 1.0}}},
	}
	for _, p := range same {
		if Key(p[0]) != Key(p[1]) {
			t.Errorf("Key(%v) != Key(%v)", p[0], p[1])
		}
	}
	differ := [][2]any{
		{int64(1 << 53), int64(1<<53 + 1)}, {int32(1), "1"}, {1.5, int32(1)},
		{bson.D{{Key: "a", Value: int32(1)}, {Key: "b", Value: int32(2)}}, bson.D{{Key: "b", Value: int32(2)}, {Key: "a", Value: int32(1)}}},
		{"ab", bson.A{"a", "b"}}, {false, int32(0)},
	}
	for _, p := range differ {
		if Key(p[0]) == Key(p[1]) {
			t.Errorf("Key(%v) == Key(%v)", p[0], p[1])
		}
	}
}
