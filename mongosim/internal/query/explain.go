package query

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// FailureDetails explains why doc does not match the validator filter, in
// the shape mongod puts in a DocumentValidationFailure's errInfo.details
// ({operatorName, specifiedAs, reason, consideredValue...}). It is only
// called after the filter failed, so its cost is off the write path.
func FailureDetails(validator bson.D, doc bson.D) bson.D {
	if len(validator) == 1 {
		if d := clauseDetails(validator[0], doc); d != nil {
			return d
		}
	}
	var bad bson.A
	for i, e := range validator {
		if d := clauseDetails(e, doc); d != nil {
			bad = append(bad, bson.D{{Key: "index", Value: int32(i)}, {Key: "details", Value: d}})
		}
	}
	return bson.D{{Key: "operatorName", Value: "$and"}, {Key: "clausesNotSatisfied", Value: bad}}
}

// clauseDetails explains one top-level clause, or returns nil when it
// matches.
func clauseDetails(e bson.E, doc bson.D) bson.D {
	f, err := CompileFilter(bson.D{e})
	if err != nil {
		return nil
	}
	if ok, _ := f.MatchErr(doc); ok {
		return nil
	}
	switch e.Key {
	case "$jsonSchema":
		s, err := CompileSchema(e.Value)
		if err != nil {
			return nil
		}
		out := bson.D{{Key: "operatorName", Value: "$jsonSchema"}}
		if s.title != "" {
			out = append(out, bson.E{Key: "title", Value: s.title})
		}
		if s.description != "" {
			out = append(out, bson.E{Key: "description", Value: s.description})
		}
		return append(out, bson.E{Key: "schemaRulesNotSatisfied", Value: s.Check(doc)})
	case "$and", "$or", "$nor":
		var bad bson.A
		for i, x := range value.AsArray(e.Value) {
			sub, _ := x.(bson.D)
			sf, err := CompileFilter(sub)
			if err != nil {
				continue
			}
			ok, _ := sf.MatchErr(doc)
			if e.Key == "$nor" {
				if ok {
					bad = append(bad, bson.D{{Key: "index", Value: int32(i)}, {Key: "details", Value: bson.D{{Key: "operatorName", Value: "$nor"}, {Key: "reason", Value: "child expression matched"}}}})
				}
				continue
			}
			if !ok {
				bad = append(bad, bson.D{{Key: "index", Value: int32(i)}, {Key: "details", Value: FailureDetails(sub, doc)}})
			}
		}
		return bson.D{{Key: "operatorName", Value: e.Key}, {Key: "clausesNotSatisfied", Value: bad}}
	case "$expr":
		out := bson.D{{Key: "operatorName", Value: "$expr"}, {Key: "specifiedAs", Value: bson.D{e}}, {Key: "reason", Value: "expression did not match"}}
		if len(f.exprs) == 1 {
			if v, err := f.exprs[0].Eval(doc, nil); err == nil {
				out = append(out, bson.E{Key: "expressionResult", Value: v})
			}
		}
		return out
	}
	if strings.HasPrefix(e.Key, "$") {
		return bson.D{{Key: "operatorName", Value: e.Key}, {Key: "specifiedAs", Value: bson.D{e}}, {Key: "reason", Value: "expression did not match"}}
	}
	ops, isOps := isOperatorDoc(e.Value)
	if !isOps {
		ops = bson.D{{Key: "$eq", Value: e.Value}}
	}
	if len(ops) > 1 {
		var bad bson.A
		for i, op := range ops {
			if d := clauseDetails(bson.E{Key: e.Key, Value: bson.D{op}}, doc); d != nil {
				bad = append(bad, bson.D{{Key: "index", Value: int32(i)}, {Key: "details", Value: d}})
			}
		}
		if len(bad) > 0 {
			return bson.D{{Key: "operatorName", Value: "$and"}, {Key: "clausesNotSatisfied", Value: bad}}
		}
	}
	op := ops[0].Key
	out := bson.D{{Key: "operatorName", Value: op}, {Key: "specifiedAs", Value: bson.D{e}}}
	v, found := lookupPath(doc, e.Key)
	reason := "comparison failed"
	switch op {
	case "$exists":
		if found {
			return append(out, bson.E{Key: "reason", Value: "path does exist"})
		}
		return append(out, bson.E{Key: "reason", Value: "path does not exist"})
	case "$type":
		reason = "type did not match"
	case "$in":
		reason = "no matching value found in array"
	case "$nin":
		reason = "matching value found in array"
	case "$regex":
		reason = "regular expression did not match"
	case "$eq", "$ne", "$gt", "$gte", "$lt", "$lte":
	default:
		reason = "expression did not match"
	}
	if !found {
		return append(out, bson.E{Key: "reason", Value: "field was missing"})
	}
	out = append(out, bson.E{Key: "reason", Value: reason}, bson.E{Key: "consideredValue", Value: v})
	if op == "$type" {
		out = append(out, bson.E{Key: "consideredType", Value: value.TypeName(v)})
	}
	return out
}

// lookupPath follows a dotted path through embedded documents.
func lookupPath(doc bson.D, path string) (any, bool) {
	var cur any = doc
	for _, p := range strings.Split(path, ".") {
		d, ok := cur.(bson.D)
		if !ok {
			return nil, false
		}
		if cur, ok = value.Get(d, p); !ok {
			return nil, false
		}
	}
	return cur, true
}
