package mongosim

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/internal/bsond"
	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/collation"
	"github.com/sturdy-go/sturdy/mongosim/internal/query"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// maxBSONSize is MongoDB's maxBsonObjectSize: the largest document a
// collection accepts and the budget of one reply batch.
const maxBSONSize = 16 * 1024 * 1024

// storage is the data of a deployment: databases → collections → documents
// with their indexes, plus the open cursors. All members of a replica set
// share one storage, so replication is instant.
//
// Stored documents are deep copies that are never mutated in place: a write
// replaces a record's document with a new one, so a reader holding the old
// one sees a consistent snapshot. Reads that hand documents to other code
// clone them, so nothing a handler does to a result can reach the store;
// a find returning stored documents as they are sends their cached
// encodings instead (record.encoded), which nothing can change.
type storage struct {
	now          func() time.Time
	mu           sync.RWMutex // guards dbs and each database's colls map
	dbs          map[string]*database
	cursors      *cursorTable
	changes      *changeLog    // every write, for change streams
	clusterClock *logicalClock // the deployment's cluster time (clustertime.go)
	// scriptsOff is Options.JavaScriptDisabled, for the pipelines the
	// store runs itself (views).
	scriptsOff bool

	ddlMu sync.Mutex
	ddlAt map[string]bson.Timestamp // database ("*": every database) → time of its last DDL
	clock *txnClock                 // commit sequence and open transactions
	// txn is set on a transaction's private view of the store: its
	// collections are snapshots materialised on first use (see txn_snapshot.go).
	txn *transaction
	// logger receives validationAction "warn" failures; nil discards them.
	logger *slog.Logger
	// views counts the views in the store, so reads skip view resolution
	// while there are none (views.go).
	views atomic.Int64
	// ttlPasses and ttlDeleted are serverStatus metrics.ttl (ttl.go).
	ttlPasses, ttlDeleted atomic.Int64
}

type database struct {
	name  string
	colls map[string]*collection
}

// collection is one collection's documents and indexes. mu serialises
// writers, so every write statement (match, apply, index update) is atomic.
type collection struct {
	db, name string
	// nsv is "db.name" as a reply value, boxed once for the cursor
	// replies of finds (nil in a transaction's copy).
	nsv  any
	uuid bson.Binary

	mu      sync.RWMutex
	dropped bool      // set under mu when the collection leaves its database
	byID    *idTable  // records by idKey (idtable.go)
	order   []*record // insertion (natural) order; nil where deleted
	live    int
	indexes []*index   // indexes[0] is _id_
	changes *changeLog // nil for scratch collections, whose writes are not logged
	// batching holds back the change log entries of writes in pending
	// while an insert batch runs (changestream.go: beginChangeBatch).
	batching bool
	pending  []pendingChange
	// shardKey lists a sharded collection's shard key fields on a shard
	// of a multi-shard deployment (shard_cluster.go): updates may not
	// change them.
	shardKey []string
	// options are the create options listCollections reports;
	// timeseries marks a time series collection (type "timeseries"):
	// timeField must hold a date, and _id is not unique (there is no _id
	// index; records get a synthetic idKey).
	options    bson.D
	timeseries bool
	timeField  string
	// noIDIndex marks a collection whose documents need no _id (as
	// system.profile): records get synthetic keys, as time series do.
	noIDIndex bool
	// capped collections keep at most cappedMax documents (0: no count
	// limit) of at most cappedSize bytes in all, evicting the oldest;
	// bytes is their size, kept only when capped.
	capped                bool
	cappedSize, cappedMax int64
	bytes                 int64
	// inserted numbers insertions: record.seq, the position of tailable
	// cursors.
	inserted uint64
	// prePostImages is changeStreamPreAndPostImages.enabled: change events
	// of the collection's writes can carry pre- and post-images.
	prePostImages bool
	// validator checks inserted and updated documents (validation.go);
	// bypass is set, under mu, while a write with
	// bypassDocumentValidation runs. logger receives validationAction
	// "warn" failures.
	validator *validator
	bypass    bool
	logger    *slog.Logger
	// view, when set, makes this catalog entry a view (views.go): it holds
	// no documents and refuses writes.
	view *viewDef

	// Multi-document transaction support (txn_snapshot.go). On a stored
	// collection: clock stamps every write; hist keeps, while transactions
	// are open, each document's prior versions so a snapshot can be
	// rebuilt; locks names the transaction that wrote a document and has
	// not yet committed (first writer wins). committing/commitSeq are set
	// while a commit applies its writes under mu.
	clock      *txnClock
	hist       map[string][]histEntry
	histN      int
	locks      map[string]*transaction
	committing *transaction
	commitSeq  int64
	mutations  int
	// prepared holds the prepared transactions (two-phase commit) that
	// wrote documents here: reads outside them wait until they end.
	prepared map[*transaction]struct{}
	// On a transaction's snapshot copy: the owner, the stored collection
	// it copies (nil when it did not exist), and the documents written
	// (value: the last write replaced the whole document).
	txn   *transaction
	base  *collection
	dirty map[string]bool
	// partial: only the documents in known (fetched by _id, present or
	// not) have been copied yet; a scan fills the rest first.
	partial bool
	known   map[string]bool
}

type record struct {
	doc   bson.D
	idKey string
	pos   int
	seq   uint64    // insertion number in its collection
	geo   *recCells // S2 cells of doc for a 2dsphere index (geoindex.go)
	// enc caches doc encoded, as a bsond.Doc in an any, which a reply
	// takes without copying or allocating (encoded). Readers fill it
	// under the collection's read lock; replace clears it.
	enc atomic.Pointer[any]
}

// encoded is rec's document encoded (a bsond.Doc in an any): a find that
// returns stored documents as they are sends these bytes. The stored
// document never changes in place, so the encoding stays right until a
// write replaces the document.
func (rec *record) encoded() (any, error) {
	if p := rec.enc.Load(); p != nil {
		return *p, nil
	}
	raw, err := bsond.Marshal(rec.doc)
	if err != nil {
		return nil, err
	}
	v := any(bsond.Doc(raw))
	rec.enc.Store(&v)
	return v, nil
}

func newStorage(now func() time.Time, clock *logicalClock) *storage {
	if now == nil {
		now = time.Now
	}
	if clock == nil {
		clock = newLogicalClock(now)
	}
	return &storage{now: now, dbs: map[string]*database{}, cursors: &cursorTable{m: map[int64]*cursor{}}, changes: newChangeLog(now, clock),
		clusterClock: clock, ddlAt: map[string]bson.Timestamp{}, clock: newTxnClock()}
}

func newCollection(db, name string) *collection {
	c := &collection{db: db, name: name, nsv: db + "." + name, uuid: bson.Binary{Subtype: 4, Data: randomUUID()}, byID: newIDTable()}
	c.indexes = []*index{idIndex()}
	return c
}

func (c *collection) ns() string { return c.db + "." + c.name }

// lookup returns the collection or nil.
func (s *storage) lookup(db, coll string) *collection {
	if s.txn != nil {
		return s.txn.collection(db, coll)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if d := s.dbs[db]; d != nil {
		return d.colls[coll]
	}
	return nil
}

// ensure returns the collection, creating it (and its database) if missing.
func (s *storage) ensure(db, coll string) (*collection, bool, error) {
	if s.txn != nil {
		return s.txn.ensure(db, coll)
	}
	return s.ensureWith(db, coll, nil)
}

// ensureWith is ensure that runs init on a collection it creates before
// anyone else can see it (the create command's options).
func (s *storage) ensureWith(db, coll string, init func(c *collection)) (*collection, bool, error) {
	if c := s.lookup(db, coll); c != nil {
		return c, false, nil
	}
	if err := validateNamespace(db, coll); err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.dbs[db]
	if d == nil {
		d = &database{name: db, colls: map[string]*collection{}}
		s.dbs[db] = d
	}
	if c := d.colls[coll]; c != nil {
		return c, false, nil
	}
	c := newCollection(db, coll)
	c.changes = s.changes
	c.logger = s.logger
	if init != nil {
		init(c)
	}
	c.clock = s.clock
	d.colls[coll] = c
	c.recordDDL(changeCreate)
	return c, true, nil
}

// write runs fn holding the collection's write lock. With create the
// collection is created if missing; without, fn gets nil for a missing one.
// A collection dropped between lookup and lock is looked up again, so a
// write never lands in a dropped collection.
func (s *storage) write(ctx context.Context, db, coll string, create bool, fn func(c *collection) error) error {
	for {
		var c *collection
		if create {
			var err error
			if c, _, err = s.ensure(db, coll); err != nil {
				return err
			}
		} else if c = s.lookup(db, coll); c == nil {
			return fn(nil)
		}
		c.mu.Lock()
		if c.dropped {
			c.mu.Unlock()
			continue
		}
		before := c.mutations
		if c.view != nil {
			c.mu.Unlock()
			return errNotCollection(db, coll)
		}
		if c.validator != nil {
			c.bypass = bypassing(ctx)
		}
		err := fn(c)
		c.bypass = false
		if locked := docLocked(err); locked != nil {
			partial := c.mutations != before
			c.mu.Unlock()
			if partial {
				// mongod retries each document's write on its own; this
				// statement already changed documents, so rerunning it
				// whole could apply them twice.
				return cmderr.New(cmderr.WriteConflict, "mongosim: a multi-document write met a document held by an uncommitted transaction after changing other documents; retry the operation")
			}
			// As mongod, a write outside a transaction waits for the
			// transaction holding the document to finish, then retries.
			if err := locked.owner.wait(ctx, s.now); err != nil {
				return err
			}
			continue
		}
		c.mu.Unlock()
		return err
	}
}

// read runs fn holding the collection's read lock; fn gets nil for a
// missing collection.
func (s *storage) read(db, coll string, fn func(c *collection) error) error {
	for {
		c := s.lookup(db, coll)
		if c == nil {
			return fn(nil)
		}
		c.mu.RLock()
		if c.dropped {
			c.mu.RUnlock()
			continue
		}
		if t := c.preparedWriter(); t != nil && s.txn == nil {
			// As mongod's prepare conflict: a read meeting a prepared
			// transaction's writes waits for its commit or abort.
			c.mu.RUnlock()
			<-t.done
			continue
		}
		err := fn(c)
		c.mu.RUnlock()
		return err
	}
}

// dropCollection removes a collection; it reports whether it existed and
// how many indexes it had.
func (s *storage) dropCollection(db, coll string) (bool, int) {
	s.mu.Lock()
	d := s.dbs[db]
	var c *collection
	if d != nil {
		c = d.colls[coll]
		delete(d.colls, coll)
		if len(d.colls) == 0 {
			delete(s.dbs, db)
		}
	}
	s.mu.Unlock()
	if c == nil {
		return false, 0
	}
	c.mu.Lock()
	c.dropped = true
	n := len(c.indexes)
	if c.view != nil {
		s.views.Add(-1)
	}
	c.recordDDL(changeDrop)
	c.mu.Unlock()
	s.cursors.killNS(db + "." + coll)
	return true, n
}

func (s *storage) dropDatabase(db string) {
	s.mu.Lock()
	d := s.dbs[db]
	delete(s.dbs, db)
	s.mu.Unlock()
	if d == nil {
		return
	}
	// As mongod: a drop event for each collection, then dropDatabase.
	names := make([]string, 0, len(d.colls))
	for n := range d.colls {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c := d.colls[n]
		c.mu.Lock()
		c.dropped = true
		if c.view != nil {
			s.views.Add(-1)
		}
		c.recordDDL(changeDrop)
		c.mu.Unlock()
		s.cursors.killNS(c.ns())
	}
	s.changes.recordDDL(changeDropDatabase, db, "", bson.Binary{}, "", "")
}

// collectionNames lists db's collections, sorted.
func (s *storage) collectionNames(db string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d := s.dbs[db]
	if d == nil {
		return nil
	}
	names := make([]string, 0, len(d.colls))
	for n := range d.colls {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (s *storage) databaseNames() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	names := make([]string, 0, len(s.dbs))
	for n := range s.dbs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// validateNamespace rejects the names MongoDB rejects.
func validateNamespace(db, coll string) error {
	if db == "" || strings.ContainsAny(db, "/\\. \"$\x00") || len(db) >= 64 {
		return cmderr.New(cmderr.InvalidNamespace, "Invalid database name: '%s'", db)
	}
	if coll == "" || strings.ContainsAny(coll, "$\x00") || strings.HasPrefix(coll, ".") {
		return cmderr.New(cmderr.InvalidNamespace, "Invalid namespace specified '%s.%s'", db, coll)
	}
	if len(db)+1+len(coll) > 255 {
		return cmderr.New(cmderr.InvalidNamespace, "Fully qualified namespace is too long. Namespace: %s.%s Max: 255", db, coll)
	}
	return nil
}

// ---- documents ----

// each calls fn for the live records in natural order until fn returns false.
func (c *collection) each(fn func(r *record) bool) {
	c.fill()
	for _, r := range c.order {
		if r != nil && !fn(r) {
			return
		}
	}
}

// candidates returns the records filter may match, in natural order: the
// one record named by a top-level _id equality when the filter has one
// (appended to into, which a caller may give room for it on its stack),
// else all of them. The caller still runs the filter.
func (c *collection) candidates(filterDoc bson.D, f *query.Filter, into []*record) []*record {
	if id, ok := idEquality(filterDoc); ok && !c.timeseries && c.idLookupFits(f, id) {
		if r := c.lookupID(id); r != nil {
			return append(into, r)
		}
		return nil
	}
	out := make([]*record, 0, c.live)
	c.each(func(r *record) bool { out = append(out, r); return true })
	return out
}

// idEquality reports the value of a top-level {_id: v} or {_id: {$eq: v}}
// in filterDoc when v is a plain value an equality index lookup can find.
func idEquality(filterDoc bson.D) (any, bool) {
	v, ok := value.Get(filterDoc, "_id")
	if !ok {
		return nil, false
	}
	if d, isDoc := v.(bson.D); isDoc && len(d) > 0 && strings.HasPrefix(d[0].Key, "$") {
		if len(d) != 1 || d[0].Key != "$eq" {
			return nil, false
		}
		v = d[0].Value
	}
	switch d := v.(type) {
	case bson.A, bson.Regex, bson.M, bson.Raw, nil, bson.Null, bson.Undefined:
		return nil, false
	case bson.D:
		if len(d) > 0 && strings.HasPrefix(d[0].Key, "$") {
			return nil, false
		}
	}
	return v, true
}

// idLookupFits reports whether the _id index can answer f's equality on
// id: always without strings in id; with them, when f compares binary (the
// one record the index finds is the only candidate) or under the index's
// own collation.
func (c *collection) idLookupFits(f *query.Filter, id any) bool {
	fc := f.Collator()
	if fc == nil || !hasString(id) {
		return true
	}
	ic, _ := c.indexes[0].collator().(*collation.Collation)
	fcc, _ := fc.(*collation.Collation)
	return ic != nil && collation.Equal(ic, fcc)
}

// hasString reports whether v is or contains a string or symbol.
func hasString(v any) bool {
	switch x := v.(type) {
	case string, bson.Symbol:
		return true
	case bson.D:
		for _, e := range x {
			if hasString(e.Value) {
				return true
			}
		}
	case bson.A:
		for _, e := range x {
			if hasString(e) {
				return true
			}
		}
	}
	return false
}

// idKeyOf is the byID key of an _id value: under the _id index's
// collation (a collection default collation), so that _id values it deems
// equal are duplicates, as on mongod.
func (c *collection) idKeyOf(id any) string {
	return value.KeyWith(id, c.indexes[0].collator())
}

// lookupID returns the record of _id id, nil if there is none. The key
// (idKeyOf's) is built on the stack: a string of it was an allocation per
// lookup.
func (c *collection) lookupID(id any) *record {
	var buf [32]byte
	k := value.AppendKey(buf[:0], id, c.indexes[0].collator())
	if c.partial {
		c.fetch(string(k))
	}
	return c.byID.getKey(k)
}

// match returns the records matching f (in natural order), at most limit
// when limit > 0. An error evaluating a $expr (such as an undefined
// variable) fails the whole operation, as on mongod.
func (c *collection) match(f *query.Filter, filterDoc bson.D, limit int) ([]*record, error) {
	if f.Near() != nil {
		return c.matchNear(f, limit) // nearest first (geofind.go)
	}
	var out []*record
	var evalErr error
	visit := func(r *record) bool {
		ok, err := f.MatchErr(r.doc)
		if err != nil {
			evalErr = err
			return false
		}
		if ok {
			out = append(out, r)
			if limit > 0 && len(out) == limit {
				return false
			}
		}
		return true
	}
	if f.Text() != nil {
		recs, g, _, err := c.candidatesFor(filterDoc, f, nil)
		if err != nil {
			return nil, err
		}
		f = g
		for _, r := range recs {
			if !visit(r) {
				break
			}
		}
		return out, evalErr
	}
	if id, ok := idEquality(filterDoc); ok && c.idLookupFits(f, id) {
		var one [1]*record // room for the record: no list to allocate
		for _, r := range c.candidates(filterDoc, f, one[:0]) {
			if !visit(r) {
				break
			}
		}
		return out, evalErr
	}
	c.each(visit)
	return out, evalErr
}

// candidatesFor is candidates with what the caller must still check: a
// $text is answered by the text index, which also gives the textScores;
// the records then need only the rest of the filter.
func (c *collection) candidatesFor(filterDoc bson.D, f *query.Filter, into []*record) ([]*record, *query.Filter, map[*record]float64, error) {
	if ts := textOf(f); ts != nil {
		recs, scores, err := c.textCandidates(ts, filterDoc)
		return recs, f.WithoutText(), scores, err
	}
	return c.candidates(filterDoc, f, into), f, nil, nil
}

// prepareInsert validates doc for insertion and returns the document to
// store: a deep copy with _id first, generating an ObjectID when missing.
func prepareInsert(doc bson.D) (bson.D, error) {
	out := make(bson.D, 0, len(doc)+1)
	id, ok := value.Get(doc, "_id")
	if !ok {
		id = bson.NewObjectID()
	}
	if err := checkID(id); err != nil {
		return nil, err
	}
	out = append(out, bson.E{Key: "_id", Value: value.Clone(id)})
	for _, e := range doc {
		if e.Key == "_id" {
			continue
		}
		out = append(out, bson.E{Key: e.Key, Value: value.Clone(e.Value)})
	}
	if n := bsonSize(out); n > maxBSONSize {
		return nil, cmderr.New(cmderr.BSONObjectTooLarge, "object to insert too large. size in bytes: %d, max size: %d", n, maxBSONSize)
	}
	if err := checkStorageDepth(out); err != nil {
		return nil, err
	}
	return out, nil
}

// prepareOwnedInsert is prepareInsert for a document nothing else holds
// or will change: the insert command's own decoding of its documents. One
// with a single _id, first, is stored as it is instead of copied: the
// copy was a third of the memory an insert allocated per document, all of
// it garbage for the collector.
func prepareOwnedInsert(doc bson.D) (bson.D, error) {
	if len(doc) == 0 || doc[0].Key != "_id" {
		return prepareInsert(doc)
	}
	for _, e := range doc[1:] {
		if e.Key == "_id" {
			return prepareInsert(doc) // keeps the first _id only
		}
	}
	if err := checkID(doc[0].Value); err != nil {
		return nil, err
	}
	if n := bsonSize(doc); n > maxBSONSize {
		return nil, cmderr.New(cmderr.BSONObjectTooLarge, "object to insert too large. size in bytes: %d, max size: %d", n, maxBSONSize)
	}
	if err := checkStorageDepth(doc); err != nil {
		return nil, err
	}
	return doc, nil
}

func checkID(id any) error {
	switch id.(type) {
	case bson.A:
		return cmderr.New(cmderr.InvalidIdField, "The '_id' value cannot be of type array")
	case bson.Regex:
		return cmderr.New(cmderr.InvalidIdField, "can't use a regex for _id")
	case bson.Undefined:
		return cmderr.New(cmderr.InvalidIdField, "can't use a undefined for _id")
	}
	if d, ok := id.(bson.D); ok {
		for _, e := range d {
			if strings.HasPrefix(e.Key, "$") {
				return cmderr.New(cmderr.DollarPrefixedFieldName, "_id fields may not contain '$'-prefixed fields: %s is not valid for storage.", e.Key)
			}
		}
	}
	return nil
}

// insert stores doc (already prepared) after checking every unique index.
func (c *collection) insert(doc bson.D) error {
	id, _ := value.Get(doc, "_id")
	k := c.idKeyOf(id)
	return c.insertRecord(&record{doc: doc}, id, k, idHash(k))
}

// simpleIDKey is the byID key of an _id value when the _id index compares
// strings binary (no collection default collation), which a write can
// compute before it holds the collection's lock; keyFor checks it then.
func simpleIDKey(b []byte, id any) []byte { return value.AppendKey(b, id, nil) }

// keyFor is idKeyOf(id) and its idHash given simple, id's simpleIDKey,
// and h, simple's idHash.
func (c *collection) keyFor(id any, simple string, h uint64) (string, uint64) {
	if c.indexes[0].coll != nil {
		k := c.idKeyOf(id)
		return k, idHash(k)
	}
	return simple, h
}

// insertRecord stores r.doc (prepared; its _id is id) under idKey, which is
// idKeyOf(id) and hashes to h, after checking every unique index. r is a
// fresh record, so that a batch can allocate its records together.
func (c *collection) insertRecord(r *record, id any, idKey string, h uint64) error {
	doc := r.doc
	if c.timeseries {
		if t, _ := value.Get(doc, c.timeField); bsonTypeName(t) != "date" {
			return cmderr.New(cmderr.BadValue, "'%s' must be present and contain a valid BSON UTC datetime value", c.timeField)
		}
		idKey += "\x00" + strconv.FormatUint(c.inserted+1, 10)
		h = idHash(idKey)
	}
	if c.noIDIndex {
		idKey = "\x00" + strconv.FormatUint(c.inserted+1, 10)
		h = idHash(idKey)
	}
	if c.validator != nil {
		if err := c.validate(doc, nil); err != nil {
			return err
		}
	}
	if !c.timeseries && !c.noIDIndex {
		if c.fetch(idKey); c.byID.getHashed(h, idKey) != nil {
			return c.dupKey(c.indexes[0], bson.D{{Key: "_id", Value: id}})
		}
	}
	keys, err := c.indexKeys(doc)
	if err != nil {
		return err
	}
	r.idKey = idKey
	if err := c.checkUnique(keys, r); err != nil {
		return err
	}
	if err := c.beforeWrite(idKey, false); err != nil {
		return err
	}
	c.inserted++
	r.pos, r.seq = len(c.order), c.inserted
	c.order = append(c.order, r)
	c.byID.putHashed(h, r)
	c.live++
	c.addKeys(keys, r)
	c.logChange(changeInsert, nil, doc)
	c.afterWrite(idKey, nil)
	if c.capped {
		c.bytes += int64(bsonSize(doc))
		c.evictCapped(r)
	}
	return nil
}

// evictCapped removes the oldest documents of a capped collection until
// it is within its limits, never the one just inserted. As on mongod 5.0+,
// each removal is a delete (change streams see it).
func (c *collection) evictCapped(keep *record) {
	for c.live > 1 && ((c.cappedMax > 0 && int64(c.live) > c.cappedMax) || c.bytes > c.cappedSize) {
		var oldest *record
		for _, r := range c.order {
			if r != nil {
				oldest = r
				break
			}
		}
		if oldest == nil || oldest == keep {
			return
		}
		c.remove(oldest)
	}
}

// replace swaps r's document for doc (the result of an update), keeping
// the _id and every unique index consistent. whole says the new document
// is a replacement rather than an update, for the change log.
func (c *collection) replace(r *record, doc bson.D, whole bool) error {
	oldID, _ := value.Get(r.doc, "_id")
	newID, ok := value.Get(doc, "_id")
	if !ok {
		doc = append(bson.D{{Key: "_id", Value: oldID}}, doc...)
	} else if !sameValue(oldID, newID) {
		return cmderr.New(cmderr.ImmutableField, "After applying the update, the (immutable) field '_id' was found to have been altered to _id: %s", shellString(newID))
	} else if doc[0].Key != "_id" {
		rest := make(bson.D, 0, len(doc))
		rest = append(rest, bson.E{Key: "_id", Value: newID})
		for _, e := range doc {
			if e.Key != "_id" {
				rest = append(rest, e)
			}
		}
		doc = rest
	}
	for _, f := range c.shardKey {
		if c.committing != nil {
			// A commit applying a transaction's delete and insert of one
			// _id: the router moved the document within the shard.
			break
		}
		was, _ := dottedValue(r.doc, f)
		now, _ := dottedValue(doc, f)
		if !sameValue(was, now) {
			return &keyChangeError{pre: value.CloneDoc(r.doc), post: value.CloneDoc(doc)}
		}
	}
	if n := bsonSize(doc); n > maxBSONSize {
		return cmderr.New(17419, "Resulting document after update is larger than %d", maxBSONSize)
	}
	if err := checkStorageDepth(doc); err != nil {
		return err
	}
	if c.validator != nil {
		if err := c.validate(doc, r.doc); err != nil {
			return err
		}
	}
	oldKeys, err := c.indexKeys(r.doc)
	if err != nil {
		return err
	}
	newKeys, err := c.indexKeys(doc)
	if err != nil {
		return err
	}
	if err := c.checkUnique(keptKeys(newKeys, oldKeys), r); err != nil {
		return err
	}
	if err := c.beforeWrite(r.idKey, whole); err != nil {
		return err
	}
	c.removeKeys(oldKeys, r)
	c.addKeys(newKeys, r)
	kind := changeUpdate
	if whole {
		kind = changeReplace
	}
	c.logChange(kind, r.doc, doc)
	if c.capped {
		c.bytes += int64(bsonSize(doc) - bsonSize(r.doc))
	}
	before := r.doc
	r.doc = doc
	r.enc.Store(nil)
	c.afterWrite(r.idKey, before)
	return nil
}

// sameValue is exact identity for _id: same BSON type class and value.
// The keys are built in stack buffers (value.Key allocated one for every
// replace).
func sameValue(a, b any) bool {
	var ab, bb [64]byte
	return bytes.Equal(value.AppendKey(ab[:0], a, nil), value.AppendKey(bb[:0], b, nil))
}

func (c *collection) remove(r *record) error {
	if err := c.beforeWrite(r.idKey, true); err != nil {
		return err
	}
	if keys, err := c.indexKeys(r.doc); err == nil {
		c.removeKeys(keys, r)
	}
	c.byID.del(r.idKey)
	c.logChange(changeDelete, r.doc, nil)
	if c.capped {
		c.bytes -= int64(bsonSize(r.doc))
	}
	c.order[r.pos] = nil
	c.live--
	if len(c.order) > 64 && c.live < len(c.order)/2 {
		c.compact()
	}
	c.afterWrite(r.idKey, r.doc)
	return nil
}

func (c *collection) compact() {
	out := make([]*record, 0, c.live)
	for _, r := range c.order {
		if r != nil {
			r.pos = len(out)
			out = append(out, r)
		}
	}
	c.order = out
}

// ---- duplicate key errors ----

// dupKeyError is a duplicate-key error with the keyPattern and keyValue
// fields MongoDB attaches to it; it unwraps to its *cmderr.Error.
type dupKeyError struct {
	err        *cmderr.Error
	keyPattern bson.D
	keyValue   bson.D
}

func (e *dupKeyError) Error() string { return e.err.Error() }
func (e *dupKeyError) Unwrap() error { return e.err }

func (c *collection) dupKey(ix *index, keyValue bson.D) error {
	var b strings.Builder
	b.WriteString("{ ")
	for i, e := range keyValue {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(e.Key)
		b.WriteString(": ")
		b.WriteString(shellString(e.Value))
	}
	b.WriteString(" }")
	return &dupKeyError{
		err: cmderr.New(cmderr.DuplicateKey, "E11000 duplicate key error collection: %s index: %s dup key: %s",
			c.ns(), ix.name, b.String()),
		keyPattern: value.CloneDoc(ix.key),
		keyValue:   value.CloneDoc(keyValue),
	}
}

// errorFields renders err as the code/errmsg (+ keyPattern/keyValue) fields
// of a write error or an error reply.
func errorFields(err error) (code int32, fields bson.D) {
	var dk *dupKeyError
	if errors.As(err, &dk) {
		return dk.err.Code, bson.D{
			{Key: "code", Value: dk.err.Code},
			{Key: "keyPattern", Value: dk.keyPattern},
			{Key: "keyValue", Value: dk.keyValue},
			{Key: "errmsg", Value: dk.err.Message},
		}
	}
	if fields, ok := validationFields(err); ok {
		return codeDocumentValidationFailure, fields
	}
	var kc *keyChangeError
	if errors.As(err, &kc) {
		return codeWouldChangeOwningShard, kc.fields()
	}
	var ce *cmderr.Error
	if errors.As(err, &ce) {
		return ce.Code, bson.D{{Key: "code", Value: ce.Code}, {Key: "errmsg", Value: ce.Message}}
	}
	return cmderr.UnknownError, bson.D{{Key: "code", Value: int32(cmderr.UnknownError)}, {Key: "errmsg", Value: err.Error()}}
}

// shellString renders v the way the server prints values in messages.
func shellString(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case int32:
		return strconv.FormatInt(int64(x), 10)
	case int64:
		return strconv.FormatInt(x, 10)
	case int:
		return strconv.Itoa(x)
	case float64:
		if x == math.Trunc(x) && !math.IsInf(x, 0) && math.Abs(x) < 1e15 {
			return strconv.FormatFloat(x, 'f', 1, 64)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case nil, bson.Null:
		return "null"
	case bson.Undefined:
		return "undefined"
	case bson.ObjectID:
		return "ObjectId('" + x.Hex() + "')"
	case bson.DateTime:
		return fmt.Sprintf("new Date(%d)", int64(x))
	case bson.Timestamp:
		return fmt.Sprintf("Timestamp(%d, %d)", x.T, x.I)
	case bson.Decimal128:
		return "NumberDecimal(\"" + x.String() + "\")"
	case bson.Binary:
		return fmt.Sprintf("BinData(%d, %X)", x.Subtype, x.Data)
	case bson.Regex:
		return "/" + x.Pattern + "/" + x.Options
	case bson.MinKey:
		return "MinKey"
	case bson.MaxKey:
		return "MaxKey"
	case bson.D:
		if len(x) == 0 {
			return "{}"
		}
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = e.Key + ": " + shellString(e.Value)
		}
		return "{ " + strings.Join(parts, ", ") + " }"
	case bson.A:
		if len(x) == 0 {
			return "[]"
		}
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = shellString(e)
		}
		return "[ " + strings.Join(parts, ", ") + " ]"
	}
	return fmt.Sprint(v)
}

// ---- BSON sizes ----

// bsonSize returns the encoded size of a document without encoding it.
func bsonSize(d bson.D) int {
	n := 5
	for _, e := range d {
		n += 2 + len(e.Key) + valueSize(e.Value)
	}
	return n
}

func valueSize(v any) int {
	switch x := v.(type) {
	case float64, int64, int, bson.DateTime, bson.Timestamp:
		return 8
	case int32:
		return 4
	case string:
		return 5 + len(x)
	case bson.Symbol:
		return 5 + len(x)
	case bson.JavaScript:
		return 5 + len(x)
	case bson.D:
		return bsonSize(x)
	case bson.M:
		return bsonSize(value.AsDoc(x))
	case bson.Raw:
		return len(x)
	case bsond.Doc:
		return len(x)
	case bson.A:
		n := 5
		for i, e := range x {
			n += 2 + len(strconv.Itoa(i)) + valueSize(e)
		}
		return n
	case bson.Binary:
		if x.Subtype == 2 {
			return 9 + len(x.Data)
		}
		return 5 + len(x.Data)
	case bson.ObjectID:
		return 12
	case bool:
		return 1
	case bson.Regex:
		return len(x.Pattern) + len(x.Options) + 2
	case bson.DBPointer:
		return 5 + len(x.DB) + 12
	case bson.CodeWithScope:
		return 4 + 5 + len(x.Code) + valueSize(x.Scope)
	case bson.Decimal128:
		return 16
	}
	return 0
}

// randomUUID returns a random (version 4) UUID's 16 bytes.
func randomUUID() []byte {
	u := make([]byte, 16)
	_, _ = rand.Read(u)
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

// maxStorageDepth is mongod's nesting limit for stored documents: a
// top-level field is level 1, each embedded document or array adds one.
const maxStorageDepth = 100

// checkStorageDepth refuses a document nested deeper than mongod stores,
// with mongod's Overflow error. It stops descending at the limit.
func checkStorageDepth(doc bson.D) error {
	if tooDeep(doc, 1) {
		return cmderr.New(cmderr.Overflow, "Document exceeds maximum nesting depth of %d", maxStorageDepth)
	}
	return nil
}

// tooDeep reports whether v's elements, at level, nest past the limit.
// It walks the values in place: gathering them into a slice first was an
// allocation per embedded document of every inserted document.
func tooDeep(v any, level int) bool {
	switch x := v.(type) {
	case bson.D:
		for _, e := range x {
			if level > maxStorageDepth || tooDeep(e.Value, level+1) {
				return true
			}
		}
	case bson.A:
		for _, e := range x {
			if level > maxStorageDepth || tooDeep(e, level+1) {
				return true
			}
		}
	}
	return false
}
