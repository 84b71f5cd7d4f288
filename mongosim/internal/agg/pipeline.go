package agg

import (
	"context"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/expr"
	"github.com/sturdy-go/sturdy/mongosim/internal/js"
	"github.com/sturdy-go/sturdy/mongosim/internal/query"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// Catalog is the pipeline's view of the server's collections, for the stages
// that read other collections ($lookup, $unionWith) or write ($out, $merge).
type Catalog interface {
	// Read returns a snapshot of a collection's documents; a collection
	// that does not exist reads as empty.
	Read(db, coll string) ([]bson.D, error)
	// Out replaces the collection's contents with docs atomically.
	Out(db, coll string, docs []bson.D) error
	// Merge merges docs into the collection, matching on the fields in on;
	// whenMatched is "replace", "keepExisting", "merge", "fail" or a bson.A
	// update pipeline, whenNotMatched "insert", "discard" or "fail".
	Merge(db, coll string, docs []bson.D, on []string, whenMatched any, whenNotMatched string) error
}

// Env is what a pipeline run needs from its surroundings. The zero value
// runs with no catalog (stages needing one fail), $$NOW = time.Now().
type Env struct {
	DB      string
	Catalog Catalog
	Now     time.Time
	// Vars are the aggregate command's "let" variables, by name without "$$".
	Vars map[string]any
	// Collator is the command's collation ($match, $sort, $group keys,
	// comparison expressions); nil is the simple collation.
	Collator value.Collator
	// Scripts runs $function and $accumulator under the operation's
	// context; nil fails them as a mongod with scripting disabled does.
	Scripts *js.Env
}

// Pipeline is a compiled aggregation pipeline; it is immutable and may be
// run any number of times, concurrently.
type Pipeline struct {
	stages []stage
	names  []string
}

// stage is one compiled pipeline stage. Stages never mutate their input
// documents: the input may be a collection's stored documents.
type stage interface {
	run(rt *runtime, in []bson.D) ([]bson.D, error)
}

// runtime is the per-Run state shared by all stages.
type runtime struct {
	ctx  context.Context
	env  Env
	vars map[string]any
}

func (rt *runtime) catalog(stageName string) (Catalog, error) {
	if rt.env.Catalog == nil {
		return nil, cmderr.Unsupported(stageName + " without a catalog")
	}
	return rt.env.Catalog, nil
}

// withVars returns a runtime whose variables are rt's plus extra.
func (rt *runtime) withVars(extra map[string]any) *runtime {
	if len(extra) == 0 {
		return rt
	}
	vars := make(map[string]any, len(rt.vars)+len(extra))
	for k, v := range rt.vars {
		vars[k] = v
	}
	for k, v := range extra {
		vars[k] = v
	}
	c := *rt
	c.vars = vars
	return &c
}

// checkEvery polls the context every few hundred documents so that long
// stages stop promptly when the client goes away.
func (rt *runtime) checkEvery(i int) error {
	if i&255 == 0 {
		return rt.ctx.Err()
	}
	return nil
}

// mapDocs runs a stage that turns every input document into exactly one
// output document.
func (rt *runtime) mapDocs(in []bson.D, f func(doc bson.D) (bson.D, error)) ([]bson.D, error) {
	out := make([]bson.D, 0, len(in))
	for i, doc := range in {
		if err := rt.checkEvery(i); err != nil {
			return nil, err
		}
		d, err := f(doc)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// where a pipeline is nested, which restricts its stages
type nesting int

const (
	topLevel nesting = iota
	inLookup
	inFacet
	inUnionWith
)

var nestingName = map[nesting]string{inLookup: "$lookup", inFacet: "$facet", inUnionWith: "$unionWith"}

// Compile parses an aggregation pipeline.
func Compile(pipeline bson.A) (*Pipeline, error) {
	return compilePipeline(pipeline, topLevel)
}

func compilePipeline(pipeline bson.A, where nesting) (*Pipeline, error) {
	p := &Pipeline{}
	for i, raw := range pipeline {
		spec, ok := value.ToDoc(raw)
		if !ok {
			return nil, cmderr.New(cmderr.TypeMismatch, "Each element of the 'pipeline' array must be an object")
		}
		if len(spec) != 1 {
			return nil, cmderr.New(40323, "A pipeline stage specification object must contain exactly one field.")
		}
		name, arg := spec[0].Key, spec[0].Value
		if name == "$out" || name == "$merge" {
			if where != topLevel {
				code := map[nesting]int32{inLookup: 51047, inFacet: 40600, inUnionWith: 31441}[where]
				return nil, cmderr.New(code, "%s is not allowed to be used within a %s stage", name, nestingName[where])
			}
			if i != len(pipeline)-1 {
				return nil, cmderr.New(40601, "%s can only be the final stage in the pipeline", name)
			}
		}
		if name == "$facet" && where == inFacet {
			return nil, cmderr.New(40600, "$facet is not allowed to be used within a $facet stage")
		}
		if name == "$documents" && i != 0 {
			return nil, cmderr.New(40602, "$documents is only valid as the first stage in a pipeline")
		}
		st, err := compileStage(name, arg, where)
		if err != nil {
			return nil, err
		}
		p.stages = append(p.stages, st)
		p.names = append(p.names, name)
	}
	return p, nil
}

var unsupportedStages = map[string]bool{
	"$collStats": true, "$indexStats": true, "$currentOp": true, "$listSessions": true,
	"$listLocalSessions": true, "$planCacheStats": true, "$changeStream": true,
	"$search": true, "$searchMeta": true, "$vectorSearch": true, "$listSearchIndexes": true,
	"$changeStreamSplitLargeEvent": true, "$shardedDataDistribution": true,
	"$listSampledQueries": true, "$querySettings": true, "$listClusterCatalog": true,
}

func compileStage(name string, arg any, where nesting) (stage, error) {
	switch name {
	case "$match":
		return compileMatch(arg)
	case "$project":
		return compileProject(arg)
	case "$addFields", "$set":
		return compileAddFields(name, arg)
	case "$unset":
		return compileUnset(arg)
	case "$group":
		return compileGroup(arg)
	case "$sort":
		return compileSort(arg)
	case "$limit":
		return compileLimit(arg)
	case "$skip":
		return compileSkip(arg)
	case "$count":
		return compileCount(arg)
	case "$unwind":
		return compileUnwind(arg)
	case "$replaceRoot", "$replaceWith":
		return compileReplaceRoot(name, arg)
	case "$sortByCount":
		return compileSortByCount(arg)
	case "$bucket":
		return compileBucket(arg)
	case "$bucketAuto":
		return compileBucketAuto(arg)
	case "$sample":
		return compileSample(arg)
	case "$graphLookup":
		return compileGraphLookup(arg)
	case "$lookup":
		return compileLookup(arg)
	case "$facet":
		return compileFacet(arg)
	case "$unionWith":
		return compileUnionWith(arg)
	case "$out":
		return compileOut(arg)
	case "$merge":
		return compileMerge(arg)
	case "$documents":
		return compileDocuments(arg)
	case "$setWindowFields":
		return compileSetWindowFields(arg)
	case "$densify":
		return compileDensify(arg)
	case "$fill":
		return compileFill(arg)
	case "$redact":
		return compileRedact(arg)
	case "$geoNear":
		// The server runs a leading $geoNear itself (it needs the
		// collection's geo index); anywhere else it is misplaced.
		return nil, cmderr.New(40603, "$geoNear was not the first stage in the pipeline.")
	}
	if unsupportedStages[name] {
		return nil, cmderr.Unsupported("aggregation stage " + name)
	}
	return nil, cmderr.New(cmderr.Location40324, "Unrecognized pipeline stage name: '%s'", name)
}

// Run executes the pipeline over in, which it never modifies.
func (p *Pipeline) Run(ctx context.Context, in []bson.D, env Env) ([]bson.D, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	now := env.Now
	if now.IsZero() {
		now = time.Now()
	}
	vars := make(map[string]any, len(env.Vars)+1)
	for k, v := range env.Vars {
		vars[k] = v
	}
	if _, ok := vars["NOW"]; !ok {
		vars["NOW"] = bson.NewDateTimeFromTime(now)
	}
	rt := &runtime{ctx: ctx, env: env, vars: expr.WithScripts(expr.WithCollator(vars, env.Collator), env.Scripts)}
	return p.run(rt, in)
}

func (p *Pipeline) run(rt *runtime, docs []bson.D) ([]bson.D, error) {
	for _, st := range p.stages {
		if err := rt.ctx.Err(); err != nil {
			return nil, err
		}
		var err error
		if docs, err = st.run(rt, docs); err != nil {
			return nil, err
		}
	}
	if docs == nil {
		docs = []bson.D{}
	}
	return docs, nil
}

// HasWriteStage reports whether the pipeline ends with $out or $merge.
func (p *Pipeline) HasWriteStage() bool {
	if len(p.names) == 0 {
		return false
	}
	last := p.names[len(p.names)-1]
	return last == "$out" || last == "$merge"
}

// LeadingMatch returns the query filter of the first stage when it is a
// $match, so the server can pre-filter the collection, else nil. The filter
// is a necessary condition only (a top-level $expr is evaluated by the
// stage itself, with the pipeline's variables): Run still applies the
// whole stage.
func (p *Pipeline) LeadingMatch() *query.Filter {
	if len(p.stages) == 0 {
		return nil
	}
	if m, ok := p.stages[0].(*matchStage); ok {
		return m.filter
	}
	return nil
}

// Stages returns the names of the pipeline's stages in order.
func (p *Pipeline) Stages() []string { return append([]string(nil), p.names...) }

// checkFieldName validates an output field name given to a stage.
func checkFieldPath(stageName, path string) ([]string, error) {
	if path == "" {
		return nil, cmderr.New(40352, "FieldPath cannot be constructed with empty string")
	}
	if strings.HasPrefix(path, "$") {
		return nil, cmderr.New(16410, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
	}
	parts := strings.Split(path, ".")
	for _, p := range parts {
		if p == "" {
			return nil, cmderr.New(15998, "FieldPath field names may not be empty strings.")
		}
	}
	return parts, nil
}
