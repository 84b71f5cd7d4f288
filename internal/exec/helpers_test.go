package exec_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/blackpipe"
	"github.com/sturdy-go/sturdy/event"
	"github.com/sturdy-go/sturdy/internal/backoff"
	"github.com/sturdy-go/sturdy/internal/exec"
	"github.com/sturdy-go/sturdy/internal/pool"
	"github.com/sturdy-go/sturdy/internal/session"
	"github.com/sturdy-go/sturdy/internal/testsupport"
	"github.com/sturdy-go/sturdy/internal/topology"
)

// recorder keeps the command events of a test in the order they came.
type recorder struct {
	mu     sync.Mutex
	events []any
}

func (r *recorder) add(e any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) all() []any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]any(nil), r.events...)
}

func (r *recorder) monitor() *event.Monitor {
	return &event.Monitor{
		CommandStarted:   func(_ context.Context, e *event.CommandStartedEvent) { r.add(e) },
		CommandSucceeded: func(_ context.Context, e *event.CommandSucceededEvent) { r.add(e) },
		CommandFailed:    func(_ context.Context, e *event.CommandFailedEvent) { r.add(e) },
	}
}

// env is an executor over a real topology.
type env struct {
	exec     *exec.Executor
	topo     *topology.Topology
	sessions *session.Pool
	rec      *recorder
}

func newEnv(t *testing.T, o topology.Options) *env {
	t.Helper()
	rec := &recorder{}
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = 500 * time.Millisecond
	}
	if o.MinHeartbeatInterval == 0 {
		o.MinHeartbeatInterval = 20 * time.Millisecond
	}
	if o.ServerSelectionTimeout == 0 {
		o.ServerSelectionTimeout = 5 * time.Second
	}
	if o.Pool.MaxPoolSize == 0 {
		o.Pool = pool.Options{MaxPoolSize: 10, MaxConnecting: 2}
	}
	topo, err := topology.New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := topo.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	testsupport.CloseOnCleanup(t, topo.Disconnect)
	sp := session.NewPool(nil)
	return &env{
		exec: &exec.Executor{Topology: topo, Sessions: sp, Monitor: rec.monitor(), RetryWrites: true, RetryReads: true,
			MaxAdaptiveRetries: 5, BackoffBase: backoff.Base}, // the client's defaults; the executor takes 0 as none
		topo:     topo,
		sessions: sp,
		rec:      rec,
	}
}

// replicaSet starts a one-member blackpipe replica set "rs0" (a primary
// with sessions) and an executor for it.
func replicaSet(t *testing.T) (*blackpipe.Server, *env) {
	t.Helper()
	srv := blackpipe.StartReplicaSet(t, "rs0", 1, blackpipe.Options{})[0]
	return srv, newEnv(t, topology.Options{Hosts: []string{srv.Addr()}, SetName: "rs0"})
}

type outcome struct {
	res exec.Result
	err error
}

// executeAsync runs op in a goroutine; the test plays the server.
func executeAsync(e *exec.Executor, op *exec.Operation) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := e.Execute(ctx, op)
		ch <- outcome{res, err}
	}()
	return ch
}

func wait(t *testing.T, ch <-chan outcome) outcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(15 * time.Second):
		t.Fatal("Execute did not return")
		return outcome{}
	}
}

func receive(t *testing.T, srv *blackpipe.Server, name string) *blackpipe.Request {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := srv.Receive(ctx, blackpipe.Command(name))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// autoReply answers every command called name with reply, recording the
// commands it saw.
type seen struct {
	mu   sync.Mutex
	cmds []*blackpipe.Request
}

func (s *seen) get(i int) *blackpipe.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i >= len(s.cmds) {
		panic(fmt.Sprintf("only %d commands seen", len(s.cmds)))
	}
	return s.cmds[i]
}

func (s *seen) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.cmds)
}

func autoReply(srv *blackpipe.Server, name string, reply bson.D) *seen {
	s := &seen{}
	srv.Autorespond(blackpipe.Command(name), func(r *blackpipe.Request) bool {
		s.mu.Lock()
		s.cmds = append(s.cmds, r)
		s.mu.Unlock()
		return r.Reply(reply) == nil
	})
	return s
}

func has(doc bson.Raw, key string) bool {
	_, err := doc.LookupErr(key)
	return err == nil
}

func ctx10(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func insertOp() *exec.Operation {
	return &exec.Operation{
		DB:      "db",
		Command: bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "x", Value: 1}}}}},
		Flags:   exec.Write | exec.RetryableWrite,
	}
}
