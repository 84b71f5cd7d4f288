package topology

import (
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/event"
	"github.com/sturdy-go/sturdy/internal/conn"
	"github.com/sturdy-go/sturdy/mongosim"
)

// The prose tests of the SDAM spec's tests/README that apply to the
// streaming protocol, against mongosim over TCP.

func standaloneAddr(t *testing.T) (*mongosim.Cluster, string) {
	t.Helper()
	sim := mongosim.StartWithOptions(t, mongosim.Options{Standalone: true})
	host := strings.TrimPrefix(sim.URI(), "mongodb://")
	if i := strings.IndexAny(host, "/?"); i >= 0 {
		host = host[:i]
	}
	return sim, host
}

// Streaming protocol test 1: with heartbeatFrequencyMS=500 the streamed
// replies come about every 500 ms — not faster (the server holds each
// awaitable hello) and not at the 10 s default.
func TestProseStreamingHeartbeatFrequency(t *testing.T) {
	_, addr := standaloneAddr(t)
	hb := &heartbeats{}
	connect(t, Options{Hosts: []string{addr}, Direct: true, ServerMonitoringMode: "stream",
		HeartbeatInterval: 500 * time.Millisecond, Monitor: hb.monitor()})
	waitFor(t, 10*time.Second, "the first awaited reply", func() bool { return hb.count("succeeded/awaited") >= 1 })
	start := time.Now()
	waitFor(t, 10*time.Second, "four more awaited replies", func() bool { return hb.count("succeeded/awaited") >= 5 })
	if d := time.Since(start); d < 1500*time.Millisecond {
		t.Fatalf("four awaited replies in %v: the server did not hold them for maxAwaitTimeMS", d)
	}
}

// RTT test 1: the RTT keeps being updated while streaming, from the RTT
// monitor's plain hellos: blocking hello for 500 ms raises it.
func TestProseRTTContinuouslyUpdated(t *testing.T) {
	sim, addr := standaloneAddr(t)
	var mu sync.Mutex
	var zeroRTT []string
	mon := &event.Monitor{ServerDescriptionChanged: func(e *event.ServerDescriptionChangedEvent) {
		if e.New.Kind != "Unknown" && e.New.RTT <= 0 {
			mu.Lock()
			zeroRTT = append(zeroRTT, e.New.Kind)
			mu.Unlock()
		}
	}}
	topo := connect(t, Options{Hosts: []string{addr}, Direct: true, ServerMonitoringMode: "stream",
		HeartbeatInterval: 500 * time.Millisecond, Conn: conn.Options{AppName: "streamingRttTest"}, Monitor: mon})
	s := selectWrite(t, topo, 10*time.Second)
	time.Sleep(2 * time.Second)
	mu.Lock()
	if len(zeroRTT) > 0 {
		t.Errorf("server description changes without an RTT: %v", zeroRTT)
	}
	mu.Unlock()
	if err := sim.SetFailPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: 1000}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"hello", "isMaster"}},
			{Key: "blockConnection", Value: true}, {Key: "blockTimeMS", Value: 500}, {Key: "appName", Value: "streamingRttTest"}}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sim.SetFailPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}})
	})
	waitFor(t, 10*time.Second, "the RTT to exceed 250ms", func() bool { return s.Description().RTT > 250*time.Millisecond })
	if m := s.Description().MinRTT; m <= 0 {
		t.Fatalf("min RTT %v after many samples", m)
	}
}

// Heartbeat test 1: ServerHeartbeatStartedEvent comes before the
// monitoring socket is connected.
func TestProseHeartbeatStartedBeforeSocket(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		events []string
		wg     sync.WaitGroup
	)
	push := func(e string) { mu.Lock(); events = append(events, e); mu.Unlock() }
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			push("client connected")
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, 1)
				if _, err := c.Read(buf); err == nil {
					push("client hello received")
				}
				_ = c.Close()
			}()
		}
	}()
	t.Cleanup(func() { _ = l.Close(); wg.Wait() })
	mon := &event.Monitor{
		ServerHeartbeatStarted: func(*event.ServerHeartbeatStartedEvent) { push("serverHeartbeatStartedEvent") },
		ServerHeartbeatFailed:  func(*event.ServerHeartbeatFailedEvent) { push("serverHeartbeatFailedEvent") },
	}
	topo := connect(t, Options{Hosts: []string{l.Addr().String()}, Direct: true, ServerSelectionTimeout: 500 * time.Millisecond, Monitor: mon})
	waitFor(t, 10*time.Second, "the first heartbeat to fail", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(events) >= 4
	})
	_ = topo
	mu.Lock()
	defer mu.Unlock()
	want := []string{"serverHeartbeatStartedEvent", "client connected", "client hello received", "serverHeartbeatFailedEvent"}
	for i, w := range want {
		if events[i] != w {
			t.Fatalf("events %v, want %v first", events[:4], want)
		}
	}
}
