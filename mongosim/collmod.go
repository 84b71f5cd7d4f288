package mongosim

import (
	"errors"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// cmdCollMod changes a collection's options: validator, validationLevel,
// validationAction, changeStreamPreAndPostImages, an index's
// expireAfterSeconds or hidden flag; on a view, its viewOn and pipeline.
func cmdCollMod(r *request) (bson.D, error) {
	coll, err := collectionArg(r)
	if err != nil {
		return nil, err
	}
	if r.cluster.data.viewOf(r.db, coll) != nil {
		return collModView(r, coll)
	}
	a, err := parseCollModArgs(r, coll)
	if err != nil {
		return nil, err
	}
	mod, err := parseIndexMod(a.indexSpec)
	if err != nil {
		return nil, err
	}
	if err := checkDryRun(mod, a.dryRun); err != nil {
		return nil, err
	}
	reply := bson.D{}
	err = r.cluster.data.write(r.ctx, r.db, coll, false, func(c *collection) error {
		if c == nil {
			return cmderr.New(cmderr.NamespaceNotFound, "ns does not exist: %s.%s", r.db, coll)
		}
		var err error
		reply, err = a.apply(r, c, mod)
		return err
	})
	var cu *cannotConvertError
	if errors.As(err, &cu) {
		return cu.reply(), nil // the error reply carries the violations
	}
	if err != nil {
		return nil, err
	}
	return reply, nil
}

// collModArgs is a collMod on a collection's parsed arguments.
type collModArgs struct {
	images    *bool
	indexSpec bson.D
	valFields bson.D
	collTTL   any // collection-level expireAfterSeconds (clustered, time series)
	dryRun    bool
}

// parseCollModArgs reads collMod's options for collection coll.
func parseCollModArgs(r *request, coll string) (collModArgs, error) {
	var a collModArgs
	for i, e := range r.cmd {
		if i == 0 || genericFields[e.Key] {
			continue
		}
		switch e.Key {
		case "changeStreamPreAndPostImages":
			on, err := preAndPostImagesArg("collMod", e.Value)
			if err != nil {
				return a, err
			}
			a.images = &on
		case "validator", "validationLevel", "validationAction":
			a.valFields = append(a.valFields, e)
		case "expireAfterSeconds":
			a.collTTL = e.Value
			if str, ok := e.Value.(string); ok && str == "off" {
				break
			}
			if n, ok := int64Arg(e.Value); !ok || n < 0 {
				return a, cmderr.New(cmderr.InvalidOptions, "Invalid value for 'expireAfterSeconds'")
			}
		case "dryRun":
			a.dryRun = truthy(e.Value)
		case "index":
			d, ok := e.Value.(bson.D)
			if !ok {
				return a, typeErr("collMod.index", "object", e.Value)
			}
			a.indexSpec = d
		case "viewOn", "pipeline":
			if r.cluster.data.lookup(r.db, coll) == nil {
				return a, cmderr.New(cmderr.NamespaceNotFound, "ns does not exist: %s.%s", r.db, coll)
			}
			return a, cmderr.New(cmderr.InvalidOptions, "option '%s' is only supported on a view", e.Key)
		default:
			return a, cmderr.Unsupported("collMod option " + e.Key)
		}
	}
	return a, nil
}

// apply makes the collMod's changes to c inside its write and records the
// modify event. It returns the reply: the index modification's fields, if
// any.
func (a *collModArgs) apply(r *request, c *collection, mod *indexMod) (bson.D, error) {
	// The modify event's stateBeforeChange: the options (with the
	// uuid first, as mongod logs them) before this change.
	before := append(bson.D{{Key: "uuid", Value: c.uuid}}, value.CloneDoc(c.options)...)
	var val *validator
	if len(a.valFields) > 0 {
		v, _, err := validatorArgs("collMod", a.valFields, c.validator)
		if err != nil {
			return nil, err
		}
		val = v
	}
	reply := bson.D{}
	if mod != nil {
		out, err := c.modifyIndex(mod)
		if err != nil {
			return nil, err
		}
		reply = out
	}
	if a.collTTL != nil {
		_, clustered := value.Get(c.options, "clusteredIndex")
		if !clustered && !c.timeseries {
			return nil, cmderr.New(cmderr.InvalidOptions, "collMod.expireAfterSeconds is only supported on clustered and time-series collections")
		}
		var add bson.D
		if n, ok := int64Arg(a.collTTL); ok {
			add = bson.D{{Key: "expireAfterSeconds", Value: n}}
		}
		c.options = replaceOptions(c.options, add, "expireAfterSeconds")
	}
	if val != nil {
		c.validator = val
		c.options = replaceOptions(c.options, val.options(), "validator", "validationLevel", "validationAction")
	}
	if a.images != nil {
		c.prePostImages = *a.images
		var add bson.D
		if *a.images {
			add = bson.D{{Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: true}}}}
		}
		c.options = replaceOptions(c.options, add, "changeStreamPreAndPostImages")
	}
	recordModify(r, c, before, reply)
	return reply, nil
}

// replaceOptions returns opts without the named keys, followed by add.
func replaceOptions(opts bson.D, add bson.D, keys ...string) bson.D {
	out := bson.D{}
	for _, e := range opts {
		drop := false
		for _, k := range keys {
			drop = drop || e.Key == k
		}
		if !drop {
			out = append(out, e)
		}
	}
	return append(out, add...)
}

// indexMod is collMod's index: {keyPattern | name, expireAfterSeconds?, hidden?}.
type indexMod struct {
	keyPattern bson.D
	name       string
	ttl        any // the expireAfterSeconds value given, nil when absent
	ttlSecs    int64
	hidden     *bool
	// unique, prepareUnique and forceNonUnique convert the index
	// (collmod_unique.go); dryRun only checks a unique conversion.
	unique, prepareUnique, forceNonUnique *bool
	dryRun                                bool
}

func parseIndexMod(d bson.D) (*indexMod, error) {
	if d == nil {
		return nil, nil
	}
	m := &indexMod{}
	hasKey, hasName := false, false
	for _, e := range d {
		switch e.Key {
		case "keyPattern":
			k, ok := e.Value.(bson.D)
			if !ok {
				return nil, typeErr("collMod.index.keyPattern", "object", e.Value)
			}
			m.keyPattern, hasKey = k, true
		case "name":
			s, ok := e.Value.(string)
			if !ok {
				return nil, typeErr("collMod.index.name", "string", e.Value)
			}
			m.name, hasName = s, true
		case "expireAfterSeconds":
			n, err := ttlArg(e.Value)
			if err != nil {
				return nil, err
			}
			m.ttl, m.ttlSecs = e.Value, n
		case "hidden":
			b, ok := e.Value.(bool)
			if !ok {
				return nil, typeErr("collMod.index.hidden", "bool", e.Value)
			}
			m.hidden = &b
		case "unique", "prepareUnique", "forceNonUnique":
			b := truthy(e.Value)
			switch e.Key {
			case "unique":
				m.unique = &b
			case "prepareUnique":
				m.prepareUnique = &b
			default:
				m.forceNonUnique = &b
			}
		default:
			return nil, cmderr.New(40415, "BSON field 'collMod.index.%s' is an unknown field.", e.Key)
		}
	}
	if hasKey && hasName {
		return nil, cmderr.New(cmderr.InvalidOptions, "Cannot specify both key pattern and name.")
	}
	if !hasKey && !hasName {
		return nil, cmderr.New(cmderr.InvalidOptions, "Must specify either index name or key pattern.")
	}
	if m.ttl == nil && m.hidden == nil && m.unique == nil && m.prepareUnique == nil && m.forceNonUnique == nil {
		return nil, cmderr.New(cmderr.InvalidOptions, "no expireAfterSeconds, hidden, unique, or prepareUnique field")
	}
	return m, nil
}

// modifyIndex applies an index change under c's write lock and returns
// mongod's reply fields for it.
func (c *collection) modifyIndex(m *indexMod) (bson.D, error) {
	var ix *index
	for _, x := range c.indexes {
		if (m.keyPattern != nil && sameKeyPattern(x.key, m.keyPattern)) || (m.name != "" && x.name == m.name) {
			if ix != nil {
				return nil, cmderr.New(cmderr.AmbiguousIndexKeyPattern, "%d indexes found for key: %s, identify by name instead.", 2, shellString(m.keyPattern))
			}
			ix = x
		}
	}
	if ix == nil {
		if m.name != "" {
			return nil, cmderr.New(cmderr.IndexNotFound, "cannot find index %s for ns %s", m.name, c.ns())
		}
		return nil, cmderr.New(cmderr.IndexNotFound, "cannot find index %s for ns %s", shellString(m.keyPattern), c.ns())
	}
	var out bson.D
	if m.hidden != nil && ix.name == "_id_" {
		return nil, cmderr.New(cmderr.BadValue, "can't hide _id index")
	}
	if m.ttl != nil {
		if ix.name == "_id_" {
			return nil, cmderr.New(cmderr.InvalidOptions, "the _id field does not support TTL indexes")
		}
		if len(ix.fields) != 1 {
			return nil, cmderr.New(cmderr.InvalidOptions, "TTL indexes are single-field indexes, compound indexes do not support TTL")
		}
		old, had := value.Get(ix.spec, "expireAfterSeconds")
		if had {
			out = append(out, bson.E{Key: "expireAfterSeconds_old", Value: old})
		}
		out = append(out, bson.E{Key: "expireAfterSeconds_new", Value: m.ttl})
		ix.ttl, ix.ttlSecs = true, m.ttlSecs
		ix.spec = replaceOptions(ix.spec, bson.D{{Key: "expireAfterSeconds", Value: m.ttl}}, "expireAfterSeconds")
	}
	if m.hidden != nil {
		out = append(out, bson.E{Key: "hidden_old", Value: ix.hidden}, bson.E{Key: "hidden_new", Value: *m.hidden})
		ix.hidden = *m.hidden
		var add bson.D
		if ix.hidden {
			add = bson.D{{Key: "hidden", Value: true}}
		}
		ix.spec = replaceOptions(ix.spec, add, "hidden")
	}
	return c.modifyUniqueness(ix, m, out)
}

// recordModify reports a collMod to streams with showExpandedEvents: its
// fields but collMod as operationDescription; as stateBeforeChange, the
// collection's options before it and, for an index change, the index's
// changed options before it (the reply's *_old fields).
func recordModify(r *request, c *collection, before, indexReply bson.D) {
	desc := bson.D{}
	for i, e := range r.cmd {
		if i > 0 && !genericFields[e.Key] {
			desc = append(desc, bson.E{Key: e.Key, Value: value.Clone(e.Value)})
		}
	}
	state := bson.D{{Key: "collectionOptions", Value: before}}
	var indexOld bson.D
	for _, e := range indexReply {
		if name, ok := strings.CutSuffix(e.Key, "_old"); ok {
			indexOld = append(indexOld, bson.E{Key: name, Value: e.Value})
		}
	}
	if indexOld != nil {
		state = append(state, bson.E{Key: "indexOptions", Value: indexOld})
	}
	c.recordExpanded(changeModify, desc, state)
}
