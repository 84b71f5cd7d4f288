package topology

import (
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// specDir returns the directory of the MongoDB spec tests for one spec, or
// skips the test: $SPEC_TESTS, else <module root>/../shared/specs.
func specDir(t *testing.T, parts ...string) string {
	t.Helper()
	root := os.Getenv("SPEC_TESTS")
	if root == "" {
		dir, err := os.Getwd()
		if err != nil {
			t.Skipf("spec tests: %v", err)
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				root = filepath.Join(dir, "..", "shared", "specs")
				break
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				t.Skip("spec tests: no go.mod above the package directory and SPEC_TESTS is unset")
			}
			dir = parent
		}
	}
	p := filepath.Join(append([]string{root}, parts...)...)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("spec tests not found at %s (set SPEC_TESTS): %v", p, err)
	}
	return p
}
