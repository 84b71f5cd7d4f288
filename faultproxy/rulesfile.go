package faultproxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// RuleSet is the content of a rules file: a default seed and the rules.
//
// The file is JSON:
//
//	{
//	  "seed": 1,
//	  "rules": [
//	    {"name": "lose update replies",
//	     "match": {"commands": ["update"], "namespace": "app.counters", "appName": "worker"},
//	     "action": "drop-reply", "probability": 0.2, "times": 5},
//	    {"match": {"commands": ["insert"]}, "action": "error",
//	     "error": {"code": 91, "codeName": "ShutdownInProgress", "labels": ["RetryableWriteError"]}},
//	    {"match": {"commands": ["find"]}, "action": "delay", "delay": "250ms"},
//	    {"action": "shed", "baseBackoffMS": 50, "skip": 10, "times": 3}
//	  ]
//	}
//
// Rule fields: name, match {commands, namespace, appName, connectionId},
// action (drop-reply, drop-request, reset, delay, error, shed), delay and
// replyDelay (a Go duration string such as "250ms", or a number of
// milliseconds), error {code, codeName, errmsg, labels}, baseBackoffMS, rst,
// skip, times, probability, seed. A bare array of rules is accepted too.
// Unknown fields are errors.
type RuleSet struct {
	Seed  int64
	Rules []Rule
}

// RulesFileError locates a problem in a rules file.
type RulesFileError struct {
	Path   string // "" when parsed from bytes
	Line   int    // 1-based; 0 when unknown
	Column int
	Rule   int // index of the rule, -1 when the problem is outside the rules
	Err    error
}

func (e *RulesFileError) Error() string {
	var sb strings.Builder
	sb.WriteString("faultproxy: rules")
	if e.Path != "" {
		sb.WriteString(" file " + e.Path)
	}
	if e.Line > 0 {
		fmt.Fprintf(&sb, ":%d:%d", e.Line, e.Column)
	}
	if e.Rule >= 0 {
		var re *RuleError
		if !errors.As(e.Err, &re) {
			fmt.Fprintf(&sb, ": rule %d", e.Rule)
		}
	}
	msg := e.Err.Error()
	msg = strings.TrimPrefix(msg, "faultproxy: ")
	sb.WriteString(": " + msg)
	return sb.String()
}

func (e *RulesFileError) Unwrap() error { return e.Err }

// LoadRulesFile reads and parses a rules file.
func LoadRulesFile(path string) (RuleSet, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return RuleSet{}, err
	}
	rs, err := ParseRules(b)
	var fe *RulesFileError
	if errors.As(err, &fe) {
		fe.Path = path
	}
	return rs, err
}

// ParseRules parses the JSON rules format described at RuleSet and
// validates every rule.
func ParseRules(data []byte) (RuleSet, error) {
	p := rulesParser{data: data}
	return p.parse()
}

type rulesParser struct {
	data []byte
	dec  *json.Decoder
}

func (p *rulesParser) fail(offset int64, rule int, err error) error {
	line, col := lineCol(p.data, offset)
	return &RulesFileError{Line: line, Column: col, Rule: rule, Err: err}
}

// jsonErr turns a decoding error into a located RulesFileError; base is the
// offset of the value that was being decoded.
func (p *rulesParser) jsonErr(err error, base int64, rule int) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		// Offset counts the bytes read, the offending one included.
		return p.fail(base+max(se.Offset-1, 0), rule, errors.New(se.Error()))
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "value"
		}
		return p.fail(base+te.Offset, rule, fmt.Errorf("%s: cannot use JSON %s as %s", field, te.Value, te.Type))
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return p.fail(int64(len(p.data)), rule, errors.New("unexpected end of file"))
	}
	return p.fail(base, rule, errors.New(strings.TrimPrefix(err.Error(), "json: ")))
}

func (p *rulesParser) parse() (RuleSet, error) {
	var out RuleSet
	trimmed := bytes.TrimSpace(p.data)
	if len(trimmed) == 0 {
		return out, p.fail(0, -1, errors.New("empty rules file"))
	}
	p.dec = json.NewDecoder(bytes.NewReader(p.data))
	p.dec.UseNumber()
	tok, err := p.dec.Token()
	if err != nil {
		return out, p.jsonErr(err, 0, -1)
	}
	switch tok {
	case json.Delim('['):
		if out.Rules, err = p.rulesArray(); err != nil {
			return out, err
		}
	case json.Delim('{'):
		if err := p.topObject(&out); err != nil {
			return out, err
		}
	default:
		return out, p.fail(0, -1, errors.New("want a JSON object {\"seed\": ..., \"rules\": [...]} or an array of rules"))
	}
	if p.dec.More() {
		return out, p.fail(p.dec.InputOffset(), -1, errors.New("unexpected content after the rules"))
	}
	if _, err := newRuleSet(out.Rules, out.Seed); err != nil {
		var re *RuleError
		if errors.As(err, &re) {
			return out, &RulesFileError{Rule: re.Index, Err: err}
		}
		return out, &RulesFileError{Rule: -1, Err: err}
	}
	return out, nil
}

func (p *rulesParser) topObject(out *RuleSet) error {
	sawRules := false
	for p.dec.More() {
		at := p.dec.InputOffset()
		tok, err := p.dec.Token()
		if err != nil {
			return p.jsonErr(err, 0, -1)
		}
		key, _ := tok.(string)
		switch key {
		case "seed":
			var n json.Number
			valAt := p.dec.InputOffset()
			if err := p.dec.Decode(&n); err != nil {
				return p.fail(valAt, -1, errors.New("seed: want an integer"))
			}
			s, err := strconv.ParseInt(n.String(), 10, 64)
			if err != nil {
				return p.fail(valAt, -1, fmt.Errorf("seed: want an integer, got %s", n))
			}
			out.Seed = s
		case "rules":
			valAt := p.dec.InputOffset()
			tok, err := p.dec.Token()
			if err != nil {
				return p.jsonErr(err, 0, -1)
			}
			if tok != json.Delim('[') {
				return p.fail(valAt, -1, errors.New("rules: want an array of rules"))
			}
			if out.Rules, err = p.rulesArray(); err != nil {
				return err
			}
			sawRules = true
		default:
			return p.fail(at, -1, fmt.Errorf("unknown field %q; want seed or rules", key))
		}
	}
	if _, err := p.dec.Token(); err != nil { // the closing '}'
		return p.jsonErr(err, 0, -1)
	}
	if !sawRules {
		return p.fail(0, -1, errors.New("no \"rules\" array"))
	}
	return nil
}

// rulesArray decodes rules up to and including the closing ']'.
func (p *rulesParser) rulesArray() ([]Rule, error) {
	rules := []Rule{}
	for p.dec.More() {
		i := len(rules)
		var raw json.RawMessage
		if err := p.dec.Decode(&raw); err != nil {
			return nil, p.jsonErr(err, 0, i)
		}
		// InputOffset is now just past the rule; its start is len(raw) back.
		start := p.dec.InputOffset() - int64(len(raw))
		r, err := p.rule(raw, start, i)
		if err != nil {
			return nil, err
		}
		rules = append(rules, r)
	}
	if _, err := p.dec.Token(); err != nil { // the closing ']'
		return nil, p.jsonErr(err, 0, -1)
	}
	return rules, nil
}

// fileRule is one rule as written in a rules file.
type fileRule struct {
	Name  string `json:"name"`
	Match struct {
		Commands     []string `json:"commands"`
		Namespace    string   `json:"namespace"`
		AppName      string   `json:"appName"`
		ConnectionID int64    `json:"connectionId"`
	} `json:"match"`
	Action     *string      `json:"action"`
	Delay      fileDuration `json:"delay"`
	ReplyDelay fileDuration `json:"replyDelay"`
	Error      *struct {
		Code     int32    `json:"code"`
		CodeName string   `json:"codeName"`
		Errmsg   string   `json:"errmsg"`
		Labels   []string `json:"labels"`
	} `json:"error"`
	BaseBackoffMS int32   `json:"baseBackoffMS"`
	RST           bool    `json:"rst"`
	Skip          int     `json:"skip"`
	Times         int     `json:"times"`
	Probability   float64 `json:"probability"`
	Seed          int64   `json:"seed"`
}

// fileDuration is a Go duration string ("250ms") or a number of
// milliseconds.
type fileDuration time.Duration

func (d *fileDuration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("bad duration %q (want e.g. \"250ms\" or a number of milliseconds)", s)
		}
		*d = fileDuration(v)
		return nil
	}
	var ms float64
	if err := json.Unmarshal(b, &ms); err != nil {
		return fmt.Errorf("bad duration %s (want e.g. \"250ms\" or a number of milliseconds)", b)
	}
	if ms > float64(math.MaxInt64/int64(time.Millisecond)) || ms < -float64(math.MaxInt64/int64(time.Millisecond)) {
		return fmt.Errorf("duration %s ms is out of range", b)
	}
	*d = fileDuration(time.Duration(ms * float64(time.Millisecond)))
	return nil
}

func (p *rulesParser) rule(raw json.RawMessage, start int64, i int) (Rule, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var fr fileRule
	if err := dec.Decode(&fr); err != nil {
		return Rule{}, p.jsonErr(err, start, i)
	}
	r := Rule{
		Name: fr.Name,
		Match: Match{
			Commands:     fr.Match.Commands,
			Namespace:    fr.Match.Namespace,
			AppName:      fr.Match.AppName,
			ConnectionID: fr.Match.ConnectionID,
		},
		Skip: fr.Skip, Times: fr.Times, Probability: fr.Probability, Seed: fr.Seed,
	}
	if fr.Action == nil {
		return r, p.fail(start, i, &RuleError{Index: i, Name: r.Name, Field: "action", Err: fmt.Errorf("%w: missing; want one of %s", ErrInvalidRule, strings.Join(actionNames[:], ", "))})
	}
	kind, err := ParseActionKind(*fr.Action)
	if err != nil {
		return r, p.fail(start, i, &RuleError{Index: i, Name: r.Name, Field: "action", Err: fmt.Errorf("%w: %v", ErrInvalidRule, err)})
	}
	r.Action = Action{Kind: kind, Delay: time.Duration(fr.Delay), ReplyDelay: time.Duration(fr.ReplyDelay), BaseBackoffMS: fr.BaseBackoffMS, RST: fr.RST}
	if fr.Error != nil {
		if kind != Error {
			return r, p.fail(start, i, &RuleError{Index: i, Name: r.Name, Field: "error", Err: fmt.Errorf("%w: only the error action takes an error document, this is %s", ErrInvalidRule, kind)})
		}
		r.Action.Error = CommandError{Code: fr.Error.Code, CodeName: fr.Error.CodeName, Message: fr.Error.Errmsg, Labels: fr.Error.Labels}
	}
	if err := r.validate(i); err != nil {
		return r, p.fail(start, i, err)
	}
	return r, nil
}

// lineCol converts a byte offset into a 1-based line and column.
func lineCol(data []byte, offset int64) (line, col int) {
	if offset < 0 {
		offset = 0
	}
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	before := data[:offset]
	line = bytes.Count(before, []byte{'\n'}) + 1
	col = int(offset) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}
