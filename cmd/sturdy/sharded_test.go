package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sturdy demo --sharded runs the demo's table through two mongos routers: the
// strategies keep their outcomes there.
func TestDemoSharded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := filepath.Join(t.TempDir(), "demo.json")
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"demo", "-sharded", "-ops", "50", "-json", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("demo exited %d: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "sharded cluster: mongos routers at mongodb://") || !strings.Contains(stdout.String(), "two mongos routers") {
		t.Fatalf("the demo did not say it ran through routers:\n%s\n%s", stderr.String(), stdout.String())
	}
	var results []cellResult
	readJSON(t, out, &results)
	cells := map[string]cellResult{}
	for _, r := range results {
		cells[r.Fault+"/"+r.Strategy] = r
	}
	if len(cells) != len(demoFaults)*len(demoStrategies) {
		t.Fatalf("got %d cells, want %d", len(cells), len(demoFaults)*len(demoStrategies))
	}
	for _, cell := range []string{"transient/retryable writes", "transient/sturdy (+ backpressure)", "transient/transaction",
		"transient/retry once + idempotent", "overload/sturdy (+ backpressure)", "overload/transaction"} {
		r := cells[cell]
		if strings.HasSuffix(cell, "/transaction") {
			// The transaction strategy's 500 ms deadline per increment can
			// run out on a loaded machine: the increment is then reported
			// to the application as an error (applied or not), never lost
			// silently or applied twice.
			if r.Duplicated != 0 || r.Lost > r.Errors {
				t.Errorf("%s through routers: lost %d duplicated %d errors %d, want nothing lost silently or duplicated", cell, r.Lost, r.Duplicated, r.Errors)
			} else if r.Errors != 0 {
				t.Logf("%s through routers: %d increments outlived their 500 ms deadline", cell, r.Errors)
			}
			continue
		}
		if r.Lost != 0 || r.Duplicated != 0 || r.Errors != 0 {
			t.Errorf("%s through routers: lost %d duplicated %d errors %d, want none", cell, r.Lost, r.Duplicated, r.Errors)
		}
	}
	if r := cells["transient/always retry (5x)"]; r.Duplicated == 0 {
		t.Errorf("always retry duplicated nothing through routers: the faults did not hit (%+v)", r)
	}
	if r := cells["overload/retryable writes"]; r.Lost == 0 {
		t.Errorf("retryable writes lost nothing to overload through routers: the 462s did not hit (%+v)", r)
	}
}

// sturdy bench overload -routers 2: the first router sheds load, the
// second is healthy; sturdy retries every 462 on the healthy router and
// fails nothing.
func TestBenchOverloadRouters(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := filepath.Join(t.TempDir(), "bench.json")
	var stdout, stderr bytes.Buffer
	args := []string{"bench", "overload", "-routers", "2", "-capacity", "100", "-duration", "500ms", "-loads", "4", "-clients", "sturdy,official", "-json", out}
	if code := run(ctx, args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var rs []routersResult
	readJSON(t, out, &rs)
	if len(rs) != 2 || rs[0].Client != "sturdy" || rs[1].Client != "official" {
		t.Fatalf("results %+v", rs)
	}
	st := rs[0]
	if st.Rejected == 0 || st.Attempts <= st.Started {
		t.Errorf("sturdy met no 462 (rejected %d, %d attempts for %d operations): the overloaded router took no first attempts", st.Rejected, st.Attempts, st.Started)
	}
	if st.Failed != 0 || st.Succeeded != st.Started {
		t.Errorf("sturdy failed %d of %d operations with a healthy router to retry on", st.Failed, st.Started)
	}
	if !strings.Contains(stdout.String(), "4x: sturdy/official goodput = ") {
		t.Errorf("no ratio line:\n%s", stdout.String())
	}
}
