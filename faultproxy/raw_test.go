package faultproxy_test

import (
	"context"
	"net"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/wire"
)

// Raw wire-protocol helpers, for what a driver does not show: exact replies,
// resets, malformed traffic.

func dial(t *testing.T, ctx context.Context, addr string) net.Conn {
	t.Helper()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	return c
}

func marshal(t *testing.T, d bson.D) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// send writes one OP_MSG command on c.
func send(t *testing.T, c net.Conn, reqID int32, cmd bson.D) {
	t.Helper()
	if _, err := c.Write(wire.AppendMsg(nil, reqID, 0, &wire.Msg{Body: marshal(t, cmd)})); err != nil {
		t.Fatal(err)
	}
}

// recv reads one message from c.
func recv(c net.Conn) (wire.Message, error) {
	b, err := wire.ReadMessage(c, nil, 0)
	if err != nil {
		return wire.Message{}, err
	}
	return wire.Decode(b, 0)
}

// roundTrip sends one OP_MSG command on a new connection and returns the
// reply body.
func roundTrip(t *testing.T, ctx context.Context, addr string, cmd bson.D) bson.Raw {
	t.Helper()
	c := dial(t, ctx, addr)
	send(t, c, 1, cmd)
	m, err := recv(c)
	if err != nil {
		t.Fatal(err)
	}
	if m.Msg == nil || m.Header.ResponseTo != 1 {
		t.Fatalf("unexpected reply %+v", m.Header)
	}
	return m.Msg.Body
}

// legacyIsMaster sends the OP_QUERY isMaster drivers use for the handshake.
func legacyIsMaster(t *testing.T, ctx context.Context, addr string) bson.Raw {
	t.Helper()
	c := dial(t, ctx, addr)
	q := &wire.Query{FullCollectionName: "admin.$cmd", NumberToReturn: -1, Query: marshal(t, bson.D{{Key: "isMaster", Value: 1}, {Key: "helloOk", Value: true}})}
	if _, err := c.Write(wire.AppendQuery(nil, 7, 0, q)); err != nil {
		t.Fatal(err)
	}
	m, err := recv(c)
	if err != nil {
		t.Fatal(err)
	}
	if m.Reply == nil || len(m.Reply.Documents) != 1 || m.Header.ResponseTo != 7 {
		t.Fatalf("unexpected reply to OP_QUERY: %+v", m)
	}
	return m.Reply.Documents[0]
}

// deadAddr returns a loopback address nobody listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// expectClosed waits for c to be closed by the peer.
func expectClosed(t *testing.T, c net.Conn) error {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b [1]byte
	_, err := c.Read(b[:])
	if err == nil {
		t.Fatal("connection still open: read a byte")
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("connection still open after 5s")
	}
	return err
}
