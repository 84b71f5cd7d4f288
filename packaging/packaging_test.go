package packaging

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestPackages builds this platform's release artifacts once and runs the
// npm and Python suites against what was packed, never the source tree.
func TestPackages(t *testing.T) {
	if testing.Short() {
		t.Skip("packaging: builds the release artifacts and installs them; skipped with -short")
	}
	if runtime.GOOS == "windows" {
		t.Skip("packaging: scripts/release is a bash script; run it under WSL or Git Bash")
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline(t, 4*time.Minute))
	defer cancel()
	out := t.TempDir()
	rel := exec.CommandContext(ctx, "bash", "../scripts/release", "--host-only", "--out", out)
	if b, err := rel.CombinedOutput(); err != nil {
		t.Fatalf("scripts/release --host-only: %v\n%s", err, b)
	}
	t.Run("npm", func(t *testing.T) { testNPM(ctx, t, out) })
	t.Run("python", func(t *testing.T) { testPython(ctx, t, out) })
}

// deadline is d from now, or earlier when go test's -timeout ends first,
// so the cleanup below still runs.
func deadline(t *testing.T, d time.Duration) time.Duration {
	if dl, ok := t.Deadline(); ok && time.Until(dl)-15*time.Second < d {
		return time.Until(dl) - 15*time.Second
	}
	return d
}

// testNPM installs dist/npm/*.tgz and the official driver (the version
// interop/ pins) into a fresh project and runs npm/test/sim.test.mjs.
func testNPM(ctx context.Context, t *testing.T, dist string) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("packaging: node is not on PATH; install Node.js 20.19+ and npm to test the npm package")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("packaging: npm is not on PATH; install Node.js 20.19+ and npm to test the npm package")
	}
	requireNode(t, node)
	tarballs, _ := filepath.Glob(filepath.Join(dist, "npm", "*.tgz"))
	if len(tarballs) != 2 {
		t.Fatalf("scripts/release packed %v, want the main package and this platform's", tarballs)
	}
	proj := t.TempDir()
	write(t, filepath.Join(proj, "package.json"), `{"name": "sim-install-test", "private": true, "type": "module"}`)
	args := append([]string{"install", "--no-audit", "--no-fund", "--loglevel=error", "mongodb@" + driverVersion(t)}, tarballs...)
	if b, err := run(ctx, proj, nil, npm, args...); err != nil {
		t.Fatalf("npm install: %v\n%s", err, b)
	}
	copyFile(t, filepath.Join("npm", "test", "sim.test.mjs"), filepath.Join(proj, "sim.test.mjs"))
	// An empty temp directory of its own lets the suite check stop()
	// leaves no file behind.
	tmp := t.TempDir()
	start := time.Now()
	b, err := run(ctx, proj, []string{"TMPDIR=" + tmp, "STURDY_SIM_BINARY=", "NO_COLOR=1"}, node, "--test", "--test-reporter=spec", "sim.test.mjs")
	if err != nil {
		t.Fatalf("node --test (installed @sturdy-go/sim): %v\n%s", err, b)
	}
	t.Logf("npm: passed in %v", time.Since(start).Round(time.Millisecond))
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "BENCH") {
			t.Log(strings.TrimSpace(line))
		}
	}
}

// testPython installs dist/python/*.whl with pip --no-index into a fresh
// virtual environment that sees the system's pymongo and pytest, and runs
// python/tests through the plugin's fixtures.
func testPython(ctx context.Context, t *testing.T, dist string) {
	py := findPython(t)
	wheels, _ := filepath.Glob(filepath.Join(dist, "python", "*.whl"))
	if len(wheels) != 1 {
		t.Fatalf("scripts/release built wheels %v, want this platform's one", wheels)
	}
	venv := filepath.Join(t.TempDir(), "venv")
	venvArgs := []string{"-m", "venv", "--system-site-packages", venv}
	if exec.Command(py, "-c", "import pip").Run() == nil {
		// The system's pip serves the venv too: seeding a pip of its own
		// (ensurepip) would take most of this test's time.
		venvArgs = append(venvArgs, "--without-pip")
	}
	if b, err := run(ctx, "", nil, py, venvArgs...); err != nil {
		t.Fatalf("%s -m venv: %v\n%s", py, err, b)
	}
	vpy := filepath.Join(venv, "bin", "python")
	if b, err := run(ctx, "", nil, vpy, "-m", "pip", "install", "--quiet", "--no-index", "--disable-pip-version-check", wheels[0]); err != nil {
		t.Fatalf("pip install --no-index %s: %v\n%s", filepath.Base(wheels[0]), err, b)
	}
	tests := t.TempDir()
	copyFile(t, filepath.Join("python", "tests", "test_mongosim.py"), filepath.Join(tests, "test_mongosim.py"))
	start := time.Now()
	b, err := run(ctx, tests, []string{"STURDY_SIM_BINARY=", "PYTHONDONTWRITEBYTECODE=1"}, vpy, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_mongosim.py")
	if err != nil {
		t.Fatalf("pytest (installed sturdy-sim wheel): %v\n%s", err, b)
	}
	t.Logf("python: passed in %v\n%s", time.Since(start).Round(time.Millisecond), lastLine(b))
}

// findPython returns a python3 that can import pymongo and pytest and make
// a virtual environment with pip: the one on PATH, else the system's.
func findPython(t *testing.T) string {
	cands := []string{"/usr/bin/python3"}
	if p, err := exec.LookPath("python3"); err == nil {
		cands = append([]string{p}, cands...)
	}
	for _, p := range cands {
		if exec.Command(p, "-c", "import pymongo, pytest, venv").Run() != nil {
			continue
		}
		// venv needs pip (shared from the system) or ensurepip.
		if exec.Command(p, "-c", "import pip").Run() == nil || exec.Command(p, "-c", "import ensurepip").Run() == nil {
			return p
		}
	}
	t.Skip("packaging: no python3 with pymongo, pytest and venv (with pip or ensurepip); install python3-pymongo, python3-pytest and python3-venv (Debian) to test the wheel")
	return ""
}

func requireNode(t *testing.T, node string) {
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		t.Fatalf("node --version: %v", err)
	}
	m := regexp.MustCompile(`^v(\d+)\.(\d+)`).FindStringSubmatch(strings.TrimSpace(string(out)))
	if m == nil {
		t.Fatalf("cannot read node version %q", out)
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	if major < 20 || (major == 20 && minor < 19) {
		t.Skipf("packaging: node %s is too old: the mongodb 7.x driver needs Node.js 20.19 or newer", strings.TrimSpace(string(out)))
	}
}

// driverVersion is the mongodb driver version interop/ pins.
func driverVersion(t *testing.T) string {
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	b, err := os.ReadFile(filepath.Join("..", "interop", "package.json"))
	if err == nil {
		err = json.Unmarshal(b, &pkg)
	}
	if err != nil || pkg.Dependencies["mongodb"] == "" {
		t.Fatalf("interop/package.json names no mongodb version: %v", err)
	}
	return pkg.Dependencies["mongodb"]
}

// run runs name in dir with env added, in a process group of its own that
// is killed afterwards, so no sim or runner outlives the test.
func run(ctx context.Context, dir string, env []string, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	inOwnGroup(cmd)
	err := cmd.Run()
	killGroup(cmd)
	return out.Bytes(), err
}

func write(t *testing.T, path, s string) {
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	write(t, to, string(b))
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}
