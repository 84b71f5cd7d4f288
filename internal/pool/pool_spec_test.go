package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sturdy-go/sturdy/blackpipe"
	"github.com/sturdy-go/sturdy/event"
	"github.com/sturdy-go/sturdy/internal/conn"
	"github.com/sturdy-go/sturdy/internal/testsupport"
	"github.com/sturdy-go/sturdy/mongoerr"
)

type cmapTest struct {
	Description string          `json:"description"`
	Style       string          `json:"style"`
	RunOn       json.RawMessage `json:"runOn"`
	FailPoint   *struct {
		ConfigureFailPoint string          `json:"configureFailPoint"`
		Mode               json.RawMessage `json:"mode"`
		Data               struct {
			FailCommands    []string `json:"failCommands"`
			CloseConnection bool     `json:"closeConnection"`
			BlockConnection bool     `json:"blockConnection"`
			BlockTimeMS     int      `json:"blockTimeMS"`
			ErrorCode       int32    `json:"errorCode"`
			AppName         string   `json:"appName"`
		} `json:"data"`
	} `json:"failPoint"`
	PoolOptions map[string]any   `json:"poolOptions"`
	Operations  []map[string]any `json:"operations"`
	Error       *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	Events []map[string]any `json:"events"`
	Ignore []string         `json:"ignore"`
}

func TestCMAPSpec(t *testing.T) {
	dir := testsupport.SpecDir(t, "connection-monitoring-and-pooling", "tests", "cmap-format")
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(files) == 0 {
		t.Skipf("CMAP spec tests not found in %s (set SPEC_TESTS)", dir)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			t.Parallel()
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var tc cmapTest
			if err := json.Unmarshal(b, &tc); err != nil {
				t.Fatalf("decode %s: %v", f, err)
			}
			runCMAPTest(t, &tc)
		})
	}
}

// specEventName maps the spec's event names to ours.
func specEventName(s string) event.PoolEventType {
	if rest, ok := strings.CutPrefix(s, "ConnectionPool"); ok {
		return event.PoolEventType("Pool" + rest)
	}
	return event.PoolEventType(s)
}

// recorder collects pool events.
type recorder struct {
	mu     sync.Mutex
	events []event.PoolEvent
	notify chan struct{}
}

func newRecorder() *recorder { return &recorder{notify: make(chan struct{})} }

func (r *recorder) add(e *event.PoolEvent) {
	r.mu.Lock()
	r.events = append(r.events, *e)
	close(r.notify)
	r.notify = make(chan struct{})
	r.mu.Unlock()
}

func (r *recorder) snapshot() []event.PoolEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// waitFor waits until n events of type typ were seen.
func (r *recorder) waitFor(typ event.PoolEventType, n int, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		got := 0
		for _, e := range r.events {
			if e.Type == typ {
				got++
			}
		}
		ch := r.notify
		r.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ch:
		case <-deadline.C:
			return fmt.Errorf("saw %d %s events, want %d within %v", got, typ, n, timeout)
		}
	}
}

// thread runs operations in order on its own goroutine.
type thread struct {
	ops  chan func() error
	wg   sync.WaitGroup // pending operations
	done chan struct{}
	mu   sync.Mutex
	err  error
}

func startThread() *thread {
	th := &thread{ops: make(chan func() error, 16), done: make(chan struct{})}
	go func() {
		defer close(th.done)
		for op := range th.ops {
			if err := op(); err != nil {
				th.mu.Lock()
				if th.err == nil {
					th.err = err
				}
				th.mu.Unlock()
			}
			th.wg.Done()
		}
	}()
	return th
}

func (th *thread) run(op func() error) {
	th.wg.Add(1)
	th.ops <- op
}

func num(v any) (float64, bool) {
	f, ok := v.(float64)
	return f, ok
}

func msOption(opts map[string]any, key string) (time.Duration, bool) {
	f, ok := num(opts[key])
	if !ok {
		return 0, false
	}
	return time.Duration(f) * time.Millisecond, true
}

// failPointHandler emulates the failCommand fail point on the handshake
// with a blackpipe handler; it returns a reason when it cannot.
func failPointHandler(tc *cmapTest) (blackpipe.Handler, string) {
	fp := tc.FailPoint
	if fp == nil {
		return nil, ""
	}
	if fp.ConfigureFailPoint != "failCommand" {
		return nil, "fail point " + fp.ConfigureFailPoint + " is not emulated"
	}
	for _, c := range fp.Data.FailCommands {
		if c != "hello" && c != "isMaster" {
			return nil, "failCommand on " + c + " is not emulated"
		}
	}
	var times atomic.Int64
	var mode string
	if err := json.Unmarshal(fp.Mode, &mode); err == nil {
		if mode != "alwaysOn" {
			return nil, "fail point mode " + mode + " is not emulated"
		}
		times.Store(1 << 62)
	} else {
		var m struct {
			Times *int64 `json:"times"`
		}
		if err := json.Unmarshal(fp.Mode, &m); err != nil || m.Times == nil {
			return nil, "fail point mode " + string(fp.Mode) + " is not emulated"
		}
		times.Store(*m.Times)
	}
	data := fp.Data
	if !data.BlockConnection && data.ErrorCode == 0 && !data.CloseConnection {
		return nil, "fail point data without block, error or close is not emulated"
	}
	return func(r *blackpipe.Request) bool {
		if !strings.EqualFold(r.Name, "hello") && !strings.EqualFold(r.Name, "isMaster") {
			return false
		}
		if data.AppName != "" && r.Conn.AppName() != data.AppName {
			return false
		}
		if times.Add(-1) < 0 {
			return false
		}
		if data.BlockConnection {
			t := time.NewTimer(time.Duration(data.BlockTimeMS) * time.Millisecond)
			select {
			case <-t.C:
			case <-r.Context().Done():
			}
			t.Stop()
		}
		switch {
		case data.CloseConnection:
			_ = r.Hangup()
		case data.ErrorCode != 0:
			_ = r.ReplyError(data.ErrorCode, "failCommand fail point")
		default:
			return false // blocked only: let the default hello answer
		}
		return true
	}, ""
}

func runCMAPTest(t *testing.T, tc *cmapTest) {
	handler, skip := failPointHandler(tc)
	if skip != "" {
		t.Skip(skip)
	}
	srv := blackpipe.StartWithOptions(t, blackpipe.Options{Handler: handler, Logf: func(string, ...any) {}})
	rec := newRecorder()

	po := tc.PoolOptions
	// The CMAP spec's defaults: New takes its options literally.
	// The client's defaults (the root's table): CMAP's background thread
	// every 100 ms unless the test says otherwise.
	o := Options{MaxPoolSize: 100, MaxConnecting: 2, BackgroundInterval: 100 * time.Millisecond, Monitor: &event.Monitor{Pool: rec.add}}
	if f, ok := num(po["maxPoolSize"]); ok {
		o.MaxPoolSize = int(f)
	}
	if f, ok := num(po["minPoolSize"]); ok {
		o.MinPoolSize = int(f)
	}
	if f, ok := num(po["maxConnecting"]); ok {
		o.MaxConnecting = int(f)
	}
	if d, ok := msOption(po, "maxIdleTimeMS"); ok {
		o.MaxIdleTime = d
	}
	if d, ok := msOption(po, "waitQueueTimeoutMS"); ok {
		o.WaitQueueTimeout = d
	}
	if d, ok := msOption(po, "backgroundThreadIntervalMS"); ok {
		o.BackgroundInterval = max(d, 0)
	}
	if s, ok := po["appName"].(string); ok {
		o.Conn = conn.Options{AppName: s}
	}
	for k := range po {
		switch k {
		case "maxPoolSize", "minPoolSize", "maxConnecting", "maxIdleTimeMS", "waitQueueTimeoutMS",
			"backgroundThreadIntervalMS", "appName":
		default:
			t.Skipf("pool option %s is not supported by the runner", k)
		}
	}
	var p *Pool
	// Stands in for SDAM: an establishment error nobody else sees clears
	// the pool, unless it is of an older generation.
	o.EstablishError = func(err error, gen uint64) {
		if gen == p.Generation() {
			p.Clear(err, false)
		}
	}
	p = New(srv.Addr(), o)

	var (
		mu      sync.Mutex
		conns   = map[string]*conn.Conn{}
		threads = map[string]*thread{}
		opErrs  []error
	)
	defer func() {
		// Teardown: close the pool (failing stuck check-outs), then let every
		// thread finish.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("close pool: %v", err)
		}
		for _, th := range threads {
			close(th.ops)
			<-th.done
		}
	}()

	for i, op := range tc.Operations {
		name, _ := op["name"].(string)
		var f func() error
		switch name {
		case "start":
			target, _ := op["target"].(string)
			threads[target] = startThread()
			continue
		case "wait":
			ms, _ := num(op["ms"])
			time.Sleep(time.Duration(ms) * time.Millisecond)
			continue
		case "waitForThread":
			target, _ := op["target"].(string)
			th := threads[target]
			if th == nil {
				t.Fatalf("op %d: no thread %q", i, target)
			}
			th.wg.Wait()
			th.mu.Lock()
			if th.err != nil {
				opErrs = append(opErrs, th.err)
			}
			th.mu.Unlock()
			continue
		case "waitForEvent":
			ev, _ := op["event"].(string)
			count, _ := num(op["count"])
			timeout := 10 * time.Second
			if ms, ok := num(op["timeout"]); ok {
				timeout = time.Duration(ms) * time.Millisecond
			}
			if err := rec.waitFor(specEventName(ev), int(count), timeout); err != nil {
				t.Fatalf("op %d waitForEvent: %v; events: %s", i, err, describe(rec.snapshot()))
			}
			continue
		case "checkOut":
			label, _ := op["label"].(string)
			f = func() error {
				c, err := p.CheckOut(context.Background())
				if err != nil {
					return err
				}
				if label != "" {
					mu.Lock()
					conns[label] = c
					mu.Unlock()
				}
				return nil
			}
		case "checkIn":
			label, _ := op["connection"].(string)
			f = func() error {
				mu.Lock()
				c := conns[label]
				mu.Unlock()
				if c == nil {
					return fmt.Errorf("no connection labelled %q", label)
				}
				p.CheckIn(c)
				return nil
			}
		case "clear":
			interrupt, _ := op["interruptInUseConnections"].(bool)
			f = func() error { p.Clear(errors.New("cleared by the spec test"), interrupt); return nil }
		case "close":
			f = func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				return p.Close(ctx)
			}
		case "ready":
			f = func() error { p.Ready(); return nil }
		default:
			t.Skipf("operation %q is not supported by the runner", name)
		}
		if target, ok := op["thread"].(string); ok {
			th := threads[target]
			if th == nil {
				t.Fatalf("op %d: no thread %q", i, target)
			}
			th.run(f)
			continue
		}
		if err := f(); err != nil {
			opErrs = append(opErrs, err)
		}
	}
	events := rec.snapshot()

	if tc.Error != nil {
		if len(opErrs) == 0 {
			t.Errorf("want a %s, got no error", tc.Error.Type)
		} else if !errorHasType(opErrs[0], tc.Error.Type) {
			t.Errorf("want a %s, got %T: %v", tc.Error.Type, opErrs[0], opErrs[0])
		}
	} else if len(opErrs) > 0 {
		t.Errorf("unexpected error: %v", opErrs[0])
	}

	ignore := map[event.PoolEventType]bool{}
	for _, s := range tc.Ignore {
		ignore[specEventName(s)] = true
	}
	var got []event.PoolEvent
	for _, e := range events {
		if !ignore[e.Type] {
			got = append(got, e)
		}
	}
	if len(got) != len(tc.Events) {
		t.Fatalf("got %d events, want %d:\n got: %s\nwant: %v", len(got), len(tc.Events), describe(got), tc.Events)
	}
	for i, want := range tc.Events {
		if err := matchEvent(got[i], want); err != nil {
			t.Errorf("event %d: %v\n got: %s\nwant: %v", i, err, describe(got), tc.Events)
		}
	}
}

func errorHasType(err error, typ string) bool {
	switch typ {
	case "WaitQueueTimeoutError":
		var e *mongoerr.WaitQueueTimeoutError
		return errors.As(err, &e)
	case "PoolClosedError":
		return errors.Is(err, ErrPoolClosed)
	case "PoolClearedError":
		var e *mongoerr.PoolClearedError
		return errors.As(err, &e)
	}
	return false
}

// matchEvent compares one event with its expectation; 42 means "present,
// any value".
func matchEvent(e event.PoolEvent, want map[string]any) error {
	if typ := specEventName(want["type"].(string)); e.Type != typ {
		return fmt.Errorf("type %s, want %s", e.Type, typ)
	}
	for k, v := range want {
		any42 := v == float64(42)
		switch k {
		case "type":
		case "address":
			if e.Address == "" {
				return errors.New("no address")
			}
			if !any42 && e.Address != v {
				return fmt.Errorf("address %s, want %v", e.Address, v)
			}
		case "connectionId":
			if e.ConnectionID <= 0 {
				return fmt.Errorf("connectionId %d", e.ConnectionID)
			}
			if !any42 && float64(e.ConnectionID) != v {
				return fmt.Errorf("connectionId %d, want %v", e.ConnectionID, v)
			}
		case "duration":
			if e.Duration <= 0 {
				return fmt.Errorf("duration %v, want > 0", e.Duration)
			}
		case "reason":
			if e.Reason != v {
				return fmt.Errorf("reason %q, want %v", e.Reason, v)
			}
		case "options":
			if e.Options == nil {
				return errors.New("no options")
			}
		case "interruptInUseConnections":
			if e.Interruptible != v {
				return fmt.Errorf("interruptInUseConnections %v, want %v", e.Interruptible, v)
			}
		default:
			return fmt.Errorf("runner does not check field %q", k)
		}
	}
	return nil
}

func describe(es []event.PoolEvent) string {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "\n  %s id=%d reason=%q", e.Type, e.ConnectionID, e.Reason)
	}
	return b.String()
}
