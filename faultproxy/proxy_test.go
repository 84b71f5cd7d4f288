package faultproxy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/faultproxy"
	"github.com/sturdy-go/sturdy/mongosim"
)

// A driver given the proxy's URI discovers the deployment through the
// proxy and never reaches a member directly: every connection and every
// command the simulator sees came through a proxy listener.
func TestDiscoveryKeepsTrafficInTheProxy(t *testing.T) {
	for _, members := range []int{1, 3} {
		for _, ck := range clientKinds {
			t.Run(ck.name+"/"+string(rune('0'+members))+" members", func(t *testing.T) {
				sim := mongosim.StartWithOptions(t, mongosim.Options{Members: members})
				p := startProxy(t, sim)
				if got := len(p.Addrs()); got != members {
					t.Fatalf("proxy has %d listeners for %d members: %v", got, members, p.Addrs())
				}
				if !strings.Contains(p.URI(), "replicaSet=rs0") {
					t.Fatalf("URI %q does not name the replica set", p.URI())
				}
				for i, l := range p.Listeners() {
					if l.Upstream != sim.Members()[i].Addr() {
						t.Errorf("listener %d forwards to %s, want member %s", i, l.Upstream, sim.Members()[i].Addr())
					}
				}
				ctx := testCtx(t)
				c := ck.connect(t, p.URI())
				for i := range 5 {
					if err := c.insert(ctx, "db", "c", bson.D{{Key: "_id", Value: i}}); err != nil {
						t.Fatal(err)
					}
				}
				if err := c.find(ctx, "db", "c"); err != nil {
					t.Fatal(err)
				}
				// Let every monitor check every member a few times.
				time.Sleep(1200 * time.Millisecond)
				for _, l := range p.Listeners() {
					if l.Conns == 0 || l.Requests == 0 {
						t.Errorf("listener %s (member %s) saw %d connections, %d requests: the client bypassed it", l.Addr, l.Upstream, l.Conns, l.Requests)
					}
				}
				st, ss := p.Stats(), sim.Stats()
				if ss.ConnsAccepted != st.UpstreamDials+st.DiscoveryDials {
					t.Errorf("simulator accepted %d connections, proxy opened %d (+%d for discovery)", ss.ConnsAccepted, st.UpstreamDials, st.DiscoveryDials)
				}
				if ss.Commands != st.Forwarded+st.DiscoveryCommands {
					t.Errorf("simulator ran %d commands, proxy forwarded %d (+%d for discovery)", ss.Commands, st.Forwarded, st.DiscoveryCommands)
				}
				if st.HellosRewritten == 0 {
					t.Error("no hello reply was rewritten")
				}
			})
		}
	}
}

// The proxy rewrites the addresses in hello replies to its own listeners,
// keeps the rest of the reply, and strips compression from the request so
// the server negotiates none.
func TestHelloRewrite(t *testing.T) {
	sim := mongosim.StartWithOptions(t, mongosim.Options{Members: 3})
	p := startProxy(t, sim)
	ctx := testCtx(t)
	for i, addr := range p.Addrs() {
		reply := roundTrip(t, ctx, addr, bson.D{{Key: "hello", Value: 1}, {Key: "compression", Value: bson.A{"zstd", "zlib"}}, {Key: "$db", Value: "admin"}})
		if me := reply.Lookup("me").StringValue(); me != addr {
			t.Errorf("listener %d: me = %q, want %q", i, me, addr)
		}
		if prim := reply.Lookup("primary").StringValue(); prim != p.Addrs()[0] {
			t.Errorf("listener %d: primary = %q, want %q", i, prim, p.Addrs()[0])
		}
		vals, _ := reply.Lookup("hosts").Array().Values()
		var hosts []string
		for _, v := range vals {
			hosts = append(hosts, v.StringValue())
		}
		if strings.Join(hosts, ",") != strings.Join(p.Addrs(), ",") {
			t.Errorf("listener %d: hosts = %v, want %v", i, hosts, p.Addrs())
		}
		if _, err := reply.LookupErr("compression"); err == nil {
			t.Errorf("listener %d: server negotiated compression through the proxy: %v", i, reply)
		}
		if reply.Lookup("setName").StringValue() != "rs0" || reply.Lookup("maxWireVersion").AsInt64() != 25 {
			t.Errorf("listener %d: other fields changed: %v", i, reply)
		}
	}
	// Straight to the simulator, the same hello negotiates compression: the
	// proxy is what removed it.
	direct := roundTrip(t, ctx, sim.Members()[0].Addr(), bson.D{{Key: "hello", Value: 1}, {Key: "compression", Value: bson.A{"zstd"}}, {Key: "$db", Value: "admin"}})
	if _, err := direct.LookupErr("compression"); err != nil {
		t.Fatalf("simulator does not negotiate compression, the test proves nothing: %v", direct)
	}
	// Legacy OP_QUERY isMaster replies are rewritten too.
	reply := legacyIsMaster(t, ctx, p.Addrs()[1])
	if me := reply.Lookup("me").StringValue(); me != p.Addrs()[1] {
		t.Errorf("OP_QUERY isMaster: me = %q, want %q", me, p.Addrs()[1])
	}
}

// A client that asks for compression still works through the proxy.
func TestCompressionRequestedStillWorks(t *testing.T) {
	sim := mongosim.Start(t)
	p := startProxy(t, sim)
	for _, ck := range clientKinds {
		c := ck.connect(t, p.URI(), "compressors=zstd,snappy")
		if err := c.insert(testCtx(t), "db", ck.name, bson.D{{Key: "x", Value: 1}}); err != nil {
			t.Fatalf("%s: %v", ck.name, err)
		}
	}
	if n := countDirect(t, sim, "db", "driver", nil); n != 1 {
		t.Errorf("driver inserted %d documents", n)
	}
}

// Stepping the primary down through the proxy: the driver follows the new
// primary, still through the proxy.
func TestFailoverThroughProxy(t *testing.T) {
	sim := mongosim.StartWithOptions(t, mongosim.Options{Members: 3})
	p := startProxy(t, sim)
	ctx := testCtx(t)
	c := driver(t, p.URI())
	coll := c.Database("db").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	err := c.Database("admin").RunCommand(ctx, bson.D{{Key: "replSetStepDown", Value: 1}, {Key: "force", Value: true}}).Err()
	if err != nil && !strings.Contains(err.Error(), "connection") {
		t.Logf("replSetStepDown: %v", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no write after step-down: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if sim.Primary() == sim.Members()[0] {
		t.Fatal("primary did not change")
	}
	// The driver keeps opening connections (its monitors reconnect after
	// the step-down), and the proxy counts a dial when the handshake is
	// done while mongosim counts it when its accept loop gets to it: the
	// two agree once no dial is in flight, so wait for that.
	deadline = time.Now().Add(10 * time.Second)
	for {
		st, ss := p.Stats(), sim.Stats()
		if ss.ConnsAccepted == st.UpstreamDials+st.DiscoveryDials {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("simulator accepted %d connections, proxy opened %d (+%d)", ss.ConnsAccepted, st.UpstreamDials, st.DiscoveryDials)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Start fails clearly when no upstream answers, and works without
// discovery when asked not to discover.
func TestStartErrors(t *testing.T) {
	ctx := testCtx(t)
	if _, err := faultproxy.Start(ctx, faultproxy.Options{}); err != faultproxy.ErrNoUpstream {
		t.Errorf("no upstream: %v", err)
	}
	dead := deadAddr(t)
	_, err := faultproxy.Start(ctx, faultproxy.Options{Upstreams: []string{dead}, DialTimeout: time.Second})
	if _, ok := err.(*faultproxy.DiscoveryError); !ok || !strings.Contains(err.Error(), dead) {
		t.Errorf("unreachable upstream: %v", err)
	}
	p, err := faultproxy.Start(ctx, faultproxy.Options{Upstreams: []string{dead}, NoDiscovery: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if len(p.Addrs()) != 1 || p.URI() != "mongodb://"+p.Addrs()[0]+"/" {
		t.Errorf("addrs %v uri %s", p.Addrs(), p.URI())
	}
	_, err = faultproxy.Start(ctx, faultproxy.Options{Upstreams: []string{dead}, NoDiscovery: true, Rules: []faultproxy.Rule{{Probability: 2, Action: faultproxy.Action{Kind: faultproxy.Shed}}}})
	if err == nil || !strings.Contains(err.Error(), "probability") {
		t.Errorf("bad rule: %v", err)
	}
	if _, err := faultproxy.Start(ctx, faultproxy.Options{Upstreams: []string{"nohost"}}); err == nil {
		t.Error("upstream without port accepted")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := faultproxy.Start(cctx, faultproxy.Options{Upstreams: []string{dead}}); err == nil {
		t.Error("Start with a canceled context succeeded")
	}
}
