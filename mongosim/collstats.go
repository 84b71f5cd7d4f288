package mongosim

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// Collection statistics for collStats, $collStats and dbStats. Sizes are
// the BSON sizes of the documents; storageSize equals size (no compression
// or free space) and an index's size is estimated as its keys' BSON sizes
// plus 16 bytes of record id and overhead per entry.

// indexEntryOverhead is the per-entry cost in the index size estimate.
const indexEntryOverhead = 16

// collSizes are a collection's statistics, unscaled.
type collSizes struct {
	count, size, totalIndexSize int64
	indexSizes                  bson.D // name → int64 bytes
	capped                      bool
	cappedSize, cappedMax       int64
}

// sizesOf reads db.coll's statistics; found is false when it does not exist.
func sizesOf(r *request, db, coll string) (st collSizes, found bool, err error) {
	err = r.data().read(db, coll, func(c *collection) error {
		if c == nil {
			return nil
		}
		found = true
		st.count, st.capped, st.cappedSize, st.cappedMax = int64(c.live), c.capped, c.cappedSize, c.cappedMax
		per := make([]int64, len(c.indexes))
		c.each(func(rec *record) bool {
			st.size += int64(bsonSize(rec.doc))
			for i, ix := range c.indexes {
				keys := bson.D{}
				for _, f := range ix.fields {
					v, _ := value.Get(rec.doc, f)
					keys = append(keys, bson.E{Key: "", Value: v})
				}
				per[i] += int64(bsonSize(keys)) + indexEntryOverhead
			}
			return true
		})
		for i, ix := range c.indexes {
			st.indexSizes = append(st.indexSizes, bson.E{Key: ix.name, Value: per[i]})
			st.totalIndexSize += per[i]
		}
		return nil
	})
	return st, found, err
}

// scaleArg reads scale (a positive number; default 1).
func scaleArg(v any, present bool) (int64, error) {
	if !present {
		return 1, nil
	}
	n, ok := asInt64(v)
	if !ok {
		return 0, typeErr("scale", "int", v)
	}
	if n < 1 {
		return 0, cmderr.New(cmderr.BadValue, "Scale factor must be a positive number")
	}
	return n, nil
}

// storageStats renders st as collStats and $collStats's storageStats do.
func (st collSizes) storageStats(scale int64, ns string) bson.D {
	var avg int64
	if st.count > 0 {
		avg = st.size / st.count
	}
	d := bson.D{}
	if ns != "" {
		d = append(d, bson.E{Key: "ns", Value: ns})
	}
	d = append(d,
		bson.E{Key: "size", Value: st.size / scale},
		bson.E{Key: "count", Value: st.count},
		bson.E{Key: "avgObjSize", Value: avg},
		bson.E{Key: "numOrphanDocs", Value: int64(0)},
		bson.E{Key: "storageSize", Value: st.size / scale},
		bson.E{Key: "freeStorageSize", Value: int64(0)},
		bson.E{Key: "capped", Value: st.capped},
	)
	if st.capped {
		d = append(d, bson.E{Key: "max", Value: st.cappedMax}, bson.E{Key: "maxSize", Value: st.cappedSize / scale})
	}
	sizes := bson.D{}
	for _, e := range st.indexSizes {
		sizes = append(sizes, bson.E{Key: e.Key, Value: e.Value.(int64) / scale})
	}
	return append(d,
		bson.E{Key: "nindexes", Value: int32(len(st.indexSizes))},
		bson.E{Key: "indexBuilds", Value: bson.A{}},
		bson.E{Key: "totalIndexSize", Value: st.totalIndexSize / scale},
		bson.E{Key: "indexSizes", Value: sizes},
		bson.E{Key: "totalSize", Value: (st.size + st.totalIndexSize) / scale},
		bson.E{Key: "scaleFactor", Value: scale},
	)
}

func cmdCollStats(r *request) (bson.D, error) {
	coll, err := collectionArg(r)
	if err != nil {
		return nil, err
	}
	if err := checkFields(r, "scale", "verbose"); err != nil {
		return nil, err
	}
	sv, has := r.get("scale")
	scale, err := scaleArg(sv, has)
	if err != nil {
		return nil, err
	}
	st, found, err := sizesOf(r, r.db, coll)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, cmderr.New(cmderr.NamespaceNotFound, "Collection [%s.%s] not found.", r.db, coll)
	}
	return append(st.storageStats(scale, r.db+"."+coll), bson.E{Key: "ok", Value: 1.0}), nil
}

// collStatsStage answers a leading {$collStats: {...}} of a collection
// aggregate: the one document the rest of the pipeline reads. ok is false
// when the pipeline does not start with $collStats.
func collStatsStage(r *request, coll string, pipeline bson.A) ([]bson.D, bool, error) {
	for i, st := range pipeline {
		d, isDoc := st.(bson.D)
		if !isDoc || len(d) == 0 || d[0].Key != "$collStats" {
			continue
		}
		if i > 0 {
			return nil, false, cmderr.New(40602, "$collStats is only valid as the first stage in a pipeline")
		}
		if coll == "" {
			return nil, false, cmderr.New(cmderr.InvalidNamespace, "$collStats must be run against a collection namespace")
		}
		spec, ok := d[0].Value.(bson.D)
		if !ok {
			return nil, false, cmderr.New(cmderr.FailedToParse, "$collStats must take a nested object but found: %s", bsonTypeName(d[0].Value))
		}
		ns := r.db + "." + coll
		out := bson.D{
			{Key: "ns", Value: ns},
			{Key: "host", Value: r.member.addr},
			{Key: "localTime", Value: bson.NewDateTimeFromTime(r.now)},
		}
		var sizes *collSizes
		load := func(what string) (*collSizes, error) {
			if sizes != nil {
				return sizes, nil
			}
			st, found, err := sizesOf(r, r.db, coll)
			if err != nil {
				return nil, err
			}
			if !found {
				return nil, cmderr.New(cmderr.NamespaceNotFound, "Unable to retrieve %s in $collStats stage :: caused by :: Collection [%s] not found.", what, ns)
			}
			sizes = &st
			return sizes, nil
		}
		for _, e := range spec {
			switch e.Key {
			case "storageStats":
				o, _ := e.Value.(bson.D)
				sv, has := lookupD(o, "scale")
				scale, err := scaleArg(sv, has)
				if err != nil {
					return nil, false, err
				}
				st, err := load("storageStats")
				if err != nil {
					return nil, false, err
				}
				out = append(out, bson.E{Key: "storageStats", Value: st.storageStats(scale, "")})
			case "count":
				st, err := load("count")
				if err != nil {
					return nil, false, err
				}
				out = append(out, bson.E{Key: "count", Value: st.count})
			case "latencyStats":
				o, _ := e.Value.(bson.D)
				hv, _ := lookupD(o, "histograms")
				out = append(out, bson.E{Key: "latencyStats", Value: r.cluster.adm.lat.doc(ns, asBool(hv))})
			case "queryExecStats":
				out = append(out, bson.E{Key: "queryExecStats", Value: bson.D{{Key: "collectionScans", Value: bson.D{
					{Key: "total", Value: int64(0)}, {Key: "nonTailable", Value: int64(0)},
				}}}})
			default:
				return nil, false, cmderr.New(cmderr.FailedToParse, "unrecognized option to $collStats: %s", e.Key)
			}
		}
		return []bson.D{out}, true, nil
	}
	return nil, false, nil
}

func cmdDBStats(r *request) (bson.D, error) {
	if err := checkFields(r, "scale", "freeStorage"); err != nil {
		return nil, err
	}
	sv, has := r.get("scale")
	scale, err := scaleArg(sv, has)
	if err != nil {
		return nil, err
	}
	s := r.data()
	var objects, size, indexes, indexSize int64
	colls := s.collectionNames(r.db)
	for _, name := range colls {
		st, found, err := sizesOf(r, r.db, name)
		if err != nil {
			return nil, err
		}
		if found {
			objects += st.count
			size += st.size
			indexes += int64(len(st.indexSizes))
			indexSize += st.totalIndexSize
		}
	}
	var avg float64
	if objects > 0 {
		avg = float64(size) / float64(objects)
	}
	sc := float64(scale)
	return bson.D{
		{Key: "db", Value: r.db},
		{Key: "collections", Value: int64(len(colls))},
		{Key: "views", Value: int64(0)},
		{Key: "objects", Value: objects},
		{Key: "avgObjSize", Value: avg},
		{Key: "dataSize", Value: float64(size) / sc},
		{Key: "storageSize", Value: float64(size) / sc},
		{Key: "indexes", Value: indexes},
		{Key: "indexSize", Value: float64(indexSize) / sc},
		{Key: "totalSize", Value: float64(size+indexSize) / sc},
		{Key: "scaleFactor", Value: scale},
		{Key: "ok", Value: 1.0},
	}, nil
}
