package topology

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sturdy-go/sturdy/event"
	"github.com/sturdy-go/sturdy/internal/conn"
	"github.com/sturdy-go/sturdy/mongosim"
	"github.com/sturdy-go/sturdy/readpref"
)

// Load-balanced mode publishes the SDAM events the load balancer
// specification lists, starts no monitor and selects the load balancer for
// every selector; closing publishes ServerClosed, the change to Unknown and
// TopologyClosed.
func TestLoadBalancedEventsAndSelection(t *testing.T) {
	sim := mongosim.StartWithOptions(t, mongosim.Options{Routers: 1, LoadBalanced: true})
	addr := sim.Balancer().Addr()
	var mu sync.Mutex
	var got []string
	rec := func(s string) { mu.Lock(); got = append(got, s); mu.Unlock() }
	m := &event.Monitor{
		TopologyOpening: func(*event.TopologyOpeningEvent) { rec("TopologyOpening") },
		ServerOpening:   func(e *event.ServerOpeningEvent) { rec("ServerOpening") },
		ServerDescriptionChanged: func(e *event.ServerDescriptionChangedEvent) {
			rec(fmt.Sprintf("ServerDescriptionChanged %s->%s", e.Previous.Kind, e.New.Kind))
		},
		TopologyDescriptionChanged: func(e *event.TopologyDescriptionChangedEvent) {
			kinds := ""
			for _, s := range e.New.Servers {
				kinds += " " + s.Kind
			}
			rec(fmt.Sprintf("TopologyDescriptionChanged %s->%s%s", e.Previous.Kind, e.New.Kind, kinds))
		},
		ServerHeartbeatStarted: func(*event.ServerHeartbeatStartedEvent) { rec("heartbeat") },
		ServerClosed:           func(*event.ServerClosedEvent) { rec("ServerClosed") },
		TopologyClosed:         func(*event.TopologyClosedEvent) { rec("TopologyClosed") },
	}
	topo, err := New(withTestDefaults(Options{Hosts: []string{addr}, Conn: conn.Options{LoadBalanced: true}, Monitor: m, HeartbeatInterval: 10 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := topo.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	for _, sel := range []Selector{WriteSelector(), ReadPrefSelector(readpref.ReadPref{Mode: readpref.Secondary}, 0), ReadPrefSelector(readpref.ReadPref{Mode: readpref.Nearest}, 0)} {
		s, err := topo.SelectServer(ctx, sel, nil)
		if err != nil {
			t.Fatalf("%v: %v", sel, err)
		}
		if s.Addr() != addr || s.Description().Kind != LoadBalancer {
			t.Fatalf("%v selected %s (%v)", sel, s.Addr(), s.Description().Kind)
		}
		s.Dec()
	}
	// A check-out reaches a router through the balancer.
	s, _ := topo.Server(addr)
	c, err := s.Pool().CheckOut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.ServiceID() == nil || *c.ServiceID() != sim.Routers()[0].ServiceID() {
		t.Fatalf("connection serviceId %v, want the router's", c.ServiceID())
	}
	s.Pool().CheckIn(c)
	if s.Description().MaxWireVersion != c.Description().MaxWireVersion {
		t.Fatalf("load balancer's wire version %d, want the handshake's %d", s.Description().MaxWireVersion, c.Description().MaxWireVersion)
	}
	if err := topo.Disconnect(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"TopologyOpening", "ServerOpening",
		"TopologyDescriptionChanged Unknown->LoadBalanced Unknown",
		"ServerDescriptionChanged Unknown->LoadBalancer",
		"TopologyDescriptionChanged LoadBalanced->LoadBalanced LoadBalancer",
		"ServerClosed", "TopologyDescriptionChanged LoadBalanced->Unknown", "TopologyClosed",
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events\n got %q\nwant %q", got, want)
	}
}
