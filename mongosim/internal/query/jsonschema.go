package query

import (
	"math"
	"regexp"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// Schema is a compiled $jsonSchema (MongoDB's draft-4 subset with bsonType).
// Check returns why a value fails it in the shape mongod puts in a
// DocumentValidationFailure's errInfo.details.schemaRulesNotSatisfied.
type Schema struct {
	spec        bson.D
	title       string
	description string

	bsonTypes    []string // accepted type aliases; "number" is expanded
	typeKey      string   // "bsonType" or "type", for the error detail
	typeSpec     any
	required     []string
	properties   []schemaProp
	patternProps []schemaPattern
	addlBool     *bool
	addlSchema   *Schema

	minimum, maximum                   any
	exclusiveMinimum, exclusiveMaximum bool
	multipleOf                         any
	enum                               bson.A
	pattern                            *regexp.Regexp
	patternSrc                         string
	minLength, maxLength               int64
	minItems, maxItems                 int64
	minProps, maxProps                 int64
	uniqueItems                        bool
	items                              *Schema
	itemsList                          []*Schema
	addlItemsBool                      *bool
	addlItemsSchema                    *Schema

	allOf, anyOf, oneOf []*Schema
	not                 *Schema
	dependencies        []schemaDependency
}

// schemaDependency is one entry of dependencies: when property is present,
// the properties named in required must be too (a property dependency), or
// the document must satisfy schema (a schema dependency).
type schemaDependency struct {
	property string
	required []string
	schema   *Schema
}

type schemaProp struct {
	name   string
	schema *Schema
}

type schemaPattern struct {
	re     *regexp.Regexp
	src    string
	schema *Schema
}

var jsonTypeAliases = map[string][]string{
	"object": {"object"}, "array": {"array"}, "number": {"int", "long", "double", "decimal"},
	"boolean": {"bool"}, "string": {"string"}, "null": {"null"},
}

var bsonTypeAliases = map[string]bool{
	"double": true, "string": true, "object": true, "array": true, "binData": true, "undefined": true,
	"objectId": true, "bool": true, "date": true, "null": true, "regex": true, "dbPointer": true,
	"javascript": true, "symbol": true, "javascriptWithScope": true, "int": true, "timestamp": true,
	"long": true, "decimal": true, "minKey": true, "maxKey": true,
}

// CompileSchema compiles the argument of $jsonSchema.
func CompileSchema(v any) (*Schema, error) {
	d, ok := v.(bson.D)
	if !ok {
		return nil, cmderr.New(cmderr.TypeMismatch, "$jsonSchema must be an object")
	}
	return compileSchema(d)
}

func schemaErr(format string, args ...any) error {
	return cmderr.New(cmderr.FailedToParse, format, args...)
}

func compileSchema(d bson.D) (*Schema, error) {
	s := &Schema{spec: d, minLength: -1, maxLength: -1, minItems: -1, maxItems: -1, minProps: -1, maxProps: -1}
	var hasType, hasBSONType bool
	for _, e := range d {
		switch e.Key {
		case "type":
			hasType = true
		case "bsonType":
			hasBSONType = true
		}
		if err := s.compileKeyword(e); err != nil {
			return nil, err
		}
	}
	if hasType && hasBSONType {
		return nil, schemaErr("Cannot specify both $jsonSchema keywords 'type' and 'bsonType'")
	}
	if (s.exclusiveMinimum && s.minimum == nil) || (s.exclusiveMaximum && s.maximum == nil) {
		return nil, schemaErr("$jsonSchema keyword 'exclusiveMinimum'/'exclusiveMaximum' requires its 'minimum'/'maximum'")
	}
	return s, nil
}

// compileKeyword dispatches one schema keyword to the step that parses it.
func (s *Schema) compileKeyword(e bson.E) error {
	switch e.Key {
	case "bsonType", "type":
		return s.compileType(e)
	case "required":
		return s.compileRequired(e.Value)
	case "properties", "patternProperties":
		return s.compileProperties(e)
	case "additionalProperties", "additionalItems":
		return s.compileAdditional(e)
	case "minimum", "maximum", "multipleOf":
		return s.compileNumberBound(e)
	case "exclusiveMinimum", "exclusiveMaximum", "uniqueItems":
		return s.compileBoolKeyword(e)
	case "minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties":
		return s.compileCountLimit(e)
	case "enum":
		arr, ok := e.Value.(bson.A)
		if !ok || len(arr) == 0 {
			return cmderr.New(cmderr.FailedToParse, "$jsonSchema keyword 'enum' must be a non-empty array")
		}
		s.enum = arr
	case "pattern":
		src, ok := e.Value.(string)
		if !ok {
			return cmderr.New(cmderr.TypeMismatch, "$jsonSchema keyword 'pattern' must be a string")
		}
		re, err := CompileRegex(src, "")
		if err != nil {
			return err
		}
		s.pattern, s.patternSrc = re, src
	case "items":
		return s.compileItems(e.Value)
	case "allOf", "anyOf", "oneOf":
		return s.compileCombinator(e)
	case "not":
		x, ok := e.Value.(bson.D)
		if !ok {
			return cmderr.New(cmderr.TypeMismatch, "$jsonSchema keyword 'not' must be an object")
		}
		sub, err := compileSchema(x)
		if err != nil {
			return err
		}
		s.not = sub
	case "title", "description":
		str, ok := e.Value.(string)
		if !ok {
			return cmderr.New(cmderr.TypeMismatch, "$jsonSchema keyword '%s' must be of type string", e.Key)
		}
		if e.Key == "title" {
			s.title = str
		} else {
			s.description = str
		}
	case "dependencies":
		return s.compileDependencies(e.Value)
	case "$ref", "$schema", "default", "definitions", "format", "id":
		return schemaErr("$jsonSchema keyword '%s' is not currently supported", e.Key)
	default:
		return schemaErr("Unknown $jsonSchema keyword: %s", e.Key)
	}
	return nil
}

// compileType parses type (JSON Schema names, "number" expanding to the four
// numeric BSON types) or bsonType (BSON type aliases) into s.bsonTypes.
func (s *Schema) compileType(e bson.E) error {
	names, ok := stringOrStrings(e.Value)
	if !ok || len(names) == 0 {
		return cmderr.New(cmderr.TypeMismatch, "$jsonSchema keyword '%s' must be either a string or an array of strings", e.Key)
	}
	s.typeKey, s.typeSpec = e.Key, e.Value
	for _, n := range names {
		if e.Key == "type" {
			if n == "integer" {
				return cmderr.New(cmderr.BadValue, "$jsonSchema type 'integer' is not currently supported.")
			}
			ts, ok := jsonTypeAliases[n]
			if !ok {
				return cmderr.New(cmderr.BadValue, "Unknown $jsonSchema type: %s", n)
			}
			s.bsonTypes = append(s.bsonTypes, ts...)
			continue
		}
		if n == "number" {
			s.bsonTypes = append(s.bsonTypes, jsonTypeAliases["number"]...)
			continue
		}
		if !bsonTypeAliases[n] {
			return cmderr.New(cmderr.BadValue, "Unknown type name alias: %s", n)
		}
		s.bsonTypes = append(s.bsonTypes, n)
	}
	return nil
}

func (s *Schema) compileRequired(v any) error {
	arr, ok := v.(bson.A)
	if !ok {
		return cmderr.New(cmderr.TypeMismatch, "$jsonSchema keyword 'required' must be an array, but found an element of type %s", value.TypeName(v))
	}
	if len(arr) == 0 {
		return cmderr.New(cmderr.BadValue, "$jsonSchema keyword 'required' cannot be an empty array")
	}
	for _, x := range arr {
		n, ok := x.(string)
		if !ok {
			return cmderr.New(cmderr.TypeMismatch, "$jsonSchema keyword 'required' array must only contain strings, but found an element of type %s", value.TypeName(x))
		}
		s.required = append(s.required, n)
	}
	return nil
}

// compileProperties parses properties (by name) or patternProperties (by
// regular expression on the name); both map to nested schemas.
func (s *Schema) compileProperties(e bson.E) error {
	props, ok := e.Value.(bson.D)
	if !ok {
		return cmderr.New(cmderr.TypeMismatch, "$jsonSchema keyword '%s' must be an object", e.Key)
	}
	for _, p := range props {
		pd, ok := p.Value.(bson.D)
		if !ok {
			return cmderr.New(cmderr.TypeMismatch, "Nested schema for $jsonSchema property '%s' must be an object", p.Key)
		}
		sub, err := compileSchema(pd)
		if err != nil {
			return err
		}
		if e.Key == "properties" {
			s.properties = append(s.properties, schemaProp{name: p.Key, schema: sub})
			continue
		}
		re, err := CompileRegex(p.Key, "")
		if err != nil {
			return err
		}
		s.patternProps = append(s.patternProps, schemaPattern{re: re, src: p.Key, schema: sub})
	}
	return nil
}

// compileAdditional parses additionalProperties or additionalItems, each
// either a boolean or a schema.
func (s *Schema) compileAdditional(e bson.E) error {
	var b *bool
	var sub *Schema
	switch x := e.Value.(type) {
	case bool:
		b = &x
	case bson.D:
		var err error
		if sub, err = compileSchema(x); err != nil {
			return err
		}
	default:
		return cmderr.New(cmderr.TypeMismatch, "$jsonSchema keyword '%s' must be either an object or a boolean, but got a %s", e.Key, value.TypeName(e.Value))
	}
	if e.Key == "additionalProperties" {
		s.addlBool, s.addlSchema = b, sub
	} else {
		s.addlItemsBool, s.addlItemsSchema = b, sub
	}
	return nil
}

// compileNumberBound parses minimum, maximum and multipleOf.
func (s *Schema) compileNumberBound(e bson.E) error {
	if !value.IsNumber(e.Value) {
		return cmderr.New(cmderr.TypeMismatch, "$jsonSchema keyword '%s' must be a number", e.Key)
	}
	switch e.Key {
	case "minimum":
		s.minimum = e.Value
	case "maximum":
		s.maximum = e.Value
	default:
		if f, _ := value.ToFloat(e.Value); f <= 0 {
			return cmderr.New(cmderr.FailedToParse, "$jsonSchema keyword 'multipleOf' must have a positive value")
		}
		s.multipleOf = e.Value
	}
	return nil
}

// compileBoolKeyword parses exclusiveMinimum, exclusiveMaximum and uniqueItems.
func (s *Schema) compileBoolKeyword(e bson.E) error {
	b, ok := e.Value.(bool)
	if !ok {
		return cmderr.New(cmderr.TypeMismatch, "$jsonSchema keyword '%s' must be a boolean", e.Key)
	}
	switch e.Key {
	case "exclusiveMinimum":
		s.exclusiveMinimum = b
	case "exclusiveMaximum":
		s.exclusiveMaximum = b
	default:
		s.uniqueItems = b
	}
	return nil
}

// compileCountLimit parses the length, item-count and property-count limits,
// which must be non-negative integral numbers.
func (s *Schema) compileCountLimit(e bson.E) error {
	n, ok := value.ToInt64(e.Value)
	if f, isNum := value.ToFloat(e.Value); !isNum || !ok || f != math.Trunc(f) {
		return cmderr.New(cmderr.TypeMismatch, "$jsonSchema keyword '%s' must be a representable as a long", e.Key)
	}
	if n < 0 {
		return cmderr.New(cmderr.FailedToParse, "$jsonSchema keyword '%s' must be a non-negative integral number", e.Key)
	}
	switch e.Key {
	case "minLength":
		s.minLength = n
	case "maxLength":
		s.maxLength = n
	case "minItems":
		s.minItems = n
	case "maxItems":
		s.maxItems = n
	case "minProperties":
		s.minProps = n
	default:
		s.maxProps = n
	}
	return nil
}

// compileItems parses items: one schema for every element, or a list of
// schemas matched to elements by position.
func (s *Schema) compileItems(v any) error {
	switch x := v.(type) {
	case bson.D:
		sub, err := compileSchema(x)
		if err != nil {
			return err
		}
		s.items = sub
	case bson.A:
		list, err := compileSchemaList("items", x)
		if err != nil {
			return err
		}
		s.itemsList = list
	default:
		return cmderr.New(cmderr.TypeMismatch, "$jsonSchema keyword 'items' must be an array or an object, not %s", value.TypeName(v))
	}
	return nil
}

// compileCombinator parses allOf, anyOf and oneOf.
func (s *Schema) compileCombinator(e bson.E) error {
	arr, ok := e.Value.(bson.A)
	if !ok || len(arr) == 0 {
		return cmderr.New(cmderr.FailedToParse, "$jsonSchema keyword '%s' must be a nonempty array", e.Key)
	}
	list, err := compileSchemaList(e.Key, arr)
	if err != nil {
		return err
	}
	switch e.Key {
	case "allOf":
		s.allOf = list
	case "anyOf":
		s.anyOf = list
	default:
		s.oneOf = list
	}
	return nil
}

// compileDependencies parses dependencies: each property maps to either a
// schema the whole document must satisfy or the names it requires.
func (s *Schema) compileDependencies(v any) error {
	deps, ok := v.(bson.D)
	if !ok {
		return cmderr.New(cmderr.TypeMismatch, "$jsonSchema keyword 'dependencies' must be an object")
	}
	for _, dep := range deps {
		switch x := dep.Value.(type) {
		case bson.D:
			sub, err := compileSchema(x)
			if err != nil {
				return err
			}
			s.dependencies = append(s.dependencies, schemaDependency{property: dep.Key, schema: sub})
		case bson.A:
			names, ok := stringOrStrings(x)
			if !ok || len(names) == 0 {
				return schemaErr("property '%s' in $jsonSchema keyword 'dependencies' must be a nonempty array of strings", dep.Key)
			}
			s.dependencies = append(s.dependencies, schemaDependency{property: dep.Key, required: names})
		default:
			return cmderr.New(cmderr.TypeMismatch, "property '%s' in $jsonSchema keyword 'dependencies' must be either an object or an array", dep.Key)
		}
	}
	return nil
}

func compileSchemaList(key string, arr bson.A) ([]*Schema, error) {
	out := make([]*Schema, len(arr))
	for i, x := range arr {
		d, ok := x.(bson.D)
		if !ok {
			return nil, cmderr.New(cmderr.TypeMismatch, "$jsonSchema keyword '%s' requires an array of objects, but found an element of type %s", key, value.TypeName(x))
		}
		sub, err := compileSchema(d)
		if err != nil {
			return nil, err
		}
		out[i] = sub
	}
	return out, nil
}

func stringOrStrings(v any) ([]string, bool) {
	switch x := v.(type) {
	case string:
		return []string{x}, true
	case bson.A:
		out := make([]string, 0, len(x))
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	}
	return nil, false
}

// Valid reports whether v satisfies the schema.
func (s *Schema) Valid(v any) bool { return len(s.check(v, true)) == 0 }

// Check returns the rules v does not satisfy, in mongod's errInfo shape;
// none means v is valid.
func (s *Schema) Check(v any) bson.A { return s.check(v, false) }

// check collects the failing rules; quick stops at the first.
func (s *Schema) check(v any, quick bool) bson.A {
	c := &schemaCheck{s: s, v: v, quick: quick}
	if c.checkType() || c.checkNumber() || c.checkString() || c.checkEnum() {
		return c.out
	}
	if doc, ok := v.(bson.D); ok {
		if s.checkObject(doc, quick, &c.out) && quick {
			return c.out
		}
	}
	if arr, ok := v.(bson.A); ok {
		if s.checkArray(arr, quick, &c.out) && quick {
			return c.out
		}
	}
	if c.checkAllOf() || c.checkAnyOf() || c.checkOneOf() {
		return c.out
	}
	if s.not != nil && s.not.Valid(v) {
		c.fail(bson.D{{Key: "operatorName", Value: "not"}, {Key: "reason", Value: "child expression matched"}})
	}
	return c.out
}

// schemaCheck collects the rules one value fails against one schema. Each
// step reports whether checking stops, which happens at the first failure
// when quick is set (Valid only needs a yes or no).
type schemaCheck struct {
	s     *Schema
	v     any
	quick bool
	out   bson.A
}

// fail records a failed rule and reports whether checking stops.
func (c *schemaCheck) fail(d bson.D) bool {
	c.out = append(c.out, d)
	return c.quick
}

// considered is the detail shape of a rule on the value itself.
func (c *schemaCheck) considered(op, reason string) bson.D {
	x, _ := value.Get(c.s.spec, op)
	return bson.D{{Key: "operatorName", Value: op}, {Key: "specifiedAs", Value: bson.D{{Key: op, Value: x}}}, {Key: "reason", Value: reason}, {Key: "consideredValue", Value: c.v}}
}

func (c *schemaCheck) checkType() bool {
	s := c.s
	if len(s.bsonTypes) == 0 {
		return false
	}
	t := value.TypeName(c.v)
	for _, want := range s.bsonTypes {
		if want == t {
			return false
		}
	}
	d := c.considered(s.typeKey, "type did not match")
	d = append(d, bson.E{Key: "consideredType", Value: t})
	return c.fail(d)
}

// checkNumber applies minimum, maximum and multipleOf to a number.
func (c *schemaCheck) checkNumber() bool {
	s, v := c.s, c.v
	if !value.IsNumber(v) {
		return false
	}
	if s.minimum != nil {
		cmp := value.Compare(v, s.minimum)
		if cmp < 0 || (cmp == 0 && s.exclusiveMinimum) {
			d := c.considered("minimum", "comparison failed")
			if s.exclusiveMinimum {
				d[1].Value = bson.D{{Key: "minimum", Value: s.minimum}, {Key: "exclusiveMinimum", Value: true}}
			}
			if c.fail(d) {
				return true
			}
		}
	}
	if s.maximum != nil {
		cmp := value.Compare(v, s.maximum)
		if cmp > 0 || (cmp == 0 && s.exclusiveMaximum) {
			d := c.considered("maximum", "comparison failed")
			if s.exclusiveMaximum {
				d[1].Value = bson.D{{Key: "maximum", Value: s.maximum}, {Key: "exclusiveMaximum", Value: true}}
			}
			if c.fail(d) {
				return true
			}
		}
	}
	if s.multipleOf != nil {
		x, _ := value.ToFloat(v)
		m, _ := value.ToFloat(s.multipleOf)
		if r := math.Mod(x, m); r != 0 || math.IsNaN(r) {
			return c.fail(c.considered("multipleOf", "considered value is not a multiple of the specified value"))
		}
	}
	return false
}

// checkString applies minLength, maxLength (in code points) and pattern.
func (c *schemaCheck) checkString() bool {
	s := c.s
	str, ok := c.v.(string)
	if !ok {
		return false
	}
	n := int64(utf8.RuneCountInString(str))
	if s.minLength >= 0 && n < s.minLength {
		if c.fail(c.considered("minLength", "specified string length was not satisfied")) {
			return true
		}
	}
	if s.maxLength >= 0 && n > s.maxLength {
		if c.fail(c.considered("maxLength", "specified string length was not satisfied")) {
			return true
		}
	}
	if s.pattern != nil && !s.pattern.MatchString(str) {
		return c.fail(c.considered("pattern", "regular expression did not match"))
	}
	return false
}

// checkEnum matches the value against enum by type and value, so 1 and
// true, or 1 and "1", stay distinct.
func (c *schemaCheck) checkEnum() bool {
	if c.s.enum == nil {
		return false
	}
	for _, e := range c.s.enum {
		if value.TypeOrder(e) == value.TypeOrder(c.v) && value.Compare(e, c.v) == 0 {
			return false
		}
	}
	return c.fail(c.considered("enum", "value was not found in enum"))
}

func (c *schemaCheck) checkAllOf() bool {
	if len(c.s.allOf) == 0 {
		return false
	}
	var failed bson.A
	for i, sub := range c.s.allOf {
		if d := sub.check(c.v, c.quick); len(d) > 0 {
			failed = append(failed, bson.D{{Key: "index", Value: int32(i)}, {Key: "details", Value: d}})
		}
	}
	return len(failed) > 0 && c.fail(bson.D{{Key: "operatorName", Value: "allOf"}, {Key: "schemasNotSatisfied", Value: failed}})
}

func (c *schemaCheck) checkAnyOf() bool {
	if len(c.s.anyOf) == 0 {
		return false
	}
	var failed bson.A
	for i, sub := range c.s.anyOf {
		d := sub.check(c.v, c.quick)
		if len(d) == 0 {
			return false
		}
		failed = append(failed, bson.D{{Key: "index", Value: int32(i)}, {Key: "details", Value: d}})
	}
	return len(failed) > 0 && c.fail(bson.D{{Key: "operatorName", Value: "anyOf"}, {Key: "schemasNotSatisfied", Value: failed}})
}

// checkOneOf fails when no subschema matches, and also when more than one does.
func (c *schemaCheck) checkOneOf() bool {
	if len(c.s.oneOf) == 0 {
		return false
	}
	var failed, matched bson.A
	for i, sub := range c.s.oneOf {
		if d := sub.check(c.v, c.quick); len(d) > 0 {
			failed = append(failed, bson.D{{Key: "index", Value: int32(i)}, {Key: "details", Value: d}})
		} else {
			matched = append(matched, int32(i))
		}
	}
	switch {
	case len(matched) > 1:
		return c.fail(bson.D{{Key: "operatorName", Value: "oneOf"}, {Key: "reason", Value: "more than one subschema matched"}, {Key: "matchingSchemaIndexes", Value: matched}})
	case len(matched) == 0:
		return c.fail(bson.D{{Key: "operatorName", Value: "oneOf"}, {Key: "schemasNotSatisfied", Value: failed}})
	}
	return false
}

// checkObject applies the object keywords; it reports whether one failed.
func (s *Schema) checkObject(doc bson.D, quick bool, out *bson.A) bool {
	failed := false
	stop := func(stepFailed bool) bool {
		failed = failed || stepFailed
		return stepFailed && quick
	}
	if stop(s.checkProperties(doc, quick, out)) || stop(s.checkRequired(doc, out)) || stop(s.checkDependencies(doc, quick, out)) ||
		stop(s.checkPropertyCount(doc, out)) || stop(s.checkAdditionalProperties(doc, quick, out)) {
		return true
	}
	return failed
}

// checkProperties checks each named property that is present against its
// schema; it reports whether one failed, as do the other object steps.
func (s *Schema) checkProperties(doc bson.D, quick bool, out *bson.A) bool {
	if len(s.properties) == 0 {
		return false
	}
	var bad bson.A
	for _, p := range s.properties {
		pv, ok := value.Get(doc, p.name)
		if !ok {
			continue
		}
		if d := p.schema.check(pv, quick); len(d) > 0 {
			entry := bson.D{{Key: "propertyName", Value: p.name}}
			if p.schema.title != "" {
				entry = append(entry, bson.E{Key: "title", Value: p.schema.title})
			}
			if p.schema.description != "" {
				entry = append(entry, bson.E{Key: "description", Value: p.schema.description})
			}
			bad = append(bad, append(entry, bson.E{Key: "details", Value: d}))
			if quick {
				break
			}
		}
	}
	if len(bad) == 0 {
		return false
	}
	*out = append(*out, bson.D{{Key: "operatorName", Value: "properties"}, {Key: "propertiesNotSatisfied", Value: bad}})
	return true
}

func (s *Schema) checkRequired(doc bson.D, out *bson.A) bool {
	var missing bson.A
	for _, n := range s.required {
		if _, ok := value.Get(doc, n); !ok {
			missing = append(missing, n)
		}
	}
	if len(missing) == 0 {
		return false
	}
	req, _ := value.Get(s.spec, "required")
	*out = append(*out, bson.D{{Key: "operatorName", Value: "required"}, {Key: "specifiedAs", Value: bson.D{{Key: "required", Value: req}}}, {Key: "missingProperties", Value: missing}})
	return true
}

func (s *Schema) checkDependencies(doc bson.D, quick bool, out *bson.A) bool {
	var bad bson.A
	for _, dep := range s.dependencies {
		if _, ok := value.Get(doc, dep.property); !ok {
			continue
		}
		entry := bson.D{{Key: "conditionalProperty", Value: dep.property}}
		if dep.schema != nil {
			if d := dep.schema.check(doc, quick); len(d) > 0 {
				bad = append(bad, append(entry, bson.E{Key: "details", Value: d}))
			}
			continue
		}
		var missing bson.A
		for _, n := range dep.required {
			if _, ok := value.Get(doc, n); !ok {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			bad = append(bad, append(entry, bson.E{Key: "missingProperties", Value: missing}))
		}
	}
	if len(bad) == 0 {
		return false
	}
	*out = append(*out, bson.D{{Key: "operatorName", Value: "dependencies"}, {Key: "failingDependencies", Value: bad}})
	return true
}

func (s *Schema) checkPropertyCount(doc bson.D, out *bson.A) bool {
	n := int64(len(doc))
	if (s.minProps < 0 || n >= s.minProps) && (s.maxProps < 0 || n <= s.maxProps) {
		return false
	}
	op := "minProperties"
	if s.maxProps >= 0 && n > s.maxProps {
		op = "maxProperties"
	}
	x, _ := value.Get(s.spec, op)
	*out = append(*out, bson.D{{Key: "operatorName", Value: op}, {Key: "specifiedAs", Value: bson.D{{Key: op, Value: x}}},
		{Key: "reason", Value: "specified number of properties was not satisfied"}, {Key: "numberOfProperties", Value: int32(n)}})
	return true
}

// checkAdditionalProperties applies patternProperties to every field whose
// name matches, then additionalProperties to the fields neither named in
// properties nor matched by a pattern.
func (s *Schema) checkAdditionalProperties(doc bson.D, quick bool, out *bson.A) bool {
	if len(s.patternProps) == 0 && s.addlBool == nil && s.addlSchema == nil {
		return false
	}
	failed := false
	add := func(d bson.D) { *out = append(*out, d); failed = true }
	var extra bson.A
	for _, e := range doc {
		named := s.hasProperty(e.Key)
		for _, pp := range s.patternProps {
			if !pp.re.MatchString(e.Key) {
				continue
			}
			named = true
			if d := pp.schema.check(e.Value, quick); len(d) > 0 {
				add(bson.D{{Key: "operatorName", Value: "patternProperties"}, {Key: "details", Value: bson.A{bson.D{
					{Key: "propertyName", Value: e.Key}, {Key: "regexMatched", Value: pp.src}, {Key: "details", Value: d}}}}})
				if quick {
					return true
				}
			}
		}
		if named {
			continue
		}
		if s.addlBool != nil && !*s.addlBool {
			extra = append(extra, e.Key)
		} else if s.addlSchema != nil {
			if d := s.addlSchema.check(e.Value, quick); len(d) > 0 {
				add(bson.D{{Key: "operatorName", Value: "additionalProperties"},
					{Key: "reason", Value: "at least one additional property did not match the subschema"},
					{Key: "failingProperty", Value: e.Key}, {Key: "details", Value: d}})
				if quick {
					return true
				}
			}
		}
	}
	if len(extra) > 0 {
		add(bson.D{{Key: "operatorName", Value: "additionalProperties"}, {Key: "specifiedAs", Value: bson.D{{Key: "additionalProperties", Value: false}}}, {Key: "additionalProperties", Value: extra}})
	}
	return failed
}

// hasProperty reports whether properties names the field.
func (s *Schema) hasProperty(name string) bool {
	for _, p := range s.properties {
		if p.name == name {
			return true
		}
	}
	return false
}

// checkArray applies the array keywords; it reports whether one failed.
func (s *Schema) checkArray(arr bson.A, quick bool, out *bson.A) bool {
	failed := false
	add := func(d bson.D) { *out = append(*out, d); failed = true }
	n := int64(len(arr))
	for _, op := range []string{"minItems", "maxItems"} {
		lim := s.minItems
		bad := lim >= 0 && n < lim
		if op == "maxItems" {
			lim = s.maxItems
			bad = lim >= 0 && n > lim
		}
		if bad {
			add(bson.D{{Key: "operatorName", Value: op}, {Key: "specifiedAs", Value: bson.D{{Key: op, Value: mustGet(s.spec, op)}}},
				{Key: "reason", Value: "array did not match specified length"}, {Key: "consideredValue", Value: arr}, {Key: "numberOfItems", Value: int32(len(arr))}})
			if quick {
				return true
			}
		}
	}
	if s.uniqueItems {
		for i := 1; i < len(arr); i++ {
			dup := false
			for j := 0; j < i; j++ {
				if value.TypeOrder(arr[i]) == value.TypeOrder(arr[j]) && value.Compare(arr[i], arr[j]) == 0 {
					dup = true
					break
				}
			}
			if dup {
				add(bson.D{{Key: "operatorName", Value: "uniqueItems"}, {Key: "specifiedAs", Value: bson.D{{Key: "uniqueItems", Value: true}}},
					{Key: "reason", Value: "found a duplicate item"}, {Key: "consideredValue", Value: arr}, {Key: "duplicatedValue", Value: arr[i]}})
				if quick {
					return true
				}
				break
			}
		}
	}
	if s.items != nil {
		for i, x := range arr {
			if d := s.items.check(x, quick); len(d) > 0 {
				add(bson.D{{Key: "operatorName", Value: "items"}, {Key: "reason", Value: "At least one item did not match the sub-schema"},
					{Key: "itemIndex", Value: int32(i)}, {Key: "details", Value: d}})
				return true
			}
		}
	}
	if s.itemsList != nil {
		for i, x := range arr {
			if i < len(s.itemsList) {
				if d := s.itemsList[i].check(x, quick); len(d) > 0 {
					add(bson.D{{Key: "operatorName", Value: "items"}, {Key: "details", Value: bson.A{bson.D{{Key: "itemIndex", Value: int32(i)}, {Key: "details", Value: d}}}}})
					return true
				}
				continue
			}
			if s.addlItemsBool != nil && !*s.addlItemsBool {
				add(bson.D{{Key: "operatorName", Value: "additionalItems"}, {Key: "specifiedAs", Value: bson.D{{Key: "additionalItems", Value: false}}},
					{Key: "reason", Value: "found additional items"}, {Key: "additionalItems", Value: arr[len(s.itemsList):]}})
				return true
			}
			if s.addlItemsSchema != nil {
				if d := s.addlItemsSchema.check(x, quick); len(d) > 0 {
					add(bson.D{{Key: "operatorName", Value: "additionalItems"}, {Key: "reason", Value: "At least one additional item did not match the sub-schema"},
						{Key: "itemIndex", Value: int32(i)}, {Key: "details", Value: d}})
					return true
				}
			}
		}
	}
	return failed
}

func mustGet(d bson.D, k string) any {
	v, _ := value.Get(d, k)
	return v
}

// schemaNode is a top-level $jsonSchema in a filter.
type schemaNode struct{ s *Schema }

func (n schemaNode) match(v any, _ *int) bool {
	d, ok := v.(bson.D)
	return ok && n.s.Valid(d)
}

func (n schemaNode) matchDoc(d bson.D, _ *int) bool { return n.s.Valid(d) }

// TopLevelSchema reports the schema's title and description, which mongod
// repeats at the top of a $jsonSchema validation failure.
func (s *Schema) TopLevelSchema() (title, description string) { return s.title, s.description }
