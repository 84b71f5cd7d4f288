package mongosim

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/agg"
	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/expr"
	"github.com/sturdy-go/sturdy/mongosim/internal/query"
)

func init() {
	register(
		&command{name: "aggregate", run: cmdAggregate},
	)
}

func cmdAggregate(r *request) (bson.D, error) {
	if err := aggregateArgs(r); err != nil {
		return nil, err
	}
	if err := checkFields(r, "pipeline", "cursor", "explain", "allowDiskUse", "bypassDocumentValidation",
		"collation", "hint", "let", "fromMongos", "needsMerge", "isMapReduceCommand",
		"includeQueryStatsMetrics", "rawData"); err != nil {
		return nil, err
	}
	if v, ok := r.get("explain"); ok && truthy(v) {
		return aggregateExplain(r)
	}
	if _, ok := r.get("cursor"); !ok {
		return nil, cmderr.New(cmderr.FailedToParse, "The 'cursor' option is required, except for aggregate with the explain argument")
	}
	batchSize, err := cursorBatchSize(r)
	if err != nil {
		return nil, err
	}
	pv, _ := r.get("pipeline")
	pipeline, ok := pv.(bson.A)
	if !ok {
		return nil, cmderr.New(cmderr.TypeMismatch, "BSON field 'aggregate.pipeline' is the wrong type '%s', expected type 'array'", typeNameOf(pv))
	}
	coll, localIn, pipeline, err := aggregateSource(r, pipeline)
	if err != nil {
		return nil, err
	}
	env, err := r.opEnvFor(coll)
	if err != nil {
		return nil, err
	}
	if isChangeStream(pipeline) {
		return cmdChangeStream(r, coll, pipeline, batchSize, env)
	}
	// $collStats reads the collection's statistics, not its documents.
	statsOf := ""
	if stats, ok, err := collStatsStage(r, coll, pipeline); err != nil {
		return nil, err
	} else if ok {
		localIn, pipeline, statsOf, coll = stats, pipeline[1:], coll, ""
	}
	nearIn, nearFirst, err := r.leadingGeoNear(coll, pipeline, env)
	if err != nil {
		return nil, err
	}
	if nearFirst {
		pipeline = pipeline[1:]
	}
	// A leading $match with $text is answered from the text index here;
	// the documents carry their textScore into the rest of the pipeline.
	var textFilter bson.D
	if coll != "" && !nearFirst {
		textFilter, pipeline = leadingTextMatch(pipeline)
	}
	p, err := agg.Compile(pipeline)
	if err != nil {
		return nil, err
	}
	if err := checkWriteStageReadConcern(r, p); err != nil {
		return nil, err
	}
	s := r.data()
	in := localIn
	ns := r.db + ".$cmd.aggregate"
	if statsOf != "" {
		ns = r.db + "." + statsOf
	}
	if coll != "" {
		ns = r.db + "." + coll
		src := aggregateInput{coll: coll, p: p, pipeline: pipeline, env: env, nearIn: nearIn, nearFirst: nearFirst, textFilter: textFilter}
		if in, err = src.read(r, s); err != nil {
			return nil, err
		}
	}
	return runAggregate(r, s, p, in, env, ns, batchSize, textFilter != nil)
}

// runAggregate runs the compiled pipeline over its input and answers with
// the cursor of its results ($out and $merge run to completion).
func runAggregate(r *request, s *storage, p *agg.Pipeline, in []bson.D, env opEnv, ns string, batchSize int, textScored bool) (bson.D, error) {
	out, err := p.Run(r.ctx, in, agg.Env{DB: r.db, Catalog: catalog{s: s, at: r.rc.atClusterTime, bypass: bypassing(r.ctx)}, Now: r.now, Vars: env.variables(), Collator: env.collator(), Scripts: env.scripts})
	if err != nil {
		return errorReply(err) // $merge/$out duplicates keep keyPattern/keyValue
	}
	end := endLazily
	if p.HasWriteStage() {
		out, end = nil, endAtOnce // $out/$merge run to completion
	}
	if textScored {
		for i := range out {
			out[i] = expr.StripTextScore(out[i])
		}
	}
	return s.cursors.reply(r, ns, out, batchSize, false, end), nil
}

// aggregateSource reads what the aggregate reads from: aggregate: "coll" a
// collection; aggregate: 1 is database-level and only makes sense with a
// leading $documents, $changeStream, $listLocalSessions or $currentOp, the
// last two giving their documents as localIn (and leaving the pipeline).
func aggregateSource(r *request, pipeline bson.A) (coll string, localIn []bson.D, rest bson.A, err error) {
	first := r.cmd[0].Value
	if _, ok := first.(string); ok {
		coll, err = collectionArg(r)
		return coll, nil, pipeline, err
	}
	if n, ok := int64Arg(first); !ok || n != 1 {
		return "", nil, nil, cmderr.New(cmderr.FailedToParse, "Invalid %s namespace specified '%s.%s'", r.name, r.db, shellString(first))
	}
	if isChangeStream(pipeline) {
		return "", nil, pipeline, nil
	}
	stage := ""
	if len(pipeline) > 0 {
		if d, ok := pipeline[0].(bson.D); ok && len(d) > 0 {
			stage = d[0].Key
		}
	}
	switch stage {
	case "$documents":
		return "", nil, pipeline, nil
	case "$listLocalSessions":
		local, err := listLocalSessionsInput(r, pipeline[0].(bson.D)[0].Value)
		return "", local, pipeline[1:], err
	case "$currentOp":
		ops, err := currentOpStage(r, pipeline[0].(bson.D)[0].Value)
		return "", ops, pipeline[1:], err
	}
	return "", nil, nil, cmderr.Unsupported("database-level aggregate (aggregate: 1) with " + stageOrEmpty(stage))
}

// checkWriteStageReadConcern refuses $out and $merge under the read
// concerns mongod refuses them with.
func checkWriteStageReadConcern(r *request, p *agg.Pipeline) error {
	if !p.HasWriteStage() {
		return nil
	}
	if r.rc.level == "snapshot" {
		return cmderr.New(cmderr.InvalidOptions, "$out and $merge cannot be used with a 'snapshot' read concern level")
	}
	if rc, ok, _ := docArg(r, "readConcern"); ok {
		for _, e := range rc {
			if e.Key == "level" && e.Value == "linearizable" {
				return cmderr.New(cmderr.InvalidOptions, "$out and $merge cannot be used with a 'linearizable' read concern level")
			}
		}
	}
	return nil
}

// aggregateInput is where a collection aggregate's documents come from: a
// leading $geoNear's results, a leading $text match read from the text
// index, or a snapshot of the collection pre-filtered by the leading
// $match.
type aggregateInput struct {
	coll       string
	p          *agg.Pipeline
	pipeline   bson.A
	env        opEnv
	nearIn     []bson.D
	nearFirst  bool
	textFilter bson.D
}

// read returns the documents in the order of the plan the leading $match
// and $sort get, as a find returns them (a $geoNear's stay nearest first).
func (a aggregateInput) read(r *request, s *storage) ([]bson.D, error) {
	if a.nearFirst {
		return a.nearIn, nil
	}
	hint, _ := r.get("hint")
	// The leading $match pre-filters the snapshot; under a collation the
	// $match stage alone decides.
	pre := a.p.LeadingMatch()
	if a.env.coll != nil {
		pre = nil
	}
	var in []bson.D
	var err error
	switch {
	case a.textFilter != nil:
		var f *query.Filter
		if f, err = a.env.compileFilter(a.textFilter); err == nil {
			if err = checkTextQuery(f, nil, hint, false); err == nil {
				in, err = r.readDocs(a.coll, f, a.textFilter, 0, hint)
			}
		}
	case r.rc.level == "snapshot":
		in, err = s.snapshotAt(r.db, a.coll, pre, hint, r.rc.atClusterTime)
	default:
		in, err = s.snapshot(r.db, a.coll, pre, nil, 0, hint)
	}
	if err != nil {
		return nil, err
	}
	match, sortDoc := leadingMatchSort(a.pipeline)
	plan, err := r.planFor(a.coll, match, sortDoc, hint)
	if err != nil {
		return nil, err
	}
	return plan.order(in), nil
}

// leadingMatchSort returns the filter of a leading $match and the spec of
// the $sort after it (or leading), the part of a pipeline mongod plans as
// a query.
func leadingMatchSort(pipeline bson.A) (match, sortDoc bson.D) {
	stage := func(i int, name string) bson.D {
		if i >= len(pipeline) {
			return nil
		}
		d, ok := pipeline[i].(bson.D)
		if !ok || len(d) != 1 || d[0].Key != name {
			return nil
		}
		v, _ := d[0].Value.(bson.D)
		return v
	}
	next := 0
	if match = stage(0, "$match"); match != nil {
		next = 1
	}
	return match, stage(next, "$sort")
}

func stageOrEmpty(s string) string {
	if s == "" {
		return "an empty pipeline"
	}
	return s
}
