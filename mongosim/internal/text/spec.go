package text

import (
	"errors"
	"math"
	"sort"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// Wildcard is the weights field that indexes every string of a document.
const Wildcard = "$**"

// Version is the textIndexVersion mongosim builds.
const Version = 3

// maxWeight is mongod's bound on a field weight (exclusive).
const maxWeight = 100000

// Spec is a text index specification.
type Spec struct {
	// Key is the normalized key pattern: the prefix fields, {_fts: "text",
	// _ftsx: 1}, the suffix fields.
	Key bson.D
	// Prefix are the key fields before the text fields: a $text query needs
	// an equality on each. Suffix are those after.
	Prefix, Suffix []string
	// Options are the spec fields listIndexes reports besides v, key and
	// name, in mongod's order.
	Options bson.D
	// DefaultLanguage and LanguageOverride are default_language and
	// language_override.
	DefaultLanguage  *Language
	LanguageOverride string
	wildcard         bool
	names            []string // weighted fields, sorted
	weights          map[string]float64
}

// IsTextKey reports whether a key pattern has a "text" field (or the
// normalized _fts), so that ParseSpec applies.
func IsTextKey(key bson.D) bool {
	for _, e := range key {
		if e.Key == "_fts" || e.Value == "text" {
			return true
		}
	}
	return false
}

func cannotCreate(format string, args ...any) error {
	return cmderr.New(cmderr.CannotCreateIndex, format, args...)
}

// ParseSpec validates a text index's key pattern and options (weights,
// default_language, language_override, textIndexVersion) as mongod does;
// options holds the whole createIndexes spec, other fields are ignored.
func ParseSpec(key bson.D, options bson.D) (*Spec, error) {
	s := &Spec{weights: map[string]float64{}}
	fields, err := s.parseKey(key)
	if err != nil {
		return nil, err
	}
	m := map[string]int64{}
	for _, f := range fields {
		m[f] = 1
	}
	got := map[string]any{}
	var order []string
	for _, e := range options {
		switch e.Key {
		case "weights", "default_language", "language_override", "textIndexVersion":
			got[e.Key] = e.Value
			order = append(order, e.Key)
		}
	}
	if err := weightsInto(m, got["weights"]); err != nil {
		return nil, err
	}
	if len(m) == 0 {
		return nil, cannotCreate("text index option 'weights' must specify fields or the wildcard")
	}
	weights, err := s.setWeights(m)
	if err != nil {
		return nil, err
	}
	langName, err := s.setLanguages(got)
	if err != nil {
		return nil, err
	}
	if v, ok := got["textIndexVersion"]; ok {
		n, isNum := value.ToFloat(v)
		if !isNum {
			return nil, cannotCreate("text index option 'textIndexVersion' must be a number")
		}
		if int(n) == 2 {
			return nil, cmderr.Unsupported("textIndexVersion 2 (mongosim builds version 3)")
		}
		if int(n) != Version {
			return nil, cannotCreate("bad textIndexVersion: %d", int(n))
		}
	}
	vals := map[string]any{"weights": weights, "default_language": langName,
		"language_override": s.LanguageOverride, "textIndexVersion": int32(Version)}
	for _, k := range append(order, "weights", "default_language", "language_override", "textIndexVersion") {
		if v, ok := vals[k]; ok {
			s.Options = append(s.Options, bson.E{Key: k, Value: v})
			delete(vals, k)
		}
	}
	return s, nil
}

// parseKey checks the key pattern (prefix fields, adjacent text fields,
// suffix fields) and returns the text fields.
func (s *Spec) parseKey(key bson.D) ([]string, error) {
	var text []string
	state := 0 // 0: prefix, 1: text fields, 2: suffix
	for _, e := range key {
		if e.Key == "_fts" || e.Key == "_ftsx" {
			return nil, cmderr.Unsupported("a normalized text index key pattern (_fts/_ftsx)")
		}
		if str, ok := e.Value.(string); ok {
			if str != "text" {
				return nil, cannotCreate("Can't use more than one index plugin for a single index.")
			}
			if state == 2 {
				return nil, cannotCreate("'text' fields in index must all be adjacent")
			}
			if state == 0 {
				s.Key = append(s.Key, bson.E{Key: "_fts", Value: "text"}, bson.E{Key: "_ftsx", Value: int32(1)})
			}
			state = 1
			text = append(text, e.Key)
			continue
		}
		if n, ok := value.ToFloat(e.Value); !ok || (int(n) != 1 && int(n) != -1) {
			return nil, cannotCreate("expected value 1 or -1 for non-text key in compound index")
		}
		if state == 0 {
			s.Prefix = append(s.Prefix, e.Key)
		} else {
			state = 2
			s.Suffix = append(s.Suffix, e.Key)
		}
		s.Key = append(s.Key, e)
	}
	return text, nil
}

func weightsInto(m map[string]int64, w any) error {
	switch x := w.(type) {
	case nil:
	case bson.D:
		for _, e := range x {
			n, ok := value.ToFloat(e.Value)
			if !ok {
				return cannotCreate("weight for text index needs numeric type")
			}
			m[e.Key] = int64(n) // mongod keeps the integer part
		}
	case string:
		if x != Wildcard {
			return cannotCreate("text index option 'weights' must be an object")
		}
		m[Wildcard] = 1
	default:
		return cannotCreate("text index option 'weights' must be an object")
	}
	return nil
}

// setWeights validates the weights and returns them as listIndexes shows
// them: sorted by field, as integers.
func (s *Spec) setWeights(m map[string]int64) (bson.D, error) {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	out := make(bson.D, 0, len(names))
	for _, k := range names {
		w := m[k]
		if w <= 0 || w >= maxWeight {
			return nil, cannotCreate("text index weight must be in the exclusive interval (0,%d) but found: %d", maxWeight, w)
		}
		if k != Wildcard {
			for _, part := range strings.Split(k, ".") {
				if part == "" {
					return nil, cannotCreate("weight cannot have empty path component")
				}
				if strings.HasPrefix(part, "$") {
					return nil, cannotCreate("weight cannot have path component with $ prefix")
				}
			}
			s.names = append(s.names, k)
			s.weights[k] = float64(w)
		} else {
			s.wildcard = true
		}
		out = append(out, bson.E{Key: k, Value: int32(w)})
	}
	return out, nil
}

func (s *Spec) setLanguages(got map[string]any) (string, error) {
	name := "english"
	if v, ok := got["default_language"]; ok {
		str, isStr := v.(string)
		if !isStr {
			return "", cannotCreate("default_language needs a string type")
		}
		name = str
	}
	l, err := Lookup(name)
	if err != nil {
		if errors.Is(err, ErrUnsupportedLanguage) {
			return "", cmderr.Unsupported("text search language " + strconv.Quote(name))
		}
		return "", cannotCreate("default_language is not valid")
	}
	s.DefaultLanguage = l
	s.LanguageOverride = "language"
	if v, ok := got["language_override"]; ok {
		str, isStr := v.(string)
		if !isStr {
			return "", cannotCreate("language_override must be a string")
		}
		if str == "" || str[0] == '$' || strings.Contains(str, ".") {
			return "", cannotCreate("language_override is not valid")
		}
		s.LanguageOverride = str
	}
	return name, nil
}

// Wildcard reports whether the index covers every string ("$**").
func (s *Spec) Wildcard() bool { return s.wildcard }

// TextFields are the weighted fields (without the wildcard), sorted.
func (s *Spec) TextFields() []string { return s.names }

// languageOf is the language of a document or sub-document: its
// language_override field, else the enclosing one's.
func (s *Spec) languageOf(d bson.D, parent *Language) (*Language, error) {
	v, ok := value.Get(d, s.LanguageOverride)
	if !ok {
		return parent, nil
	}
	str, isStr := v.(string)
	if !isStr {
		return nil, cmderr.New(17261, "found language override field in document with non-string type")
	}
	l, err := Lookup(str)
	if err != nil {
		if errors.Is(err, ErrUnsupportedLanguage) {
			return nil, cmderr.Unsupported("text search language " + strconv.Quote(str))
		}
		return nil, cmderr.New(17262, "language override unsupported: %s", str)
	}
	return l, nil
}

// weightFor finds the weight entry at or after name: mongod's lower bound
// in its sorted weights, which decides both whether a field is indexed and
// (for the wildcard) the weight it gets.
func (s *Spec) weightFor(name string) (string, float64, bool) {
	i := sort.SearchStrings(s.names, name)
	if i == len(s.names) {
		return "", 1, false
	}
	return s.names[i], s.weights[s.names[i]], true
}

// strings calls fn with every indexed string of doc, its language and
// weight, in document order, as mongod's element iterator walks it.
func (s *Spec) strings(doc bson.D, fn func(text string, l *Language, weight float64)) error {
	l, err := s.languageOf(doc, s.DefaultLanguage)
	if err != nil {
		return err
	}
	return s.walkDoc(doc, l, "", fn)
}

func (s *Spec) walkDoc(d bson.D, l *Language, parent string, fn func(string, *Language, float64)) error {
	for _, e := range d {
		if s.wildcard && e.Key == s.LanguageOverride {
			continue
		}
		name := e.Key
		if parent != "" {
			name = parent + "." + e.Key
		}
		if err := s.visit(name, e.Value, l, false, fn); err != nil {
			return err
		}
	}
	return nil
}

func (s *Spec) visit(name string, v any, l *Language, inArray bool, fn func(string, *Language, float64)) error {
	_, isDoc := v.(bson.D)
	lookup := name
	if isDoc {
		lookup += "."
	}
	w, weight, found := s.weightFor(lookup)
	if !s.wildcard && (!found || (w != name && !strings.HasPrefix(w, name+"."))) {
		return nil
	}
	exact := found && w == name
	switch x := v.(type) {
	case string:
		if exact || s.wildcard {
			fn(x, l, weight)
		}
	case bson.D:
		if !exact || s.wildcard {
			sub, err := s.languageOf(x, l)
			if err != nil {
				return err
			}
			return s.walkDoc(x, sub, name, fn)
		}
	case bson.A:
		if !inArray || s.wildcard {
			for _, el := range x {
				if err := s.visit(name, el, l, true, fn); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Score returns the scores of doc's terms, as mongod stores them in its
// index keys (see the package documentation for the formula).
func (s *Spec) Score(doc bson.D) (map[string]float64, error) {
	out := map[string]float64{}
	err := s.strings(doc, func(str string, l *Language, weight float64) {
		scoreString(out, str, l, weight)
	})
	return out, err
}

type termCount struct{ count, freq, exp float64 }

func scoreString(out map[string]float64, raw string, l *Language, weight float64) {
	terms := map[string]*termCount{}
	var order []string
	tokens := 0
	l.Tokenize(raw, TokenOptions{FilterStopWords: true}, func(tok string) {
		t := terms[tok]
		if t == nil {
			t = &termCount{exp: 0}
			terms[tok] = t
			order = append(order, tok)
		}
		if t.exp == 0 {
			t.exp = 1
		} else {
			t.exp *= 2
		}
		t.count++
		t.freq += 1 / t.exp
		tokens++
	})
	for _, term := range order {
		t := terms[term]
		coeff := 0.5*t.count/float64(tokens) + 0.5
		adjust := 1.0
		if len(raw) == len(term) && asciiEqualFold(raw, term) {
			adjust += 0.1 // the term is the whole string
		}
		out[term] += weight * t.freq * coeff * adjust
		if math.IsInf(out[term], 0) {
			out[term] = math.MaxFloat64
		}
	}
}

func asciiEqualFold(a, b string) bool {
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// QueryScore is doc's textScore for q: the sum of its scores for q's
// terms, in term order (as mongod adds them up).
func QueryScore(scores map[string]float64, q *Query) float64 {
	total := 0.0
	for _, t := range q.Terms {
		total += scores[t]
	}
	return total
}

// Matches reports whether doc satisfies q under this index: it holds a
// positive term (skipped with skipTerms, when the index already found it
// by an insensitive term), no negated term, every phrase and no negated
// phrase.
func (s *Spec) Matches(doc bson.D, q *Query, skipTerms bool) (bool, error) {
	type str struct {
		text string
		lang *Language
	}
	var all []str
	if err := s.strings(doc, func(t string, l *Language, _ float64) { all = append(all, str{t, l}) }); err != nil {
		return false, err
	}
	o := TokenOptions{CaseSensitive: q.CaseSensitive, DiacriticSensitive: q.DiacriticSensitive}
	has := func(set map[string]bool) bool {
		for _, x := range all {
			found := false
			x.lang.Tokenize(x.text, o, func(tok string) { found = found || set[tok] })
			if found {
				return true
			}
		}
		return false
	}
	if !(skipTerms && !q.sensitive()) && !has(q.positive) {
		return false, nil
	}
	if len(q.negated) > 0 && has(q.negated) {
		return false, nil
	}
	phrase := func(p string) bool {
		needle := foldForPhrase(p, q.CaseSensitive, q.DiacriticSensitive)
		for _, x := range all {
			if strings.Contains(foldForPhrase(x.text, q.CaseSensitive, q.DiacriticSensitive), needle) {
				return true
			}
		}
		return false
	}
	for _, p := range q.Phrases {
		if !phrase(p) {
			return false, nil
		}
	}
	for _, p := range q.NegatedPhrases {
		if phrase(p) {
			return false, nil
		}
	}
	return true, nil
}
