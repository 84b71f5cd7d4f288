package mongosim

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// collMod's two-step conversion of an index to unique (mongod 6.0+):
// prepareUnique: true makes the index refuse new duplicate keys while the
// duplicates already there stay; unique: true then converts it, failing
// with 359 CannotConvertIndexToUnique and the violating documents' _ids
// ({violations: [{ids: [...]}, ...]}) while duplicates remain, or with
// dryRun only reports them. forceNonUnique: true converts a unique index
// back.

// codeCannotConvertIndexToUnique is mongod's answer to a unique conversion
// of an index holding duplicate keys.
const codeCannotConvertIndexToUnique = 359

// cannotConvertError is a refused unique conversion, with its violations.
type cannotConvertError struct {
	violations bson.A
}

func (e *cannotConvertError) Error() string {
	return "Cannot convert the index to unique. Please resolve conflicting documents before running collMod again."
}

// reply is the error reply mongod sends: the violations beside the code.
func (e *cannotConvertError) reply() bson.D {
	return bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: e.Error()},
		{Key: "code", Value: int32(codeCannotConvertIndexToUnique)}, {Key: "codeName", Value: "CannotConvertIndexToUnique"},
		{Key: "violations", Value: e.violations}}
}

// checkDryRun validates collMod's dryRun: only beside index.unique.
func checkDryRun(m *indexMod, dryRun bool) error {
	if !dryRun {
		return nil
	}
	if m == nil || m.unique == nil || m.ttl != nil || m.hidden != nil || m.prepareUnique != nil || m.forceNonUnique != nil {
		return cmderr.New(cmderr.InvalidOptions, "dryRun requires exactly one index modification: 'unique: true'")
	}
	m.dryRun = true
	return nil
}

// modifyUniqueness applies the unique, prepareUnique and forceNonUnique
// changes of m to ix (c's write lock held), adding mongod's reply fields.
func (c *collection) modifyUniqueness(ix *index, m *indexMod, out bson.D) (bson.D, error) {
	if m.unique != nil {
		if !*m.unique {
			return nil, cmderr.New(cmderr.BadValue, "'Unique: false' option is not supported")
		}
		if ix.unique {
			return nil, cmderr.New(cmderr.InvalidOptions, "The index is already unique")
		}
		if !ix.prepareUnique {
			return nil, cmderr.New(cmderr.InvalidOptions, "Cannot make index unique with 'unique: true' before setting 'prepareUnique: true'")
		}
		if v := c.duplicateKeys(ix); len(v) > 0 {
			return nil, &cannotConvertError{violations: v}
		}
		if m.dryRun {
			return out, nil
		}
		ix.unique, ix.prepareUnique = true, false
		ix.spec = replaceOptions(ix.spec, bson.D{{Key: "unique", Value: true}}, "unique", "prepareUnique")
		out = append(out, bson.E{Key: "unique_new", Value: true})
	}
	if m.prepareUnique != nil {
		out = append(out, bson.E{Key: "prepareUnique_old", Value: ix.prepareUnique}, bson.E{Key: "prepareUnique_new", Value: *m.prepareUnique})
		if *m.prepareUnique && !ix.prepareUnique && !ix.unique {
			c.fillEntries(ix)
		}
		ix.prepareUnique = *m.prepareUnique
		var add bson.D
		if ix.prepareUnique {
			add = bson.D{{Key: "prepareUnique", Value: true}}
		}
		ix.spec = replaceOptions(ix.spec, add, "prepareUnique")
		if !ix.unique && !ix.prepareUnique {
			ix.entries = nil
		}
	}
	if m.forceNonUnique != nil && *m.forceNonUnique {
		if !ix.unique || ix.name == "_id_" {
			return nil, cmderr.New(cmderr.InvalidOptions, "The index is already non-unique")
		}
		ix.unique = false
		ix.spec = replaceOptions(ix.spec, nil, "unique")
		if !ix.prepareUnique {
			ix.entries = nil
		}
		out = append(out, bson.E{Key: "forceNonUnique_new", Value: true})
	}
	return out, nil
}

// fillEntries indexes the keys of c's documents in ix so that new
// duplicates are refused; of keys held several times one holder is kept.
func (c *collection) fillEntries(ix *index) {
	ix.entries = map[string]*record{}
	c.each(func(r *record) bool {
		keys, err := ix.keysOf(r.doc)
		if err != nil {
			return true
		}
		for _, k := range keys {
			if ix.entries[k.key] == nil {
				ix.entries[k.key] = r
			}
		}
		return true
	})
}

// duplicateKeys lists, per key held by several documents, their _ids.
func (c *collection) duplicateKeys(ix *index) bson.A {
	holders := map[string][]any{}
	var order []string
	c.each(func(r *record) bool {
		keys, err := ix.keysOf(r.doc)
		if err != nil {
			return true
		}
		id, _ := lookupD(r.doc, "_id")
		for _, k := range keys {
			if holders[k.key] == nil {
				order = append(order, k.key)
			}
			holders[k.key] = append(holders[k.key], id)
		}
		return true
	})
	var out bson.A
	for _, k := range order {
		if ids := holders[k]; len(ids) > 1 {
			out = append(out, bson.D{{Key: "ids", Value: bson.A(ids)}})
		}
	}
	return out
}

// keptKeys drops from keys those of prepareUnique indexes that the record
// already held: an update keeping a key it shares with an older duplicate
// is not a new duplicate.
func keptKeys(keys, old []indexKey) []indexKey {
	out := keys[:0:0]
	for _, k := range keys {
		kept := false
		if k.ix.prepareUnique && !k.ix.unique {
			for _, o := range old {
				if o.ix == k.ix && o.key == k.key {
					kept = true
					break
				}
			}
		}
		if !kept {
			out = append(out, k)
		}
	}
	return out
}
