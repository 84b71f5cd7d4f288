package blackpipe_test

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/sturdy-go/sturdy/blackpipe"
)

// A test scripts the server's side of an insert: it receives the command the
// driver sent and decides the reply.
func Example() {
	s, err := blackpipe.Listen(blackpipe.Options{})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, err := mongo.Connect(options.Client().ApplyURI(s.URI()))
	if err != nil {
		panic(err)
	}
	defer client.Disconnect(ctx)

	done := make(chan error, 1)
	go func() {
		_, err := client.Database("shop").Collection("orders").InsertOne(ctx, bson.D{{Key: "item", Value: "tea"}})
		done <- err
	}()

	r, err := s.Receive(ctx, blackpipe.Doc(bson.D{{Key: "insert", Value: "orders"}}))
	if err != nil {
		panic(err)
	}
	d, _ := r.Doc()
	fmt.Println(r.Name, r.DB, len(r.Sequences[0].Documents))
	_ = d
	_ = r.ReplyError(11000, "E11000 duplicate key error")
	fmt.Println(<-done != nil)
	// Output:
	// insert shop 1
	// true
}
