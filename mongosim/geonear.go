package mongosim

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/geo"
	"github.com/sturdy-go/sturdy/mongosim/internal/query"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// geoNearSpec is a parsed $geoNear stage.
type geoNearSpec struct {
	near          any
	spherical     bool
	distanceField string
	includeLocs   string
	key           string
	multiplier    float64
	query         bson.D
	minD, maxD    any
}

func parseGeoNear(arg any) (*geoNearSpec, error) {
	d, ok := arg.(bson.D)
	if !ok {
		return nil, cmderr.New(10065, "invalid parameter: expected an object ($geoNear)")
	}
	g := &geoNearSpec{multiplier: 1}
	for _, e := range d {
		switch e.Key {
		case "near":
			g.near = e.Value
		case "spherical":
			g.spherical = truthy(e.Value)
		case "distanceField", "includeLocs", "key":
			s, ok := e.Value.(string)
			if !ok {
				return nil, cmderr.New(cmderr.TypeMismatch, "$geoNear requires that '%s' option is a String", e.Key)
			}
			switch e.Key {
			case "distanceField":
				g.distanceField = s
			case "includeLocs":
				g.includeLocs = s
			default:
				if s == "" {
					return nil, cmderr.New(cmderr.BadValue, "$geoNear parameter 'key' cannot be the empty string")
				}
				g.key = s
			}
		case "distanceMultiplier":
			f, ok := value.ToFloat(e.Value)
			if !ok || f < 0 {
				return nil, cmderr.New(cmderr.BadValue, "distanceMultiplier must be a non-negative number")
			}
			g.multiplier = f
		case "query":
			q, ok := e.Value.(bson.D)
			if !ok {
				return nil, cmderr.New(cmderr.TypeMismatch, "query must be an object")
			}
			g.query = q
		case "minDistance":
			g.minD = e.Value
		case "maxDistance":
			g.maxD = e.Value
		default:
			return nil, cmderr.New(cmderr.BadValue, "Unknown argument to $geoNear: %s", e.Key)
		}
	}
	if g.near == nil {
		return nil, cmderr.New(cmderr.BadValue, "$geoNear requires a 'near' option as an Array")
	}
	if g.distanceField == "" {
		return nil, cmderr.New(16606, "$geoNear requires a 'distanceField' option as a String")
	}
	return g, nil
}

// geoNearKey picks the index field a $geoNear stage searches: the named
// key, else the one 2d index, else the one 2dsphere index field.
func geoNearKey(c *collection, key string) (*index, string, error) {
	var flat, sphere []*index
	var sphereField string
	for _, ix := range c.indexes {
		if ix.geo == nil || ix.hidden {
			continue
		}
		if key != "" && ix.geo.hasGeoField(key) {
			return ix, key, nil
		}
		if ix.geo.flat {
			flat = append(flat, ix)
		} else {
			sphere = append(sphere, ix)
			if len(ix.geo.fields) > 1 {
				sphere = append(sphere, ix) // several geo fields: ambiguous
			}
			sphereField = ix.geo.fields[0]
		}
	}
	switch {
	case key != "":
		return nil, "", cmderr.New(cmderr.IndexNotFound, "$geoNear requires a 2d or 2dsphere index on key '%s', but none was found", key)
	case len(flat) > 1:
		return nil, "", cmderr.New(cmderr.IndexNotFound, "There is more than one 2d index on %s; unsure which to use for $geoNear", c.ns())
	case len(flat) == 1:
		return flat[0], flat[0].geo.fields[0], nil
	case len(sphere) > 1:
		return nil, "", cmderr.New(cmderr.IndexNotFound, "There is more than one 2dsphere index on %s; unsure which to use for $geoNear", c.ns())
	case len(sphere) == 1:
		return sphere[0], sphereField, nil
	}
	return nil, "", cmderr.New(cmderr.IndexNotFound, "$geoNear requires a 2d or 2dsphere index, but none were found")
}

// geoNearInput runs a leading $geoNear stage on coll: the documents
// matching its query, nearest first, with the distance (and location) set.
func (r *request) geoNearInput(coll string, arg any, env opEnv) ([]bson.D, error) {
	g, err := parseGeoNear(arg)
	if err != nil {
		return nil, err
	}
	f, err := env.compileFilter(g.query)
	if err != nil {
		return nil, err
	}
	var docs []bson.D
	var nc *query.NearClause
	scan := false
	err = r.data().read(r.db, coll, func(c *collection) error {
		if c == nil {
			return nil
		}
		ix, field, err := geoNearKey(c, g.key)
		if err != nil {
			return err
		}
		n, err := geo.NewNear(g.near, g.spherical || !ix.geo.flat)
		if err != nil {
			return err
		}
		if err := n.SetBounds(g.minD, g.maxD); err != nil {
			return err
		}
		nc = query.NewNearClause(field, n)
		if r.tx != nil || r.rc.level == "snapshot" || ix.geo.flat || !n.Sphere {
			scan = true
			return nil
		}
		docs, err = nearSearch(c, ix, nc, f, 0)
		return err
	})
	if err != nil || nc == nil {
		return nil, err
	}
	if scan {
		if docs, err = r.readDocs(coll, f, g.query, 0, nil); err != nil {
			return nil, err
		}
		docs = withinBounds(docs, nc)
		sortByDistance(docs, nc)
	}
	return g.annotate(docs, nc), nil
}

// withinBounds keeps the documents with a measurable distance within the
// clause's bounds.
func withinBounds(docs []bson.D, nc *query.NearClause) []bson.D {
	out := docs[:0]
	for _, d := range docs {
		if dist, ok := nc.Distance(d); ok && nc.Near.Accepts(dist) {
			out = append(out, d)
		}
	}
	return out
}

// annotate sets the distance field (times the multiplier) and the
// includeLocs field of each document.
func (g *geoNearSpec) annotate(docs []bson.D, nc *query.NearClause) []bson.D {
	distParts := strings.Split(g.distanceField, ".")
	var locParts []string
	if g.includeLocs != "" {
		locParts = strings.Split(g.includeLocs, ".")
	}
	for i, d := range docs {
		vals := nc.Values(d)
		at, dist, _ := nc.Near.Nearest(vals)
		out := setDocPath(d, distParts, dist*g.multiplier)
		if locParts != nil && at >= 0 {
			out = setDocPath(out, locParts, value.Clone(vals[at]))
		}
		docs[i] = out
	}
	return docs
}

// setDocPath sets a dotted path in doc (which the caller owns), creating
// documents along the way.
func setDocPath(doc bson.D, parts []string, v any) bson.D {
	for i := range doc {
		if doc[i].Key != parts[0] {
			continue
		}
		if len(parts) == 1 {
			doc[i].Value = v
		} else {
			sub, _ := doc[i].Value.(bson.D)
			doc[i].Value = setDocPath(sub, parts[1:], v)
		}
		return doc
	}
	if len(parts) == 1 {
		return append(doc, bson.E{Key: parts[0], Value: v})
	}
	return append(doc, bson.E{Key: parts[0], Value: setDocPath(nil, parts[1:], v)})
}

// leadingGeoNear runs the pipeline's first stage when it is $geoNear on a
// collection, reporting whether it did.
func (r *request) leadingGeoNear(coll string, pipeline bson.A, env opEnv) ([]bson.D, bool, error) {
	if coll == "" || len(pipeline) == 0 {
		return nil, false, nil
	}
	if !geoNearFirst(pipeline) {
		return nil, false, nil
	}
	d := pipeline[0].(bson.D)
	docs, err := r.geoNearInput(coll, d[0].Value, env)
	return docs, err == nil, err
}
