package faultproxy

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseRulesFile(t *testing.T) {
	src := `{
  "seed": 42,
  "rules": [
    {"name": "lose update replies",
     "match": {"commands": ["update"], "namespace": "app.counters", "appName": "worker", "connectionId": 3},
     "action": "drop-reply", "probability": 0.2, "times": 5, "skip": 1, "rst": true, "replyDelay": 20},
    {"match": {"commands": ["insert"]}, "action": "error",
     "error": {"code": 91, "codeName": "ShutdownInProgress", "errmsg": "bye", "labels": ["RetryableWriteError"]}},
    {"match": {"commands": ["find"]}, "action": "delay", "delay": "250ms", "seed": 9},
    {"action": "shed", "baseBackoffMS": 50},
    {"action": "RESET"}
  ]
}`
	got, err := ParseRules([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := RuleSet{Seed: 42, Rules: []Rule{
		{Name: "lose update replies", Match: Match{Commands: []string{"update"}, Namespace: "app.counters", AppName: "worker", ConnectionID: 3},
			Action: Action{Kind: DropReply, RST: true, ReplyDelay: 20 * time.Millisecond}, Probability: 0.2, Times: 5, Skip: 1},
		{Match: Match{Commands: []string{"insert"}}, Action: Action{Kind: Error, Error: CommandError{Code: 91, CodeName: "ShutdownInProgress", Message: "bye", Labels: []string{"RetryableWriteError"}}}},
		{Match: Match{Commands: []string{"find"}}, Action: Action{Kind: Delay, Delay: 250 * time.Millisecond}, Seed: 9},
		{Action: Action{Kind: Shed, BaseBackoffMS: 50}},
		{Action: Action{Kind: Reset}},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parsed\n%+v\nwant\n%+v", got, want)
	}

	arr, err := ParseRules([]byte(`[{"action": "drop-request", "times": 1}]`))
	if err != nil || len(arr.Rules) != 1 || arr.Rules[0].Action.Kind != DropRequest {
		t.Errorf("bare array: %+v, %v", arr, err)
	}
}

// Every mistake names where it is and what is wrong.
func TestParseRulesErrors(t *testing.T) {
	cases := []struct {
		name, src string
		want      []string // substrings of the message
	}{
		{"empty", "  ", []string{"empty rules file"}},
		{"not json", "rules: []", []string{":1:1", "invalid character"}},
		{"scalar", `42`, []string{"want a JSON object"}},
		{"syntax in rule", "{\"rules\": [\n  {\"action\": \"reset\",}\n]}", []string{":2:", "invalid character"}},
		{"truncated", `{"rules": [{"action": "reset"}`, []string{"unexpected end"}},
		{"unknown top field", `{"rulez": []}`, []string{`unknown field "rulez"`, ":1:2"}},
		{"no rules", `{"seed": 1}`, []string{`no "rules" array`}},
		{"bad seed", `{"seed": "x", "rules": []}`, []string{"seed: want an integer"}},
		{"rules not array", `{"rules": {}}`, []string{"rules: want an array"}},
		{"unknown action", "{\"rules\": [\n {\"action\": \"reset\"},\n {\"name\": \"x\", \"action\": \"explode\"}\n]}", []string{":3:2", `rule 1 ("x")`, `unknown action "explode"`, "drop-reply"}},
		{"missing action", `[{"times": 1}]`, []string{"rule 0", "action", "missing"}},
		{"unknown rule field", "[\n {\"action\": \"reset\", \"tims\": 1}\n]", []string{"rule 0", `unknown field "tims"`, ":2:"}},
		{"unknown match field", `[{"action": "reset", "match": {"command": "insert"}}]`, []string{"rule 0", `unknown field "command"`}},
		{"wrong type", `[{"action": "reset", "times": "five"}]`, []string{"rule 0", "times", "string"}},
		{"bad probability", `[{"action": "reset", "probability": 1.5}]`, []string{"rule 0", "probability", "between 0 and 1"}},
		{"negative times", `[{"action": "reset", "times": -1}]`, []string{"times", "negative"}},
		{"bad duration", `[{"action": "delay", "delay": "soon"}]`, []string{"rule 0", `bad duration "soon"`}},
		{"delay without delay", `[{"action": "delay"}]`, []string{"delay action needs delay or replyDelay"}},
		{"error without code", `[{"action": "error", "error": {"errmsg": "x"}}]`, []string{"error.code", "non-zero code"}},
		{"error doc on other action", `[{"action": "shed", "error": {"code": 1}}]`, []string{"only the error action"}},
		{"backoff on error", `[{"action": "reset", "baseBackoffMS": 5}]`, []string{"only shed"}},
		{"rst on shed", `[{"action": "shed", "rst": true}]`, []string{"rst"}},
		{"replyDelay on reset", `[{"action": "reset", "replyDelay": "1s"}]`, []string{"replyDelay"}},
		{"bad namespace", `[{"action": "reset", "match": {"namespace": ".c"}}]`, []string{"namespace"}},
		{"trailing", `[] []`, []string{"unexpected content"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRules([]byte(tc.src))
			if err == nil {
				t.Fatal("no error")
			}
			var fe *RulesFileError
			if !errors.As(err, &fe) {
				t.Fatalf("error %T is not a *RulesFileError: %v", err, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestLoadRulesFileNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.json")
	if err := os.WriteFile(path, []byte("[\n{\"action\": \"nope\"}]"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadRulesFile(path)
	if err == nil || !strings.Contains(err.Error(), path+":2:1") {
		t.Fatalf("error %v does not name %s:2:1", err, path)
	}
	var re *RuleError
	if !errors.As(err, &re) || re.Index != 0 || !errors.Is(err, ErrInvalidRule) {
		t.Errorf("error does not unwrap to the RuleError: %v", err)
	}
	if _, err := LoadRulesFile(filepath.Join(t.TempDir(), "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}
