package main

import (
	"context"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/sturdy-go/sturdy/adapt"
	"github.com/sturdy-go/sturdy/adapt/mongov2"
	"github.com/sturdy-go/sturdy/soak"
)

// officialDriver runs the soak's workload through the official Go driver,
// with its default options, its collections adapted by adapt/mongov2 so
// that once and optimistic run over it unchanged.
var officialDriver = soak.Driver{
	Name: "official",
	Connect: func(ctx context.Context, uri string) (soak.Client, error) {
		c, err := mongo.Connect(options.Client().ApplyURI(uri))
		if err != nil {
			return nil, err
		}
		return officialSoakClient{c}, nil
	},
	Owns: func(stack string) bool {
		return strings.Contains(stack, "go.mongodb.org/mongo-driver/v2/x/mongo/driver") ||
			strings.Contains(stack, "go.mongodb.org/mongo-driver/v2/mongo.")
	},
}

type officialSoakClient struct{ c *mongo.Client }

func (o officialSoakClient) Collection(db, name string) adapt.Collection {
	return mongov2.Collection(o.c.Database(db).Collection(name))
}

func (o officialSoakClient) Disconnect(ctx context.Context) error { return o.c.Disconnect(ctx) }

// Transaction runs fn with the official driver's WithTransaction.
func (o officialSoakClient) Transaction(ctx context.Context, fn func(ctx context.Context, w soak.TxnWriter) error) error {
	sess, err := o.c.StartSession()
	if err != nil {
		return err
	}
	defer sess.EndSession(context.WithoutCancel(ctx))
	_, err = sess.WithTransaction(ctx, func(ctx context.Context) (any, error) {
		return nil, fn(ctx, officialTxnWriter(o))
	})
	return err
}

// officialTxnWriter writes with the transaction's context, which carries
// the official driver's session.
type officialTxnWriter struct{ c *mongo.Client }

func (w officialTxnWriter) Insert(ctx context.Context, db, coll string, doc bson.D) error {
	_, err := w.c.Database(db).Collection(coll).InsertOne(ctx, doc)
	return err
}

func (w officialTxnWriter) Inc(ctx context.Context, db, coll string, filter bson.D) error {
	_, err := w.c.Database(db).Collection(coll).UpdateOne(ctx, filter,
		bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: int64(1)}}}}, options.UpdateOne().SetUpsert(true))
	return err
}
