package testsupport

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// DefaultTimeout bounds a test's context when Context is given none.
const DefaultTimeout = 60 * time.Second

// CloseTimeout bounds the closing that CloseOnCleanup does.
const CloseTimeout = 10 * time.Second

// Context returns a context cancelled when the test ends or after d
// (DefaultTimeout when d is 0), so that a hung operation fails the test
// instead of the whole run.
func Context(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	if d == 0 {
		d = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// CloseOnCleanup calls close (a client's or topology's Disconnect) when the
// test ends, with CloseTimeout to do it in, and reports its error.
func CloseOnCleanup(t testing.TB, close func(context.Context) error) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), CloseTimeout)
		defer cancel()
		if err := close(ctx); err != nil {
			t.Errorf("disconnect: %v", err)
		}
	})
}

// SpecDirs returns the roots of the MongoDB specifications' tests: the
// directories listed in $SPEC_TESTS (separated as in PATH), else
// <module root>/../shared/specs. It skips the test when one of them is not
// a directory.
func SpecDirs(t testing.TB) []string {
	t.Helper()
	var dirs []string
	if env := os.Getenv("SPEC_TESTS"); env != "" {
		for _, d := range filepath.SplitList(env) {
			if d != "" {
				dirs = append(dirs, d)
			}
		}
	} else {
		root, err := moduleRoot()
		if err != nil {
			t.Skipf("spec tests: %v (set SPEC_TESTS)", err)
		}
		dirs = []string{filepath.Join(root, "..", "shared", "specs")}
	}
	if len(dirs) == 0 {
		t.Skip("spec tests: SPEC_TESTS names no directory")
	}
	for _, d := range dirs {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			t.Skipf("spec tests: %s is not a directory (set SPEC_TESTS)", d)
		}
	}
	return dirs
}

// SpecDir returns the path parts name below the first of SpecDirs, and
// skips the test when it does not exist.
func SpecDir(t testing.TB, parts ...string) string {
	t.Helper()
	p := filepath.Join(append([]string{SpecDirs(t)[0]}, parts...)...)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("spec tests not found at %s (set SPEC_TESTS): %v", p, err)
	}
	return p
}

// moduleRoot is the nearest directory holding go.mod at or above the
// working directory (a package's directory under go test).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}
