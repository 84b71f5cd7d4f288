package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// With --driver official the strategies run over the official Go driver,
// and once (through adapt/mongov2) still counts every increment exactly once.
func TestDemoOfficialDriver(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out := filepath.Join(t.TempDir(), "demo.json")
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"demo", "-driver", "official", "-ops", "10", "-json", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("demo exited %d: %s", code, stderr.String())
	}
	var results []cellResult
	readJSON(t, out, &results)
	cells := map[string]cellResult{}
	for _, r := range results {
		cells[r.Fault+"/"+r.Strategy] = r
		if r.Counted != int64(r.Expected-r.Lost+r.Duplicated) {
			t.Errorf("%s/%s: counter %d disagrees with per-operation accounting", r.Fault, r.Strategy, r.Counted)
		}
		if r.Attempts < int64(r.Expected-r.Errors) {
			t.Errorf("%s/%s: %d update commands for %d successful increments: the attempt counter missed some", r.Fault, r.Strategy, r.Attempts, r.Expected-r.Errors)
		}
	}
	want := 0
	for _, s := range demoStrategies {
		if !s.sturdyOnly {
			want++
		}
	}
	if len(cells) != len(demoFaults)*want {
		t.Fatalf("got %d cells, want %d", len(cells), len(demoFaults)*want)
	}
	if _, ok := cells["transient/sturdy (+ backpressure)"]; ok {
		t.Error("a sturdy-only strategy ran with the official driver")
	}
	for _, cell := range []string{"transient/retry once + idempotent", "transient/retryable writes"} {
		if r := cells[cell]; r.Lost != 0 || r.Duplicated != 0 {
			t.Errorf("%s: lost %d duplicated %d", cell, r.Lost, r.Duplicated)
		}
	}
	for _, s := range demoStrategies {
		if s.sturdyOnly {
			continue
		}
		if r := cells["outage/"+s.name]; r.Lost == 0 || r.Errors < r.Lost || r.Duplicated != 0 {
			t.Errorf("outage/%s: lost %d errors %d duplicated %d", s.name, r.Lost, r.Errors, r.Duplicated)
		}
	}
	if !strings.Contains(stdout.String(), "official Go driver") {
		t.Errorf("the table does not say which client ran:\n%s", stdout.String())
	}
}

func TestDemoRejectsUnknownDriver(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"demo", "-driver", "mgo"}, &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), "-driver") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}
