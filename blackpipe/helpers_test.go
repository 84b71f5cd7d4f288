package blackpipe

import (
	"context"
	"net"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/goleak"

	"github.com/sturdy-go/sturdy/internal/testsupport"
	"github.com/sturdy-go/sturdy/wire"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// connect returns an official-driver client for uri, disconnected when the
// test ends (before the server closes, since cleanups run last-in first-out).
func connect(t *testing.T, uri string, opts ...*options.ClientOptions) *mongo.Client {
	t.Helper()
	all := append([]*options.ClientOptions{
		options.Client().ApplyURI(uri).
			SetRetryWrites(false).SetRetryReads(false).
			SetServerSelectionTimeout(5 * time.Second),
	}, opts...)
	c, err := mongo.Connect(all...)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Disconnect(ctx)
	})
	return c
}

func testCtx(t *testing.T, d time.Duration) context.Context { return testsupport.Context(t, d) }

// runAsync runs f in a goroutine and returns a channel with its error.
func runAsync(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

func waitErr(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("client call did not return")
		return nil
	}
}

// rawClient is a bare TCP client speaking wire messages, for what the driver
// cannot do: legacy OP_QUERY, malformed input, observing FIN vs RST.
type rawClient struct {
	t  *testing.T
	nc net.Conn
	id int32
}

func dialRaw(t *testing.T, addr string) *rawClient {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawClient{t: t, nc: nc}
}

func (c *rawClient) send(b []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("raw write: %v", err)
	}
}

func (c *rawClient) sendMsg(flags wire.MsgFlags, body bson.D) int32 {
	c.t.Helper()
	raw, err := bson.Marshal(body)
	if err != nil {
		c.t.Fatal(err)
	}
	c.id++
	c.send(wire.AppendMsg(nil, c.id, 0, &wire.Msg{Flags: flags, Body: raw}))
	return c.id
}

func (c *rawClient) read() (wire.Message, error) {
	b, err := wire.ReadMessage(c.nc, nil, 0)
	if err != nil {
		return wire.Message{}, err
	}
	return wire.Decode(b, 0)
}

// roundTrip sends an OP_MSG command and returns the reply body.
func (c *rawClient) roundTrip(body bson.D) bson.Raw {
	c.t.Helper()
	id := c.sendMsg(0, body)
	m, err := c.read()
	if err != nil {
		c.t.Fatalf("raw read: %v", err)
	}
	if m.Msg == nil || m.Header.ResponseTo != id {
		c.t.Fatalf("unexpected reply %+v", m.Header)
	}
	return m.Msg.Body
}
