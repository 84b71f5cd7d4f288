package geo

import (
	"math"
	"math/rand"
	"sort"
	"testing"

	"github.com/golang/geo/s2"
	"go.mongodb.org/mongo-driver/v2/bson"
)

func ext(t testing.TB, s string) bson.D {
	t.Helper()
	var d bson.D
	if err := bson.UnmarshalExtJSON([]byte(s), false, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func haversine(lng1, lat1, lng2, lat2 float64) float64 {
	rad := math.Pi / 180
	a := math.Pow(math.Sin((lat2-lat1)*rad/2), 2) + math.Cos(lat1*rad)*math.Cos(lat2*rad)*math.Pow(math.Sin((lng2-lng1)*rad/2), 2)
	return 2 * EarthRadiusMeters * math.Asin(math.Sqrt(a))
}

func TestNearDistanceMetresMatchesHaversine(t *testing.T) {
	n, err := NewNear(ext(t, `{"type": "Point", "coordinates": [2.3522, 48.8566]}`), true)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]float64{{-0.1276, 51.5072}, {139.69, 35.69}, {-179.9, -89.9}, {2.3522, 48.8566}} {
		s, err := ParseStored(bson.A{c[0], c[1]})
		if err != nil {
			t.Fatal(err)
		}
		d, ok := n.Distance(s)
		want := haversine(2.3522, 48.8566, c[0], c[1])
		if !ok || math.Abs(d-want) > 1e-6*math.Max(want, 1) {
			t.Fatalf("%v: %v m, want %v", c, d, want)
		}
	}
	// A legacy $nearSphere measures radians.
	ls, _ := NewNear(bson.A{0, 0}, true)
	s, _ := ParseStored(bson.A{90, 0})
	if d, _ := ls.Distance(s); math.Abs(d-math.Pi/2) > 1e-12 {
		t.Fatalf("radians: %v", d)
	}
	// Inside a polygon the distance is zero; outside, to the nearest edge.
	poly, err := ParseStored(ext(t, `{"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 1], [0, 0]]]}`))
	if err != nil {
		t.Fatal(err)
	}
	in, _ := NewNear(bson.A{0.5, 0.5}, true)
	out, _ := NewNear(bson.A{0.5, -1}, true)
	if d, _ := in.Distance(poly); d != 0 {
		t.Fatalf("inside: %v", d)
	}
	if d, _ := out.Distance(poly); math.Abs(d-math.Pi/180) > 1e-9 {
		t.Fatalf("outside: %v rad, want one degree", d)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"type": "Point", "coordinates": [181, 0]}`, "Longitude/latitude is out of bounds, lng: 181 lat: 0"},
		{`{"type": "Point", "coordinates": ["a", 0]}`, "Point must only contain numeric elements"},
		{`{"type": "Point"}`, "coordinates must be an array"},
		{`{"type": "Blob", "coordinates": []}`, "unknown GeoJSON type"},
		{`{"type": "LineString", "coordinates": [[0, 0]]}`, "GeoJSON LineString must have at least 2 vertices"},
		{`{"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 0.5]]]}`, "Loop is not closed"},
		{`{"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [0, 0]]]}`, "Loop must have at least 3 different vertices"},
		{`{"type": "Polygon", "coordinates": [[[0, 0], [2, 2], [2, 0], [0, 2], [0, 0]]]}`, "Loop is not valid: Edges"},
		{`{"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 1], [0, 0]], [[5, 5], [6, 5], [6, 6], [5, 5]]]}`, "Secondary loops not contained"},
		{`{"type": "MultiPoint", "coordinates": []}`, "MultiPoint coordinates must have at least 1 element"},
		{`{"type": "Point", "coordinates": [0, 0], "crs": {"type": "name", "properties": {"name": "EPSG:9999"}}}`, "Unknown CRS name"},
	}
	for _, c := range cases {
		_, err := ParseStored(ext(t, c.in))
		if err == nil || !contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.in, err, c.want)
		}
	}
	if _, err := ParseStored("x"); err == nil {
		t.Fatal("a string parsed as a geometry")
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestIndexNearMatchesBruteForce checks the cell search returns exactly
// the brute-force order, with bounds, for random points, lines and
// polygons, at the poles and across the antimeridian.
func TestIndexNearMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	var shapes []*Shape
	for i := 0; i < 3000; i++ {
		lng, lat := rng.Float64()*360-180, rng.Float64()*180-90
		var v any = bson.A{lng, lat}
		switch i % 10 {
		case 8:
			v = bson.D{{Key: "type", Value: "LineString"}, {Key: "coordinates", Value: bson.A{bson.A{lng, lat}, bson.A{math.Min(lng+1, 180), lat}}}}
		case 9:
			la := math.Min(lat, 88)
			v = bson.D{{Key: "type", Value: "Polygon"}, {Key: "coordinates", Value: bson.A{bson.A{bson.A{lng, la}, bson.A{lng, la + 1}, bson.A{math.Max(lng-1, -180), la + 1}, bson.A{lng, la}}}}}
		}
		s, err := ParseStored(v)
		if err != nil {
			t.Fatalf("%v: %v", v, err)
		}
		shapes = append(shapes, s)
	}
	all := make([][]s2.CellID, len(shapes))
	for i, s := range shapes {
		all[i] = Cells(s)
	}
	ix := BuildIndex(all)
	for _, q := range []struct {
		at       bson.A
		min, max float64
	}{{bson.A{0, 0}, 0, math.Inf(1)}, {bson.A{179.9, 0}, 0, 2e6}, {bson.A{0, 90}, 1e5, 3e6}, {bson.A{-45, -89.9}, 0, 5e5}} {
		n, err := NewNear(bson.D{{Key: "type", Value: "Point"}, {Key: "coordinates", Value: q.at}}, true)
		if err != nil {
			t.Fatal(err)
		}
		n.Min, n.Max = q.min, q.max
		dist := func(i int) (float64, bool) { return n.Distance(shapes[i]) }
		var want []int
		for i := range shapes {
			if d, ok := dist(i); ok && n.Accepts(d) {
				want = append(want, i)
			}
		}
		sort.SliceStable(want, func(a, b int) bool { da, _ := dist(want[a]); db, _ := dist(want[b]); return da < db })
		var got []int
		ix.Near(n, dist, func(i int, _ float64) bool { got = append(got, i); return true })
		if len(got) != len(want) {
			t.Fatalf("%v: index found %d, brute force %d", q, len(got), len(want))
		}
		for i := range got {
			dg, _ := dist(got[i])
			dw, _ := dist(want[i])
			if dg != dw {
				t.Fatalf("%v: position %d: distance %v, want %v", q, i, dg, dw)
			}
		}
	}
}

// TestIndexUpdateKeepsEntries checks an updated index (documents removed,
// renumbered and added) finds what a fresh build finds.
func TestIndexUpdateKeepsEntries(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	pts := func(n int) [][]s2.CellID {
		out := make([][]s2.CellID, n)
		for i := range out {
			s, _ := ParseStored(bson.A{rng.Float64()*360 - 180, rng.Float64()*180 - 90})
			out[i] = Cells(s)
		}
		return out
	}
	old := pts(500)
	ix := BuildIndex(old)
	// Keep every other old document (renumbered), add 100 new ones.
	remap := make([]int32, len(old))
	var now [][]s2.CellID
	for i := range old {
		remap[i] = -1
		if i%2 == 0 {
			remap[i] = int32(len(now))
			now = append(now, old[i])
		}
	}
	fresh := pts(100)
	var docs []int32
	for range fresh {
		docs = append(docs, int32(len(now)))
		now = append(now, nil)
	}
	for i, d := range docs {
		now[d] = fresh[i]
	}
	up := ix.Update(remap, docs, fresh, len(now))
	want := BuildIndex(now)
	if len(up.ids) != len(want.ids) {
		t.Fatalf("%d entries, want %d", len(up.ids), len(want.ids))
	}
	for i := range up.ids {
		if up.ids[i] != want.ids[i] || up.docs[i] != want.docs[i] {
			t.Fatalf("entry %d: %v/%d, want %v/%d", i, up.ids[i], up.docs[i], want.ids[i], want.docs[i])
		}
	}
}
