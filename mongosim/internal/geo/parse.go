package geo

import (
	"fmt"
	"strconv"

	"github.com/golang/geo/r2"
	"github.com/golang/geo/s2"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// Shape is one parsed geometry: a GeoJSON object or a legacy coordinate
// pair. A geometry collection or a multi-geometry has several parts.
type Shape struct {
	// Points are the points on the sphere. A legacy pair outside the
	// longitude/latitude bounds has none (it exists only in the plane).
	Points []s2.Point
	// Flat are the plane coordinates of the points, for $box, $polygon,
	// $center and 2d indexes.
	Flat  []r2.Point
	Lines []*s2.Polyline
	Polys []*s2.Polygon
	// Legacy marks a legacy coordinate pair ([x, y] or {x: .., y: ..}).
	Legacy bool
	// Single marks one point (a legacy pair or a GeoJSON Point), the only
	// shape the flat $box, $polygon and $center regions can contain.
	Single bool
}

// empty reports a shape with no part (nothing matches it).
func (s *Shape) empty() bool {
	return len(s.Points) == 0 && len(s.Lines) == 0 && len(s.Polys) == 0
}

// ParseError is why a value is not a valid geometry, worded as mongod does.
type ParseError struct{ Reason string }

func (e *ParseError) Error() string { return e.Reason }

func parseErr(format string, args ...any) error {
	return &ParseError{Reason: fmt.Sprintf(format, args...)}
}

// errStrictWinding reports a "big polygon" (the strict winding CRS), which
// mongosim does not support.
var errStrictWinding = parseErr("mongosim does not support the strict winding order CRS (big polygons)")

// IsUnsupported reports an error naming a geometry mongosim does not support.
func IsUnsupported(err error) bool { return err == errStrictWinding }

// ParseStored parses a stored geometry: a GeoJSON object or a legacy
// coordinate pair, as a 2dsphere index or a geo query sees a field value.
func ParseStored(v any) (*Shape, error) {
	switch x := v.(type) {
	case bson.D:
		if t, ok := value.Get(x, "type"); ok {
			if _, isStr := t.(string); isStr {
				return ParseGeoJSON(x)
			}
		}
		return parseLegacyShape(pairValues(x))
	case bson.A:
		return parseLegacyShape(x)
	}
	return nil, parseErr("geo element must be an array or object: %s", shellish(v))
}

// pairValues are a document's field values, for a legacy {x: .., y: ..}.
func pairValues(d bson.D) bson.A {
	out := make(bson.A, len(d))
	for i, e := range d {
		out[i] = e.Value
	}
	return out
}

func parseLegacyShape(vals bson.A) (*Shape, error) {
	p, err := LegacyPoint(vals)
	if err != nil {
		return nil, err
	}
	s := &Shape{Flat: []r2.Point{p}, Legacy: true, Single: true}
	if inBounds(p.X, p.Y) {
		s.Points = []s2.Point{pointOf(p.X, p.Y)}
	}
	return s, nil
}

// LegacyPoint parses a legacy coordinate pair's first two values.
func LegacyPoint(vals bson.A) (r2.Point, error) {
	if len(vals) < 2 {
		return r2.Point{}, parseErr("Point must only contain numeric elements")
	}
	x, okx := number(vals[0])
	y, oky := number(vals[1])
	if !okx || !oky {
		return r2.Point{}, parseErr("Point must only contain numeric elements")
	}
	return r2.Point{X: x, Y: y}, nil
}

// LegacyPointOf is LegacyPoint of an array or a document.
func LegacyPointOf(v any) (r2.Point, bool) {
	var vals bson.A
	switch x := v.(type) {
	case bson.A:
		vals = x
	case bson.D:
		vals = pairValues(x)
	default:
		return r2.Point{}, false
	}
	p, err := LegacyPoint(vals)
	return p, err == nil
}

func number(v any) (float64, bool) {
	switch v.(type) {
	case int, int32, int64, float64, bson.Decimal128:
		return value.ToFloat(v)
	}
	return 0, false
}

func inBounds(lng, lat float64) bool {
	return lng >= -180 && lng <= 180 && lat >= -90 && lat <= 90
}

func pointOf(lng, lat float64) s2.Point {
	return s2.PointFromLatLng(s2.LatLngFromDegrees(lat, lng).Normalized())
}

// ParseGeoJSON parses a GeoJSON object: Point, LineString, Polygon,
// MultiPoint, MultiLineString, MultiPolygon or GeometryCollection.
func ParseGeoJSON(d bson.D) (*Shape, error) {
	t, _ := value.Get(d, "type")
	typ, _ := t.(string)
	if err := checkCRS(d); err != nil {
		return nil, err
	}
	if typ == "GeometryCollection" {
		return parseCollection(d)
	}
	coords, ok := value.Get(d, "coordinates")
	if !ok {
		if !knownType(typ) {
			return nil, parseErr("unknown GeoJSON type: %s", shellish(d))
		}
		return nil, parseErr("coordinates must be an array")
	}
	arr, isArr := coords.(bson.A)
	if !isArr {
		return nil, parseErr("coordinates must be an array")
	}
	s := &Shape{}
	var err error
	switch typ {
	case "Point":
		err = s.addPoint(arr)
		s.Single = true
	case "LineString":
		err = s.addLine(arr)
	case "Polygon":
		err = s.addPolygon(arr)
	case "MultiPoint":
		if len(arr) == 0 {
			return nil, parseErr("MultiPoint coordinates must have at least 1 element")
		}
		for _, p := range arr {
			if err = s.addPoint(p); err != nil {
				break
			}
		}
	case "MultiLineString":
		if len(arr) == 0 {
			return nil, parseErr("MultiLineString coordinates must have at least 1 element")
		}
		for _, l := range arr {
			if err = s.addLine(l); err != nil {
				break
			}
		}
	case "MultiPolygon":
		if len(arr) == 0 {
			return nil, parseErr("MultiPolygon coordinates must have at least 1 element")
		}
		for _, p := range arr {
			if err = s.addPolygon(p); err != nil {
				break
			}
		}
	default:
		return nil, parseErr("unknown GeoJSON type: %s", shellish(d))
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

func knownType(t string) bool {
	switch t {
	case "Point", "LineString", "Polygon", "MultiPoint", "MultiLineString", "MultiPolygon", "GeometryCollection":
		return true
	}
	return false
}

func parseCollection(d bson.D) (*Shape, error) {
	g, ok := value.Get(d, "geometries")
	arr, isArr := g.(bson.A)
	if !ok || !isArr {
		return nil, parseErr("GeometryCollection geometries must be an array")
	}
	if len(arr) == 0 {
		return nil, parseErr("GeometryCollection geometries must have at least 1 element")
	}
	out := &Shape{}
	for _, e := range arr {
		sub, isDoc := e.(bson.D)
		if !isDoc {
			return nil, parseErr("Element %d of \"geometries\" is not an object", len(out.Points))
		}
		s, err := ParseGeoJSON(sub)
		if err != nil {
			return nil, err
		}
		out.Points = append(out.Points, s.Points...)
		out.Flat = append(out.Flat, s.Flat...)
		out.Lines = append(out.Lines, s.Lines...)
		out.Polys = append(out.Polys, s.Polys...)
	}
	return out, nil
}

// checkCRS accepts the default CRS names; the strict winding CRS of big
// polygons is unsupported, any other name an error.
func checkCRS(d bson.D) error {
	c, ok := value.Get(d, "crs")
	if !ok {
		return nil
	}
	cd, _ := c.(bson.D)
	props, _ := value.Get(cd, "properties")
	pd, _ := props.(bson.D)
	name, _ := value.Get(pd, "name")
	switch name {
	case "urn:ogc:def:crs:OGC:1.3:CRS84", "EPSG:4326":
		return nil
	case "urn:x-mongodb:crs:strictwinding:EPSG:4326":
		return errStrictWinding
	}
	if cd == nil || pd == nil {
		return parseErr("GeoJSON CRS must be an object")
	}
	return parseErr("Unknown CRS name: %v", name)
}

// coordinate parses one GeoJSON position [lng, lat, (altitude)].
func coordinate(v any) (lng, lat float64, err error) {
	arr, ok := v.(bson.A)
	if !ok {
		return 0, 0, parseErr("Point must be an array or object, instead got type %s", typeName(v))
	}
	if len(arr) < 2 {
		return 0, 0, parseErr("Point must only contain numeric elements")
	}
	for _, e := range arr {
		if _, isNum := number(e); !isNum {
			return 0, 0, parseErr("Point must only contain numeric elements")
		}
	}
	if len(arr) > 3 {
		return 0, 0, parseErr("Point must only contain 2 or 3 elements")
	}
	lng, _ = number(arr[0])
	lat, _ = number(arr[1])
	if !inBounds(lng, lat) {
		return 0, 0, parseErr("Longitude/latitude is out of bounds, lng: %s lat: %s", num(lng), num(lat))
	}
	return lng, lat, nil
}

// num formats a coordinate as mongod's messages do (six significant digits).
func num(f float64) string { return strconv.FormatFloat(f, 'g', 6, 64) }

func (s *Shape) addPoint(v any) error {
	lng, lat, err := coordinate(v)
	if err != nil {
		return err
	}
	s.Points = append(s.Points, pointOf(lng, lat))
	s.Flat = append(s.Flat, r2.Point{X: lng, Y: lat})
	return nil
}

// vertices parses a position array, dropping consecutive duplicates.
func vertices(v any) ([]s2.Point, error) {
	arr, ok := v.(bson.A)
	if !ok {
		return nil, parseErr("coordinates must be an array")
	}
	out := make([]s2.Point, 0, len(arr))
	for _, e := range arr {
		lng, lat, err := coordinate(e)
		if err != nil {
			return nil, err
		}
		p := pointOf(lng, lat)
		if len(out) > 0 && out[len(out)-1] == p {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

func (s *Shape) addLine(v any) error {
	pts, err := vertices(v)
	if err != nil {
		return err
	}
	if len(pts) < 2 {
		return parseErr("GeoJSON LineString must have at least 2 vertices: %s", shellish(v))
	}
	for i := 0; i+1 < len(pts); i++ {
		if pts[i] == (s2.Point{Vector: pts[i+1].Mul(-1)}) {
			return parseErr("Invalid LineString: Vertices %d and %d are antipodal", i, i+1)
		}
	}
	line := s2.Polyline(pts)
	s.Lines = append(s.Lines, &line)
	return nil
}

func (s *Shape) addPolygon(v any) error {
	rings, ok := v.(bson.A)
	if !ok {
		return parseErr("Polygon coordinates must be an array")
	}
	if len(rings) == 0 {
		return parseErr("Polygon has no loops.")
	}
	loops := make([]*s2.Loop, 0, len(rings))
	for i, r := range rings {
		l, err := ring(r)
		if err != nil {
			return err
		}
		if i > 0 && !loops[0].Contains(l) {
			return parseErr("Secondary loops not contained by first exterior loop - secondary loops must be holes: %s", shellish(r))
		}
		loops = append(loops, l)
	}
	for i := 1; i < len(loops); i++ {
		for j := i + 1; j < len(loops); j++ {
			if loops[i].Intersects(loops[j]) {
				return parseErr("Loop %d and loop %d intersect", i, j)
			}
		}
	}
	s.Polys = append(s.Polys, s2.PolygonFromLoops(loops))
	return nil
}

// ring parses one closed GeoJSON ring into a normalized loop (the smaller
// of the two regions it bounds, as mongod reads non-strict polygons).
func ring(v any) (*s2.Loop, error) {
	arr, ok := v.(bson.A)
	if !ok {
		return nil, parseErr("Polygon coordinates must be an array")
	}
	pts, err := vertices(arr)
	if err != nil {
		return nil, err
	}
	if len(arr) > 0 && !sameCoordinate(arr[0], arr[len(arr)-1]) {
		return nil, parseErr("Loop is not closed, first vertex does not equal last vertex: %s", shellish(v))
	}
	if len(pts) > 1 && pts[0] == pts[len(pts)-1] {
		pts = pts[:len(pts)-1]
	}
	if len(pts) < 3 {
		return nil, parseErr("Loop must have at least 3 different vertices: %s", shellish(v))
	}
	if err := selfCrossing(pts); err != nil {
		return nil, err
	}
	l := s2.LoopFromPoints(pts)
	if err := l.Validate(); err != nil {
		return nil, parseErr("Loop is not valid: %s %v", shellish(v), err)
	}
	l.Normalize()
	return l, nil
}

func sameCoordinate(a, b any) bool {
	x, _ := a.(bson.A)
	y, _ := b.(bson.A)
	if len(x) < 2 || len(y) < 2 {
		return false
	}
	for i := 0; i < 2; i++ {
		p, _ := number(x[i])
		q, _ := number(y[i])
		if p != q {
			return false
		}
	}
	return true
}

// maxCrossingCheck bounds the quadratic self-crossing check of a ring.
const maxCrossingCheck = 4096

// selfCrossing reports two non-adjacent edges of a ring that cross or
// touch, or a repeated vertex, which make the loop invalid.
func selfCrossing(pts []s2.Point) error {
	n := len(pts)
	if n > maxCrossingCheck {
		return nil
	}
	seen := make(map[s2.Point]int, n)
	for i, p := range pts {
		if j, dup := seen[p]; dup {
			return parseErr("Loop is not valid: Duplicate vertices: %d and %d", j, i)
		}
		seen[p] = i
	}
	for i := 0; i < n; i++ {
		a, b := pts[i], pts[(i+1)%n]
		for j := i + 2; j < n; j++ {
			if i == 0 && j == n-1 {
				continue // adjacent through the closing edge
			}
			if s2.CrossingSign(a, b, pts[j], pts[(j+1)%n]) == s2.Cross {
				return parseErr("Loop is not valid: Edges %d and %d cross", i, j)
			}
		}
	}
	return nil
}

// typeName is the BSON type name mongod's geo messages use.
func typeName(v any) string {
	switch v.(type) {
	case nil, bson.Null:
		return "null"
	case string:
		return "string"
	case bool:
		return "bool"
	case int32:
		return "int"
	case int64:
		return "long"
	case float64:
		return "double"
	case bson.Decimal128:
		return "decimal"
	case bson.D:
		return "object"
	case bson.A:
		return "array"
	}
	return fmt.Sprintf("%T", v)
}

// shellish renders a value for a message, close to mongod's BSON text.
func shellish(v any) string {
	switch x := v.(type) {
	case bson.D:
		if len(x) == 0 {
			return "{}"
		}
		s := "{ "
		for i, e := range x {
			if i > 0 {
				s += ", "
			}
			s += e.Key + ": " + shellish(e.Value)
		}
		return s + " }"
	case bson.A:
		if len(x) == 0 {
			return "[]"
		}
		s := "[ "
		for i, e := range x {
			if i > 0 {
				s += ", "
			}
			s += shellish(e)
		}
		return s + " ]"
	case string:
		return strconv.Quote(x)
	case float64:
		if x == float64(int64(x)) {
			return strconv.FormatFloat(x, 'f', 1, 64)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return fmt.Sprint(v)
}
