package spectest

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// matcher evaluates expected values against actual ones by the unified
// format's rules: extra keys allowed only in root-level documents, arrays of
// equal length, flexible numeric comparison, and the $$ operators.
type matcher struct {
	entities *entityMap
}

// matchRoot matches a root-level document (a command, a reply, a returned
// document): actual may have keys expected does not mention.
func (m *matcher) matchRoot(expected, actual bson.RawValue) error {
	return m.match(expected, actual, true, "")
}

// matchValue matches a value that is not a root-level document.
func (m *matcher) matchValue(expected, actual bson.RawValue) error {
	return m.match(expected, actual, false, "")
}

// matchIterable matches the result of an operation that returns an iterable
// of documents (find, aggregate, the list operations): each element is a
// root-level document.
func (m *matcher) matchIterable(expected, actual bson.RawValue) error {
	if _, _, ok := operatorOf(expected); ok {
		return m.match(expected, actual, true, "")
	}
	ea, ok := expected.ArrayOK()
	if !ok {
		return m.match(expected, actual, true, "")
	}
	aa, ok := actual.ArrayOK()
	if !ok {
		return fmt.Errorf("expected an array, got %s", describe(actual))
	}
	ev, _ := ea.Values()
	av, _ := aa.Values()
	if len(ev) != len(av) {
		return fmt.Errorf("expected %d elements, got %d: %s", len(ev), len(av), shortJSON(actual))
	}
	for i := range ev {
		if err := m.match(ev[i], av[i], true, fmt.Sprintf("[%d]", i)); err != nil {
			return err
		}
	}
	return nil
}

func describe(v bson.RawValue) string {
	if v.Type == 0 {
		return "nothing"
	}
	return fmt.Sprintf("%s %s", typeName(v.Type), shortJSON(v))
}

func at(path string) string {
	if path == "" {
		return "(root)"
	}
	return path
}

// match matches expected against actual; actual.Type == 0 means absent.
func (m *matcher) match(expected, actual bson.RawValue, root bool, path string) error {
	if op, arg, ok := operatorOf(expected); ok {
		return m.operator(op, arg, actual, root, path)
	}
	switch expected.Type {
	case bson.TypeEmbeddedDocument:
		ad, ok := actual.DocumentOK()
		if !ok {
			return fmt.Errorf("%s: expected a document %s, got %s", at(path), shortJSON(expected), describe(actual))
		}
		return m.matchDoc(expected.Document(), ad, root, path)
	case bson.TypeArray:
		aa, ok := actual.ArrayOK()
		if !ok {
			return fmt.Errorf("%s: expected an array %s, got %s", at(path), shortJSON(expected), describe(actual))
		}
		ev, err := expected.Array().Values()
		if err != nil {
			return err
		}
		av, err := aa.Values()
		if err != nil {
			return err
		}
		if len(ev) != len(av) {
			return fmt.Errorf("%s: expected %d elements %s, got %d %s", at(path), len(ev), shortJSON(expected), len(av), shortJSON(actual))
		}
		for i := range ev {
			if err := m.match(ev[i], av[i], false, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	}
	if actual.Type == 0 {
		return fmt.Errorf("%s: expected %s, got nothing", at(path), shortJSON(expected))
	}
	if !scalarEqual(expected, actual) {
		return fmt.Errorf("%s: expected %s %s, got %s", at(path), typeName(expected.Type), shortJSON(expected), describe(actual))
	}
	return nil
}

func (m *matcher) matchDoc(expected, actual bson.Raw, root bool, path string) error {
	elems, err := expected.Elements()
	if err != nil {
		return err
	}
	seen := make(map[string]bool, len(elems))
	for _, e := range elems {
		key := e.Key()
		seen[key] = true
		sub := key
		if path != "" {
			sub = path + "." + key
		}
		av, lerr := actual.LookupErr(key)
		if lerr != nil {
			av = bson.RawValue{}
		}
		if op, arg, ok := operatorOf(e.Value()); ok {
			switch op {
			case "$$exists":
				want, _ := arg.BooleanOK()
				if want && av.Type == 0 {
					return fmt.Errorf("%s: expected the field to exist", sub)
				}
				if !want && av.Type != 0 {
					return fmt.Errorf("%s: expected the field to be absent, got %s", sub, describe(av))
				}
				continue
			}
		}
		if err := m.match(e.Value(), av, false, sub); err != nil {
			return err
		}
	}
	if !root {
		aelems, err := actual.Elements()
		if err != nil {
			return err
		}
		for _, e := range aelems {
			if !seen[e.Key()] {
				return fmt.Errorf("%s: unexpected field %q in %s (nested documents must match exactly)", at(path), e.Key(), docJSON(actual))
			}
		}
	}
	return nil
}

// matchOperator checks actual against a $$ operator's argument; root and
// path are as in match.
type matchOperator func(m *matcher, arg, actual bson.RawValue, root bool, path string) error

// matchOperators are the unified format's $$ operators. The table is
// filled in init: several operators match recursively, through operator,
// which reads it (an initialization cycle otherwise).
var matchOperators map[string]matchOperator

func init() {
	matchOperators = map[string]matchOperator{
		"$$exists":          (*matcher).matchExists,
		"$$unsetOrMatches":  (*matcher).matchUnsetOrMatches,
		"$$type":            (*matcher).matchType,
		"$$matchesEntity":   (*matcher).matchEntity,
		"$$matchesHexBytes": (*matcher).matchHexBytes,
		"$$sessionLsid":     (*matcher).matchSessionLsid,
		"$$lte":             (*matcher).matchLte,
		"$$matchAsDocument": (*matcher).matchAsDocument,
		"$$matchAsRoot":     (*matcher).matchAsRoot,
	}
}

func (m *matcher) operator(op string, arg, actual bson.RawValue, root bool, path string) error {
	match, ok := matchOperators[op]
	if !ok {
		return fmt.Errorf("%s: unknown matching operator %s", at(path), op)
	}
	return match(m, arg, actual, root, path)
}

func (*matcher) matchExists(arg, actual bson.RawValue, _ bool, path string) error {
	want, _ := arg.BooleanOK()
	if want != (actual.Type != 0) {
		return fmt.Errorf("%s: $$exists %v, got %s", at(path), want, describe(actual))
	}
	return nil
}

func (m *matcher) matchUnsetOrMatches(arg, actual bson.RawValue, root bool, path string) error {
	if actual.Type == 0 {
		return nil
	}
	return m.match(arg, actual, root, path)
}

func (*matcher) matchType(arg, actual bson.RawValue, _ bool, path string) error {
	if actual.Type == 0 {
		return fmt.Errorf("%s: expected a value of type %s, got nothing", at(path), shortJSON(arg))
	}
	var names []string
	if s, ok := arg.StringValueOK(); ok {
		names = []string{s}
	} else if a, ok := arg.ArrayOK(); ok {
		vals, _ := a.Values()
		for _, v := range vals {
			names = append(names, v.StringValue())
		}
	}
	for _, n := range names {
		if typeMatches(n, actual.Type) {
			return nil
		}
	}
	return fmt.Errorf("%s: expected type %v, got %s", at(path), names, describe(actual))
}

func (m *matcher) matchEntity(arg, actual bson.RawValue, root bool, path string) error {
	v, err := m.entities.value(arg.StringValue())
	if err != nil {
		return err
	}
	return m.match(v, actual, root, path)
}

func (*matcher) matchHexBytes(arg, actual bson.RawValue, _ bool, path string) error {
	want, err := hex.DecodeString(arg.StringValue())
	if err != nil {
		return fmt.Errorf("$$matchesHexBytes: malformed hex %q", arg.StringValue())
	}
	var got []byte
	switch actual.Type {
	case bson.TypeBinary:
		_, got = actual.Binary()
	case bson.TypeString:
		got = []byte(actual.StringValue())
	default:
		return fmt.Errorf("%s: $$matchesHexBytes wants binary data, got %s", at(path), describe(actual))
	}
	if !bytes.Equal(want, got) {
		return fmt.Errorf("%s: expected bytes %x, got %x", at(path), want, got)
	}
	return nil
}

func (m *matcher) matchSessionLsid(arg, actual bson.RawValue, _ bool, path string) error {
	lsid, err := m.entities.sessionLsid(arg.StringValue())
	if err != nil {
		return err
	}
	ad, ok := actual.DocumentOK()
	if !ok {
		return fmt.Errorf("%s: expected the lsid of %s, got %s", at(path), arg.StringValue(), describe(actual))
	}
	if !bytes.Equal(lsid, ad) {
		return fmt.Errorf("%s: expected the lsid of %s %s, got %s", at(path), arg.StringValue(), docJSON(lsid), docJSON(ad))
	}
	return nil
}

func (*matcher) matchLte(arg, actual bson.RawValue, _ bool, path string) error {
	ef, ok1 := asFloat(arg)
	af, ok2 := asFloat(actual)
	if !ok1 || !ok2 {
		return fmt.Errorf("%s: $$lte needs numbers, got %s and %s", at(path), describe(arg), describe(actual))
	}
	if af > ef {
		return fmt.Errorf("%s: expected <= %v, got %v", at(path), ef, af)
	}
	return nil
}

func (m *matcher) matchAsDocument(arg, actual bson.RawValue, _ bool, path string) error {
	s, ok := actual.StringValueOK()
	if !ok {
		return fmt.Errorf("%s: $$matchAsDocument wants an extended JSON string, got %s", at(path), describe(actual))
	}
	var d bson.Raw
	if err := bson.UnmarshalExtJSON([]byte(s), false, &d); err != nil {
		return fmt.Errorf("%s: $$matchAsDocument: %w", at(path), err)
	}
	return m.match(arg, bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: d}, false, path)
}

func (m *matcher) matchAsRoot(arg, actual bson.RawValue, _ bool, path string) error {
	return m.match(arg, actual, true, path)
}

// scalarEqual compares two non-document, non-array values: numbers (except
// Decimal128) by value, everything else by type and bytes.
func scalarEqual(expected, actual bson.RawValue) bool {
	if isNumber(expected) && isNumber(actual) {
		ei, ok1 := asInt(expected)
		ai, ok2 := asInt(actual)
		if ok1 && ok2 {
			return ei == ai
		}
		ef, _ := asFloat(expected)
		af, _ := asFloat(actual)
		return ef == af
	}
	if expected.Type != actual.Type {
		return false
	}
	return expected.Equal(actual)
}

var typeNames = map[string]bson.Type{
	"double": bson.TypeDouble, "string": bson.TypeString, "object": bson.TypeEmbeddedDocument,
	"array": bson.TypeArray, "binData": bson.TypeBinary, "undefined": bson.TypeUndefined,
	"objectId": bson.TypeObjectID, "bool": bson.TypeBoolean, "date": bson.TypeDateTime,
	"null": bson.TypeNull, "regex": bson.TypeRegex, "dbPointer": bson.TypeDBPointer,
	"javascript": bson.TypeJavaScript, "symbol": bson.TypeSymbol,
	"javascriptWithScope": bson.TypeCodeWithScope, "int": bson.TypeInt32,
	"timestamp": bson.TypeTimestamp, "long": bson.TypeInt64, "decimal": bson.TypeDecimal128,
	"minKey": bson.TypeMinKey, "maxKey": bson.TypeMaxKey,
}

func typeMatches(name string, t bson.Type) bool {
	if name == "number" {
		return t == bson.TypeInt32 || t == bson.TypeInt64 || t == bson.TypeDouble || t == bson.TypeDecimal128
	}
	want, ok := typeNames[name]
	return ok && want == t
}

func typeName(t bson.Type) string {
	for n, tt := range typeNames {
		if tt == t {
			return n
		}
	}
	return strings.ToLower(t.String())
}

// exactEqual compares two documents exactly (for test.outcome), allowing
// only a different key order; numbers must have the same type.
func exactEqual(a, b bson.RawValue) bool {
	if a.Type != b.Type {
		return false
	}
	switch a.Type {
	case bson.TypeEmbeddedDocument:
		ae, err1 := a.Document().Elements()
		be, err2 := b.Document().Elements()
		if err1 != nil || err2 != nil || len(ae) != len(be) {
			return false
		}
		bm := make(map[string]bson.RawValue, len(be))
		for _, e := range be {
			bm[e.Key()] = e.Value()
		}
		for _, e := range ae {
			bv, ok := bm[e.Key()]
			if !ok || !exactEqual(e.Value(), bv) {
				return false
			}
		}
		return true
	case bson.TypeArray:
		av, err1 := a.Array().Values()
		bv, err2 := b.Array().Values()
		if err1 != nil || err2 != nil || len(av) != len(bv) {
			return false
		}
		for i := range av {
			if !exactEqual(av[i], bv[i]) {
				return false
			}
		}
		return true
	}
	return a.Equal(b)
}
