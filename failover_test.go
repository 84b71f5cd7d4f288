package sturdy_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/event"
	"github.com/sturdy-go/sturdy/mongosim"
)

func TestFailoverToNewPrimary(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.StartWithOptions(t, mongosim.Options{Members: 3})
	rec := &recorder{}
	var mu sync.Mutex
	primaries := map[string]bool{}
	mon := rec.monitor()
	mon.ServerDescriptionChanged = func(e *event.ServerDescriptionChangedEvent) {
		if e.New.Kind == "RSPrimary" {
			mu.Lock()
			primaries[e.Address] = true
			mu.Unlock()
		}
	}
	c := connect(t, cluster.URI(), func(o *sturdy.Options) {
		o.Monitor = mon
		o.HeartbeatInterval = 500 * time.Millisecond
	})
	coll := c.Database("db").Collection("failover")
	if _, err := coll.InsertOne(ctx, d("_id", 1), nil); err != nil {
		t.Fatal(err)
	}
	old := cluster.Primary().Addr()
	if got := rec.startedNamed("insert")[0].ServerAddress; got != old {
		t.Fatalf("first insert went to %s, primary is %s", got, old)
	}

	if err := cluster.StepDown(ctx); err != nil {
		t.Fatal(err)
	}
	newPrimary := cluster.Primary()
	if newPrimary == nil || newPrimary.Addr() == old {
		t.Fatalf("no new primary after step-down")
	}

	// The topology discovers the new primary (within a few heartbeats, or
	// at once when an operation's error makes it check).
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		found := primaries[newPrimary.Addr()]
		mu.Unlock()
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the client never saw %s as primary", newPrimary.Addr())
		}
		time.Sleep(20 * time.Millisecond)
	}

	rec.reset()
	insCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := coll.InsertOne(insCtx, d("_id", 2), nil)
	if err != nil && (sturdy.IsNetworkError(err) || sturdy.HasErrorLabel(err, sturdy.LabelRetryableWrite)) {
		// Retryable writes arrive with the next issue; one manual retry
		// stands in for them until then.
		t.Logf("first insert after failover failed (%v); retrying once by hand", err)
		_, err = coll.InsertOne(insCtx, d("_id", 2), nil)
	}
	if err != nil {
		t.Fatalf("insert after failover: %v", err)
	}
	succ := rec.succeededNamed("insert")
	if len(succ) == 0 || succ[len(succ)-1].ServerAddress != newPrimary.Addr() {
		t.Fatalf("insert after failover went to %v, want %s", succ, newPrimary.Addr())
	}
	if n, err := coll.CountDocuments(ctx, nil, nil); err != nil || n != 2 {
		t.Fatalf("count after failover %d, %v", n, err)
	}
}
