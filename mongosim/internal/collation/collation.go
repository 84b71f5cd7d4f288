package collation

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"go.mongodb.org/mongo-driver/v2/bson"
	"golang.org/x/text/collate"
	"golang.org/x/text/language"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// Version is the ICU collation version mongod 8.0 reports.
const Version = "57.1"

// Collation is a parsed, non-simple collation. It is immutable and safe for
// concurrent use.
type Collation struct {
	Locale          string
	CaseLevel       bool
	CaseFirst       string // "upper", "lower" or "off"
	Strength        int    // 1 (primary) to 5 (identical)
	NumericOrdering bool
	Alternate       string // "non-ignorable" or "shifted"
	MaxVariable     string // "punct" or "space"
	Normalization   bool
	Backwards       bool

	// pool holds *worker: collate.Collators keep per-comparison state and
	// so cannot be shared between goroutines.
	pool sync.Pool
	// swapCase implements caseFirst "upper": x/text always orders lower
	// case first at the tertiary level, and swapping the case of both
	// strings reverses exactly that level.
	swapCase bool
	// caseLevel below strength 3 is done here: x/text's caseLevel keeps
	// all tertiary differences (accents included), ICU's only case.
	caseLevel bool
}

var _ value.Collator = (*Collation)(nil)

// Parse reads a collation document. It returns nil, nil for the simple
// collation ({locale: "simple"}). Errors are mongod's: the locale is read
// first, then each option, and unknown fields are reported last.
func Parse(spec bson.D) (*Collation, error) {
	locale, tag, err := parseLocale(spec)
	if err != nil || locale == "simple" {
		return nil, err
	}
	c := &Collation{Locale: locale, Strength: 3, CaseFirst: "off", Alternate: "non-ignorable", MaxVariable: "punct"}
	// Locales whose CLDR tailoring changes a default report it, as
	// mongod's ICU collators do.
	switch locale {
	case "fr_CA":
		c.Backwards = true
	case "da", "mt":
		c.CaseFirst = "upper"
	}
	parsed := 1 // locale
	for _, parse := range []func(bson.D) (int, error){c.parseBools, c.parseStrength, c.parseEnums, parseVersion} {
		n, err := parse(spec)
		if err != nil {
			return nil, err
		}
		parsed += n
	}
	if parsed < len(spec) {
		return nil, cmderr.New(cmderr.FailedToParse, "Collation spec contains unknown field. Collation spec: %s", render(spec))
	}
	if c.MaxVariable == "space" && c.Alternate == "shifted" {
		// x/text/collate fixes the variable top at punctuation.
		return nil, cmderr.Unsupported("collation maxVariable 'space' with alternate 'shifted'")
	}
	c.build(tag)
	return c, nil
}

// parseLocale reads and checks the locale; "simple" must stand alone.
func parseLocale(spec bson.D) (string, language.Tag, error) {
	locale, err := stringField(spec, "locale", "")
	if err != nil {
		return "", language.Tag{}, err
	}
	if _, ok := value.Get(spec, "locale"); !ok {
		return "", language.Tag{}, cmderr.New(cmderr.NoSuchKey, "Missing expected field \"locale\"")
	}
	if strings.IndexByte(locale, 0) >= 0 {
		return "", language.Tag{}, cmderr.New(cmderr.BadValue, "Field 'locale' cannot contain null byte. Collation spec: %s", render(spec))
	}
	if locale == "simple" {
		if len(spec) > 1 {
			return "", language.Tag{}, cmderr.New(cmderr.FailedToParse, "If locale=simple, no other fields should be present in: %s", render(spec))
		}
		return locale, language.Tag{}, nil
	}
	if locale == "" {
		return "", language.Tag{}, cmderr.New(cmderr.BadValue, "Field 'locale' cannot be the empty string in: %s", render(spec))
	}
	tag, ok := localeTag(locale)
	if !ok {
		return "", language.Tag{}, cmderr.New(cmderr.BadValue, "Field 'locale' is invalid in: %s", render(spec))
	}
	return locale, tag, nil
}

// The option parsers below each read their fields into c and return how
// many of spec's fields they used, so Parse can tell unknown fields apart.

func (c *Collation) parseBools(spec bson.D) (int, error) {
	parsed := 0
	for _, f := range []struct {
		key string
		dst *bool
	}{{"caseLevel", &c.CaseLevel}, {"numericOrdering", &c.NumericOrdering}, {"normalization", &c.Normalization}, {"backwards", &c.Backwards}} {
		v, ok := value.Get(spec, f.key)
		if !ok {
			continue
		}
		b, isBool := v.(bool)
		if !isBool {
			return 0, typeErr(f.key, v, "boolean")
		}
		*f.dst = b
		parsed++
	}
	return parsed, nil
}

func (c *Collation) parseStrength(spec bson.D) (int, error) {
	v, ok := value.Get(spec, "strength")
	if !ok {
		return 0, nil
	}
	n, isInt := value.ToInt64(v)
	if !value.IsNumber(v) {
		return 0, typeErr("strength", v, "number")
	}
	if !isInt {
		return 0, cmderr.New(cmderr.BadValue, "Expected field \"strength\" to have a value exactly representable as a 64-bit integer, but found strength: %s", renderValue(v))
	}
	if n < 1 || n > 5 {
		return 0, cmderr.New(cmderr.FailedToParse, "Field 'strength' must be an integer 1 through 5. Got: %d", n)
	}
	c.Strength = int(n)
	return 1, nil
}

func (c *Collation) parseEnums(spec bson.D) (int, error) {
	enums := []struct {
		key     string
		dst     *string
		allowed []string
		msg     string
	}{
		{"caseFirst", &c.CaseFirst, []string{"upper", "lower", "off"}, "'upper', 'lower', or 'off'"},
		{"alternate", &c.Alternate, []string{"non-ignorable", "shifted"}, "'non-ignorable' or 'shifted'"},
		{"maxVariable", &c.MaxVariable, []string{"punct", "space"}, "'punct' or 'space'"},
	}
	parsed := 0
	for _, en := range enums {
		if _, ok := value.Get(spec, en.key); !ok {
			continue
		}
		s, err := stringField(spec, en.key, "")
		if err != nil {
			return 0, err
		}
		if !slices.Contains(en.allowed, s) {
			return 0, cmderr.New(cmderr.FailedToParse, "Field '%s' must be %s. Got: %s", en.key, en.msg, s)
		}
		*en.dst = s
		parsed++
	}
	return parsed, nil
}

// parseVersion accepts only the version this collator provides.
func parseVersion(spec bson.D) (int, error) {
	if _, ok := value.Get(spec, "version"); !ok {
		return 0, nil
	}
	s, err := stringField(spec, "version", "")
	if err != nil {
		return 0, err
	}
	if s != Version {
		return 0, cmderr.New(IncompatibleCollationVersion, "Requested collation version %s but the only available collator version was %s. Requested collation spec: %s", s, Version, render(spec))
	}
	return 1, nil
}

// build derives the comparison settings from the parsed options.
func (c *Collation) build(tag language.Tag) {
	tag = withOptions(tag, c)
	c.swapCase = c.CaseFirst == "upper" && c.Strength >= 3
	c.caseLevel = c.CaseLevel && c.Strength < 3
	var opts []collate.Option
	if c.NumericOrdering {
		opts = append(opts, collate.Numeric)
	}
	c.pool.New = func() any { return &worker{col: collate.New(tag, opts...)} }
}

// IncompatibleCollationVersion is mongod's error code for a version other
// than the one its ICU provides.
const IncompatibleCollationVersion = 161

func stringField(spec bson.D, key, _ string) (string, error) {
	v, ok := value.Get(spec, key)
	if !ok {
		return "", nil
	}
	s, isStr := v.(string)
	if !isStr {
		return "", typeErr(key, v, "string")
	}
	return s, nil
}

// withOptions encodes the collation options as BCP 47 -u- extension keys,
// which x/text/collate reads (collate.OptionsFromTag).
func withOptions(tag language.Tag, c *Collation) language.Tag {
	ks := [...]string{1: "level1", 2: "level2", 3: "level3", 4: "level4", 5: "identic"}[c.Strength]
	ext := "u-ks-" + ks
	if c.Alternate == "shifted" {
		ext += "-ka-shifted"
	}
	if c.Backwards {
		ext += "-kb-true"
	}
	if co := tag.TypeForKey("co"); co != "" {
		ext += "-co-" + co
	}
	e, err := language.ParseExtension(ext)
	if err != nil {
		return tag
	}
	t, err := language.Raw.Compose(tag, e)
	if err != nil {
		return tag
	}
	return t
}

// localeTag maps a mongod (ICU) locale ID such as "en_US" or
// "de@collation=phonebook" to a language tag, accepting only the locales
// mongod supports.
func localeTag(locale string) (language.Tag, bool) {
	base, keyword, hasKeyword := strings.Cut(locale, "@")
	if !supported[base] {
		return language.Tag{}, false
	}
	id := strings.ReplaceAll(base, "_", "-")
	if base == "en_US_POSIX" {
		id = "en-US"
	}
	if hasKeyword {
		k, v, ok := strings.Cut(keyword, "=")
		co, known := collationKeywords[v]
		if !ok || k != "collation" || !known {
			return language.Tag{}, false
		}
		id += "-u-co-" + co
	}
	tag, err := language.Parse(id)
	if err != nil {
		return language.Tag{}, false
	}
	return tag, true
}

// collationKeywords maps ICU's @collation= values to BCP 47 -u-co- types.
var collationKeywords = map[string]string{
	"phonebook": "phonebk", "traditional": "trad", "pinyin": "pinyin", "stroke": "stroke",
	"zhuyin": "zhuyin", "unihan": "unihan", "big5han": "big5han", "gb2312han": "gb2312",
	"dictionary": "dict", "search": "search", "standard": "standard",
}

// supported are the locale IDs mongod's collation accepts.
var supported = func() map[string]bool {
	m := map[string]bool{}
	for _, l := range strings.Fields(`af sq am ar hy as az bn be bs bs_Cyrl bg my ca chr zh zh_Hant hr cs
		da nl dz en en_US en_US_POSIX eo et ee fo fil fi fi_FI fr fr_CA gl ka de de_AT el gu ha haw he
		hi hu is ig smn id ga it ja kl kn kk km kok ko ky lk lo lv li lt dsb lb mk ms ml mt mr mn ne
		se nb nn or om ps fa fa_AF pl pt pa ro ru sr sr_Latn si sk sl es sw sv ta te th bo to tr uk
		hsb ur ug vi wae cy yi yo zu root`) {
		m[l] = true
	}
	return m
}()

// worker is one goroutine's collator with its key buffer (4 KiB, too big
// to allocate per key).
type worker struct {
	col *collate.Collator
	buf collate.Buffer
}

// Spec is the collation as mongod reports it (listIndexes,
// listCollections): every field, defaults filled in.
func (c *Collation) Spec() bson.D {
	if c == nil {
		return nil
	}
	return bson.D{
		{Key: "locale", Value: c.Locale},
		{Key: "caseLevel", Value: c.CaseLevel},
		{Key: "caseFirst", Value: c.CaseFirst},
		{Key: "strength", Value: int32(c.Strength)},
		{Key: "numericOrdering", Value: c.NumericOrdering},
		{Key: "alternate", Value: c.Alternate},
		{Key: "maxVariable", Value: c.MaxVariable},
		{Key: "normalization", Value: c.Normalization},
		{Key: "backwards", Value: c.Backwards},
		{Key: "version", Value: Version},
	}
}

// Equal reports whether two collations compare alike (nil is simple).
func Equal(a, b *Collation) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Locale == b.Locale && a.CaseLevel == b.CaseLevel && a.CaseFirst == b.CaseFirst &&
		a.Strength == b.Strength && a.NumericOrdering == b.NumericOrdering && a.Alternate == b.Alternate &&
		a.MaxVariable == b.MaxVariable && a.Normalization == b.Normalization && a.Backwards == b.Backwards
}

// CompareStrings orders a and b under the collation.
func (c *Collation) CompareStrings(a, b string) int {
	if c.swapCase {
		a, b = swapCase(a), swapCase(b)
	}
	w := c.pool.Get().(*worker)
	r := w.col.CompareString(a, b)
	c.pool.Put(w)
	if r == 0 && c.caseLevel {
		r = strings.Compare(c.caseSignature(a), c.caseSignature(b))
	}
	return r
}

// caseSignature is the case level of s: one byte per letter, lower case
// first unless caseFirst is "upper".
func (c *Collation) caseSignature(s string) string {
	lower, upper := byte('1'), byte('2')
	if c.CaseFirst == "upper" {
		lower, upper = upper, lower
	}
	var b []byte
	for _, r := range s {
		switch {
		case unicode.IsUpper(r) || unicode.IsTitle(r):
			b = append(b, upper)
		case unicode.IsLetter(r):
			b = append(b, lower)
		}
	}
	return string(b)
}

// Key returns the collation sort key of s: equal keys for exactly the
// strings CompareStrings deems equal.
func (c *Collation) Key(s string) string {
	if c.swapCase {
		s = swapCase(s)
	}
	w := c.pool.Get().(*worker)
	w.buf.Reset()
	k := string(w.col.KeyFromString(&w.buf, s))
	c.pool.Put(w)
	if c.caseLevel {
		k += "\x00\x00" + c.caseSignature(s)
	}
	return k
}

func swapCase(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case unicode.IsUpper(r):
			return unicode.ToLower(r)
		case unicode.IsLower(r):
			return unicode.ToUpper(r)
		}
		return r
	}, s)
}

func typeErr(field string, v any, want string) error {
	return cmderr.New(cmderr.TypeMismatch, "\"%s\" had the wrong type. Expected %s, found %s", field, want, value.TypeName(v))
}

func render(d bson.D) string {
	var b strings.Builder
	b.WriteString("{ ")
	for i, e := range d {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(e.Key)
		b.WriteString(": ")
		b.WriteString(renderValue(e.Value))
	}
	b.WriteString(" }")
	return b.String()
}

func renderValue(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case bson.D:
		return render(x)
	case int32, int64, bool:
		return fmt.Sprint(x)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return value.TypeName(v)
}
