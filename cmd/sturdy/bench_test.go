package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The overload benchmark counts every attempt: a client without retries
// sends exactly one insert per operation, and a naive retrying one sends
// more once the server sheds load.
func TestBenchOverloadCountsAttempts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := filepath.Join(t.TempDir(), "bench.json")
	var stdout, stderr bytes.Buffer
	args := []string{"bench", "overload", "-capacity", "200", "-duration", "500ms", "-loads", "4", "-clients", "no-retries,naive-5x", "-json", out}
	if code := run(ctx, args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rs []overloadResult
	if err := json.Unmarshal(b, &rs); err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 {
		t.Fatalf("%d results", len(rs))
	}
	none, naive := rs[0], rs[1]
	if none.Attempts != none.Started || none.Started == 0 {
		t.Errorf("no-retries: %d attempts for %d operations", none.Attempts, none.Started)
	}
	if none.Failed == 0 {
		t.Errorf("4x the capacity failed nothing: the limiter is not working (%+v)", none)
	}
	if naive.Amplification <= 1.2 {
		t.Errorf("naive retries amplified only %.2fx under 4x overload", naive.Amplification)
	}
}

func TestBenchRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"bench"},
		{"bench", "overload", "-loads", "0"},
		{"bench", "overload", "-clients", "nope"},
	} {
		if code := run(context.Background(), args, &bytes.Buffer{}, &bytes.Buffer{}); code != 2 {
			t.Errorf("%v exited %d, want 2", args, code)
		}
	}
}
