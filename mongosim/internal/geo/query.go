package geo

import (
	"math"

	"github.com/golang/geo/r2"
	"github.com/golang/geo/s1"
	"github.com/golang/geo/s2"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// badValue is a query parse error (code 2), or NotImplemented for a big
// polygon.
func badValue(err error) error {
	if IsUnsupported(err) {
		return cmderr.Unsupported("$geometry with the strict winding order CRS (big polygons)")
	}
	return cmderr.New(cmderr.BadValue, "%s", err.Error())
}

// Region is the argument of $geoWithin: a GeoJSON Polygon or MultiPolygon,
// a spherical cap ($centerSphere), or a flat $box, $polygon or $center.
type Region struct {
	polys    []*s2.Polygon
	cap      *s2.Cap
	box      *r2.Rect
	flatPoly []r2.Point
	center   r2.Point
	radius   float64
	circle   bool
}

// ParseWithin parses the argument of $geoWithin (or $within).
func ParseWithin(arg any) (*Region, error) {
	d, ok := arg.(bson.D)
	if !ok || len(d) == 0 {
		return nil, cmderr.New(cmderr.BadValue, "$geoWithin must be an object")
	}
	e := d[0]
	switch e.Key {
	case "$geometry":
		g, isDoc := e.Value.(bson.D)
		if !isDoc {
			return nil, cmderr.New(cmderr.BadValue, "$geometry must be an object")
		}
		s, err := ParseGeoJSON(g)
		if err != nil {
			return nil, badValue(err)
		}
		if len(s.Points) > 0 || len(s.Lines) > 0 || len(s.Polys) == 0 {
			return nil, cmderr.New(cmderr.BadValue, "$geoWithin not supported with provided geometry: %s", shellish(d))
		}
		return &Region{polys: s.Polys}, nil
	case "$box":
		pts, err := legacyPoints(e.Value, 2)
		if err != nil || len(pts) != 2 {
			return nil, cmderr.New(cmderr.BadValue, "malformed query $box: %s", shellish(d))
		}
		r := r2.RectFromPoints(pts[0], pts[1])
		return &Region{box: &r}, nil
	case "$polygon":
		pts, err := legacyPoints(e.Value, -1)
		if err != nil {
			return nil, cmderr.New(cmderr.BadValue, "malformed query $polygon: %s", shellish(d))
		}
		if len(pts) < 3 {
			return nil, cmderr.New(cmderr.BadValue, "Polygon must have at least 3 points")
		}
		return &Region{flatPoly: pts}, nil
	case "$center", "$centerSphere":
		return parseCircle(e.Key, e.Value, d)
	}
	return nil, cmderr.New(cmderr.BadValue, "unknown geo specifier: %s: %s", e.Key, shellish(e.Value))
}

func parseCircle(op string, v any, whole bson.D) (*Region, error) {
	arr, ok := v.(bson.A)
	if !ok || len(arr) != 2 {
		return nil, cmderr.New(cmderr.BadValue, "malformed query %s: %s", op, shellish(whole))
	}
	c, okc := LegacyPointOf(arr[0])
	r, okr := number(arr[1])
	if !okc || !okr {
		return nil, cmderr.New(cmderr.BadValue, "malformed query %s: %s", op, shellish(whole))
	}
	if r < 0 || math.IsNaN(r) {
		return nil, cmderr.New(cmderr.BadValue, "radius must be a non-negative number")
	}
	if op == "$center" {
		return &Region{center: c, radius: r, circle: true}, nil
	}
	if !inBounds(c.X, c.Y) {
		return nil, cmderr.New(cmderr.BadValue, "Longitude/latitude is out of bounds, lng: %s lat: %s", num(c.X), num(c.Y))
	}
	capr := s2.CapFromCenterAngle(pointOf(c.X, c.Y), s1.Angle(math.Min(r, math.Pi)))
	return &Region{cap: &capr}, nil
}

// legacyPoints parses an array of legacy pairs (n of them when n >= 0).
func legacyPoints(v any, n int) ([]r2.Point, error) {
	arr, ok := v.(bson.A)
	if !ok {
		if d, isDoc := v.(bson.D); isDoc {
			arr = pairValues(d)
		} else {
			return nil, parseErr("not an array")
		}
	}
	if n >= 0 && len(arr) != n {
		return nil, parseErr("wrong number of points")
	}
	out := make([]r2.Point, 0, len(arr))
	for _, e := range arr {
		p, ok := LegacyPointOf(e)
		if !ok {
			return nil, parseErr("not a point")
		}
		out = append(out, p)
	}
	return out, nil
}

// Contains reports whether s lies within the region.
func (r *Region) Contains(s *Shape) bool {
	switch {
	case r.box != nil:
		return s.Single && r.box.ContainsPoint(s.Flat[0])
	case r.flatPoly != nil:
		return s.Single && flatPolygonHas(r.flatPoly, s.Flat[0])
	case r.circle:
		return s.Single && s.Flat[0].Sub(r.center).Norm() <= r.radius
	case r.cap != nil:
		return capHas(*r.cap, s)
	}
	return polysHave(r.polys, s)
}

// Flat reports a flat region ($box, $polygon, $center).
func (r *Region) Flat() bool { return r.box != nil || r.flatPoly != nil || r.circle }

// Intersection is the argument of $geoIntersects.
type Intersection struct{ shape *Shape }

// ParseIntersects parses {$geometry: <GeoJSON>}.
func ParseIntersects(arg any) (*Intersection, error) {
	d, ok := arg.(bson.D)
	if !ok || len(d) == 0 {
		return nil, cmderr.New(cmderr.BadValue, "$geoIntersects must be an object")
	}
	g, isDoc := d[0].Value.(bson.D)
	if d[0].Key != "$geometry" || !isDoc {
		return nil, cmderr.New(cmderr.BadValue, "$geoIntersects not supported with provided geometry: %s", shellish(d))
	}
	s, err := ParseGeoJSON(g)
	if err != nil {
		return nil, badValue(err)
	}
	return &Intersection{shape: s}, nil
}

// Intersects reports whether s meets the query geometry.
func (q *Intersection) Intersects(s *Shape) bool { return intersects(q.shape, s) }

// coverer covers query regions for an index lookup: coarse cells are
// enough, the filter decides.
var coverer = &s2.RegionCoverer{MaxLevel: 30, MaxCells: 16}

// Covering returns cells covering the region on the sphere, and false for
// a flat region (which a 2dsphere index cannot answer).
func (r *Region) Covering() ([]s2.CellID, bool) {
	switch {
	case r.Flat():
		return nil, false
	case r.cap != nil:
		return coverer.Covering(*r.cap), true
	}
	var out []s2.CellID
	for _, p := range r.polys {
		out = append(out, coverer.Covering(p)...)
	}
	return out, true
}

// Covering returns cells covering the query geometry.
func (q *Intersection) Covering() ([]s2.CellID, bool) {
	s := q.shape
	out := make([]s2.CellID, 0, len(s.Points))
	for _, p := range s.Points {
		out = append(out, s2.CellFromPoint(p).ID())
	}
	for _, l := range s.Lines {
		out = append(out, coverer.Covering(l)...)
	}
	for _, p := range s.Polys {
		out = append(out, coverer.Covering(p)...)
	}
	return out, true
}

// Within calls fn once for each document having a cell that meets the
// covering: every document whose geometry meets the covered region, and
// some that do not.
func (ix *Index) Within(covering []s2.CellID, fn func(doc int)) {
	ix.candidates(covering, make([]bool, ix.n), fn)
}
