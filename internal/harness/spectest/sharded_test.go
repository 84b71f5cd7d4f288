package spectest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sturdy-go/sturdy/internal/testsupport"
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
// skipped when TestUnified itself runs another topology (SPEC_TOPOLOGY) or
// against MONGODB_URI.
func TestUnifiedSharded(t *testing.T) {
	runEmbedded(t, shardedDirs, mongosim.Options{Members: 3, Routers: 2}, "sharded")
}

// TestUnifiedLoadBalanced runs every spec directory against an embedded
// mongosim load balancer in front of two mongos routers (most tests are
// skipped by their runOnRequirements; about 20 s): the load-balancers
// directory and every test that runs on a load-balanced topology.
func TestUnifiedLoadBalanced(t *testing.T) {
	runEmbedded(t, nil, mongosim.Options{Members: 3, Routers: 2, LoadBalanced: true}, "load-balanced")
}

// runEmbedded runs the unified tests of dirs (nil: every directory) against
// an embedded deployment started with opts, whose topology must be want.
func runEmbedded(t *testing.T, dirs []string, opts mongosim.Options, want string) {
	if os.Getenv("MONGODB_URI") != "" || os.Getenv("SPEC_TOPOLOGY") != "" {
		t.Skip("TestUnified runs the chosen deployment")
	}
	var files []specFile
	for _, dir := range testsupport.SpecDirs(t) {
		roots := []string{dir}
		if dirs != nil {
			roots = nil
			for _, sub := range dirs {
				roots = append(roots, filepath.Join(dir, sub))
			}
		}
		for _, root := range roots {
			found, err := loadSpecFiles(t, root)
			if err != nil {
				continue // that directory is not in this checkout
			}
			files = append(files, found...)
		}
	}
	if len(files) == 0 {
		t.Skip("spec tests: no unified test files found (set SPEC_TESTS)")
	}
	sim := mongosim.StartWithOptions(t, opts)
	cfg := simConfig(Config{ClientDefaults: os.Getenv("SPEC_CLIENT_DEFAULTS")}, sim, nil)
	r := startRunner(t, cfg)
	if r.Topology() != want {
		t.Fatalf("the runner sees topology %q, want %s", r.Topology(), want)
	}
	// Tests that need auth: true run against a second, auth-enabled
	// deployment of the same shape, started on first use.
	runnerFor := withAuthRunner(t, r, cfg, opts)
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
