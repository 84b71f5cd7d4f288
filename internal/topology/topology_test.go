package topology

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/event"
	"github.com/sturdy-go/sturdy/internal/testsupport"
	"github.com/sturdy-go/sturdy/mongoerr"
	"github.com/sturdy-go/sturdy/mongosim"
	"github.com/sturdy-go/sturdy/readpref"
)

// connect starts a topology and disconnects it when the test ends.
// withTestDefaults fills the zero timing options with the values the client
// resolves by default, since New takes its options literally.
func withTestDefaults(o Options) Options {
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = 10 * time.Second
	}
	if o.MinHeartbeatInterval == 0 {
		o.MinHeartbeatInterval = 500 * time.Millisecond
	}
	if o.ServerSelectionTimeout == 0 {
		o.ServerSelectionTimeout = 30 * time.Second
	}
	return o
}

func connect(t *testing.T, o Options) *Topology {
	t.Helper()
	topo, err := New(withTestDefaults(o))
	if err != nil {
		t.Fatal(err)
	}
	if err := topo.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	testsupport.CloseOnCleanup(t, topo.Disconnect)
	return topo
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func selectWrite(t *testing.T, topo *Topology, timeout time.Duration) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	s, err := topo.SelectServer(ctx, WriteSelector(), nil)
	if err != nil {
		t.Fatalf("select writable: %v", err)
	}
	s.Dec()
	return s
}

// unusedAddr returns a loopback address nothing listens on.
func unusedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestDiscoversReplicaSetFromOneSeed(t *testing.T) {
	cluster := mongosim.StartWithOptions(t, mongosim.Options{Members: 3})
	members := cluster.Members()
	var mu sync.Mutex
	var heartbeats, serverChanges, topoChanges int
	mon := &event.Monitor{
		ServerHeartbeatSucceeded: func(*event.ServerHeartbeatSucceededEvent) { mu.Lock(); heartbeats++; mu.Unlock() },
		ServerDescriptionChanged: func(*event.ServerDescriptionChangedEvent) { mu.Lock(); serverChanges++; mu.Unlock() },
		TopologyDescriptionChanged: func(*event.TopologyDescriptionChangedEvent) {
			mu.Lock()
			topoChanges++
			mu.Unlock()
		},
	}
	// Seed with a secondary: discovery must follow its hosts list.
	topo := connect(t, Options{Hosts: []string{members[1].Addr()}, Monitor: mon})

	primary := selectWrite(t, topo, 20*time.Second)
	if primary.Addr() != members[0].Addr() {
		t.Fatalf("selected %s for writes, want the primary %s", primary.Addr(), members[0].Addr())
	}
	waitFor(t, 20*time.Second, "three known members", func() bool {
		d := topo.Description()
		known := 0
		for _, s := range d.Servers {
			if s.Kind == RSPrimary || s.Kind == RSSecondary {
				known++
			}
		}
		return known == 3 && len(d.Servers) == 3
	})
	d := topo.Description()
	if d.Kind != ReplicaSetWithPrimary || d.SetName != "rs0" {
		t.Fatalf("description %s, want ReplicaSetWithPrimary rs0", d)
	}
	if !d.SupportsSessions() || !d.SupportsRetryableWrites() {
		t.Fatalf("a 8.0 replica set supports sessions and retryable writes: %+v", d)
	}
	if d.CompatibilityErr != nil {
		t.Fatal(d.CompatibilityErr)
	}
	for _, s := range d.Servers {
		if s.RTT <= 0 {
			t.Errorf("%s has no RTT", s.Addr)
		}
	}
	// Events are published after the description they announce is in
	// place (outside the topology's lock), so they may trail it: wait for
	// them rather than count them at once.
	waitFor(t, 20*time.Second, "the discovery events", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return heartbeats >= 3 && serverChanges >= 3 && topoChanges >= 2
	})

	// The pool of a discovered server is ready: a connection can be had.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := primary.Pool().CheckOut(ctx)
	if err != nil {
		t.Fatalf("check out from the primary's pool: %v", err)
	}
	if _, err := c.RoundTrip(ctx, "admin", bson.D{{Key: "ping", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	primary.Pool().CheckIn(c)
}

func TestStepDownNewPrimarySelected(t *testing.T) {
	cluster := mongosim.StartWithOptions(t, mongosim.Options{Members: 3})
	topo := connect(t, Options{Hosts: strings.Split(strings.TrimSuffix(strings.TrimPrefix(cluster.URI(), "mongodb://"), "/?replicaSet=rs0"), ","), SetName: "rs0"})
	old := selectWrite(t, topo, 5*time.Second)
	if err := cluster.StepDown(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := cluster.Primary().Addr()
	if want == old.Addr() {
		t.Fatal("step down kept the same primary")
	}
	start := time.Now()
	topo.RequestImmediateCheck()
	waitFor(t, 20*time.Second, "writes to go to the new primary", func() bool {
		return selectWrite(t, topo, 20*time.Second).Addr() == want
	})
	t.Logf("new primary selected after %v", time.Since(start))
	waitFor(t, 20*time.Second, "the old primary to be seen as secondary", func() bool {
		sd, _ := topo.Description().Server(old.Addr())
		return sd.Kind == RSSecondary
	})
	if d := topo.Description(); d.MaxElectionID == nil || d.MaxSetVersion == nil || *d.MaxSetVersion < 2 {
		t.Fatalf("max election id / set version not advanced: %s", d)
	}
}

func TestStateChangeErrorMarksUnknownAndRechecks(t *testing.T) {
	cluster := mongosim.StartWithOptions(t, mongosim.Options{Members: 3})
	// What each ProcessError did is read from the events it published
	// before returning (the topology flushes them in the caller), not from
	// the description afterwards: the recheck it asks for may already have
	// brought the server back by the time the test looks.
	var mu sync.Mutex
	var unknowns []error // the errors of the descriptions that made a server Unknown
	var clears []error   // the errors that cleared a pool
	mon := &event.Monitor{
		ServerDescriptionChanged: func(e *event.ServerDescriptionChangedEvent) {
			if e.New.Kind == ServerUnknown.String() && e.Previous.Kind != ServerUnknown.String() {
				mu.Lock()
				unknowns = append(unknowns, e.New.Error)
				mu.Unlock()
			}
		},
		Pool: func(e *event.PoolEvent) {
			if e.Type == event.PoolCleared {
				mu.Lock()
				clears = append(clears, e.Error)
				mu.Unlock()
			}
		},
	}
	saw := func(list *[]error, err error) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range *list {
			if errors.Is(e, err) {
				return true
			}
		}
		return false
	}
	// Streaming (the default): the synthetic state-change error below is
	// not pushed by the server, so the monitor must cancel its awaited
	// check to rediscover the primary quickly. A heartbeat far longer than
	// the waits below shows it is that recheck, not the next heartbeat,
	// that brings the primary back.
	topo := connect(t, Options{Hosts: []string{cluster.Members()[0].Addr()}, SetName: "rs0",
		HeartbeatInterval: 5 * time.Minute, Monitor: mon})
	primary := selectWrite(t, topo, 30*time.Second)
	gen := primary.Pool().Generation()

	// A stale-looking error (older connection generation) is ignored.
	if gen > 0 {
		stale := &mongoerr.NetworkError{Addr: primary.Addr(), Op: "read", Err: io.EOF}
		primary.ProcessError(stale, gen-1, false)
		if saw(&unknowns, stale) || saw(&clears, stale) {
			t.Fatal("an error from an older connection generation was applied")
		}
	}
	// A timeout after the handshake says nothing about availability.
	timeout := &mongoerr.NetworkError{Addr: primary.Addr(), Op: "read", Err: context.DeadlineExceeded}
	primary.ProcessError(timeout, gen, false)
	if saw(&unknowns, timeout) || saw(&clears, timeout) {
		t.Fatal("a timeout after the handshake marked the primary Unknown or cleared its pool")
	}

	// "not writable primary" without a topologyVersion: Unknown, no clear,
	// and an immediate check brings it back.
	notPrimary := mongoerr.FromReply(mustMarshal(t, bson.D{{Key: "ok", Value: 0}, {Key: "code", Value: 10107}, {Key: "errmsg", Value: "not primary"}}))
	primary.ProcessError(notPrimary, gen, false)
	if !saw(&unknowns, notPrimary) {
		t.Fatal("a not-primary error did not mark the primary Unknown")
	}
	if saw(&clears, notPrimary) {
		t.Fatal("a not-primary error cleared the pool")
	}
	waitFor(t, 30*time.Second, "the primary to be rediscovered", func() bool {
		return primary.Description().Kind == RSPrimary
	})

	// A network error after the handshake: Unknown and the pool cleared.
	netErr := &mongoerr.NetworkError{Addr: primary.Addr(), Op: "read", Err: io.EOF}
	primary.ProcessError(netErr, gen, false)
	if !saw(&unknowns, netErr) || !saw(&clears, netErr) {
		t.Fatal("a network error did not mark the primary Unknown and clear its pool")
	}
	if g := primary.Pool().Generation(); g <= gen {
		t.Fatalf("pool generation %d after the clear, want more than %d", g, gen)
	}
	if s := selectWrite(t, topo, 30*time.Second); s.Addr() != primary.Addr() {
		t.Fatalf("reselected %s", s.Addr())
	}
}

func mustMarshal(t *testing.T, d bson.D) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSelectionTimeoutUnreachable(t *testing.T) {
	addr := unusedAddr(t)
	var mu sync.Mutex
	failed := 0
	topo := connect(t, Options{
		Hosts:                  []string{addr},
		ServerSelectionTimeout: 300 * time.Millisecond,
		Monitor: &event.Monitor{ServerHeartbeatFailed: func(*event.ServerHeartbeatFailedEvent) {
			mu.Lock()
			failed++
			mu.Unlock()
		}},
	})
	start := time.Now()
	_, err := topo.SelectServer(context.Background(), WriteSelector(), nil)
	elapsed := time.Since(start)
	var sse *mongoerr.ServerSelectionError
	if !errors.As(err, &sse) {
		t.Fatalf("got %v, want a ServerSelectionError", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error does not wrap DeadlineExceeded: %v", err)
	}
	if !strings.Contains(err.Error(), "writable server") || !strings.Contains(err.Error(), addr) {
		t.Errorf("error does not say what was wanted and what was seen: %v", err)
	}
	if !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("error does not report the server's last error: %v", err)
	}
	// The server's error is reported, not wrapped: a selection failure must
	// not look like a network error to retry logic, as nothing was sent.
	if mongoerr.IsNetworkError(err) {
		t.Errorf("selection error classifies as a network error: %v", err)
	}
	// The lower bound holds under any load; the upper one only tells the
	// 300 ms timeout from the 30 s default, with room for a slow machine.
	if elapsed < 250*time.Millisecond || elapsed > 10*time.Second {
		t.Errorf("selection took %v, want about 300ms", elapsed)
	}
	mu.Lock()
	defer mu.Unlock()
	if failed == 0 {
		t.Error("no heartbeat failure event")
	}
}

func TestSelectionHonoursContext(t *testing.T) {
	topo := connect(t, Options{Hosts: []string{unusedAddr(t)}})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := topo.SelectServer(ctx, ReadPrefSelector(readpref.ReadPref{Mode: readpref.Nearest}, 0), nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 10*time.Second { // the 30 s selection timeout did not decide it
		t.Fatalf("cancellation took %v", d)
	}
	if !strings.Contains(err.Error(), "nearest") {
		t.Errorf("error does not name the read preference: %v", err)
	}
}

func TestDeprioritizedServersSkippedWhileOthersRemain(t *testing.T) {
	cluster := mongosim.StartWithOptions(t, mongosim.Options{Members: 3})
	ms := cluster.Members()
	topo := connect(t, Options{Hosts: []string{ms[0].Addr()}, SetName: "rs0", LocalThreshold: time.Hour})
	waitFor(t, 5*time.Second, "all members known", func() bool {
		n := 0
		for _, s := range topo.Description().Servers {
			if s.Available() {
				n++
			}
		}
		return n == 3
	})
	nearest := ReadPrefSelector(readpref.ReadPref{Mode: readpref.Nearest}, 0)
	ctx := context.Background()
	for range 20 {
		s, err := topo.SelectServer(ctx, nearest, []string{ms[0].Addr(), ms[1].Addr()})
		if err != nil {
			t.Fatal(err)
		}
		s.Dec()
		if s.Addr() != ms[2].Addr() {
			t.Fatalf("selected deprioritized %s", s.Addr())
		}
	}
	// With every candidate deprioritized, one is still chosen.
	s, err := topo.SelectServer(ctx, WriteSelector(), []string{ms[0].Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Dec()
	if s.Addr() != ms[0].Addr() {
		t.Fatalf("write went to %s, want the (deprioritized) primary", s.Addr())
	}
	if s.OperationCount() != 1 {
		t.Fatalf("operation count %d after selection, want 1", s.OperationCount())
	}
}

func TestDirectConnectionToSecondary(t *testing.T) {
	cluster := mongosim.StartWithOptions(t, mongosim.Options{Members: 2})
	sec := cluster.Members()[1].Addr()
	topo := connect(t, Options{Hosts: []string{sec}, Direct: true})
	s := selectWrite(t, topo, 5*time.Second)
	if s.Addr() != sec {
		t.Fatalf("selected %s", s.Addr())
	}
	d := topo.Description()
	if d.Kind != Single || len(d.Servers) != 1 || d.Servers[0].Kind != RSSecondary {
		t.Fatalf("description %s, want Single with one RSSecondary", d)
	}
}

func TestStandaloneNoRetryableWrites(t *testing.T) {
	cluster := mongosim.StartWithOptions(t, mongosim.Options{Standalone: true})
	topo := connect(t, Options{Hosts: []string{cluster.Members()[0].Addr()}})
	selectWrite(t, topo, 5*time.Second)
	d := topo.Description()
	if d.Kind != Single || d.Servers[0].Kind != Standalone {
		t.Fatalf("description %s, want Single standalone", d)
	}
	if d.SupportsRetryableWrites() {
		t.Fatal("a standalone does not support retryable writes")
	}
}

func TestNewValidates(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Error("no hosts accepted")
	}
	if _, err := New(withTestDefaults(Options{Hosts: []string{"a", "b"}, Direct: true})); err == nil {
		t.Error("direct connection with two hosts accepted")
	}
	// Options are literal: a zero heartbeat would be a busy loop, not 10 s.
	if _, err := New(Options{Hosts: []string{"a:1"}}); err == nil || !strings.Contains(err.Error(), "HeartbeatInterval") {
		t.Errorf("zero HeartbeatInterval: %v, want an error", err)
	}
}

func TestDisconnectStopsSelection(t *testing.T) {
	// A selection that finds no server asks for a check before it waits;
	// with the heartbeat far off, a second check (after the initial one)
	// shows the selection has reached its wait.
	var mu sync.Mutex
	checks := 0
	mon := &event.Monitor{ServerHeartbeatStarted: func(*event.ServerHeartbeatStartedEvent) { mu.Lock(); checks++; mu.Unlock() }}
	topo, err := New(withTestDefaults(Options{Hosts: []string{unusedAddr(t)}, HeartbeatInterval: 5 * time.Minute, Monitor: mon}))
	if err != nil {
		t.Fatal(err)
	}
	if err := topo.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := topo.SelectServer(context.Background(), WriteSelector(), nil)
		errc <- err
	}()
	waitFor(t, 30*time.Second, "the selection to ask for a check", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return checks >= 2
	})
	if err := topo.Disconnect(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, mongoerr.ErrClientDisconnected) || strings.Contains(err.Error(), "topology") {
			t.Fatalf("got %v, want the client's ErrClientDisconnected", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("selection still waiting after Disconnect")
	}
}

// SDAM "Client closing": Disconnect removes every server and announces the
// Unknown, empty description before TopologyClosed.
func TestDisconnectAnnouncesUnknownBeforeClosed(t *testing.T) {
	cluster := mongosim.StartWithOptions(t, mongosim.Options{Members: 3})
	var mu sync.Mutex
	var order []string
	var last event.TopologyDescriptionChangedEvent
	topoChanges := 0
	mon := &event.Monitor{
		ServerClosed: func(*event.ServerClosedEvent) { mu.Lock(); order = append(order, "serverClosed"); mu.Unlock() },
		TopologyDescriptionChanged: func(e *event.TopologyDescriptionChangedEvent) {
			mu.Lock()
			order = append(order, "topologyChanged")
			topoChanges++
			last = *e
			mu.Unlock()
		},
		TopologyClosed: func(*event.TopologyClosedEvent) { mu.Lock(); order = append(order, "topologyClosed"); mu.Unlock() },
	}
	topo, err := New(withTestDefaults(Options{Hosts: []string{cluster.Members()[0].Addr()}, Monitor: mon}))
	if err != nil {
		t.Fatal(err)
	}
	if err := topo.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The initial change, then one per member as each is discovered.
	waitFor(t, 10*time.Second, "four topology changes", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return topoChanges >= 4
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := topo.Disconnect(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	n := len(order)
	if n < 5 || order[n-1] != "topologyClosed" || order[n-2] != "topologyChanged" ||
		order[n-3] != "serverClosed" || order[n-4] != "serverClosed" || order[n-5] != "serverClosed" {
		t.Fatalf("events end with %v, want 3 × serverClosed, topologyChanged, topologyClosed", order)
	}
	if last.Previous.Kind != "ReplicaSetWithPrimary" || last.New.Kind != "Unknown" || len(last.New.Servers) != 0 {
		t.Fatalf("closing change %+v → %+v, want ReplicaSetWithPrimary → Unknown with no servers", last.Previous, last.New)
	}
	if d := topo.Description(); d.Kind != TopologyUnknown || len(d.Servers) != 0 {
		t.Fatalf("description after Disconnect: %s", d)
	}
}
