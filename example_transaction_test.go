package sturdy_test

import (
	"context"
	"fmt"
	"log"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/mongosim"
)

// Move money between two accounts in one transaction.
func ExampleSession_WithTransaction() {
	ctx := context.Background()
	sim, err := mongosim.Launch(mongosim.Options{}) // or a real replica set
	if err != nil {
		log.Fatal(err)
	}
	defer sim.Close()
	client, err := sturdy.Connect(ctx, sim.URI())
	if err != nil {
		log.Fatal(err)
	}
	defer client.Disconnect(ctx)
	accounts := client.Database("bank").Collection("accounts")
	if _, err := accounts.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: "alice"}, {Key: "balance", Value: 100}},
		bson.D{{Key: "_id", Value: "bob"}, {Key: "balance", Value: 0}},
	}); err != nil {
		log.Fatal(err)
	}

	err = client.UseSession(ctx, func(ctx context.Context, s *sturdy.Session) error {
		// The function may run more than once (after a
		// TransientTransactionError): it must pass s to every operation
		// and do nothing else with side effects.
		return s.WithTransaction(ctx, func(ctx context.Context) error {
			opts := &sturdy.UpdateOptions{Session: s}
			if _, err := accounts.UpdateOne(ctx, bson.D{{Key: "_id", Value: "alice"}},
				bson.D{{Key: "$inc", Value: bson.D{{Key: "balance", Value: -10}}}}, opts); err != nil {
				return err
			}
			_, err := accounts.UpdateOne(ctx, bson.D{{Key: "_id", Value: "bob"}},
				bson.D{{Key: "$inc", Value: bson.D{{Key: "balance", Value: 10}}}}, opts)
			return err
		}, &sturdy.TransactionOptions{WriteConcern: &sturdy.WriteConcern{W: "majority"}})
	})
	if err != nil {
		log.Fatal(err)
	}

	cur, err := accounts.Find(ctx, bson.D{}, &sturdy.FindOptions{Sort: bson.D{{Key: "_id", Value: 1}}})
	if err != nil {
		log.Fatal(err)
	}
	var all []struct {
		ID      string `bson:"_id"`
		Balance int    `bson:"balance"`
	}
	if err := cur.All(ctx, &all); err != nil {
		log.Fatal(err)
	}
	fmt.Println(all)
	// Output: [{alice 90} {bob 10}]
}
