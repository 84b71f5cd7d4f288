package mongosim

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	mevent "go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// A router's failGetMoreAfterCursorCheckout fails a change stream's
// getMore with a resumable error labelled ResumableChangeStreamError, and
// the official driver resumes the stream through the router.
func TestRouterChangeStreamGetMoreFailPointResumes(t *testing.T) {
	var mu sync.Mutex
	aggregates := 0
	mon := &mevent.CommandMonitor{Started: func(_ context.Context, e *mevent.CommandStartedEvent) {
		if e.CommandName == "aggregate" {
			mu.Lock()
			aggregates++
			mu.Unlock()
		}
	}}
	client, c := routedClient(t, Options{Routers: 1}, options.Client().SetMonitor(mon))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	coll := client.Database("db").Collection("c")
	cs, err := coll.Watch(ctx, mongoPipeline())
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	if err := c.Routers()[0].SetFailPoint(bson.D{{Key: "configureFailPoint", Value: "failGetMoreAfterCursorCheckout"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}}, {Key: "data", Value: bson.D{{Key: "errorCode", Value: 6}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if !cs.Next(ctx) {
		t.Fatalf("no event after the failed getMore: %v", cs.Err())
	}
	if op := cs.Current.Lookup("operationType").StringValue(); op != "insert" {
		t.Fatalf("event %s", cs.Current)
	}
	mu.Lock()
	defer mu.Unlock()
	if aggregates != 2 {
		t.Fatalf("%d aggregates, want 2: the driver resumes after the labelled error", aggregates)
	}
}

func mongoPipeline() bson.A { return bson.A{} }
