package spectest

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
)

// databaseOperations are the operations on a database entity.
var databaseOperations = opTable[*databaseEntity]{
	"aggregate":             dbAggregate,
	"runCommand":            dbRunCommand,
	"listCollectionNames":   dbListCollectionNames,
	"listCollections":       dbListCollections,
	"listCollectionObjects": dbListCollectionObjects,
	"dropCollection":        dbDropCollection,
	"createCollection":      dbCreateCollection,
	"modifyCollection":      dbModifyCollection,
	"drop":                  dbDrop,
	"createChangeStream":    dbWatch,
	"runCursorCommand":      dbRunCursorCommand,
	"createCommandCursor":   dbCreateCommandCursor,
}

func dbAggregate(ctx context.Context, e *databaseEntity, a *args) (opResult, error) {
	return aggregate(ctx, a, e.db.Aggregate)
}

func dbWatch(ctx context.Context, e *databaseEntity, a *args) (opResult, error) {
	return createChangeStream(ctx, a, e.db.Watch)
}

func dbRunCommand(ctx context.Context, e *databaseEntity, a *args) (opResult, error) {
	cmd, err := a.doc("command")
	if err != nil {
		return opResult{}, err
	}
	a.str("commandName")
	o := &sturdy.RunCommandOptions{}
	if o.ReadPreference, err = a.readPreference(); err != nil {
		return opResult{}, err
	}
	if o.Session, err = a.session(); err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) {
		reply, err := e.db.RunCommand(ctx, cmd, o)
		if err != nil {
			return opResult{}, err
		}
		return opResult{v: bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: reply}}, nil
	})
}

func dbListCollectionNames(ctx context.Context, e *databaseEntity, a *args) (opResult, error) {
	f, o, err := listCollectionsArgs(a)
	if err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) {
		return valueResult(e.db.ListCollectionNames(ctx, f, o))
	})
}

func dbListCollections(ctx context.Context, e *databaseEntity, a *args) (opResult, error) {
	f, o, err := listCollectionsArgs(a)
	if err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) {
		cur, err := e.db.ListCollections(ctx, f, o)
		return cursorResult(ctx, cur, err)
	})
}

func dbListCollectionObjects(ctx context.Context, e *databaseEntity, a *args) (opResult, error) {
	f, o, err := listCollectionsArgs(a)
	if err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) {
		specs, err := e.db.ListCollectionSpecifications(ctx, f, o)
		if err != nil {
			return opResult{}, err
		}
		docs := bson.A{}
		for _, sp := range specs {
			docs = append(docs, sp.Raw)
		}
		return iterableValue(docs)
	})
}

func dbDropCollection(ctx context.Context, e *databaseEntity, a *args) (opResult, error) {
	name := a.str("collection")
	s, err := a.session()
	if err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) {
		return opResult{}, e.db.Collection(name).Drop(ctx, &sturdy.DropCollectionOptions{Session: s})
	})
}

// dbCreateCollection's result is the new collection, for
// saveResultAsEntity.
func dbCreateCollection(ctx context.Context, e *databaseEntity, a *args) (opResult, error) {
	name := a.str("collection")
	o, err := createCollectionOptions(a)
	if err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) {
		if err := e.db.CreateCollection(ctx, name, o); err != nil {
			return opResult{}, err
		}
		return opResult{entity: &collectionEntity{client: e.client, coll: e.db.Collection(name)}}, nil
	})
}

// dbModifyCollection is the collMod command: sturdy has no helper for it,
// so it runs as a command with the test's options.
func dbModifyCollection(ctx context.Context, e *databaseEntity, a *args) (opResult, error) {
	cmd := bson.D{{Key: "collMod", Value: a.str("collection")}}
	elems, _ := a.d.Elements()
	for _, el := range elems {
		switch k := el.Key(); k {
		case "collection", "session":
		case "validator", "validationLevel", "validationAction", "index", "changeStreamPreAndPostImages",
			"expireAfterSeconds", "viewOn", "pipeline":
			v, _ := a.get(k)
			cmd = append(cmd, bson.E{Key: k, Value: native(v)})
		}
	}
	o := &sturdy.RunCommandOptions{}
	var err error
	if o.Session, err = a.session(); err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) {
		_, err := e.db.RunCommand(ctx, cmd, o)
		return opResult{}, err
	})
}

func dbDrop(ctx context.Context, e *databaseEntity, a *args) (opResult, error) {
	s, err := a.session()
	if err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) { return opResult{}, e.db.Drop(ctx, &sturdy.DropDatabaseOptions{Session: s}) })
}

// dbRunCursorCommand runs a cursor command and iterates it to the end.
func dbRunCursorCommand(ctx context.Context, e *databaseEntity, a *args) (opResult, error) {
	return cursorCommand(ctx, e.db, a, false)
}

// dbCreateCommandCursor runs a cursor command and saves the cursor.
func dbCreateCommandCursor(ctx context.Context, e *databaseEntity, a *args) (opResult, error) {
	return cursorCommand(ctx, e.db, a, true)
}

// cursorCommand runs a cursor command: iterated to the end or, if keep,
// kept as a cursor entity.
func cursorCommand(ctx context.Context, db *sturdy.Database, a *args, keep bool) (opResult, error) {
	cmd, err := a.doc("command")
	if err != nil {
		return opResult{}, err
	}
	if cmd == nil {
		return opResult{}, &runnerError{fmt.Errorf("%s needs a command", a.op)}
	}
	a.str("commandName") // the command's first key says it
	// The initial command carries tailable/awaitData itself; the cursor
	// type says how the cursor's timeout and Next behave.
	ct, err := cursorType(a)
	if err != nil {
		return opResult{}, err
	}
	o := &sturdy.RunCursorCommandOptions{BatchSize: int32(a.int64("batchSize")), MaxAwaitTime: a.maxTime(),
		Comment: a.any("comment"), TimeoutMode: sturdy.TimeoutMode(a.str("timeoutMode")), CursorType: ct}
	if o.ReadPreference, err = a.readPreference(); err != nil {
		return opResult{}, err
	}
	if o.Session, err = a.session(); err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) {
		cur, err := db.RunCursorCommand(ctx, cmd, o)
		if !keep || err != nil {
			return cursorResult(ctx, cur, err)
		}
		return a.tr.keepEntity(ctx, "$cursor", &cursorEntity{cur: cur})
	})
}

// listCollectionsArgs reads the arguments of the listCollections operations.
func listCollectionsArgs(a *args) (any, *sturdy.ListCollectionsOptions, error) {
	f, err := a.filter()
	if err != nil {
		return nil, nil, err
	}
	o := &sturdy.ListCollectionsOptions{AuthorizedCollections: a.boolPtr("authorizedCollections"),
		BatchSize: int32(a.int64("batchSize")), Comment: a.any("comment"), TimeoutMode: sturdy.TimeoutMode(a.str("timeoutMode"))}
	if a.d.Lookup("nameOnly").Type != 0 && a.op != "listCollectionNames" {
		o.NameOnly = a.boolPtr("nameOnly")
	}
	if o.Session, err = a.session(); err != nil {
		return nil, nil, err
	}
	return f, o, nil
}

// createCollectionOptions reads createCollection's arguments.
func createCollectionOptions(a *args) (*sturdy.CreateCollectionOptions, error) {
	o := &sturdy.CreateCollectionOptions{Capped: a.boolPtr("capped"), ViewOn: a.str("viewOn"),
		ValidationLevel: a.str("validationLevel"), ValidationAction: a.str("validationAction"), Validator: a.any("validator"),
		TimeSeries: a.any("timeseries"), ClusteredIndex: a.any("clusteredIndex"),
		ChangeStreamPreAndPostImages: a.any("changeStreamPreAndPostImages"), IndexOptionDefaults: a.any("indexOptionDefaults"),
		StorageEngine: a.any("storageEngine"), Comment: a.any("comment")}
	for key, dst := range map[string]**int64{"size": &o.SizeInBytes, "max": &o.MaxDocuments, "expireAfterSeconds": &o.ExpireAfterSeconds} {
		if v, ok := a.get(key); ok {
			n, _ := asInt(v)
			*dst = &n
		}
	}
	if a.has("pipeline") {
		p, err := a.pipeline()
		if err != nil {
			return nil, err
		}
		o.Pipeline = p
	}
	var err error
	if o.Collation, o.Session, err = a.collationAndSession(); err != nil {
		return nil, err
	}
	return o, nil
}
