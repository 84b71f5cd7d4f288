package interop

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestNodeDriver installs the pinned driver with `npm ci` when node_modules
// is missing or does not match package-lock.json, builds sturdy once, and
// runs every test/*.test.mjs file with `node --test` (via run.mjs, which
// allows exactly the failures listed in expected_failures.json). Each file starts its own
// `sturdy sim` on ephemeral ports and kills it when done; the whole run is
// in its own process group, killed at the end, so nothing outlives it.
func TestNodeDriver(t *testing.T) {
	if testing.Short() {
		t.Skip("interop: the Node.js driver suite takes about a minute; skipped with -short")
	}
	if os.Getenv("STURDY_SKIP_INTEROP") != "" {
		t.Skip("interop: STURDY_SKIP_INTEROP is set")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("interop: node is not on PATH; install Node.js 20.19+ and npm to run the Node.js driver interop suite")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("interop: npm is not on PATH; install Node.js 20.19+ and npm to run the Node.js driver interop suite")
	}
	requireNode(t, node)

	// End (and kill the process group) before go test's own -timeout
	// panics, which would skip the cleanup.
	deadline := time.Now().Add(5 * time.Minute)
	if d, ok := t.Deadline(); ok && d.Add(-15*time.Second).Before(deadline) {
		deadline = d.Add(-15 * time.Second)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()

	if stale, why := modulesStale(); stale {
		t.Logf("interop: npm ci (%s)", why)
		out, err := command(ctx, npm, "ci", "--no-audit", "--no-fund").CombinedOutput()
		if err != nil {
			t.Fatalf("interop: npm ci failed: %v\n%s", err, out)
		}
	}

	bin := filepath.Join(t.TempDir(), "sturdy")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/sturdy")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("interop: go build ./cmd/sturdy: %v\n%s", err, out)
	}

	// run.mjs runs every file with node --test and judges the results
	// against expected_failures.json.
	cmd := command(ctx, node, "run.mjs")
	cmd.Env = append(os.Environ(), "STURDY_BIN="+bin, "NO_COLOR=1", "FORCE_COLOR=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err = cmd.Run()
	killGroup(cmd)
	if err != nil {
		t.Fatalf("interop: node run.mjs failed after %v: %v\n%s", time.Since(start).Round(time.Millisecond), err, out.String())
	}
	t.Logf("interop: passed in %v\n%s", time.Since(start).Round(time.Millisecond), summary(out.String()))
}

// command runs name in this directory, in its own process group, killed
// (with its children) when ctx ends.
func command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	inOwnGroup(cmd)
	return cmd
}

// requireNode fails (not skips) when node is too old for the pinned driver:
// a present but unusable toolchain is a broken environment, not an absent one.
func requireNode(t *testing.T, node string) {
	t.Helper()
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		t.Fatalf("interop: node --version: %v", err)
	}
	m := regexp.MustCompile(`^v(\d+)\.(\d+)`).FindStringSubmatch(strings.TrimSpace(string(out)))
	if m == nil {
		t.Fatalf("interop: cannot read node version %q", out)
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	if major < 20 || (major == 20 && minor < 19) {
		t.Fatalf("interop: node %s is too old: the mongodb 7.x driver needs Node.js 20.19 or newer", strings.TrimSpace(string(out)))
	}
}

// modulesStale reports whether `npm ci` must run: node_modules is missing,
// or was installed from a different package-lock.json.
func modulesStale() (bool, string) {
	installed, err := os.ReadFile(filepath.Join("node_modules", ".package-lock.json"))
	if err != nil {
		return true, "node_modules missing"
	}
	lock, err := os.ReadFile("package-lock.json")
	if err != nil {
		return true, "package-lock.json unreadable"
	}
	if !sameMongodbVersion(installed, lock) {
		return true, "node_modules does not match package-lock.json"
	}
	return false, ""
}

// sameMongodbVersion compares the installed and locked versions of the
// driver package, the one that matters.
func sameMongodbVersion(installed, lock []byte) bool {
	re := regexp.MustCompile(`"node_modules/mongodb":\s*\{\s*"version":\s*"([^"]+)"`)
	a, b := re.FindSubmatch(installed), re.FindSubmatch(lock)
	return a != nil && b != nil && bytes.Equal(a[1], b[1])
}

// summary keeps the totals and measurements: the spec reporter's ℹ lines
// and run.mjs's verdict from "interop:" on.
func summary(out string) string {
	var b strings.Builder
	lines := strings.Split(out, "\n")
	for i, line := range lines {
		if strings.HasPrefix(line, "interop: ") && strings.Contains(line, " tests, ") {
			b.WriteString(strings.Join(lines[i:], "\n"))
			break
		}
		if strings.HasPrefix(line, "ℹ ") {
			fmt.Fprintln(&b, line)
		}
	}
	return b.String()
}
