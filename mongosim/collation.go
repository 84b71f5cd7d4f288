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
	// sys, when vars is nil, is the request (without let) whose system
	// variables the env has, built on first use (variables): only a $expr
	// or a projection reads them, and a find by _id has neither.
	sys *request
	// text compiles a $text against the collection's text index (nil:
	// $text is not allowed).
	text query.TextIndex
	// scripts runs $where, $function and $accumulator under the
	// operation's context (nil: not allowed).
	scripts *js.Env
}

// variables returns the env's variables, building the system ones of a
// request without let on first use.
func (e opEnv) variables() map[string]any {
	if e.vars == nil && e.sys != nil {
		return e.sys.systemVars()
	}
	return e.vars
}

// collator returns the collation as a value.Collator, nil (not a typed
// nil) for the simple collation.
func (e opEnv) collator() value.Collator {
	if e.coll == nil {
		return nil
	}
	return e.coll
}

// queryOptions are the options of compiling filter under e; the variables
// go in only when the filter reads them.
func (e opEnv) queryOptions(filter bson.D) query.Options {
	o := query.Options{Collator: e.collator(), Text: e.text, Scripts: e.scripts}
	if query.ReadsVariables(filter) {
		o.Vars = e.variables()
	}
	return o
}

// compileFilter compiles a command's filter under its collation and vars.
func (e opEnv) compileFilter(filter bson.D) (*query.Filter, error) {
	if e.coll == nil && e.vars == nil && e.sys == nil && e.text == nil && e.scripts == nil {
		return query.CompileFilter(filter)
	}
	return query.CompileFilterWith(filter, e.queryOptions(filter))
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
	e.text = r.textIndexFor(db, coll)
	e.scripts = r.scripts()
	return e, nil
}

// opEnvFor reads the command's collation (the collection's default when it
// has none) and let variables.
func (r *request) opEnvFor(coll string) (opEnv, error) {
	e, err := r.filterEnvFor(coll)
	if err != nil {
		return opEnv{}, err
	}
	e.vars = e.variables()
	return e, nil
}

// filterEnvFor is opEnvFor for a command whose variables only its filter
// and projection read (find, count, distinct): without let, they are built
// when one does (opEnv.sys).
func (r *request) filterEnvFor(coll string) (opEnv, error) {
	e := opEnv{sys: r}
	if _, hasLet := r.get("let"); hasLet {
		vars, err := r.letVars()
		if err != nil {
			return opEnv{}, err
		}
		e = opEnv{vars: vars}
	}
	v, present := r.get("collation")
	spec, hasSpec := r.collationSpec(r.db, coll, v, present)
	if hasSpec {
		// The field's name only when parsing: its concatenation was an
		// allocation per command.
		c, err := parseCollation(spec, r.name+".collation")
		if err != nil {
			return opEnv{}, err
		}
		e.coll = c
	}
	e.text = r.textIndexFor(r.db, coll)
	e.scripts = r.scripts()
	return e, nil
}

// scripts is where the command's scripts run: under its context, so
// maxTimeMS, killOp and shutdown interrupt them. The request holds it: not
// an allocation of its own.
func (r *request) scripts() *js.Env {
	r.scriptEnv = js.Env{Ctx: r.ctx, Disabled: r.cluster.opts.JavaScriptDisabled}
	return &r.scriptEnv
}

// resolveCollation parses an operation's collation; an operation without
// one inherits the collection's default, as on mongod.
func (r *request) resolveCollation(db, coll string, v any, present bool, where string) (*collation.Collation, error) {
	spec, ok := r.collationSpec(db, coll, v, present)
	if !ok {
		return nil, nil
	}
	return parseCollation(spec, where)
}

// collationSpec returns the collation field of an operation (v, when
// present) or else its collection's default; ok is false for the simple
// collation of a collection without a default.
func (r *request) collationSpec(db, coll string, v any, present bool) (spec any, ok bool) {
	if present {
		return v, true
	}
	if coll == "" {
		return nil, false
	}
	var d bson.D
	_ = r.data().read(db, coll, func(c *collection) error {
		if c != nil {
			d = collationOption(c.options)
		}
		return nil
	})
	return d, d != nil
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

// systemVars are the variables of a command without let: $$NOW and
// $$CLUSTER_TIME, built once.
func (r *request) systemVars() map[string]any {
	if r.sysVars == nil {
		r.sysVars, _ = r.evalLet(nil) // no let: nothing can fail
	}
	return r.sysVars
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
