package mongosim

import (
	"sort"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/js"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// mapReduceSpec is a parsed mapReduce command.
type mapReduceSpec struct {
	coll                 string
	mapFn, reduceFn, fin *js.Function
	scope                bson.D
	query, sort          bson.D
	limit                int64
	out                  mapReduceOut
}

// mapReduceOut is the out option: inline, or a collection written in one
// of the modes replace, merge and reduce.
type mapReduceOut struct {
	inline   bool
	mode     string
	db, coll string
	dbGiven  bool
}

// cmdMapReduce runs mapReduce as mongod 8.0 does: the query, sort and
// limit select the input, map emits key/value pairs, reduce folds the
// values of a key that has more than one, finalize maps each result, and
// the {_id: key, value} results are returned inline or written out.
func cmdMapReduce(r *request) (bson.D, error) {
	spec, err := parseMapReduce(r)
	if err != nil {
		return nil, err
	}
	if !spec.out.inline && !r.member.IsPrimary() {
		return nil, cmderr.New(cmderr.NotWritablePrimary, notPrimaryMessage)
	}
	bypassArg(r)
	env, err := r.opEnvFor(spec.coll)
	if err != nil {
		return nil, err
	}
	docs, err := mapReduceInput(r, spec, env)
	if err != nil {
		return nil, err
	}
	var prior map[string]any
	if spec.out.mode == "reduce" && !spec.out.inline {
		if prior, err = spec.priorValues(r); err != nil {
			return nil, err
		}
	}
	results, err := spec.mapAndReduce(env.scripts, docs, prior)
	if err != nil {
		return nil, err
	}
	if spec.out.inline {
		out := make(bson.A, len(results))
		for i, d := range results {
			out[i] = d
		}
		return bson.D{{Key: "results", Value: out}, {Key: "ok", Value: 1.0}}, nil
	}
	if err := spec.write(r, results); err != nil {
		return nil, err
	}
	var res any = spec.out.coll
	if spec.out.dbGiven {
		res = bson.D{{Key: "db", Value: spec.out.db}, {Key: "collection", Value: spec.out.coll}}
	}
	return bson.D{{Key: "result", Value: res}, {Key: "ok", Value: 1.0}}, nil
}

func parseMapReduce(r *request) (*mapReduceSpec, error) {
	coll, err := commandArgs(r, "map", "reduce", "out", "query", "sort", "limit", "finalize", "scope",
		"jsMode", "verbose", "bypassDocumentValidation", "collation", "let")
	if err != nil {
		return nil, err
	}
	spec := &mapReduceSpec{coll: coll}
	for _, f := range []struct {
		name string
		dst  **js.Function
	}{{"map", &spec.mapFn}, {"reduce", &spec.reduceFn}, {"finalize", &spec.fin}} {
		v, ok := r.get(f.name)
		if !ok {
			if f.name == "finalize" {
				continue
			}
			return nil, cmderr.New(40414, "BSON field 'mapReduce.%s' is missing but a required field", f.name)
		}
		switch v.(type) {
		case string, bson.JavaScript, bson.CodeWithScope:
		default:
			return nil, cmderr.New(cmderr.TypeMismatch, "BSON field 'mapReduce.%s' is the wrong type '%s', expected types '[string, javascript, javascriptWithScope]'", f.name, typeNameOf(v))
		}
		if *f.dst, err = js.Compile(v); err != nil {
			return nil, err
		}
	}
	if spec.query, _, err = docArg(r, "query"); err != nil {
		return nil, err
	}
	if spec.sort, _, err = docArg(r, "sort"); err != nil {
		return nil, err
	}
	if spec.scope, _, err = docArg(r, "scope"); err != nil {
		return nil, err
	}
	if _, spec.limit, _, err = skipLimitArgs(r); err != nil {
		return nil, err
	}
	out, ok := r.get("out")
	if !ok {
		return nil, cmderr.New(40414, "BSON field 'mapReduce.out' is missing but a required field")
	}
	if spec.out, err = parseMapReduceOut(r.db, out); err != nil {
		return nil, err
	}
	return spec, nil
}

func parseMapReduceOut(db string, v any) (mapReduceOut, error) {
	o := mapReduceOut{mode: "replace", db: db}
	switch x := v.(type) {
	case string:
		o.coll = x
	case bson.D:
		if len(x) == 0 {
			return o, cmderr.New(13522, "please specify one of [replace|merge|reduce|inline] in 'out' object")
		}
		switch x[0].Key {
		case "inline":
			o.inline = true
			return o, nil
		case "replace", "merge", "reduce":
			name, isStr := x[0].Value.(string)
			if !isStr {
				return o, cmderr.New(cmderr.TypeMismatch, "'out.%s' must be a string", x[0].Key)
			}
			o.mode, o.coll = x[0].Key, name
		default:
			return o, cmderr.New(13522, "please specify one of [replace|merge|reduce|inline] in 'out' object")
		}
		for _, e := range x[1:] {
			switch e.Key {
			case "db":
				s, isStr := e.Value.(string)
				if !isStr {
					return o, cmderr.New(cmderr.TypeMismatch, "'out.db' must be a string")
				}
				o.db, o.dbGiven = s, true
			case "nonAtomic":
			case "sharded":
				if truthy(e.Value) {
					return o, cmderr.Unsupported("mapReduce out.sharded")
				}
			default:
				return o, cmderr.New(cmderr.BadValue, "Unexpected field '%s' in 'out' document", e.Key)
			}
		}
	default:
		return o, cmderr.New(13606, "'out' has to be a string or an object")
	}
	if err := validateNamespace(o.db, o.coll); err != nil {
		return o, err
	}
	return o, nil
}

// mapReduceInput reads the documents the query selects, sorted and
// limited.
func mapReduceInput(r *request, spec *mapReduceSpec, env opEnv) ([]bson.D, error) {
	f, err := env.compileFilter(spec.query)
	if err != nil {
		return nil, err
	}
	docs, err := r.readDocs(spec.coll, f, spec.query, 0, nil)
	if err != nil {
		return nil, err
	}
	if len(spec.sort) > 0 {
		s, err := compileSort(spec.sort, env)
		if err != nil {
			return nil, err
		}
		s.SortDocs(docs)
	}
	return skipLimit(docs, 0, spec.limit), nil
}

// emitted is one key's values, in emit order.
type emitted struct {
	key    any
	values bson.A
}

// mapAndReduce runs map over docs, reduce over each key's values (and, in
// out mode reduce, over the value prior holds for the key) and finalize
// over each result; the results are {_id, value} documents in key order.
func (spec *mapReduceSpec) mapAndReduce(scripts *js.Env, docs []bson.D, prior map[string]any) ([]bson.D, error) {
	groups := map[string]*emitted{}
	emit := func(k, v any) error {
		id := value.Key(k)
		g := groups[id]
		if g == nil {
			g = &emitted{key: k}
			groups[id] = g
		}
		g.values = append(g.values, v)
		return nil
	}
	for _, d := range docs {
		if err := scripts.Check(js.UseMap); err != nil {
			return nil, err
		}
		if _, err := spec.mapFn.Run(scripts, js.Call{This: d, Globals: spec.scope, Emit: emit}); err != nil {
			return nil, err
		}
	}
	keys := make([]*emitted, 0, len(groups))
	for _, g := range groups {
		keys = append(keys, g)
	}
	sort.Slice(keys, func(i, j int) bool { return value.Compare(keys[i].key, keys[j].key) < 0 })
	out := make([]bson.D, 0, len(keys))
	for _, g := range keys {
		v, err := spec.reduce(scripts, g.key, g.values)
		if err != nil {
			return nil, err
		}
		if prev, ok := prior[value.Key(g.key)]; ok {
			if v, err = spec.reduce(scripts, g.key, bson.A{prev, v}); err != nil {
				return nil, err
			}
		}
		if v, err = spec.finalize(scripts, g.key, v); err != nil {
			return nil, err
		}
		out = append(out, bson.D{{Key: "_id", Value: g.key}, {Key: "value", Value: v}})
	}
	return out, nil
}

// reduce folds a key's values; a single value is not reduced, as on
// mongod.
func (spec *mapReduceSpec) reduce(scripts *js.Env, key any, values bson.A) (any, error) {
	if len(values) == 1 {
		return values[0], nil
	}
	if err := scripts.Check(js.UseReduce); err != nil {
		return nil, err
	}
	return spec.reduceFn.Run(scripts, js.Call{Args: []any{key, values}, Globals: spec.scope})
}

func (spec *mapReduceSpec) finalize(scripts *js.Env, key, v any) (any, error) {
	if spec.fin == nil {
		return v, nil
	}
	if err := scripts.Check(js.UseFunction); err != nil {
		return nil, err
	}
	return spec.fin.Run(scripts, js.Call{Args: []any{key, v}, Globals: spec.scope})
}

// priorValues reads the out collection's values by key, for out mode
// reduce.
func (spec *mapReduceSpec) priorValues(r *request) (map[string]any, error) {
	existing, err := catalog{s: r.data()}.Read(spec.out.db, spec.out.coll)
	if err != nil {
		return nil, err
	}
	prior := make(map[string]any, len(existing))
	for _, d := range existing {
		id, _ := value.Get(d, "_id")
		prior[value.Key(id)], _ = value.Get(d, "value")
	}
	return prior, nil
}

// write stores the results in the out collection: replace swaps its
// contents; merge and reduce overwrite the documents with the same _id.
func (spec *mapReduceSpec) write(r *request, results []bson.D) error {
	cat := catalog{s: r.data(), bypass: bypassing(r.ctx)}
	o := spec.out
	if o.mode == "replace" {
		return cat.Out(o.db, o.coll, results)
	}
	if len(results) == 0 {
		return nil
	}
	return cat.Merge(o.db, o.coll, results, []string{"_id"}, "replace", "insert")
}

func init() {
	register(&command{name: "mapReduce", run: cmdMapReduce})
}
