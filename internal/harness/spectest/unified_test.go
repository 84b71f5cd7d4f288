package spectest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/internal/testsupport"
	"github.com/sturdy-go/sturdy/mongosim"
)

// specGroup names the specification a test file belongs to: the directory
// above its "tests" directory (".../crud/tests/unified/x.json" → "crud").
func specGroup(path string) string {
	parts := strings.Split(filepath.ToSlash(path), "/")
	for i := len(parts) - 2; i > 0; i-- {
		if parts[i] == "tests" {
			return parts[i-1]
		}
	}
	return parts[len(parts)-2]
}

type specFile struct {
	group string
	file  *File
}

// TestUnified runs every unified-format test file found under SPEC_TESTS
// against an embedded mongosim deployment (SPEC_TOPOLOGY "replicaset", the
// default, of SPEC_MEMBERS members, default 3; "single"; or "sharded") or
// against MONGODB_URI. SPEC_CLIENT_DEFAULTS adds URI options to every client
// entity that does not set them.
func TestUnified(t *testing.T) {
	var files []specFile
	for _, dir := range testsupport.SpecDirs(t) {
		st, err := os.Stat(dir)
		if err != nil || !st.IsDir() {
			t.Skipf("spec tests: %s is not a directory (set SPEC_TESTS)", dir)
		}
		found, err := loadSpecFiles(t, dir)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, found...)
	}
	if len(files) == 0 {
		t.Skip("spec tests: no unified test files found (set SPEC_TESTS)")
	}

	cfg := Config{URI: os.Getenv("MONGODB_URI"), ClientDefaults: os.Getenv("SPEC_CLIENT_DEFAULTS"),
		Auth: os.Getenv("SPEC_AUTH") == "true", Serverless: os.Getenv("SPEC_SERVERLESS") == "true",
		ShardCollections: os.Getenv("SPEC_SHARD_COLLECTIONS") == "true"}
	embedded := cfg.URI == ""
	var simOpts mongosim.Options
	if embedded {
		switch os.Getenv("SPEC_TOPOLOGY") {
		case "", "replicaset":
		case "single":
			simOpts.Standalone = true
		case "sharded":
			// Two mongos routers in front of a one-shard replica set.
			simOpts.Routers = 2
		case "load-balanced":
			// Two routers behind load balancers: one in front of both, one
			// in front of the first only (the load-balancer spec's setup).
			simOpts.Routers = 2
			simOpts.LoadBalanced = true
		default:
			t.Fatalf("SPEC_TOPOLOGY %q: want replicaset, single, sharded or load-balanced", os.Getenv("SPEC_TOPOLOGY"))
		}
		// Three members by default, the replica set drivers' CI runs the
		// specifications against (some tests count its members' events).
		if !simOpts.Standalone {
			simOpts.Members = 3
		}
		if n := os.Getenv("SPEC_MEMBERS"); n != "" && !simOpts.Standalone {
			m, err := strconv.Atoi(n)
			if err != nil || m < 1 || m > 7 {
				t.Fatalf("SPEC_MEMBERS %q: want 1 to 7", n)
			}
			simOpts.Members = m
		}
		// SPEC_SHARDS=n puts n shards behind the routers: the tests'
		// (unsharded) collections live on their database's primary shard.
		if n := os.Getenv("SPEC_SHARDS"); n != "" && simOpts.Routers > 0 {
			m, err := strconv.Atoi(n)
			if err != nil || m < 1 || m > 8 {
				t.Fatalf("SPEC_SHARDS %q: want 1 to 8", n)
			}
			simOpts.Shards = m
		}
		cfg = simConfig(cfg, mongosim.StartWithOptions(t, simOpts), nil)
	}
	r := startRunner(t, cfg)
	t.Logf("running %d unified test files against %s (server %s, topology %s)", len(files), cfg.URI, r.ServerVersion(), r.Topology())

	// Tests that need auth: true run against a second, auth-enabled
	// mongosim deployment, started on first use.
	runnerFor := func(*testing.T, *File, int) *Runner { return r }
	if embedded && !cfg.Auth {
		runnerFor = withAuthRunner(t, r, cfg, simOpts)
	}

	var sum Summary
	var groups []string
	byGroup := map[string][]*File{}
	for _, sf := range files {
		if byGroup[sf.group] == nil {
			groups = append(groups, sf.group)
		}
		byGroup[sf.group] = append(byGroup[sf.group], sf.file)
	}
	for _, g := range groups {
		t.Run(g, func(t *testing.T) {
			for _, f := range byGroup[g] {
				t.Run(strings.TrimSuffix(filepath.Base(f.Path), ".json"), func(t *testing.T) {
					for i, test := range f.Tests {
						t.Run(test.Description, func(t *testing.T) {
							runOne(t, runnerFor(t, f, i), &sum, g, g+"/"+filepath.Base(f.Path), f, i, test.Description)
						})
					}
				})
			}
		})
	}
	report := sum.Report()
	if out := os.Getenv("SPEC_RESULTS"); out != "" {
		if err := os.WriteFile(out, []byte(report), 0o644); err != nil {
			t.Errorf("writing SPEC_RESULTS: %v", err)
		}
	}
	if out := os.Getenv("SPEC_FAILURES"); out != "" {
		if err := os.WriteFile(out, []byte(sum.Failures()), 0o644); err != nil {
			t.Errorf("writing SPEC_FAILURES: %v", err)
		}
	}
	t.Log("\n" + report)
	fmt.Println(sum.Total().String())
}

// simConfig points cfg at an embedded deployment, its connection strings
// passed through edit (nil: unchanged). A load-balanced deployment is
// reached through the balancer in front of one router, with the one in
// front of both for useMultipleMongoses and each router directly for
// switching fail points off.
func simConfig(cfg Config, sim *mongosim.Cluster, edit func(string) string) Config {
	if edit == nil {
		edit = func(s string) string { return s }
	}
	cfg.URI = edit(sim.URI())
	if b := sim.SingleRouterBalancer(); b != nil {
		cfg.URI = edit(b.URI())
		cfg.MultiURI = edit(sim.LoadBalancedURI())
		cfg.Mongoses = nil
		for _, r := range sim.Routers() {
			cfg.Mongoses = append(cfg.Mongoses, edit(r.URI()))
		}
	}
	return cfg
}

// The user of the auth-enabled embedded deployment.
const (
	specAuthUser     = "spec-user"
	specAuthPassword = "spec-password"
)

// withCredentials puts user:password into a mongodb:// connection string.
func withCredentials(uri, user, password string) string {
	rest, ok := strings.CutPrefix(uri, "mongodb://")
	if !ok {
		return uri
	}
	return "mongodb://" + url.UserPassword(user, password).String() + "@" + rest
}

// startRunner creates a Runner, closed when the test ends.
func startRunner(t *testing.T, cfg Config) *Runner {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := NewRunner(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

func runOne(t *testing.T, r *Runner, sum *Summary, group, key string, f *File, i int, desc string) {
	if reason := notRun(key, desc, r.Topology(), r.Mongosim()); reason != "" {
		out := Outcome{Skipped: true, Reason: "not run: " + reason}
		sum.Add(group, out, true)
		t.Skip(out.Reason)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := r.Run(ctx, f, i)
	known := knownFailure(key, desc, r.Topology(), r.Mongosim())
	// Timing-sensitive tests leave margins of tens of milliseconds (a 150 ms
	// block under a 200 ms timeout, a socketTimeoutMS of 100 ms every
	// command but one must beat); on a loaded machine the margin can run
	// out. A CSOT test that fails, or any test that fails with a timeout,
	// gets two more tries: a real defect fails all three, and every retry
	// is logged.
	for try := 2; out.Err != nil && known == "" && try <= 3 && (group == "client-side-operations-timeout" || timedOut(out.Err)); try++ {
		t.Logf("attempt %d failed (%v); timing-sensitive, trying again", try-1, out.Err)
		out = r.Run(ctx, f, i)
	}
	switch {
	case out.Skipped:
		sum.Add(group, out, false)
		t.Skip(out.Reason)
	case out.Err != nil && known != "":
		err := out.Err
		out = Outcome{Skipped: true, Reason: "known failure: " + known}
		sum.Add(group, out, true)
		t.Skipf("known failure: %s\n(error: %v)", known, err)
	case out.Err != nil:
		sum.Add(group, out, false)
		sum.Fail(key, desc, out.Err)
		t.Fatal(out.Err)
	case known != "":
		sum.Add(group, Outcome{Err: fmt.Errorf("unexpectedly passed")}, false)
		t.Fatalf("unexpectedly passed — remove from the expected-failure list in expected_failures.go (listed because: %s)", known)
	default:
		sum.Add(group, out, false)
	}
}

// withAuthRunner returns a function that gives a test r, or, when the test
// needs auth, a runner for a second deployment shaped as o with auth on. That
// deployment is launched on first use — by hand, not with StartWithOptions,
// since it must outlive the subtest that first needs it — and closed when t
// ends.
func withAuthRunner(t *testing.T, r *Runner, cfg Config, o mongosim.Options) func(st *testing.T, f *File, i int) *Runner {
	var authRunner *Runner
	return func(st *testing.T, f *File, i int) *Runner {
		if !RequiresAuth(f, i) {
			return r
		}
		if authRunner == nil {
			o.Auth = mongosim.AuthOptions{Username: specAuthUser, Password: specAuthPassword}
			sim, err := mongosim.Launch(o)
			if err != nil {
				st.Fatalf("starting the auth-enabled mongosim: %v", err)
			}
			t.Cleanup(func() { _ = sim.Close() })
			acfg := cfg
			acfg.Auth = true
			acfg = simConfig(acfg, sim, func(uri string) string { return withCredentials(uri, specAuthUser, specAuthPassword) })
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			ar, err := NewRunner(ctx, acfg)
			cancel()
			if err != nil {
				st.Fatalf("runner for the auth-enabled mongosim: %v", err)
			}
			t.Cleanup(func() { _ = ar.Close(context.Background()) })
			authRunner = ar
			st.Logf("tests needing auth run against %s", sim.URI())
		}
		return authRunner
	}
}

// timedOut reports an error that a deadline or socket timeout caused.
func timedOut(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || sturdy.IsTimeout(err) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "i/o timeout") || strings.Contains(msg, "deadline exceeded")
}

// loadSpecFiles loads the unified test files below root, reporting a file
// that does not parse as a test error and leaving it out.
func loadSpecFiles(t *testing.T, root string) ([]specFile, error) {
	paths, err := FindFiles(root)
	if err != nil {
		return nil, err
	}
	var files []specFile
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
	return files, nil
}
