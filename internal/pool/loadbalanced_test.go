package pool

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/blackpipe"
	"github.com/sturdy-go/sturdy/event"
	"github.com/sturdy-go/sturdy/internal/conn"
	"github.com/sturdy-go/sturdy/mongoerr"
)

// twoServices makes srv answer each new connection's hello with one of
// two serviceIds in turn, as a load balancer in front of two mongoses.
func twoServices(t *testing.T, srv *blackpipe.Server) [2]bson.ObjectID {
	t.Helper()
	ids := [2]bson.ObjectID{bson.NewObjectID(), bson.NewObjectID()}
	var n atomic.Int64
	srv.Autorespond(blackpipe.Command("hello"), func(r *blackpipe.Request) bool {
		reply := srv.HelloReply(r)
		sid := ids[(n.Add(1)-1)%2]
		reply = append(reply[:len(reply)-1:len(reply)-1], bson.E{Key: "msg", Value: "isdbgrid"}, bson.E{Key: "serviceId", Value: sid})
		return r.Reply(append(reply, bson.E{Key: "ok", Value: 1.0})) == nil
	})
	return ids
}

// ClearService closes only the cleared service's connections, publishes
// PoolCleared with its serviceId and leaves the pool ready.
func TestClearServiceClearsOneService(t *testing.T) {
	srv := blackpipe.Start(t)
	ids := twoServices(t, srv)
	p, rec := newPool(t, srv.Addr(), Options{LoadBalanced: true, Conn: conn.Options{LoadBalanced: true}, BackgroundInterval: -1})
	p.Ready()
	a, b := mustCheckOut(t, p), mustCheckOut(t, p)
	if *a.ServiceID() != ids[0] || *b.ServiceID() != ids[1] {
		t.Fatalf("services %v, %v; want %v, %v", a.ServiceID(), b.ServiceID(), ids[0], ids[1])
	}
	p.CheckIn(b) // idle, service 1
	p.ClearService(ids[0], errors.New("boom"))
	cleared := eventsOf(rec, event.PoolCleared)
	if len(cleared) != 1 || cleared[0].ServiceID == nil || *cleared[0].ServiceID != ids[0] {
		t.Fatalf("PoolCleared events %+v, want one for %v", cleared, ids[0])
	}
	if p.ServiceGeneration(ids[0]) != 1 || p.ServiceGeneration(ids[1]) != 0 {
		t.Fatalf("generations %d, %d; want 1, 0", p.ServiceGeneration(ids[0]), p.ServiceGeneration(ids[1]))
	}
	if got := eventsOf(rec, event.ConnectionClosed); len(got) != 0 {
		t.Fatalf("closed %+v; the other service's idle connection must stay", got)
	}
	// The pool stays ready: the idle connection of service 1 is served.
	if c := mustCheckOut(t, p); c != b {
		t.Fatal("the other service's idle connection was not reused")
	}
	p.CheckIn(a) // stale now: closed on check-in
	closed := eventsOf(rec, event.ConnectionClosed)
	if len(closed) != 1 || closed[0].Reason != event.ReasonStale {
		t.Fatalf("closed %+v, want the cleared service's connection, stale", closed)
	}
}

// A wait-queue timeout of a load-balanced pool counts the connections
// pinned to cursors and transactions.
func TestWaitQueueTimeoutCountsPinned(t *testing.T) {
	srv := blackpipe.Start(t)
	twoServices(t, srv)
	p, _ := newPool(t, srv.Addr(), Options{LoadBalanced: true, MaxPoolSize: 3, Conn: conn.Options{LoadBalanced: true}, BackgroundInterval: -1})
	p.Ready()
	cur, txn, _ := mustCheckOut(t, p), mustCheckOut(t, p), mustCheckOut(t, p)
	p.Pin(cur, PinCursor)
	p.Pin(txn, PinTransaction)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := p.CheckOut(ctx)
	var wqt *mongoerr.WaitQueueTimeoutError
	if !errors.As(err, &wqt) || wqt.InUse == nil || *wqt.InUse != (mongoerr.InUseCounts{MaxPoolSize: 3, Cursors: 1, Transactions: 1, Other: 1}) {
		t.Fatalf("CheckOut: %v (%+v), want a wait-queue timeout counting 1 cursor, 1 transaction, 1 other", err, wqt)
	}
	if !strings.Contains(err.Error(), "maxPoolSize: 3, connections in use by cursors: 1, connections in use by transactions: 1, connections in use by other operations: 1") {
		t.Fatalf("message %q lacks the load balancer spec's counts", err)
	}
	p.CheckIn(cur) // unpins
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	c, err := p.CheckOut(ctx2)
	if err != nil {
		t.Fatal(err)
	}
	p.CheckIn(c)
	p.CheckIn(txn)
	ctx3, cancel3 := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel3()
	<-ctx3.Done()
	if _, err := p.CheckOut(ctx3); !errors.As(err, &wqt) || wqt.InUse.Cursors != 0 || wqt.InUse.Transactions != 0 {
		t.Fatalf("after check-ins: %v, want no pinned connections counted", err)
	}
}
