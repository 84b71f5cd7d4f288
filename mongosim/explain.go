package mongosim

import (
	"fmt"
	"hash/fnv"
	"os"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/agg"
	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/query"
)

// explain answers in mongod 8.0's shape (explainVersion "1", the classic
// engine's stage names): a collection scan, EXPRESS_IDHACK for an _id
// equality or FETCH over IXSCAN where mongod would use an index
// (explainindex.go), then SORT, SKIP, LIMIT and projection stages.
// executionStats counts what such a plan examines and returns, from really
// running the read (a write is only matched, never applied).

const (
	verbosityQueryPlanner = "queryPlanner"
	verbosityExecStats    = "executionStats"
	verbosityAllPlans     = "allPlansExecution"
)

// plan is one stage of a plan tree; stats are its executionStages fields.
type plan struct {
	stage string
	spec  bson.D // the winningPlan fields after "stage"
	stats bson.D // executionStages fields after the common counters
	n     int64  // nReturned
	works int64
	input *plan
	// rejected are the other plans considered (queryPlanner.rejectedPlans),
	// carried by the root.
	rejected bson.A
}

func (p *plan) winning() bson.D {
	d := bson.D{{Key: "stage", Value: p.stage}}
	d = append(d, p.spec...)
	if p.input != nil {
		d = append(d, bson.E{Key: "inputStage", Value: p.input.winning()})
	}
	return d
}

func (p *plan) execution() bson.D {
	d := bson.D{
		{Key: "stage", Value: p.stage},
	}
	d = append(d, p.spec...)
	d = append(d,
		bson.E{Key: "nReturned", Value: int32(p.n)},
		bson.E{Key: "executionTimeMillisEstimate", Value: int32(0)},
		bson.E{Key: "works", Value: int32(p.works)},
		bson.E{Key: "advanced", Value: int32(p.n)},
		bson.E{Key: "needTime", Value: int32(max(p.works-p.n-1, 0))},
		bson.E{Key: "needYield", Value: int32(0)},
		bson.E{Key: "saveState", Value: int32(0)},
		bson.E{Key: "restoreState", Value: int32(0)},
		bson.E{Key: "isEOF", Value: int32(1)},
	)
	d = append(d, p.stats...)
	if p.input != nil {
		d = append(d, bson.E{Key: "inputStage", Value: p.input.execution()})
	}
	return d
}

func (p *plan) wrap(stage string, spec bson.D, n int64) *plan {
	return &plan{stage: stage, spec: spec, n: n, works: p.n + 1, input: p, rejected: p.rejected}
}

// readShape is what a read examines and returns.
type readShape struct {
	coll       string
	filter     bson.D
	sort, proj bson.D
	skip       int64
	limit      int64
	hint       any
}

// streams reports a read that stops at its limit: no blocking sort
// stands between the scan and the limit.
func (s readShape) streams(sortByIndex bool) bool {
	return s.limit > 0 && (len(s.sort) == 0 || sortByIndex)
}

// scanPlan runs the read of s and builds its plan: the documents examined
// and matched, sorted, skipped and limited as find does.
func scanPlan(r *request, s readShape) (*plan, *query.Filter, error) {
	if agg.HasText(s.filter) {
		return nil, nil, cmderr.Unsupported("explain of a $text query (TEXT_MATCH/TEXT_OR plans)")
	}
	f, err := query.CompileFilter(s.filter)
	if err != nil {
		return nil, nil, err
	}
	var x scanExamination
	err = r.data().read(r.db, s.coll, func(c *collection) error {
		if c == nil {
			return nil
		}
		var err error
		x, err = examineScan(c, s, f)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	docs, err := r.readDocs(s.coll, f, s.filter, 0, s.hint)
	if err != nil {
		return nil, nil, err
	}
	if len(x.ixPlans) > 0 {
		docs = x.ixPlans[0].order(docs) // a sparse or partial index holds fewer
	}
	n := int64(len(docs))
	if s.streams(x.sortByIndex) {
		n = min(n, s.skip+s.limit) // the scan stopped there
	}
	return s.finish(x.accessPlan(s, n), n, x.sortByIndex), f, nil
}

// scanExamination is what the plans for a read examine in its collection.
type scanExamination struct {
	examined    int64
	idHack      bool
	ixPlans     []*ixPlan // the winning index plan first, then the rejected ones
	sortByIndex bool      // an index scan returns the documents in sort order
	backward    bool      // a collection scan in reverse natural order
}

func examineScan(c *collection, s readShape, f *query.Filter) (scanExamination, error) {
	var x scanExamination
	if err := checkHint(c, s.hint); err != nil {
		return x, err
	}
	if _, ok := idEquality(s.filter); ok && len(s.filter) == 1 && !c.timeseries {
		x.idHack = true
	}
	x.examined = int64(len(c.candidates(s.filter, f, nil)))
	if !x.idHack {
		rp := planRead(c, s.filter, s.sort, s.hint)
		x.backward = rp.backward || isNaturalReverse(s.sort)
		if rp.ix != nil {
			x.ixPlans = append([]*ixPlan{rp.ix}, rp.rejected...)
			x.sortByIndex = rp.sortByIndex && !rp.ix.ix.multikeyIn(c)
		}
		for i, p := range x.ixPlans {
			stopAfter := int64(0)
			if i == 0 && s.streams(x.sortByIndex) {
				stopAfter = s.skip + s.limit
			}
			if err := p.examine(c, f, stopAfter); err != nil {
				return x, err
			}
		}
	}
	if len(x.ixPlans) == 0 && !x.idHack && s.streams(false) {
		n, err := examinedUntilLimit(c, s, f)
		if err != nil {
			return x, err
		}
		x.examined = n
	}
	return x, nil
}

// examinedUntilLimit counts the documents a collection scan examines
// before it has matched skip+limit of them and stops.
func examinedUntilLimit(c *collection, s readShape, f *query.Filter) (int64, error) {
	var examined, matched int64
	for _, rec := range c.candidates(s.filter, f, nil) {
		examined++
		ok, err := f.MatchErr(rec.doc)
		if err != nil {
			return examined, err
		}
		if ok {
			if matched++; matched == s.skip+s.limit {
				break
			}
		}
	}
	return examined, nil
}

// accessPlan is the stage reading the collection, returning n documents:
// EXPRESS_IDHACK, the winning index plan (with the others as rejected
// plans), or COLLSCAN.
func (x scanExamination) accessPlan(s readShape, n int64) *plan {
	if x.idHack {
		return &plan{stage: "EXPRESS_IDHACK", n: n, works: 1,
			spec:  bson.D{{Key: "keyPattern", Value: bson.D{{Key: "_id", Value: int32(1)}}}, {Key: "indexName", Value: "_id_"}, {Key: "indexVersion", Value: int32(2)}},
			stats: bson.D{{Key: "keysExamined", Value: int32(x.examined)}, {Key: "docsExamined", Value: int32(x.examined)}}}
	}
	if len(x.ixPlans) > 0 {
		p := x.ixPlans[0].stage(without(s.filter, x.ixPlans[0].ix.fields[0]), n)
		for _, other := range x.ixPlans[1:] {
			p.rejected = append(p.rejected, append(bson.D{{Key: "isCached", Value: false}}, other.stage(without(s.filter, other.ix.fields[0]), n).winning()...))
		}
		return p
	}
	spec := bson.D{}
	if len(s.filter) > 0 {
		spec = append(spec, bson.E{Key: "filter", Value: parsedQuery(s.filter)})
	}
	direction := "forward"
	if x.backward {
		direction = "backward"
	}
	spec = append(spec, bson.E{Key: "direction", Value: direction})
	return &plan{stage: "COLLSCAN", spec: spec, n: n, works: x.examined + 1,
		stats: bson.D{{Key: "docsExamined", Value: int32(x.examined)}}}
}

// finish adds the stages after a read's access plan p (which returns n
// documents): SORT unless the access order is the sort order, SKIP, LIMIT
// and PROJECTION_DEFAULT.
func (s readShape) finish(p *plan, n int64, sortByIndex bool) *plan {
	if len(s.sort) == 1 && s.sort[0].Key == "$natural" {
		sortByIndex = true // the collection scan's direction is the order
	}
	if len(s.sort) > 0 && !sortByIndex {
		spec := bson.D{{Key: "sortPattern", Value: s.sort}, {Key: "memLimit", Value: int32(104857600)}}
		if s.limit > 0 {
			spec = append(spec, bson.E{Key: "limitAmount", Value: int32(s.skip + s.limit)})
			n = min(n, s.skip+s.limit)
		}
		spec = append(spec, bson.E{Key: "type", Value: "simple"})
		p = p.wrap("SORT", spec, n)
	}
	if s.skip > 0 {
		n = max(n-s.skip, 0)
		p = p.wrap("SKIP", bson.D{{Key: "skipAmount", Value: int32(s.skip)}}, n)
	}
	if s.limit > 0 && (len(s.sort) == 0 || sortByIndex) { // a SORT applies the limit itself
		n = min(n, s.limit)
		p = p.wrap("LIMIT", bson.D{{Key: "limitAmount", Value: int32(s.limit)}}, n)
	}
	if len(s.proj) > 0 {
		p = p.wrap("PROJECTION_DEFAULT", bson.D{{Key: "transformBy", Value: s.proj}}, n)
	}
	return p
}

// parsedQuery normalises a filter as mongod's parsedQuery shows it:
// {a: 1} is {a: {$eq: 1}} and several conditions are an $and.
func parsedQuery(filter bson.D) bson.D {
	var parts []bson.D
	for _, e := range filter {
		if strings.HasPrefix(e.Key, "$") {
			parts = append(parts, bson.D{e})
			continue
		}
		if d, ok := e.Value.(bson.D); ok && len(d) > 0 && strings.HasPrefix(d[0].Key, "$") {
			for _, op := range d {
				parts = append(parts, bson.D{{Key: e.Key, Value: bson.D{op}}})
			}
			continue
		}
		if _, ok := e.Value.(bson.Regex); ok {
			parts = append(parts, bson.D{{Key: e.Key, Value: bson.D{{Key: "$regex", Value: e.Value}}}})
			continue
		}
		parts = append(parts, bson.D{{Key: e.Key, Value: bson.D{{Key: "$eq", Value: e.Value}}}})
	}
	switch len(parts) {
	case 0:
		return bson.D{}
	case 1:
		return parts[0]
	}
	and := bson.A{}
	for _, p := range parts {
		and = append(and, p)
	}
	return bson.D{{Key: "$and", Value: and}}
}

// shapeHash is a stable 8-hex-digit hash of a query's shape, for queryHash
// and planCacheKey.
func shapeHash(parts ...any) string {
	h := fnv.New32a()
	for _, p := range parts {
		fmt.Fprintf(h, "%v|", shape(p))
	}
	return fmt.Sprintf("%08X", h.Sum32())
}

// shape replaces the values of a filter by their types.
func shape(v any) any {
	switch t := v.(type) {
	case bson.D:
		out := bson.D{}
		for _, e := range t {
			out = append(out, bson.E{Key: e.Key, Value: shape(e.Value)})
		}
		return out
	case bson.A:
		out := bson.A{}
		for _, x := range t {
			out = append(out, shape(x))
		}
		return out
	}
	return bsonTypeName(v)
}

func (r *request) queryPlanner(ns string, filter bson.D, hashParts []any, p *plan) bson.D {
	h := shapeHash(hashParts...)
	rejected := p.rejected
	if rejected == nil {
		rejected = bson.A{}
	}
	return bson.D{
		{Key: "namespace", Value: ns},
		{Key: "parsedQuery", Value: parsedQuery(filter)},
		{Key: "indexFilterSet", Value: false},
		{Key: "queryHash", Value: h},
		{Key: "planCacheShapeHash", Value: h},
		{Key: "planCacheKey", Value: shapeHash(append(hashParts, ns)...)},
		{Key: "optimizationTimeMillis", Value: int32(0)},
		{Key: "maxIndexedOrSolutionsReached", Value: false},
		{Key: "maxIndexedAndSolutionsReached", Value: false},
		{Key: "maxScansToExplodeReached", Value: false},
		{Key: "prunedSimilarIndexes", Value: false},
		{Key: "winningPlan", Value: append(bson.D{{Key: "isCached", Value: false}}, p.winning()...)},
		{Key: "rejectedPlans", Value: rejected},
	}
}

func executionStats(p *plan, verbosity string, elapsed time.Duration, keys int64) bson.D {
	docs := int64(0)
	for q := p; q != nil; q = q.input {
		if v, ok := lookupD(q.stats, "docsExamined"); ok {
			n, _ := asInt64(v)
			docs += n
		}
	}
	d := bson.D{
		{Key: "executionSuccess", Value: true},
		{Key: "nReturned", Value: int32(p.n)},
		{Key: "executionTimeMillis", Value: int32(elapsed.Milliseconds())},
		{Key: "totalKeysExamined", Value: int32(keys)},
		{Key: "totalDocsExamined", Value: int32(docs)},
		{Key: "executionStages", Value: append(bson.D{{Key: "isCached", Value: false}}, p.execution()...)},
	}
	if verbosity == verbosityAllPlans {
		d = append(d, bson.E{Key: "allPlansExecution", Value: bson.A{}})
	}
	return d
}

func keysExamined(p *plan) int64 {
	for q := p; q != nil; q = q.input {
		if v, ok := lookupD(q.stats, "keysExamined"); ok {
			n, _ := asInt64(v)
			return n
		}
	}
	return 0
}

func (r *request) serverInfo() bson.D {
	host, _ := os.Hostname()
	port := int32(0)
	if i := strings.LastIndexByte(r.member.addr, ':'); i >= 0 {
		var p int
		fmt.Sscanf(r.member.addr[i+1:], "%d", &p)
		port = int32(p)
	}
	return bson.D{
		{Key: "host", Value: host},
		{Key: "port", Value: port},
		{Key: "version", Value: Version},
		{Key: "gitVersion", Value: "mongosim"},
	}
}

// serverParameters are the query knobs mongod 8.0 lists in explain, at
// their defaults.
func serverParameters() bson.D {
	return bson.D{
		{Key: "internalQueryFacetBufferSizeBytes", Value: int32(104857600)},
		{Key: "internalQueryFacetMaxOutputDocSizeBytes", Value: int32(104857600)},
		{Key: "internalLookupStageIntermediateDocumentMaxSizeBytes", Value: int32(104857600)},
		{Key: "internalDocumentSourceGroupMaxMemoryBytes", Value: int32(104857600)},
		{Key: "internalQueryMaxBlockingSortMemoryUsageBytes", Value: int32(104857600)},
		{Key: "internalQueryProhibitBlockingMergeOnMongoS", Value: int32(0)},
		{Key: "internalQueryMaxAddToSetBytes", Value: int32(104857600)},
		{Key: "internalDocumentSourceSetWindowFieldsMaxMemoryBytes", Value: int32(104857600)},
		{Key: "internalQueryFrameworkControl", Value: "trySbeRestricted"},
		{Key: "internalQueryPlannerIgnoreIndexWithCollationForRegex", Value: int32(1)},
	}
}

// explainReply assembles the reply around a plan.
func (r *request) explainReply(ns, verbosity string, filter bson.D, hashParts []any, p *plan, elapsed time.Duration, command bson.D) bson.D {
	d := bson.D{
		{Key: "explainVersion", Value: "1"},
		{Key: "queryPlanner", Value: r.queryPlanner(ns, filter, hashParts, p)},
	}
	if verbosity != verbosityQueryPlanner {
		d = append(d, bson.E{Key: "executionStats", Value: executionStats(p, verbosity, elapsed, keysExamined(p))})
	}
	return append(d,
		bson.E{Key: "command", Value: command},
		bson.E{Key: "serverInfo", Value: r.serverInfo()},
		bson.E{Key: "serverParameters", Value: serverParameters()},
		bson.E{Key: "ok", Value: 1.0},
	)
}

// cmdExplain: {explain: {<command>}, verbosity}.
func cmdExplain(r *request) (bson.D, error) {
	if err := checkFields(r, "verbosity"); err != nil {
		return nil, err
	}
	inner, ok := r.cmd[0].Value.(bson.D)
	if !ok || len(inner) == 0 {
		return nil, cmderr.New(cmderr.FailedToParse, "explain command requires a nested object")
	}
	verbosity := verbosityAllPlans
	if v, ok := r.get("verbosity"); ok {
		s, _ := v.(string)
		switch s {
		case verbosityQueryPlanner, verbosityExecStats, verbosityAllPlans:
			verbosity = s
		default:
			return nil, cmderr.New(cmderr.FailedToParse, "verbosity string must be one of {'queryPlanner', 'executionStats', 'allPlansExecution'}")
		}
	}
	if r.tx != nil {
		return nil, cmderr.New(cmderr.OperationNotSupportedInTransaction, "Cannot run 'explain' in a multi-document transaction.")
	}
	cmd := lookupCommand(inner[0].Key)
	if cmd == nil {
		return nil, cmderr.New(cmderr.CommandNotFound, "Explain failed due to unknown command: %s", inner[0].Key)
	}
	ir := *r
	ir.name = cmd.name
	ir.cmd = inner
	if dbv, ok := lookupD(inner, "$db"); ok {
		if s, ok := dbv.(string); ok && s != r.db {
			return nil, cmderr.New(cmderr.InvalidNamespace, "Mismatched $db in explain command. Expected %s but got %s", r.db, s)
		}
	}
	command := withDB(inner, r.db)
	switch cmd.name {
	case "find":
		return explainFind(&ir, verbosity, command)
	case "count":
		return explainCount(&ir, verbosity, command)
	case "distinct":
		return explainDistinct(&ir, verbosity, command)
	case "update", "delete":
		return explainWrite(&ir, verbosity, command)
	case "findAndModify":
		return explainFindAndModify(&ir, verbosity, command)
	case "aggregate":
		return explainAggregate(&ir, verbosity, command)
	}
	return nil, cmderr.New(cmderr.IllegalOperation, "Explain is not supported for the %s command", cmd.name)
}

func explainFind(r *request, verbosity string, command bson.D) (bson.D, error) {
	coll, err := collectionArg(r)
	if err != nil {
		return nil, err
	}
	var s readShape
	s.coll = coll
	if s.filter, _, err = docArg(r, "filter"); err != nil {
		return nil, err
	}
	if s.sort, _, err = docArg(r, "sort"); err != nil {
		return nil, err
	}
	if s.proj, _, err = docArg(r, "projection"); err != nil {
		return nil, err
	}
	if s.skip, s.limit, _, err = skipLimitArgs(r); err != nil {
		return nil, err
	}
	s.hint, _ = r.get("hint")
	start := time.Now()
	var p *plan
	if hasNearFilter(s.filter) {
		p, err = nearPlan(r, s)
	} else {
		p, _, err = scanPlan(r, s)
	}
	if err != nil {
		return nil, err
	}
	return r.explainReply(r.db+"."+coll, verbosity, s.filter, []any{s.filter, s.sort, s.proj}, p, time.Since(start), command), nil
}

func explainCount(r *request, verbosity string, command bson.D) (bson.D, error) {
	coll, err := collectionArg(r)
	if err != nil {
		return nil, err
	}
	s := readShape{coll: coll}
	if s.filter, _, err = docArg(r, "query"); err != nil {
		return nil, err
	}
	if s.skip, _, err = nonNegArg(r, "skip"); err != nil {
		return nil, err
	}
	if v, ok := r.get("limit"); ok {
		if n, ok := asInt64(v); ok {
			s.limit = max(n, -n)
		}
	}
	s.hint, _ = r.get("hint")
	start := time.Now()
	p, _, err := scanPlan(r, s)
	if err != nil {
		return nil, err
	}
	// COUNT returns no documents; it counts what its input returns.
	counted := p.n
	p = p.wrap("COUNT", nil, 0)
	p.stats = bson.D{{Key: "nCounted", Value: int32(counted)}, {Key: "nSkipped", Value: int32(0)}}
	return r.explainReply(r.db+"."+coll, verbosity, s.filter, []any{"count", s.filter}, p, time.Since(start), command), nil
}

func explainDistinct(r *request, verbosity string, command bson.D) (bson.D, error) {
	coll, err := collectionArg(r)
	if err != nil {
		return nil, err
	}
	kv, _ := r.get("key")
	key, ok := kv.(string)
	if !ok {
		return nil, typeErr("distinct.key", "string", kv)
	}
	s := readShape{coll: coll}
	if s.filter, _, err = docArg(r, "query"); err != nil {
		return nil, err
	}
	s.hint, _ = r.get("hint")
	start := time.Now()
	p, _, err := scanPlan(r, s)
	if err != nil {
		return nil, err
	}
	p = p.wrap("PROJECTION_SIMPLE", bson.D{{Key: "transformBy", Value: bson.D{{Key: key, Value: int32(1)}, {Key: "_id", Value: int32(0)}}}}, p.n)
	return r.explainReply(r.db+"."+coll, verbosity, s.filter, []any{"distinct", key, s.filter}, p, time.Since(start), command), nil
}

// explainWrite explains an update or delete of one statement, as mongod
// requires; the statement is matched, not applied.
func explainWrite(r *request, verbosity string, command bson.D) (bson.D, error) {
	coll, err := collectionArg(r)
	if err != nil {
		return nil, err
	}
	key := map[string]string{"update": "updates", "delete": "deletes"}[r.name]
	v, _ := r.get(key)
	stmts, ok := v.(bson.A)
	if !ok {
		return nil, typeErr(r.name+"."+key, "array", v)
	}
	if len(stmts) != 1 {
		return nil, cmderr.New(cmderr.InvalidLength, "explained write batches must be of size 1")
	}
	stmt, ok := stmts[0].(bson.D)
	if !ok {
		return nil, typeErr(r.name+"."+key+".0", "object", stmts[0])
	}
	qv, _ := lookupD(stmt, "q")
	filter, _ := qv.(bson.D)
	multi := false
	if r.name == "update" {
		if mv, ok := lookupD(stmt, "multi"); ok {
			multi = asBool(mv)
		}
	} else if lv, ok := lookupD(stmt, "limit"); ok {
		n, _ := asInt64(lv)
		multi = n == 0
	}
	upsert := false
	if uv, ok := lookupD(stmt, "upsert"); ok {
		upsert = asBool(uv)
	}
	s := readShape{coll: coll, filter: filter}
	if !multi {
		s.limit = 1
	}
	s.hint, _ = lookupD(stmt, "hint")
	start := time.Now()
	p, _, err := scanPlan(r, s)
	if err != nil {
		return nil, err
	}
	if s.limit == 1 && p.stage == "LIMIT" {
		p = p.input // the write stops at its first match itself
		p.n = min(p.n, 1)
	}
	matched := p.n
	p = writeStage(r.name, p, matched, upsert)
	return r.explainReply(r.db+"."+coll, verbosity, filter, []any{r.name, filter}, p, time.Since(start), command), nil
}

func writeStage(name string, in *plan, matched int64, upsert bool) *plan {
	if name == "update" {
		p := in.wrap("UPDATE", nil, 0)
		p.stats = bson.D{
			{Key: "nMatched", Value: int32(matched)},
			{Key: "nWouldModify", Value: int32(matched)},
			{Key: "nWouldUpsert", Value: int32(b2i(matched == 0 && upsert))},
		}
		return p
	}
	p := in.wrap("DELETE", nil, 0)
	p.stats = bson.D{{Key: "nWouldDelete", Value: int32(matched)}}
	return p
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func explainFindAndModify(r *request, verbosity string, command bson.D) (bson.D, error) {
	coll, err := collectionArg(r)
	if err != nil {
		return nil, err
	}
	s := readShape{coll: coll, limit: 1}
	if s.filter, _, err = docArg(r, "query"); err != nil {
		return nil, err
	}
	if s.sort, _, err = docArg(r, "sort"); err != nil {
		return nil, err
	}
	s.hint, _ = r.get("hint")
	remove := false
	if v, ok := r.get("remove"); ok {
		remove = asBool(v)
	}
	upsert := false
	if v, ok := r.get("upsert"); ok {
		upsert = asBool(v)
	}
	start := time.Now()
	p, _, err := scanPlan(r, s)
	if err != nil {
		return nil, err
	}
	if p.stage == "LIMIT" {
		p = p.input
		p.n = min(p.n, 1)
	}
	name := "update"
	if remove {
		name = "delete"
	}
	p = writeStage(name, p, p.n, upsert)
	return r.explainReply(r.db+"."+coll, verbosity, s.filter, []any{"findAndModify", s.filter, s.sort}, p, time.Since(start), command), nil
}

// explainAggregate explains a collection aggregate. A pipeline of $match,
// $sort, $skip, $limit and $project only is answered as the find it is
// equivalent to (mongod pushes it down whole); any other has mongod's
// "stages" form: a $cursor stage holding the query plan of the leading
// $match, then the remaining stages, each with nReturned when executed.
func explainAggregate(r *request, verbosity string, command bson.D) (bson.D, error) {
	coll, pipeline, err := explainablePipeline(r, verbosity)
	if err != nil {
		return nil, err
	}
	s, rest := aggregateReadShape(r, coll, pipeline)
	if pushable(rest) {
		// The whole pipeline runs as a find: explain it as one.
		start := time.Now()
		p, _, err := scanPlan(r, s)
		if err != nil {
			return nil, err
		}
		return r.explainReply(r.db+"."+coll, verbosity, s.filter, []any{"aggregate", s.filter, s.sort, s.proj}, p, time.Since(start), command), nil
	}
	stages, err := explainAggregateStages(r, verbosity, s, rest)
	if err != nil {
		return nil, err
	}
	return bson.D{
		{Key: "explainVersion", Value: "1"},
		{Key: "stages", Value: stages},
		{Key: "command", Value: command},
		{Key: "serverInfo", Value: r.serverInfo()},
		{Key: "serverParameters", Value: serverParameters()},
		{Key: "ok", Value: 1.0},
	}, nil
}

// explainablePipeline validates an explained aggregate and refuses the
// pipelines whose explain mongosim does not model.
func explainablePipeline(r *request, verbosity string) (coll string, pipeline bson.A, err error) {
	coll, ok := r.cmd[0].Value.(string)
	if !ok {
		return "", nil, cmderr.Unsupported("explain of a database-level aggregate")
	}
	if _, err := collectionArg(r); err != nil {
		return "", nil, err
	}
	pv, _ := r.get("pipeline")
	pipeline, ok = pv.(bson.A)
	if !ok {
		return "", nil, typeErr("aggregate.pipeline", "array", pv)
	}
	if geoNearFirst(pipeline) {
		return "", nil, cmderr.Unsupported("explain of a pipeline starting with $geoNear")
	}
	if isChangeStream(pipeline) {
		return "", nil, cmderr.Unsupported("explain of a $changeStream")
	}
	full, err := agg.Compile(pipeline)
	if err != nil {
		return "", nil, err
	}
	if full.HasWriteStage() && verbosity != verbosityQueryPlanner {
		return "", nil, cmderr.Unsupported("explain with " + verbosity + " of a pipeline writing with $out or $merge")
	}
	return coll, pipeline, nil
}

// aggregateReadShape is the read a pipeline's cursor does: a leading
// $match becomes its filter and, when the rest of the pipeline is
// pushable, its stages become the read's sort, skip, limit and projection.
// rest is the pipeline after the leading $match.
func aggregateReadShape(r *request, coll string, pipeline bson.A) (s readShape, rest bson.A) {
	s = readShape{coll: coll}
	s.hint, _ = r.get("hint")
	rest = pipeline
	if len(rest) > 0 {
		if d, ok := rest[0].(bson.D); ok && len(d) == 1 && d[0].Key == "$match" {
			if m, ok := d[0].Value.(bson.D); ok {
				s.filter, rest = m, rest[1:]
			}
		}
	}
	if !pushable(rest) {
		return s, rest
	}
	for _, st := range rest {
		d := st.(bson.D)
		switch d[0].Key {
		case "$sort":
			s.sort, _ = d[0].Value.(bson.D)
		case "$skip":
			s.skip, _ = asInt64(d[0].Value)
		case "$limit":
			s.limit, _ = asInt64(d[0].Value)
		case "$project":
			s.proj, _ = d[0].Value.(bson.D)
		}
	}
	return s, rest
}

// explainAggregateStages explains a pipeline stage by stage: the $cursor
// reading the collection, then each remaining stage with, beyond
// queryPlanner verbosity, the documents it returns (from running the
// pipeline up to it).
func explainAggregateStages(r *request, verbosity string, s readShape, rest bson.A) (bson.A, error) {
	start := time.Now()
	p, f, err := scanPlan(r, s)
	if err != nil {
		return nil, err
	}
	coll := s.coll
	cursor := bson.D{{Key: "queryPlanner", Value: r.queryPlanner(r.db+"."+coll, s.filter, []any{"aggregate", s.filter}, p)}}
	if verbosity != verbosityQueryPlanner {
		cursor = append(cursor, bson.E{Key: "executionStats", Value: executionStats(p, verbosity, time.Since(start), keysExamined(p))})
	}
	cursorStage := bson.D{{Key: "$cursor", Value: cursor}}
	stages := bson.A{}
	var in []bson.D
	if verbosity != verbosityQueryPlanner {
		if in, err = r.readDocs(coll, f, s.filter, 0, s.hint); err != nil {
			return nil, err
		}
		cursorStage = append(cursorStage, bson.E{Key: "nReturned", Value: int64(len(in))}, bson.E{Key: "executionTimeMillisEstimate", Value: int64(0)})
	}
	stages = append(stages, cursorStage)
	for i, st := range rest {
		d, _ := st.(bson.D)
		stage := append(bson.D(nil), d...)
		if verbosity != verbosityQueryPlanner {
			p, err := agg.Compile(rest[:i+1])
			if err != nil {
				return nil, err
			}
			out, err := p.Run(r.ctx, in, agg.Env{DB: r.db, Catalog: catalog{s: r.data(), at: r.rc.atClusterTime}, Now: r.now})
			if err != nil {
				return nil, err
			}
			stage = append(stage, bson.E{Key: "nReturned", Value: int64(len(out))}, bson.E{Key: "executionTimeMillisEstimate", Value: int64(0)})
		}
		stages = append(stages, stage)
	}
	return stages, nil
}

// pushable reports a pipeline the find layer answers whole: at most one
// each of $sort, $skip, $limit, $project, in that order.
func pushable(stages bson.A) bool {
	order := []string{"$sort", "$skip", "$limit", "$project"}
	next := 0
	for _, st := range stages {
		d, ok := st.(bson.D)
		if !ok || len(d) != 1 {
			return false
		}
		found := false
		for next < len(order) {
			if order[next] == d[0].Key {
				found = true
				next++
				break
			}
			next++
		}
		if !found {
			return false
		}
		if d[0].Key == "$project" {
			if _, ok := d[0].Value.(bson.D); !ok {
				return false
			}
		}
	}
	return true
}

// aggregateExplain answers aggregate with explain: true (queryPlanner
// verbosity).
func aggregateExplain(r *request) (bson.D, error) {
	command := make(bson.D, 0, len(r.cmd))
	for _, e := range r.cmd {
		if e.Key != "explain" {
			command = append(command, e)
		}
	}
	ir := *r
	ir.cmd = command
	return explainAggregate(&ir, verbosityQueryPlanner, withDB(command, r.db))
}

func init() {
	register(&command{name: "explain", run: cmdExplain})
}
