package text

import (
	"sort"
	"strings"
)

// Query is a parsed $text query.
type Query struct {
	// Language is the query's language ($language, else the index's).
	Language *Language
	// CaseSensitive and DiacriticSensitive are $caseSensitive and
	// $diacriticSensitive.
	CaseSensitive, DiacriticSensitive bool
	// Terms are the distinct positive terms as index keys hold them
	// (lower case, stemmed, no diacritics): the index lookups, and the
	// terms whose scores make up a document's textScore.
	Terms []string
	// positive and negated are the terms documents are matched against,
	// in the query's case and diacritic sensitivity.
	positive, negated map[string]bool
	// Phrases and NegatedPhrases are the quoted phrases as written.
	Phrases, NegatedPhrases []string
}

// queryToken is one token of mongod's $search parser: a run of text, or a
// single '-' or '"' delimiter, with whether whitespace preceded it.
type queryToken struct {
	text       string
	delim      byte
	offset     int
	afterSpace bool
}

func isQuerySpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func queryTokens(s string) []queryToken {
	var out []queryToken
	i := 0
	for i < len(s) && isQuerySpace(s[i]) {
		i++
	}
	prevSpace := true
	for i < len(s) {
		start := i
		t := queryToken{offset: start, afterSpace: prevSpace}
		if c := s[i]; c == '-' || c == '"' {
			t.delim = c
			i++
		} else {
			for i < len(s) && !isQuerySpace(s[i]) && s[i] != '-' && s[i] != '"' {
				i++
			}
			t.text = s[start:i]
		}
		ws := i
		for i < len(s) && isQuerySpace(s[i]) {
			i++
		}
		prevSpace = i > ws
		out = append(out, t)
	}
	return out
}

// ParseQuery parses a $search string as mongod does: words are positive
// terms, "quoted phrases" must appear as written (their words are positive
// terms too), and a '-' right before a word or phrase (after whitespace or
// at the start) negates it up to the next whitespace. Stop words are
// dropped and terms stemmed in lang.
func ParseQuery(search string, lang *Language, caseSensitive, diacriticSensitive bool) *Query {
	q := &Query{Language: lang, CaseSensitive: caseSensitive, DiacriticSensitive: diacriticSensitive,
		positive: map[string]bool{}, negated: map[string]bool{}}
	var pos, neg strings.Builder
	inNeg, inPhrase := false, false
	quote := 0
	for _, t := range queryTokens(search) {
		switch {
		case t.delim == 0:
			if inPhrase && inNeg {
				continue // a negated phrase's words are not terms
			}
			if inNeg && t.afterSpace {
				inNeg = false
			}
			if inNeg {
				neg.WriteString(t.text)
				neg.WriteByte(' ')
			} else {
				pos.WriteString(t.text)
				pos.WriteByte(' ')
			}
		case t.delim == '-':
			if !inPhrase && t.afterSpace {
				inNeg = true
			}
		case inPhrase:
			phrase := search[quote+1 : t.offset]
			if inNeg {
				q.NegatedPhrases = append(q.NegatedPhrases, phrase)
			} else {
				q.Phrases = append(q.Phrases, phrase)
			}
			inPhrase = false
		default:
			inPhrase = true
			if inNeg && t.afterSpace {
				inNeg = false
			}
			quote = t.offset
		}
	}
	q.addTerms(pos.String(), false)
	q.addTerms(neg.String(), true)
	// mongod scans the terms in order, so a textScore adds up in this order.
	sort.Strings(q.Terms)
	return q
}

func (q *Query) addTerms(sentence string, negated bool) {
	seen := map[string]bool{}
	set := q.positive
	if negated {
		set = q.negated
	}
	q.Language.Tokenize(sentence, TokenOptions{FilterStopWords: true}, func(tok string) {
		if !negated && !seen[tok] {
			seen[tok] = true
			q.Terms = append(q.Terms, tok)
		}
		if !q.sensitive() {
			set[tok] = true
		}
	})
	if q.sensitive() {
		o := TokenOptions{FilterStopWords: true, CaseSensitive: q.CaseSensitive, DiacriticSensitive: q.DiacriticSensitive}
		q.Language.Tokenize(sentence, o, func(tok string) { set[tok] = true })
	}
}

func (q *Query) sensitive() bool { return q.CaseSensitive || q.DiacriticSensitive }

// NeedsMatcher reports whether documents the index finds for the query's
// terms must still be checked (Spec.Matches): for phrases, negations and
// case or diacritic sensitivity. Otherwise every document holding one of
// Terms matches.
func (q *Query) NeedsMatcher() bool {
	return q.sensitive() || len(q.negated) > 0 || len(q.Phrases) > 0 || len(q.NegatedPhrases) > 0
}
