package mongosim

import (
	"errors"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/expr"
	"github.com/sturdy-go/sturdy/mongosim/internal/query"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

func init() {
	register(
		&command{name: "find", run: cmdFind},
		&command{name: "count", run: cmdCount},
		&command{name: "distinct", run: cmdDistinct},
	)
}

// snapshot returns deep copies of the documents of db.coll matching f, in
// natural order; limit > 0 stops early. A missing collection has none.
func (s *storage) snapshot(db, coll string, f *query.Filter, filterDoc bson.D, limit int, hint any) ([]bson.D, error) {
	if f.Scripted() {
		// A script may run long (sleep, a loop until maxTimeMS): it runs on
		// copies, outside the collection's lock, so writers never wait on it.
		docs, err := s.snapshot(db, coll, nil, filterDoc, 0, hint)
		return filterDocs(docs, f, limit, err)
	}
	var out []bson.D
	err := s.read(db, coll, func(c *collection) error {
		if c == nil {
			return nil
		}
		return c.eachMatch(filterDoc, f, hint, func(rec *record, scores map[*record]float64) bool {
			if scores != nil {
				out = append(out, withTextScore(rec.doc, scores[rec]))
			} else {
				out = append(out, value.CloneDoc(rec.doc))
			}
			return limit <= 0 || len(out) < limit
		})
	})
	return out, err
}

// eachMatch calls fn with every document of c that f matches, in candidate
// order, until fn returns false; a document a hinted sparse or partial index
// lacks is passed over. scores holds the $text scores, nil without a $text.
func (c *collection) eachMatch(filterDoc bson.D, f *query.Filter, hint any, fn func(rec *record, scores map[*record]float64) bool) error {
	if err := checkHint(c, hint); err != nil {
		return err
	}
	var one [1]*record // room for an _id equality's record: no list to allocate
	recs, g, scores, err := c.candidatesFor(filterDoc, f, one[:0])
	if err != nil {
		return err
	}
	hinted := c.findIndex(hint)
	for _, rec := range recs {
		if hinted != nil && !hinted.holds(rec.doc) {
			continue
		}
		ok, err := g.MatchErr(rec.doc)
		if err != nil {
			return err
		}
		if ok && !fn(rec, scores) {
			break
		}
	}
	return nil
}

// readDocs is snapshot, or snapshotAt for a readConcern snapshot read.
// With a $text, each document carries its textScore (query.TextScoreField).
func (r *request) readDocs(coll string, f *query.Filter, filterDoc bson.D, limit int, hint any) ([]bson.D, error) {
	docs, err := r.readDocsOnly(coll, f, filterDoc, limit, hint)
	if ts := textOf(f); ts != nil && err == nil {
		for i, d := range docs {
			if len(d) == 0 || d[len(d)-1].Key != query.TextScoreField {
				docs[i] = append(d, bson.E{Key: query.TextScoreField, Value: ts.score(d)})
			}
		}
	}
	return docs, err
}

func (r *request) readDocsOnly(coll string, f *query.Filter, filterDoc bson.D, limit int, hint any) ([]bson.D, error) {
	if docs, isView, err := r.data().viewDocs(r.ctx, r.db, coll, r.now); err != nil || isView {
		return filterDocs(docs, f, limit, err)
	}
	if r.tx != nil {
		// A transaction reads its own snapshot and writes.
		return r.data().snapshot(r.db, coll, f, filterDoc, limit, hint)
	}
	if r.rc.level == "snapshot" {
		return r.cluster.data.snapshotAt(r.db, coll, f, hint, r.rc.atClusterTime)
	}
	return r.cluster.data.snapshot(r.db, coll, f, filterDoc, limit, hint)
}

// filterDocs keeps the documents matching f, at most limit when limit > 0.
func filterDocs(docs []bson.D, f *query.Filter, limit int, err error) ([]bson.D, error) {
	if err != nil {
		return nil, err
	}
	out := docs[:0]
	for _, d := range docs {
		ok, err := f.MatchErr(d)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, d)
			if limit > 0 && len(out) == limit {
				break
			}
		}
	}
	return out, nil
}

// findQuery is a find command, parsed and compiled.
type findQuery struct {
	coll      string
	env       opEnv
	filterDoc bson.D
	f         *query.Filter
	findPage
	hint     any
	keys     findKeys
	tailable bool
	sorter   *query.Sort // nil: no sort, or {$natural: ±1}
	reverse  bool        // sort {$natural: -1}
	proj     *query.Projection
}

func cmdFind(r *request) (bson.D, error) {
	var q findQuery
	if err := parseFind(r, &q); err != nil {
		return nil, err
	}
	if err := q.compile(); err != nil {
		return nil, err
	}
	if q.tailable {
		n, isNum := asFloat(nil)
		if len(q.sort) == 1 && q.sort[0].Key == "$natural" {
			n, isNum = asFloat(q.sort[0].Value)
		}
		natural := isNum && n == 1
		return tailableFind(r, q.coll, q.f, q.proj, len(q.sort) > 0 && !natural, q.batchSize, q.singleBatch)
	}
	if err := q.keys.resolve(r, q.coll, q.filterDoc, q.sort, q.hint); err != nil {
		return nil, err
	}
	plan, err := q.plan(r)
	if err != nil {
		return nil, err
	}
	if q.asStored(r, plan) {
		items, ns, err := q.storedResults(r)
		if err != nil {
			return nil, err
		}
		return r.cluster.data.cursors.replyItems(r, ns, items, q.batchSize, q.singleBatch, findEnd(r, q.coll, len(items), q.limit)), nil
	}
	docs, err := q.results(r, plan)
	if err != nil {
		return nil, err
	}
	return r.cluster.data.cursors.reply(r, r.db+"."+q.coll, docs, q.batchSize, q.singleBatch, findEnd(r, q.coll, len(docs), q.limit)), nil
}

// parseFind reads a find command's arguments into q (the caller's: not an
// allocation of its own).
func parseFind(r *request, q *findQuery) error {
	coll, err := commandArgs(r, "filter", "sort", "projection", "hint", "skip", "limit", "batchSize",
		"singleBatch", "max", "min", "returnKey", "showRecordId", "tailable", "oplogReplay",
		"noCursorTimeout", "awaitData", "allowPartialResults", "collation", "allowDiskUse", "let",
		"term", "includeQueryStatsMetrics")
	if err != nil {
		return err
	}
	*q = findQuery{coll: coll}
	if v, ok := r.get("tailable"); ok {
		q.tailable = truthy(v)
	}
	if v, ok := r.get("awaitData"); ok && truthy(v) && !q.tailable {
		return cmderr.New(cmderr.FailedToParse, "Cannot set 'awaitData' without also setting 'tailable'")
	}
	if v, ok := r.get("oplogReplay"); ok && truthy(v) {
		return cmderr.Unsupported("find option oplogReplay")
	}
	if q.keys, err = parseFindKeys(r, q.tailable); err != nil {
		return err
	}
	if q.env, err = r.filterEnvFor(coll); err != nil {
		return err
	}
	if q.filterDoc, _, err = docArg(r, "filter"); err != nil {
		return err
	}
	if q.findPage, err = findPageArgs(r); err != nil {
		return err
	}
	q.hint, _ = r.get("hint")
	return nil
}

// compile compiles the filter, sort and projection and checks how they
// combine with a $text query.
func (q *findQuery) compile() error {
	var err error
	if q.f, err = q.env.compileNearFilter(q.filterDoc); err != nil {
		return err
	}
	q.reverse = isNaturalReverse(q.sort) && !q.tailable
	if len(q.sort) > 0 && !q.reverse {
		if q.sorter, err = compileSort(q.sort, q.env); err != nil {
			return err
		}
	}
	if q.proj, err = optionalProjection(q.projection, q.env); err != nil {
		return err
	}
	if (q.proj.NeedsTextScore() || (q.sorter != nil && q.sorter.NeedsTextScore())) && q.f.Text() == nil {
		return expr.ErrNoTextScore()
	}
	return checkTextQuery(q.f, q.sort, q.hint, q.tailable)
}

// results reads the matching documents and puts them in the plan's
// order, sorts, pages and projects them.
func (q *findQuery) results(r *request, plan readPlan) ([]bson.D, error) {
	f := q.f
	if f.Near() != nil {
		plan = readPlan{} // a geo index orders by distance (findDocs)
	}
	early := 0
	if q.sorter == nil && !q.reverse && q.limit > 0 && !q.keys.bounded() && !plan.ordered() {
		early = int(q.skip + q.limit)
	}
	docs, err := r.findDocs(q.coll, f, q.filterDoc, early, q.hint)
	if err != nil {
		if f.Scripted() {
			err = executorError("find", r, err)
		}
		return nil, err
	}
	// The plan's order; a sort then reorders, equal keys staying in it.
	docs = plan.order(docs)
	docs = q.keys.bound(docs, q.sorter != nil || q.reverse)
	if q.sorter != nil {
		q.sorter.SortDocs(docs)
	}
	if q.reverse {
		slices.Reverse(docs)
	}
	docs = skipLimit(docs, q.skip, q.limit)
	if q.keys.returnKey {
		q.keys.keys(docs) // the index keys, whatever the projection says
	} else if err := projectDocs(q.proj, f, docs); err != nil {
		return nil, err
	}
	if f.Text() != nil {
		stripTextScores(docs)
	}
	return docs, nil
}

// plan is the find's read plan. A point read (pointRead) returns at most
// one document, whose order no plan changes: it needs none, and may then
// answer with the stored document's encoding (asStored).
func (q *findQuery) plan(r *request) (readPlan, error) {
	if q.pointRead() {
		return readPlan{}, nil
	}
	return r.planFor(q.coll, q.filterDoc, q.sort, q.hint)
}

// pointRead reports a find, without sort, of what at most one document
// matches (isPointFilter).
func (q *findQuery) pointRead() bool {
	return len(q.sort) == 0 && isPointFilter(q.f, q.filterDoc, q.hint)
}

// isPointFilter reports a filter at most one document matches, with no
// hint: an equality on a plain _id (idEquality) compared binary or holding
// no string (the _id index's keys are unique under its collation, which
// deems equal at least what a binary comparison does). A hint is left
// out: a hinted sparse or partial index may hide the document.
func isPointFilter(f *query.Filter, filterDoc bson.D, hint any) bool {
	if hint != nil {
		return false
	}
	id, ok := idEquality(filterDoc)
	return ok && (f.Collator() == nil || !hasString(id))
}

// asStored reports whether the find returns stored documents unchanged,
// in natural order: a plain read (no transaction, snapshot or view) of a
// collection scan without sort, projection, index keys, $text, geo or
// script. Such a find answers with the stored documents' encodings
// (storedResults), copying and encoding nothing per document.
func (q *findQuery) asStored(r *request, plan readPlan) bool {
	f := q.f
	return !plan.ordered() && q.sorter == nil && !q.reverse && q.proj == nil &&
		!q.keys.returnKey && !q.keys.bounded() &&
		f.Text() == nil && f.Near() == nil && len(f.GeoRegions()) == 0 && !f.Scripted() &&
		r.tx == nil && r.rc.level != "snapshot" && r.data().viewOf(r.db, q.coll) == nil
}

// storedResults reads the encodings of the documents a find returns
// (asStored), skip and limit applied, and the namespace as a reply value
// (replyItems). A stored document never changes in place (a write
// replaces it), so the bytes are its state at the read.
func (q *findQuery) storedResults(r *request) (items bson.A, ns any, err error) {
	out := bson.A{}
	skip, limit := int(q.skip), int(q.limit)
	var encErr error
	take := func(rec *record) bool {
		if skip > 0 {
			skip--
			return true
		}
		var v any
		if v, encErr = rec.encoded(); encErr != nil {
			return false
		}
		out = append(out, v)
		return limit <= 0 || len(out) < limit
	}
	err = r.cluster.data.read(r.db, q.coll, func(c *collection) error {
		if c == nil {
			return nil
		}
		ns = c.nsv
		if n := c.live - skip; limit <= 0 && n > 0 && !q.pointRead() {
			out = make(bson.A, 0, n)
		}
		if len(q.filterDoc) == 0 && q.hint == nil {
			c.each(take) // everything matches: no candidate list, no filter
			return nil
		}
		return c.eachMatch(q.filterDoc, q.f, q.hint, func(rec *record, _ map[*record]float64) bool { return take(rec) })
	})
	if encErr != nil {
		return nil, nil, encErr
	}
	if ns == nil {
		ns = r.db + "." + q.coll
	}
	return out, ns, err
}

// findEnd says when a find's cursor reports its end. As mongod's plan, it
// knows at once when the limit is reached or the collection does not
// exist (an EOF plan), else only when asked for one more document.
func findEnd(r *request, coll string, n int, limit int64) cursorEnd {
	if limit > 0 && int64(n) == limit {
		return endAtOnce
	}
	if n == 0 {
		exists := false
		_ = r.data().read(r.db, coll, func(c *collection) error {
			exists = c != nil
			return nil
		})
		if !exists {
			return endAtOnce
		}
	}
	return endLazily
}

// projectDocs applies proj to each of docs in place. A positional field.$
// takes the array position at which f matched the document, as mongod's
// find does (an $elemMatch in the filter included).
func projectDocs(proj *query.Projection, f *query.Filter, docs []bson.D) error {
	if proj == nil {
		return nil
	}
	for i, d := range docs {
		pos := -1
		if proj.NeedsPosition() {
			_, pos = f.MatchPosition(d)
		}
		out, err := proj.Project(d, pos)
		if err != nil {
			return err
		}
		docs[i] = out
	}
	return nil
}

// isNaturalReverse reports sort {$natural: -1}: natural order backwards.
func isNaturalReverse(spec bson.D) bool {
	if len(spec) != 1 || spec[0].Key != "$natural" {
		return false
	}
	n, ok := int64Arg(spec[0].Value)
	return ok && n == -1
}

// compileSort accepts {$natural: 1}, which is natural order anyway.
func compileSort(spec bson.D, env opEnv) (*query.Sort, error) {
	if len(spec) == 1 && spec[0].Key == "$natural" {
		if n, ok := int64Arg(spec[0].Value); ok && n == 1 {
			return nil, nil
		}
		return nil, cmderr.Unsupported("sort {$natural: -1}")
	}
	return env.compileSort(spec)
}

// findPage holds a find's sort, projection and paging arguments.
type findPage struct {
	sort, projection bson.D
	skip, limit      int64
	batchSize        int // -1: the default
	singleBatch      bool
}

// findPageArgs reads a find's sort, projection and paging arguments; a
// single-batch find's batch is at most its limit.
func findPageArgs(r *request) (findPage, error) {
	sortDoc, _, err := docArg(r, "sort")
	if err != nil {
		return findPage{}, err
	}
	projDoc, _, err := docArg(r, "projection")
	if err != nil {
		return findPage{}, err
	}
	skip, limit, singleBatch, err := skipLimitArgs(r)
	if err != nil {
		return findPage{}, err
	}
	batchSize := -1
	if bs, ok, err := nonNegArg(r, "batchSize"); err != nil {
		return findPage{}, err
	} else if ok {
		batchSize = int(bs)
	}
	if v, ok := r.get("singleBatch"); ok && truthy(v) {
		singleBatch = true
	}
	if singleBatch && limit > 0 && (batchSize < 0 || int64(batchSize) > limit) {
		batchSize = int(limit)
	}
	return findPage{sort: sortDoc, projection: projDoc, skip: skip, limit: limit, batchSize: batchSize, singleBatch: singleBatch}, nil
}

// skipLimitArgs reads the skip and limit fields. As mongod 4.4+, find
// takes no negative limit (drivers send singleBatch instead): 51024, as for
// skip. count still takes one, the legacy form of one batch of at most
// -limit, reported as negative.
func skipLimitArgs(r *request) (skip, limit int64, negative bool, err error) {
	if skip, _, err = nonNegArg(r, "skip"); err != nil {
		return 0, 0, false, err
	}
	if v, ok := r.get("limit"); ok {
		n, isInt := int64Arg(v)
		if !isInt {
			return 0, 0, false, cmderr.New(cmderr.TypeMismatch, "BSON field '%s.limit' is the wrong type '%s', expected types '[long, int, decimal, double]'", r.name, typeNameOf(v))
		}
		if n < 0 && r.name != "count" {
			return 0, 0, false, cmderr.New(51024, "BSON field 'limit' value must be >= 0, actual value '%d'", n)
		}
		if n < 0 {
			n, negative = -n, true
		}
		limit = n
	}
	return skip, limit, negative, nil
}

func skipLimit(docs []bson.D, skip, limit int64) []bson.D {
	if skip >= int64(len(docs)) {
		return nil
	}
	docs = docs[skip:]
	if limit > 0 && limit < int64(len(docs)) {
		docs = docs[:limit]
	}
	return docs
}

func cmdCount(r *request) (bson.D, error) {
	coll, err := collectionArg(r)
	if err != nil {
		return nil, err
	}
	if err := checkFields(r, "query", "limit", "skip", "hint", "collation", "fields"); err != nil {
		return nil, err
	}
	env, err := r.filterEnvFor(coll)
	if err != nil {
		return nil, err
	}
	filterDoc, _, err := docArg(r, "query")
	if err != nil {
		return nil, err
	}
	skip, limit, _, err := skipLimitArgs(r)
	if err != nil {
		return nil, err
	}
	hint, _ := r.get("hint")
	f, err := env.compileFilter(filterDoc)
	if err != nil {
		return nil, err
	}
	if err := checkTextQuery(f, nil, hint, false); err != nil {
		return nil, err
	}
	var n int64
	if docs, isView, err := r.data().viewDocs(r.ctx, r.db, coll, r.now); err != nil {
		return nil, err
	} else if isView {
		docs, err := filterDocs(docs, f, 0, nil)
		if err != nil {
			return nil, err
		}
		n = int64(len(docs))
	} else if f.Scripted() {
		docs, err := r.data().snapshot(r.db, coll, f, filterDoc, 0, hint)
		if err != nil {
			return nil, err
		}
		n = int64(len(docs))
	}
	err = r.data().read(r.db, coll, func(c *collection) error {
		if f.Scripted() {
			return nil // counted above
		}
		if c == nil || c.view != nil {
			return nil
		}
		return c.eachMatch(filterDoc, f, hint, func(*record, map[*record]float64) bool {
			n++
			return true
		})
	})
	if err != nil {
		return nil, err
	}
	n = max(0, n-skip)
	if limit > 0 && n > limit {
		n = limit
	}
	return bson.D{{Key: "n", Value: int32(n)}}, nil
}

func cmdDistinct(r *request) (bson.D, error) {
	coll, err := collectionArg(r)
	if err != nil {
		return nil, err
	}
	if err := checkFields(r, "key", "query", "collation", "hint", "rawData"); err != nil {
		return nil, err
	}
	env, err := r.filterEnvFor(coll)
	if err != nil {
		return nil, err
	}
	kv, _ := r.get("key")
	key, ok := kv.(string)
	if !ok {
		return nil, cmderr.New(cmderr.TypeMismatch, "BSON field 'distinct.key' is the wrong type '%s', expected type 'string'", typeNameOf(kv))
	}
	filterDoc, _, err := docArg(r, "query")
	if err != nil {
		return nil, err
	}
	hint, _ := r.get("hint")
	f, err := env.compileFilter(filterDoc)
	if err != nil {
		return nil, err
	}
	if err := checkTextQuery(f, nil, hint, false); err != nil {
		return nil, err
	}
	docs, err := r.readDocs(coll, f, filterDoc, 0, hint)
	if err != nil {
		return nil, err
	}
	if hint != nil {
		plan, err := r.planFor(coll, filterDoc, nil, hint)
		if err != nil {
			return nil, err
		}
		docs = plan.order(docs) // a hinted sparse or partial index holds fewer
	}
	parts := splitPath(key)
	seen := map[string]bool{}
	values := bson.A{}
	for _, d := range docs {
		for _, v := range pathValues(d, parts, nil, true) {
			if _, undef := v.(bson.Undefined); undef {
				continue // an empty array has no values
			}
			k := value.KeyWith(v, env.collator())
			if !seen[k] {
				seen[k] = true
				values = append(values, v)
			}
		}
	}
	// mongod collects the values in a set ordered by BSON comparison.
	collator := env.collator()
	slices.SortStableFunc(values, func(a, b any) int { return value.CompareWith(a, b, collator) })
	return bson.D{{Key: "values", Value: values}}, nil
}

func splitPath(p string) []string {
	var out []string
	start := 0
	for i := 0; i < len(p); i++ {
		if p[i] == '.' {
			out = append(out, p[start:i])
			start = i + 1
		}
	}
	return append(out, p[start:])
}

// executorError is how mongod reports an error raised while a command's
// plan ran (a script's error, or its interruption by maxTimeMS or killOp).
func executorError(cmd string, r *request, err error) error {
	var ce *cmderr.Error
	if !errors.As(err, &ce) {
		return err
	}
	switch {
	case r.expired():
		ce = errMaxTime().(*cmderr.Error)
	case r.killed():
		ce = errInterrupted().(*cmderr.Error)
	}
	out := *ce
	out.Message = "Executor error during " + cmd + " command :: caused by :: " + ce.Message
	return &out
}
