package main

import (
	"bytes"
	"context"
	"encoding/json"
	stdhtml "html"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The demo's measurements must show what "How To Write Resilient MongoDB
// Applications" (A. Jesse Jiryu Davis, 2016) predicts, cell by cell.
func TestDemoMeasuresSeedOutcomes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := filepath.Join(t.TempDir(), "demo.json")
	page := filepath.Join(t.TempDir(), "demo.html")
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"demo", "-ops", "100", "-json", out, "-html", page}, &stdout, &stderr); code != 0 {
		t.Fatalf("demo exited %d: %s", code, stderr.String())
	}
	var results []cellResult
	readJSON(t, out, &results)
	cells := map[string]cellResult{}
	for _, r := range results {
		cells[r.Fault+"/"+r.Strategy] = r
		if r.Counted != int64(r.Expected-r.Lost+r.Duplicated) {
			t.Errorf("%s/%s: counter %d disagrees with per-operation accounting (expected %d, lost %d, duplicated %d)",
				r.Fault, r.Strategy, r.Counted, r.Expected, r.Lost, r.Duplicated)
		}
	}
	if len(cells) != len(demoFaults)*len(demoStrategies) {
		t.Fatalf("got %d cells, want %d", len(cells), len(demoFaults)*len(demoStrategies))
	}
	expect := func(cell string, lost, dup bool) {
		t.Helper()
		r, ok := cells[cell]
		if !ok {
			t.Fatalf("no cell %s", cell)
		}
		if (r.Lost > 0) != lost || (r.Duplicated > 0) != dup {
			t.Errorf("%s: lost %d duplicated %d; want lost>0=%v duplicated>0=%v", cell, r.Lost, r.Duplicated, lost, dup)
		}
	}
	// Transient error after the write applied: the article's table.
	expect("transient/no retry", true, false)
	expect("transient/always retry (5x)", false, true)
	expect("transient/retry once", false, true)
	expect("transient/retry once + idempotent", false, false)
	expect("transient/retryable writes", false, false)
	expect("transient/sturdy (+ backpressure)", false, false)
	// The transaction's update or its commit meets the fault; a lost
	// commit reply is committed again (same txnNumber) and not applied twice.
	expect("transient/transaction", false, false)
	// A persistent outage loses the writes it covers, whatever the strategy,
	// but each loss is reported to the application.
	for _, s := range demoStrategies {
		r := cells["outage/"+s.name]
		if r.Lost == 0 || r.Errors < r.Lost || r.Duplicated != 0 {
			t.Errorf("outage/%s: lost %d errors %d duplicated %d", s.name, r.Lost, r.Errors, r.Duplicated)
		}
	}
	if a, b := cells["outage/always retry (5x)"].Attempts, cells["outage/retry once"].Attempts; a <= b {
		t.Errorf("always retry made %d attempts in the outage, retry once %d: retrying five times should cost more", a, b)
	}
	expect("overload/no retry", true, false)
	expect("overload/always retry (5x)", false, false)
	// Retryable Writes 1.0 does not retry overload errors; the Client
	// Backpressure spec's policy does, with backoff, and loses nothing.
	expect("overload/retryable writes", true, false)
	expect("overload/sturdy (+ backpressure)", false, false)
	expect("overload/transaction", false, false)
	if r := cells["overload/sturdy (+ backpressure)"]; r.Errors != 0 {
		t.Errorf("sturdy surfaced %d overload errors", r.Errors)
	}
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(html), "<svg"); n != len(demoFaults) {
		t.Errorf("HTML report has %d charts, want one per fault (%d)", n, len(demoFaults))
	}
	for _, r := range results {
		if !strings.Contains(stdhtml.UnescapeString(string(html)), "<td>"+r.Strategy+"</td>") {
			t.Errorf("HTML table lacks %s", r.Strategy)
			break
		}
	}
	if !strings.Contains(stdout.String(), "retry once + idempotent") {
		t.Errorf("table not printed:\n%s", stdout.String())
	}
}

func TestUnknownCommandAndUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"nope"}, &out, &errb); code != 2 {
		t.Errorf("unknown command exited %d", code)
	}
	if code := run(context.Background(), []string{"demo", "-ops", "3"}, &out, &errb); code != 2 {
		t.Errorf("bad -ops exited %d", code)
	}
	if code := run(context.Background(), []string{"demo", "-uri", "postgres://x"}, &out, &errb); code != 1 {
		t.Errorf("bad -uri exited %d", code)
	}
}

// readJSON decodes the JSON file a command wrote (its -json output) into v.
func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
