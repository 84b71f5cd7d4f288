package testsupport

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// skipped reports whether f skipped the subtest it ran in.
func skipped(t *testing.T, f func(t *testing.T)) bool {
	var s bool
	t.Run("sub", func(t *testing.T) {
		defer func() { s = t.Skipped() }()
		f(t)
	})
	return s
}

func TestSpecDirsSkipWhenAbsent(t *testing.T) {
	t.Setenv("SPEC_TESTS", filepath.Join(t.TempDir(), "missing"))
	if !skipped(t, func(t *testing.T) { SpecDirs(t) }) {
		t.Error("SpecDirs did not skip for a missing SPEC_TESTS directory")
	}
	if !skipped(t, func(t *testing.T) { SpecDir(t, "crud") }) {
		t.Error("SpecDir did not skip for a missing SPEC_TESTS directory")
	}
}

func TestSpecDirFindsListedRoots(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	t.Setenv("SPEC_TESTS", a+string(filepath.ListSeparator)+b)
	if got := SpecDirs(t); len(got) != 2 || got[0] != a || got[1] != b {
		t.Fatalf("SpecDirs = %v, want [%s %s]", got, a, b)
	}
	if got := SpecDir(t); got != a {
		t.Errorf("SpecDir = %s, want %s", got, a)
	}
	if !skipped(t, func(t *testing.T) { SpecDir(t, "no-such-spec") }) {
		t.Error("SpecDir did not skip for a missing subdirectory")
	}
}

func TestContextEndsWithTest(t *testing.T) {
	var ctx context.Context
	t.Run("sub", func(t *testing.T) {
		ctx = Context(t, 0)
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > DefaultTimeout {
			t.Errorf("deadline %v, %v", dl, ok)
		}
	})
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Errorf("context after the test: %v, want canceled", ctx.Err())
	}
}
