package spectest

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
)

// clientOperations are the operations on a client entity.
var clientOperations = opTable[*clientEntity]{
	"close":               clientClose,
	"dropDatabase":        clientDropDatabase,
	"clientBulkWrite":     clientBulkWrite,
	"listDatabaseNames":   clientListDatabaseNames,
	"listDatabases":       clientListDatabases,
	"listDatabaseObjects": clientListDatabaseObjects,
	"createChangeStream":  clientWatch,
}

// clientClose disconnects the client; its events stay recorded for
// expectEvents (the entity's own cleanup then finds it closed).
func clientClose(ctx context.Context, e *clientEntity, a *args) (opResult, error) {
	return checked(a, func() (opResult, error) { return opResult{}, e.client.Disconnect(ctx) })
}

func clientWatch(ctx context.Context, e *clientEntity, a *args) (opResult, error) {
	return createChangeStream(ctx, a, e.client.Watch)
}

func clientDropDatabase(ctx context.Context, e *clientEntity, a *args) (opResult, error) {
	name := a.str("database")
	s, err := a.session()
	if err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) {
		return opResult{}, e.client.Database(name).Drop(ctx, &sturdy.DropDatabaseOptions{Session: s})
	})
}

func clientBulkWrite(ctx context.Context, e *clientEntity, a *args) (opResult, error) {
	models, err := clientWriteModels(a)
	if err != nil {
		return opResult{}, err
	}
	o := &sturdy.ClientBulkWriteOptions{Ordered: a.boolPtr("ordered"), VerboseResults: a.boolean("verboseResults"),
		BypassDocumentValidation: a.boolPtr("bypassDocumentValidation"), Let: a.any("let"), Comment: a.any("comment")}
	if v, ok := a.get("writeConcern"); ok {
		if o.WriteConcern, err = writeConcern(v); err != nil {
			return opResult{}, err
		}
	}
	if o.Session, err = a.session(); err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) {
		r, err := e.client.BulkWrite(ctx, models, o)
		if err != nil {
			return opResult{}, err
		}
		return ackValue(r.Acknowledged, func() any { return clientBulkResultDoc(r) })
	})
}

func clientListDatabaseNames(ctx context.Context, e *clientEntity, a *args) (opResult, error) {
	f, o, err := listDatabasesArgs(a)
	if err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) {
		return valueResult(e.client.ListDatabaseNames(ctx, f, o))
	})
}

// clientListDatabases returns the server's database documents as they came.
func clientListDatabases(ctx context.Context, e *clientEntity, a *args) (opResult, error) {
	return listDatabases(ctx, e.client, a, func(res sturdy.ListDatabasesResult) bson.A {
		docs := bson.A{}
		if arr, ok := res.Raw.Lookup("databases").ArrayOK(); ok {
			vals, _ := arr.Values()
			for _, v := range vals {
				docs = append(docs, v)
			}
		}
		return docs
	})
}

// clientListDatabaseObjects returns the decoded DatabaseSpecifications.
func clientListDatabaseObjects(ctx context.Context, e *clientEntity, a *args) (opResult, error) {
	return listDatabases(ctx, e.client, a, func(res sturdy.ListDatabasesResult) bson.A {
		docs := bson.A{}
		for _, d := range res.Databases {
			docs = append(docs, bson.D{{Key: "name", Value: d.Name}, {Key: "sizeOnDisk", Value: d.SizeOnDisk}, {Key: "empty", Value: d.Empty}})
		}
		return docs
	})
}

// listDatabases runs listDatabases and returns the databases conv picks
// from the reply.
func listDatabases(ctx context.Context, c *sturdy.Client, a *args, conv func(sturdy.ListDatabasesResult) bson.A) (opResult, error) {
	f, o, err := listDatabasesArgs(a)
	if err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) {
		res, err := c.ListDatabases(ctx, f, o)
		if err != nil {
			return opResult{}, err
		}
		return iterableValue(conv(res))
	})
}

// listDatabasesArgs reads the arguments of the listDatabases operations.
func listDatabasesArgs(a *args) (any, *sturdy.ListDatabasesOptions, error) {
	f, err := a.filter()
	if err != nil {
		return nil, nil, err
	}
	o := &sturdy.ListDatabasesOptions{AuthorizedDatabases: a.boolPtr("authorizedDatabases"), Comment: a.any("comment")}
	if a.d.Lookup("nameOnly").Type != 0 && a.op != "listDatabaseNames" {
		o.NameOnly = a.boolPtr("nameOnly")
	}
	if o.Session, err = a.session(); err != nil {
		return nil, nil, err
	}
	return f, o, nil
}
