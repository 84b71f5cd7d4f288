package optimistic_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/mongosim"
	"github.com/sturdy-go/sturdy/optimistic"
)

type Page struct {
	ID      string `bson:"_id"`
	Version int64  `bson:"version"`
	Title   string `bson:"title"`
	Owner   string `bson:"owner"` // create-only
	Views   int    `bson:"views"`
}

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

	pages := optimistic.New(client.Database("cms").Collection("pages"),
		&optimistic.Options{CreateOnly: []string{"owner"}, CreatedField: "created", ModifiedField: "modified"})

	// Create (version 0 → 1) and update (1 → 2) go through the same upsert.
	p := &Page{ID: "home", Title: "Welcome", Owner: "ann"}
	if _, err := pages.Save(ctx, p); err != nil {
		log.Fatal(err)
	}
	stale := *p // a second editor read version 1 too
	p.Title = "Welcome home"
	if _, err := pages.Save(ctx, p); err != nil {
		log.Fatal(err)
	}
	stale.Title = "Hello"
	_, err = pages.Save(ctx, &stale)
	fmt.Println(errors.Is(err, optimistic.ErrConflict))

	// Load-modify-save, retried on conflict.
	res, err := optimistic.Modify(ctx, pages, "home", func(p *Page) error {
		p.Views++
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Doc.Title, res.Doc.Owner, res.Doc.Views, res.Version)
	// Output:
	// true
	// Welcome home ann 1 3
}
