package mongosim

import (
	"context"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/agg"
	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/js"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// viewDef is a view's definition: reads of the view run pipeline over
// viewOn (a collection or another view in the same database).
type viewDef struct {
	viewOn   string
	pipeline bson.A
}

// The statistics commands live elsewhere; views.go (initialised after
// them, files being initialised in name order) wraps them so a view is
// never reported as an empty collection: collStats on a view answers 166
// and dbStats counts views apart from collections.
func init() {
	if c := lookupCommand("collStats"); c != nil {
		run := c.run
		c.run = func(r *request) (bson.D, error) {
			if name, ok := r.cmd[0].Value.(string); ok && r.data().viewOf(r.db, name) != nil {
				return nil, errNotCollection(r.db, name)
			}
			return run(r)
		}
	}
	if c := lookupCommand("dbStats"); c != nil {
		run := c.run
		c.run = func(r *request) (bson.D, error) {
			out, err := run(r)
			if err != nil {
				return out, err
			}
			var views int64
			for _, name := range r.data().collectionNames(r.db) {
				if r.data().viewOf(r.db, name) != nil {
					views++
				}
			}
			for i := range out {
				switch out[i].Key {
				case "views":
					out[i].Value = views
				case "collections":
					if n, ok := out[i].Value.(int64); ok {
						out[i].Value = n - views
					}
				}
			}
			return out, nil
		}
	}
}

// aggregateArgs prepares an aggregate: bypassDocumentValidation goes into
// r.ctx, and an aggregate on a view becomes, as on mongod, one on the
// view's base collection with the view's pipeline in front (hint dropped);
// its cursor keeps the view's namespace.
func aggregateArgs(r *request) error {
	bypassArg(r)
	name, ok := r.cmd[0].Value.(string)
	if !ok {
		return nil
	}
	base, viewPipeline, isView, err := r.data().resolveView(r.db, name)
	if err != nil || !isView {
		return err
	}
	pv, _ := r.get("pipeline")
	user, ok := pv.(bson.A)
	if !ok {
		return nil // cmdAggregate reports the type error
	}
	if isChangeStream(user) {
		return errNotCollection(r.db, name)
	}
	cmd := make(bson.D, 0, len(r.cmd)+1)
	cmd = append(cmd, bson.E{Key: r.cmd[0].Key, Value: base})
	for _, e := range r.cmd[1:] {
		switch e.Key {
		case "hint":
			continue
		case "pipeline":
			e.Value = append(viewPipeline, user...)
		}
		cmd = append(cmd, e)
	}
	if _, ok := r.get("collation"); !ok {
		// A view has its own default collation (the simple one here),
		// not its base collection's.
		cmd = append(cmd, bson.E{Key: "collation", Value: bson.D{{Key: "locale", Value: "simple"}}})
	}
	r.cmd, r.cursorNS = cmd, r.db+"."+name
	return nil
}

// recordDDL logs the creation or drop of c for change streams: a view's
// events name its definition instead of a collection UUID (mongod
// reconstructs them from its system.views writes).
func (c *collection) recordDDL(kind changeKind) {
	if c.changes == nil {
		return
	}
	if c.view == nil {
		c.changes.recordDDL(kind, c.db, c.name, c.uuid, "", "")
		return
	}
	c.changes.append(change{kind: kind, db: c.db, coll: c.name, ddl: &ddlDetail{view: c.view.options()}})
}

// maxViewDepth is mongod's limit on views defined on views.
const maxViewDepth = 20

func errNotCollection(db, coll string) error {
	return cmderr.New(cmderr.CommandNotSupportedOnView, "Namespace %s.%s is a view, not a collection", db, coll)
}

// viewOf returns db.coll's view definition, or nil when it is a collection
// or does not exist.
func (s *storage) viewOf(db, coll string) *viewDef {
	if c := s.lookup(db, coll); c != nil {
		return c.viewOf()
	}
	return nil
}

// viewOf returns c's view definition under its read lock (nil for a
// collection).
func (c *collection) viewOf() *viewDef {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.view
}

// sharded reports whether db.coll is a sharded collection of a
// multi-shard deployment (shard_cluster.go).
func (s *storage) sharded(db, coll string) bool {
	c := s.lookup(db, coll)
	if c == nil {
		return false
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.shardKey) > 0
}

// resolveView follows db.coll through views to the collection it reads:
// the base collection and the pipeline to run over it (the innermost
// view's stages first). isView is false for a collection.
func (s *storage) resolveView(db, coll string) (base string, pipeline bson.A, isView bool, err error) {
	root := s
	if s.txn != nil {
		root = s.txn.parent
	}
	if root.views.Load() == 0 {
		return coll, nil, false, nil // no views: reads pay nothing for them
	}
	name := coll
	var seen []string
	for depth := 0; ; depth++ {
		v := s.viewOf(db, name)
		if v == nil {
			if isView && s.sharded(db, name) {
				// This shard holds only its part of the collection.
				return "", nil, false, cmderr.Unsupported("views on a sharded collection of a multi-shard deployment")
			}
			return name, pipeline, isView, nil
		}
		for _, n := range seen {
			if n == name {
				return "", nil, false, cmderr.New(cmderr.GraphContainsCycle, "View cycle detected: [%s]", strings.Join(append(seen, name), " => "))
			}
		}
		if depth >= maxViewDepth {
			return "", nil, false, cmderr.New(cmderr.ViewDepthLimitExceeded, "View depth too deep or view cycle detected. Maximum depth is %d", maxViewDepth)
		}
		seen = append(seen, name)
		isView = true
		pipeline = append(append(bson.A{}, v.pipeline...), pipeline...)
		name = v.viewOn
	}
}

// viewDocs returns the documents the view db.coll shows: its resolved
// pipeline run over its base collection.
func (s *storage) viewDocs(ctx context.Context, db, coll string, now time.Time) ([]bson.D, bool, error) {
	base, pipeline, isView, err := s.resolveView(db, coll)
	if err != nil || !isView {
		return nil, isView, err
	}
	docs, err := s.runOn(ctx, db, base, pipeline, now, nil)
	return docs, true, err
}

// runOn runs pipeline over the collection db.base.
func (s *storage) runOn(ctx context.Context, db, base string, pipeline bson.A, now time.Time, vars map[string]any) ([]bson.D, error) {
	p, err := agg.Compile(pipeline)
	if err != nil {
		return nil, err
	}
	in, err := s.snapshot(db, base, p.LeadingMatch(), nil, 0, nil)
	if err != nil {
		return nil, err
	}
	// A view's $function/$accumulator run under the reading operation's
	// context; without one that can end (an internal read) they may not.
	var scripts *js.Env
	if ctx.Done() != nil {
		scripts = &js.Env{Ctx: ctx, Disabled: s.scriptsOff}
	}
	return p.Run(ctx, in, agg.Env{DB: db, Catalog: catalog{s: s}, Now: now, Vars: vars, Scripts: scripts})
}

// viewArgs validates the definition of the view ns (create or collMod):
// viewOn names a namespace of the same database and pipeline is a
// read-only pipeline.
func viewArgs(cmd, ns string, viewOnV any, hasViewOn bool, pipelineV any, hasPipeline bool) (*viewDef, error) {
	v := &viewDef{pipeline: bson.A{}}
	if hasViewOn {
		s, ok := viewOnV.(string)
		if !ok {
			return nil, typeErr(cmd+".viewOn", "string", viewOnV)
		}
		if s == "" {
			return nil, cmderr.New(cmderr.BadValue, "'viewOn' cannot be empty")
		}
		v.viewOn = s
	}
	if hasPipeline {
		a, ok := pipelineV.(bson.A)
		if !ok {
			return nil, typeErr(cmd+".pipeline", "array", pipelineV)
		}
		for i, st := range a {
			d, ok := st.(bson.D)
			if !ok || len(d) != 1 {
				return nil, cmderr.New(cmderr.TypeMismatch, "Each element of the 'pipeline' array must be an object with exactly one field")
			}
			switch d[0].Key {
			case "$out", "$merge":
				return nil, cmderr.New(cmderr.OptionNotSupportedOnView, "Invalid pipeline for view %s :: caused by :: The aggregation stage %s in location %d of the pipeline cannot be used in the view definition of %s because it writes to disk", ns, d[0].Key, i, ns)
			case "$changeStream":
				return nil, cmderr.New(cmderr.OptionNotSupportedOnView, "Invalid pipeline for view %s :: caused by :: $changeStream cannot be used in a view definition", ns)
			}
		}
		if _, err := agg.Compile(a); err != nil {
			return nil, err
		}
		v.pipeline = value.Clone(a).(bson.A)
	}
	return v, nil
}

// options renders the view as listCollections shows it.
func (v *viewDef) options() bson.D {
	return bson.D{{Key: "viewOn", Value: v.viewOn}, {Key: "pipeline", Value: value.Clone(v.pipeline)}}
}

// createView is create with viewOn.
func createView(r *request, coll string) (bson.D, error) {
	viewOn, hasViewOn := r.get("viewOn")
	pipeline, hasPipeline := r.get("pipeline")
	for i, e := range r.cmd {
		if i == 0 || genericFields[e.Key] {
			continue
		}
		switch e.Key {
		case "viewOn", "pipeline":
		case "collation":
			if !isSimpleCollation(e.Value) {
				return nil, cmderr.Unsupported("collation on a view")
			}
		case "idIndex":
			return nil, cmderr.New(cmderr.InvalidOptions, "'idIndex' is not allowed with 'viewOn': %s", shellString(e.Value))
		default:
			return nil, cmderr.New(cmderr.InvalidOptions, "option not supported on a view: %s", e.Key)
		}
	}
	def, err := viewArgs("create", r.db+"."+coll, viewOn, hasViewOn, pipeline, hasPipeline)
	if err != nil {
		return nil, err
	}
	if def.viewOn == coll {
		return nil, cmderr.New(cmderr.GraphContainsCycle, "View cycle detected: [%s.%s => %s.%s]", r.db, coll, r.db, coll)
	}
	if r.tx != nil {
		return nil, cmderr.New(cmderr.OperationNotSupportedInTransaction, "Cannot create a view in a multi-document transaction.")
	}
	if _, _, _, err := r.data().resolveView(r.db, def.viewOn); err != nil {
		return nil, err
	}
	c, created, err := r.cluster.data.ensureWith(r.db, coll, func(c *collection) {
		c.view = def
	})
	if err != nil {
		return nil, err
	}
	if created {
		r.cluster.data.views.Add(1)
	} else {
		c.mu.RLock()
		cur, opts := c.view, value.CloneDoc(c.options)
		c.mu.RUnlock()
		ns := r.db + "." + coll
		switch {
		case cur == nil:
			return nil, cmderr.New(cmderr.NamespaceExists, "namespace %s already exists, but with different options: %s", ns, shellString(opts))
		case cur.viewOn != def.viewOn:
			return nil, cmderr.New(cmderr.NamespaceExists, "namespace %s already exists, but is a view on %s.%s rather than %s.%s", ns, r.db, cur.viewOn, r.db, def.viewOn)
		case value.Key(cur.pipeline) != value.Key(def.pipeline):
			return nil, cmderr.New(cmderr.NamespaceExists, "namespace %s already exists, but with pipeline %s rather than %s", ns, shellString(cur.pipeline), shellString(def.pipeline))
		}
	}
	return bson.D{}, nil
}

// collModView changes a view's definition (collMod with viewOn/pipeline).
func collModView(r *request, coll string) (bson.D, error) {
	viewOn, hasViewOn := r.get("viewOn")
	pipeline, hasPipeline := r.get("pipeline")
	for i, e := range r.cmd {
		if i == 0 || genericFields[e.Key] || e.Key == "viewOn" || e.Key == "pipeline" {
			continue
		}
		return nil, cmderr.New(cmderr.InvalidOptions, "option not supported on a view: %s", e.Key)
	}
	def, err := viewArgs("collMod", r.db+"."+coll, viewOn, hasViewOn, pipeline, hasPipeline)
	if err != nil {
		return nil, err
	}
	s := r.cluster.data
	c := s.lookup(r.db, coll)
	if c == nil {
		return nil, cmderr.New(cmderr.NamespaceNotFound, "ns does not exist: %s.%s", r.db, coll)
	}
	c.mu.Lock()
	old := c.view
	if old == nil {
		c.mu.Unlock()
		return nil, cmderr.New(cmderr.InvalidOptions, "collection %s.%s is not a view", r.db, coll)
	}
	// Without auth mongod lets collMod change either half alone.
	if !hasViewOn {
		def.viewOn = old.viewOn
	}
	if !hasPipeline {
		def.pipeline = old.pipeline
	}
	c.view = def
	c.mu.Unlock()
	if _, _, _, err := s.resolveView(r.db, coll); err != nil {
		c.mu.Lock()
		c.view = old
		c.mu.Unlock()
		return nil, err
	}
	return bson.D{}, nil
}
