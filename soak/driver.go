package soak

import (
	"context"
	"strings"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/adapt"
)

// Client is what the workload runs through: sturdy's client, or another
// driver's collections through adapt (adapt/mongov2 for the official Go
// driver).
type Client interface {
	// Collection returns a handle to collection name of database db.
	Collection(db, name string) adapt.Collection
	Disconnect(ctx context.Context) error
}

// Driver is a client library the workload can run through.
type Driver struct {
	// Name is what the report calls it ("sturdy", "official").
	Name string
	// Connect connects a client to uri with the library's default
	// options.
	Connect func(ctx context.Context, uri string) (Client, error)
	// Owns reports whether a goroutine (its stack, as runtime.Stack
	// prints it) belongs to the library, for the count of goroutines left
	// after Disconnect.
	Owns func(stack string) bool
}

// Sturdy is the default driver: sturdy's own client.
var Sturdy = Driver{
	Name: "sturdy",
	Connect: func(ctx context.Context, uri string) (Client, error) {
		c, err := sturdy.Connect(ctx, uri)
		if err != nil {
			return nil, err
		}
		return sturdyClient{c}, nil
	},
	Owns: func(stack string) bool {
		if !strings.Contains(stack, "github.com/sturdy-go/sturdy") {
			return false
		}
		// An embedded mongosim runs in the same process; this package's
		// goroutines and the command's are not the client's either.
		for _, p := range []string{"sturdy-go/sturdy/mongosim", "sturdy-go/sturdy/blackpipe", "sturdy-go/sturdy/faultproxy", "sturdy-go/sturdy/soak", "sturdy-go/sturdy/cmd/"} {
			if strings.Contains(stack, p) {
				return false
			}
		}
		return true
	},
}

type sturdyClient struct{ c *sturdy.Client }

func (s sturdyClient) Collection(db, name string) adapt.Collection {
	return s.c.Database(db).Collection(name)
}

func (s sturdyClient) Disconnect(ctx context.Context) error { return s.c.Disconnect(ctx) }
