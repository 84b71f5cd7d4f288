package geo

import (
	"math"

	"github.com/golang/geo/r2"
	"github.com/golang/geo/s1"
	"github.com/golang/geo/s2"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// Near is a proximity query: $near, $nearSphere or the $geoNear stage.
// Distances are metres for a GeoJSON point, radians for a legacy point on
// the sphere, and plane units for a flat (2d) legacy $near.
type Near struct {
	Point  s2.Point
	Flat   r2.Point
	Sphere bool // spherical distance
	// GeoJSON: the point was GeoJSON, so distances are metres and only a
	// 2dsphere index can answer the query.
	GeoJSON  bool
	Min, Max float64
}

// NewNear builds a Near around a point given as GeoJSON or a legacy pair,
// for the $geoNear stage (spherical applies to a legacy pair).
func NewNear(pt any, spherical bool) (*Near, error) {
	n := &Near{Max: math.Inf(1), Sphere: spherical}
	if err := n.setPoint(pt, "$geoNear"); err != nil {
		return nil, err
	}
	return n, nil
}

// ParseNear parses {$near: .., $maxDistance: .., $minDistance: ..} (or
// $nearSphere) from one field's operator document.
func ParseNear(ops bson.D) (*Near, error) {
	n := &Near{Max: math.Inf(1)}
	var arg any
	var minD, maxD any
	for _, e := range ops {
		switch e.Key {
		case "$near", "$nearSphere", "$geoNear":
			if arg != nil {
				return nil, cmderr.New(cmderr.BadValue, "Too many geoNear expressions")
			}
			arg = e.Value
			n.Sphere = e.Key == "$nearSphere"
		case "$maxDistance":
			maxD = e.Value
		case "$minDistance":
			minD = e.Value
		case "$comment":
		default:
			return nil, cmderr.New(cmderr.BadValue, "invalid argument in geo near query: %s", e.Key)
		}
	}
	if d, ok := arg.(bson.D); ok {
		if g, has := value.Get(d, "$geometry"); has {
			for _, e := range d {
				switch e.Key {
				case "$maxDistance":
					maxD = e.Value
				case "$minDistance":
					minD = e.Value
				case "$geometry":
				default:
					return nil, cmderr.New(cmderr.BadValue, "invalid argument in geo near query: %s", e.Key)
				}
			}
			arg = g
		}
	}
	if err := n.setPoint(arg, "$near"); err != nil {
		return nil, err
	}
	return n, n.setBounds(minD, maxD)
}

func (n *Near) setPoint(arg any, op string) error {
	if d, ok := arg.(bson.D); ok {
		if t, has := value.Get(d, "type"); has {
			if _, isStr := t.(string); isStr {
				s, err := ParseGeoJSON(d)
				if err != nil {
					return cmderr.New(cmderr.BadValue, "invalid point in geo near query $geometry argument: %s  %s", shellish(d), err.Error())
				}
				if !s.Single {
					return cmderr.New(cmderr.BadValue, "invalid point in geo near query $geometry argument: %s  Point must be a GeoJSON Point", shellish(d))
				}
				n.Point, n.Flat, n.GeoJSON, n.Sphere = s.Points[0], s.Flat[0], true, true
				return nil
			}
		}
	}
	p, ok := LegacyPointOf(arg)
	if !ok {
		return cmderr.New(cmderr.BadValue, "near must be first in: %s", shellish(arg))
	}
	n.Flat = p
	if n.Sphere {
		if !inBounds(p.X, p.Y) {
			return cmderr.New(cmderr.BadValue, "Legacy point is out of bounds for spherical query")
		}
		n.Point = pointOf(p.X, p.Y)
	}
	return nil
}

// SetBounds sets $minDistance and $maxDistance (nil: unset).
func (n *Near) setBounds(minD, maxD any) error {
	if maxD != nil {
		f, ok := number(maxD)
		if !ok {
			return cmderr.New(cmderr.BadValue, "$maxDistance must be a number")
		}
		if f < 0 || math.IsNaN(f) {
			return cmderr.New(cmderr.BadValue, "$maxDistance must be non-negative")
		}
		n.Max = f
	}
	if minD != nil {
		f, ok := number(minD)
		if !ok {
			return cmderr.New(cmderr.BadValue, "$minDistance must be a number")
		}
		if f < 0 || math.IsNaN(f) {
			return cmderr.New(cmderr.BadValue, "$minDistance must be non-negative")
		}
		n.Min = f
	}
	return nil
}

// SetBounds sets the distance bounds of a $geoNear stage (nil: unset).
func (n *Near) SetBounds(minD, maxD any) error { return n.setBounds(minD, maxD) }

// Distance is the distance from the query point to s in the query's
// units, and false when s cannot be measured (a flat query and a line).
func (n *Near) Distance(s *Shape) (float64, bool) {
	if !n.Sphere {
		return s.flatDistance(n.Flat)
	}
	a, ok := s.distance(n.Point)
	if !ok {
		return 0, false
	}
	return n.fromAngle(a), true
}

func (n *Near) fromAngle(a s1.Angle) float64 {
	if n.GeoJSON {
		return a.Radians() * EarthRadiusMeters
	}
	return a.Radians()
}

// toAngle converts a distance in the query's units to an angle.
func (n *Near) toAngle(d float64) s1.Angle {
	if n.GeoJSON {
		return s1.Angle(d / EarthRadiusMeters)
	}
	return s1.Angle(d)
}

// Accepts reports whether d is within [Min, Max].
func (n *Near) Accepts(d float64) bool { return d >= n.Min && d <= n.Max }

// DistanceOf is the distance to the nearest of the geometries among vals
// (the values a field path reaches), and false when none is measurable.
func (n *Near) DistanceOf(vals []any) (float64, bool) {
	_, d, ok := n.Nearest(vals)
	return d, ok
}

// Nearest is DistanceOf that also reports which of vals is nearest.
func (n *Near) Nearest(vals []any) (int, float64, bool) {
	best, at := math.Inf(1), -1
	for i, v := range vals {
		s, err := ParseStored(v)
		if err != nil {
			continue
		}
		if d, ok := n.Distance(s); ok && d < best {
			best, at = d, i
		}
	}
	return at, best, at >= 0
}
