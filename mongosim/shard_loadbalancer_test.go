package mongosim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	mevent "go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
)

func TestBalancerOptionsAndURI(t *testing.T) {
	if c, err := Launch(Options{LoadBalanced: true}); err == nil {
		_ = c.Close()
		t.Fatal("LoadBalanced without Routers launched")
	} else if !strings.Contains(err.Error(), "needs Routers") {
		t.Fatalf("err = %v", err)
	}
	c := StartWithOptions(t, Options{Routers: 2, LoadBalanced: true})
	want := "mongodb://" + c.Balancer().Addr() + "/?loadBalanced=true"
	if c.URI() != want || c.LoadBalancedURI() != want {
		t.Fatalf("URI() = %q, LoadBalancedURI() = %q, want %q", c.URI(), c.LoadBalancedURI(), want)
	}
	single := c.SingleRouterBalancer()
	if single == nil || single.Addr() == c.Balancer().Addr() {
		t.Fatal("no single-router balancer of its own")
	}
	for i := 0; i < 3; i++ {
		rc := dialRaw(t, single.Addr())
		reply, err := rc.msg(bson.D{{Key: "hello", Value: 1}, {Key: "loadBalanced", Value: true}, {Key: "$db", Value: "admin"}})
		if err != nil {
			t.Fatal(err)
		}
		if sid := reply.Lookup("serviceId").ObjectID(); sid != c.Routers()[0].ServiceID() {
			t.Fatalf("single-router balancer bound a connection to %v, want router 0 (%v)", sid, c.Routers()[0].ServiceID())
		}
	}
	plain := StartWithOptions(t, Options{Routers: 1})
	if plain.Balancer() != nil || plain.LoadBalancedURI() != "" {
		t.Fatal("a deployment without LoadBalanced has a balancer")
	}
}

// Connections are bound to routers round robin; only the first hello
// carries serviceId; a hello without loadBalanced: true is refused with
// 354 and the connection closed, as mongos does on its load-balancer port.
func TestBalancerHello(t *testing.T) {
	c := StartWithOptions(t, Options{Routers: 2, LoadBalanced: true})
	rs := c.Routers()
	lbHello := bson.D{{Key: "hello", Value: 1}, {Key: "loadBalanced", Value: true}, {Key: "$db", Value: "admin"}}
	seen := map[bson.ObjectID]int{}
	for i := 0; i < 4; i++ {
		rc := dialRaw(t, c.Balancer().Addr())
		reply, err := rc.msg(lbHello)
		if err != nil {
			t.Fatal(err)
		}
		if v := reply.Lookup("msg").StringValue(); v != "isdbgrid" {
			t.Errorf("msg = %q, want isdbgrid", v)
		}
		sid, ok := reply.Lookup("serviceId").ObjectIDOK()
		if !ok {
			t.Fatalf("hello reply has no serviceId: %v", reply)
		}
		seen[sid]++
		again, err := rc.msg(lbHello)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := again.LookupErr("serviceId"); err == nil {
			t.Error("a second hello on the connection carries serviceId")
		}
	}
	if seen[rs[0].ServiceID()] != 2 || seen[rs[1].ServiceID()] != 2 {
		t.Fatalf("serviceIds seen %v, want each router's (%v, %v) twice", seen, rs[0].ServiceID(), rs[1].ServiceID())
	}

	rc := dialRaw(t, c.Balancer().Addr())
	reply, err := rc.msg(bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}})
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := reply.Lookup("code").AsInt64OK(); code != codeLoadBalancerSupportMismatch {
		t.Fatalf("hello without loadBalanced: %v, want code 354", reply)
	}
	if _, err := rc.msg(bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}); err == nil {
		t.Fatal("the connection stayed open after LoadBalancerSupportMismatch")
	}
}

// A stopped router's connections are closed by the balancer; new
// connections go to the routers still running.
func TestBalancerRouterStop(t *testing.T) {
	c := StartWithOptions(t, Options{Routers: 2, LoadBalanced: true})
	rs := c.Routers()
	lbHello := bson.D{{Key: "hello", Value: 1}, {Key: "loadBalanced", Value: true}, {Key: "$db", Value: "admin"}}
	a := dialRaw(t, c.Balancer().Addr())
	reply, err := a.msg(lbHello)
	if err != nil {
		t.Fatal(err)
	}
	sid := reply.Lookup("serviceId").ObjectID()
	var bound, other *Router
	for _, r := range rs {
		if r.ServiceID() == sid {
			bound = r
		} else {
			other = r
		}
	}
	if bound == nil || other == nil {
		t.Fatalf("serviceId %v is no router's", sid)
	}
	if err := bound.Stop(); err != nil {
		t.Fatal(err)
	}
	// Closed at once, as a balancer closes the client's socket when its
	// backend socket dies: a read ends without sending anything.
	_ = a.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := a.nc.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("read on a connection bound to a stopped router: %v, want EOF", err)
	}
	for i := 0; i < 2; i++ {
		b := dialRaw(t, c.Balancer().Addr())
		reply, err := b.msg(lbHello)
		if err != nil {
			t.Fatal(err)
		}
		if got := reply.Lookup("serviceId").ObjectID(); got != other.ServiceID() {
			t.Fatalf("new connection bound to %v, want the running router %v", got, other.ServiceID())
		}
	}
	if err := bound.Start(); err != nil {
		t.Fatal(err)
	}
	if bound.ServiceID() == sid {
		t.Fatal("a restarted router kept its serviceId")
	}
}

// lbClient connects the official driver through the balancer, recording
// command events.
func lbClient(t *testing.T, c *Cluster, co *options.ClientOptions) (*mongo.Client, *cmdEvents) {
	t.Helper()
	ev := &cmdEvents{}
	if co == nil {
		co = options.Client()
	}
	co.ApplyURI(c.URI()).SetMonitor(&mevent.CommandMonitor{
		Started: func(_ context.Context, e *mevent.CommandStartedEvent) {
			ev.mu.Lock()
			ev.started = append(ev.started, e)
			ev.mu.Unlock()
		},
		Failed: func(_ context.Context, e *mevent.CommandFailedEvent) {
			ev.mu.Lock()
			ev.failed = append(ev.failed, e)
			ev.mu.Unlock()
		},
	})
	client, err := mongo.Connect(co)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	return client, ev
}

type cmdEvents struct {
	mu      sync.Mutex
	started []*mevent.CommandStartedEvent
	failed  []*mevent.CommandFailedEvent
}

// The official driver in load-balanced mode: CRUD, a cursor over several
// getMores and a transaction, each command's serviceId one of the
// routers', a cursor's getMores on its find's service.
func TestBalancerOfficialDriver(t *testing.T) {
	c := StartWithOptions(t, Options{Routers: 2, Members: 3, LoadBalanced: true})
	client, ev := lbClient(t, c, nil)
	ctx := context.Background()
	coll := client.Database("lb").Collection("c")
	docs := make([]any, 10)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}}
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	cur, err := coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(3))
	if err != nil {
		t.Fatal(err)
	}
	var got []bson.D
	if err := cur.All(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 10 {
		t.Fatalf("find returned %d documents, want 10", len(got))
	}

	sess, err := client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	_, err = sess.WithTransaction(ctx, func(sc context.Context) (any, error) {
		if _, err := coll.InsertOne(sc, bson.D{{Key: "_id", Value: 100}}); err != nil {
			return nil, err
		}
		return coll.UpdateOne(sc, bson.D{{Key: "_id", Value: 100}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}})
	}, options.Transaction().SetWriteConcern(writeconcern.Majority()))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := coll.CountDocuments(ctx, bson.D{{Key: "x", Value: 1}}); err != nil || n != 1 {
		t.Fatalf("after the transaction: %d documents with x:1, %v", n, err)
	}

	services := map[bson.ObjectID]bool{}
	for _, r := range c.Routers() {
		services[r.ServiceID()] = true
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	var findService, txnService *bson.ObjectID
	getMores := 0
	for _, e := range ev.started {
		if e.ServiceID == nil || !services[*e.ServiceID] {
			t.Fatalf("%s started event has serviceId %v, not a router's", e.CommandName, e.ServiceID)
		}
		switch e.CommandName {
		case "find":
			if findService == nil {
				findService = e.ServiceID
			}
		case "getMore":
			getMores++
			if *e.ServiceID != *findService {
				t.Errorf("getMore on service %v, its find on %v", e.ServiceID, findService)
			}
		case "update", "commitTransaction":
			if txnService != nil && *e.ServiceID != *txnService {
				t.Errorf("%s on service %v, the transaction's insert on %v", e.CommandName, e.ServiceID, txnService)
			}
		case "insert":
			if _, inTxn := e.Command.Lookup("txnNumber").AsInt64OK(); inTxn && e.Command.Lookup("startTransaction").Type != 0 {
				txnService = e.ServiceID
			}
		}
	}
	if getMores < 3 {
		t.Fatalf("%d getMores, want at least 3", getMores)
	}
}

// A fail point set on one router applies to exactly the connections the
// balancer bound to it: each router fails insert with its own code, and
// the code the driver sees matches the serviceId of the failed command.
func TestBalancerFailPointFollowsBinding(t *testing.T) {
	c := StartWithOptions(t, Options{Routers: 2, LoadBalanced: true})
	rs := c.Routers()
	codes := map[bson.ObjectID]int32{rs[0].ServiceID(): 1001, rs[1].ServiceID(): 1002}
	for _, r := range rs {
		if err := r.SetFailPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "alwaysOn"},
			{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"insert"}}, {Key: "errorCode", Value: codes[r.ServiceID()]}}}}); err != nil {
			t.Fatal(err)
		}
	}
	// Several inserts at once, so the driver opens several connections and
	// both routers get some; rounds repeat until both have (goroutines may
	// run one after another on a loaded machine and share one connection).
	client, ev := lbClient(t, c, options.Client().SetRetryWrites(false))
	coll := client.Database("lb").Collection("fp")
	used := map[bson.ObjectID]bool{}
	for round := 0; round < 50 && len(used) < 2; round++ {
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = coll.InsertOne(context.Background(), bson.D{})
			}()
		}
		wg.Wait()
		ev.mu.Lock()
		if len(ev.failed) != 8*(round+1) {
			ev.mu.Unlock()
			t.Fatalf("%d failed inserts after round %d, want %d", len(ev.failed), round, 8*(round+1))
		}
		for _, e := range ev.failed {
			// The event's failure is the driver's internal error type,
			// which prints the code as "(Location<code>)".
			if e.ServiceID == nil || !strings.Contains(e.Failure.Error(), fmt.Sprintf("Location%d)", codes[*e.ServiceID])) {
				ev.mu.Unlock()
				t.Fatalf("insert on service %v failed with %v, want that router's code", e.ServiceID, e.Failure)
			}
			used[*e.ServiceID] = true
		}
		ev.mu.Unlock()
	}
	if len(used) != 2 {
		t.Fatalf("the inserts went to %d routers in 50 rounds, want both", len(used))
	}
}

// A router's MaxConnections counts the balancer's connections to it: over
// the limit, the client's connection is closed.
func TestBalancerRouterMaxConnections(t *testing.T) {
	c := StartWithOptions(t, Options{Routers: 1, LoadBalanced: true})
	c.Routers()[0].SetLimiter(LimiterOptions{MaxConnections: 1})
	lbHello := bson.D{{Key: "hello", Value: 1}, {Key: "loadBalanced", Value: true}, {Key: "$db", Value: "admin"}}
	a := dialRaw(t, c.Balancer().Addr())
	if _, err := a.msg(lbHello); err != nil {
		t.Fatal(err)
	}
	b := dialRaw(t, c.Balancer().Addr())
	_ = b.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := b.nc.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("second connection over the router's MaxConnections: %v, want EOF", err)
	}
	if _, err := a.msg(lbHello); err != nil {
		t.Fatalf("the first connection broke: %v", err)
	}
}
