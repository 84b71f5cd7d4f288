package main

import (
	"context"
	"strings"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/sturdy-go/sturdy/adapt"
	"github.com/sturdy-go/sturdy/adapt/mongov2"
	"github.com/sturdy-go/sturdy/internal/soak"
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
