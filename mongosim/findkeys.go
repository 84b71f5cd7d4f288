package mongosim

import (
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// findKeys are find's options that work on an index's keys: min and max
// bound a walk of the hinted index (min inclusive, max exclusive), and
// returnKey answers each document's key in the index the query used
// instead of the document.
type findKeys struct {
	min, max  bson.D
	returnKey bool
	ix        *index // the index they apply to; nil: a collection scan
}

func (k *findKeys) bounded() bool { return len(k.min) > 0 || len(k.max) > 0 }

// parseFindKeys reads min, max, returnKey and showRecordId. showRecordId
// is accepted only with returnKey, which answers index keys without a
// $recordId (as mongod does); mongosim has no record ids to show.
func parseFindKeys(r *request, tailable bool) (findKeys, error) {
	var k findKeys
	var err error
	if k.min, _, err = docArg(r, "min"); err != nil {
		return findKeys{}, err
	}
	if k.max, _, err = docArg(r, "max"); err != nil {
		return findKeys{}, err
	}
	if v, ok := r.get("returnKey"); ok {
		k.returnKey = truthy(v)
	}
	if v, ok := r.get("showRecordId"); ok && truthy(v) && !k.returnKey {
		return findKeys{}, cmderr.Unsupported("find option showRecordId")
	}
	if tailable && (k.returnKey || k.bounded()) {
		return findKeys{}, cmderr.Unsupported("min, max and returnKey on a tailable find")
	}
	if k.bounded() {
		if hint, ok := r.get("hint"); !ok || hint == nil {
			return findKeys{}, cmderr.New(51173, "When using min()/max() a hint of which index to use must be provided")
		}
	}
	return k, nil
}

// resolve picks the index: the hinted one; else, for returnKey, the one a
// one-field sort walks or the first that answers the filter, as mongosim's
// explain chooses (explainindex.go).
func (k *findKeys) resolve(r *request, coll string, filterDoc, sortDoc bson.D, hint any) error {
	if !k.returnKey && !k.bounded() {
		return nil
	}
	return r.data().read(r.db, coll, func(c *collection) error {
		if c == nil {
			return nil
		}
		if hint != nil {
			if err := checkHint(c, hint); err != nil {
				return err
			}
			k.ix = c.findIndex(hint)
		} else if len(sortDoc) == 1 {
			for _, ix := range c.indexes {
				if !ix.hidden && ix.fields[0] == sortDoc[0].Key && plainKey(ix.key) && ix.partial == nil && !ix.sparse {
					k.ix = ix
					break
				}
			}
		}
		if k.ix == nil && hint == nil {
			if plans := filterPlans(c, filterDoc, nil); len(plans) > 0 {
				k.ix = plans[0].ix
			}
		}
		if k.bounded() {
			if k.ix == nil {
				return cmderr.New(51173, "When using min()/max() a hint of which index to use must be provided")
			}
			for _, b := range []bson.D{k.min, k.max} {
				if len(b) > 0 && !sameFields(b, k.ix.key) {
					return cmderr.New(51174, "The index implied by specified min/max must match the hinted index")
				}
			}
		}
		if k.ix != nil && !plainKey(k.ix.key) {
			return cmderr.Unsupported("min, max and returnKey on a " + k.ix.name + " index")
		}
		return nil
	})
}

func sameFields(a, b bson.D) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key {
			return false
		}
	}
	return true
}

// key is d's key in the index: one value per field, null where missing.
func (k *findKeys) key(d bson.D) bson.D {
	out := make(bson.D, 0, len(k.ix.key))
	for _, e := range k.ix.key {
		v, ok := value.Get(d, e.Key)
		if !ok {
			v = nil
		}
		out = append(out, bson.E{Key: e.Key, Value: v})
	}
	return out
}

// compare orders two keys of the index, each field in its direction.
func (k *findKeys) compare(a, b bson.D) int {
	for i, e := range k.ix.key {
		c := value.Compare(a[i].Value, b[i].Value)
		if dir, _ := asFloat(e.Value); dir < 0 {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

// bound keeps the documents whose key lies in [min, max), in index order
// unless the find sorts them itself.
func (k *findKeys) bound(docs []bson.D, sorted bool) []bson.D {
	if !k.bounded() {
		return docs
	}
	out := docs[:0]
	for _, d := range docs {
		key := k.key(d)
		if len(k.min) > 0 && k.compare(key, k.min) < 0 || len(k.max) > 0 && k.compare(key, k.max) >= 0 {
			continue
		}
		out = append(out, d)
	}
	if !sorted {
		slices.SortStableFunc(out, func(a, b bson.D) int { return k.compare(k.key(a), k.key(b)) })
	}
	return out
}

// keys replaces each document by its index key ({} without an index).
func (k *findKeys) keys(docs []bson.D) {
	if !k.returnKey {
		return
	}
	for i, d := range docs {
		if k.ix == nil {
			docs[i] = bson.D{}
		} else {
			docs[i] = k.key(d)
		}
	}
}
