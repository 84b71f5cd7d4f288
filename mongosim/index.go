package mongosim

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/collation"
	"github.com/sturdy-go/sturdy/mongosim/internal/query"
	"github.com/sturdy-go/sturdy/mongosim/internal/text"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// index is one index of a collection. Only unique indexes keep entries:
// queries scan documents, so a non-unique index is metadata that listIndexes
// reports and hint accepts. A TTL index (ttl) has the TTL monitor (ttl.go)
// delete documents whose date in fields[0] is more than ttlSecs seconds old.
type index struct {
	name   string
	key    bson.D
	fields []string
	unique bool
	// prepareUnique refuses new duplicate keys (collmod_unique.go).
	prepareUnique bool
	hidden        bool
	ttl           bool
	ttlSecs       int64
	sparse        bool
	partial       *query.Filter
	spec          bson.D             // as listIndexes reports it
	entries       map[string]*record // unique indexes: key → the record holding it
	// coll is the index's collation (nil: simple): a unique index treats
	// strings it deems equal as duplicates. collSet records that the spec
	// named one (even simple), which overrides the collection default.
	coll     *collation.Collation
	collSet  bool
	finished bool
	geo      *geoIndex // 2dsphere and 2d indexes (geoindex.go)
	// text is set for a text index: its spec and inverted index.
	text *textIndex
}

// finish gives an index without its own collation the collection's
// default one and adds the collation to the spec listIndexes reports.
func (ix *index) finish(c *collection) error {
	if ix.finished {
		return nil
	}
	if ix.text != nil {
		return ix.finishText(c)
	}
	if !ix.collSet {
		if spec := collationOption(c.options); spec != nil {
			def, err := parseCollation(spec, "collation")
			if err != nil {
				return err
			}
			ix.coll = def
		}
	}
	if ix.coll != nil {
		ix.spec = append(ix.spec, bson.E{Key: "collation", Value: ix.coll.Spec()})
		// The partial filter compares under the index's collation.
		if pfe, ok := value.Get(ix.spec, "partialFilterExpression"); ok {
			f, err := query.CompileFilterWith(pfe.(bson.D), query.Options{Collator: ix.coll})
			if err != nil {
				return err
			}
			ix.partial = f
		}
	}
	ix.finished = true
	return nil
}

// emptyCopy returns a copy of ix without entries, for another copy of its
// collection (a transaction's, $out's).
func (ix *index) emptyCopy() *index {
	cp := *ix
	if ix.entries != nil {
		cp.entries = map[string]*record{}
	}
	if ix.text != nil {
		cp.text = ix.text.empty()
	}
	return &cp
}

// collator is the index's collation as a value.Collator (nil: simple).
func (ix *index) collator() value.Collator {
	if ix.coll == nil {
		return nil
	}
	return ix.coll
}

func idIndex() *index {
	return &index{
		name:   "_id_",
		key:    bson.D{{Key: "_id", Value: int32(1)}},
		fields: []string{"_id"},
		spec:   bson.D{{Key: "v", Value: int32(2)}, {Key: "key", Value: bson.D{{Key: "_id", Value: int32(1)}}}, {Key: "name", Value: "_id_"}},
	}
}

// indexKey is one key a document produces in a unique index, or the
// term scores it has in a text index.
type indexKey struct {
	ix    *index
	key   string
	value bson.D             // {field: value, ...} for the duplicate-key error
	terms map[string]float64 // text index: term → score
}

// indexKeys computes the keys doc produces in every secondary unique
// index and text index.
func (c *collection) indexKeys(doc bson.D) ([]indexKey, error) {
	var out []indexKey
	for _, ix := range c.indexes[1:] {
		if !ix.unique && !ix.prepareUnique && ix.geo == nil && ix.text == nil {
			continue
		}
		keys, err := ix.keysOf(doc)
		if err != nil {
			return nil, err
		}
		out = append(out, keys...)
	}
	return out, nil
}

// keysOf returns the index keys of doc: one per element of the (at most
// one) array-valued field, as MongoDB's multikey indexes do. A missing field
// is null; a sparse index skips documents missing every field.
func (ix *index) keysOf(doc bson.D) ([]indexKey, error) {
	if ix.text != nil {
		return ix.textKeysOf(doc)
	}
	if ix.partial != nil && !ix.partial.Match(doc) {
		return nil, nil
	}
	if ix.geo != nil {
		return nil, ix.geo.checkGeo(doc)
	}
	perField := make([][]any, len(ix.fields))
	multi := -1
	present := false
	for i, f := range ix.fields {
		vals := pathValues(doc, strings.Split(f, "."), nil, true)
		if len(vals) == 0 {
			vals = []any{nil}
		} else {
			present = true
		}
		vals = dedupe(vals)
		if len(vals) > 1 {
			if multi >= 0 {
				return nil, cmderr.New(171, "cannot index parallel arrays [%s] [%s]", lastPart(f), lastPart(ix.fields[multi]))
			}
			multi = i
		}
		perField[i] = vals
	}
	if ix.sparse && !present {
		return nil, nil
	}
	n := 1
	if multi >= 0 {
		n = len(perField[multi])
	}
	out := make([]indexKey, 0, n)
	for j := 0; j < n; j++ {
		var b []byte
		kv := make(bson.D, len(ix.fields))
		for i, f := range ix.fields {
			v := perField[i][0]
			if i == multi {
				v = perField[i][j]
			}
			b = value.AppendKey(b, v, ix.collator())
			kv[i] = bson.E{Key: f, Value: v}
		}
		out = append(out, indexKey{ix: ix, key: string(b), value: kv})
	}
	return out, nil
}

func lastPart(path string) string {
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[i+1:]
	}
	return path
}

func dedupe(vals []any) []any {
	if len(vals) < 2 {
		return vals
	}
	seen := map[string]bool{}
	out := vals[:0:0]
	for _, v := range vals {
		k := value.Key(v)
		if !seen[k] {
			seen[k] = true
			out = append(out, v)
		}
	}
	return out
}

// pathValues collects the values at a dotted path, traversing arrays of
// documents on the way. With expandLeaf an array at the end of the path
// contributes its elements (an empty array contributes undefined), as an
// index or distinct sees it.
func pathValues(v any, parts []string, out []any, expandLeaf bool) []any {
	if len(parts) == 0 {
		if a, ok := v.(bson.A); ok && expandLeaf {
			if len(a) == 0 {
				return append(out, bson.Undefined{})
			}
			return append(out, a...)
		}
		return append(out, v)
	}
	switch x := v.(type) {
	case bson.D:
		if f, ok := value.Get(x, parts[0]); ok {
			return pathValues(f, parts[1:], out, expandLeaf)
		}
	case bson.A:
		if i, err := strconv.Atoi(parts[0]); err == nil && i >= 0 {
			if i < len(x) {
				out = pathValues(x[i], parts[1:], out, expandLeaf)
			}
			return out
		}
		for _, e := range x {
			if _, ok := e.(bson.D); ok {
				out = pathValues(e, parts, out, expandLeaf)
			}
		}
	}
	return out
}

func (c *collection) checkUnique(keys []indexKey, self *record) error {
	for _, k := range keys {
		if r := k.ix.entries[k.key]; r != nil && r != self {
			return c.dupKey(k.ix, k.value)
		}
	}
	return nil
}

func (c *collection) addKeys(keys []indexKey, r *record) {
	for _, k := range keys {
		if k.ix.text != nil {
			k.ix.text.inv.Add(r, k.terms)
			continue
		}
		k.ix.entries[k.key] = r
	}
}

func (c *collection) removeKeys(keys []indexKey, r *record) {
	for _, k := range keys {
		if k.ix.text != nil {
			k.ix.text.inv.Remove(r, k.terms)
			continue
		}
		if k.ix.entries[k.key] == r {
			delete(k.ix.entries, k.key)
		}
	}
}

// findIndex returns the index named by a hint (a name or a key pattern).
func (c *collection) findIndex(hint any) *index {
	switch h := hint.(type) {
	case string:
		for _, ix := range c.indexes {
			if ix.name == h {
				return ix
			}
		}
	case bson.D:
		for _, ix := range c.indexes {
			if sameKeyPattern(ix.key, h) {
				return ix
			}
		}
	}
	return nil
}

func sameKeyPattern(a, b bson.D) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || !value.Equal(a[i].Value, b[i].Value) {
			return false
		}
	}
	return true
}

// checkHint validates a hint option against the collection's indexes.
func checkHint(c *collection, hint any) error {
	if hint == nil || c == nil {
		return nil
	}
	if d, ok := hint.(bson.D); ok && len(d) == 1 && d[0].Key == "$natural" {
		return nil
	}
	if s, ok := hint.(string); ok && s == "" {
		return nil
	}
	if c.findIndex(hint) == nil {
		return cmderr.New(cmderr.BadValue, "hint provided does not correspond to an existing index")
	}
	return nil
}

// indexName generates MongoDB's default name: {a: 1, b: -1} → "a_1_b_-1".
func indexName(key bson.D) string {
	parts := make([]string, 0, 2*len(key))
	for _, e := range key {
		parts = append(parts, e.Key)
		switch v := e.Value.(type) {
		case string:
			parts = append(parts, v)
		case float64:
			parts = append(parts, strconv.FormatFloat(v, 'g', -1, 64))
		default:
			if n, ok := value.ToInt64(v); ok {
				parts = append(parts, strconv.FormatInt(n, 10))
			} else {
				parts = append(parts, fmt.Sprint(v))
			}
		}
	}
	return strings.Join(parts, "_")
}

// parseIndexSpec turns one createIndexes spec into an index.
func parseIndexSpec(spec bson.D) (*index, error) {
	b := &indexSpecBuilder{ix: &index{}, spec: spec}
	for _, e := range spec {
		if err := b.option(e); err != nil {
			return nil, err
		}
	}
	if !b.keySet {
		return nil, cmderr.New(cmderr.FailedToParse, "The 'key' field is a required property of an index specification")
	}
	ix := b.ix
	if err := checkKeyOptions(ix, spec); err != nil {
		return nil, err
	}
	if text.IsTextKey(ix.key) {
		if ix.unique || ix.ttl {
			return nil, cmderr.Unsupported("a unique or TTL text index")
		}
		if err := newTextIndex(ix, spec); err != nil {
			return nil, err
		}
		b.extra = append(b.extra, ix.text.spec.Options...)
	} else if err := notTextOptions(spec); err != nil {
		return nil, err
	}
	geoSpec, err := ix.finishGeoSpec(b.geoOpts)
	if err != nil {
		return nil, err
	}
	b.extra = append(b.extra, geoSpec...)
	if ix.name == "" {
		ix.name = indexName(ix.key)
	}
	out := bson.D{{Key: "v", Value: int32(2)}, {Key: "key", Value: ix.key}, {Key: "name", Value: ix.name}}
	ix.spec = append(out, b.extra...)
	if ix.unique {
		ix.entries = map[string]*record{}
	}
	return ix, nil
}

// indexSpecBuilder collects an index spec's fields as parseIndexSpec reads
// them: extra holds the options listIndexes shows after key and name, geoOpts
// the geo options finishGeoSpec checks once the key is known.
type indexSpecBuilder struct {
	ix             *index
	spec           bson.D
	keySet         bool
	extra, geoOpts bson.D
}

// option reads one field of the index spec.
func (b *indexSpecBuilder) option(e bson.E) error {
	ix, spec := b.ix, b.spec
	switch e.Key {
	case "key":
		if err := ix.parseKey(e.Value); err != nil {
			return err
		}
		b.keySet = true
	case "name":
		s, ok := e.Value.(string)
		if !ok {
			return cmderr.New(cmderr.TypeMismatch, "The field 'name' must be a string, but got %s", value.TypeName(e.Value))
		}
		if s == "" || s == "*" {
			return cmderr.New(67, "The index name '%s' is not valid", s)
		}
		ix.name = s
	case "unique":
		ix.unique = truthy(e.Value)
		if ix.unique {
			b.extra = append(b.extra, bson.E{Key: "unique", Value: true})
		}
	case "sparse":
		ix.sparse = truthy(e.Value)
		if ix.sparse {
			b.extra = append(b.extra, bson.E{Key: "sparse", Value: true})
		}
	case "partialFilterExpression":
		d, ok := e.Value.(bson.D)
		if !ok {
			return cmderr.New(cmderr.TypeMismatch, "The field 'partialFilterExpression' must be an object")
		}
		f, err := query.CompileFilter(d)
		if err != nil {
			return err
		}
		ix.partial = f
		b.extra = append(b.extra, bson.E{Key: "partialFilterExpression", Value: value.CloneDoc(d)})
	case "background", "dropDups":
		// Creation-time options mongod accepts, ignores (every build
		// is a background build; duplicates are never dropped) and
		// keeps in the spec listIndexes shows.
		if !value.IsNumber(e.Value) {
			if _, isBool := e.Value.(bool); !isBool {
				return cmderr.New(cmderr.TypeMismatch, "Error in specification %s :: caused by :: The field '%s has value %s: %s, which is not convertible to bool", shellString(spec), e.Key, e.Key, shellString(e.Value))
			}
		}
		b.extra = append(b.extra, e)
	case "hidden", "v", "ns":
		if e.Key == "hidden" && truthy(e.Value) {
			ix.hidden = true
			b.extra = append(b.extra, bson.E{Key: "hidden", Value: true})
		}
	case "expireAfterSeconds":
		n, err := ttlArg(e.Value)
		if err != nil {
			return cmderr.New(cmderr.CannotCreateIndex, "Error in specification %s: %s", shellString(spec), errMessage(err))
		}
		ix.ttl, ix.ttlSecs = true, n
		b.extra = append(b.extra, bson.E{Key: "expireAfterSeconds", Value: e.Value})
	case "collation":
		c, err := parseCollation(e.Value, "collation")
		if err != nil {
			return err
		}
		ix.coll, ix.collSet = c, true
	case "weights", "default_language", "language_override", "textIndexVersion":
		// text index options, read by newTextIndex
	default:
		if !geoSpecOptions[e.Key] {
			return cmderr.Unsupported("index option '" + e.Key + "'")
		}
		b.geoOpts = append(b.geoOpts, e)
	}
	return nil
}

// parseKey reads the spec's key pattern into ix.key and ix.fields.
func (ix *index) parseKey(kv any) error {
	k, ok := kv.(bson.D)
	if !ok {
		return cmderr.New(cmderr.TypeMismatch, "The field 'key' must be an object, but got %s", value.TypeName(kv))
	}
	if len(k) == 0 {
		return cmderr.New(67, "Index keys cannot be empty.")
	}
	for i, f := range k {
		if f.Key == "" {
			return cmderr.New(67, "Index keys cannot be an empty field.")
		}
		switch v := f.Value.(type) {
		case string:
			if isGeo, err := ix.parseGeoKey(f.Key, v, i); isGeo || err != nil {
				if err != nil {
					return err
				}
			} else if v != "hashed" && v != "text" {
				return cmderr.Unsupported("index type '" + v + "'")
			}
		default:
			fv, ok := value.ToFloat(v)
			if !ok || fv == 0 {
				return cmderr.New(67, "Values in index key pattern can't be 0 or non-numbers: %s", shellString(k))
			}
		}
		ix.fields = append(ix.fields, f.Key)
	}
	ix.key = value.CloneDoc(k)
	return nil
}

// checkKeyOptions rejects unique and TTL options the key pattern cannot have.
func checkKeyOptions(ix *index, spec bson.D) error {
	for _, v := range ix.key {
		if _, hashed := v.Value.(string); hashed && ix.unique {
			return cmderr.New(67, "Currently hashed indexes cannot guarantee uniqueness. Use a regular index.")
		}
	}
	if ix.ttl {
		if len(ix.key) != 1 {
			return cmderr.New(cmderr.CannotCreateIndex, "TTL indexes are single-field indexes, compound indexes do not support TTL. Index spec: %s", shellString(spec))
		}
		if ix.fields[0] == "_id" && ix.key[0].Value != "hashed" {
			if n, _ := value.ToFloat(ix.key[0].Value); n == 1 {
				return cmderr.New(cmderr.InvalidIndexSpecificationOption, "The field 'expireAfterSeconds' is not valid for an _id index specification. Specification: %s", shellString(spec))
			}
		}
	}
	return nil
}

// sameOptions compares the options that make two indexes different.
func sameOptions(a, b *index) bool {
	pa, _ := value.Get(a.spec, "partialFilterExpression")
	pb, _ := value.Get(b.spec, "partialFilterExpression")
	return a.unique == b.unique && a.sparse == b.sparse && value.Key(pa) == value.Key(pb) && collation.Equal(a.coll, b.coll) &&
		sameTextOptions(a, b)
}

// addIndex adds ix to c, building its entries; it reports whether the
// index was new.
func (c *collection) addIndex(ix *index) (bool, error) {
	for _, old := range c.indexes {
		if old.name == ix.name {
			if !sameKeyPattern(old.key, ix.key) {
				return false, cmderr.New(cmderr.IndexKeySpecsConflict,
					"An existing index has the same name as the requested index. When index names are not specified, they are auto generated and can cause conflicts. Please refer to our documentation. Requested index: %s, existing index: %s",
					shellString(ix.spec), shellString(old.spec))
			}
			if old.name == "_id_" || sameOptions(old, ix) {
				return false, nil
			}
			return false, cmderr.New(cmderr.IndexOptionsConflict,
				"An equivalent index already exists with the same name but different options. Requested index: %s, existing index: %s",
				shellString(ix.spec), shellString(old.spec))
		}
	}
	if err := c.textConflict(ix); err != nil {
		return false, err
	}
	for _, old := range c.indexes {
		if sameKeyPattern(old.key, ix.key) {
			pa, _ := value.Get(old.spec, "partialFilterExpression")
			pb, _ := value.Get(ix.spec, "partialFilterExpression")
			// Indexes on the same keys may coexist with different
			// partial filters or collations.
			if value.Key(pa) == value.Key(pb) && collation.Equal(old.coll, ix.coll) {
				return false, cmderr.New(cmderr.IndexOptionsConflict, "Index already exists with a different name: %s", old.name)
			}
		}
	}
	if ix.unique || ix.text != nil {
		var err error
		c.each(func(r *record) bool {
			var keys []indexKey
			if keys, err = ix.keysOf(r.doc); err != nil {
				return false
			}
			if err = c.checkUnique(keys, r); err != nil {
				return false
			}
			c.addKeys(keys, r)
			return true
		})
		if err != nil {
			if ix.unique {
				ix.entries = map[string]*record{}
			} else {
				ix.text = ix.text.empty()
			}
			return false, err
		}
	} else {
		var err error
		c.each(func(r *record) bool { _, err = ix.keysOf(r.doc); return err == nil })
		if err != nil {
			return false, err
		}
	}
	c.indexes = append(c.indexes, ix)
	return true, nil
}

// ---- commands ----

func init() {
	register(
		&command{name: "createIndexes", run: cmdCreateIndexes, write: true},
		&command{name: "listIndexes", run: cmdListIndexes},
		&command{name: "dropIndexes", run: cmdDropIndexes, write: true},
		&command{name: "deleteIndexes", run: cmdDropIndexes, write: true},
	)
}

func cmdCreateIndexes(r *request) (bson.D, error) {
	coll, err := collectionArg(r)
	if err != nil {
		return nil, err
	}
	if err := checkFields(r, "indexes", "commitQuorum", "ignoreUnknownIndexOptions", "isTimeseriesNamespace", "returnOnStart"); err != nil {
		return nil, err
	}
	raw, _ := r.get("indexes")
	list, ok := raw.(bson.A)
	if !ok {
		return nil, cmderr.New(cmderr.TypeMismatch, "BSON field 'createIndexes.indexes' is the wrong type '%s', expected type 'array'", value.TypeName(raw))
	}
	if len(list) == 0 {
		return nil, cmderr.New(cmderr.BadValue, "Must specify at least one index to create")
	}
	specs := make([]*index, 0, len(list))
	for _, e := range list {
		d, ok := e.(bson.D)
		if !ok {
			return nil, cmderr.New(cmderr.TypeMismatch, "The elements of the 'indexes' array must be objects, but got %s", value.TypeName(e))
		}
		ix, err := parseIndexSpec(d)
		if err != nil {
			return nil, err
		}
		specs = append(specs, ix)
	}
	if r.data().viewOf(r.db, coll) != nil {
		return nil, cmderr.New(cmderr.CommandNotSupportedOnView, "Cannot create indexes on a view: %s.%s", r.db, coll)
	}
	var before, after int
	var created bool
	err = r.data().write(r.ctx, r.db, coll, true, func(c *collection) error {
		if c.txn != nil && !c.txn.created[c.ns()] {
			// As mongod: inside a transaction, only a collection the
			// transaction created may get indexes.
			return cmderr.New(cmderr.OperationNotSupportedInTransaction,
				"Cannot create new indexes on existing collection %s in a multi-document transaction.", c.ns())
		}
		created = c.live == 0 && len(c.indexes) == 1 && len(c.order) == 0
		before = len(c.indexes)
		n := len(c.indexes)
		if err := c.checkTTLSpecs(specs); err != nil {
			return err
		}
		for _, ix := range specs {
			if err := ix.finish(c); err != nil {
				return err
			}
			if _, err := c.addIndex(ix); err != nil {
				c.indexes = c.indexes[:n] // all or nothing
				return indexBuildFailed(c, err)
			}
		}
		after = len(c.indexes)
		if after > before {
			// mongod reports the indexes one build commits in one event.
			built := bson.A{}
			for _, ix := range c.indexes[before:] {
				built = append(built, value.CloneDoc(ix.spec))
			}
			c.recordExpanded(changeCreateIndexes, bson.D{{Key: "indexes", Value: built}}, nil)
		}
		return nil
	})
	if err != nil {
		return errorReply(err)
	}
	reply := bson.D{
		{Key: "numIndexesBefore", Value: int32(before)},
		{Key: "numIndexesAfter", Value: int32(after)},
		{Key: "createdCollectionAutomatically", Value: created && before == 1},
	}
	if before == after {
		reply = append(reply, bson.E{Key: "note", Value: "all indexes already exist"})
	}
	return reply, nil
}

func cmdListIndexes(r *request) (bson.D, error) {
	coll, err := collectionArg(r)
	if err != nil {
		return nil, err
	}
	if err := checkFields(r, "cursor", "includeBuildUUIDs", "includeIndexBuildInfo", "rawData"); err != nil {
		return nil, err
	}
	batchSize, err := cursorBatchSize(r)
	if err != nil {
		return nil, err
	}
	var docs []bson.D
	err = r.data().read(r.db, coll, func(c *collection) error {
		if c == nil {
			return cmderr.New(cmderr.NamespaceNotFound, "ns does not exist: %s.%s", r.db, coll)
		}
		if c.view != nil {
			return errNotCollection(r.db, coll)
		}
		for i, ix := range c.indexes {
			if i == 0 && c.timeseries {
				continue // a time series collection has no _id index
			}
			docs = append(docs, value.CloneDoc(ix.spec))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return r.cluster.data.cursors.reply(r, r.db+".$cmd.listIndexes", docs, batchSize, false, endAtOnce), nil
}

func cmdDropIndexes(r *request) (bson.D, error) {
	coll, err := collectionArg(r)
	if err != nil {
		return nil, err
	}
	if err := checkFields(r, "index"); err != nil {
		return nil, err
	}
	which, ok := r.get("index")
	if !ok {
		return nil, cmderr.New(40414, "BSON field 'dropIndexes.index' is missing but a required field")
	}
	var was int
	err = r.data().write(r.ctx, r.db, coll, false, func(c *collection) error {
		if c == nil {
			return cmderr.New(cmderr.NamespaceNotFound, "ns not found %s.%s", r.db, coll)
		}
		was = len(c.indexes)
		drop, err := indexesToDrop(c, which)
		if err != nil {
			return err
		}
		c.dropIndexesWhere(drop)
		return nil
	})
	if err != nil {
		return nil, err
	}
	reply := bson.D{{Key: "nIndexesWas", Value: int32(was)}}
	if s, ok := which.(string); ok && s == "*" {
		reply = append(reply, bson.E{Key: "msg", Value: "non-_id indexes dropped for collection"})
	}
	return reply, nil
}

// indexesToDrop resolves dropIndexes' index argument ("*", a name, an
// array of names or a key pattern) to the indexes it names, refusing the
// _id index and names that match none (then nothing is dropped).
func indexesToDrop(c *collection, which any) (func(*index) bool, error) {
	switch w := which.(type) {
	case string:
		if w == "*" {
			return func(*index) bool { return true }, nil
		}
		if w == "_id_" {
			return nil, cmderr.New(cmderr.InvalidOptions, "cannot drop _id index")
		}
		if c.findIndex(w) == nil {
			return nil, cmderr.New(cmderr.IndexNotFound, "index not found with name [%s]", w)
		}
		return func(ix *index) bool { return ix.name == w }, nil
	case bson.A:
		names := map[string]bool{}
		for _, e := range w {
			s, ok := e.(string)
			if !ok {
				return nil, cmderr.New(cmderr.TypeMismatch, "dropIndexes.index must be a string or an array of strings")
			}
			if s == "_id_" {
				return nil, cmderr.New(cmderr.InvalidOptions, "cannot drop _id index")
			}
			if c.findIndex(s) == nil {
				return nil, cmderr.New(cmderr.IndexNotFound, "index not found with name [%s]", s)
			}
			names[s] = true
		}
		return func(ix *index) bool { return names[ix.name] }, nil
	case bson.D:
		ix := c.findIndex(w)
		if ix == nil {
			return nil, cmderr.New(cmderr.IndexNotFound, "can't find index with key: %s", shellString(w))
		}
		if ix.name == "_id_" {
			return nil, cmderr.New(cmderr.InvalidOptions, "cannot drop _id index")
		}
		return func(x *index) bool { return x == ix }, nil
	default:
		return nil, cmderr.New(cmderr.TypeMismatch, "dropIndexes.index must be a string, an object or an array of strings")
	}
}

// dropIndexesWhere drops the indexes drop selects, never the _id index
// (always first), recording a dropIndexes event for each.
func (c *collection) dropIndexesWhere(drop func(ix *index) bool) {
	kept := c.indexes[:1]
	for _, ix := range c.indexes[1:] {
		if drop(ix) {
			// mongod logs (and reports) each dropped index.
			c.recordExpanded(changeDropIndexes, bson.D{{Key: "indexes", Value: bson.A{value.CloneDoc(ix.spec)}}}, nil)
			continue
		}
		kept = append(kept, ix)
	}
	c.indexes = kept
}

// indexBuildFailed words a duplicate found while building a unique index as
// mongod does: the E11000 message behind the build's and collection's
// UUIDs, with keyPattern and keyValue kept.
func indexBuildFailed(c *collection, err error) error {
	var dk *dupKeyError
	if !errors.As(err, &dk) {
		return geoBuildFailed(c, err)
	}
	out := *dk
	out.err = cmderr.New(dk.err.Code, "Index build failed: %s: Collection %s ( %s ) :: caused by :: %s",
		uuidString(randomUUID()), c.ns(), uuidString(c.uuid.Data), dk.err.Message)
	return &out
}
