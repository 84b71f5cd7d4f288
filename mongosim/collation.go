package mongosim

import (
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/collation"
	"github.com/sturdy-go/sturdy/mongosim/internal/expr"
	"github.com/sturdy-go/sturdy/mongosim/internal/js"
	"github.com/sturdy-go/sturdy/mongosim/internal/query"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// opEnv is what a command's comparisons and expressions depend on besides
// the documents: its collation and its let variables. The zero value is the
// simple collation with no variables.
type opEnv struct {
	coll *collation.Collation // nil: simple
	vars map[string]any       // let variables plus NOW and CLUSTER_TIME
	// text compiles a $text against the collection's text index (nil:
	// $text is not allowed).
	text func(arg any) (query.TextSearch, error)
	// scripts runs $where, $function and $accumulator under the
	// operation's context (nil: not allowed).
	scripts *js.Env
}

// collator returns the collation as a value.Collator, nil (not a typed
// nil) for the simple collation.
func (e opEnv) collator() value.Collator {
	if e.coll == nil {
		return nil
	}
	return e.coll
}

func (e opEnv) queryOptions() query.Options {
	return query.Options{Collator: e.collator(), Vars: e.vars, Text: e.text, Scripts: e.scripts}
}

// compileFilter compiles a command's filter under its collation and vars.
func (e opEnv) compileFilter(filter bson.D) (*query.Filter, error) {
	if e.coll == nil && e.vars == nil && e.text == nil && e.scripts == nil {
		return query.CompileFilter(filter)
	}
	return query.CompileFilterWith(filter, e.queryOptions())
}

func (e opEnv) compileSort(spec bson.D) (*query.Sort, error) {
	return query.CompileSortWith(spec, e.collator())
}

// withStatement returns e with a statement's own collation (update and
// delete statements, bulkWrite operations) when it has one.
func (r *request) withStatement(e opEnv, db, coll string, v any, present bool, where string) (opEnv, error) {
	c, err := r.resolveCollation(db, coll, v, present, where)
	if err != nil {
		return opEnv{}, err
	}
	e.coll = c
	e.text = r.textCompiler(db, coll)
	e.scripts = r.scripts()
	return e, nil
}

// opEnvFor reads the command's collation (the collection's default when it
// has none) and let variables.
func (r *request) opEnvFor(coll string) (opEnv, error) {
	vars, err := r.letVars()
	if err != nil {
		return opEnv{}, err
	}
	v, present := r.get("collation")
	c, err := r.resolveCollation(r.db, coll, v, present, r.name+".collation")
	if err != nil {
		return opEnv{}, err
	}
	return opEnv{coll: c, vars: vars, text: r.textCompiler(r.db, coll), scripts: r.scripts()}, nil
}

// scripts is where the command's scripts run: under its context, so
// maxTimeMS, killOp and shutdown interrupt them.
func (r *request) scripts() *js.Env {
	return &js.Env{Ctx: r.ctx, Disabled: r.cluster.opts.JavaScriptDisabled}
}

// resolveCollation parses an operation's collation; an operation without
// one inherits the collection's default, as on mongod.
func (r *request) resolveCollation(db, coll string, v any, present bool, where string) (*collation.Collation, error) {
	if present {
		return parseCollation(v, where)
	}
	if coll == "" {
		return nil, nil
	}
	var spec bson.D
	_ = r.data().read(db, coll, func(c *collection) error {
		if c != nil {
			spec = collationOption(c.options)
		}
		return nil
	})
	if spec == nil {
		return nil, nil
	}
	return parseCollation(spec, where)
}

// collationOption returns the default collation among a collection's
// create options, nil when it has the simple one.
func collationOption(options bson.D) bson.D {
	v, _ := value.Get(options, "collation")
	d, _ := v.(bson.D)
	return d
}

// parsed collations by spec, so that repeated operations share collators.
var collationCache struct {
	sync.Mutex
	m map[string]*collation.Collation
}

// parseCollation parses a collation field; nil is the simple collation.
func parseCollation(v any, where string) (*collation.Collation, error) {
	d, ok := v.(bson.D)
	if !ok {
		return nil, cmderr.New(cmderr.TypeMismatch, "BSON field '%s' is the wrong type '%s', expected type 'object'", where, typeNameOf(v))
	}
	key := value.Key(d)
	collationCache.Lock()
	c, hit := collationCache.m[key]
	collationCache.Unlock()
	if hit {
		return c, nil
	}
	c, err := collation.Parse(d)
	if err != nil {
		return nil, err
	}
	collationCache.Lock()
	if collationCache.m == nil || len(collationCache.m) > 256 {
		collationCache.m = map[string]*collation.Collation{}
	}
	collationCache.m[key] = c
	collationCache.Unlock()
	return c, nil
}

// letVars evaluates the command's let variables once, before any document
// is read, and binds $$NOW and $$CLUSTER_TIME for the whole command.
func (r *request) letVars() (map[string]any, error) {
	v, ok := r.get("let")
	if !ok {
		return r.evalLet(nil)
	}
	let, isDoc := v.(bson.D)
	if !isDoc {
		return nil, cmderr.New(cmderr.TypeMismatch, "BSON field '%s.let' is the wrong type '%s', expected type 'object'", r.name, typeNameOf(v))
	}
	return r.evalLet(let)
}

// evalLet evaluates let expressions in order; each may use the ones
// before it and the system variables.
func (r *request) evalLet(let bson.D) (map[string]any, error) {
	vars := map[string]any{"NOW": bson.NewDateTimeFromTime(r.now)}
	if r.cluster.setName != "" {
		// A standalone mongod has no cluster time: $$CLUSTER_TIME fails.
		// Boxed once per cluster time, as replies carry it.
		clock := r.cluster.data.clusterClock
		vars["CLUSTER_TIME"] = clock.gossipDoc(clock.current()).opv
	}
	for _, e := range let {
		if err := expr.CheckUserVarName(e.Key); err != nil {
			return nil, err
		}
		if err := expr.CheckConstant(e.Value); err != nil {
			return nil, err
		}
		ex, err := expr.Compile(e.Value)
		if err != nil {
			return nil, err
		}
		val, err := ex.Eval(bson.D{}, vars)
		if err != nil {
			return nil, err
		}
		if expr.IsMissing(val) {
			val = nil
		}
		vars[e.Key] = value.Clone(val)
	}
	return vars, nil
}
