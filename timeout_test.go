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

// CSOT prose test 8, with bounds widened for a shared machine: the shorter
// of timeoutMS and serverSelectionTimeoutMS ends server selection, and
// timeoutMS=0 leaves serverSelectionTimeoutMS in charge.
func TestTimeoutBoundsServerSelection(t *testing.T) {
	const nobody = "mongodb://127.0.0.1:1/?connectTimeoutMS=100" // nothing listens on port 1
	for _, tc := range []struct {
		opts        string
		atMost      time.Duration
		wantTimeout bool // a TimeoutError (timeoutMS expired first)
	}{
		{"&timeoutMS=150&serverSelectionTimeoutMS=10000", 2 * time.Second, true},
		{"&timeoutMS=10000&serverSelectionTimeoutMS=150", 2 * time.Second, false},
		{"&timeoutMS=0&serverSelectionTimeoutMS=150", 2 * time.Second, false},
	} {
		t.Run(tc.opts, func(t *testing.T) {
			c := connect(t, nobody+tc.opts, nil)
			start := time.Now()
			_, err := c.Database("admin").RunCommand(context.Background(), d("ping", 1))
			took := time.Since(start)
			if err == nil {
				t.Fatal("ping succeeded with no server")
			}
			if took > tc.atMost || took < 100*time.Millisecond {
				t.Errorf("selection failed after %v", took)
			}
			var te *sturdy.TimeoutError
			if errors.As(err, &te) != tc.wantTimeout {
				t.Errorf("got %v (%T); TimeoutError wanted: %v", err, err, tc.wantTimeout)
			}
		})
	}
}

// CSOT prose test 1, scaled down (mongosim takes seconds to store the
// test's 50 MB): a server whose maxWriteBatchSize is 2 makes a 4-document
// insertMany two commands, each answered after 600 ms; under a 1 s timeout
// both are sent and the second one times out.
func TestTimeoutMultiBatchInsertMany(t *testing.T) {
	srv := blackpipe.Start(t)
	advertiseMaxWriteBatch(srv, 2)
	srv.Autorespond(blackpipe.Command("insert"), func(r *blackpipe.Request) bool {
		_ = r.ReplyAfter(600*time.Millisecond, d("n", 2, "ok", 1.0))
		return true
	})
	rec := &recorder{}
	c := connect(t, srv.URI()+"&timeoutMS=1000&retryWrites=false", func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	start := time.Now()
	_, err := c.Database("db").Collection("coll").InsertMany(context.Background(), []any{d("_id", 1), d("_id", 2), d("_id", 3), d("_id", 4)})
	if !errors.Is(err, context.DeadlineExceeded) || !sturdy.IsTimeout(err) {
		t.Fatalf("got %v after %v and %d insert commands, want a timeout", err, time.Since(start), len(rec.startedNamed("insert")))
	}
	if took := time.Since(start); took > 1500*time.Millisecond {
		t.Errorf("the 1 s insertMany returned after %v", took)
	}
	if n := len(rec.startedNamed("insert")); n != 2 {
		t.Errorf("%d insert commands, want 2 (the batches of one insertMany)", n)
	}
}

// RunCursorCommand returns a working cursor; under timeoutMS its command
// carries maxTimeMS and its getMores (cursorLifetime) do not, while a
// getMore MaxAwaitTime is sent as given.
func TestTimeoutRunCursorCommand(t *testing.T) {
	cluster := mongosim.Start(t)
	rec := &recorder{}
	c := connect(t, cluster.URI()+"&timeoutMS=5000", func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	ctx := context.Background()
	db := c.Database("db")
	docs := []any{d("_id", 1), d("_id", 2), d("_id", 3), d("_id", 4), d("_id", 5)}
	if _, err := db.Collection("c").InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	cur, err := db.RunCursorCommand(ctx, d("find", "c", "batchSize", 2), &sturdy.RunCursorCommandOptions{BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	var got []bson.M
	if err := cur.All(ctx, &got); err != nil || len(got) != 5 {
		t.Fatalf("got %v (%v), want 5 documents", got, err)
	}
	if v := commandField(rec.startedNamed("find")[0], "maxTimeMS"); v.Type == 0 {
		t.Error("find sent without maxTimeMS under timeoutMS")
	}
	getMores := rec.startedNamed("getMore")
	if len(getMores) != 2 {
		t.Fatalf("%d getMores, want 2", len(getMores))
	}
	for _, g := range getMores {
		if v := commandField(g, "maxTimeMS"); v.Type != 0 {
			t.Errorf("getMore sent with maxTimeMS %v", v)
		}
	}
	if _, err := db.RunCursorCommand(ctx, d("ping", 1)); err == nil {
		t.Error("RunCursorCommand accepted a reply without a cursor")
	}
}

// A negative timeout at the database, collection or operation level is
// refused before anything is sent.
func TestTimeoutNegativeRefused(t *testing.T) {
	srv := blackpipe.Start(t)
	c := connect(t, srv.URI(), nil)
	// Nothing answers a find: a find that was sent ends at this deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	neg := -time.Second
	coll := c.Database("db", &sturdy.DatabaseOptions{Timeout: &neg}).Collection("c")
	if err := coll.FindOne(ctx, d()).Err(); err == nil || sturdy.IsTimeout(err) {
		t.Errorf("negative database timeout: %v", err)
	}
	coll = c.Database("db").Collection("c")
	if err := coll.FindOne(sturdy.WithTimeout(ctx, neg), d()).Err(); err == nil || sturdy.IsTimeout(err) {
		t.Errorf("negative operation timeout: %v", err)
	}
}

// advertiseMaxWriteBatch makes srv's hello advertise maxWriteBatchSize n.
func advertiseMaxWriteBatch(srv *blackpipe.Server, n int32) {
	srv.Autorespond(blackpipe.Func(func(r *blackpipe.Request) bool { return r.Name == "hello" || r.Name == "isMaster" }),
		func(r *blackpipe.Request) bool {
			reply := srv.HelloReply(r)
			for i := range reply {
				if reply[i].Key == "maxWriteBatchSize" {
					reply[i].Value = n
				}
			}
			_ = r.Reply(reply)
			return true
		})
}
