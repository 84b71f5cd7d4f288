package mongosim

import (
	"context"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/agg"
	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/collation"
	"github.com/sturdy-go/sturdy/mongosim/internal/query"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

func init() {
	register(
		&command{name: "listDatabases", run: cmdListDatabases},
		&command{name: "listCollections", run: cmdListCollections},
		&command{name: "create", run: cmdCreate, write: true},
		&command{name: "collMod", run: cmdCollMod, write: true},
		&command{name: "drop", run: cmdDrop, write: true},
		&command{name: "dropDatabase", run: cmdDropDatabase, write: true},
		&command{name: "renameCollection", run: cmdRenameCollection, write: true},
		&command{name: "collStats", run: cmdCollStats},
		&command{name: "dbStats", run: cmdDBStats},
	)
}

// catalog lets the aggregation engine read and write collections
// ($lookup, $unionWith, $out, $merge).
type catalog struct {
	s      *storage
	at     bson.Timestamp // non-zero: snapshot reads at this cluster time
	bypass bool           // bypassDocumentValidation for $out and $merge
}

// writeCtx is the context of the catalog's writes.
func (k catalog) writeCtx() context.Context {
	if k.bypass {
		return withBypass(context.Background())
	}
	return context.Background()
}

var _ agg.Catalog = catalog{}

func (k catalog) Read(db, coll string) ([]bson.D, error) {
	if base, pipeline, isView, err := k.s.resolveView(db, coll); err != nil {
		return nil, err
	} else if isView {
		return k.s.runOn(context.Background(), db, base, pipeline, k.s.now(), nil)
	}
	if !k.at.IsZero() {
		return k.s.snapshotAt(db, coll, nil, nil, k.at)
	}
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
	return k.s.write(k.writeCtx(), db, coll, true, func(c *collection) error {
		tmp := newCollection(db, coll)
		// The documents go through the target's validator, as mongod's
		// temporary collection copies the target's options.
		tmp.validator, tmp.bypass, tmp.logger = c.validator, c.bypass, c.logger
		tmp.indexes[0] = c.indexes[0] // the _id index (clustered, collated) as it is
		for _, ix := range c.indexes[1:] {
			tmp.indexes = append(tmp.indexes, ix.emptyCopy())
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
	m := mergeSpec{db: db, on: on, whenNotMatched: whenNotMatched}
	var err error
	if m.mode, m.pipeline, err = mergeWhenMatched(whenMatched); err != nil {
		return err
	}
	switch whenNotMatched {
	case "", "insert", "discard", "fail":
	default:
		return cmderr.New(cmderr.BadValue, "Enumeration value '%s' for field 'whenNotMatched' is not a valid value.", whenNotMatched)
	}
	return k.s.write(k.writeCtx(), db, coll, true, func(c *collection) error {
		onIsID := len(on) == 1 && on[0] == "_id"
		if !onIsID && !c.hasUniqueIndexOn(on) {
			return cmderr.New(51183, "Cannot find index to verify that join fields will be unique")
		}
		for _, d := range docs {
			if err := k.mergeOne(c, m, d); err != nil {
				return err
			}
		}
		return nil
	})
}

// mergeSpec is a parsed $merge: the join fields and what to do with
// matched and unmatched documents.
type mergeSpec struct {
	db             string
	on             []string
	mode           string // whenMatched: replace, keepExisting, merge, fail or pipeline
	pipeline       *agg.Pipeline
	whenNotMatched string
}

// mergeWhenMatched parses whenMatched: a mode name or an update pipeline.
func mergeWhenMatched(whenMatched any) (string, *agg.Pipeline, error) {
	switch w := whenMatched.(type) {
	case nil:
		return "merge", nil, nil
	case string:
		switch w {
		case "replace", "keepExisting", "merge", "fail":
			return w, nil, nil
		}
		return "", nil, cmderr.New(cmderr.BadValue, "Enumeration value '%s' for field 'whenMatched' is not a valid value.", w)
	case bson.A:
		p, err := agg.Compile(w)
		if err != nil {
			return "", nil, err
		}
		return "pipeline", p, nil
	}
	return "", nil, cmderr.New(cmderr.TypeMismatch, "$merge whenMatched must be a string or an array")
}

// mergeOne merges one source document into the target collection.
func (k catalog) mergeOne(c *collection, m mergeSpec, d bson.D) error {
	target, err := c.mergeTarget(d, m.on)
	if err != nil {
		return err
	}
	if target == nil {
		switch m.whenNotMatched {
		case "discard":
			return nil
		case "fail":
			return cmderr.New(13113, "$merge could not find a matching document in the target collection for at least one document in the source collection")
		}
		p, err := prepareInsert(d)
		if err != nil {
			return err
		}
		return c.insert(p)
	}
	var next bson.D
	switch m.mode {
	case "keepExisting":
		return nil
	case "fail":
		id, _ := value.Get(target.doc, "_id")
		return c.dupKey(c.indexes[0], bson.D{{Key: "_id", Value: id}})
	case "replace":
		next = value.CloneDoc(d)
	case "merge":
		next = mergeFields(target.doc, d)
	case "pipeline":
		out, err := m.pipeline.Run(context.Background(), []bson.D{value.CloneDoc(target.doc)}, agg.Env{DB: m.db, Catalog: k, Now: k.s.now(), Vars: map[string]any{"new": value.CloneDoc(d)}})
		if err != nil {
			return err
		}
		if len(out) != 1 {
			return cmderr.New(cmderr.BadValue, "$merge whenMatched pipeline must produce exactly one document")
		}
		next = out[0]
	}
	return c.replace(target, next, m.mode == "replace")
}

// mergeTarget finds the document d joins to on the on fields, or nil. A
// missing _id matches nothing (the document is inserted); any other missing
// or array join field is an error.
func (c *collection) mergeTarget(d bson.D, on []string) (*record, error) {
	filter := bson.D{}
	for _, f := range on {
		v, ok := query.Lookup(d, f)
		if !ok {
			if f == "_id" {
				continue
			}
			return nil, cmderr.New(51132, "$merge write error: 'on' field '%s' cannot be missing, null, undefined or an array", f)
		}
		if _, isArr := v.(bson.A); isArr {
			return nil, cmderr.New(51185, "$merge write error: 'on' field '%s' cannot be missing, null, undefined or an array", f)
		}
		filter = append(filter, bson.E{Key: f, Value: bson.D{{Key: "$eq", Value: v}}})
	}
	if len(filter) != len(on) {
		return nil, nil
	}
	fl, err := query.CompileFilter(filter)
	if err != nil {
		return nil, err
	}
	m, err := c.match(fl, filter, 1)
	if err != nil || len(m) == 0 {
		return nil, err
	}
	return m[0], nil
}

// mergeFields is whenMatched "merge": the target with each top-level field
// of the source set in place or appended.
func mergeFields(target, src bson.D) bson.D {
	next := value.CloneDoc(target)
	for _, e := range src {
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
	return next
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
		c.mu.RLock()
		kind, options := "collection", value.CloneDoc(c.options)
		_, clustered := value.Get(c.options, "clusteredIndex")
		if c.timeseries {
			kind = "timeseries"
		}
		view := c.view
		if view != nil {
			kind, options = "view", view.options()
		}
		c.mu.RUnlock()
		if options == nil {
			options = bson.D{}
		}
		if nameOnly {
			d = bson.D{{Key: "name", Value: name}, {Key: "type", Value: kind}}
		} else {
			d = bson.D{
				{Key: "name", Value: name},
				{Key: "type", Value: kind},
				{Key: "options", Value: options},
				{Key: "info", Value: bson.D{{Key: "readOnly", Value: false}, {Key: "uuid", Value: value.Clone(c.uuid)}}},
			}
			if kind == "timeseries" {
				d[3].Value = bson.D{{Key: "readOnly", Value: false}}
			} else if kind == "view" {
				d[3].Value = bson.D{{Key: "readOnly", Value: true}}
			} else if !clustered {
				// A clustered collection has no separate _id index.
				d = append(d, bson.E{Key: "idIndex", Value: value.CloneDoc(c.indexes[0].spec)})
			}
		}
		if f.Match(d) {
			docs = append(docs, d)
		}
	}
	return s.cursors.reply(r, r.db+".$cmd.listCollections", docs, batchSize, false, endAtOnce), nil
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

// createOptions are a create command's collection options.
type createOptions struct {
	options                bson.D // as listCollections reports them
	val                    *validator
	defColl                *collation.Collation
	clustered, timeseries  bson.D
	images, capped         bool
	cappedSize, cappedDocs int64
}

func cmdCreate(r *request) (bson.D, error) {
	coll, err := collectionArg(r)
	if err != nil {
		return nil, err
	}
	if _, ok := r.get("viewOn"); ok {
		return createView(r, coll)
	}
	if _, ok := r.get("pipeline"); ok {
		return nil, cmderr.New(cmderr.InvalidOptions, "'pipeline' requires 'viewOn' to also be specified")
	}
	o, err := parseCreateOptions(r)
	if err != nil {
		return nil, err
	}
	if r.tx != nil {
		return createInTransaction(r, coll, o)
	}
	if o.val != nil {
		o.options = append(o.options, o.val.options()...)
	}
	c, created, err := r.cluster.data.ensureWith(r.db, coll, o.init)
	if err != nil {
		return nil, err
	}
	if !created {
		// 7.0+: creating an existing collection with the same options
		// succeeds; with others it fails.
		var same bool
		_ = r.cluster.data.read(r.db, coll, func(cur *collection) error {
			same = cur == c && cur.view == nil && (len(cur.options) == 0 && len(o.options) == 0 || value.Key(cur.options) == value.Key(o.options))
			return nil
		})
		if !same {
			return nil, cmderr.New(cmderr.NamespaceExists, "Collection %s.%s already exists with different options: %s", r.db, coll, shellString(c.options))
		}
	}
	return bson.D{}, nil
}

// parseCreateOptions reads the options of a create that is not a view and
// checks the combinations mongod refuses.
func parseCreateOptions(r *request) (*createOptions, error) {
	val, hasValidator, err := validatorArgs("create", r.cmd[1:], nil)
	if err != nil {
		return nil, err
	}
	o := &createOptions{}
	if hasValidator {
		o.val = val
	}
	for i, e := range r.cmd {
		if i == 0 || genericFields[e.Key] {
			continue
		}
		if err := o.parse(e); err != nil {
			return nil, err
		}
	}
	if _, ok := r.get("expireAfterSeconds"); ok && o.clustered == nil && o.timeseries == nil {
		return nil, cmderr.New(cmderr.InvalidOptions, "'expireAfterSeconds' requires clustering to be enabled")
	}
	if o.capped {
		if o.cappedSize == 0 {
			return nil, cmderr.New(cmderr.InvalidOptions, "the 'size' field is required when 'capped' is true")
		}
		if o.clustered != nil || o.timeseries != nil {
			return nil, cmderr.New(cmderr.InvalidOptions, "a capped collection cannot be clustered or time series")
		}
		capOpts := bson.D{{Key: "capped", Value: true}, {Key: "size", Value: o.cappedSize}}
		if o.cappedDocs > 0 {
			capOpts = append(capOpts, bson.E{Key: "max", Value: o.cappedDocs})
		}
		o.options = append(capOpts, o.options...)
	}
	if o.clustered != nil && o.timeseries != nil {
		return nil, cmderr.New(cmderr.InvalidOptions, "Time-series collections are clustered implicitly; clusteredIndex must not be given")
	}
	return o, nil
}

// parse reads one create field into o.
func (o *createOptions) parse(e bson.E) error {
	var err error
	switch e.Key {
	case "capped":
		o.capped = truthy(e.Value)
	case "size", "max":
		n, ok := int64Arg(e.Value)
		if !ok || n < 0 {
			return cmderr.New(cmderr.BadValue, "'%s' must be a non-negative number", e.Key)
		}
		if e.Key == "size" {
			o.cappedSize = n
		} else {
			o.cappedDocs = n
		}
	case "autoIndexId", "idIndex":
		// accepted, as mongod does
	case "validator", "validationLevel", "validationAction":
		// validatorArgs read them
	case "storageEngine", "indexOptionDefaults":
		if d, ok := e.Value.(bson.D); !ok || len(d) > 0 {
			return cmderr.Unsupported("create option " + e.Key)
		}
	case "collation":
		// The collection's default collation: listCollections shows
		// it in full; the simple one is not recorded.
		c, err := parseCollation(e.Value, "create.collation")
		if err != nil {
			return err
		}
		if c != nil {
			o.options = append(o.options, bson.E{Key: "collation", Value: c.Spec()})
		}
		o.defColl = c
	case "changeStreamPreAndPostImages":
		if o.images, err = preAndPostImagesArg("create", e.Value); err != nil {
			return err
		}
		o.options = append(o.options, bson.E{Key: e.Key, Value: bson.D{{Key: "enabled", Value: o.images}}})
	case "clusteredIndex":
		if o.clustered, err = clusteredIndexArg(e.Value); err != nil {
			return err
		}
		o.options = append(o.options, bson.E{Key: e.Key, Value: o.clustered})
	case "timeseries":
		if o.timeseries, err = timeseriesArg(e.Value); err != nil {
			return err
		}
		o.options = append(o.options, bson.E{Key: e.Key, Value: o.timeseries})
	case "expireAfterSeconds":
		n, ok := int64Arg(e.Value)
		if !ok || n < 0 {
			return cmderr.New(cmderr.InvalidOptions, "'expireAfterSeconds' must be a non-negative number")
		}
		o.options = append(o.options, bson.E{Key: e.Key, Value: n})
	default: // viewOn, pipeline, encryptedFields...
		return cmderr.Unsupported("create option " + e.Key)
	}
	return nil
}

// createInTransaction creates the collection inside a transaction, where it
// appears at commit; create options are not supported there.
func createInTransaction(r *request, coll string, o *createOptions) (bson.D, error) {
	if len(o.options) > 0 || o.val != nil {
		return nil, cmderr.Unsupported("create options inside a transaction")
	}
	var existed bool
	if err := r.data().write(r.ctx, r.db, coll, false, func(c *collection) error {
		existed = c != nil
		return nil
	}); err != nil {
		return nil, err
	}
	if existed {
		return nil, cmderr.New(cmderr.NamespaceExists, "Collection %s.%s already exists.", r.db, coll)
	}
	if _, _, err := r.data().ensure(r.db, coll); err != nil {
		return nil, err
	}
	return bson.D{}, nil
}

// init applies the options to a collection being created.
func (o *createOptions) init(c *collection) {
	c.options, c.prePostImages = o.options, o.images
	c.validator = o.val
	c.capped, c.cappedSize, c.cappedMax = o.capped, o.cappedSize, o.cappedDocs
	c.timeseries = o.timeseries != nil
	if c.timeseries {
		tf, _ := value.Get(o.timeseries, "timeField")
		c.timeField = tf.(string)
	}
	if o.clustered != nil {
		// The clustered index is the collection's _id index: it has
		// the name given and says clustered.
		ix := idIndex()
		name, _ := value.Get(o.clustered, "name")
		ix.name = name.(string)
		ix.spec = bson.D{{Key: "v", Value: int32(2)}, {Key: "key", Value: bson.D{{Key: "_id", Value: int32(1)}}}, {Key: "name", Value: ix.name}, {Key: "unique", Value: true}, {Key: "clustered", Value: true}}
		c.indexes[0] = ix
	}
	if o.defColl != nil {
		// The _id index has the collection's default collation too.
		ix := *c.indexes[0]
		ix.coll = o.defColl
		ix.spec = append(value.CloneDoc(ix.spec), bson.E{Key: "collation", Value: o.defColl.Spec()})
		c.indexes[0] = &ix
	}
}

// preAndPostImagesArg reads changeStreamPreAndPostImages: {enabled: bool}.
func preAndPostImagesArg(cmd string, v any) (bool, error) {
	d, ok := v.(bson.D)
	if !ok {
		return false, typeErr(cmd+".changeStreamPreAndPostImages", "object", v)
	}
	var on, seen bool
	for _, e := range d {
		if e.Key != "enabled" {
			return false, cmderr.New(40415, "BSON field '%s.changeStreamPreAndPostImages.%s' is an unknown field.", cmd, e.Key)
		}
		b, ok := e.Value.(bool)
		if !ok {
			return false, typeErr(cmd+".changeStreamPreAndPostImages.enabled", "bool", e.Value)
		}
		on, seen = b, true
	}
	if !seen {
		return false, cmderr.New(40414, "BSON field '%s.changeStreamPreAndPostImages.enabled' is missing but a required field", cmd)
	}
	return on, nil
}

// clusteredIndexArg validates clusteredIndex: {key: {_id: 1}, unique: true,
// name?, v?} and returns it as listCollections shows it.
func clusteredIndexArg(v any) (bson.D, error) {
	d, ok := v.(bson.D)
	if !ok {
		return nil, typeErr("create.clusteredIndex", "object", v)
	}
	name, unique := "_id_", false
	var key bson.D
	for _, e := range d {
		switch e.Key {
		case "key":
			key, _ = e.Value.(bson.D)
		case "unique":
			unique = truthy(e.Value)
		case "name":
			s, ok := e.Value.(string)
			if !ok {
				return nil, typeErr("create.clusteredIndex.name", "string", e.Value)
			}
			name = s
		case "v":
			if n, ok := int64Arg(e.Value); !ok || n != 2 {
				return nil, cmderr.New(cmderr.InvalidOptions, "Invalid clustered index version %s; only version 2 is supported", shellString(e.Value))
			}
		default:
			return nil, cmderr.New(40415, "BSON field 'clusteredIndex.%s' is an unknown field.", e.Key)
		}
	}
	if len(key) != 1 || key[0].Key != "_id" {
		return nil, cmderr.New(cmderr.InvalidOptions, "The clusteredIndex option is only supported for key: {_id: 1}")
	}
	if n, ok := asFloat(key[0].Value); !ok || n != 1 {
		return nil, cmderr.New(cmderr.InvalidOptions, "The clusteredIndex option is only supported for key: {_id: 1}")
	}
	if !unique {
		return nil, cmderr.New(cmderr.InvalidOptions, "The clusteredIndex option requires unique: true")
	}
	return bson.D{
		{Key: "v", Value: int32(2)},
		{Key: "key", Value: bson.D{{Key: "_id", Value: int32(1)}}},
		{Key: "name", Value: name},
		{Key: "unique", Value: true},
	}, nil
}

// timeseriesArg validates the timeseries option and returns it with
// mongod's defaults filled in (granularity "seconds", bucketMaxSpanSeconds
// from the granularity).
func timeseriesArg(v any) (bson.D, error) {
	d, ok := v.(bson.D)
	if !ok {
		return nil, typeErr("create.timeseries", "object", v)
	}
	var timeField, metaField, granularity string
	var maxSpan, rounding int64
	for _, e := range d {
		switch e.Key {
		case "timeField", "metaField", "granularity":
			s, ok := e.Value.(string)
			if !ok {
				return nil, typeErr("timeseries."+e.Key, "string", e.Value)
			}
			switch e.Key {
			case "timeField":
				timeField = s
			case "metaField":
				metaField = s
			default:
				granularity = s
			}
		case "bucketMaxSpanSeconds", "bucketRoundingSeconds":
			n, ok := int64Arg(e.Value)
			if !ok || n < 1 || n > 31536000 {
				return nil, cmderr.New(cmderr.InvalidOptions, "Timeseries '%s' needs to be between 1 and 31536000", e.Key)
			}
			if e.Key == "bucketMaxSpanSeconds" {
				maxSpan = n
			} else {
				rounding = n
			}
		default:
			return nil, cmderr.New(40415, "BSON field 'timeseries.%s' is an unknown field.", e.Key)
		}
	}
	if timeField == "" {
		return nil, cmderr.New(40414, "BSON field 'timeseries.timeField' is missing but a required field")
	}
	if metaField == timeField {
		return nil, cmderr.New(cmderr.InvalidOptions, "The 'metaField' in time-series options cannot be the same as 'timeField'")
	}
	spans := map[string]int64{"seconds": 3600, "minutes": 86400, "hours": 2592000}
	if (maxSpan != 0) != (rounding != 0) {
		return nil, cmderr.New(cmderr.InvalidOptions, "Timeseries 'bucketMaxSpanSeconds' and 'bucketRoundingSeconds' need to be set alongside each other")
	}
	if maxSpan != 0 && granularity != "" {
		return nil, cmderr.New(cmderr.InvalidOptions, "Timeseries 'bucketMaxSpanSeconds' is not allowed with granularity")
	}
	if maxSpan != 0 && maxSpan != rounding {
		return nil, cmderr.New(cmderr.InvalidOptions, "Timeseries 'bucketMaxSpanSeconds' and 'bucketRoundingSeconds' need to be equal")
	}
	out := bson.D{{Key: "timeField", Value: timeField}}
	if metaField != "" {
		out = append(out, bson.E{Key: "metaField", Value: metaField})
	}
	if maxSpan != 0 {
		return append(out, bson.E{Key: "bucketRoundingSeconds", Value: int32(rounding)}, bson.E{Key: "bucketMaxSpanSeconds", Value: int32(maxSpan)}), nil
	}
	if granularity == "" {
		granularity = "seconds"
	}
	span, ok := spans[granularity]
	if !ok {
		return nil, cmderr.New(cmderr.BadValue, "Enumeration value '%s' for field 'timeseries.granularity' is not a valid value.", granularity)
	}
	return append(out, bson.E{Key: "granularity", Value: granularity}, bson.E{Key: "bucketMaxSpanSeconds", Value: int32(span)}), nil
}

func cmdDrop(r *request) (bson.D, error) {
	coll, err := collectionArg(r)
	if err != nil {
		return nil, err
	}
	if err := checkFields(r); err != nil {
		return nil, err
	}
	isView := r.data().viewOf(r.db, coll) != nil
	existed, n := r.data().dropCollection(r.db, coll)
	if !existed || isView {
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
	if src.colls[fcoll].viewOf() != nil {
		return nil, cmderr.New(cmderr.CommandNotSupportedOnView, "cannot rename view: %s", from)
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
	moved := &collection{db: tdb, name: tcoll, nsv: tdb + "." + tcoll, uuid: c.uuid, byID: c.byID, order: c.order, live: c.live, indexes: c.indexes,
		changes: c.changes, options: c.options, timeseries: c.timeseries, timeField: c.timeField, prePostImages: c.prePostImages,
		capped: c.capped, cappedSize: c.cappedSize, cappedMax: c.cappedMax, bytes: c.bytes, inserted: c.inserted, clock: c.clock,
		validator: c.validator, logger: c.logger}
	c.changes.recordDDL(changeRename, fdb, fcoll, c.uuid, tdb, tcoll)
	c.mu.Unlock()
	delete(src.colls, fcoll)
	if len(src.colls) == 0 && fdb != tdb {
		delete(s.dbs, fdb)
	}
	dst.colls[tcoll] = moved
	s.cursors.killNS(from)
	return bson.D{}, nil
}
