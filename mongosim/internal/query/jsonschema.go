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
		case "bsonType", "type":
			if e.Key == "type" {
				hasType = true
			} else {
				hasBSONType = true
			}
			names, ok := stringOrStrings(e.Value)
			if !ok || len(names) == 0 {
				return nil, cmderr.New(cmderr.TypeMismatch, "$jsonSchema keyword '%s' must be either a string or an array of strings", e.Key)
			}
			s.typeKey, s.typeSpec = e.Key, e.Value
			for _, n := range names {
				if e.Key == "type" {
					if n == "integer" {
						return nil, cmderr.New(cmderr.BadValue, "$jsonSchema type 'integer' is not currently supported.")
					}
					ts, ok := jsonTypeAliases[n]
					if !ok {
						return nil, cmderr.New(cmderr.BadValue, "Unknown $jsonSchema type: %s", n)
					}
					s.bsonTypes = append(s.bsonTypes, ts...)
					continue
				}
				if n == "number" {
					s.bsonTypes = append(s.bsonTypes, jsonTypeAliases["number"]...)
					continue
				}
				if !bsonTypeAliases[n] {
					return nil, cmderr.New(cmderr.BadValue, "Unknown type name alias: %s", n)
				}
				s.bsonTypes = append(s.bsonTypes, n)
			}
		case "required":
			arr, ok := e.Value.(bson.A)
			if !ok {
				return nil, cmderr.New(cmderr.TypeMismatch, "$jsonSchema keyword 'required' must be an array, but found an element of type %s", value.TypeName(e.Value))
			}
			if len(arr) == 0 {
				return nil, cmderr.New(cmderr.BadValue, "$jsonSchema keyword 'required' cannot be an empty array")
			}
			for _, x := range arr {
				n, ok := x.(string)
				if !ok {
					return nil, cmderr.New(cmderr.TypeMismatch, "$jsonSchema keyword 'required' array must only contain strings, but found an element of type %s", value.TypeName(x))
				}
				s.required = append(s.required, n)
			}
		case "properties", "patternProperties":
			props, ok := e.Value.(bson.D)
			if !ok {
				return nil, cmderr.New(cmderr.TypeMismatch, "$jsonSchema keyword '%s' must be an object", e.Key)
			}
			for _, p := range props {
				pd, ok := p.Value.(bson.D)
				if !ok {
					return nil, cmderr.New(cmderr.TypeMismatch, "Nested schema for $jsonSchema property '%s' must be an object", p.Key)
				}
				sub, err := compileSchema(pd)
				if err != nil {
					return nil, err
				}
				if e.Key == "properties" {
					s.properties = append(s.properties, schemaProp{name: p.Key, schema: sub})
					continue
				}
				re, err := CompileRegex(p.Key, "")
				if err != nil {
					return nil, err
				}
				s.patternProps = append(s.patternProps, schemaPattern{re: re, src: p.Key, schema: sub})
			}
		case "additionalProperties", "additionalItems":
			var b *bool
			var sub *Schema
			switch x := e.Value.(type) {
			case bool:
				b = &x
			case bson.D:
				var err error
				if sub, err = compileSchema(x); err != nil {
					return nil, err
				}
			default:
				return nil, cmderr.New(cmderr.TypeMismatch, "$jsonSchema keyword '%s' must be either an object or a boolean, but got a %s", e.Key, value.TypeName(e.Value))
			}
			if e.Key == "additionalProperties" {
				s.addlBool, s.addlSchema = b, sub
			} else {
				s.addlItemsBool, s.addlItemsSchema = b, sub
			}
		case "minimum", "maximum", "multipleOf":
			if !value.IsNumber(e.Value) {
				return nil, cmderr.New(cmderr.TypeMismatch, "$jsonSchema keyword '%s' must be a number", e.Key)
			}
			switch e.Key {
			case "minimum":
				s.minimum = e.Value
			case "maximum":
				s.maximum = e.Value
			default:
				if f, _ := value.ToFloat(e.Value); f <= 0 {
					return nil, cmderr.New(cmderr.FailedToParse, "$jsonSchema keyword 'multipleOf' must have a positive value")
				}
				s.multipleOf = e.Value
			}
		case "exclusiveMinimum", "exclusiveMaximum", "uniqueItems":
			b, ok := e.Value.(bool)
			if !ok {
				return nil, cmderr.New(cmderr.TypeMismatch, "$jsonSchema keyword '%s' must be a boolean", e.Key)
			}
			switch e.Key {
			case "exclusiveMinimum":
				s.exclusiveMinimum = b
			case "exclusiveMaximum":
				s.exclusiveMaximum = b
			default:
				s.uniqueItems = b
			}
		case "minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties":
			n, ok := value.ToInt64(e.Value)
			if f, isNum := value.ToFloat(e.Value); !isNum || !ok || f != math.Trunc(f) {
				return nil, cmderr.New(cmderr.TypeMismatch, "$jsonSchema keyword '%s' must be a representable as a long", e.Key)
			}
			if n < 0 {
				return nil, cmderr.New(cmderr.FailedToParse, "$jsonSchema keyword '%s' must be a non-negative integral number", e.Key)
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
		case "enum":
			arr, ok := e.Value.(bson.A)
			if !ok || len(arr) == 0 {
				return nil, cmderr.New(cmderr.FailedToParse, "$jsonSchema keyword 'enum' must be a non-empty array")
			}
			s.enum = arr
		case "pattern":
			src, ok := e.Value.(string)
			if !ok {
				return nil, cmderr.New(cmderr.TypeMismatch, "$jsonSchema keyword 'pattern' must be a string")
			}
			re, err := CompileRegex(src, "")
			if err != nil {
				return nil, err
			}
			s.pattern, s.patternSrc = re, src
		case "items":
			switch x := e.Value.(type) {
			case bson.D:
				sub, err := compileSchema(x)
				if err != nil {
					return nil, err
				}
				s.items = sub
			case bson.A:
				list, err := compileSchemaList("items", x)
				if err != nil {
					return nil, err
				}
				s.itemsList = list
			default:
				return nil, cmderr.New(cmderr.TypeMismatch, "$jsonSchema keyword 'items' must be an array or an object, not %s", value.TypeName(e.Value))
			}
		case "allOf", "anyOf", "oneOf":
			arr, ok := e.Value.(bson.A)
			if !ok || len(arr) == 0 {
				return nil, cmderr.New(cmderr.FailedToParse, "$jsonSchema keyword '%s' must be a nonempty array", e.Key)
			}
			list, err := compileSchemaList(e.Key, arr)
			if err != nil {
				return nil, err
			}
			switch e.Key {
			case "allOf":
				s.allOf = list
			case "anyOf":
				s.anyOf = list
			default:
				s.oneOf = list
			}
		case "not":
			x, ok := e.Value.(bson.D)
			if !ok {
				return nil, cmderr.New(cmderr.TypeMismatch, "$jsonSchema keyword 'not' must be an object")
			}
			sub, err := compileSchema(x)
			if err != nil {
				return nil, err
			}
			s.not = sub
		case "title", "description":
			str, ok := e.Value.(string)
			if !ok {
				return nil, cmderr.New(cmderr.TypeMismatch, "$jsonSchema keyword '%s' must be of type string", e.Key)
			}
			if e.Key == "title" {
				s.title = str
			} else {
				s.description = str
			}
		case "dependencies":
			deps, ok := e.Value.(bson.D)
			if !ok {
				return nil, cmderr.New(cmderr.TypeMismatch, "$jsonSchema keyword 'dependencies' must be an object")
			}
			for _, dep := range deps {
				switch x := dep.Value.(type) {
				case bson.D:
					sub, err := compileSchema(x)
					if err != nil {
						return nil, err
					}
					s.dependencies = append(s.dependencies, schemaDependency{property: dep.Key, schema: sub})
				case bson.A:
					names, ok := stringOrStrings(x)
					if !ok || len(names) == 0 {
						return nil, schemaErr("property '%s' in $jsonSchema keyword 'dependencies' must be a nonempty array of strings", dep.Key)
					}
					s.dependencies = append(s.dependencies, schemaDependency{property: dep.Key, required: names})
				default:
					return nil, cmderr.New(cmderr.TypeMismatch, "property '%s' in $jsonSchema keyword 'dependencies' must be either an object or an array", dep.Key)
				}
			}
		case "$ref", "$schema", "default", "definitions", "format", "id":
			return nil, schemaErr("$jsonSchema keyword '%s' is not currently supported", e.Key)
		default:
			return nil, schemaErr("Unknown $jsonSchema keyword: %s", e.Key)
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
	var out bson.A
	fail := func(d bson.D) bool {
		out = append(out, d)
		return quick
	}
	spec := func(key string) bson.D {
		x, _ := value.Get(s.spec, key)
		return bson.D{{Key: key, Value: x}}
	}
	considered := func(op, reason string) bson.D {
		return bson.D{{Key: "operatorName", Value: op}, {Key: "specifiedAs", Value: spec(op)}, {Key: "reason", Value: reason}, {Key: "consideredValue", Value: v}}
	}
	if len(s.bsonTypes) > 0 {
		t := value.TypeName(v)
		ok := false
		for _, want := range s.bsonTypes {
			if want == t {
				ok = true
				break
			}
		}
		if !ok {
			d := considered(s.typeKey, "type did not match")
			d = append(d, bson.E{Key: "consideredType", Value: t})
			if fail(d) {
				return out
			}
		}
	}
	if value.IsNumber(v) {
		if s.minimum != nil {
			c := value.Compare(v, s.minimum)
			if c < 0 || (c == 0 && s.exclusiveMinimum) {
				d := considered("minimum", "comparison failed")
				if s.exclusiveMinimum {
					d[1].Value = bson.D{{Key: "minimum", Value: s.minimum}, {Key: "exclusiveMinimum", Value: true}}
				}
				if fail(d) {
					return out
				}
			}
		}
		if s.maximum != nil {
			c := value.Compare(v, s.maximum)
			if c > 0 || (c == 0 && s.exclusiveMaximum) {
				d := considered("maximum", "comparison failed")
				if s.exclusiveMaximum {
					d[1].Value = bson.D{{Key: "maximum", Value: s.maximum}, {Key: "exclusiveMaximum", Value: true}}
				}
				if fail(d) {
					return out
				}
			}
		}
		if s.multipleOf != nil {
			x, _ := value.ToFloat(v)
			m, _ := value.ToFloat(s.multipleOf)
			if r := math.Mod(x, m); r != 0 || math.IsNaN(r) {
				if fail(considered("multipleOf", "considered value is not a multiple of the specified value")) {
					return out
				}
			}
		}
	}
	if str, ok := v.(string); ok {
		n := int64(utf8.RuneCountInString(str))
		if s.minLength >= 0 && n < s.minLength {
			if fail(considered("minLength", "specified string length was not satisfied")) {
				return out
			}
		}
		if s.maxLength >= 0 && n > s.maxLength {
			if fail(considered("maxLength", "specified string length was not satisfied")) {
				return out
			}
		}
		if s.pattern != nil && !s.pattern.MatchString(str) {
			if fail(considered("pattern", "regular expression did not match")) {
				return out
			}
		}
	}
	if s.enum != nil {
		found := false
		for _, e := range s.enum {
			if value.TypeOrder(e) == value.TypeOrder(v) && value.Compare(e, v) == 0 {
				found = true
				break
			}
		}
		if !found && fail(considered("enum", "value was not found in enum")) {
			return out
		}
	}
	if doc, ok := v.(bson.D); ok {
		if s.checkObject(doc, quick, &out) && quick {
			return out
		}
	}
	if arr, ok := v.(bson.A); ok {
		if s.checkArray(arr, quick, &out) && quick {
			return out
		}
	}
	if len(s.allOf) > 0 {
		var failed bson.A
		for i, sub := range s.allOf {
			if d := sub.check(v, quick); len(d) > 0 {
				failed = append(failed, bson.D{{Key: "index", Value: int32(i)}, {Key: "details", Value: d}})
			}
		}
		if len(failed) > 0 && fail(bson.D{{Key: "operatorName", Value: "allOf"}, {Key: "schemasNotSatisfied", Value: failed}}) {
			return out
		}
	}
	if len(s.anyOf) > 0 {
		var failed bson.A
		for i, sub := range s.anyOf {
			d := sub.check(v, quick)
			if len(d) == 0 {
				failed = nil
				break
			}
			failed = append(failed, bson.D{{Key: "index", Value: int32(i)}, {Key: "details", Value: d}})
		}
		if len(failed) > 0 && fail(bson.D{{Key: "operatorName", Value: "anyOf"}, {Key: "schemasNotSatisfied", Value: failed}}) {
			return out
		}
	}
	if len(s.oneOf) > 0 {
		var failed, matched bson.A
		for i, sub := range s.oneOf {
			if d := sub.check(v, quick); len(d) > 0 {
				failed = append(failed, bson.D{{Key: "index", Value: int32(i)}, {Key: "details", Value: d}})
			} else {
				matched = append(matched, int32(i))
			}
		}
		switch {
		case len(matched) > 1:
			if fail(bson.D{{Key: "operatorName", Value: "oneOf"}, {Key: "reason", Value: "more than one subschema matched"}, {Key: "matchingSchemaIndexes", Value: matched}}) {
				return out
			}
		case len(matched) == 0:
			if fail(bson.D{{Key: "operatorName", Value: "oneOf"}, {Key: "schemasNotSatisfied", Value: failed}}) {
				return out
			}
		}
	}
	if s.not != nil && s.not.Valid(v) {
		if fail(bson.D{{Key: "operatorName", Value: "not"}, {Key: "reason", Value: "child expression matched"}}) {
			return out
		}
	}
	return out
}

// checkObject applies the object keywords; it reports whether one failed.
func (s *Schema) checkObject(doc bson.D, quick bool, out *bson.A) bool {
	failed := false
	add := func(d bson.D) { *out = append(*out, d); failed = true }
	if len(s.properties) > 0 {
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
		if len(bad) > 0 {
			add(bson.D{{Key: "operatorName", Value: "properties"}, {Key: "propertiesNotSatisfied", Value: bad}})
			if quick {
				return true
			}
		}
	}
	if len(s.required) > 0 {
		var missing bson.A
		for _, n := range s.required {
			if _, ok := value.Get(doc, n); !ok {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			req, _ := value.Get(s.spec, "required")
			add(bson.D{{Key: "operatorName", Value: "required"}, {Key: "specifiedAs", Value: bson.D{{Key: "required", Value: req}}}, {Key: "missingProperties", Value: missing}})
			if quick {
				return true
			}
		}
	}
	if len(s.dependencies) > 0 {
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
		if len(bad) > 0 {
			add(bson.D{{Key: "operatorName", Value: "dependencies"}, {Key: "failingDependencies", Value: bad}})
			if quick {
				return true
			}
		}
	}
	n := int64(len(doc))
	if (s.minProps >= 0 && n < s.minProps) || (s.maxProps >= 0 && n > s.maxProps) {
		op := "minProperties"
		if s.maxProps >= 0 && n > s.maxProps {
			op = "maxProperties"
		}
		x, _ := value.Get(s.spec, op)
		add(bson.D{{Key: "operatorName", Value: op}, {Key: "specifiedAs", Value: bson.D{{Key: op, Value: x}}},
			{Key: "reason", Value: "specified number of properties was not satisfied"}, {Key: "numberOfProperties", Value: int32(n)}})
		if quick {
			return true
		}
	}
	if len(s.patternProps) > 0 || s.addlBool != nil || s.addlSchema != nil {
		var extra bson.A
		for _, e := range doc {
			named := false
			for _, p := range s.properties {
				if p.name == e.Key {
					named = true
					break
				}
			}
			for _, pp := range s.patternProps {
				if pp.re.MatchString(e.Key) {
					named = true
					if d := pp.schema.check(e.Value, quick); len(d) > 0 {
						add(bson.D{{Key: "operatorName", Value: "patternProperties"}, {Key: "details", Value: bson.A{bson.D{
							{Key: "propertyName", Value: e.Key}, {Key: "regexMatched", Value: pp.src}, {Key: "details", Value: d}}}}})
						if quick {
							return true
						}
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
	}
	return failed
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
