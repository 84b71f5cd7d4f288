package sturdy_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/blackpipe"
	"github.com/sturdy-go/sturdy/mongosim"
)

// A server's MaxTimeMSExpired (50) under timeoutMS is the timeout error:
// errors.Is(err, context.DeadlineExceeded), IsTimeout, and the server's
// error still reachable.
func TestTimeoutMaxTimeMSExpiredIsTheTimeoutError(t *testing.T) {
	srv := blackpipe.Start(t)
	srv.Autorespond(blackpipe.Command("find"), func(r *blackpipe.Request) bool {
		_ = r.ReplyError(50, "operation exceeded time limit")
		return true
	})
	c := connect(t, srv.URI()+"&timeoutMS=5000&retryReads=false", nil)
	err := c.Database("db").Collection("c").FindOne(context.Background(), bson.D{}).Err()
	var te *sturdy.TimeoutError
	var ce *sturdy.CommandError
	if !errors.As(err, &te) || !errors.Is(err, context.DeadlineExceeded) || !sturdy.IsTimeout(err) {
		t.Fatalf("got %v (%T), want a TimeoutError", err, err)
	}
	if !errors.As(err, &ce) || ce.Code != 50 {
		t.Fatalf("the timeout error %v does not wrap the server's MaxTimeMSExpired", err)
	}

	// Without timeoutMS the server's error is returned as it is.
	c2 := connect(t, srv.URI()+"&retryReads=false", nil)
	err = c2.Database("db").Collection("c").FindOne(context.Background(), bson.D{}).Err()
	if errors.As(err, &te) || !errors.As(err, &ce) || ce.Code != 50 {
		t.Fatalf("without timeoutMS got %v (%T), want the CommandError", err, err)
	}
}

// End to end against mongosim: the operation's maxTimeMS makes the server
// give up on a blocked command, the nearest timeoutMS level wins, and
// timeoutMS=0 (WithTimeout(ctx, 0)) lifts the limit.
func TestTimeoutLevelsEndToEnd(t *testing.T) {
	cluster := mongosim.Start(t)
	rec := &recorder{}
	c := connect(t, cluster.URI()+"&timeoutMS=150", func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	block := func(ms int) {
		setFailPoint(t, cluster, d("configureFailPoint", "failCommand", "mode", d("times", 1),
			"data", d("failCommands", bson.A{"find"}, "blockConnection", true, "blockTimeMS", ms)))
	}
	t.Cleanup(func() { _ = cluster.SetFailPoint(failPointOff("failCommand")) })
	lastMaxTime := func() int64 {
		started := rec.startedNamed("find")
		if len(started) == 0 {
			t.Fatal("no find was sent")
		}
		v := commandField(started[len(started)-1], "maxTimeMS")
		n, ok := v.AsInt64OK()
		if !ok {
			return -1
		}
		return n
	}

	// The client's 150 ms: the blocked find fails with a timeout well
	// before the 2 s block ends.
	block(2000)
	coll := c.Database("db").Collection("c")
	start := time.Now()
	err := coll.FindOne(context.Background(), d()).Err()
	if !errors.Is(err, context.DeadlineExceeded) || !sturdy.IsTimeout(err) {
		t.Fatalf("got %v, want a timeout", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("a 150 ms timeout returned after %v", took)
	}
	if n := lastMaxTime(); n <= 0 || n > 150 {
		t.Errorf("maxTimeMS %d, want in (0, 150]", n)
	}

	// The collection's 1 s overrides the client's.
	long := time.Second
	coll2 := c.Database("db").Collection("c", &sturdy.CollectionOptions{Timeout: &long})
	if err := coll2.FindOne(context.Background(), d()).Err(); !errors.Is(err, sturdy.ErrNoDocuments) {
		t.Fatal(err)
	}
	if n := lastMaxTime(); n <= 150 || n > 1000 {
		t.Errorf("maxTimeMS %d under the collection's 1 s", n)
	}

	// The operation's 0 overrides both: no maxTimeMS, and a 300 ms block
	// is waited out.
	block(300)
	if err := coll.FindOne(sturdy.WithTimeout(context.Background(), 0), d()).Err(); !errors.Is(err, sturdy.ErrNoDocuments) {
		t.Fatalf("under timeoutMS=0: %v", err)
	}
	if n := lastMaxTime(); n != -1 {
		t.Errorf("maxTimeMS %d sent under timeoutMS=0", n)
	}
}
