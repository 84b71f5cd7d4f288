package expr

import (
	"regexp"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// RegexCompiler translates a MongoDB (PCRE) pattern and options into a Go
// regexp; package query sets it to the translation its $regex uses.
var RegexCompiler func(pattern, options string) (*regexp.Regexp, error)

func init() {
	for _, name := range []string{"$regexMatch", "$regexFind", "$regexFindAll"} {
		operators[name] = compileRegexOp
	}
}

// $regexMatch, $regexFind and $regexFindAll: {input, regex, options}.
func compileRegexOp(name string, args any) (evalFn, error) {
	d, ok := asDoc(args)
	if !ok {
		return nil, cmderr.New(51103, "%s expects an object of named arguments but found: %s", name, typeName(args))
	}
	m, err := keepNamed(d, func(key string) error { return cmderr.New(31024, "%s found an unknown argument: %s", name, key) }, "input", "regex", "options")
	if err != nil {
		return nil, err
	}
	if _, ok := m["input"]; !ok {
		return nil, cmderr.New(31022, "%s requires 'input' parameter", name)
	}
	if _, ok := m["regex"]; !ok {
		return nil, cmderr.New(31023, "%s requires 'regex' parameter", name)
	}
	op := regexOp{name: name}
	if op.fns, err = namedFns(m, "input", "regex", "options"); err != nil {
		return nil, err
	}
	// A literal pattern is compiled once, here.
	_, isRegex := m["regex"].(bson.Regex)
	if (isLiteral(m["regex"]) || isRegex) && isLiteral(m["options"]) && RegexCompiler != nil {
		if p, o, ok := literalPattern(m["regex"], m["options"]); ok {
			if op.fixed, err = RegexCompiler(p, o); err != nil {
				return nil, err
			}
		}
	}
	return op.eval, nil
}

// regexOp is a compiled $regexMatch, $regexFind or $regexFindAll: fns are
// input, regex and options; fixed is the regex when it is a literal.
type regexOp struct {
	name  string
	fns   []evalFn
	fixed *regexp.Regexp
}

func (op regexOp) eval(s *scope) (any, error) {
	vals, err := evalAll(s, op.fns)
	if err != nil {
		return nil, err
	}
	input, rx := vals[0], vals[1]
	pattern, options, err := op.patternArgs(rx, vals[2])
	if err != nil {
		return nil, err
	}
	str, isStr := input.(string)
	if !isStr && !IsNullish(input) {
		return nil, cmderr.New(51104, "%s needs 'input' to be of type string", op.name)
	}
	if !isStr || IsNullish(rx) {
		return op.noMatch(), nil
	}
	if RegexCompiler == nil {
		return nil, cmderr.Unsupported("expression operator " + op.name)
	}
	re := op.fixed
	if re == nil {
		if re, err = RegexCompiler(pattern, options); err != nil {
			return nil, err
		}
	}
	return op.apply(re, str), nil
}

// patternArgs checks the evaluated regex and options arguments: options may
// come from a regex value or from 'options', not both.
func (op regexOp) patternArgs(rx, opts any) (pattern, options string, err error) {
	switch r := rx.(type) {
	case string:
		pattern = r
	case bson.Regex:
		pattern, options = r.Pattern, r.Options
	default:
		if !IsNullish(rx) {
			return "", "", cmderr.New(51105, "%s needs 'regex' to be of type string or regex", op.name)
		}
	}
	if !IsNullish(opts) {
		o, ok := opts.(string)
		if !ok {
			return "", "", cmderr.New(51106, "%s needs 'options' to be of type string", op.name)
		}
		if options != "" && o != "" {
			return "", "", cmderr.New(51107, "%s found regex option(s) specified in both 'regex' and 'option' fields", op.name)
		}
		if o != "" {
			options = o
		}
	}
	return pattern, options, nil
}

// noMatch is the result for a null input or regex.
func (op regexOp) noMatch() any {
	switch op.name {
	case "$regexMatch":
		return false
	case "$regexFind":
		return nil
	}
	return bson.A{}
}

func (op regexOp) apply(re *regexp.Regexp, str string) any {
	switch op.name {
	case "$regexMatch":
		return re.MatchString(str)
	case "$regexFind":
		loc := re.FindStringSubmatchIndex(str)
		if loc == nil {
			return nil
		}
		return regexResult(str, loc)
	}
	out := bson.A{}
	for _, loc := range re.FindAllStringSubmatchIndex(str, -1) {
		out = append(out, regexResult(str, loc))
	}
	return out
}

// regexResult is {match, idx, captures}; idx counts code points and an
// unmatched group captures null.
func regexResult(s string, loc []int) bson.D {
	captures := bson.A{}
	for g := 2; g+1 < len(loc); g += 2 {
		if loc[g] < 0 {
			captures = append(captures, nil)
			continue
		}
		captures = append(captures, s[loc[g]:loc[g+1]])
	}
	return bson.D{
		{Key: "match", Value: s[loc[0]:loc[1]]},
		{Key: "idx", Value: int32(utf8.RuneCountInString(s[:loc[0]]))},
		{Key: "captures", Value: captures},
	}
}

// literalPattern is the pattern and options of a literal regex argument;
// ok is false when they would fail (left to evaluation to report).
func literalPattern(rx, opts any) (pattern, options string, ok bool) {
	switch r := rx.(type) {
	case string:
		pattern = r
	case bson.Regex:
		pattern, options = r.Pattern, r.Options
	default:
		return "", "", false
	}
	switch o := opts.(type) {
	case nil:
	case string:
		if options != "" && o != "" {
			return "", "", false
		}
		if o != "" {
			options = o
		}
	default:
		return "", "", false
	}
	return pattern, options, true
}
