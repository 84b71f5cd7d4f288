package mongosim

import (
	"context"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/agg"
	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/query"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

func init() {
	register(
		&command{name: "listDatabases", run: cmdListDatabases},
		&command{name: "listCollections", run: cmdListCollections},
		&command{name: "create", run: cmdCreate, write: true},
		&command{name: "drop", run: cmdDrop, write: true},
		&command{name: "dropDatabase", run: cmdDropDatabase, write: true},
		&command{name: "renameCollection", run: cmdRenameCollection, write: true},
		&command{name: "collStats", run: cmdCollStats},
		&command{name: "dbStats", run: cmdDBStats},
	)
}

// catalog lets the aggregation engine read and write collections
// ($lookup, $unionWith, $out, $merge).
type catalog struct{ s *storage }

var _ agg.Catalog = catalog{}

func (k catalog) Read(db, coll string) ([]bson.D, error) {
	return k.s.snapshot(db, coll, nil, nil, 0, nil)
}

// Out replaces db.coll's documents with docs atomically, keeping its
// indexes; on a duplicate key nothing changes.
func (k catalog) Out(db, coll string, docs []bson.D) error {
	prepared := make([]bson.D, len(docs))
	for i, d := range docs {
		p, err := prepareInsert(d)
		if err != nil {
			return err
		}
		prepared[i] = p
	}
	return k.s.write(context.Background(), db, coll, true, func(c *collection) error {
		tmp := newCollection(db, coll)
		for _, ix := range c.indexes[1:] {
			cp := *ix
			if cp.entries != nil {
				cp.entries = map[string]*record{}
			}
			tmp.indexes = append(tmp.indexes, &cp)
		}
		for _, d := range prepared {
			if err := tmp.insert(d); err != nil {
				return err
			}
		}
		c.byID, c.order, c.live, c.indexes = tmp.byID, tmp.order, tmp.live, tmp.indexes
		return nil
	})
}

// Merge implements $merge into db.coll.
func (k catalog) Merge(db, coll string, docs []bson.D, on []string, whenMatched any, whenNotMatched string) error {
	if len(on) == 0 {
		on = []string{"_id"}
	}
	var pipeline *agg.Pipeline
	mode := "merge"
	switch w := whenMatched.(type) {
	case nil:
	case string:
		switch w {
		case "replace", "keepExisting", "merge", "fail":
			mode = w
		default:
			return cmderr.New(cmderr.BadValue, "Enumeration value '%s' for field 'whenMatched' is not a valid value.", w)
		}
	case bson.A:
		p, err := agg.Compile(w)
		if err != nil {
			return err
		}
		pipeline, mode = p, "pipeline"
	default:
		return cmderr.New(cmderr.TypeMismatch, "$merge whenMatched must be a string or an array")
	}
	switch whenNotMatched {
	case "", "insert", "discard", "fail":
	default:
		return cmderr.New(cmderr.BadValue, "Enumeration value '%s' for field 'whenNotMatched' is not a valid value.", whenNotMatched)
	}
	return k.s.write(context.Background(), db, coll, true, func(c *collection) error {
		onIsID := len(on) == 1 && on[0] == "_id"
		if !onIsID && !c.hasUniqueIndexOn(on) {
			return cmderr.New(51183, "Cannot find index to verify that join fields will be unique")
		}
		for _, d := range docs {
			filter := bson.D{}
			for _, f := range on {
				v, ok := query.Lookup(d, f)
				if !ok {
					if f == "_id" {
						continue
					}
					return cmderr.New(51132, "$merge write error: 'on' field '%s' cannot be missing, null, undefined or an array", f)
				}
				if _, isArr := v.(bson.A); isArr {
					return cmderr.New(51185, "$merge write error: 'on' field '%s' cannot be missing, null, undefined or an array", f)
				}
				filter = append(filter, bson.E{Key: f, Value: bson.D{{Key: "$eq", Value: v}}})
			}
			var target *record
			if len(filter) == len(on) {
				fl, err := query.CompileFilter(filter)
				if err != nil {
					return err
				}
				m, err := c.match(fl, filter, 1)
				if err != nil {
					return err
				}
				if len(m) > 0 {
					target = m[0]
				}
			}
			if target == nil {
				switch whenNotMatched {
				case "discard":
					continue
				case "fail":
					return cmderr.New(13113, "$merge could not find a matching document in the target collection for at least one document in the source collection")
				}
				p, err := prepareInsert(d)
				if err != nil {
					return err
				}
				if err := c.insert(p); err != nil {
					return err
				}
				continue
			}
			var next bson.D
			switch mode {
			case "keepExisting":
				continue
			case "fail":
				id, _ := value.Get(target.doc, "_id")
				return c.dupKey(c.indexes[0], bson.D{{Key: "_id", Value: id}})
			case "replace":
				next = value.CloneDoc(d)
			case "merge":
				next = value.CloneDoc(target.doc)
				for _, e := range d {
					set := false
					for i := range next {
						if next[i].Key == e.Key {
							next[i].Value = value.Clone(e.Value)
							set = true
							break
						}
					}
					if !set {
						next = append(next, bson.E{Key: e.Key, Value: value.Clone(e.Value)})
					}
				}
			case "pipeline":
				out, err := pipeline.Run(context.Background(), []bson.D{value.CloneDoc(target.doc)}, agg.Env{DB: db, Catalog: k, Now: k.s.now(), Vars: map[string]any{"new": value.CloneDoc(d)}})
				if err != nil {
					return err
				}
				if len(out) != 1 {
					return cmderr.New(cmderr.BadValue, "$merge whenMatched pipeline must produce exactly one document")
				}
				next = out[0]
			}
			if err := c.replace(target, next, mode == "replace"); err != nil {
				return err
			}
		}
		return nil
	})
}

func (c *collection) hasUniqueIndexOn(fields []string) bool {
	for _, ix := range c.indexes[1:] {
		if !ix.unique || ix.partial != nil || len(ix.fields) != len(fields) {
			continue
		}
		all := true
		for _, f := range fields {
			found := false
			for _, g := range ix.fields {
				if f == g {
					found = true
				}
			}
			all = all && found
		}
		if all {
			return true
		}
	}
	return false
}

// ---- commands ----

func (c *collection) dataSize() int64 {
	var n int64
	c.each(func(r *record) bool { n += int64(bsonSize(r.doc)); return true })
	return n
}

func cmdListDatabases(r *request) (bson.D, error) {
	if r.db != "admin" {
		return nil, cmderr.New(cmderr.Unauthorized, "listDatabases may only be run against the admin database.")
	}
	if err := checkFields(r, "filter", "nameOnly", "authorizedDatabases"); err != nil {
		return nil, err
	}
	filterDoc, _, err := docArg(r, "filter")
	if err != nil {
		return nil, err
	}
	f, err := query.CompileFilter(filterDoc)
	if err != nil {
		return nil, err
	}
	nameOnly := false
	if v, ok := r.get("nameOnly"); ok {
		nameOnly = truthy(v)
	}
	s := r.data()
	var total int64
	list := bson.A{}
	for _, db := range s.databaseNames() {
		var size int64
		if !nameOnly {
			for _, coll := range s.collectionNames(db) {
				_ = s.read(db, coll, func(c *collection) error {
					if c != nil {
						size += c.dataSize()
					}
					return nil
				})
			}
		}
		var d bson.D
		if nameOnly {
			d = bson.D{{Key: "name", Value: db}}
		} else {
			d = bson.D{{Key: "name", Value: db}, {Key: "sizeOnDisk", Value: size}, {Key: "empty", Value: size == 0}}
		}
		if !f.Match(d) {
			continue
		}
		total += size
		list = append(list, d)
	}
	out := bson.D{{Key: "databases", Value: list}}
	if !nameOnly {
		out = append(out, bson.E{Key: "totalSize", Value: total}, bson.E{Key: "totalSizeMb", Value: total / (1024 * 1024)})
	}
	return out, nil
}

func cmdListCollections(r *request) (bson.D, error) {
	if err := checkFields(r, "filter", "nameOnly", "authorizedCollections", "cursor", "includePendingDrops"); err != nil {
		return nil, err
	}
	filterDoc, _, err := docArg(r, "filter")
	if err != nil {
		return nil, err
	}
	f, err := query.CompileFilter(filterDoc)
	if err != nil {
		return nil, err
	}
	nameOnly := false
	if v, ok := r.get("nameOnly"); ok {
		nameOnly = truthy(v)
	}
	batchSize, err := cursorBatchSize(r)
	if err != nil {
		return nil, err
	}
	s := r.data()
	var docs []bson.D
	for _, name := range s.collectionNames(r.db) {
		c := s.lookup(r.db, name)
		if c == nil {
			continue
		}
		var d bson.D
		if nameOnly {
			d = bson.D{{Key: "name", Value: name}, {Key: "type", Value: "collection"}}
		} else {
			d = bson.D{
				{Key: "name", Value: name},
				{Key: "type", Value: "collection"},
				{Key: "options", Value: bson.D{}},
				{Key: "info", Value: bson.D{{Key: "readOnly", Value: false}, {Key: "uuid", Value: value.Clone(c.uuid)}}},
				{Key: "idIndex", Value: value.CloneDoc(idIndex().spec)},
			}
		}
		if f.Match(d) {
			docs = append(docs, d)
		}
	}
	return s.cursors.reply(r, r.db+".$cmd.listCollections", docs, batchSize, false), nil
}

// cursorBatchSize reads cursor: {batchSize: n}; -1 when absent.
func cursorBatchSize(r *request) (int, error) {
	cur, ok, err := docArg(r, "cursor")
	if err != nil || !ok {
		return -1, err
	}
	for _, e := range cur {
		switch e.Key {
		case "batchSize":
			n, ok := int64Arg(e.Value)
			if !ok {
				return 0, cmderr.New(cmderr.TypeMismatch, "cursor.batchSize must be a number")
			}
			if n < 0 {
				return 0, cmderr.New(51024, "BSON field 'batchSize' value must be >= 0, actual value '%d'", n)
			}
			return int(n), nil
		default:
			return 0, cmderr.New(40415, "BSON field 'cursor.%s' is an unknown field.", e.Key)
		}
	}
	return -1, nil
}

func cmdCreate(r *request) (bson.D, error) {
	coll, err := collectionArg(r)
	if err != nil {
		return nil, err
	}
	for i, e := range r.cmd {
		if i == 0 || genericFields[e.Key] {
			continue
		}
		switch e.Key {
		case "capped":
			if truthy(e.Value) {
				return nil, cmderr.Unsupported("capped collections")
			}
		case "autoIndexId", "validationLevel", "validationAction", "size", "max", "idIndex":
			// meaningless without a validator or capping; accepted
		case "validator", "storageEngine", "indexOptionDefaults":
			if d, ok := e.Value.(bson.D); !ok || len(d) > 0 {
				return nil, cmderr.Unsupported("create option " + e.Key)
			}
		case "collation":
			if !simpleCollation(e.Value) {
				return nil, cmderr.Unsupported("collation (only {locale: \"simple\"})")
			}
		case "changeStreamPreAndPostImages":
			d, _ := e.Value.(bson.D)
			if en, _ := value.Get(d, "enabled"); truthy(en) {
				return nil, cmderr.Unsupported("changeStreamPreAndPostImages")
			}
		default: // viewOn, pipeline, timeseries, clusteredIndex, encryptedFields...
			return nil, cmderr.Unsupported("create option " + e.Key)
		}
	}
	var existed bool
	err = r.data().write(r.ctx, r.db, coll, false, func(c *collection) error {
		existed = c != nil
		return nil
	})
	if err != nil {
		return nil, err
	}
	if existed && r.tx != nil {
		return nil, cmderr.New(cmderr.NamespaceExists, "Collection %s.%s already exists.", r.db, coll)
	}
	if existed {
		// 7.0+: creating an existing collection with the same (default)
		// options succeeds.
		return bson.D{}, nil
	}
	if _, _, err := r.data().ensure(r.db, coll); err != nil {
		return nil, err
	}
	return bson.D{}, nil
}

func cmdDrop(r *request) (bson.D, error) {
	coll, err := collectionArg(r)
	if err != nil {
		return nil, err
	}
	if err := checkFields(r); err != nil {
		return nil, err
	}
	existed, n := r.data().dropCollection(r.db, coll)
	if !existed {
		return bson.D{}, nil // 8.0 answers ok for a missing collection
	}
	return bson.D{{Key: "nIndexesWas", Value: int32(n)}, {Key: "ns", Value: r.db + "." + coll}}, nil
}

func cmdDropDatabase(r *request) (bson.D, error) {
	if err := checkFields(r); err != nil {
		return nil, err
	}
	r.data().dropDatabase(r.db)
	return bson.D{{Key: "dropped", Value: r.db}}, nil
}

func cmdRenameCollection(r *request) (bson.D, error) {
	if r.db != "admin" {
		return nil, cmderr.New(cmderr.Unauthorized, "renameCollection may only be run against the admin database.")
	}
	if err := checkFields(r, "to", "dropTarget", "stayTemp"); err != nil {
		return nil, err
	}
	from, _ := r.cmd[0].Value.(string)
	toV, _ := r.get("to")
	to, _ := toV.(string)
	fdb, fcoll, ok1 := strings.Cut(from, ".")
	tdb, tcoll, ok2 := strings.Cut(to, ".")
	if !ok1 || !ok2 {
		return nil, cmderr.New(cmderr.InvalidNamespace, "Invalid namespace specified '%s'", to)
	}
	if err := validateNamespace(tdb, tcoll); err != nil {
		return nil, err
	}
	dropTarget := false
	if v, ok := r.get("dropTarget"); ok {
		dropTarget = truthy(v)
	}
	s := r.data()
	s.mu.Lock()
	defer s.mu.Unlock()
	src := s.dbs[fdb]
	if src == nil || src.colls[fcoll] == nil {
		return nil, cmderr.New(cmderr.NamespaceNotFound, "Source collection %s does not exist", from)
	}
	if from == to {
		return nil, cmderr.New(cmderr.IllegalOperation, "Can't rename a collection to itself")
	}
	dst := s.dbs[tdb]
	if dst != nil && dst.colls[tcoll] != nil {
		if !dropTarget {
			return nil, cmderr.New(cmderr.NamespaceExists, "target namespace exists")
		}
		old := dst.colls[tcoll]
		old.mu.Lock()
		old.dropped = true
		old.mu.Unlock()
		s.cursors.killNS(to)
	}
	if dst == nil {
		dst = &database{name: tdb, colls: map[string]*collection{}}
		s.dbs[tdb] = dst
	}
	c := src.colls[fcoll]
	c.mu.Lock()
	c.dropped = true
	moved := &collection{db: tdb, name: tcoll, uuid: c.uuid, byID: c.byID, order: c.order, live: c.live, indexes: c.indexes, clock: c.clock}
	c.mu.Unlock()
	delete(src.colls, fcoll)
	if len(src.colls) == 0 && fdb != tdb {
		delete(s.dbs, fdb)
	}
	dst.colls[tcoll] = moved
	s.cursors.killNS(from)
	return bson.D{}, nil
}

func cmdCollStats(r *request) (bson.D, error) {
	coll, err := collectionArg(r)
	if err != nil {
		return nil, err
	}
	if err := checkFields(r, "scale", "verbose"); err != nil {
		return nil, err
	}
	var count, size int64
	var nindexes int
	var names bson.D
	err = r.data().read(r.db, coll, func(c *collection) error {
		if c == nil {
			return cmderr.New(cmderr.NamespaceNotFound, "Collection [%s.%s] not found.", r.db, coll)
		}
		count, size, nindexes = int64(c.live), c.dataSize(), len(c.indexes)
		for _, ix := range c.indexes {
			names = append(names, bson.E{Key: ix.name, Value: int64(0)})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var avg int64
	if count > 0 {
		avg = size / count
	}
	return bson.D{
		{Key: "ns", Value: r.db + "." + coll},
		{Key: "size", Value: size},
		{Key: "count", Value: count},
		{Key: "avgObjSize", Value: avg},
		{Key: "storageSize", Value: size},
		{Key: "nindexes", Value: int32(nindexes)},
		{Key: "totalIndexSize", Value: int64(0)},
		{Key: "indexSizes", Value: names},
		{Key: "capped", Value: false},
	}, nil
}

func cmdDBStats(r *request) (bson.D, error) {
	if err := checkFields(r, "scale", "freeStorage"); err != nil {
		return nil, err
	}
	s := r.data()
	var objects, size, indexes int64
	colls := s.collectionNames(r.db)
	for _, name := range colls {
		_ = s.read(r.db, name, func(c *collection) error {
			if c != nil {
				objects += int64(c.live)
				size += c.dataSize()
				indexes += int64(len(c.indexes))
			}
			return nil
		})
	}
	var avg float64
	if objects > 0 {
		avg = float64(size) / float64(objects)
	}
	return bson.D{
		{Key: "db", Value: r.db},
		{Key: "collections", Value: int64(len(colls))},
		{Key: "views", Value: int64(0)},
		{Key: "objects", Value: objects},
		{Key: "avgObjSize", Value: avg},
		{Key: "dataSize", Value: float64(size)},
		{Key: "storageSize", Value: float64(size)},
		{Key: "indexes", Value: indexes},
		{Key: "indexSize", Value: 0.0},
		{Key: "totalSize", Value: float64(size)},
		{Key: "scaleFactor", Value: int64(1)},
	}, nil
}
