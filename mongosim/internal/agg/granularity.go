package agg

import (
	"math"
	"math/bits"
	"sort"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// $bucketAuto's granularity: bucket boundaries rounded to a preferred
// number series (Renard, E, 1-2-5) or to powers of two, with mongod's
// arithmetic (series values scaled by repeated ×10 / ÷10 in doubles).
// Decimal values are rounded as doubles.

type rounder interface {
	up(v any) (any, error)
	down(v any) (any, error)
}

var preferredSeries = map[string][]float64{
	"R5":    {10, 16, 25, 40, 63},
	"R10":   {100, 125, 160, 200, 250, 315, 400, 500, 630, 800},
	"R20":   {100, 112, 125, 140, 160, 180, 200, 224, 250, 280, 315, 355, 400, 450, 500, 560, 630, 710, 800, 900},
	"R40":   {100, 106, 112, 118, 125, 132, 140, 150, 160, 170, 180, 190, 200, 212, 224, 236, 250, 265, 280, 300, 315, 355, 375, 400, 425, 450, 475, 500, 530, 560, 600, 630, 670, 710, 750, 800, 850, 900, 950},
	"R80":   {103, 109, 115, 122, 128, 136, 145, 155, 165, 175, 185, 195, 206, 218, 230, 243, 258, 272, 290, 307, 325, 345, 365, 387, 412, 437, 462, 487, 515, 545, 575, 615, 650, 690, 730, 775, 825, 875, 925, 975},
	"1-2-5": {10, 20, 50},
	"E6":    {10, 15, 22, 33, 47, 68},
	"E12":   {10, 12, 15, 18, 22, 27, 33, 39, 47, 56, 68, 82},
	"E24":   {10, 11, 12, 13, 15, 16, 18, 20, 22, 24, 27, 30, 33, 36, 39, 43, 47, 51, 56, 62, 68, 75, 82, 91},
	"E48": {100, 105, 110, 115, 121, 127, 133, 140, 147, 154, 162, 169, 178, 187, 196, 205, 215, 226, 237, 249, 261, 274, 287, 301,
		316, 332, 348, 365, 383, 402, 422, 442, 464, 487, 511, 536, 562, 590, 619, 649, 681, 715, 750, 787, 825, 866, 909, 953},
	"E96": {100, 102, 105, 107, 110, 113, 115, 118, 121, 124, 127, 130, 133, 137, 140, 143, 147, 150, 154, 158, 162, 165, 169, 174,
		178, 182, 187, 191, 196, 200, 205, 210, 215, 221, 226, 232, 237, 243, 249, 255, 261, 267, 274, 280, 287, 294, 301, 309,
		316, 324, 332, 340, 348, 357, 365, 374, 383, 392, 402, 412, 422, 432, 442, 453, 464, 475, 487, 499, 511, 523, 536, 549,
		562, 576, 590, 604, 619, 634, 649, 665, 681, 698, 715, 732, 750, 768, 787, 806, 825, 845, 866, 887, 909, 931, 953, 976},
	"E192": {100, 101, 102, 104, 105, 106, 107, 109, 110, 111, 113, 114, 115, 117, 118, 120, 121, 123, 124, 126, 127, 129, 130,
		132, 133, 135, 137, 138, 140, 142, 143, 145, 147, 149, 150, 152, 154, 156, 158, 160, 162, 164, 165, 167, 169, 172, 174,
		176, 178, 180, 182, 184, 187, 189, 191, 193, 196, 198, 200, 203, 205, 208, 210, 213, 215, 218, 221, 223, 226, 229, 232,
		234, 237, 240, 243, 246, 249, 252, 255, 258, 261, 264, 267, 271, 274, 277, 280, 284, 287, 291, 294, 298, 301, 305, 309,
		312, 316, 320, 324, 328, 332, 336, 340, 344, 348, 352, 357, 361, 365, 370, 374, 379, 383, 388, 392, 397, 402, 407, 412,
		417, 422, 427, 432, 437, 442, 448, 453, 459, 464, 470, 475, 481, 487, 493, 499, 505, 511, 517, 523, 530, 536, 542, 549,
		556, 562, 569, 576, 583, 590, 597, 604, 612, 619, 626, 634, 642, 649, 657, 665, 673, 681, 690, 698, 706, 715, 723, 732,
		741, 750, 759, 768, 777, 787, 796, 806, 816, 825, 835, 845, 856, 866, 876, 887, 898, 909, 920, 931, 942, 953, 965, 976, 988},
}

func newRounder(name any) (rounder, error) {
	s, _ := name.(string)
	if s == "POWERSOF2" {
		return powersOf2{}, nil
	}
	if series, ok := preferredSeries[s]; ok {
		return preferred(series), nil
	}
	return nil, cmderr.New(40257, "Unknown rounding granularity '%s'", expr0(name))
}

func expr0(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return value.TypeName(v)
}

func roundable(v any) (float64, error) {
	if !value.IsNumber(v) {
		return 0, cmderr.New(40262, "A granularity rounder can only round numeric values, but found type: %s", typeNameOf(v))
	}
	f, _ := value.ToFloat(v)
	if math.IsNaN(f) {
		return 0, cmderr.New(40263, "A granularity rounder cannot round NaN")
	}
	if f < 0 {
		return 0, cmderr.New(40268, "A granularity rounder can only round non-negative numbers")
	}
	return f, nil
}

type preferred []float64

func (s preferred) up(v any) (any, error) {
	x, err := roundable(v)
	if err != nil || x == 0 || math.IsInf(x, 1) {
		return v, err // (mongod's scaling loop never ends on infinity)
	}
	m := 1.0
	for x >= s[len(s)-1]*m {
		m *= 10
	}
	for x < s[0]*m {
		prevMin := s[0] * m
		m /= 10
		if x >= s[len(s)-1]*m {
			return prevMin, nil
		}
	}
	i := sort.Search(len(s), func(i int) bool { return x < s[i]*m })
	return s[i] * m, nil
}

func (s preferred) down(v any) (any, error) {
	x, err := roundable(v)
	if err != nil || x == 0 || math.IsInf(x, 1) {
		return v, err
	}
	m := 1.0
	for x <= s[0]*m {
		m /= 10
	}
	for x > s[len(s)-1]*m {
		prevMax := s[len(s)-1] * m
		m *= 10
		if x <= s[0]*m {
			return prevMax, nil
		}
	}
	i := sort.Search(len(s), func(i int) bool { return !(s[i]*m < x) })
	return s[i-1] * m, nil
}

type powersOf2 struct{}

// pow2 is 2^e as $pow answers it: an int or long for e ≥ 0, else a double.
func pow2(e int) any {
	switch {
	case e < 0:
		return math.Pow(2, float64(e))
	case e < 31:
		return int32(1) << e
	case e < 63:
		return int64(1) << e
	}
	return math.Pow(2, float64(e))
}

func (powersOf2) up(v any) (any, error) {
	x, err := roundable(v)
	if err != nil || x == 0 || math.IsInf(x, 1) {
		return v, err
	}
	switch n := v.(type) {
	case int32:
		return pow2(bits.Len64(uint64(n))), nil
	case int64:
		return pow2(bits.Len64(uint64(n))), nil
	}
	return pow2(int(math.Floor(math.Log2(x))) + 1), nil
}

func (powersOf2) down(v any) (any, error) {
	x, err := roundable(v)
	if err != nil || x == 0 || math.IsInf(x, 1) {
		return v, err
	}
	switch n := v.(type) {
	case int32:
		return pow2(bits.Len64(uint64(n)-1) - 1), nil
	case int64:
		return pow2(bits.Len64(uint64(n)-1) - 1), nil
	}
	return pow2(int(math.Ceil(math.Log2(x))) - 1), nil
}
