package update

import (
	"math"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/internal/bsond"
	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// Env is what one application of an update depends on besides the document.
type Env struct {
	// Now is the time $currentDate (and $$NOW in pipelines) records; the zero
	// value means time.Now().
	Now time.Time
	// Insert is set when applying to the new document of an upsert:
	// $setOnInsert applies only then.
	Insert bool
	// ArrayFilters are the command's arrayFilters, for $[<identifier>].
	ArrayFilters []bson.D
	// Position is the array index the query matched (query.MatchPosition),
	// which the positional $ operator updates; -1 if none.
	Position int
	// Vars are the command's let variables (and $$NOW, $$CLUSTER_TIME),
	// for pipeline-style updates.
	Vars map[string]any
	// Collator is the command's collation, for arrayFilters, $min/$max,
	// $addToSet, $pull, $pullAll and $push's $sort; nil is the simple
	// collation.
	Collator value.Collator
}

type kind int

const (
	kindOperators kind = iota
	kindReplacement
	kindPipeline
)

// Update is a compiled update, safe for concurrent use.
type Update struct {
	kind        kind
	spec        bson.D // the operator document, for messages
	root        node
	identifiers map[string]string // array filter identifier -> first path using it; nil if none
	positional  bool
	replacement bson.D
	pipeline    *pipelineUpdate
	// topDollar are the paths creating a top-level $-prefixed field,
	// which only an upsert's insert may do (mongod's storage validation).
	topDollar []string
}

// Compile parses an update: a document of $-operators, a replacement
// document, or a pipeline (bson.A). Values are normalised to the types
// bson.Unmarshal produces, so callers may pass bson.M, []any or Go ints.
// A spec already of those types (as decoded from a command) is kept, not
// copied: the Update only reads it, and the caller must not change it
// while the Update is in use.
func Compile(spec any) (*Update, error) {
	norm, err := normalize(spec)
	if err != nil {
		return nil, err
	}
	switch s := norm.(type) {
	case bson.A:
		return compilePipeline(s)
	case bson.D:
		if len(s) > 0 && strings.HasPrefix(s[0].Key, "$") {
			u := &Update{kind: kindOperators, spec: s}
			if err := u.compileOperators(s); err != nil {
				return nil, err
			}
			return u, nil
		}
		for _, e := range s {
			if strings.HasPrefix(e.Key, "$") {
				return nil, cmderr.New(cmderr.DollarPrefixedFieldName,
					"The dollar ($) prefixed field '%s' in '%s' is not allowed in the context of an update's replacement document. Consider using an aggregation pipeline with $replaceWith.",
					e.Key, e.Key)
			}
		}
		return &Update{kind: kindReplacement, replacement: s}, nil
	}
	return nil, cmderr.New(cmderr.FailedToParse, "Update argument must be either an object or an array")
}

// normalize returns spec with every value of the type bson.Unmarshal gives
// it (bson.D, bson.A, int32/int64, ...): spec itself when it already is,
// otherwise a copy round-tripped through BSON.
func normalize(spec any) (any, error) {
	switch x := spec.(type) {
	case nil:
		return nil, cmderr.New(cmderr.FailedToParse, "Update argument must be either an object or an array")
	case bson.Raw:
		d, err := bsond.Unmarshal(x)
		if err != nil {
			return nil, cmderr.New(cmderr.FailedToParse, "invalid update document: %v", err)
		}
		return d, nil
	}
	if isNormal(spec) {
		// What the round trip would give (an update decoded from a
		// command always is).
		return spec, nil
	}
	// bsond encodes and decodes as the bson package does, without its
	// reflection (which was most of an updateOne's compile time).
	b, err := bsond.Marshal(bson.D{{Key: "u", Value: spec}})
	if err != nil {
		return nil, cmderr.New(cmderr.FailedToParse, "invalid update document: %v", err)
	}
	d, err := bsond.Unmarshal(b)
	if err != nil || len(d) != 1 {
		return nil, cmderr.New(cmderr.FailedToParse, "invalid update document: %v", err)
	}
	return d[0].Value, nil
}

// isNormal reports whether v holds only values of the types bson.Unmarshal
// into a bson.D gives, which value.Clone copies as they are, and keys BSON
// can hold (no NUL): normalize's round trip would give an equal value.
func isNormal(v any) bool {
	switch x := v.(type) {
	case bson.D:
		if x == nil {
			return false
		}
		for _, e := range x {
			if strings.IndexByte(e.Key, 0) >= 0 || !isNormal(e.Value) {
				return false
			}
		}
		return true
	case bson.A:
		if x == nil {
			return false
		}
		for _, e := range x {
			if !isNormal(e) {
				return false
			}
		}
		return true
	case nil, string, int32, int64, float64, bool, bson.ObjectID, bson.DateTime, bson.Timestamp:
		return true
	}
	return false
}

// IsReplacement reports whether the update is a replacement document.
func (u *Update) IsReplacement() bool { return u.kind == kindReplacement }

// IsPipeline reports whether the update is an aggregation pipeline.
func (u *Update) IsPipeline() bool { return u.kind == kindPipeline }

// UsesPosition reports whether the update has a positional $ path, so the
// caller knows it needs the query's matched array position.
func (u *Update) UsesPosition() bool { return u.positional }

// CheckArrayFilters validates arrayFilters against the update as the server
// does when it parses the command, before any document is matched.
func (u *Update) CheckArrayFilters(filters []bson.D) error {
	if u.kind != kindOperators {
		if len(filters) > 0 {
			return cmderr.New(cmderr.FailedToParse, "arrayFilters may not be specified for pipeline-style or replacement updates")
		}
		return nil
	}
	_, err := u.bindArrayFilters(filters, nil)
	return err
}

// Apply returns the updated copy of doc and whether it differs from doc.
// doc is never modified. The copy shares with doc the values the update
// leaves alone, and no document or array with the update (what it stores
// is copied): a caller that never changes documents in place, as
// mongosim's storage, keeps it as it is.
func (u *Update) Apply(doc bson.D, env Env) (bson.D, bool, error) {
	out, err := u.apply(doc, env, hasID(doc))
	if err != nil {
		return nil, false, err
	}
	return out, !identicalDoc(doc, out), nil
}

// Upsert builds the document an upsert inserts from seed (query.UpsertSeed):
// the update applied with env.Insert set, or the replacement with the
// article's _id. A missing _id is generated; _id is always the first field.
func (u *Update) Upsert(seed bson.D, env Env) (bson.D, error) {
	env.Insert = true
	out, err := u.apply(seed, env, hasID(seed))
	if err != nil {
		return nil, err
	}
	id, ok := value.Get(out, "_id")
	if !ok {
		id = bson.NewObjectID()
	}
	switch id.(type) {
	case bson.A, bson.Regex, bson.Undefined:
		return nil, cmderr.New(cmderr.InvalidIdField, "The '_id' value cannot be of type %s", typeName(id))
	}
	return idFirst(out, id), nil
}

func (u *Update) apply(doc bson.D, env Env, immutableID bool) (bson.D, error) {
	if env.Now.IsZero() {
		env.Now = time.Now()
	}
	switch u.kind {
	case kindReplacement:
		return replace(doc, u.replacement, immutableID)
	case kindPipeline:
		return u.pipeline.apply(doc, env, immutableID)
	}
	if len(u.topDollar) > 0 && !env.Insert {
		p := u.topDollar[0]
		first, _, _ := strings.Cut(p, ".")
		return nil, cmderr.New(cmderr.DollarPrefixedFieldName,
			"The dollar ($) prefixed field '%s' in '%s' is not allowed in the context of an update's replacement document. Consider using an aggregation pipeline with $replaceWith.", first, first)
	}
	filters, err := u.bindArrayFilters(env.ArrayFilters, env.Collator)
	if err != nil {
		return nil, err
	}
	a := &applier{env: env, now: env.Now, orig: doc, filters: filters}
	root := slot{exists: true} // applyToDoc takes doc itself
	children, err := a.resolveChildren(&u.root, root)
	if err != nil {
		return nil, err
	}
	out, err := a.applyToDoc(children, root, doc)
	if err != nil {
		return nil, err
	}
	for _, from := range a.renamed {
		out = removePath(out, from)
	}
	if out == nil {
		out = bson.D{}
	}
	if immutableID {
		before, _ := value.Get(doc, "_id")
		after, ok := value.Get(out, "_id")
		if !ok || value.Compare(before, after) != 0 {
			return nil, cmderr.New(cmderr.ImmutableField,
				"Performing an update on the path '%s' would modify the immutable field '_id'", u.idPath())
		}
	}
	return out, nil
}

// idPath names the update path that touches _id, for the ImmutableField
// message: the first in the update's order ($rename's source before its
// destination).
func (u *Update) idPath() string {
	for _, mod := range u.spec {
		fields, _ := mod.Value.(bson.D)
		for _, f := range fields {
			paths := []string{f.Key}
			if to, ok := f.Value.(string); ok && mod.Key == "$rename" {
				paths = append(paths, to)
			}
			for _, p := range paths {
				if p == "_id" || strings.HasPrefix(p, "_id.") {
					return p
				}
			}
		}
	}
	return "_id"
}

func replace(doc, replacement bson.D, immutableID bool) (bson.D, error) {
	out := value.CloneDoc(replacement)
	if out == nil {
		out = bson.D{}
	}
	origID, hadID := value.Get(doc, "_id")
	newID, hasNewID := value.Get(out, "_id")
	switch {
	case hasNewID && hadID && immutableID && value.Compare(origID, newID) != 0:
		return nil, cmderr.New(cmderr.ImmutableField,
			"After applying the update, the (immutable) field '_id' was found to have been altered to %s", formatElem("_id", newID))
	case hasNewID:
		return idFirst(out, newID), nil
	case hadID:
		return idFirst(out, value.Clone(origID)), nil
	}
	return out, nil
}

func hasID(doc bson.D) bool {
	_, ok := value.Get(doc, "_id")
	return ok
}

// idFirst returns doc with _id = id as its first field.
func idFirst(doc bson.D, id any) bson.D {
	out := make(bson.D, 0, len(doc)+1)
	out = append(out, bson.E{Key: "_id", Value: id})
	for _, e := range doc {
		if e.Key != "_id" {
			out = append(out, e)
		}
	}
	return out
}

// identicalDoc reports whether two documents would encode to the same
// bytes: same field order, same types, same values.
func identicalDoc(a, b bson.D) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || !identical(a[i].Value, b[i].Value) {
			return false
		}
	}
	return true
}

func identical(a, b any) bool {
	switch x := a.(type) {
	case bson.D:
		y, ok := b.(bson.D)
		return ok && identicalDoc(x, y)
	case bson.A:
		y, ok := b.(bson.A)
		return ok && slices.EqualFunc(x, y, identical)
	case float64:
		y, ok := b.(float64)
		return ok && math.Float64bits(x) == math.Float64bits(y)
	case bson.CodeWithScope:
		y, ok := b.(bson.CodeWithScope)
		return ok && x.Code == y.Code && identical(x.Scope, y.Scope)
	case nil:
		return b == nil
	}
	return reflect.DeepEqual(a, b)
}
