package mongov2_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/adapt/mongov2"
	"github.com/sturdy-go/sturdy/faultproxy"
	"github.com/sturdy-go/sturdy/mongosim"
	"github.com/sturdy-go/sturdy/once"
)

// An application on the official driver counts events exactly once, in a
// test that runs mongosim behind the fault proxy (sturdy proxy's engine),
// which loses the reply of the first update after the server applied it.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sim, err := mongosim.Launch(mongosim.Options{}) // in a test: mongosim.Start(t)
	if err != nil {
		log.Fatal(err)
	}
	defer sim.Close()
	simOpts, err := sturdy.ParseURI(sim.URI())
	if err != nil {
		log.Fatal(err)
	}
	proxy, err := faultproxy.Start(ctx, faultproxy.Options{
		Upstreams: simOpts.Hosts,
		Rules: []faultproxy.Rule{{Match: faultproxy.Match{Commands: []string{"update"}},
			Action: faultproxy.Action{Kind: faultproxy.DropReply}, Times: 1}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer proxy.Close()

	// The application's own client, with the driver's retries off: once
	// does not need them.
	client, err := mongo.Connect(options.Client().ApplyURI(proxy.URI()).SetRetryWrites(false))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Disconnect(context.Background())
	coll := client.Database("app").Collection("events")

	events := once.New(mongov2.Collection(coll))
	for i := 0; i < 3; i++ {
		if _, err := events.Increment(ctx, "2016-06-28", bson.D{{Key: "counter", Value: 1}}); err != nil {
			log.Fatal(err)
		}
	}
	var day struct {
		Counter int `bson:"counter"`
	}
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: "2016-06-28"}}).Decode(&day); err != nil {
		log.Fatal(err)
	}
	fmt.Println(day.Counter, proxy.Stats().Fired)
	// Output: 3 1
}
