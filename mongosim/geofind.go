package mongosim

import (
	"sort"

	"github.com/golang/geo/s2"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/query"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// compileNearFilter is compileFilter for the commands whose filter may hold
// $near or $nearSphere: find, update, delete and findAndModify (where the
// nearest documents are the ones written first).
func (e opEnv) compileNearFilter(filter bson.D) (*query.Filter, error) {
	o := e.queryOptions(filter)
	o.AllowNear = true
	return query.CompileFilterWith(filter, o)
}

// findDocs reads find's documents: by distance for a $near filter, else
// in natural order (readDocs).
func (r *request) findDocs(coll string, f *query.Filter, filterDoc bson.D, limit int, hint any) ([]bson.D, error) {
	if f.Near() == nil {
		if docs, ok, err := r.geoIndexedDocs(coll, f, limit, hint); ok || err != nil {
			return docs, err
		}
		return r.readDocs(coll, f, filterDoc, limit, hint)
	}
	return r.nearDocs(coll, f, filterDoc, limit, hint)
}

// errNoGeoIndex is mongod's planner error for a proximity query without a
// usable geo index.
func errNoGeoIndex(ns string) error {
	return &cmderr.Error{Code: 291, Name: "NoQueryExecutionPlans",
		Message: "error processing query: ns=" + ns + " planner returned error :: caused by :: unable to find index for $geoNear query"}
}

// nearIndex returns the index of c that can answer a proximity query on
// path: a 2dsphere index for a GeoJSON point, a 2d index for a flat
// legacy $near, either for a legacy $nearSphere.
func nearIndex(c *collection, path string, geoJSON, sphere bool) *index {
	var best *index
	for _, ix := range c.indexes {
		g := ix.geo
		if g == nil || ix.hidden || !g.hasGeoField(path) {
			continue
		}
		switch {
		case g.flat && (geoJSON || best != nil):
		case !g.flat && !sphere:
		default:
			if best == nil || best.geo.flat {
				best = ix
			}
		}
	}
	return best
}

// nearDocs answers a find with $near or $nearSphere: the matching
// documents nearest first, at most limit (> 0). A 2dsphere index is
// searched by expanding cell coverings; 2d indexes, transactions and
// snapshot reads sort a scan by distance.
func (r *request) nearDocs(coll string, f *query.Filter, filterDoc bson.D, limit int, hint any) ([]bson.D, error) {
	nc := f.Near()
	if r.data().viewOf(r.db, coll) != nil {
		return nil, cmderr.New(5626500, "$geoNear, $near, and $nearSphere are not allowed in this context, as these operators require sorting geospatial data. If you do not need sort, consider using $geoWithin instead.")
	}
	var out []bson.D
	scan, exists := false, false
	err := r.data().read(r.db, coll, func(c *collection) error {
		if c == nil {
			return nil
		}
		exists = true
		ix := nearIndex(c, nc.Path, nc.Near.GeoJSON, nc.Near.Sphere)
		if ix == nil {
			return errNoGeoIndex(c.ns())
		}
		if r.tx != nil || r.rc.level == "snapshot" || ix.geo.flat {
			scan = true
			return nil
		}
		var err error
		out, err = nearSearch(c, ix, nc, f, limit)
		return err
	})
	if err != nil || !scan || !exists {
		return out, err
	}
	docs, err := r.readDocs(coll, f, filterDoc, 0, hint)
	if err != nil {
		return nil, err
	}
	sortByDistance(docs, nc)
	if limit > 0 && len(docs) > limit {
		docs = docs[:limit]
	}
	return docs, nil
}

// nearSearch walks ix's S2 cells outward from the query point, matching
// the whole filter on each document reached.
func nearSearch(c *collection, ix *index, nc *query.NearClause, f *query.Filter, limit int) ([]bson.D, error) {
	gi, recs := ix.geo.nearCells(c, nc.Path)
	var out []bson.D
	var evalErr error
	gi.Near(nc.Near, func(i int) (float64, bool) { return nc.Distance(recs[i].doc) }, func(i int, _ float64) bool {
		ok, err := f.MatchErr(recs[i].doc)
		if err != nil {
			evalErr = err
			return false
		}
		if ok {
			out = append(out, value.CloneDoc(recs[i].doc))
		}
		return limit <= 0 || len(out) < limit
	})
	return out, evalErr
}

// sortByDistance orders docs nearest first (stable: ties keep their
// order).
func sortByDistance(docs []bson.D, nc *query.NearClause) {
	dist := make(map[*bson.E]float64, len(docs))
	for _, d := range docs {
		if len(d) > 0 {
			dist[&d[0]], _ = nc.Distance(d)
		}
	}
	key := func(d bson.D) float64 {
		if len(d) == 0 {
			return 0
		}
		return dist[&d[0]]
	}
	sort.SliceStable(docs, func(i, j int) bool { return key(docs[i]) < key(docs[j]) })
}

// hasNearFilter reports a find filter holding $near or $nearSphere.
func hasNearFilter(filter bson.D) bool {
	f, err := query.CompileFilterWith(filter, query.Options{AllowNear: true})
	return err == nil && f.Near() != nil
}

// geoNearFirst reports a pipeline starting with $geoNear.
func geoNearFirst(pipeline bson.A) bool {
	if len(pipeline) == 0 {
		return false
	}
	d, ok := pipeline[0].(bson.D)
	return ok && len(d) == 1 && d[0].Key == "$geoNear"
}

// nearPlan is explain's plan of a find with $near or $nearSphere: a
// GEO_NEAR_2DSPHERE (GEO_NEAR_2D) stage over the geo index, then the
// stages after it. A missing collection is EOF, as on mongod.
func nearPlan(r *request, s readShape) (*plan, error) {
	f, err := query.CompileFilterWith(s.filter, query.Options{AllowNear: true})
	if err != nil {
		return nil, err
	}
	nc := f.Near()
	var ix *index
	err = r.data().read(r.db, s.coll, func(c *collection) error {
		if c == nil {
			return nil
		}
		if ix = nearIndex(c, nc.Path, nc.Near.GeoJSON, nc.Near.Sphere); ix == nil {
			return errNoGeoIndex(c.ns())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if ix == nil {
		return &plan{stage: "EOF", works: 1}, nil
	}
	docs, err := r.nearDocs(s.coll, f, s.filter, 0, s.hint)
	if err != nil {
		return nil, err
	}
	n := int64(len(docs))
	stage := "GEO_NEAR_2DSPHERE"
	if ix.geo.flat {
		stage = "GEO_NEAR_2D"
	}
	p := &plan{stage: stage, n: n, works: n + 1,
		spec: bson.D{{Key: "keyPattern", Value: ix.key}, {Key: "indexName", Value: ix.name}, {Key: "indexVersion", Value: int32(2)}}}
	return s.finish(p, n, false), nil
}

// matchNear is collection.match for a filter with $near: the matching
// records nearest first, at most limit (> 0), through the geo index.
func (c *collection) matchNear(f *query.Filter, limit int) ([]*record, error) {
	nc := f.Near()
	ix := nearIndex(c, nc.Path, nc.Near.GeoJSON, nc.Near.Sphere)
	if ix == nil {
		return nil, errNoGeoIndex(c.ns())
	}
	type hit struct {
		r *record
		d float64
	}
	var hits []hit
	var evalErr error
	add := func(r *record, d float64) bool {
		ok, err := f.MatchErr(r.doc)
		if err != nil {
			evalErr = err
			return false
		}
		if ok {
			hits = append(hits, hit{r, d})
		}
		return limit <= 0 || len(hits) < limit
	}
	if c.txn == nil && !ix.geo.flat && nc.Near.Sphere {
		gi, recs := ix.geo.nearCells(c, nc.Path)
		gi.Near(nc.Near, func(i int) (float64, bool) { return nc.Distance(recs[i].doc) }, func(i int, d float64) bool { return add(recs[i], d) })
	} else {
		var all []hit
		c.each(func(r *record) bool {
			if d, ok := nc.Distance(r.doc); ok {
				all = append(all, hit{r, d})
			}
			return true
		})
		sort.SliceStable(all, func(i, j int) bool { return all[i].d < all[j].d })
		for _, h := range all {
			if !add(h.r, h.d) {
				break
			}
		}
	}
	out := make([]*record, len(hits))
	for i, h := range hits {
		out[i] = h.r
	}
	return out, evalErr
}

// geoIndexedDocs answers a find whose filter has a top-level $geoWithin or
// $geoIntersects on a 2dsphere-indexed field from the index's cells: only
// the documents with a cell meeting the region's covering are matched,
// then returned in natural order. ok is false when no index applies (a
// hint, a transaction, a snapshot read, a view, a flat region).
func (r *request) geoIndexedDocs(coll string, f *query.Filter, limit int, hint any) (docs []bson.D, ok bool, err error) {
	regions := f.GeoRegions()
	if len(regions) == 0 || hint != nil || r.tx != nil || r.rc.level == "snapshot" || r.data().viewOf(r.db, coll) != nil {
		return nil, false, nil
	}
	err = r.data().read(r.db, coll, func(c *collection) error {
		if c == nil {
			return nil
		}
		for _, g := range regions {
			ix := nearIndex(c, g.Path, true, true)
			if ix == nil || ix.geo.flat || ix.partial != nil {
				continue
			}
			covering, coverable := g.Covering()
			if !coverable {
				continue
			}
			ok = true
			docs, err = withinSearch(c, ix, g.Path, covering, f, limit)
			return err
		}
		return nil
	})
	return docs, ok, err
}

// withinSearch matches f on the records whose cells meet covering, in
// natural order, at most limit (> 0).
func withinSearch(c *collection, ix *index, path string, covering []s2.CellID, f *query.Filter, limit int) ([]bson.D, error) {
	gi, recs := ix.geo.nearCells(c, path)
	var cands []*record
	gi.Within(covering, func(i int) { cands = append(cands, recs[i]) })
	sort.Slice(cands, func(i, j int) bool { return cands[i].pos < cands[j].pos })
	var out []bson.D
	for _, rec := range cands {
		ok, err := f.MatchErr(rec.doc)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, value.CloneDoc(rec.doc))
			if limit > 0 && len(out) == limit {
				break
			}
		}
	}
	return out, nil
}
