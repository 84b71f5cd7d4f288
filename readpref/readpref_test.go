package readpref

import (
	"strings"
	"testing"
	"time"
)

func TestModeNamesRoundTrip(t *testing.T) {
	for m := Primary; m <= Nearest; m++ {
		for _, s := range []string{m.String(), strings.ToUpper(m.String()), strings.ToLower(m.String())} {
			if got, ok := ParseMode(s); !ok || got != m {
				t.Errorf("ParseMode(%q) = %v, %v; want %v", s, got, ok, m)
			}
		}
	}
	for _, s := range []string{"", "fastest", "primary ", "ſecondary"} { // ſ folds to s in Unicode, not in mode names
		if m, ok := ParseMode(s); ok {
			t.Errorf("ParseMode(%q) = %v, want no mode", s, m)
		}
	}
	if Mode(42).Valid() || Mode(-1).Valid() || Mode(42).String() != "ReadMode(42)" {
		t.Error("an unknown mode passed as valid or was named")
	}
}

func TestMinMaxStaleness(t *testing.T) {
	if got := MinMaxStaleness(10 * time.Second); got != 90*time.Second {
		t.Errorf("heartbeat 10 s: %v, want 90 s", got)
	}
	if got := MinMaxStaleness(100 * time.Second); got != 110*time.Second {
		t.Errorf("heartbeat 100 s: %v, want 110 s", got)
	}
}

func TestValidate(t *testing.T) {
	ok := []ReadPref{
		{},
		{Mode: Primary, TagSets: []TagSet{{}, {}}}, // empty tag sets match every server
		{Mode: Nearest, TagSets: []TagSet{{"dc": "ny"}}, MaxStaleness: 90 * time.Second},
	}
	for _, rp := range ok {
		if err := rp.Validate(); err != nil {
			t.Errorf("%+v: %v", rp, err)
		}
	}
	bad := map[string]ReadPref{
		"unknown mode":                 {Mode: Mode(42)},
		"negative maxStaleness":        {Mode: Secondary, MaxStaleness: -time.Second},
		"maxStaleness cannot be used":  {MaxStaleness: 120 * time.Second},
		"tag sets cannot be used with": {TagSets: []TagSet{{}, {"dc": "ny"}}},
	}
	for want, rp := range bad {
		if err := rp.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: got %v, want %q", rp, err, want)
		}
	}
}
