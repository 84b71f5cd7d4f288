package faultproxy

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// firings runs n requests named cmd through one rule and returns the
// indexes it fired on.
func firings(t *testing.T, r Rule, defaultSeed int64, n int) []int {
	t.Helper()
	rs, err := newRuleSet([]Rule{r}, defaultSeed)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for i := range n {
		if _, _, ok := rs.decide(&request{command: "insert"}); ok {
			out = append(out, i)
		}
	}
	return out
}

func TestSkipTimes(t *testing.T) {
	r := Rule{Action: Action{Kind: Reset}, Skip: 3, Times: 2}
	if got := firings(t, r, 0, 10); !slices.Equal(got, []int{3, 4}) {
		t.Errorf("skip 3 times 2 fired on %v, want [3 4]", got)
	}
	r = Rule{Action: Action{Kind: Reset}}
	if got := firings(t, r, 0, 4); !slices.Equal(got, []int{0, 1, 2, 3}) {
		t.Errorf("unlimited rule fired on %v", got)
	}
}

func TestProbabilityIsSeeded(t *testing.T) {
	r := Rule{Action: Action{Kind: Reset}, Probability: 0.2}
	a := firings(t, r, 5, 10000)
	b := firings(t, r, 5, 10000)
	if !slices.Equal(a, b) {
		t.Fatal("same seed, different firings")
	}
	if len(a) < 1800 || len(a) > 2200 {
		t.Errorf("probability 0.2 fired %d of 10000 times", len(a))
	}
	if c := firings(t, r, 6, 10000); slices.Equal(a, c) {
		t.Error("different seeds, same firings")
	}
	r.Seed = 77 // the rule's own seed wins over the default
	if d, e := firings(t, r, 5, 1000), firings(t, r, 6, 1000); !slices.Equal(d, e) {
		t.Error("rule seed did not override the default seed")
	}
	// Skip and Times combine with the draws: nothing before the skip, at
	// most Times firings.
	r = Rule{Action: Action{Kind: Reset}, Probability: 0.5, Skip: 10, Times: 4}
	got := firings(t, r, 1, 100)
	if len(got) != 4 || got[0] < 10 {
		t.Errorf("skip 10 times 4 p 0.5 fired on %v", got)
	}
}

// The first rule that fires wins; a rule that matches but does not fire
// (skipped, exhausted) lets later rules decide.
func TestRuleOrderAndCounts(t *testing.T) {
	rs, err := newRuleSet([]Rule{
		{Name: "first two", Match: Match{Commands: []string{"INSERT"}}, Action: Action{Kind: DropRequest}, Times: 2},
		{Match: Match{Commands: []string{"insert", "update"}}, Action: Action{Kind: Shed}},
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []ActionKind
	for _, cmd := range []string{"insert", "insert", "insert", "update", "find"} {
		if _, a, ok := rs.decide(&request{command: cmd}); ok {
			kinds = append(kinds, a.Kind)
		}
	}
	if !slices.Equal(kinds, []ActionKind{DropRequest, DropRequest, Shed, Shed}) {
		t.Errorf("actions %v", kinds)
	}
	want := []RuleCount{{Name: "first two", Matched: 3, Fired: 2}, {Name: "rule 1", Matched: 2, Fired: 2}}
	if got := rs.counts(); !slices.Equal(got, want) {
		t.Errorf("counts %+v, want %+v", got, want)
	}
}

func TestMatch(t *testing.T) {
	q := &request{command: "update", db: "app", namespaces: []string{"app.counters"}, appName: "worker", connID: 4}
	cases := []struct {
		m    Match
		want bool
	}{
		{Match{}, true},
		{Match{Commands: []string{"Update"}}, true},
		{Match{Commands: []string{"insert"}}, false},
		{Match{Namespace: "app"}, true},
		{Match{Namespace: "other"}, false},
		{Match{Namespace: "app.counters"}, true},
		{Match{Namespace: "app.other"}, false},
		{Match{AppName: "worker"}, true},
		{Match{AppName: "Worker"}, false},
		{Match{ConnectionID: 4}, true},
		{Match{ConnectionID: 5}, false},
		{Match{Commands: []string{"update"}, Namespace: "app.counters", AppName: "worker", ConnectionID: 4}, true},
		{Match{Commands: []string{"update"}, Namespace: "app.counters", AppName: "other"}, false},
	}
	for _, tc := range cases {
		if got := tc.m.matches(q); got != tc.want {
			t.Errorf("%+v matches = %v, want %v", tc.m, got, tc.want)
		}
	}
	// Handshake commands only match rules that name them.
	hello := &request{command: "isMaster", db: "admin"}
	if (&Match{}).matches(hello) || (&Match{Namespace: "admin"}).matches(hello) {
		t.Error("catch-all rule matched the handshake")
	}
	if !(&Match{Commands: []string{"ismaster"}}).matches(hello) {
		t.Error("rule naming isMaster did not match it")
	}
}

func TestValidate(t *testing.T) {
	bad := []Rule{
		{Action: Action{Kind: ActionKind(99)}},
		{Action: Action{Kind: Delay}},
		{Action: Action{Kind: Error}},
		{Action: Action{Kind: Reset}, Skip: -1},
		{Action: Action{Kind: Reset}, Probability: -0.1},
		{Action: Action{Kind: Reset, Delay: -time.Second}},
		{Action: Action{Kind: Error, Error: CommandError{Code: 1}, RST: true}},
		{Action: Action{Kind: Reset}, Match: Match{Commands: []string{" "}}},
		{Action: Action{Kind: Reset}, Match: Match{ConnectionID: -1}},
	}
	for i, r := range bad {
		_, err := newRuleSet([]Rule{{Action: Action{Kind: Shed}}, r}, 0)
		var re *RuleError
		if !errors.As(err, &re) || re.Index != 1 || !errors.Is(err, ErrInvalidRule) {
			t.Errorf("case %d: %v", i, err)
		}
	}
	for _, name := range []string{"drop-reply", "DROP_REQUEST", "reset", "delay", "error", "shed"} {
		k, err := ParseActionKind(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if back, _ := ParseActionKind(k.String()); back != k {
			t.Errorf("%s does not round-trip", name)
		}
	}
}
