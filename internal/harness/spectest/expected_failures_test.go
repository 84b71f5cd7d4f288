package spectest

import (
	"testing"

	"github.com/sturdy-go/sturdy/mongosim"
)

// mongosim's missing features are expected failures against mongosim
// only: against MongoDB the same tests must pass. The runner tells the two
// apart by what the server says of itself.
func TestKnownFailuresOfMongosimApplyOnlyToMongosim(t *testing.T) {
	r := startRunner(t, Config{URI: mongosim.Start(t).URI()})
	if !r.Mongosim() {
		t.Fatal("the runner does not recognise mongosim")
	}
	// mongosim has no known failures of its own left; an example entry
	// proves the rule.
	const file, test = "crud/example.json", "an example test"
	saved := expectedFailures
	t.Cleanup(func() { expectedFailures = saved })
	expectedFailures = append(saved[:len(saved):len(saved)], expectedFailure{File: file, Test: test, Reason: "mongosim: an example of a missing feature"})
	if knownFailure(file, test, "replicaset", r.Mongosim()) == "" {
		t.Errorf("%s is not a known failure against mongosim", file)
	}
	if why := knownFailure(file, test, "replicaset", false); why != "" {
		t.Errorf("%s is a known failure against MongoDB: %s", file, why)
	}
	for _, f := range expectedFailures {
		if f.Reason == "" {
			t.Errorf("%s %q has no reason", f.File, f.Test)
		}
	}
}
