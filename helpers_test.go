package sturdy_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/event"
	"github.com/sturdy-go/sturdy/internal/testsupport"
)

// recorder collects command events.
type recorder struct {
	mu        sync.Mutex
	started   []*event.CommandStartedEvent
	succeeded []*event.CommandSucceededEvent
	failed    []*event.CommandFailedEvent
}

func (r *recorder) monitor() *event.Monitor {
	return &event.Monitor{
		CommandStarted: func(_ context.Context, e *event.CommandStartedEvent) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.started = append(r.started, e)
		},
		CommandSucceeded: func(_ context.Context, e *event.CommandSucceededEvent) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.succeeded = append(r.succeeded, e)
		},
		CommandFailed: func(_ context.Context, e *event.CommandFailedEvent) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.failed = append(r.failed, e)
		},
	}
}

// startedNamed returns the started events of the named command.
func (r *recorder) startedNamed(name string) []*event.CommandStartedEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*event.CommandStartedEvent
	for _, e := range r.started {
		if e.CommandName == name {
			out = append(out, e)
		}
	}
	return out
}

func (r *recorder) succeededNamed(name string) []*event.CommandSucceededEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*event.CommandSucceededEvent
	for _, e := range r.succeeded {
		if e.CommandName == name {
			out = append(out, e)
		}
	}
	return out
}

func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started, r.succeeded, r.failed = nil, nil, nil
}

// connect parses uri, lets edit adjust the options, connects, and
// disconnects when the test ends.
func connect(t *testing.T, uri string, edit func(*sturdy.Options)) *sturdy.Client {
	t.Helper()
	o, err := sturdy.ParseURI(uri)
	if err != nil {
		t.Fatalf("ParseURI(%q): %v", uri, err)
	}
	if o.ServerSelectionTimeout == 0 {
		o.ServerSelectionTimeout = 10 * time.Second
	}
	if edit != nil {
		edit(&o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := sturdy.ConnectWithOptions(ctx, o)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	testsupport.CloseOnCleanup(t, func(ctx context.Context) error {
		if err := c.Disconnect(ctx); !errors.Is(err, sturdy.ErrClientDisconnected) {
			return err
		}
		return nil // the test disconnected it already
	})
	return c
}

func testCtx(t *testing.T) context.Context { return testsupport.Context(t, 0) }

// commandField reads a field of a started command.
func commandField(e *event.CommandStartedEvent, key string) bson.RawValue {
	v, _ := e.Command.LookupErr(key)
	return v
}

func d(kv ...any) bson.D {
	out := make(bson.D, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, bson.E{Key: kv[i].(string), Value: kv[i+1]})
	}
	return out
}

func ptr[T any](v T) *T { return &v }
