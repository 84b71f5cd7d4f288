package geo

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// FuzzParse feeds BSON documents to the geometry parsers: a stored value
// ({g: <geometry>}) and the query forms ($geoWithin, $geoIntersects,
// $near). Whatever parses is then covered, measured and compared; nothing
// may panic. The seed corpus is in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"g": {"type": "Point", "coordinates": [1, 2]}}`,
		`{"g": [181, -91]}`,
		`{"g": {"type": "Polygon", "coordinates": [[[0, 0], [4, 0], [4, 4], [0, 4], [0, 0]], [[1, 1], [2, 1], [2, 2], [1, 1]]]}}`,
		`{"g": {"type": "GeometryCollection", "geometries": [{"type": "MultiLineString", "coordinates": [[[0, 0], [1, 1]]]}]}}`,
		`{"$box": [[0, 0], [1, 1]]}`,
		`{"$centerSphere": [[0, 90], 3.2]}`,
		`{"$near": {"$geometry": {"type": "Point", "coordinates": [0, 0]}, "$maxDistance": 1}}`,
	} {
		var d bson.D
		if err := bson.UnmarshalExtJSON([]byte(s), false, &d); err != nil {
			f.Fatal(err)
		}
		raw, err := bson.Marshal(d)
		if err != nil {
			f.Fatal(err)
		}
		f.Add([]byte(raw))
	}
	square, err := ParseWithin(bson.D{{Key: "$geometry", Value: bson.D{{Key: "type", Value: "Polygon"},
		{Key: "coordinates", Value: bson.A{bson.A{bson.A{0, 0}, bson.A{5, 0}, bson.A{5, 5}, bson.A{0, 5}, bson.A{0, 0}}}}}}})
	if err != nil {
		f.Fatal(err)
	}
	near, err := NewNear(bson.A{1, 1}, true)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var d bson.D
		if err := bson.Unmarshal(data, &d); err != nil || len(d) == 0 {
			return
		}
		v := d[0].Value
		if s, err := ParseStored(v); err == nil {
			_ = Cells(s)
			_, _ = near.Distance(s)
			_ = square.Contains(s)
			if q, err := ParseIntersects(bson.D{{Key: "$geometry", Value: v}}); err == nil {
				_ = q.Intersects(s)
			}
		}
		if r, err := ParseWithin(d); err == nil {
			_ = r.Contains(&Shape{})
		}
		if n, err := ParseNear(d); err == nil {
			ix := BuildIndex(nil)
			ix.Near(n, func(int) (float64, bool) { return 0, true }, func(int, float64) bool { return true })
		}
	})
}
