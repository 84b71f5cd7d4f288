package sturdy_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/event"
	"github.com/sturdy-go/sturdy/mongosim"
)

// lbRecorder records command, pool and SDAM events of a load-balanced client.
type lbRecorder struct {
	recorder
	pmu   sync.Mutex
	pool  []*event.PoolEvent
	topos []*event.TopologyDescriptionChangedEvent
	beats int
}

func (r *lbRecorder) monitor() *event.Monitor {
	m := r.recorder.monitor()
	m.Pool = func(e *event.PoolEvent) {
		r.pmu.Lock()
		defer r.pmu.Unlock()
		r.pool = append(r.pool, e)
	}
	m.TopologyDescriptionChanged = func(e *event.TopologyDescriptionChangedEvent) {
		r.pmu.Lock()
		defer r.pmu.Unlock()
		r.topos = append(r.topos, e)
	}
	m.ServerHeartbeatStarted = func(*event.ServerHeartbeatStartedEvent) {
		r.pmu.Lock()
		defer r.pmu.Unlock()
		r.beats++
	}
	return m
}

func (r *lbRecorder) poolTypes(types ...event.PoolEventType) []*event.PoolEvent {
	r.pmu.Lock()
	defer r.pmu.Unlock()
	var out []*event.PoolEvent
	for _, e := range r.pool {
		for _, t := range types {
			if e.Type == t {
				out = append(out, e)
			}
		}
	}
	return out
}

func lbCluster(t *testing.T) *mongosim.Cluster {
	t.Helper()
	return mongosim.StartWithOptions(t, mongosim.Options{Members: 1, Routers: 2, LoadBalanced: true})
}

func lbConnect(t *testing.T, uri string, edit func(*sturdy.Options)) (*sturdy.Client, *lbRecorder) {
	t.Helper()
	rec := &lbRecorder{}
	c := connect(t, uri, func(o *sturdy.Options) {
		o.Monitor = rec.monitor()
		if edit != nil {
			edit(o)
		}
	})
	return c, rec
}

// A load-balanced client: one LoadBalancer server, no monitoring, every
// command event with the serviceId of the router the balancer chose.
func TestLoadBalancedTopologyAndEvents(t *testing.T) {
	cluster := lbCluster(t)
	ctx := testCtx(t)
	c, rec := lbConnect(t, cluster.URI(), nil)
	coll := c.Database("lb").Collection("c")
	if _, err := coll.InsertOne(ctx, d("_id", 1)); err != nil {
		t.Fatal(err)
	}
	services := map[bson.ObjectID]bool{}
	for _, r := range cluster.Routers() {
		services[r.ServiceID()] = true
	}
	for _, e := range rec.startedNamed("insert") {
		if e.ServiceID == nil || !services[*e.ServiceID] {
			t.Fatalf("insert started event serviceId %v is no router's", e.ServiceID)
		}
	}
	for _, e := range rec.succeededNamed("insert") {
		if e.ServiceID == nil || !services[*e.ServiceID] {
			t.Fatalf("insert succeeded event serviceId %v is no router's", e.ServiceID)
		}
	}
	rec.pmu.Lock()
	defer rec.pmu.Unlock()
	if rec.beats != 0 {
		t.Errorf("%d heartbeats in load-balanced mode, want none", rec.beats)
	}
	last := rec.topos[len(rec.topos)-1].New
	if last.Kind != "LoadBalanced" || len(last.Servers) != 1 || last.Servers[0].Kind != "LoadBalancer" {
		t.Fatalf("topology %+v, want LoadBalanced with one LoadBalancer", last)
	}
}

// A hello reply without serviceId fails the operation with ErrNoServiceID.
func TestLoadBalancedWithoutServiceID(t *testing.T) {
	cluster := mongosim.StartWithOptions(t, mongosim.Options{Routers: 1})
	c, _ := lbConnect(t, withParams(cluster.Routers()[0].URI(), "loadBalanced=true"), func(o *sturdy.Options) {
		o.ServerSelectionTimeout = 2 * time.Second
	})
	_, err := c.Database("lb").Collection("c").InsertOne(testCtx(t), d("x", 1))
	if !errors.Is(err, sturdy.ErrNoServiceID) {
		t.Fatalf("insert through a mongos that is not load balanced: %v, want ErrNoServiceID", err)
	}
}

// A cursor keeps its connection checked out (one check-out for find and
// every getMore, all on one service) until drained; Close returns it too.
func TestLoadBalancedCursorPinning(t *testing.T) {
	cluster := lbCluster(t)
	ctx := testCtx(t)
	c, rec := lbConnect(t, cluster.URI(), nil)
	coll := c.Database("lb").Collection("c")
	docs := make([]any, 10)
	for i := range docs {
		docs[i] = d("_id", i)
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	out := func() int {
		return len(rec.poolTypes(event.ConnectionCheckedOut)) - len(rec.poolTypes(event.ConnectionCheckedIn))
	}
	cur, err := coll.Find(ctx, d(), &sturdy.FindOptions{BatchSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	if out() != 1 {
		t.Fatalf("%d connections out after find, want the cursor's one", out())
	}
	n := 0
	for cur.Next(ctx) {
		n++
		if n < 10 && out() != 1 {
			t.Fatalf("%d connections out during iteration, want 1", out())
		}
	}
	if err := cur.Err(); err != nil || n != 10 {
		t.Fatalf("cursor: %d documents, %v", n, err)
	}
	if out() != 0 {
		t.Fatalf("%d connections out after the cursor drained, want 0", out())
	}
	gm := rec.startedNamed("getMore")
	find := rec.startedNamed("find")
	if len(gm) < 3 {
		t.Fatalf("%d getMores", len(gm))
	}
	for _, e := range gm {
		if e.ConnectionID != find[0].ConnectionID || *e.ServiceID != *find[0].ServiceID {
			t.Fatalf("getMore on connection %d (service %v), find on %d (%v)", e.ConnectionID, e.ServiceID, find[0].ConnectionID, find[0].ServiceID)
		}
	}

	// Closed early: killCursors on the pinned connection, then checked in.
	cur, err = coll.Find(ctx, d(), &sturdy.FindOptions{BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := cur.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if out() != 0 {
		t.Fatalf("%d connections out after Close, want 0", out())
	}
	kc := rec.startedNamed("killCursors")
	find = rec.startedNamed("find")
	if len(kc) != 1 || kc[0].ConnectionID != find[len(find)-1].ConnectionID {
		t.Fatalf("killCursors %v not on the find's connection", kc)
	}
}

// A transaction runs on one pinned connection, released by commit's
// successor operation; with maxPoolSize 1 and the connection pinned, a
// check-out times out with an error naming the pinned connections.
func TestLoadBalancedTransactionPinningAndWaitQueueError(t *testing.T) {
	cluster := lbCluster(t)
	ctx := testCtx(t)
	c, rec := lbConnect(t, cluster.URI(), func(o *sturdy.Options) { o.MaxPoolSize = 1 })
	coll := c.Database("lb").Collection("t")
	if _, err := coll.InsertOne(ctx, d("_id", 0)); err != nil {
		t.Fatal(err)
	}
	s, err := c.StartSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.EndSession(ctx)
	if err := s.StartTransaction(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, d("_id", 1), &sturdy.InsertOneOptions{Session: s}); err != nil {
		t.Fatal(err)
	}
	// The transaction holds the only connection: another operation waits
	// and times out naming it.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = coll.InsertOne(short, d("_id", 2))
	cancel()
	var wqt *sturdy.WaitQueueTimeoutError
	if !errors.As(err, &wqt) || wqt.InUse == nil || wqt.InUse.Transactions != 1 || wqt.InUse.Cursors != 0 ||
		!strings.Contains(err.Error(), "connections in use by transactions: 1") {
		t.Fatalf("insert while the transaction holds the connection: %v, want a wait-queue timeout naming 1 transaction", err)
	}
	if _, err := coll.InsertOne(ctx, d("_id", 3), &sturdy.InsertOneOptions{Session: s}); err != nil {
		t.Fatal(err)
	}
	if err := s.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	ins := rec.startedNamed("insert")
	commit := rec.startedNamed("commitTransaction")
	txnConn := ins[1].ConnectionID
	for _, e := range append(ins[2:], commit...) {
		if e.ConnectionID != txnConn {
			t.Fatalf("%s on connection %d, the transaction's on %d", e.CommandName, e.ConnectionID, txnConn)
		}
	}
	// A non-transaction operation on the session releases the pin.
	if _, err := coll.CountDocuments(ctx, d(), &sturdy.CountOptions{Session: s}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, d("_id", 4)); err != nil {
		t.Fatalf("after the transaction: %v", err)
	}
}

// A network error on one service clears only that service's connections:
// PoolCleared carries its serviceId and the other service's idle
// connection survives.
func TestLoadBalancedPoolClearByService(t *testing.T) {
	cluster := lbCluster(t)
	ctx := testCtx(t)
	c, rec := lbConnect(t, cluster.URI(), func(o *sturdy.Options) { f := false; o.RetryWrites = &f })
	coll := c.Database("lb").Collection("p")
	// Two cursors open two connections, one per router (round robin).
	if _, err := coll.InsertMany(ctx, []any{d("_id", 1), d("_id", 2), d("_id", 3)}); err != nil {
		t.Fatal(err)
	}
	c1, err := coll.Find(ctx, d(), &sturdy.FindOptions{BatchSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	c2, err := coll.Find(ctx, d(), &sturdy.FindOptions{BatchSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	_ = c1.Close(ctx)
	_ = c2.Close(ctx)
	finds := rec.startedNamed("find")
	if *finds[0].ServiceID == *finds[1].ServiceID {
		t.Fatalf("both cursors on service %v; the balancer should have used both routers", finds[0].ServiceID)
	}
	// Every router closes the connection on the next insert.
	for _, r := range cluster.Routers() {
		if err := r.SetFailPoint(d("configureFailPoint", "failCommand", "mode", d("times", 1),
			"data", d("failCommands", bson.A{"insert"}, "closeConnection", true))); err != nil {
			t.Fatal(err)
		}
	}
	_, err = coll.InsertOne(ctx, d("x", 1))
	if !sturdy.IsNetworkError(err) {
		t.Fatalf("insert: %v, want a network error", err)
	}
	failed := rec.startedNamed("insert")
	failedSvc := *failed[len(failed)-1].ServiceID
	cleared := rec.poolTypes(event.PoolCleared)
	if len(cleared) != 1 || cleared[0].ServiceID == nil || *cleared[0].ServiceID != failedSvc {
		t.Fatalf("PoolCleared events %v, want one for service %v", cleared, failedSvc)
	}
	stale := 0
	for _, e := range rec.poolTypes(event.ConnectionClosed) {
		if e.Reason == event.ReasonStale {
			stale++
		}
	}
	if stale != 0 {
		t.Fatalf("%d connections closed stale; the other service's idle connection must survive", stale)
	}
	// The surviving connection (the other service's) serves the next find.
	if _, err := coll.CountDocuments(ctx, d()); err != nil {
		t.Fatal(err)
	}
	counts := rec.startedNamed("aggregate")
	if got := *counts[len(counts)-1].ServiceID; got == failedSvc {
		t.Fatalf("next operation on the cleared service %v, want the other one's surviving connection", got)
	}
}

// A router behind the balancer stops: the connection bound to it dies,
// the retryable write is retried on a new connection, which the balancer
// binds to the running router, and only the stopped service is cleared.
func TestLoadBalancedRouterStopRetriesOnOtherService(t *testing.T) {
	cluster := lbCluster(t)
	ctx := testCtx(t)
	c, rec := lbConnect(t, cluster.URI(), nil)
	coll := c.Database("lb").Collection("stop")
	if _, err := coll.InsertOne(ctx, d("_id", 1)); err != nil {
		t.Fatal(err)
	}
	first := *rec.startedNamed("insert")[0].ServiceID
	var stopped, running *mongosim.Router
	for _, r := range cluster.Routers() {
		if r.ServiceID() == first {
			stopped = r
		} else {
			running = r
		}
	}
	if err := stopped.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, d("_id", 2)); err != nil {
		t.Fatalf("insert after the router stopped: %v", err)
	}
	ins := rec.startedNamed("insert")
	if got := *ins[len(ins)-1].ServiceID; got != running.ServiceID() {
		t.Fatalf("the retry ran on service %v, want the running router's %v", got, running.ServiceID())
	}
	cleared := rec.poolTypes(event.PoolCleared)
	if len(cleared) != 1 || *cleared[0].ServiceID != first {
		t.Fatalf("PoolCleared %v, want one for the stopped service %v", cleared, first)
	}
}
