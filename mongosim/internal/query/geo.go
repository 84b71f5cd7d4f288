package query

import (
	"github.com/golang/geo/s2"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/geo"
)

// geoState is what compiling a filter learns about geo proximity: its one
// $near or $nearSphere clause, and whether the command admits one.
type geoState struct {
	allowNear bool
	near      *NearClause
	regions   []GeoRegion
}

// GeoRegion is a top-level $geoWithin or $geoIntersects of a filter: the
// documents it can match have a geometry at Path meeting Covering's cells,
// so a 2dsphere index on Path can find them.
type GeoRegion struct {
	Path     string
	Covering func() ([]s2.CellID, bool)
}

// GeoRegions returns the filter's top-level geo predicates that an index
// may answer (nil: none).
func (f *Filter) GeoRegions() []GeoRegion {
	if f == nil {
		return nil
	}
	return f.regions
}

// NearClause is a filter's $near or $nearSphere: the field path and the
// proximity query. find orders its results by this distance.
type NearClause struct {
	Path string
	Near *geo.Near
	p    pathSpec
}

// Near returns the filter's $near or $nearSphere clause (nil: none).
func (f *Filter) Near() *NearClause {
	if f == nil {
		return nil
	}
	return f.near
}

// Distance is the distance from the clause's point to the nearest
// geometry doc holds at the path, and false when it holds none.
func (c *NearClause) Distance(doc bson.D) (float64, bool) {
	return c.Near.DistanceOf(c.Values(doc))
}

// Values returns the values doc holds at the clause's path: each value
// reached and, for an array, each of its elements.
func (c *NearClause) Values(doc bson.D) []any {
	return pathValues(doc, c.p)
}

// ValuesAt is NearClause.Values for any dotted path.
func ValuesAt(doc bson.D, path string) []any {
	return pathValues(doc, newPath(path, compileCtx{}))
}

func pathValues(doc bson.D, p pathSpec) []any {
	col := &collectLeaf{}
	p.with(col).matchDoc(doc, nil)
	return col.vals
}

// collectLeaf gathers every value a path walk offers it.
type collectLeaf struct{ vals []any }

func (c *collectLeaf) matches(v any) bool {
	if v != missing {
		c.vals = append(c.vals, v)
	}
	return false
}

// nearNotAllowed is mongod's error for $near outside find.
func nearNotAllowed() error {
	return cmderr.New(5626500, "$geoNear, $near, and $nearSphere are not allowed in this context, as these operators require sorting geospatial data. If you do not need sort, consider using $geoWithin instead.")
}

func hasNear(ops bson.D) bool {
	for _, e := range ops {
		if e.Key == "$near" || e.Key == "$nearSphere" {
			return true
		}
	}
	return false
}

// compileNear compiles {$near: .., $maxDistance: .., $minDistance: ..} on
// one path: a predicate on the distance bounds, recorded for find to sort.
func compileNear(p pathSpec, ops bson.D, ctx compileCtx) (node, error) {
	if ctx.geo == nil || !ctx.geo.allowNear {
		return nil, nearNotAllowed()
	}
	if ctx.nested || ctx.notTop || p.noExpand {
		return nil, cmderr.New(cmderr.BadValue, "geoNear must be top-level expr")
	}
	if ctx.geo.near != nil {
		return nil, cmderr.New(cmderr.BadValue, "Too many geoNear expressions")
	}
	n, err := geo.ParseNear(ops)
	if err != nil {
		return nil, err
	}
	c := &NearClause{Path: p.path, Near: n, p: p}
	ctx.geo.near = c
	return nearNode{c}, nil
}

// nearNode matches documents with a geometry within the clause's bounds.
type nearNode struct{ c *NearClause }

func (n nearNode) matchDoc(d bson.D, _ *int) bool {
	dist, ok := n.c.Distance(d)
	return ok && n.c.Near.Accepts(dist)
}

func (n nearNode) match(v any, pos *int) bool {
	d, ok := v.(bson.D)
	return ok && n.matchDoc(d, pos)
}

// compileGeo compiles $geoWithin (or $within) and $geoIntersects.
func compileGeo(p pathSpec, op string, arg any, ctx compileCtx) (node, error) {
	var leaf geoLeaf
	var covering func() ([]s2.CellID, bool)
	if op == "$geoIntersects" {
		q, err := geo.ParseIntersects(arg)
		if err != nil {
			return nil, err
		}
		leaf, covering = q.Intersects, q.Covering
	} else {
		r, err := geo.ParseWithin(arg)
		if err != nil {
			return nil, err
		}
		leaf, covering = r.Contains, r.Covering
	}
	if ctx.geo != nil && !ctx.nested && !ctx.notTop && !p.noExpand {
		ctx.geo.regions = append(ctx.geo.regions, GeoRegion{Path: p.path, Covering: covering})
	}
	return p.with(leaf), nil
}

// geoLeaf applies a geo predicate to a value that parses as a geometry.
type geoLeaf func(*geo.Shape) bool

func (l geoLeaf) matches(v any) bool {
	switch v.(type) {
	case bson.D, bson.A:
	default:
		return false
	}
	s, err := geo.ParseStored(v)
	return err == nil && l(s)
}

// NewNearClause is the clause of a $geoNear stage: near on path.
func NewNearClause(path string, n *geo.Near) *NearClause {
	return &NearClause{Path: path, Near: n, p: newPath(path, compileCtx{})}
}
