package sturdy_test

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/blackpipe"
)

// socketTimeoutMS bounds a round trip whose context has no deadline; an
// earlier context deadline still wins.
func TestSocketTimeoutBoundsRoundTrips(t *testing.T) {
	srv := blackpipe.Start(t)
	srv.Autorespond(blackpipe.Command("find"), func(r *blackpipe.Request) bool { r.NoReply(); return true })
	c := connect(t, srv.URI()+"&socketTimeoutMS=200&retryReads=false", nil)
	coll := c.Database("db").Collection("c")

	start := time.Now()
	err := coll.FindOne(context.Background(), bson.D{}).Err()
	took := time.Since(start)
	if !sturdy.IsNetworkError(err) || !sturdy.IsTimeout(err) {
		t.Fatalf("got %v, want a network timeout", err)
	}
	if took < 150*time.Millisecond || took > 5*time.Second {
		t.Errorf("the round trip ended after %v; socketTimeoutMS is 200 ms", took)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start = time.Now()
	if err := coll.FindOne(ctx, bson.D{}).Err(); !sturdy.IsTimeout(err) {
		t.Fatalf("got %v, want a timeout", err)
	}
	if took := time.Since(start); took > 150*time.Millisecond {
		t.Errorf("a 50 ms context deadline ended the round trip after %v", took)
	}
}
