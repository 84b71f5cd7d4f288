package mongosim

import (
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/query"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// A read's plan decides the order its documents come in: mongod returns
// them in the order its plan produces them, an index scan in index order
// (equal keys by record id, i.e. insertion order; reversed on a backward
// scan) and a collection scan in natural order. Applications come to rely
// on it (an ODM's populate reading {_id: {$in: ids}} gets them sorted by
// _id), so find answers in the order of the plan explain reports
// (explainindex.go), picked the same way.

// readPlan is the access path of a read.
type readPlan struct {
	ix          *ixPlan // the winning index scan; nil: a collection scan
	rejected    []*ixPlan
	backward    bool // a collection scan in reverse natural order (hint {$natural: -1})
	sortByIndex bool // the index scan returns the documents in sort order
}

// naturalHint reports a hint {$natural: 1} (1) or {$natural: -1} (-1).
func naturalHint(hint any) int {
	d, ok := hint.(bson.D)
	if !ok || len(d) != 1 || d[0].Key != "$natural" {
		return 0
	}
	if n, ok := asFloat(d[0].Value); ok && n < 0 {
		return -1
	}
	return 1
}

// planRead picks the plan of a read of c (not an _id point lookup, which
// needs no order): a $natural hint scans the collection; otherwise the
// hinted index, or the best index for the filter, or one answering a
// one-field sort; else a collection scan.
func planRead(c *collection, filter, sortDoc bson.D, hint any) readPlan {
	if len(sortDoc) == 1 && sortDoc[0].Key == "$natural" {
		return readPlan{} // find walks natural order itself
	}
	if n := naturalHint(hint); n != 0 {
		return readPlan{backward: n < 0}
	}
	if c == nil || c.timeseries {
		return readPlan{}
	}
	plans := indexPlans(c, filter, hint)
	plans, byIndex := sortPlan(c, plans, sortDoc, hint != nil && c.findIndex(hint) != nil)
	if len(plans) == 0 {
		return readPlan{}
	}
	return readPlan{ix: plans[0], rejected: plans[1:], sortByIndex: byIndex}
}

// planFor reads c's indexes under its lock to plan a read of db.coll.
func (r *request) planFor(coll string, filter, sortDoc bson.D, hint any) (readPlan, error) {
	var p readPlan
	err := r.data().read(r.db, coll, func(c *collection) error {
		if c == nil || c.view != nil {
			return nil
		}
		if err := checkHint(c, hint); err != nil {
			return err
		}
		p = planRead(c, filter, sortDoc, hint)
		if p.ix != nil && p.sortByIndex {
			// A multikey field's index order is not its sort order.
			p.sortByIndex = !p.ix.ix.multikeyIn(c)
		}
		return nil
	})
	return p, err
}

// ordered reports whether the plan changes the natural order of docs.
func (p readPlan) ordered() bool { return p.ix != nil || p.backward }

// order puts docs (matching documents in natural order) in the plan's
// order, dropping those a hinted sparse or partial index does not hold.
func (p readPlan) order(docs []bson.D) []bson.D {
	if p.backward {
		slices.Reverse(docs)
		return docs
	}
	if p.ix == nil {
		return docs
	}
	return p.ix.order(docs)
}

// multikeyIn reports whether any document of c holds an array in one of
// ix's fields.
func (ix *index) multikeyIn(c *collection) bool {
	multi := false
	c.each(func(rec *record) bool {
		for _, f := range ix.fields {
			for _, v := range pathValues(rec.doc, splitPath(f), nil, false) {
				if _, isArr := v.(bson.A); isArr {
					multi = true
				}
			}
		}
		return !multi
	})
	return multi
}

// order sorts docs as p's scan returns them: by the first key each
// document has within the scan's bounds, equal keys in record order (its
// reverse when scanning backwards). A document the index does not hold
// (sparse, partial) is not returned.
func (p *ixPlan) order(docs []bson.D) []bson.D {
	perm := p.permutation(docs)
	if perm == nil {
		return docs
	}
	out := make([]bson.D, len(perm))
	for i, j := range perm {
		out[i] = docs[j]
	}
	return out
}

// permutation returns the positions of docs in scan order, leaving out
// those the index does not hold; nil to keep docs as they are.
func (p *ixPlan) permutation(docs []bson.D) []int {
	if len(docs) == 1 && p.ix.keysEvery() {
		// One document the index holds keeps its place: a point read
		// (findOne or updateOne by _id) need not compute its keys.
		return nil
	}
	var inBounds *query.Filter
	if p.cond != nil {
		inBounds, _ = query.CompileFilter(bson.D{{Key: "k", Value: p.cond}})
	}
	type keyed struct {
		pos int
		key bson.D
	}
	out := make([]keyed, 0, len(docs))
	for i, d := range docs {
		keys, err := p.ix.keysOf(d)
		if err != nil {
			return nil // parallel arrays: no such index could exist on mongod
		}
		var best bson.D
		for _, k := range keys {
			if inBounds != nil && !inBounds.Match(bson.D{{Key: "k", Value: k.value[0].Value}}) {
				continue
			}
			if best == nil || p.compareKeys(k.value, best) < 0 {
				best = k.value
			}
		}
		if best == nil && len(keys) > 0 {
			best = keys[0].value // matched other than through one key's bounds
		}
		if best != nil {
			out = append(out, keyed{pos: i, key: best})
		}
	}
	if p.backward {
		slices.Reverse(out)
	}
	slices.SortStableFunc(out, func(a, b keyed) int { return p.compareKeys(a.key, b.key) })
	perm := make([]int, len(out))
	for i, k := range out {
		perm[i] = k.pos
	}
	return perm
}

// matchPlanned is match for a write: a single-document write without a
// sort takes the first match in the order of mongod's plan, not of the
// collection, and a hinted sparse or partial index hides the documents it
// lacks.
func (c *collection) matchPlanned(f *query.Filter, filterDoc bson.D, limit int, hint any) ([]*record, error) {
	if isPointFilter(f, filterDoc, hint) {
		return c.match(f, filterDoc, limit) // one document has no order to plan
	}
	p := planRead(c, filterDoc, nil, hint)
	if !p.ordered() {
		return c.match(f, filterDoc, limit)
	}
	all, err := c.match(f, filterDoc, 0)
	if err != nil {
		return nil, err
	}
	if p.backward {
		slices.Reverse(all)
	} else {
		docs := make([]bson.D, len(all))
		for i, rec := range all {
			docs[i] = rec.doc
		}
		if perm := p.ix.permutation(docs); perm != nil {
			ordered := make([]*record, len(perm))
			for i, j := range perm {
				ordered[i] = all[j]
			}
			all = ordered
		}
	}
	if limit > 0 && len(all) > limit {
		all = all[:limit]
	}
	return all, nil
}

// compareKeys orders two keys of p's index in scan order: each field in
// its direction, all reversed for a backward scan.
func (p *ixPlan) compareKeys(a, b bson.D) int {
	for i, e := range p.ix.key {
		c := value.CompareWith(a[i].Value, b[i].Value, p.ix.collator())
		if dir, _ := asFloat(e.Value); dir < 0 {
			c = -c
		}
		if p.backward {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

// keysEvery reports whether ix has a key for every document (or fails on
// it, parallel arrays, which permutation treats as keeping the order):
// not sparse, partial, text or geo.
func (ix *index) keysEvery() bool {
	return !ix.sparse && ix.partial == nil && ix.text == nil && ix.geo == nil
}

// holds reports whether ix has a key for doc: a sparse index lacks
// documents missing all its fields, a partial one those its filter rejects.
func (ix *index) holds(doc bson.D) bool {
	keys, err := ix.keysOf(doc)
	return err != nil || len(keys) > 0
}
