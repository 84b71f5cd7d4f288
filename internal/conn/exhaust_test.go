package conn_test

import (
	"context"
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/blackpipe"
	"github.com/sturdy-go/sturdy/internal/conn"
)

// A request sent with exhaustAllowed may be answered by several replies
// with moreToCome: ReadReply reads each, Send refuses to interleave a new
// request, and the reply without moreToCome ends the stream.
func TestExhaustReadsSuccessiveMoreToComeReplies(t *testing.T) {
	srv := blackpipe.Start(t)
	streams := make(chan *blackpipe.Stream, 1)
	srv.Autorespond(blackpipe.Command("watchMe"), func(r *blackpipe.Request) bool {
		st, err := r.Stream()
		if err != nil {
			t.Errorf("stream: %v", err)
			return false
		}
		streams <- st
		return true
	})
	c := dial(t, srv.Addr())
	ctx := context.Background()
	done := make(chan *conn.Reply, 1)
	go func() {
		r, err := c.Send(ctx, &conn.Request{DB: "admin", Command: mustRaw(t, bson.D{{Key: "watchMe", Value: 1}}), ExhaustAllowed: true})
		if err != nil {
			t.Errorf("send: %v", err)
		}
		done <- r
	}()
	st := <-streams
	if err := st.Send(bson.D{{Key: "n", Value: int32(0)}}, true); err != nil {
		t.Fatal(err)
	}
	first := <-done
	if first == nil || !first.MoreToCome || first.Body.Lookup("n").Int32() != 0 || !c.Streaming() {
		t.Fatalf("first reply %+v, streaming %v", first, c.Streaming())
	}
	if _, err := c.Send(ctx, &conn.Request{DB: "admin", Command: mustRaw(t, bson.D{{Key: "ping", Value: 1}})}); !errors.Is(err, conn.ErrStreaming) {
		t.Fatalf("send while streaming: %v, want ErrStreaming", err)
	}
	for i := int32(1); i <= 3; i++ {
		more := i < 3
		if err := st.Send(bson.D{{Key: "n", Value: i}}, more); err != nil {
			t.Fatal(err)
		}
		r, err := c.ReadReply(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if r.MoreToCome != more || r.Body.Lookup("n").Int32() != i || c.Streaming() != more {
			t.Fatalf("reply %d: moreToCome %v, body %v, streaming %v", i, r.MoreToCome, r.Body, c.Streaming())
		}
	}
	if _, err := c.ReadReply(ctx); !errors.Is(err, conn.ErrNotStreaming) {
		t.Fatalf("read after the stream ended: %v, want ErrNotStreaming", err)
	}
	if _, err := c.RoundTrip(ctx, "admin", bson.D{{Key: "ping", Value: 1}}); err != nil {
		t.Fatalf("ping after the stream: %v", err)
	}
}

// A stream is cancelled by the context: the read fails and the connection
// is closed, as a monitor needs on Disconnect.
func TestExhaustReadHonoursContext(t *testing.T) {
	srv := blackpipe.Start(t)
	srv.Autorespond(blackpipe.Command("watchMe"), func(r *blackpipe.Request) bool {
		st, err := r.Stream()
		if err == nil {
			err = st.Send(bson.D{}, true)
		}
		if err != nil {
			t.Errorf("stream: %v", err)
		}
		return true
	})
	c := dial(t, srv.Addr())
	if _, err := c.Send(context.Background(), &conn.Request{DB: "admin", Command: mustRaw(t, bson.D{{Key: "watchMe", Value: 1}}), ExhaustAllowed: true}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go cancel()
	if _, err := c.ReadReply(ctx); err == nil || !c.Closed() {
		t.Fatalf("cancelled read: %v, closed %v", err, c.Closed())
	}
}
