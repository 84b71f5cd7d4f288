package text

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// TokenOptions choose how Tokenize turns words into tokens. The zero value
// is what index keys hold: lower case, stop words kept, diacritics stripped.
type TokenOptions struct {
	// FilterStopWords drops the language's stop words.
	FilterStopWords bool
	// CaseSensitive keeps each word's case ($caseSensitive).
	CaseSensitive bool
	// DiacriticSensitive keeps diacritics ($diacriticSensitive).
	DiacriticSensitive bool
}

// delimiterTables are the Unicode properties whose characters separate
// words in mongod's version 3 tokenizer.
var delimiterTables = []*unicode.RangeTable{
	unicode.White_Space, unicode.Dash, unicode.Hyphen, unicode.Quotation_Mark,
	unicode.Terminal_Punctuation, unicode.Pattern_Syntax, unicode.Sentence_Terminal,
}

var asciiDelimiter [utf8.RuneSelf]bool

func init() {
	for r := rune(0); r < utf8.RuneSelf; r++ {
		asciiDelimiter[r] = unicode.IsOneOf(delimiterTables, r)
	}
}

// isDelimiter reports whether r separates words; in English the apostrophe
// does not ("don't" is one word).
func isDelimiter(r rune, english bool) bool {
	if r < utf8.RuneSelf {
		if r == '\'' && english {
			return false
		}
		return asciiDelimiter[r]
	}
	return unicode.IsOneOf(delimiterTables, r)
}

// Tokenize calls fn with each token of s in order: the words between
// delimiters, transformed as o says, in language l.
func (l *Language) Tokenize(s string, o TokenOptions, fn func(tok string)) {
	english := l.Name == "english"
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if isDelimiter(r, english) {
			i += n
			continue
		}
		start := i
		for i < len(s) {
			r, n = utf8.DecodeRuneInString(s[i:])
			if isDelimiter(r, english) {
				break
			}
			i += n
		}
		if tok, ok := l.token(s[start:i], o); ok {
			fn(tok)
		}
	}
}

// token turns one word into its token: stop words are checked lower-cased
// with their diacritics, stemming sees the diacritics, and they are
// stripped last, as mongod does.
func (l *Language) token(word string, o TokenOptions) (string, bool) {
	lower := toLower(word)
	if o.FilterStopWords && l.stop[lower] {
		return "", false
	}
	tok := l.Stem(lower)
	if o.CaseSensitive {
		tok = restoreCase(tok, word)
	}
	if !o.DiacriticSensitive {
		tok = StripDiacritics(tok)
	}
	return tok, true
}

// restoreCase gives a stem of the lower-cased word the case of the
// original word where the stem keeps the word's letters (the stemmers here
// only work on lower case; mongod's stems the word as written).
func restoreCase(stem, word string) string {
	var b strings.Builder
	wr := []rune(word)
	for i, r := range []rune(stem) {
		if i < len(wr) && unicode.ToLower(wr[i]) == r {
			r = wr[i]
		}
		b.WriteRune(r)
	}
	return b.String()
}

func toLower(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf || ('A' <= c && c <= 'Z') {
			return strings.ToLower(s)
		}
	}
	return s
}

// StripDiacritics removes diacritics: pure diacritic marks (the Unicode
// Diacritic property, which includes ^ and `) are dropped, and a letter
// whose decomposition carries them becomes its base letter.
func StripDiacritics(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= utf8.RuneSelf || c == '^' || c == '`' {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if r = removeDiacritics(r); r >= 0 {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// removeDiacritics maps one code point: -1 for a pure diacritic, the base
// letter when the decomposition without diacritics recomposes to a single
// code point, else r.
func removeDiacritics(r rune) rune {
	if r < utf8.RuneSelf {
		if r == '^' || r == '`' {
			return -1
		}
		return r
	}
	if unicode.Is(unicode.Diacritic, r) {
		return -1
	}
	d := norm.NFD.String(string(r))
	if len(d) == utf8.RuneLen(r) {
		return r
	}
	kept := make([]rune, 0, 2)
	for _, x := range d {
		if !unicode.Is(unicode.Diacritic, x) {
			kept = append(kept, x)
		}
	}
	c := []rune(norm.NFC.String(string(kept)))
	if len(c) == 1 {
		return c[0]
	}
	return r
}

// foldForPhrase prepares a string for phrase matching: lower-cased unless
// case sensitive, diacritics stripped unless diacritic sensitive.
func foldForPhrase(s string, caseSensitive, diacriticSensitive bool) string {
	if !caseSensitive {
		s = strings.ToLower(s)
	}
	if !diacriticSensitive {
		s = StripDiacritics(s)
	}
	return s
}
