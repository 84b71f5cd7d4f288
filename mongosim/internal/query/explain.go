package query

import (
	"sort"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// FailureDetails explains why doc does not match the validator filter, in
// the shape mongod puts in a DocumentValidationFailure's errInfo.details
// ({operatorName, specifiedAs, reason, consideredValue...}). It is only
// called after the filter failed, so its cost is off the write path.
func FailureDetails(validator bson.D, doc bson.D) bson.D {
	clauses := flatten(validator)
	if len(clauses) == 1 {
		if d := clauseDetails(clauses[0], doc, false); d != nil {
			return d
		}
	}
	return bson.D{{Key: "operatorName", Value: "$and"}, {Key: "clausesNotSatisfied", Value: failingClauses(clauses, doc, false)}}
}

// flatten splits a filter into the clauses of mongod's implicit $and: one
// per top-level operator and one per operator of a field's operator object
// ({a: {$gt: 1, $lt: 5}} is two clauses).
func flatten(filter bson.D) []bson.E {
	var out []bson.E
	for _, e := range filter {
		ops, isOps := isOperatorDoc(e.Value)
		if strings.HasPrefix(e.Key, "$") || !isOps || len(ops) == 1 {
			out = append(out, e)
			continue
		}
		var regex bson.D
		for _, op := range ops {
			switch op.Key {
			case "$regex", "$options":
				regex = append(regex, op)
				continue
			}
			out = append(out, bson.E{Key: e.Key, Value: bson.D{op}})
		}
		if regex != nil {
			out = append(out, bson.E{Key: e.Key, Value: regex})
		}
	}
	return out
}

// failingClauses lists {index, details} for each clause that fails (or,
// inverted, that matches).
func failingClauses(clauses []bson.E, doc bson.D, inverted bool) bson.A {
	out := bson.A{}
	for i, c := range clauses {
		if d := clauseDetails(c, doc, inverted); d != nil {
			out = append(out, bson.D{{Key: "index", Value: int32(i)}, {Key: "details", Value: d}})
		}
	}
	return out
}

// reasons maps each normal reason to its inverted form (for clauses under
// $nor and $not, which fail by matching).
var inverted = map[string]string{
	"comparison failed":                           "comparison succeeded",
	"type did not match":                          "type did match",
	"no matching value found in array":            "matching value found in array",
	"regular expression did not match":            "regular expression did match",
	"expression did not match":                    "expression did match",
	"path does not exist":                         "path does exist",
	"array length was not equal to given size":    "array length was equal to given size",
	"array did not satisfy the child predicate":   "array did satisfy the child predicate",
	"$mod did not evaluate to expected remainder": "$mod did evaluate to expected remainder",
	"array did not contain all specified values":  "array did contain all specified values",
}

// clauseDetails explains one clause, or returns nil when it does not
// contribute (it matches, or, inverted, it does not).
func clauseDetails(e bson.E, doc bson.D, inv bool) bson.D {
	f, err := CompileFilter(bson.D{e})
	if err != nil {
		return nil
	}
	if ok, _ := f.MatchErr(doc); ok != inv {
		return nil
	}
	switch e.Key {
	case "$jsonSchema":
		return schemaClauseDetails(e, doc, inv)
	case "$and", "$or", "$nor":
		return logicalClauseDetails(e, doc, inv)
	case "$expr":
		out := bson.D{{Key: "operatorName", Value: "$expr"}, {Key: "specifiedAs", Value: bson.D{e}}}
		if len(f.exprs) == 1 {
			if v, err := f.exprs[0].Eval(doc, nil); err == nil {
				return append(out, bson.E{Key: "reason", Value: invertedReason("expression did not match", inv)}, bson.E{Key: "expressionResult", Value: v})
			}
		}
		return append(out, bson.E{Key: "reason", Value: "failed to evaluate aggregation expression"})
	case "$alwaysFalse", "$alwaysTrue":
		r := "expression always evaluates to false"
		if inv {
			r = "expression always evaluates to true"
		}
		return bson.D{{Key: "operatorName", Value: e.Key}, {Key: "specifiedAs", Value: bson.D{e}}, {Key: "reason", Value: r}}
	}
	if strings.HasPrefix(e.Key, "$") {
		return bson.D{{Key: "operatorName", Value: e.Key}, {Key: "specifiedAs", Value: bson.D{e}}, {Key: "reason", Value: invertedReason("expression did not match", inv)}}
	}
	return fieldClauseDetails(e, doc, inv)
}

// invertedReason is the reason for a clause that failed, or under an odd
// number of $nor/$not, the reason for one that matched.
func invertedReason(normal string, inv bool) string {
	if inv {
		if r, ok := inverted[normal]; ok {
			return r
		}
	}
	return normal
}

func schemaClauseDetails(e bson.E, doc bson.D, inv bool) bson.D {
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
	if inv {
		return append(out, bson.E{Key: "reason", Value: "schema matched"})
	}
	return append(out, bson.E{Key: "schemaRulesNotSatisfied", Value: s.Check(doc)})
}

// logicalClauseDetails explains $and, $or and $nor by their contributing
// children; $nor explains its children inverted.
func logicalClauseDetails(e bson.E, doc bson.D, inv bool) bson.D {
	childInv := inv
	if e.Key == "$nor" {
		childInv = !inv
	}
	key := "clausesNotSatisfied"
	if inv {
		key = "clausesSatisfied"
	}
	var list bson.A
	for i, x := range value.AsArray(e.Value) {
		sub, _ := x.(bson.D)
		if d := subFilterDetails(sub, doc, childInv); d != nil {
			list = append(list, bson.D{{Key: "index", Value: int32(i)}, {Key: "details", Value: d}})
		}
	}
	if list == nil {
		list = bson.A{}
	}
	return bson.D{{Key: "operatorName", Value: e.Key}, {Key: key, Value: list}}
}

// fieldClauseDetails explains a clause on a field path: its first operator
// (implicitly $eq), with the values considered at the path.
func fieldClauseDetails(e bson.E, doc bson.D, inv bool) bson.D {
	ops, isOps := isOperatorDoc(e.Value)
	if !isOps {
		ops = bson.D{{Key: "$eq", Value: e.Value}}
	}
	op := ops[0].Key
	if op == "$options" && len(ops) > 1 {
		op = ops[1].Key
	}
	if op == "$not" {
		return notClauseDetails(e.Key, ops[0].Value, doc, inv)
	}
	out := bson.D{{Key: "operatorName", Value: op}, {Key: "specifiedAs", Value: bson.D{e}}}
	found, values := consideredValues(doc, e.Key, op)
	if op == "$exists" {
		if found {
			return append(out, bson.E{Key: "reason", Value: "path does exist"})
		}
		return append(out, bson.E{Key: "reason", Value: "path does not exist"})
	}
	if !found {
		return append(out, bson.E{Key: "reason", Value: "field was missing"})
	}
	normal, expected := operatorFailure(op)
	if expected != nil && !anyTypeIn(values, expected) {
		out = append(out, bson.E{Key: "reason", Value: "type did not match"})
		out = appendConsideredTypes(out, values)
		if len(expected) == 1 {
			out = append(out, bson.E{Key: "expectedType", Value: expected[0]})
		} else {
			out = append(out, bson.E{Key: "expectedTypes", Value: toArray(expected)})
		}
		return appendConsideredValues(out, values)
	}
	out = append(out, bson.E{Key: "reason", Value: invertedReason(normal, inv)})
	out = appendConsideredValues(out, values)
	if op == "$type" {
		out = appendConsideredTypes(out, values)
	}
	return out
}

// notClauseDetails explains {path: {$not: ...}} by its child, inverted.
func notClauseDetails(path string, arg any, doc bson.D, inv bool) bson.D {
	var child bson.E
	switch x := arg.(type) {
	case bson.D:
		child = bson.E{Key: path, Value: x}
	case bson.Regex:
		child = bson.E{Key: path, Value: bson.D{{Key: "$regex", Value: x}}}
	}
	out := bson.D{{Key: "operatorName", Value: "$not"}}
	if d := subFilterDetails(flattenOne(child), doc, !inv); d != nil {
		out = append(out, bson.E{Key: "details", Value: d})
	}
	return out
}

// operatorFailure is why a field operator failed, and the types it
// applies to (nil: any), which give a type-mismatch reason instead.
func operatorFailure(op string) (normal string, expected []string) {
	switch op {
	case "$eq", "$gt", "$gte", "$lt", "$lte":
		return "comparison failed", nil
	case "$ne":
		return "comparison succeeded", nil
	case "$type":
		return "type did not match", nil
	case "$in":
		return "no matching value found in array", nil
	case "$nin":
		return "matching value found in array", nil
	case "$regex":
		return "regular expression did not match", []string{"regex", "string", "symbol"}
	case "$mod":
		return "$mod did not evaluate to expected remainder", []string{"decimal", "double", "int", "long"}
	case "$size":
		return "array length was not equal to given size", []string{"array"}
	case "$elemMatch":
		return "array did not satisfy the child predicate", []string{"array"}
	case "$all":
		return "array did not contain all specified values", nil
	}
	return "expression did not match", nil
}

// subFilterDetails explains a whole sub-filter (an $and/$or/$nor entry).
func subFilterDetails(sub bson.D, doc bson.D, inv bool) bson.D {
	clauses := flatten(sub)
	if len(clauses) == 1 {
		return clauseDetails(clauses[0], doc, inv)
	}
	key := "clausesNotSatisfied"
	if inv {
		key = "clausesSatisfied"
	}
	list := failingClauses(clauses, doc, inv)
	if len(list) == 0 {
		return nil
	}
	return bson.D{{Key: "operatorName", Value: "$and"}, {Key: key, Value: list}}
}

func flattenOne(e bson.E) bson.D { return bson.D{e} }

// consideredValues lists the values a predicate on path saw in doc:
// through arrays along the path and, except for array operators, the
// elements of an array at its end (mongod omits the array itself).
func consideredValues(doc bson.D, path string, op string) (bool, []any) {
	keepArray := op == "$size" || op == "$elemMatch" || op == "$all"
	var out []any
	found := false
	var walk func(v any, parts []string)
	walk = func(v any, parts []string) {
		if len(parts) == 0 {
			found = true
			if a, ok := v.(bson.A); ok && !keepArray {
				out = append(out, a...)
				return
			}
			out = append(out, v)
			return
		}
		switch x := v.(type) {
		case bson.D:
			if next, ok := value.Get(x, parts[0]); ok {
				walk(next, parts[1:])
			}
		case bson.A:
			for _, el := range x {
				if _, isDoc := el.(bson.D); isDoc {
					walk(el, parts)
				}
			}
		}
	}
	walk(doc, strings.Split(path, "."))
	return found, out
}

func appendConsideredValues(out bson.D, values []any) bson.D {
	switch len(values) {
	case 0:
		return out
	case 1:
		return append(out, bson.E{Key: "consideredValue", Value: values[0]})
	}
	return append(out, bson.E{Key: "consideredValues", Value: bson.A(values)})
}

func appendConsideredTypes(out bson.D, values []any) bson.D {
	set := map[string]bool{}
	for _, v := range values {
		set[value.TypeName(v)] = true
	}
	switch len(set) {
	case 0:
		return out
	case 1:
		for t := range set {
			return append(out, bson.E{Key: "consideredType", Value: t})
		}
	}
	names := make([]string, 0, len(set))
	for t := range set {
		names = append(names, t)
	}
	sort.Strings(names)
	return append(out, bson.E{Key: "consideredTypes", Value: toArray(names)})
}

func anyTypeIn(values []any, types []string) bool {
	for _, v := range values {
		for _, t := range types {
			if value.TypeName(v) == t {
				return true
			}
		}
	}
	return false
}

func toArray(s []string) bson.A {
	out := make(bson.A, len(s))
	for i, x := range s {
		out[i] = x
	}
	return out
}
