package topology

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/blackpipe"
	"github.com/sturdy-go/sturdy/event"
	"github.com/sturdy-go/sturdy/mongosim"
	"github.com/sturdy-go/sturdy/wire"
)

// heartbeats records heartbeat events in order.
type heartbeats struct {
	mu     sync.Mutex
	events []string // "started", "succeeded", "failed", each with "/awaited" if awaited
}

func (h *heartbeats) add(kind string, awaited bool) {
	if awaited {
		kind += "/awaited"
	}
	h.mu.Lock()
	h.events = append(h.events, kind)
	h.mu.Unlock()
}

func (h *heartbeats) count(kind string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, e := range h.events {
		if e == kind {
			n++
		}
	}
	return n
}

func (h *heartbeats) monitor() *event.Monitor {
	return &event.Monitor{
		ServerHeartbeatStarted:   func(e *event.ServerHeartbeatStartedEvent) { h.add("started", e.Awaited) },
		ServerHeartbeatSucceeded: func(e *event.ServerHeartbeatSucceededEvent) { h.add("succeeded", e.Awaited) },
		ServerHeartbeatFailed:    func(e *event.ServerHeartbeatFailedEvent) { h.add("failed", e.Awaited) },
	}
}

func isAwaitable(r *blackpipe.Request) bool {
	_, err := r.Command.LookupErr("maxAwaitTimeMS")
	return err == nil
}

// TestStreamingMonitorReadsExhaustReplies: after the handshake the monitor
// sends one awaitable hello with exhaustAllowed and applies every streamed
// reply at once; plain hellos for RTT come on a second connection; a
// network error on the stream marks the server Unknown, clears the pool
// and is retried at once.
func TestStreamingMonitorReadsExhaustReplies(t *testing.T) {
	srv := blackpipe.Start(t)
	type stream struct {
		*blackpipe.Stream
		base bson.D // the built-in hello reply to the request
	}
	streams := make(chan stream, 4)
	var (
		mu          sync.Mutex
		awaitConns  = map[int64]int{} // awaitable hellos per connection
		plainOnConn = map[int64]int{} // plain hellos after the handshake
	)
	srv.Autorespond(blackpipe.Command("hello"), func(r *blackpipe.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		if !isAwaitable(r) {
			if _, err := r.Command.LookupErr("client"); err != nil { // not a handshake
				plainOnConn[r.Conn.ID()]++
			}
			return false // the built-in hello answers
		}
		if r.Flags&wire.ExhaustAllowed == 0 {
			t.Errorf("awaitable hello without exhaustAllowed")
		}
		awaitConns[r.Conn.ID()]++
		if awaitConns[r.Conn.ID()] > 1 {
			t.Errorf("conn %d sent another awaitable hello while streaming", r.Conn.ID())
		}
		st, err := r.Stream()
		if err != nil {
			t.Errorf("stream: %v", err)
			return false
		}
		streams <- stream{st, srv.HelloReply(r)}
		return true
	})
	hb := &heartbeats{}
	topo := connect(t, Options{Hosts: []string{srv.Addr()}, Direct: true, ServerMonitoringMode: "stream",
		HeartbeatInterval: 500 * time.Millisecond, MinHeartbeatInterval: 10 * time.Millisecond, Monitor: hb.monitor()})
	s := topo.servers[NormalizeAddr(srv.Addr())]

	var st stream
	select {
	case st = <-streams:
	case <-time.After(10 * time.Second):
		t.Fatal("no awaitable hello arrived")
	}
	base := st.base
	pid := s.Description().TopologyVersion.ProcessID
	for i := int64(1); i <= 3; i++ {
		reply := append(bson.D(nil), base...)
		for j := range reply {
			if reply[j].Key == "topologyVersion" {
				reply[j].Value = bson.D{{Key: "processId", Value: pid}, {Key: "counter", Value: 100 + i}}
			}
		}
		if err := st.Send(reply, true); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Second, "the streamed reply to be applied", func() bool {
			tv := s.Description().TopologyVersion
			return tv != nil && tv.Counter == 100+i
		})
	}
	if n := hb.count("succeeded/awaited"); n < 3 {
		t.Fatalf("%d awaited heartbeat successes, want ≥ 3: %v", n, hb.events)
	}
	// The RTT monitor polls plain hello on a connection of its own.
	waitFor(t, 5*time.Second, "a plain hello on another connection", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for id, n := range plainOnConn {
			if n > 0 && awaitConns[id] == 0 {
				return true
			}
		}
		return false
	})
	waitFor(t, 5*time.Second, "an RTT average", func() bool { return s.Description().RTT > 0 })

	// Drop the streaming connection: Unknown, pool cleared, immediate retry.
	gen := s.Pool().Generation()
	for _, c := range srv.Connections() {
		mu.Lock()
		streaming := awaitConns[c.ID()] > 0
		mu.Unlock()
		if streaming {
			_ = c.Close()
		}
	}
	waitFor(t, 5*time.Second, "an awaited heartbeat failure", func() bool { return hb.count("failed/awaited") == 1 })
	waitFor(t, 5*time.Second, "the pool to be cleared", func() bool { return s.Pool().Generation() > gen })
	// The retry handshakes at once and streams again.
	select {
	case st = <-streams:
	case <-time.After(5 * time.Second):
		t.Fatal("the monitor did not reconnect and stream again")
	}
	if k := s.Description().Kind; k != Standalone {
		t.Fatalf("after the retry the server is %s", k)
	}
}

// TestPollModeNeverStreams: serverMonitoringMode=poll sends plain hellos
// only, every heartbeat, and no heartbeat is awaited.
func TestPollModeNeverStreams(t *testing.T) {
	srv := blackpipe.Start(t)
	var mu sync.Mutex
	var awaitable int
	srv.Autorespond(blackpipe.Command("hello"), func(r *blackpipe.Request) bool {
		if isAwaitable(r) || r.Flags&wire.ExhaustAllowed != 0 {
			mu.Lock()
			awaitable++
			mu.Unlock()
		}
		return false
	})
	hb := &heartbeats{}
	connect(t, Options{Hosts: []string{srv.Addr()}, Direct: true, ServerMonitoringMode: "poll",
		HeartbeatInterval: 50 * time.Millisecond, MinHeartbeatInterval: 10 * time.Millisecond, Monitor: hb.monitor()})
	waitFor(t, 10*time.Second, "four heartbeats", func() bool { return hb.count("succeeded") >= 4 })
	mu.Lock()
	defer mu.Unlock()
	if awaitable != 0 || hb.count("started/awaited") != 0 || hb.count("succeeded/awaited") != 0 {
		t.Fatalf("poll mode streamed: %d awaitable hellos, events %v", awaitable, hb.events)
	}
	if n := len(srv.Connections()); n != 1 {
		t.Fatalf("poll mode uses %d connections, want 1 (no RTT monitor)", n)
	}
}

func TestStreamingEnabled(t *testing.T) {
	for _, k := range []string{"AWS_EXECUTION_ENV", "AWS_LAMBDA_RUNTIME_API", "FUNCTIONS_WORKER_RUNTIME", "K_SERVICE", "FUNCTION_NAME", "VERCEL"} {
		t.Setenv(k, "")
	}
	if !streamingEnabled("") || !streamingEnabled("auto") || !streamingEnabled("stream") || streamingEnabled("poll") {
		t.Fatal("wrong mode resolution off FaaS")
	}
	t.Setenv("AWS_EXECUTION_ENV", "AWS_Lambda_java8")
	if streamingEnabled("auto") || !streamingEnabled("stream") {
		t.Fatal("auto must poll on FaaS, stream must stream")
	}
	if _, err := New(withTestDefaults(Options{Hosts: []string{"a:1"}, ServerMonitoringMode: "push"})); err == nil {
		t.Fatal("an unknown serverMonitoringMode was accepted")
	}
}

func TestRTTStatsMinimum(t *testing.T) {
	var s rttStats
	s.add(5 * time.Millisecond)
	if _, m := s.get(); m != 0 {
		t.Fatalf("min RTT with one sample is %v, want 0", m)
	}
	for i := 1; i <= 12; i++ {
		s.add(time.Duration(i) * time.Millisecond)
	}
	// The last 10 samples are 3..12 ms.
	if _, m := s.get(); m != 3*time.Millisecond {
		t.Fatalf("min RTT %v, want 3ms", m)
	}
	s.reset()
	if a, m := s.get(); a != 0 || m != 0 {
		t.Fatalf("after reset: avg %v min %v", a, m)
	}
}

// TestStreamingSeesStepDownWithinHeartbeat: with default heartbeat
// settings, a streaming client learns of a new primary from the pushed
// hello, long before a 10 s poll would.
func TestStreamingSeesStepDownWithinHeartbeat(t *testing.T) {
	d := measureStepDown(t, "stream")
	t.Logf("streaming: new primary seen %v after the step-down", d)
	if d > 3*time.Second {
		t.Fatalf("streaming client took %v to see the new primary", d)
	}
}

// measureStepDown returns the time from replSetStepDown to the topology
// reporting the new primary, with the default heartbeat settings.
func measureStepDown(t *testing.T, mode string) time.Duration {
	cluster := mongosim.StartWithOptions(t, mongosim.Options{Members: 3})
	hosts := strings.Split(strings.TrimSuffix(strings.TrimPrefix(cluster.URI(), "mongodb://"), "/?replicaSet=rs0"), ",")
	topo := connect(t, Options{Hosts: hosts, SetName: "rs0", ServerMonitoringMode: mode})
	old := selectWrite(t, topo, 10*time.Second)
	// Let every monitor settle into its steady state (streaming, or
	// sleeping between polls).
	waitFor(t, 10*time.Second, "all members known", func() bool {
		for _, sd := range topo.Description().Servers {
			if sd.Kind == ServerUnknown {
				return false
			}
		}
		return true
	})
	time.Sleep(time.Second)
	start := time.Now()
	if err := cluster.StepDown(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := cluster.Primary().Addr()
	if want == old.Addr() {
		t.Fatal("step down kept the same primary")
	}
	waitFor(t, 30*time.Second, "the new primary", func() bool {
		for _, sd := range topo.Description().Servers {
			if sd.Kind == RSPrimary && sd.Addr == NormalizeAddr(want) {
				return true
			}
		}
		return false
	})
	return time.Since(start)
}

// TestMeasureStepDownDetection compares streaming and polling with the
// default heartbeat (10 s): set STURDY_MEASURE_FAILOVER=N to run N
// step-downs per mode. Polling waits for the next heartbeat, so it is
// slow and off by default.
func TestMeasureStepDownDetection(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("STURDY_MEASURE_FAILOVER"))
	if n <= 0 {
		t.Skip("set STURDY_MEASURE_FAILOVER=N to measure")
	}
	for _, mode := range []string{"stream", "poll"} {
		var ds []time.Duration
		for range n {
			t.Run(mode, func(t *testing.T) { ds = append(ds, measureStepDown(t, mode)) })
		}
		slices.Sort(ds)
		t.Logf("%s: step-down → new primary seen, n=%d min %v median %v max %v", mode, len(ds), ds[0], ds[len(ds)/2], ds[len(ds)-1])
	}
}
