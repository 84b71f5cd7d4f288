package exec_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/blackpipe"
	"github.com/sturdy-go/sturdy/event"
	"github.com/sturdy-go/sturdy/internal/exec"
	"github.com/sturdy-go/sturdy/internal/pool"
	"github.com/sturdy-go/sturdy/internal/topology"
	"github.com/sturdy-go/sturdy/mongoerr"
	"github.com/sturdy-go/sturdy/readpref"
)

// checkOutWaiters signals when the n-th check-out of addr has started:
// with MaxPoolSize 1 and the one connection in use, it is then queued.
func checkOutWaiters(addr *string, n int) (*event.Monitor, <-chan struct{}) {
	var (
		mu    sync.Mutex
		count int
	)
	queued := make(chan struct{})
	return &event.Monitor{Pool: func(e *event.PoolEvent) {
		if e.Type != event.ConnectionCheckOutStarted || e.Address != *addr {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if count++; count == n {
			close(queued)
		}
	}}, queued
}

// A check-out that was waiting for a connection of a server when the
// server left the topology (its pool closed) never reached it: the
// operation selects again and runs on another server, whatever the
// command, instead of failing with the pool's error. Here a generic
// command (no retryable read or write) waits behind a held find on the
// only secondary; the primary then drops the secondary from the set.
func TestCheckOutRacingServerRemovalSelectsAgain(t *testing.T) {
	members := blackpipe.StartReplicaSet(t, "rs0", 2, blackpipe.Options{})
	primary, secondary := members[0], members[1]
	addr := secondary.Addr()
	mon, queued := checkOutWaiters(&addr, 2)
	env := newEnv(t, topology.Options{Hosts: []string{primary.Addr(), secondary.Addr()}, SetName: "rs0",
		Pool: pool.Options{MaxPoolSize: 1, MaxConnecting: 1}, Monitor: mon})
	ctx := ctx10(t)
	sel := topology.ReadPrefSelector(readpref.ReadPref{Mode: readpref.Secondary}, env.topo.Options().HeartbeatInterval)
	removed, err := env.topo.SelectServer(ctx, sel, nil)
	if err != nil {
		t.Fatal(err)
	}
	removed.Dec()

	held := executeAsync(env.exec, &exec.Operation{DB: "db", Command: bson.D{{Key: "find", Value: "c"}},
		ReadPref: &readpref.ReadPref{Mode: readpref.Secondary}})
	heldReq := receive(t, secondary, "find")
	racer := executeAsync(env.exec, &exec.Operation{DB: "db", Command: bson.D{{Key: "ping", Value: 1}}, Flags: exec.RunCommand,
		ReadPref: &readpref.ReadPref{Mode: readpref.SecondaryPreferred}})
	select {
	case <-queued:
	case <-ctx.Done():
		t.Fatal("the second check-out never started")
	}

	primary.UpdateHello(bson.D{{Key: "hosts", Value: bson.A{primary.Addr()}}})
	env.topo.RequestImmediateCheck()
	o := wait(t, racer)
	if o.err != nil {
		t.Fatalf("the command racing the removal failed: %v", o.err)
	}
	if got := o.res.Server.Addr(); got != primary.Addr() {
		t.Fatalf("ran on %s, want the primary %s", got, primary.Addr())
	}
	if _, ok := env.topo.Server(addr); ok {
		t.Fatal("the secondary is still in the topology")
	}
	for _, e := range env.rec.all() {
		if s, ok := e.(*event.CommandStartedEvent); ok && s.CommandName == "ping" && s.ServerAddress != primary.Addr() {
			t.Errorf("ping sent to %s", s.ServerAddress)
		}
	}
	// A command bound to the server that left (a getMore) cannot select
	// again: it says why, still without the pool's error.
	_, err = env.exec.Execute(ctx, &exec.Operation{DB: "db", Command: bson.D{{Key: "getMore", Value: int64(1)}}, Server: removed})
	if !errors.Is(err, exec.ErrServerRemoved) || errors.Is(err, pool.ErrPoolClosed) {
		t.Fatalf("getMore on the removed server: %v, want ErrServerRemoved", err)
	}
	_ = heldReq.Hangup()
	wait(t, held)
}

// A check-out racing Disconnect reports the client disconnected, not the
// pool's own error.
func TestCheckOutRacingDisconnect(t *testing.T) {
	srv := blackpipe.StartReplicaSet(t, "rs0", 1, blackpipe.Options{})[0]
	addr := srv.Addr()
	mon, queued := checkOutWaiters(&addr, 2)
	env := newEnv(t, topology.Options{Hosts: []string{addr}, SetName: "rs0",
		Pool: pool.Options{MaxPoolSize: 1, MaxConnecting: 1}, Monitor: mon})
	held := executeAsync(env.exec, insertOp())
	heldReq := receive(t, srv, "insert")
	racer := executeAsync(env.exec, &exec.Operation{DB: "db", Command: bson.D{{Key: "find", Value: "c"}}, Flags: exec.RetryableRead})
	<-queued
	if err := env.topo.Disconnect(context.Background()); err != nil {
		t.Fatal(err)
	}
	o := wait(t, racer)
	if !errors.Is(o.err, mongoerr.ErrClientDisconnected) || errors.Is(o.err, pool.ErrPoolClosed) ||
		strings.Contains(o.err.Error(), "closed connection pool") {
		t.Fatalf("check-out racing Disconnect: %v, want ErrClientDisconnected", o.err)
	}
	_ = heldReq.Hangup()
	wait(t, held)
}
