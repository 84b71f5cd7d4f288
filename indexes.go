package sturdy

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/internal/exec"
)

// CreateIndexes creates the indexes of models with one createIndexes
// command and returns their names, in the order of models. Indexes that
// already exist with the same options are not an error.
func (coll *Collection) CreateIndexes(ctx context.Context, models []IndexModel, optList ...*CreateIndexOptions) ([]string, error) {
	ctx, cancel := coll.begin(ctx)
	defer cancel()
	opts := lastOptions(optList)
	if opts == nil {
		opts = &CreateIndexOptions{}
	}
	if len(models) == 0 {
		return nil, ErrEmptySlice
	}
	specs := make(bson.A, len(models))
	names := make([]string, len(models))
	for i, m := range models {
		spec, name, err := indexSpec(m)
		if err != nil {
			return nil, fmt.Errorf("index %d: %w", i, err)
		}
		specs[i], names[i] = spec, name
	}
	cmd := cmdBuilder{{Key: "createIndexes", Value: coll.name}, {Key: "indexes", Value: specs}}
	cmd.addIf("writeConcern", writeConcernDoc(coll.wc))
	cmd.addIf("commitQuorum", opts.CommitQuorum)
	cmd.addIf("comment", opts.Comment)
	cmd.addMaxTime(opts.MaxTime)
	_, err := coll.client.execute(ctx, &exec.Operation{Name: "createIndexes", DB: coll.db, Command: bson.D(cmd), Flags: exec.Write}, opts.Session)
	if err != nil {
		return nil, err
	}
	return names, nil
}

// indexSpec builds the specification of one index and returns it with the
// index's name (given, or derived from the keys as the server would).
func indexSpec(model IndexModel) (bson.D, string, error) {
	keys, err := toDoc(model.Keys, false)
	if err != nil {
		return nil, "", fmt.Errorf("index keys: %w", err)
	}
	io := model.Options
	if io == nil {
		io = &IndexOptions{}
	}
	var name string
	if io.Name != nil {
		name = *io.Name
	} else if name, err = indexName(keys); err != nil {
		return nil, "", err
	}
	spec := cmdBuilder{{Key: "key", Value: keys}, {Key: "name", Value: name}}
	if io.Version != nil {
		spec.add("v", *io.Version)
	}
	spec.addBoolPtr("unique", io.Unique)
	spec.addBoolPtr("sparse", io.Sparse)
	spec.addBoolPtr("hidden", io.Hidden)
	if io.ExpireAfterSeconds != nil {
		spec.add("expireAfterSeconds", *io.ExpireAfterSeconds)
	}
	for _, field := range []struct {
		key string
		v   any
	}{{"partialFilterExpression", io.PartialFilterExpression}, {"weights", io.Weights}, {"wildcardProjection", io.WildcardProjection}} {
		d, err := docOrNil(field.v)
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", field.key, err)
		}
		spec.addIf(field.key, d)
	}
	if io.DefaultLanguage != nil {
		spec.add("default_language", *io.DefaultLanguage)
	}
	if io.LanguageOverride != nil {
		spec.add("language_override", *io.LanguageOverride)
	}
	spec.addCollation(io.Collation)
	return bson.D(spec), name, nil
}

// DropIndexByKeys drops the index whose key pattern is keys (an ordered
// document such as bson.D{{"a", 1}}).
func (coll *Collection) DropIndexByKeys(ctx context.Context, keys any, optList ...*DropIndexOptions) error {
	ctx, cancel := coll.begin(ctx)
	defer cancel()
	k, err := toDoc(keys, false)
	if err != nil {
		return fmt.Errorf("index keys: %w", err)
	}
	return coll.dropIndexes(ctx, k, lastOptions(optList))
}

// DropIndexes drops every index of the collection except the _id index.
func (coll *Collection) DropIndexes(ctx context.Context, optList ...*DropIndexOptions) error {
	ctx, cancel := coll.begin(ctx)
	defer cancel()
	return coll.dropIndexes(ctx, "*", lastOptions(optList))
}

// dropIndexes runs dropIndexes for index: a name, "*" or a key pattern.
func (coll *Collection) dropIndexes(ctx context.Context, index any, opts *DropIndexOptions) error {
	if opts == nil {
		opts = &DropIndexOptions{}
	}
	cmd := cmdBuilder{{Key: "dropIndexes", Value: coll.name}, {Key: "index", Value: index}}
	cmd.addIf("writeConcern", writeConcernDoc(coll.wc))
	cmd.addIf("comment", opts.Comment)
	cmd.addMaxTime(opts.MaxTime)
	_, err := coll.client.execute(ctx, &exec.Operation{Name: "dropIndexes", DB: coll.db, Command: bson.D(cmd), Flags: exec.Write}, opts.Session)
	return err
}
