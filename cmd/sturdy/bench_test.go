package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The overload benchmark counts every attempt: a client without retries
// sends at most one insert per operation (on a loaded machine an operation
// can time out before its insert is sent), and a naive retrying one sends
// more once the server sheds load. The capacity is low so that even a
// loaded machine offers 4× of it; the naive client must then have retried
// (more attempts than operations), however much the load let through.
func TestBenchOverloadCountsAttempts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := filepath.Join(t.TempDir(), "bench.json")
	var stdout, stderr bytes.Buffer
	args := []string{"bench", "overload", "-capacity", "50", "-duration", "1s", "-loads", "4", "-clients", "no-retries,naive-5x", "-json", out}
	if code := run(ctx, args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var rs []overloadResult
	readJSON(t, out, &rs)
	if len(rs) != 2 {
		t.Fatalf("%d results", len(rs))
	}
	none, naive := rs[0], rs[1]
	if none.Attempts > none.Started || none.Attempts == 0 {
		t.Errorf("no-retries: %d attempts for %d operations", none.Attempts, none.Started)
	}
	if none.Failed == 0 {
		t.Errorf("4x the capacity failed nothing: the limiter is not working (%+v)", none)
	}
	if naive.Amplification <= 1 {
		t.Errorf("naive retries amplified only %.2fx under 4x overload", naive.Amplification)
	}
}

func TestBenchRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"bench"},
		{"bench", "overload", "-loads", "0"},
		{"bench", "overload", "-clients", "nope"},
		{"bench", "overload", "-routers", "1"},
		{"bench", "overload", "-routers", "2", "-spike"},
		{"bench", "overload", "-routers", "2", "-healthy-capacity", "-1"},
		{"bench", "faults", "-fault", "nope"},
		{"bench", "faults", "-fault", "error:x"},
		{"bench", "faults", "-rate", "2"},
		{"bench", "faults", "-timeout", "-1s"},
		{"bench", "faults", "-timeout", "10us"},
		{"bench", "failover", "-members", "1"},
		{"bench", "failover", "-clients", "nope"},
	} {
		if code := run(context.Background(), args, &bytes.Buffer{}, &bytes.Buffer{}); code != 2 {
			t.Errorf("%v exited %d, want 2", args, code)
		}
	}
}

// bench faults runs both clients against the same faults and checks its
// own bookkeeping: every injected fault is counted, and the counters in
// the database agree with the operations that succeeded (none lost, none
// applied twice).
func TestBenchFaultsSmoke(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, page := filepath.Join(t.TempDir(), "faults.json"), filepath.Join(t.TempDir(), "faults.html")
	var stdout, stderr bytes.Buffer
	args := []string{"bench", "faults", "-duration", "1s", "-goroutines", "4", "-rate", "0.2", "-json", out, "-html", page}
	if code := run(ctx, args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "default options") {
		t.Errorf("the tool does not say which options the clients run with: %s", stderr.String())
	}
	var rs []faultsResult
	readJSON(t, out, &rs)
	if len(rs) != 2 || rs[0].Client != "sturdy" || rs[1].Client != "official" {
		t.Fatalf("results %+v", rs)
	}
	for _, r := range rs {
		if r.Ops == 0 || r.Faults == 0 {
			t.Errorf("%s: %d operations, %d faults: the workload or the fail point did not run", r.Client, r.Ops, r.Faults)
		}
		// reply-lost applies the write before losing the reply: a success
		// is applied exactly once and a failure at most once.
		if r.Applied < r.Ops-r.Failures || r.Applied > r.Ops {
			t.Errorf("%s: %d applied for %d operations of which %d failed", r.Client, r.Applied, r.Ops, r.Failures)
		}
	}
	// The reply of a lost write is replayed from the transaction table on
	// the retry, which the fail point skips: sturdy's one retry always
	// succeeds.
	if rs[0].Failures != 0 {
		t.Errorf("sturdy failed %d operations under reply-lost faults: %v", rs[0].Failures, rs[0].Errors)
	}
	// The page: the table as measured, the two summary charts and each
	// client's timeline, whose faults add up to the client's count.
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	p := parsePage(t, b)
	checkPage(t, p, 6)
	if rows := p.rows(t, "clients"); len(rows) != 3 || rows[1][0] != "sturdy" || rows[2][3] != fmt.Sprint(rs[1].Faults) {
		t.Errorf("clients table %q", rows)
	}
	for _, r := range rs {
		var ops, faults int64
		for _, s := range r.Timeline {
			ops += s.Succeeded + s.Failed
			faults += s.Faults
		}
		if ops != r.Ops || faults != r.Faults {
			t.Errorf("%s: the timeline has %d operations and %d faults, the run %d and %d", r.Client, ops, faults, r.Ops, r.Faults)
		}
	}
}

// With -timeout, sturdy retries a write that meets close-before faults until
// the deadline instead of once: without it about 1 in 10 retries meets the
// fault again (0.1 failures per fault at rate 0.1), with it almost none fail.
func TestBenchFaultsWithTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := filepath.Join(t.TempDir(), "faults.json")
	var stdout, stderr bytes.Buffer
	args := []string{"bench", "faults", "-fault", "close-before", "-timeout", "2s", "-clients", "sturdy",
		"-duration", "2s", "-goroutines", "4", "-json", out}
	if code := run(ctx, args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "timeoutMS=2000") {
		t.Errorf("the tool does not say the clients run with timeoutMS: %s", stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rs []faultsResult
	if err := json.Unmarshal(b, &rs); err != nil || len(rs) != 1 {
		t.Fatalf("results %s (%v)", b, err)
	}
	r := rs[0]
	// A loaded machine runs few operations in 2 s; what matters is that the
	// fault fired often enough for the ratio to mean something.
	if r.Faults < 10 {
		t.Fatalf("only %d faults in %d operations", r.Faults, r.Ops)
	}
	if r.FailuresPerFault > 0.03 {
		t.Errorf("%d failures for %d faults (%.3f per fault) under a 2 s timeout: %v", r.Failures, r.Faults, r.FailuresPerFault, r.Errors)
	}
}

// bench failover steps the primary down and measures every window; by
// default both clients run at once and are measured against the same
// step-downs, with -sequential one after the other.
func TestBenchFailoverSmoke(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra []string
	}{{"together", nil}, {"sequential", []string{"-sequential"}}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			out, page := filepath.Join(t.TempDir(), "failover.json"), filepath.Join(t.TempDir(), "failover.html")
			var stdout, stderr bytes.Buffer
			args := append([]string{"bench", "failover", "-duration", "1500ms", "-every", "500ms", "-goroutines", "2", "-json", out, "-html", page}, tc.extra...)
			if code := run(ctx, args, &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			var rs []failoverResult
			readJSON(t, out, &rs)
			if len(rs) != 2 || rs[0].Client != "sturdy" || rs[1].Client != "official" {
				t.Fatalf("results %+v", rs)
			}
			for _, r := range rs {
				if r.StepDowns == 0 || r.Ops == 0 {
					t.Fatalf("%s: results %+v", r.Client, r)
				}
				if len(r.Windows) != r.StepDowns {
					t.Errorf("%s: %d windows for %d step-downs", r.Client, len(r.Windows), r.StepDowns)
				}
				if r.UnavailableMaxms < r.UnavailableP90ms || r.UnavailableP90ms < r.UnavailableP50ms || r.UnavailableP50ms <= 0 {
					t.Errorf("%s: windows p50 %v p90 %v max %v", r.Client, r.UnavailableP50ms, r.UnavailableP90ms, r.UnavailableMaxms)
				}
			}
			if tc.extra == nil {
				if rs[0].StepDowns != rs[1].StepDowns {
					t.Errorf("run together, the clients saw %d and %d step-downs", rs[0].StepDowns, rs[1].StepDowns)
				}
				if !strings.Contains(stdout.String(), "per step-down: sturdy shorter") {
					t.Errorf("no paired comparison in the output:\n%s", stdout.String())
				}
			}
			b, err := os.ReadFile(page)
			if err != nil {
				t.Fatal(err)
			}
			p := parsePage(t, b)
			checkPage(t, p, 1)
			if bars := p.all(withClass("rect", "bar")); len(bars) != rs[0].StepDowns+rs[1].StepDowns {
				t.Errorf("%d bars for %d + %d step-downs", len(bars), rs[0].StepDowns, rs[1].StepDowns)
			}
		})
	}
}

func TestRecoveryTime(t *testing.T) {
	p := spikeProfile{Base: 0.5, Capacity: 100, Before: time.Second, For: time.Second, After: 3 * time.Second,
		Bucket: 500 * time.Millisecond, RecoveredAt: 0.9, Window: 1}
	// Buckets of 0.5 s; the spike ends at bucket 4. Offered base = 50/s,
	// so recovery needs a 1 s window averaging ≥ 45/s.
	goodput := []float64{50, 50, 5, 5, 0, 10, 40, 50, 50, 50}
	if got := recoveryTime(goodput, p); got != 1.0 { // window [6,8): (40+50)/2 = 45
		t.Errorf("recovery = %v, want 1.0", got)
	}
	if got := recoveryTime([]float64{50, 50, 5, 5, 0, 10, 20, 20, 20, 30}, p); got != -1 {
		t.Errorf("never recovered: got %v, want -1", got)
	}
	if got := recoveryTime([]float64{50, 50, 5, 5, 50, 50, 50, 50, 50, 50}, p); got != 0 {
		t.Errorf("immediate recovery: got %v, want 0", got)
	}
}

func TestBenchOverloadSpikeSmoke(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	out, html := filepath.Join(dir, "spike.json"), filepath.Join(dir, "spike.html")
	var stdout, stderr bytes.Buffer
	args := []string{"bench", "overload", "-spike", "-capacity", "200", "-before", "300ms", "-spike-for", "500ms", "-after", "1s",
		"-clients", "no-retries,sturdy", "-json", out, "-html", html}
	if code := run(ctx, args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var rows []map[string]any
	readJSON(t, out, &rows)
	if len(rows) != 2 || rows[0]["client"] != "no-retries" || rows[1]["client"] != "sturdy" {
		t.Fatalf("rows %v", rows)
	}
	for _, r := range rows {
		for _, k := range []string{"recovery_s", "amplification", "goodput_during_spike"} {
			if _, ok := r[k]; !ok {
				t.Errorf("%v lacks %q", r["client"], k)
			}
		}
		if r["succeeded"].(float64) == 0 {
			t.Errorf("%v: nothing succeeded", r["client"])
		}
	}
	if a := rows[0]["amplification"].(float64); a > 1.0001 {
		t.Errorf("no-retries sent %.2f attempts per request", a)
	}
	h, err := os.ReadFile(html)
	if err != nil || !bytes.Contains(h, []byte("<polyline")) {
		t.Errorf("HTML chart missing (%v)", err)
	}
}

func TestBenchConnectSmoke(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := filepath.Join(t.TempDir(), "connect.json")
	var stdout, stderr bytes.Buffer
	args := []string{"bench", "connect", "-rate", "20", "-burst", "2", "-goroutines", "50", "-duration", "1s", "-json", out}
	if code := run(ctx, args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var rs []connectResult
	readJSON(t, out, &rs)
	if len(rs) != 2 || rs[0].Client != "sturdy" || rs[1].Client != "official" {
		t.Fatalf("results %+v", rs)
	}
	for _, r := range rs {
		if r.Ops == 0 || r.ConnAttempts == 0 {
			t.Errorf("%s: %d ops, %d connection attempts", r.Client, r.Ops, r.ConnAttempts)
		}
	}
	// 50 goroutines want up to 50 connections from a server admitting 2
	// at once and 20 a second: some are refused. sturdy's pool backs off
	// after a refusal instead of redialing at once, so it cannot need more
	// attempts than connections it could have been admitted plus its
	// refusals' backoffs allow: far fewer than a redial per refusal.
	if s := rs[0]; s.ConnRefused > 0 && s.ConnAttempts > 200 {
		t.Errorf("sturdy made %d connection attempts (%d refused) in 1 s against a 20/s limiter", s.ConnAttempts, s.ConnRefused)
	}
}
