package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The command end to end: a short run writes its JSON and HTML reports and
// exits 0 only when the checks pass. (soak's TestSoak is the
// 30-second run.)
func TestSoakCommandSmoke(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	jsonOut, htmlOut := filepath.Join(dir, "soak.json"), filepath.Join(dir, "soak.html")
	var stdout, stderr bytes.Buffer
	args := []string{"soak", "-duration", "3s", "-goroutines", "4", "-seed", "5", "-quiet", "-json", jsonOut, "-html", htmlOut}
	if code := run(ctx, args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stderr.String(), stdout.String())
	}
	if !strings.Contains(stdout.String(), "OK: nothing lost") {
		t.Errorf("no verdict in the table:\n%s", stdout.String())
	}
	var rep map[string]any
	readJSON(t, jsonOut, &rep)
	for _, k := range []string{"ops", "succeeded", "failed", "failed_applied", "lost", "duplicated", "stuck", "linearizable", "faults", "heap_max_mb", "p50_ms", "p99_ms"} {
		if _, ok := rep[k]; !ok {
			t.Errorf("JSON report lacks %q", k)
		}
	}
	if rep["ops"].(float64) == 0 || rep["linearizable"] != true {
		t.Errorf("report: ops %v, linearizable %v", rep["ops"], rep["linearizable"])
	}
	h, err := os.ReadFile(htmlOut)
	if err != nil {
		t.Fatal(err)
	}
	p := parsePage(t, h)
	checkPage(t, p, 2)
	if !strings.Contains(text(p.root), "register history: ok") {
		t.Errorf("HTML report lacks its verdict")
	}
	rows := p.rows(t, "by-operation")
	if last := rows[len(rows)-1]; last[0] != "all" || last[1] != fmt.Sprintf("%.0f", rep["ops"]) {
		t.Errorf("the table's total row %q does not match the report's %v operations", last, rep["ops"])
	}
}

// -driver official runs the workload through sturdy and then through the
// official Go driver, under the same schedule, and reports both side by
// side: one table with a column group per driver, a JSON array of the two
// reports, an HTML page each.
func TestSoakOfficialDriverSideBySide(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	jsonOut, htmlOut := filepath.Join(dir, "soak.json"), filepath.Join(dir, "soak.html")
	var stdout, stderr bytes.Buffer
	args := []string{"soak", "-driver", "official", "-duration", "3s", "-goroutines", "4", "-seed", "5", "-quiet", "-json", jsonOut, "-html", htmlOut}
	if code := run(ctx, args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stderr.String(), stdout.String())
	}
	out := stdout.String()
	header, _, _ := strings.Cut(out, "\n")
	if !strings.Contains(header, "sturdy") || !strings.Contains(header, "official") {
		t.Errorf("the table's header does not name both drivers: %q", header)
	}
	if !strings.Contains(out, "\nsturdy: ") || !strings.Contains(out, "\nofficial: ") {
		t.Errorf("no summary per driver:\n%s", out)
	}
	var reps []map[string]any
	readJSON(t, jsonOut, &reps)
	if len(reps) != 2 || reps[0]["driver"] != "sturdy" || reps[1]["driver"] != "official" {
		t.Fatalf("JSON reports: %v", reps)
	}
	for _, r := range reps {
		if r["ops"].(float64) == 0 || r["lost"].(float64) != 0 || r["duplicated"].(float64) != 0 {
			t.Errorf("%v: ops %v, lost %v, duplicated %v", r["driver"], r["ops"], r["lost"], r["duplicated"])
		}
	}
	for _, f := range []string{htmlOut, filepath.Join(dir, "soak.official.html")} {
		if _, err := os.Stat(f); err != nil {
			t.Error(err)
		}
	}
}

// -shards 2 makes every operation a cross-shard transaction, through both
// drivers' WithTransaction: nothing lost, duplicated or half-committed.
func TestSoakCrossShardBothDrivers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	jsonOut := filepath.Join(t.TempDir(), "soak.json")
	var stdout, stderr bytes.Buffer
	args := []string{"soak", "-shards", "2", "-members", "1", "-driver", "official", "-duration", "3s", "-goroutines", "4", "-seed", "3", "-quiet", "-json", jsonOut}
	if code := run(ctx, args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stderr.String(), stdout.String())
	}
	var reps []map[string]any
	readJSON(t, jsonOut, &reps)
	if len(reps) != 2 {
		t.Fatalf("%d reports", len(reps))
	}
	for _, r := range reps {
		txns, _ := r["by_kind"].(map[string]any)["transaction"].(map[string]any)
		if r["cross_shard"] != true || txns == nil || txns["ops"].(float64) == 0 || r["half_committed"].(float64) != 0 {
			t.Errorf("%v: cross-shard %v, transactions %v, half-committed %v", r["driver"], r["cross_shard"], txns, r["half_committed"])
		}
	}
	if !strings.Contains(stdout.String(), "each across two shards") {
		t.Errorf("no transaction line:\n%s", stdout.String())
	}
}

func TestSoakRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"soak", "-faults", "meteor=1"},
		{"soak", "-goroutines", "0"},
		{"soak", "-duration", "-1s"},
		{"soak", "-driver", "mgo"},
		{"soak", "-shards", "1"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, stderr.String())
		}
	}
}
