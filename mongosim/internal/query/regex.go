package query

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// regexLeaf matches strings (and symbols) against a regular expression, and
// regex values equal to it, as {field: /re/} does in MongoDB.
type regexLeaf struct {
	re      *regexp.Regexp
	pattern string
	options string
}

func (l *regexLeaf) matches(v any) bool {
	switch x := v.(type) {
	case string:
		return l.re.MatchString(x)
	case bson.Symbol:
		return l.re.MatchString(string(x))
	case bson.Regex:
		return x.Pattern == l.pattern && x.Options == l.options
	}
	return false
}

func newRegexLeaf(pattern, options string) (*regexLeaf, error) {
	re, err := CompileRegex(pattern, options)
	if err != nil {
		return nil, err
	}
	return &regexLeaf{re: re, pattern: pattern, options: options}, nil
}

// CompileRegex translates a MongoDB (PCRE) regular expression with its
// options (i, m, s, x; u is accepted and implied) into a Go regexp. PCRE
// constructs RE2 cannot run (lookaround, backreferences, possessive
// quantifiers...) give a NotImplemented error rather than a wrong match.
func CompileRegex(pattern, options string) (*regexp.Regexp, error) {
	if strings.IndexByte(pattern, 0) >= 0 {
		return nil, cmderr.New(51091, "Regular expression is invalid: pattern contains a null byte")
	}
	var flags strings.Builder
	multiline, extended := false, false
	for _, c := range options {
		switch c {
		case 'i', 's':
			flags.WriteRune(c)
		case 'm':
			multiline = true
			flags.WriteRune(c)
		case 'x':
			extended = true
		case 'u':
		default:
			return nil, cmderr.New(51108, "invalid flag in regex options: %c", c)
		}
	}
	translated := translatePCRE(pattern, extended, multiline)
	src := translated
	if flags.Len() > 0 {
		src = "(?" + flags.String() + ")" + translated
	}
	re, err := regexp.Compile(src)
	if err != nil {
		var se *syntax.Error
		if errors.As(err, &se) {
			switch se.Code {
			case syntax.ErrInvalidPerlOp, syntax.ErrInvalidEscape, syntax.ErrInvalidRepeatOp,
				syntax.ErrInvalidRepeatSize, syntax.ErrInvalidNamedCapture, syntax.ErrInvalidCharRange:
				if se.Code != syntax.ErrInvalidCharRange || strings.Contains(pattern, "[[:") {
					return nil, cmderr.Unsupported(fmt.Sprintf("regular expression /%s/%s: %s `%s` (Go RE2 syntax)", pattern, options, se.Code, se.Expr))
				}
			}
		}
		return nil, cmderr.New(51091, "Regular expression is invalid: %v", err)
	}
	return re, nil
}

// translatePCRE rewrites the PCRE features RE2 spells differently:
//   - x (extended): unescaped whitespace and #-comments outside character
//     classes are dropped;
//   - without m, PCRE's $ also matches before a final newline;
//   - \Z (end or before a final newline).
func translatePCRE(p string, extended, multiline bool) string {
	var b strings.Builder
	inClass := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\\' && i+1 < len(p):
			if !inClass && p[i+1] == 'Z' {
				b.WriteString(`(?:\n?\z)`)
			} else {
				b.WriteByte(c)
				b.WriteByte(p[i+1])
			}
			i++
			continue
		case inClass:
			if c == ']' {
				inClass = false
			}
		case c == '[':
			inClass = true
			b.WriteByte(c)
			// a ']' right after '[' or '[^' is literal
			if i+1 < len(p) && p[i+1] == '^' {
				b.WriteByte('^')
				i++
			}
			if i+1 < len(p) && p[i+1] == ']' {
				b.WriteByte(']')
				i++
			}
			continue
		case extended && (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'):
			continue
		case extended && c == '#':
			for i < len(p) && p[i] != '\n' {
				i++
			}
			continue
		case c == '$' && !multiline:
			b.WriteString(`(?:\n?\z)`)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
