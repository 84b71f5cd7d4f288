package geo

import (
	"math"

	"github.com/golang/geo/r2"
	"github.com/golang/geo/s1"
	"github.com/golang/geo/s2"
)

// EarthRadiusMeters is mongod's radius of the Earth (kRadiusOfEarthInMeters).
const EarthRadiusMeters = 6378.1 * 1000

// leafCell is a point as mongod compares it: its S2 leaf cell, so points on
// an edge or vertex of a region count as inside.
func leafCell(p s2.Point) s2.Cell { return s2.CellFromPoint(p) }

func polyHasPoint(poly *s2.Polygon, p s2.Point) bool {
	return poly.ContainsPoint(p) || poly.IntersectsCell(leafCell(p))
}

// edgesCross reports an edge of line crossing (or touching) an edge of
// poly.
func edgesCross(line *s2.Polyline, poly *s2.Polygon, proper bool) bool {
	pts := *line
	for i := 0; i+1 < len(pts); i++ {
		a, b := pts[i], pts[i+1]
		for e := 0; e < poly.NumEdges(); e++ {
			edge := poly.Edge(e)
			c := s2.CrossingSign(a, b, edge.V0, edge.V1)
			if c == s2.Cross || (!proper && c == s2.MaybeCross) {
				return true
			}
		}
	}
	return false
}

func lineIntersectsPoly(line *s2.Polyline, poly *s2.Polygon) bool {
	for _, v := range *line {
		if polyHasPoint(poly, v) {
			return true
		}
	}
	return edgesCross(line, poly, false)
}

func polyContainsLine(poly *s2.Polygon, line *s2.Polyline) bool {
	for _, v := range *line {
		if !polyHasPoint(poly, v) {
			return false
		}
	}
	return !edgesCross(line, poly, true)
}

// intersects reports whether any part of a meets any part of b on the
// sphere ($geoIntersects).
func intersects(a, b *Shape) bool {
	for _, p := range a.Points {
		if b.hasPoint(p) {
			return true
		}
	}
	for _, l := range a.Lines {
		if b.meetsLine(l) {
			return true
		}
	}
	for _, poly := range a.Polys {
		if b.meetsPoly(poly) {
			return true
		}
	}
	return false
}

// hasPoint reports whether p lies on or in some part of s.
func (s *Shape) hasPoint(p s2.Point) bool {
	c := leafCell(p)
	for _, q := range s.Points {
		if leafCell(q).ID() == c.ID() {
			return true
		}
	}
	for _, l := range s.Lines {
		if l.IntersectsCell(c) {
			return true
		}
	}
	for _, poly := range s.Polys {
		if polyHasPoint(poly, p) {
			return true
		}
	}
	return false
}

func (s *Shape) meetsLine(l *s2.Polyline) bool {
	for _, p := range s.Points {
		if l.IntersectsCell(leafCell(p)) {
			return true
		}
	}
	for _, o := range s.Lines {
		if o.Intersects(l) {
			return true
		}
	}
	for _, poly := range s.Polys {
		if lineIntersectsPoly(l, poly) {
			return true
		}
	}
	return false
}

func (s *Shape) meetsPoly(poly *s2.Polygon) bool {
	for _, p := range s.Points {
		if polyHasPoint(poly, p) {
			return true
		}
	}
	for _, l := range s.Lines {
		if lineIntersectsPoly(l, poly) {
			return true
		}
	}
	for _, o := range s.Polys {
		if o.Intersects(poly) {
			return true
		}
	}
	return false
}

// distance is the angle from p to the nearest part of s on the sphere
// (zero inside a polygon), and false when s has no part on the sphere.
func (s *Shape) distance(p s2.Point) (s1.Angle, bool) {
	best := s1.InfAngle()
	found := false
	for _, q := range s.Points {
		if d := p.Distance(q); d < best {
			best = d
		}
		found = true
	}
	for _, l := range s.Lines {
		pts := *l
		for i := 0; i+1 < len(pts); i++ {
			if d := s2.DistanceFromSegment(p, pts[i], pts[i+1]); d < best {
				best = d
			}
		}
		found = true
	}
	for _, poly := range s.Polys {
		found = true
		if poly.ContainsPoint(p) {
			return 0, true
		}
		for e := 0; e < poly.NumEdges(); e++ {
			edge := poly.Edge(e)
			if d := s2.DistanceFromSegment(p, edge.V0, edge.V1); d < best {
				best = d
			}
		}
	}
	return best, found
}

// flatDistance is the plane distance from p to a single point shape.
func (s *Shape) flatDistance(p r2.Point) (float64, bool) {
	if !s.Single || len(s.Flat) != 1 {
		return 0, false
	}
	return s.Flat[0].Sub(p).Norm(), true
}

// capHas reports whether every vertex of s lies in c (mongod's
// $centerSphere containment).
func capHas(c s2.Cap, s *Shape) bool {
	if s.empty() {
		return false
	}
	for _, p := range s.Points {
		if !c.IntersectsCell(leafCell(p)) && !c.ContainsPoint(p) {
			return false
		}
	}
	for _, l := range s.Lines {
		for _, v := range *l {
			if !c.ContainsPoint(v) {
				return false
			}
		}
	}
	for _, poly := range s.Polys {
		for _, loop := range poly.Loops() {
			for _, v := range loop.Vertices() {
				if !c.ContainsPoint(v) {
					return false
				}
			}
		}
	}
	return true
}

// polysHave reports whether every part of s lies in one of polys.
func polysHave(polys []*s2.Polygon, s *Shape) bool {
	if s.empty() {
		return false
	}
	for _, p := range s.Points {
		if !anyPoly(polys, func(poly *s2.Polygon) bool { return polyHasPoint(poly, p) }) {
			return false
		}
	}
	for _, l := range s.Lines {
		if !anyPoly(polys, func(poly *s2.Polygon) bool { return polyContainsLine(poly, l) }) {
			return false
		}
	}
	for _, o := range s.Polys {
		if !anyPoly(polys, func(poly *s2.Polygon) bool { return poly.Contains(o) }) {
			return false
		}
	}
	return true
}

func anyPoly(polys []*s2.Polygon, f func(*s2.Polygon) bool) bool {
	for _, p := range polys {
		if f(p) {
			return true
		}
	}
	return false
}

// flatPolygonHas is a point-in-polygon test in the plane; points on an
// edge are inside, as mongod's legacy $polygon has them.
func flatPolygonHas(poly []r2.Point, p r2.Point) bool {
	in := false
	n := len(poly)
	for i, j := 0, n-1; i < n; j, i = i, i+1 {
		a, b := poly[i], poly[j]
		if onSegment(a, b, p) {
			return true
		}
		if (a.Y > p.Y) != (b.Y > p.Y) && p.X < (b.X-a.X)*(p.Y-a.Y)/(b.Y-a.Y)+a.X {
			in = !in
		}
	}
	return in
}

func onSegment(a, b, p r2.Point) bool {
	const eps = 1e-12
	cross := (b.X-a.X)*(p.Y-a.Y) - (b.Y-a.Y)*(p.X-a.X)
	if math.Abs(cross) > eps*math.Max(1, b.Sub(a).Norm()) {
		return false
	}
	return p.X >= math.Min(a.X, b.X)-eps && p.X <= math.Max(a.X, b.X)+eps &&
		p.Y >= math.Min(a.Y, b.Y)-eps && p.Y <= math.Max(a.Y, b.Y)+eps
}
