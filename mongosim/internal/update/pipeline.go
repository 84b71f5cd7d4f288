package update

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/agg"
	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// updateStages are the stages the server allows in a pipeline-style update.
var updateStages = map[string]bool{
	"$addFields": true, "$set": true, "$project": true, "$unset": true,
	"$replaceRoot": true, "$replaceWith": true,
}

// pipelineUpdate is an update given as an aggregation pipeline: its output
// replaces the document, keeping the original _id.
type pipelineUpdate struct {
	p *agg.Pipeline
}

func compilePipeline(stages bson.A) (*Update, error) {
	p, err := agg.Compile(stages)
	if err != nil {
		return nil, err
	}
	for _, name := range p.Stages() {
		if !updateStages[name] {
			return nil, cmderr.New(cmderr.InvalidOptions, "%s is not allowed to be used within an update", name)
		}
	}
	return &Update{kind: kindPipeline, pipeline: &pipelineUpdate{p: p}}, nil
}

func (pu *pipelineUpdate) apply(doc bson.D, env Env, immutableID bool) (bson.D, error) {
	if len(env.ArrayFilters) > 0 {
		return nil, cmderr.New(cmderr.FailedToParse, "arrayFilters may not be specified for pipeline-style updates")
	}
	// The pipeline only has document-local stages: it cannot block, so a
	// background context is enough.
	out, err := pu.p.Run(context.Background(), []bson.D{doc}, agg.Env{Now: env.Now, Vars: env.Vars, Collator: env.Collator})
	if err != nil {
		return nil, err
	}
	if len(out) != 1 {
		return nil, cmderr.New(cmderr.BadValue, "pipeline-style update produced %d documents instead of 1", len(out))
	}
	return replace(doc, out[0], immutableID)
}
