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
// exits 0 only when the checks pass. (internal/soak's TestSoak is the
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

func TestSoakRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"soak", "-faults", "meteor=1"},
		{"soak", "-goroutines", "0"},
		{"soak", "-duration", "-1s"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, stderr.String())
		}
	}
}
