package query

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// UpsertSeed returns the document an upsert starts from: the filter's
// equality predicates (x: v, x: {$eq: v}, also inside $and and a one-clause
// $or), with dotted paths expanded into nested documents and _id first.
// Other operators contribute nothing. A path constrained by two equalities,
// or by equalities on both a path and its prefix, is error 54
// NotSingleValueField as on the server.
func UpsertSeed(filter bson.D) (bson.D, error) {
	var eqs []bson.E
	if err := collectEqualities(filter, &eqs); err != nil {
		return nil, err
	}
	for i := range eqs {
		for j := 0; j < i; j++ {
			a, b := eqs[i].Key, eqs[j].Key
			if a == b {
				return nil, cmderr.New(cmderr.NotSingleValueField,
					"cannot infer query fields to set, path '%s' is matched twice", a)
			}
			if strings.HasPrefix(a, b+".") || strings.HasPrefix(b, a+".") {
				return nil, cmderr.New(cmderr.NotSingleValueField,
					"cannot infer query fields to set, both paths '%s' and '%s' are matched", a, b)
			}
		}
	}
	seed := bson.D{}
	// _id first, as the server stores it.
	for _, e := range eqs {
		if e.Key == "_id" || strings.HasPrefix(e.Key, "_id.") {
			setPath(&seed, strings.Split(e.Key, "."), value.Clone(e.Value))
		}
	}
	for _, e := range eqs {
		if e.Key != "_id" && !strings.HasPrefix(e.Key, "_id.") {
			setPath(&seed, strings.Split(e.Key, "."), value.Clone(e.Value))
		}
	}
	return seed, nil
}

func collectEqualities(filter bson.D, out *[]bson.E) error {
	for _, e := range filter {
		switch e.Key {
		case "$and":
			for _, x := range value.AsArray(e.Value) {
				if d, ok := x.(bson.D); ok {
					if err := collectEqualities(d, out); err != nil {
						return err
					}
				}
			}
			continue
		case "$or":
			if arr := value.AsArray(e.Value); len(arr) == 1 {
				if d, ok := arr[0].(bson.D); ok {
					if err := collectEqualities(d, out); err != nil {
						return err
					}
				}
			}
			continue
		}
		if strings.HasPrefix(e.Key, "$") {
			continue
		}
		if d, ok := isOperatorDoc(e.Value); ok {
			for _, op := range d {
				if op.Key == "$eq" {
					if _, isRe := op.Value.(bson.Regex); !isRe {
						*out = append(*out, bson.E{Key: e.Key, Value: op.Value})
					}
				}
			}
			continue
		}
		if _, isRe := e.Value.(bson.Regex); isRe {
			continue
		}
		*out = append(*out, bson.E{Key: e.Key, Value: e.Value})
	}
	return nil
}

// setPath sets parts in doc, creating nested documents as needed. Paths are
// known not to conflict, so an existing non-document is never in the way.
func setPath(doc *bson.D, parts []string, v any) {
	for i, e := range *doc {
		if e.Key != parts[0] {
			continue
		}
		if len(parts) == 1 {
			(*doc)[i].Value = v
			return
		}
		sub, ok := e.Value.(bson.D)
		if !ok {
			sub = bson.D{}
		}
		setPath(&sub, parts[1:], v)
		(*doc)[i].Value = sub
		return
	}
	if len(parts) == 1 {
		*doc = append(*doc, bson.E{Key: parts[0], Value: v})
		return
	}
	sub := bson.D{}
	setPath(&sub, parts[1:], v)
	*doc = append(*doc, bson.E{Key: parts[0], Value: sub})
}
