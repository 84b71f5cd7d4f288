package mongosim

import (
	"errors"
	"sort"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/agg"
	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/expr"
	"github.com/sturdy-go/sturdy/mongosim/internal/query"
	"github.com/sturdy-go/sturdy/mongosim/internal/text"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// textIndex is a text index's spec and its inverted index from stemmed
// term to the records holding it, kept up to date by every write (through
// the index keys: a text index's one key per document carries the
// document's term scores).
type textIndex struct {
	spec *text.Spec
	inv  *text.Index[*record]
}

// empty returns an index with the same spec and no documents, for a copy
// of the collection (a transaction's).
func (t *textIndex) empty() *textIndex {
	return &textIndex{spec: t.spec, inv: text.NewIndex[*record]()}
}

// newTextIndex sets ix up as a text index from its createIndexes spec.
func newTextIndex(ix *index, spec bson.D) error {
	s, err := text.ParseSpec(ix.key, spec)
	if err != nil {
		return err
	}
	if ix.name == "" {
		ix.name = indexName(ix.key) // from the key as given: "title_text"
	}
	ix.key = s.Key
	ix.fields = ix.fields[:0]
	for _, e := range s.Key {
		ix.fields = append(ix.fields, e.Key)
	}
	ix.text = &textIndex{spec: s, inv: text.NewIndex[*record]()}
	return nil
}

// textKeysOf is keysOf for a text index: one key holding the document's
// term scores (none for a document the partial filter leaves out). Prefix
// fields may not be arrays, as on mongod.
func (ix *index) textKeysOf(doc bson.D) ([]indexKey, error) {
	if ix.partial != nil && !ix.partial.Match(doc) {
		return nil, nil
	}
	for _, f := range ix.text.spec.Prefix {
		vals := pathValues(doc, splitPath(f), nil, false)
		if len(vals) > 1 || (len(vals) == 1 && isArray(vals[0])) {
			return nil, cmderr.New(16675, "cannot have a multi-key as a prefix to a text index")
		}
	}
	scores, err := ix.text.spec.Score(doc)
	if err != nil {
		return nil, err
	}
	return []indexKey{{ix: ix, terms: scores}}, nil
}

func isArray(v any) bool { _, ok := v.(bson.A); return ok }

// textIndexOf returns the collection's text index, nil without one.
func (c *collection) textIndexOf() *index {
	for _, ix := range c.indexes {
		if ix.text != nil {
			return ix
		}
	}
	return nil
}

// textSearch is a compiled $text predicate: the query parsed in the
// language of the collection's text index.
type textSearch struct {
	spec *text.Spec
	q    *text.Query
}

// MatchDoc checks a document without the index (views, snapshot reads).
func (t *textSearch) MatchDoc(doc bson.D) bool {
	ok, err := t.spec.Matches(doc, t.q, false)
	return err == nil && ok
}

// score computes a document's textScore without the index.
func (t *textSearch) score(doc bson.D) float64 {
	scores, err := t.spec.Score(doc)
	if err != nil {
		return 0
	}
	return text.QueryScore(scores, t.q)
}

// textArgs are the fields of a $text argument.
type textArgs struct {
	search, language                  string
	hasLanguage                       bool
	caseSensitive, diacriticSensitive bool
}

func parseTextArgs(arg any) (textArgs, error) {
	var a textArgs
	d, ok := arg.(bson.D)
	if !ok {
		return a, cmderr.New(cmderr.BadValue, "$text expects an object")
	}
	hasSearch := false
	for _, e := range d {
		switch e.Key {
		case "$search":
			s, ok := e.Value.(string)
			if !ok {
				return a, cmderr.New(cmderr.TypeMismatch, "$search requires a string value")
			}
			a.search, hasSearch = s, true
		case "$language":
			s, ok := e.Value.(string)
			if !ok {
				return a, cmderr.New(cmderr.TypeMismatch, "$language requires a string value")
			}
			a.language, a.hasLanguage = s, true
		case "$caseSensitive", "$diacriticSensitive":
			b, ok := e.Value.(bool)
			if !ok {
				return a, cmderr.New(cmderr.TypeMismatch, "%s requires a boolean value", e.Key)
			}
			if e.Key == "$caseSensitive" {
				a.caseSensitive = b
			} else {
				a.diacriticSensitive = b
			}
		default:
			return a, cmderr.New(cmderr.BadValue, "extra fields in $text")
		}
	}
	if !hasSearch {
		return a, cmderr.New(cmderr.TypeMismatch, "$search requires a string value")
	}
	return a, nil
}

// textTarget is the Options.Text of commands on db.coll: it finds the
// collection's text index when a filter has $text.
type textTarget struct {
	s        *storage
	db, coll string
}

// textIndexFor returns the textTarget of db.coll. The request holds the
// first one it gives (a command usually reads one collection): not an
// allocation of its own; another collection's is.
func (r *request) textIndexFor(db, coll string) *textTarget {
	t := &r.textOn
	if t.s != nil && (t.db != db || t.coll != coll) {
		t = new(textTarget)
	}
	*t = textTarget{s: r.data(), db: db, coll: coll}
	return t
}

// CompileText compiles a filter's $text argument against the collection's
// text index.
func (t *textTarget) CompileText(arg any) (query.TextSearch, error) {
	s, db, coll := t.s, t.db, t.coll
	a, err := parseTextArgs(arg)
	if err != nil {
		return nil, err
	}
	var spec *text.Spec
	err = s.read(db, coll, func(c *collection) error {
		switch {
		case c == nil:
			return cmderr.New(cmderr.IndexNotFound, "text index required for $text query (no such collection '%s.%s')", db, coll)
		case c.view != nil:
			return cmderr.New(17313, "$match with $text is only allowed as the first pipeline stage")
		}
		if ix := c.textIndexOf(); ix != nil {
			spec = ix.text.spec
			return nil
		}
		return cmderr.New(cmderr.IndexNotFound, "text index required for $text query")
	})
	if err != nil {
		return nil, err
	}
	lang := spec.DefaultLanguage
	if a.hasLanguage {
		if lang, err = text.Lookup(a.language); err != nil {
			if errors.Is(err, text.ErrUnsupportedLanguage) {
				return nil, cmderr.Unsupported("text search language " + strconv.Quote(a.language))
			}
			return nil, cmderr.New(cmderr.BadValue, "unsupported language: \"%s\" for text index version %d", a.language, text.Version)
		}
	}
	return &textSearch{spec: spec, q: text.ParseQuery(a.search, lang, a.caseSensitive, a.diacriticSensitive)}, nil
}

// textOf returns the filter's $text search, nil without one.
func textOf(f *query.Filter) *textSearch {
	ts, _ := f.Text().(*textSearch)
	return ts
}

// textCandidates answers a $text from the collection's text index: the
// records holding one of the query's terms (checked for phrases,
// negations and case or diacritic sensitivity when the query has them), in
// natural order, with their textScores. The rest of the filter is the
// caller's (query.Filter.WithoutText).
func (c *collection) textCandidates(ts *textSearch, filterDoc bson.D) ([]*record, map[*record]float64, error) {
	ix := c.textIndexOf()
	if ix == nil || ix.text.spec != ts.spec {
		return nil, nil, cmderr.New(cmderr.IndexNotFound, "text index required for $text query")
	}
	if err := checkTextPrefix(ix.text.spec, filterDoc); err != nil {
		return nil, nil, err
	}
	c.fill()
	hits := ix.text.inv.Search(ts.q.Terms)
	out := make([]*record, 0, len(hits))
	for r := range hits {
		if ts.q.NeedsMatcher() {
			ok, err := ts.spec.Matches(r.doc, ts.q, true)
			if err != nil {
				return nil, nil, err
			}
			if !ok {
				continue
			}
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pos < out[j].pos })
	return out, hits, nil
}

// checkTextPrefix requires a top-level equality on each prefix field of a
// compound text index, as mongod's planner does (the equalities themselves
// are checked with the rest of the filter).
func checkTextPrefix(spec *text.Spec, filterDoc bson.D) error {
	for _, f := range spec.Prefix {
		v, ok := value.Get(filterDoc, f)
		if d, isDoc := v.(bson.D); isDoc && len(d) > 0 && len(d[0].Key) > 0 && d[0].Key[0] == '$' {
			ok = false
		}
		if !ok {
			return cmderr.New(cmderr.BadValue, "error processing query: planner returned error :: caused by :: failed to use text index to satisfy $text query (if text index is compound, are equality predicates given for all prefix fields?)")
		}
	}
	return nil
}

// stripTextScores removes the textScore documents carry, also from the
// documents nested in them (a projection of $$ROOT).
func stripTextScores(docs []bson.D) {
	for i := range docs {
		docs[i] = expr.StripTextScore(docs[i])
	}
}

// withTextScore is a copy of doc carrying its textScore.
func withTextScore(doc bson.D, score float64) bson.D {
	out := make(bson.D, len(doc), len(doc)+1)
	copy(out, value.CloneDoc(doc))
	return append(out, bson.E{Key: query.TextScoreField, Value: score})
}

// finishText is finish for a text index: mongod's text indexes compare
// strings binary, so a collation (its own or the collection's default)
// other than simple is refused.
func (ix *index) finishText(c *collection) error {
	spec := collationOption(c.options)
	if ix.collSet {
		spec = nil
		if ix.coll != nil {
			spec = ix.coll.Spec()
		}
	}
	if spec != nil {
		if loc, _ := value.Get(spec, "locale"); loc != "simple" {
			return cmderr.New(cmderr.CannotCreateIndex, "Error in specification %s :: caused by :: Index type 'text' does not support collation: %s", shellString(ix.spec), shellString(spec))
		}
	}
	ix.coll = nil
	ix.finished = true
	return nil
}

// notTextOptions refuses the text index options on another index.
func notTextOptions(spec bson.D) error {
	for _, e := range spec {
		switch e.Key {
		case "weights", "default_language", "language_override", "textIndexVersion":
			return cmderr.Unsupported("index option '" + e.Key + "' on an index that is not a text index")
		}
	}
	return nil
}

// sameTextOptions compares the text options of two indexes.
func sameTextOptions(a, b *index) bool {
	if (a.text == nil) != (b.text == nil) {
		return false
	}
	return a.text == nil || value.Key(a.text.spec.Options) == value.Key(b.text.spec.Options)
}

// textConflict is mongod's rule of one text index per collection: a
// second one on the same key pattern is an IndexOptionsConflict, on
// another pattern CannotCreateIndex. Same-named indexes were handled
// before.
func (c *collection) textConflict(ix *index) error {
	old := c.textIndexOf()
	if ix.text == nil || old == nil {
		return nil
	}
	if sameKeyPattern(old.key, ix.key) {
		return cmderr.New(cmderr.IndexOptionsConflict, "An equivalent index already exists with a different name and options. Requested index: %s, existing index: %s",
			shellString(ix.spec), shellString(old.spec))
	}
	return cmderr.New(cmderr.CannotCreateIndex, "only one text index per collection allowed, found existing text index \"%s\"", old.name)
}

// leadingTextMatch takes a first {$match: ...} holding a $text off the
// pipeline: its filter and the remaining stages.
func leadingTextMatch(pipeline bson.A) (bson.D, bson.A) {
	if len(pipeline) == 0 {
		return nil, pipeline
	}
	st, ok := pipeline[0].(bson.D)
	if !ok || len(st) != 1 || st[0].Key != "$match" {
		return nil, pipeline
	}
	m, ok := st[0].Value.(bson.D)
	if !ok || !agg.HasText(m) {
		return nil, pipeline
	}
	return m, pipeline[1:]
}

// checkTextQuery applies mongod's rules for a find with $text: no
// $natural sort, no hint, not tailable.
func checkTextQuery(f *query.Filter, sortDoc bson.D, hint any, tailable bool) error {
	if f.Text() == nil {
		return nil
	}
	if _, natural := value.Get(sortDoc, "$natural"); natural {
		return cmderr.New(cmderr.BadValue, "text expression not allowed with $natural sort order")
	}
	if d, isDoc := hint.(bson.D); hint != nil && (!isDoc || len(d) > 0) {
		if s, isStr := hint.(string); !isStr || s != "" {
			return cmderr.New(cmderr.BadValue, "text and hint not allowed in same query")
		}
	}
	if tailable {
		return cmderr.New(cmderr.BadValue, "text and tailable cursor not allowed in same query")
	}
	return nil
}

// perDocumentStages are the stages that keep a document's textScore and
// need no other document: a router lets the shards run them after a
// leading $text $match.
var perDocumentStages = map[string]bool{"$match": true, "$project": true, "$addFields": true, "$set": true,
	"$unset": true, "$unwind": true}

// textLead extends the shards' part of a routed aggregate that leads
// with a $text $match (the first lead stages) over the per-document
// stages after it, so the textScore is read where it is known; a
// textScore read by the router's part is NotImplemented.
func textLead(pipeline bson.A, lead int) (int, error) {
	if lead == 0 {
		return lead, nil
	}
	first, _ := pipeline[0].(bson.D)
	if m, _ := first[0].Value.(bson.D); !agg.HasText(m) {
		return lead, nil
	}
	for lead < len(pipeline) {
		d, ok := pipeline[lead].(bson.D)
		if !ok || len(d) != 1 || !perDocumentStages[d[0].Key] {
			break
		}
		lead++
	}
	if readsTextScore(pipeline[lead:]) {
		return 0, cmderr.Unsupported("{$meta: \"textScore\"} in the stages a router runs of an aggregate across shards")
	}
	return lead, nil
}

// readsTextScore reports whether a pipeline part holds {$meta: "textScore"}.
func readsTextScore(v any) bool {
	switch x := v.(type) {
	case bson.D:
		for _, e := range x {
			if (e.Key == "$meta" && e.Value == "textScore") || readsTextScore(e.Value) {
				return true
			}
		}
	case bson.A:
		for _, y := range x {
			if readsTextScore(y) {
				return true
			}
		}
	}
	return false
}
