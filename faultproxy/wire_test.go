package faultproxy_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/faultproxy"
	"github.com/sturdy-go/sturdy/mongosim"
	"github.com/sturdy-go/sturdy/wire"
)

// fakeUpstream is a raw TCP server for what neither mongosim nor blackpipe
// sends: streamed (moreToCome) replies and garbage.
type fakeUpstream struct {
	ln net.Listener
	wg sync.WaitGroup
}

func startFake(t *testing.T, serve func(c net.Conn)) *fakeUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeUpstream{ln: ln}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.wg.Add(1)
			go func() {
				defer f.wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				serve(c)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); f.wg.Wait() })
	return f
}

func (f *fakeUpstream) addr() string { return f.ln.Addr().String() }

// Malformed or unexpected messages from a client close that connection and
// nothing else.
func TestMalformedClientTraffic(t *testing.T) {
	sim := mongosim.Start(t)
	p := startProxy(t, sim)
	ctx := testCtx(t)
	hdr := func(length, op int32) []byte {
		b := binary.LittleEndian.AppendUint32(nil, uint32(length))
		b = binary.LittleEndian.AppendUint32(b, 1)
		b = binary.LittleEndian.AppendUint32(b, 0)
		return binary.LittleEndian.AppendUint32(b, uint32(op))
	}
	badBSON := wire.AppendMsg(nil, 1, 0, &wire.Msg{Body: marshal(t, bson.D{{Key: "ping", Value: 1}})})
	badBSON[len(badBSON)-1] = 7 // the document's terminating NUL
	cases := map[string][]byte{
		"short length":   hdr(5, 2013),
		"huge length":    hdr(1<<30, 2013),
		"unknown opcode": append(hdr(20, 9999), 0, 0, 0, 0),
		"bad bson":       badBSON,
		"op_reply":       wire.AppendReply(nil, 1, 0, &wire.Reply{Documents: []bson.Raw{marshal(t, bson.D{{Key: "ok", Value: 1}})}}),
		"bad flags":      wire.AppendMsg(nil, 1, 0, &wire.Msg{Flags: 1 << 5, Body: marshal(t, bson.D{{Key: "ping", Value: 1}})}),
	}
	for name, msg := range cases {
		before := p.Stats().Malformed
		c := dial(t, ctx, p.Addrs()[0])
		if _, err := c.Write(msg); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		expectClosed(t, c)
		if p.Stats().Malformed != before+1 {
			t.Errorf("%s: Malformed went from %d to %d", name, before, p.Stats().Malformed)
		}
	}
	// The proxy still serves.
	if r := roundTrip(t, ctx, p.Addrs()[0], bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}); r.Lookup("ok").AsFloat64() != 1 {
		t.Fatalf("ping after malformed traffic: %v", r)
	}
}

// Garbage from the server closes the client's connection; odd but valid
// hello replies pass unchanged.
func TestMalformedUpstreamTraffic(t *testing.T) {
	f := startFake(t, func(c net.Conn) {
		for {
			m, err := recv(c)
			if err != nil {
				return
			}
			switch wire.CommandName(m.Msg.Body) {
			case "hello":
				// hosts of the wrong types must not trip the rewrite.
				body, _ := bson.Marshal(bson.D{{Key: "hosts", Value: bson.A{1, "x"}}, {Key: "me", Value: 5}, {Key: "primary", Value: bson.A{}}, {Key: "ok", Value: 1}})
				_, _ = c.Write(wire.AppendMsg(nil, 9, m.Header.RequestID, &wire.Msg{Body: body}))
			default:
				_, _ = c.Write([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17})
			}
		}
	})
	p, err := faultproxy.Start(testCtx(t), faultproxy.Options{Upstreams: []string{f.addr()}, NoDiscovery: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := testCtx(t)
	c := dial(t, ctx, p.Addrs()[0])
	send(t, c, 1, bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}})
	m, err := recv(c)
	if err != nil {
		t.Fatal(err)
	}
	if m.Msg.Body.Lookup("me").AsInt64() != 5 || len(p.Addrs()) != 1 {
		t.Errorf("odd hello changed: %v (listeners %v)", m.Msg.Body, p.Addrs())
	}
	send(t, c, 2, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})
	expectClosed(t, c)
	if p.Stats().Malformed != 1 {
		t.Errorf("Malformed = %d", p.Stats().Malformed)
	}
}

// An awaitable hello with exhaustAllowed is answered by a stream of
// moreToCome replies; each is passed on, rewritten.
func TestStreamingHello(t *testing.T) {
	var f *fakeUpstream
	f = startFake(t, func(c net.Conn) {
		m, err := recv(c)
		if err != nil || m.Msg == nil || m.Msg.Flags&wire.ExhaustAllowed == 0 {
			return
		}
		prev := m.Header.RequestID
		for i := range 4 {
			flags := wire.MoreToCome
			if i == 3 {
				flags = 0
			}
			body, _ := bson.Marshal(bson.D{{Key: "isWritablePrimary", Value: true}, {Key: "hosts", Value: bson.A{f.addr()}}, {Key: "me", Value: f.addr()}, {Key: "n", Value: i}, {Key: "ok", Value: 1}})
			id := int32(100 + i)
			if _, err := c.Write(wire.AppendMsg(nil, id, prev, &wire.Msg{Flags: flags, Body: body})); err != nil {
				return
			}
			prev = id
		}
		_, _ = recv(c) // wait for the client to hang up
	})
	p, err := faultproxy.Start(testCtx(t), faultproxy.Options{Upstreams: []string{f.addr()}, NoDiscovery: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := dial(t, testCtx(t), p.Addrs()[0])
	body := marshal(t, bson.D{{Key: "hello", Value: 1}, {Key: "maxAwaitTimeMS", Value: 100}, {Key: "$db", Value: "admin"}})
	if _, err := c.Write(wire.AppendMsg(nil, 1, 0, &wire.Msg{Flags: wire.ExhaustAllowed, Body: body})); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		m, err := recv(c)
		if err != nil {
			t.Fatalf("streamed reply %d: %v", i, err)
		}
		if got := m.Msg.Body.Lookup("n").AsInt64(); got != int64(i) {
			t.Fatalf("reply %d has n=%d", i, got)
		}
		if more := m.Msg.Flags&wire.MoreToCome != 0; more != (i < 3) {
			t.Errorf("reply %d moreToCome=%v", i, more)
		}
		if me := m.Msg.Body.Lookup("me").StringValue(); me != p.Addrs()[0] {
			t.Errorf("streamed reply %d: me=%q not rewritten to %s", i, me, p.Addrs()[0])
		}
	}
}

// Requests with moreToCome (unacknowledged writes) get no reply and the
// next request's reply is not confused with one; drop-reply on such a
// request closes the connection after forwarding it.
func TestMoreToComeRequests(t *testing.T) {
	sim := mongosim.Start(t)
	p := startProxy(t, sim, faultproxy.Rule{Match: faultproxy.Match{Namespace: "db.dropped"}, Action: faultproxy.Action{Kind: faultproxy.DropReply}})
	ctx := testCtx(t)
	c := dial(t, ctx, p.Addrs()[0])
	insert := func(coll string, id int32) {
		body := marshal(t, bson.D{{Key: "insert", Value: coll}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}},
			{Key: "writeConcern", Value: bson.D{{Key: "w", Value: 0}}}, {Key: "$db", Value: "db"}})
		if _, err := c.Write(wire.AppendMsg(nil, id, 0, &wire.Msg{Flags: wire.MoreToCome, Body: body})); err != nil {
			t.Fatal(err)
		}
	}
	insert("c", 1)
	send(t, c, 2, bson.D{{Key: "count", Value: "c"}, {Key: "$db", Value: "db"}})
	m, err := recv(c)
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.ResponseTo != 2 || m.Msg.Body.Lookup("n").AsInt64() != 1 {
		t.Fatalf("count after w:0 insert: responseTo %d, %v", m.Header.ResponseTo, m.Msg.Body)
	}
	insert("dropped", 3)
	expectClosed(t, c)
	// The server applies an unacknowledged write on its own time: the
	// proxy closing the client's connection does not wait for it.
	n := int64(0)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if n = countDirect(t, sim, "db", "dropped", nil); n == 1 {
			break
		}
	}
	if n != 1 {
		t.Errorf("w:0 insert with drop-reply: %d documents, want 1", n)
	}
}

// Injected replies to a legacy OP_QUERY command are OP_REPLYs.
func TestInjectedReplyToOpQuery(t *testing.T) {
	sim := mongosim.Start(t)
	p := startProxy(t, sim, faultproxy.Rule{Match: faultproxy.Match{Commands: []string{"isMaster"}}, Action: faultproxy.Action{Kind: faultproxy.Shed, BaseBackoffMS: 7}})
	r := legacyIsMaster(t, testCtx(t), p.Addrs()[0])
	if r.Lookup("code").AsInt64() != 462 || r.Lookup("baseBackoffMS").AsInt64() != 7 || r.Lookup("ok").AsFloat64() != 0 {
		t.Errorf("shed reply to OP_QUERY: %v", r)
	}
}

// Close with connections open, mid-delay, returns promptly and leaves no
// goroutines behind (TestMain checks).
func TestCloseDuringDelay(t *testing.T) {
	sim := mongosim.Start(t)
	p, err := faultproxy.Start(testCtx(t), faultproxy.Options{
		Upstreams: []string{sim.Members()[0].Addr()},
		Rules:     []faultproxy.Rule{{Match: faultproxy.Match{Commands: []string{"ping"}}, Action: faultproxy.Action{Kind: faultproxy.Delay, Delay: time.Minute}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, testCtx(t), p.Addrs()[0])
	send(t, c, 1, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	p.Close()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close took %v", d)
	}
	expectClosed(t, c)
	p.Close() // idempotent
	if _, err := net.DialTimeout("tcp", p.Addrs()[0], time.Second); err == nil {
		t.Error("listener still accepts after Close")
	}
}

// An upstream that accepts but never answers cannot hang Start.
func TestDiscoveryTimesOut(t *testing.T) {
	f := startFake(t, func(c net.Conn) {
		for {
			if _, err := recv(c); err != nil {
				return
			}
		}
	})
	start := time.Now()
	_, err := faultproxy.Start(testCtx(t), faultproxy.Options{Upstreams: []string{f.addr()}, DialTimeout: 200 * time.Millisecond})
	var de *faultproxy.DiscoveryError
	if !errors.As(err, &de) || !errors.Is(de.Errs[f.addr()], context.DeadlineExceeded) {
		t.Fatalf("silent upstream: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Start took %v", d)
	}
}
