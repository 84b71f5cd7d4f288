package conn_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/goleak"

	"github.com/sturdy-go/sturdy/blackpipe"
	"github.com/sturdy-go/sturdy/internal/conn"
	"github.com/sturdy-go/sturdy/mongoerr"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestHandshakeCarriesBackpressureAndAppName(t *testing.T) {
	srv := blackpipe.Start(t)
	seen := make(chan bson.Raw, 1)
	srv.Autorespond(blackpipe.Command("hello"), func(r *blackpipe.Request) bool {
		seen <- r.Command
		return r.Reply(bson.D{{Key: "isWritablePrimary", Value: true}, {Key: "maxWireVersion", Value: int32(25)},
			{Key: "setName", Value: "rs0"}, {Key: "logicalSessionTimeoutMinutes", Value: int32(30)}}) == nil
	})
	ctx := context.Background()
	c, err := conn.Dial(ctx, srv.Addr(), conn.Options{AppName: "app1"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hello := <-seen
	if v, err := hello.LookupErr("backpressure"); err != nil || !v.Boolean() {
		t.Errorf("hello lacks backpressure: true: %v", hello)
	}
	if v, err := hello.LookupErr("client", "application", "name"); err != nil || v.StringValue() != "app1" {
		t.Errorf("hello lacks the app name: %v", hello)
	}
	d := c.Description()
	if d.MaxWireVersion != 25 || d.SetName != "rs0" || !d.IsWritablePrimary || d.LogicalSessionTimeoutMinutes == nil {
		t.Errorf("description %+v", d)
	}
}

func TestCommandErrorCarriesCodeAndLabels(t *testing.T) {
	srv := blackpipe.Start(t)
	srv.Autorespond(blackpipe.Command("insert"), func(r *blackpipe.Request) bool {
		return r.ReplyError(11602, "interrupted", "RetryableWriteError") == nil
	})
	c, err := conn.Dial(context.Background(), srv.Addr(), conn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.RoundTrip(context.Background(), "db", bson.D{{Key: "insert", Value: "c"}})
	var ce *mongoerr.CommandError
	if !errors.As(err, &ce) || ce.Code != 11602 || !ce.HasErrorLabel("RetryableWriteError") {
		t.Fatalf("got %v", err)
	}
	if c.Closed() {
		t.Error("a command error must not close the connection")
	}
}

func TestNetworkErrorClosesConnection(t *testing.T) {
	srv := blackpipe.Start(t)
	srv.Autorespond(blackpipe.Command("insert"), func(r *blackpipe.Request) bool { return r.Hangup() == nil })
	c, err := conn.Dial(context.Background(), srv.Addr(), conn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.RoundTrip(context.Background(), "db", bson.D{{Key: "insert", Value: "c"}})
	var ne *mongoerr.NetworkError
	if !errors.As(err, &ne) {
		t.Fatalf("got %v, want a NetworkError", err)
	}
	if !c.Closed() {
		t.Error("connection still open after a network error")
	}
	if _, err := c.RoundTrip(context.Background(), "db", bson.D{{Key: "ping", Value: 1}}); !errors.Is(err, conn.ErrClosed) {
		t.Errorf("reuse after failure: %v", err)
	}
}

func TestContextDeadlineEndsRoundTrip(t *testing.T) {
	srv := blackpipe.Start(t)
	srv.Autorespond(blackpipe.Command("find"), func(r *blackpipe.Request) bool { r.NoReply(); return true })
	c, err := conn.Dial(context.Background(), srv.Addr(), conn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = c.RoundTrip(ctx, "db", bson.D{{Key: "find", Value: "c"}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("round trip outlived its deadline by far: %v", time.Since(start))
	}
	if !c.Closed() {
		t.Error("a timed-out connection must be closed: its reply may still arrive")
	}
}
