package spectest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sturdy-go/sturdy/mongosim"
)

// shardedDirs are the spec directories TestUnifiedSharded runs through
// mongos routers: those whose tests have sharded-specific paths in the
// client (mongos retries and deprioritization, sessions through mongos) or
// that prove the routers relay commands as mongos does; transactions prove
// mongos pinning and the recoveryToken.
var shardedDirs = []string{"retryable-writes", "retryable-reads", "crud", "sessions", "command-logging-and-monitoring", "run-command", "transactions", "transactions-convenient-api", "change-streams"}

// TestUnifiedSharded runs shardedDirs against an embedded mongosim with two
// mongos routers in front of a three-member shard (about 10 s). It is
// skipped when TestUnified itself runs sharded (SPEC_TOPOLOGY=sharded) or
// against MONGODB_URI.
func TestUnifiedSharded(t *testing.T) {
	if os.Getenv("MONGODB_URI") != "" || os.Getenv("SPEC_TOPOLOGY") != "" {
		t.Skip("TestUnified runs the chosen deployment")
	}
	var files []specFile
	for _, dir := range specDirs(t) {
		for _, sub := range shardedDirs {
			paths, err := FindFiles(filepath.Join(dir, sub))
			if err != nil {
				continue // that directory is not in this checkout
			}
			for _, p := range paths {
				f, err := LoadFile(p)
				if err != nil {
					t.Errorf("loading %s: %v", p, err)
					continue
				}
				if f != nil {
					files = append(files, specFile{group: specGroup(p), file: f})
				}
			}
		}
	}
	if len(files) == 0 {
		t.Skip("spec tests: no unified test files found (set SPEC_TESTS)")
	}
	sim := mongosim.StartWithOptions(t, mongosim.Options{Members: 3, Routers: 2})
	cfg := Config{URI: sim.URI(), ClientDefaults: os.Getenv("SPEC_CLIENT_DEFAULTS")}
	r := startRunner(t, cfg)
	if r.Topology() != "sharded" {
		t.Fatalf("the runner sees topology %q through the routers, want sharded", r.Topology())
	}
	// Tests that need auth: true run against a second, auth-enabled
	// sharded deployment, started on first use.
	runnerFor := withAuthRunner(t, r, cfg, mongosim.Options{Members: 3, Routers: 2})
	var sum Summary
	for _, sf := range files {
		f := sf.file
		t.Run(sf.group+"/"+strings.TrimSuffix(filepath.Base(f.Path), ".json"), func(t *testing.T) {
			for i, test := range f.Tests {
				t.Run(test.Description, func(t *testing.T) {
					runOne(t, runnerFor(t, f, i), &sum, sf.group, sf.group+"/"+filepath.Base(f.Path), f, i, test.Description)
				})
			}
		})
	}
	t.Log("\n" + sum.Report())
}
