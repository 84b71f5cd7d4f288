package once_test

import (
	"context"
	"fmt"
	"log"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/mongosim"
	"github.com/sturdy-go/sturdy/once"
)

// Count an event exactly once, then run the clean-up pass.
func Example() {
	ctx := context.Background()
	sim, err := mongosim.Launch(mongosim.Options{}) // or a real deployment
	if err != nil {
		log.Fatal(err)
	}
	defer sim.Close()
	client, err := sturdy.Connect(ctx, sim.URI())
	if err != nil {
		log.Fatal(err)
	}
	defer client.Disconnect(ctx)

	events := once.New(client.Database("app").Collection("events"))

	// Two round trips, each idempotent and retried once on a network error.
	for i := 0; i < 3; i++ {
		if _, err := events.Increment(ctx, "2016-06-28", bson.D{{Key: "counter", Value: 1}}); err != nil {
			// An *IncrementError says whether the token may be pending;
			// Reconcile applies pending tokens exactly once.
			log.Print(err)
		}
	}
	// Periodically: fold tokens whose step two never ran.
	if _, err := events.Reconcile(ctx, &once.ReconcileOptions{}); err != nil {
		log.Fatal(err)
	}

	// An insert with a client-side _id: a lost reply cannot duplicate it.
	res, err := events.InsertOne(ctx, bson.D{{Key: "_id", Value: "e-1"}, {Key: "kind", Value: "click"}})
	if err != nil {
		log.Fatal(err)
	}

	var day struct {
		Counter int `bson:"counter"`
	}
	if err := events.Unwrap().FindOne(ctx, bson.D{{Key: "_id", Value: "2016-06-28"}}).Decode(&day); err != nil {
		log.Fatal(err)
	}
	fmt.Println(day.Counter, res.InsertedID)
	// Output: 3 e-1
}
