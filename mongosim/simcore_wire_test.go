package mongosim

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/wire"
)

// rawConn is a bare TCP client speaking the wire protocol directly.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	id int32
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	return &rawConn{t: t, nc: nc}
}

func (c *rawConn) roundTrip(msg []byte) (wire.Message, error) {
	c.t.Helper()
	_ = c.nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.nc.Write(msg); err != nil {
		return wire.Message{}, err
	}
	b, err := wire.ReadMessage(c.nc, nil, 0)
	if err != nil {
		return wire.Message{}, err
	}
	return wire.Decode(b, 0)
}

func (c *rawConn) query(cmd bson.D) bson.Raw {
	c.t.Helper()
	c.id++
	q, err := bson.Marshal(cmd)
	if err != nil {
		c.t.Fatal(err)
	}
	m, err := c.roundTrip(wire.AppendQuery(nil, c.id, 0, &wire.Query{FullCollectionName: "admin.$cmd", NumberToReturn: -1, Query: q}))
	if err != nil {
		c.t.Fatal(err)
	}
	if m.Reply == nil || len(m.Reply.Documents) != 1 {
		c.t.Fatalf("want OP_REPLY with one document, got %+v", m)
	}
	return m.Reply.Documents[0]
}

func (c *rawConn) msg(cmd bson.D) (bson.Raw, error) {
	c.t.Helper()
	c.id++
	body, err := bson.Marshal(cmd)
	if err != nil {
		c.t.Fatal(err)
	}
	m, err := c.roundTrip(wire.AppendMsg(nil, c.id, 0, &wire.Msg{Body: body}))
	if err != nil {
		return nil, err
	}
	if m.Msg == nil {
		c.t.Fatalf("want OP_MSG reply, got %+v", m)
	}
	return m.Msg.Body, nil
}

func TestLegacyOpQueryIsMaster(t *testing.T) {
	c := Start(t)
	rc := dialRaw(t, c.Members()[0].Addr())
	reply := rc.query(bson.D{{Key: "isMaster", Value: 1}, {Key: "helloOk", Value: true}, {Key: "compression", Value: bson.A{"snappy", "zlib"}}})
	if !reply.Lookup("ismaster").Boolean() || reply.Lookup("setName").StringValue() != "rs0" || !reply.Lookup("helloOk").Boolean() {
		t.Fatalf("isMaster reply %v", reply)
	}
	if comp, _ := reply.Lookup("compression").Array().Values(); len(comp) != 1 || comp[0].StringValue() != "snappy" {
		t.Fatalf("compression negotiation %v", reply.Lookup("compression"))
	}
	if _, err := reply.LookupErr("isWritablePrimary"); err == nil {
		t.Fatal("legacy isMaster reply has isWritablePrimary")
	}
	reply = rc.query(bson.D{{Key: "find", Value: "c"}})
	if reply.Lookup("code").Int32() != codeUnsupportedOpQueryCommand {
		t.Fatalf("OP_QUERY find: %v", reply)
	}
}

func TestAwaitableHelloWakesOnStepDown(t *testing.T) {
	c := StartWithOptions(t, Options{Members: 2})
	rc := dialRaw(t, c.Members()[1].Addr())
	first, err := rc.msg(bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}})
	if err != nil {
		t.Fatal(err)
	}
	if first.Lookup("secondary").Boolean() != true {
		t.Fatalf("member 1 should start as secondary: %v", first)
	}
	tv := first.Lookup("topologyVersion").Document()
	go func() {
		time.Sleep(100 * time.Millisecond)
		_ = c.StepDown(t.Context())
	}()
	start := time.Now()
	next, err := rc.msg(bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"},
		{Key: "topologyVersion", Value: tv}, {Key: "maxAwaitTimeMS", Value: int64(5000)}})
	if err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	if el < 80*time.Millisecond || el > 3*time.Second {
		t.Fatalf("awaitable hello returned after %v", el)
	}
	if !next.Lookup("isWritablePrimary").Boolean() || next.Lookup("topologyVersion", "counter").Int64() != tv.Lookup("counter").Int64()+1 {
		t.Fatalf("after step-down: %v", next)
	}
	// An outdated topologyVersion is answered at once.
	start = time.Now()
	if _, err := rc.msg(bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"},
		{Key: "topologyVersion", Value: tv}, {Key: "maxAwaitTimeMS", Value: int64(5000)}}); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > time.Second {
		t.Fatal("stale topologyVersion waited")
	}
	// Close wakes a waiting hello (goleak in TestMain checks nothing is left).
	cur := next.Lookup("topologyVersion").Document()
	done := make(chan error, 1)
	go func() {
		_, err := rc.msg(bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"},
			{Key: "topologyVersion", Value: cur}, {Key: "maxAwaitTimeMS", Value: int64(10000)}})
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	closeStart := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if time.Since(closeStart) > 2*time.Second {
		t.Fatal("Close waited for an awaitable hello")
	}
	if err := <-done; err == nil {
		t.Fatal("waiting hello got a reply after Close")
	}
}

func TestConnectionLimiter(t *testing.T) {
	c := Start(t)
	c.SetLimiter(LimiterOptions{MaxConnections: 1})
	addr := c.Members()[0].Addr()
	first := dialRaw(t, addr)
	if _, err := first.msg(bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}); err != nil {
		t.Fatalf("first connection: %v", err)
	}
	second := dialRaw(t, addr)
	if _, err := second.msg(bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}); err == nil {
		t.Fatal("second connection was served beyond MaxConnections=1")
	} else if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("second connection hung instead of being closed: %v", err)
	}
	if st := c.Stats(); st.ConnsRejected != 1 || st.ConnsAccepted != 1 {
		t.Fatalf("stats %+v", st)
	}
	_ = first.nc.Close()
	deadline := time.Now().Add(3 * time.Second)
	for c.Members()[0].conns.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	third := dialRaw(t, addr)
	if _, err := third.msg(bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}); err != nil {
		t.Fatalf("connection after the first closed: %v", err)
	}
}

// The connection establishment limiter admits a burst, queues the next
// connections until tokens refill (their first command waits), and closes
// connections beyond the queue at once.
func TestConnectionEstablishmentLimiter(t *testing.T) {
	c := Start(t)
	start := time.Now() // the bucket holds one token from here on
	c.SetLimiter(LimiterOptions{ConnectionsPerSecond: 10, ConnectionBurst: 1, ConnectionQueueDepth: 2})
	addr := c.Members()[0].Addr()
	ping := bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}
	first := dialRaw(t, addr)
	queued := []*rawConn{dialRaw(t, addr), dialRaw(t, addr)}
	over := dialRaw(t, addr)
	if _, err := first.msg(ping); err != nil {
		t.Fatalf("first connection: %v", err)
	}
	if _, err := over.msg(ping); err == nil {
		t.Fatal("a connection beyond the queue was served")
	} else if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the connection beyond the queue hung instead of being closed: %v", err)
	}
	for i, q := range queued {
		if _, err := q.msg(ping); err != nil {
			t.Fatalf("queued connection %d: %v", i, err)
		}
	}
	// One token, then 10 per second: the second queued connection cannot
	// be served before 200 ms after the limiter was set.
	if took := time.Since(start); took < 190*time.Millisecond {
		t.Errorf("queued connections served after %v; the bucket admits 10 per second", took)
	}
	if st := c.Stats(); st.ConnsRejected != 1 || st.ConnsAccepted != 3 {
		t.Fatalf("stats %+v", st)
	}
}

// A fire-and-forget (moreToCome) write on a secondary gets no reply, so the
// member closes the connection, as mongod does, and the client learns it
// must select a server again.
func TestMoreToComeWriteOnSecondaryClosesConnection(t *testing.T) {
	c := StartWithOptions(t, Options{Members: 2})
	rc := dialRaw(t, c.Members()[1].Addr())
	body, err := bson.Marshal(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}},
		{Key: "writeConcern", Value: bson.D{{Key: "w", Value: 0}}}, {Key: "$db", Value: "db"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.nc.Write(wire.AppendMsg(nil, 1, 0, &wire.Msg{Flags: wire.MoreToCome, Body: body})); err != nil {
		t.Fatal(err)
	}
	_ = rc.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := wire.ReadMessage(rc.nc, nil, 0); !errors.Is(err, io.EOF) {
		t.Fatalf("want the connection closed (EOF), got %v", err)
	}
	// On the primary the same write is applied without a reply.
	rp := dialRaw(t, c.Members()[0].Addr())
	if _, err := rp.nc.Write(wire.AppendMsg(nil, 1, 0, &wire.Msg{Flags: wire.MoreToCome, Body: body})); err != nil {
		t.Fatal(err)
	}
	reply, err := rp.msg(bson.D{{Key: "count", Value: "c"}, {Key: "$db", Value: "db"}})
	if err != nil || reply.Lookup("n").Int32() != 1 {
		t.Fatalf("count after a fire-and-forget insert: %v %v", reply, err)
	}
}
