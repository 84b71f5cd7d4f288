package faultproxy

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
)

// ActionKind says what a rule does to a request it fires on.
type ActionKind int

// The actions. Every action first waits Action.Delay, if set.
const (
	// Delay forwards the request after Action.Delay and passes the
	// server's reply on after Action.ReplyDelay. It is the zero value.
	Delay ActionKind = iota
	// DropReply forwards the request, waits for the server's reply (so the
	// server has applied the command) and closes the client connection
	// instead of passing the reply on: a network error after the write.
	DropReply
	// DropRequest closes the client connection without forwarding: a
	// network error before the server saw the command.
	DropRequest
	// Reset is DropRequest with a TCP reset (RST) instead of an orderly
	// close.
	Reset
	// Error answers with a command error (Action.Error) without forwarding.
	Error
	// Shed answers as an overloaded server does, without forwarding: code
	// 462 (IngressRequestRateLimitExceeded) with the SystemOverloadedError
	// and RetryableError labels and, when Action.BaseBackoffMS is positive,
	// baseBackoffMS.
	Shed
)

var actionNames = [...]string{Delay: "delay", DropReply: "drop-reply", DropRequest: "drop-request", Reset: "reset", Error: "error", Shed: "shed"}

// String returns the action's name as used in rules files and flags.
func (k ActionKind) String() string {
	if k >= 0 && int(k) < len(actionNames) {
		return actionNames[k]
	}
	return fmt.Sprintf("action(%d)", int(k))
}

// ParseActionKind parses an action name ("drop-reply", "drop-request",
// "reset", "delay", "error", "shed"; case-insensitive, '_' for '-' accepted).
func ParseActionKind(s string) (ActionKind, error) {
	norm := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "_", "-")
	for k, name := range actionNames {
		if norm == name {
			return ActionKind(k), nil
		}
	}
	return 0, fmt.Errorf("unknown action %q; want one of %s", s, strings.Join(actionNames[:], ", "))
}

// CommandError is the error an Error action answers with.
type CommandError struct {
	Code     int32
	CodeName string   // optional
	Message  string   // errmsg; default "error injected by faultproxy"
	Labels   []string // errorLabels, e.g. "RetryableWriteError"
}

// Action is what a rule does when it fires.
type Action struct {
	Kind ActionKind
	// Delay is waited before anything else: before forwarding, answering
	// or closing.
	Delay time.Duration
	// ReplyDelay is waited after the server replied, before the reply is
	// passed on (Delay) or the connection closed (DropReply).
	ReplyDelay time.Duration
	// Error is the reply of an Error action; Code must be set.
	Error CommandError
	// BaseBackoffMS, when positive, is sent as baseBackoffMS by Shed.
	BaseBackoffMS int32
	// RST makes DropReply and DropRequest close the client connection with
	// a TCP reset instead of a FIN.
	RST bool
}

// Match selects requests. Every field that is set must match; the zero
// Match matches every request except the handshake and authentication
// commands (hello, isMaster, saslStart, saslContinue, authenticate,
// getnonce), which a rule matches only when Commands names them: a catch-all
// rule would otherwise stop drivers from connecting and monitoring at all.
type Match struct {
	// Commands are command names, compared case-insensitively.
	Commands []string
	// Namespace is a database name ("app") or a namespace ("app.counters");
	// a command with several namespaces (bulkWrite) matches if any does.
	Namespace string
	// AppName is the appName the connection's handshake sent, exactly.
	AppName string
	// ConnectionID is the proxy's id of the client connection (1 for the
	// first connection the proxy accepted, then 2, ...).
	ConnectionID int64
}

// Rule is one fault: which requests, what happens, and how often.
type Rule struct {
	Name   string // for counters and logs; default "rule <index>"
	Match  Match
	Action Action
	// Skip lets this many matching requests through before the rule can
	// fire.
	Skip int
	// Times is how often the rule fires at most; 0 means without limit.
	Times int
	// Probability is the chance that an eligible matching request fires
	// the rule, in (0, 1]; 0 means 1.
	Probability float64
	// Seed seeds this rule's probability draws; 0 derives one from
	// Options.Seed and the rule's position.
	Seed int64
}

// RuleError is a rule that SetRules, Start or the rules file rejected.
type RuleError struct {
	Index int    // position of the rule, from 0
	Name  string // the rule's name, if it has one
	Field string // the offending field, e.g. "probability"
	Err   error
}

func (e *RuleError) Error() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "faultproxy: rule %d", e.Index)
	if e.Name != "" {
		fmt.Fprintf(&sb, " (%q)", e.Name)
	}
	if e.Field != "" {
		sb.WriteString(": " + e.Field)
	}
	sb.WriteString(": " + e.Err.Error())
	return sb.String()
}

func (e *RuleError) Unwrap() error { return e.Err }

// ErrInvalidRule is wrapped by every RuleError.
var ErrInvalidRule = errors.New("invalid rule")

func ruleErr(i int, r *Rule, field, format string, args ...any) error {
	return &RuleError{Index: i, Name: r.Name, Field: field, Err: fmt.Errorf("%w: %s", ErrInvalidRule, fmt.Sprintf(format, args...))}
}

// ValidateRules checks rules as Start and SetRules do, returning a
// *RuleError for the first bad one.
func ValidateRules(rules []Rule) error {
	for i := range rules {
		if err := rules[i].validate(i); err != nil {
			return err
		}
	}
	return nil
}

// validate checks one rule; i is its position, for the error.
func (r *Rule) validate(i int) error {
	a := &r.Action
	if a.Kind < Delay || a.Kind > Shed {
		return ruleErr(i, r, "action", "unknown action %d", int(a.Kind))
	}
	if r.Skip < 0 {
		return ruleErr(i, r, "skip", "must not be negative, got %d", r.Skip)
	}
	if r.Times < 0 {
		return ruleErr(i, r, "times", "must not be negative, got %d", r.Times)
	}
	if math.IsNaN(r.Probability) || r.Probability < 0 || r.Probability > 1 {
		return ruleErr(i, r, "probability", "must be between 0 and 1, got %v", r.Probability)
	}
	if a.Delay < 0 || a.ReplyDelay < 0 {
		return ruleErr(i, r, "delay", "must not be negative")
	}
	if r.Match.ConnectionID < 0 {
		return ruleErr(i, r, "connectionId", "must not be negative, got %d", r.Match.ConnectionID)
	}
	for _, c := range r.Match.Commands {
		if strings.TrimSpace(c) == "" {
			return ruleErr(i, r, "commands", "empty command name")
		}
	}
	if ns := r.Match.Namespace; ns != "" && (strings.HasPrefix(ns, ".") || strings.HasSuffix(ns, ".")) {
		return ruleErr(i, r, "namespace", "%q is neither \"db\" nor \"db.collection\"", ns)
	}
	switch a.Kind {
	case Delay:
		if a.Delay == 0 && a.ReplyDelay == 0 {
			return ruleErr(i, r, "delay", "a delay action needs delay or replyDelay")
		}
	case Error:
		if a.Error.Code == 0 {
			return ruleErr(i, r, "error.code", "an error action needs a non-zero code")
		}
	case DropReply:
	default:
		if a.ReplyDelay != 0 {
			return ruleErr(i, r, "replyDelay", "only delay and drop-reply wait for a reply, %s does not", a.Kind)
		}
	}
	if a.Kind != Shed && a.BaseBackoffMS != 0 {
		return ruleErr(i, r, "baseBackoffMS", "only shed sends baseBackoffMS")
	}
	if a.BaseBackoffMS < 0 {
		return ruleErr(i, r, "baseBackoffMS", "must not be negative")
	}
	if a.RST && a.Kind != DropReply && a.Kind != DropRequest && a.Kind != Reset {
		return ruleErr(i, r, "rst", "only drop-reply, drop-request and reset close connections")
	}
	return nil
}

// RuleCount is how often one rule matched a request and fired.
type RuleCount struct {
	Name    string
	Matched int64
	Fired   int64
}

// request is what rules match on.
type request struct {
	command    string
	db         string
	namespaces []string // "db.coll" for each collection the command names
	appName    string
	connID     int64
}

func (m *Match) matches(q *request) bool {
	if len(m.Commands) > 0 {
		found := false
		for _, c := range m.Commands {
			if strings.EqualFold(c, q.command) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	} else if handshakeCommands[strings.ToLower(q.command)] {
		return false
	}
	if m.Namespace != "" {
		if !strings.Contains(m.Namespace, ".") {
			if m.Namespace != q.db {
				return false
			}
		} else if !containsString(q.namespaces, m.Namespace) {
			return false
		}
	}
	if m.AppName != "" && m.AppName != q.appName {
		return false
	}
	if m.ConnectionID != 0 && m.ConnectionID != q.connID {
		return false
	}
	return true
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// ruleSet is the installed rules and their counters. One mutex orders the
// decisions, so each rule sees its matching requests one at a time and its
// draws are a pure function of its seed and their order.
type ruleSet struct {
	mu    sync.Mutex
	rules []ruleState
}

type ruleState struct {
	Rule
	rng     *rand.Rand // nil when Probability is 1
	matched int64
	fired   int64
}

// newRuleSet validates rules and prepares their state; defaultSeed is
// Options.Seed (0 means 1).
func newRuleSet(rules []Rule, defaultSeed int64) (*ruleSet, error) {
	if defaultSeed == 0 {
		defaultSeed = 1
	}
	rs := &ruleSet{rules: make([]ruleState, len(rules))}
	for i := range rules {
		r := rules[i]
		if err := r.validate(i); err != nil {
			return nil, err
		}
		r.Match.Commands = append([]string(nil), r.Match.Commands...)
		r.Action.Error.Labels = append([]string(nil), r.Action.Error.Labels...)
		if r.Name == "" {
			r.Name = fmt.Sprintf("rule %d", i)
		}
		if r.Probability == 0 {
			r.Probability = 1
		}
		st := ruleState{Rule: r}
		if r.Probability < 1 {
			seed := uint64(r.Seed)
			stream := uint64(0)
			if r.Seed == 0 {
				seed, stream = uint64(defaultSeed), uint64(i)+1
			}
			st.rng = rand.New(rand.NewPCG(seed, stream))
		}
		rs.rules[i] = st
	}
	return rs, nil
}

// decide returns the action of the first rule that fires on q.
func (rs *ruleSet) decide(q *request) (idx int, a Action, fired bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for i := range rs.rules {
		r := &rs.rules[i]
		if !r.Match.matches(q) {
			continue
		}
		r.matched++
		if r.matched <= int64(r.Skip) {
			continue
		}
		if r.Times > 0 && r.fired >= int64(r.Times) {
			continue
		}
		if r.rng != nil && r.rng.Float64() >= r.Probability {
			continue
		}
		r.fired++
		return i, r.Action, true
	}
	return -1, Action{}, false
}

func (rs *ruleSet) counts() []RuleCount {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	out := make([]RuleCount, len(rs.rules))
	for i, r := range rs.rules {
		out[i] = RuleCount{Name: r.Name, Matched: r.matched, Fired: r.fired}
	}
	return out
}

func (rs *ruleSet) name(i int) string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if i < 0 || i >= len(rs.rules) {
		return ""
	}
	return rs.rules[i].Name
}
