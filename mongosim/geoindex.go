package mongosim

import (
	"errors"
	"strconv"
	"strings"
	"sync"

	"github.com/golang/geo/s2"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/geo"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// geoIndex is what makes an index a 2dsphere or 2d index: its geo fields
// and a 2d index's plane bounds. Writes check that documents have valid
// geometries there (keysOf); the S2 cells a $near search walks are built
// lazily per collection version (nearCells).
type geoIndex struct {
	flat     bool     // a 2d index (else 2dsphere)
	fields   []string // the geo fields (a 2d index has one, first)
	min, max float64  // a 2d index's bounds
	cache    *geoCache
}

// geoCache holds the S2 cells of one 2dsphere field for a collection
// version. It is shared by the shallow copies transactions and renames
// make of an index, so its key names the collection it was built for.
type geoCache struct {
	mu    sync.Mutex
	key   geoCacheKey
	field string
	recs  []*record
	index *geo.Index
	gen   uint64 // numbers the builds, for recCells.gen
}

// recCells are a record's S2 cells on one 2dsphere field, computed from
// the document version doc points into (stored documents are replaced,
// never modified), so a rebuild after a write parses only the documents
// written. geoCellsMu guards record.geo: caches of different indexes may
// rebuild at once under the collection's read lock.
type recCells struct {
	doc   *bson.E
	field string
	cells []s2.CellID
	// owner, gen and pos: the record was document pos of owner's build
	// gen, so the next build keeps its index entries.
	owner *geoCache
	gen   uint64
	pos   int32
}

var geoCellsMu sync.Mutex

type geoCacheKey struct {
	c               *collection
	mutations, live int
	order           int
}

// parseGeoKey records a geo key type of an index key pattern; it reports
// false for a type that is not geo.
func (ix *index) parseGeoKey(field, typ string, pos int) (bool, error) {
	switch typ {
	case "2dsphere":
		if ix.geo == nil {
			ix.geo = &geoIndex{cache: &geoCache{}}
		}
		if ix.geo.flat {
			return true, cmderr.New(16800, "can't have 2 geo fields")
		}
	case "2d":
		if pos != 0 {
			return true, cmderr.New(16801, "2d has to be first in index")
		}
		if ix.geo != nil {
			return true, cmderr.New(16800, "can't have 2 geo fields")
		}
		ix.geo = &geoIndex{flat: true, min: -180, max: 180, cache: &geoCache{}}
	default:
		return false, nil
	}
	ix.geo.fields = append(ix.geo.fields, field)
	return true, nil
}

// geoSpecOptions are the index options only geo indexes take.
var geoSpecOptions = map[string]bool{"2dsphereIndexVersion": true, "bits": true, "min": true, "max": true,
	"coarsestIndexedLevel": true, "finestIndexedLevel": true}

// finishGeoSpec checks a geo index's options and returns those listIndexes
// reports (2dsphereIndexVersion: 3 by default, as mongod 8.0).
func (ix *index) finishGeoSpec(opts bson.D) (bson.D, error) {
	if ix.geo == nil {
		if len(opts) > 0 {
			return nil, cmderr.Unsupported("index option '" + opts[0].Key + "'")
		}
		return nil, nil
	}
	var out bson.D
	version := any(int32(3))
	for _, e := range opts {
		switch e.Key {
		case "2dsphereIndexVersion":
			if n, ok := value.ToInt64(e.Value); !ok || n < 1 || n > 3 {
				return nil, cmderr.New(cmderr.CannotCreateIndex, "unsupported geo index version { 2dsphereIndexVersion : %v }, only support versions: [1,2,3]", e.Value)
			}
			version = e.Value
		case "bits":
			n, ok := value.ToInt64(e.Value)
			if !ok || n < 1 || n > 32 {
				return nil, cmderr.New(13028, "bits in geo index must be between 1 and 32")
			}
			out = append(out, e)
		case "min", "max":
			f, ok := value.ToFloat(e.Value)
			if !ok {
				return nil, cmderr.New(cmderr.TypeMismatch, "%s must be a number", e.Key)
			}
			if e.Key == "min" {
				ix.geo.min = f
			} else {
				ix.geo.max = f
			}
			out = append(out, e)
		default:
			out = append(out, e)
		}
	}
	if ix.geo.flat && ix.geo.min >= ix.geo.max {
		return nil, cmderr.New(13027, "max must be greater than min")
	}
	if ix.unique {
		return nil, cmderr.Unsupported("unique geo indexes")
	}
	if !ix.geo.flat {
		out = append(bson.D{{Key: "2dsphereIndexVersion", Value: version}}, out...)
	}
	return out, nil
}

// checkGeo refuses a document whose geo fields the index cannot index, as
// mongod's key generation does (16755 for 2dsphere, 13027/16804 for 2d).
func (g *geoIndex) checkGeo(doc bson.D) error {
	for _, f := range g.fields {
		vals := pathValues(doc, strings.Split(f, "."), nil, false)
		for _, v := range vals {
			var err error
			if g.flat {
				err = g.check2d(doc, v)
			} else if notGeoValue(v) {
				return cmderr.New(16755, "Can't extract geo keys: %s  geo element must be an array or object: %s: %s", shellString(doc), lastPart(f), shellString(v))
			} else if _, err = sphereShapes(v); err != nil {
				return cmderr.New(16755, "Can't extract geo keys: %s  %s", shellString(doc), err.Error())
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// notGeoValue reports a value that is neither a geometry nor empty.
func notGeoValue(v any) bool {
	switch v.(type) {
	case bson.D, bson.A, nil, bson.Null, bson.Undefined:
		return false
	}
	return true
}

// sphereShapes parses the geometries of one 2dsphere field value: none for
// null or an empty array, several for an array of geometries.
func sphereShapes(v any) ([]*geo.Shape, error) {
	switch x := v.(type) {
	case nil, bson.Null, bson.Undefined:
		return nil, nil
	case bson.A:
		if len(x) == 0 {
			return nil, nil
		}
		switch x[0].(type) {
		case bson.D, bson.A:
			out := make([]*geo.Shape, 0, len(x))
			for _, e := range x {
				s, err := sphereShape(e)
				if err != nil {
					return nil, err
				}
				out = append(out, s)
			}
			return out, nil
		}
	}
	s, err := sphereShape(v)
	if err != nil {
		return nil, err
	}
	return []*geo.Shape{s}, nil
}

func sphereShape(v any) (*geo.Shape, error) {
	s, err := geo.ParseStored(v)
	if err != nil {
		return nil, err
	}
	if s.Legacy && len(s.Points) == 0 {
		p := s.Flat[0]
		return nil, errors.New("Longitude/latitude is out of bounds, lng: " + fmtCoord(p.X) + " lat: " + fmtCoord(p.Y))
	}
	return s, nil
}

// fmtCoord formats a coordinate as mongod's messages do (C++ streams).
func fmtCoord(f float64) string { return strconv.FormatFloat(f, 'g', 6, 64) }

// check2d checks one 2d field value: a legacy pair, or an array or object
// of them, within [min, max).
func (g *geoIndex) check2d(doc bson.D, v any) error {
	var elems []any
	switch x := v.(type) {
	case bson.A:
		elems = x
	case bson.D:
		elems = make([]any, len(x))
		for i, e := range x {
			elems[i] = e.Value
		}
	default:
		return nil // not indexed
	}
	if len(elems) == 0 {
		return nil
	}
	if _, num := value.ToFloat(elems[0]); num {
		return g.checkPair(doc, v)
	}
	for _, e := range elems {
		switch e.(type) {
		case bson.A, bson.D:
			if err := g.checkPair(doc, e); err != nil {
				return err
			}
		default:
			return cmderr.New(16804, "location object expected, location array not in correct format")
		}
	}
	return nil
}

func (g *geoIndex) checkPair(doc bson.D, v any) error {
	p, ok := geo.LegacyPointOf(v)
	if !ok {
		return nil
	}
	if p.X < g.min || p.X >= g.max || p.Y < g.min || p.Y >= g.max {
		return cmderr.New(13027, "point not in interval of [ %s, %s ) :: caused by :: %s",
			fmtCoord(g.min), fmtCoord(g.max), shellString(doc))
	}
	return nil
}

// hasGeoField reports whether the index answers proximity on path.
func (g *geoIndex) hasGeoField(path string) bool {
	for _, f := range g.fields {
		if f == path {
			return true
		}
	}
	return false
}

// nearCells returns the S2 index of c's documents on field (a 2dsphere
// geo field) and the records it numbers, building it when c changed.
func (g *geoIndex) nearCells(c *collection, field string) (*geo.Index, []*record) {
	key := geoCacheKey{c: c, mutations: c.mutations, live: c.live, order: len(c.order)}
	gc := g.cache
	gc.mu.Lock()
	defer gc.mu.Unlock()
	if gc.index != nil && gc.key == key && gc.field == field {
		return gc.index, gc.recs
	}
	if gc.index == nil || gc.field != field || gc.key.c != c {
		gc.index, gc.recs = &geo.Index{}, nil // nothing to keep
	}
	remap := make([]int32, len(gc.recs))
	for i := range remap {
		remap[i] = -1
	}
	var recs []*record
	var added [][]s2.CellID
	var addedDocs []int32
	parts := strings.Split(field, ".")
	geoCellsMu.Lock()
	c.each(func(r *record) bool {
		if len(r.doc) == 0 {
			return true
		}
		rc := r.geo
		kept := rc != nil && rc.doc == &r.doc[0] && rc.field == field
		if !kept {
			rc = &recCells{doc: &r.doc[0], field: field, cells: docCellsOf(r.doc, parts)}
			r.geo = rc
		}
		if len(rc.cells) == 0 {
			return true
		}
		pos := int32(len(recs))
		if kept && rc.owner == gc && rc.gen == gc.gen && int(rc.pos) < len(remap) {
			remap[rc.pos] = pos
		} else {
			added, addedDocs = append(added, rc.cells), append(addedDocs, pos)
		}
		rc.owner, rc.gen, rc.pos = gc, gc.gen+1, pos
		recs = append(recs, r)
		return true
	})
	geoCellsMu.Unlock()
	gc.index = gc.index.Update(remap, addedDocs, added, len(recs))
	gc.key, gc.field, gc.recs = key, field, recs
	gc.gen++
	return gc.index, recs
}

// docCellsOf returns the S2 cells of a document's geometries at a path.
func docCellsOf(doc bson.D, parts []string) []s2.CellID {
	var cs []s2.CellID
	for _, v := range pathValues(doc, parts, nil, false) {
		shapes, err := sphereShapes(v)
		if err != nil {
			continue
		}
		for _, s := range shapes {
			cs = append(cs, geo.Cells(s)...)
		}
	}
	return cs
}

// geoBuildFailed words a geometry refused while building a geo index as
// mongod's index builds do (the reason behind the build's and collection's
// UUIDs, the code kept).
func geoBuildFailed(c *collection, err error) error {
	var ce *cmderr.Error
	if !errors.As(err, &ce) {
		return err
	}
	switch ce.Code {
	case 16755, 13027, 16804:
		return cmderr.New(ce.Code, "Index build failed: %s: Collection %s ( %s ) :: caused by :: %s",
			uuidString(randomUUID()), c.ns(), uuidString(c.uuid.Data), ce.Message)
	}
	return err
}
