package spectest

import (
	"context"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
)

// collectionOperations are the operations on a collection entity.
var collectionOperations = opTable[*collectionEntity]{
	"aggregate":              collAggregate,
	"bulkWrite":              collBulkWrite,
	"countDocuments":         collCountDocuments,
	"estimatedDocumentCount": collEstimatedDocumentCount,
	"distinct":               collDistinct,
	"deleteOne":              collDelete,
	"deleteMany":             collDelete,
	"find":                   collFind,
	"findOne":                collFindOne,
	"findOneAndDelete":       collFindOneAndDelete,
	"findOneAndReplace":      collFindOneAndReplace,
	"findOneAndUpdate":       collFindOneAndUpdate,
	"insertOne":              collInsertOne,
	"insertMany":             collInsertMany,
	"replaceOne":             collReplaceOne,
	"updateOne":              collUpdate,
	"updateMany":             collUpdate,
	"createIndex":            collCreateIndex,
	"dropIndex":              collDropIndex,
	"dropIndexes":            collDropIndexes,
	"listIndexes":            collListIndexes,
	"listIndexNames":         collListIndexNames,
	"drop":                   collDrop,
	"rename":                 collRename,
	"createChangeStream":     collWatch,
	"createFindCursor":       collCreateFindCursor,
}

func collAggregate(ctx context.Context, e *collectionEntity, a *args) (opResult, error) {
	return aggregate(ctx, a, e.coll.Aggregate)
}

func collWatch(ctx context.Context, e *collectionEntity, a *args) (opResult, error) {
	return createChangeStream(ctx, a, e.coll.Watch)
}

func collBulkWrite(ctx context.Context, e *collectionEntity, a *args) (opResult, error) {
	models, err := writeModels(a)
	if err != nil {
		return opResult{}, err
	}
	o := &sturdy.BulkWriteOptions{Ordered: a.boolPtr("ordered"), BypassDocumentValidation: a.boolPtr("bypassDocumentValidation"),
		Let: a.any("let"), Comment: a.any("comment")}
	if o.Session, err = a.session(); err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) {
		r, err := e.coll.BulkWrite(ctx, models, o)
		if err != nil {
			return opResult{}, err
		}
		return ackValue(r.Acknowledged, func() any { return bulkResultDoc(r) })
	})
}

func collCountDocuments(ctx context.Context, e *collectionEntity, a *args) (opResult, error) {
	f, err := a.filter()
	if err != nil {
		return opResult{}, err
	}
	o := &sturdy.CountOptions{Skip: a.int64("skip"), Limit: a.int64("limit"), Hint: a.any("hint"), Comment: a.any("comment"), MaxTime: a.maxTime()}
	if o.Collation, o.Session, err = a.collationAndSession(); err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) {
		return valueResult(e.coll.CountDocuments(ctx, f, o))
	})
}

func collEstimatedDocumentCount(ctx context.Context, e *collectionEntity, a *args) (opResult, error) {
	o := &sturdy.EstimatedDocumentCountOptions{Comment: a.any("comment"), MaxTime: a.maxTime()}
	var err error
	if o.Session, err = a.session(); err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) {
		return valueResult(e.coll.EstimatedDocumentCount(ctx, o))
	})
}

func collDistinct(ctx context.Context, e *collectionEntity, a *args) (opResult, error) {
	f, err := a.filter()
	if err != nil {
		return opResult{}, err
	}
	field := a.str("fieldName")
	o := &sturdy.DistinctOptions{Hint: a.any("hint"), Comment: a.any("comment"), MaxTime: a.maxTime()}
	if o.Collation, o.Session, err = a.collationAndSession(); err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) {
		vals, err := e.coll.Distinct(ctx, field, f, o)
		if err != nil {
			return opResult{}, err
		}
		return value(bson.A(append([]any{}, vals...)))
	})
}

// collDelete is deleteOne and deleteMany.
func collDelete(ctx context.Context, e *collectionEntity, a *args) (opResult, error) {
	f, err := a.filter()
	if err != nil {
		return opResult{}, err
	}
	o := &sturdy.DeleteOptions{Hint: a.any("hint"), Let: a.any("let"), Comment: a.any("comment")}
	if o.Collation, o.Session, err = a.collationAndSession(); err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) {
		if a.op == "deleteMany" {
			return deleteResult(e.coll.DeleteMany(ctx, f, o))
		}
		return deleteResult(e.coll.DeleteOne(ctx, f, o))
	})
}

// collUpdate is updateOne and updateMany.
func collUpdate(ctx context.Context, e *collectionEntity, a *args) (opResult, error) {
	f, err := a.filter()
	if err != nil {
		return opResult{}, err
	}
	upd := a.any("update")
	o := &sturdy.UpdateOptions{Upsert: a.boolean("upsert"), Hint: a.any("hint"), Let: a.any("let"), Sort: a.any("sort"),
		Comment: a.any("comment"), BypassDocumentValidation: a.boolPtr("bypassDocumentValidation")}
	if o.ArrayFilters, err = a.arrayFilters(); err != nil {
		return opResult{}, err
	}
	if o.Collation, o.Session, err = a.collationAndSession(); err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) {
		if a.op == "updateMany" {
			return updateResult(e.coll.UpdateMany(ctx, f, upd, o))
		}
		return updateResult(e.coll.UpdateOne(ctx, f, upd, o))
	})
}

func collFind(ctx context.Context, e *collectionEntity, a *args) (opResult, error) {
	f, o, err := findArgs(a)
	if err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) {
		cur, err := e.coll.Find(ctx, f, o)
		return cursorResult(ctx, cur, err)
	})
}

// findOneUnsupported are find arguments findOne has no option for.
var findOneUnsupported = []string{"limit", "batchSize", "min", "max", "allowDiskUse", "allowPartialResults", "noCursorTimeout"}

func collFindOne(ctx context.Context, e *collectionEntity, a *args) (opResult, error) {
	f, fo, err := findArgs(a)
	if err != nil {
		return opResult{}, err
	}
	o := &sturdy.FindOneOptions{Sort: fo.Sort, Projection: fo.Projection, Skip: fo.Skip, Hint: fo.Hint, Collation: fo.Collation,
		Let: fo.Let, Comment: fo.Comment, MaxTime: fo.MaxTime, ReturnKey: fo.ReturnKey, ShowRecordID: fo.ShowRecordID, Session: fo.Session}
	for _, k := range findOneUnsupported {
		if _, ok := a.d.LookupErr(k); ok == nil {
			return opResult{}, unsupportedf("argument %s of findOne", k)
		}
	}
	return checked(a, func() (opResult, error) { return singleResult(e.coll.FindOne(ctx, f, o)) })
}

func collFindOneAndDelete(ctx context.Context, e *collectionEntity, a *args) (opResult, error) {
	f, err := a.filter()
	if err != nil {
		return opResult{}, err
	}
	o := &sturdy.FindOneAndDeleteOptions{Sort: a.any("sort"), Projection: a.any("projection"), Hint: a.any("hint"),
		Let: a.any("let"), Comment: a.any("comment"), MaxTime: a.maxTime()}
	if o.Collation, o.Session, err = a.collationAndSession(); err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) { return singleResult(e.coll.FindOneAndDelete(ctx, f, o)) })
}

func collFindOneAndReplace(ctx context.Context, e *collectionEntity, a *args) (opResult, error) {
	f, err := a.filter()
	if err != nil {
		return opResult{}, err
	}
	repl := a.any("replacement")
	o := &sturdy.FindOneAndReplaceOptions{Upsert: a.boolean("upsert"), Sort: a.any("sort"), Projection: a.any("projection"),
		Hint: a.any("hint"), Let: a.any("let"), Comment: a.any("comment"), MaxTime: a.maxTime(),
		BypassDocumentValidation: a.boolPtr("bypassDocumentValidation")}
	if o.ReturnDocument, err = returnDocument(a); err != nil {
		return opResult{}, err
	}
	if o.Collation, o.Session, err = a.collationAndSession(); err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) { return singleResult(e.coll.FindOneAndReplace(ctx, f, repl, o)) })
}

func collFindOneAndUpdate(ctx context.Context, e *collectionEntity, a *args) (opResult, error) {
	f, err := a.filter()
	if err != nil {
		return opResult{}, err
	}
	upd := a.any("update")
	o := &sturdy.FindOneAndUpdateOptions{Upsert: a.boolean("upsert"), Sort: a.any("sort"), Projection: a.any("projection"),
		Hint: a.any("hint"), Let: a.any("let"), Comment: a.any("comment"), MaxTime: a.maxTime(),
		BypassDocumentValidation: a.boolPtr("bypassDocumentValidation")}
	if o.ArrayFilters, err = a.arrayFilters(); err != nil {
		return opResult{}, err
	}
	if o.ReturnDocument, err = returnDocument(a); err != nil {
		return opResult{}, err
	}
	if o.Collation, o.Session, err = a.collationAndSession(); err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) { return singleResult(e.coll.FindOneAndUpdate(ctx, f, upd, o)) })
}

func collInsertOne(ctx context.Context, e *collectionEntity, a *args) (opResult, error) {
	doc, err := a.doc("document")
	if err != nil {
		return opResult{}, err
	}
	o := &sturdy.InsertOneOptions{BypassDocumentValidation: a.boolPtr("bypassDocumentValidation"), Comment: a.any("comment")}
	if o.Session, err = a.session(); err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) {
		r, err := e.coll.InsertOne(ctx, doc, o)
		if err != nil {
			return opResult{}, err
		}
		return ackValue(r.Acknowledged, func() any { return bson.D{{Key: "insertedId", Value: r.InsertedID}} })
	})
}

func collInsertMany(ctx context.Context, e *collectionEntity, a *args) (opResult, error) {
	docs, err := a.array("documents")
	if err != nil {
		return opResult{}, err
	}
	o := &sturdy.InsertManyOptions{Ordered: a.boolPtr("ordered"), BypassDocumentValidation: a.boolPtr("bypassDocumentValidation"), Comment: a.any("comment")}
	if o.Session, err = a.session(); err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) {
		r, err := e.coll.InsertMany(ctx, []any(docs), o)
		if err != nil {
			return opResult{}, err
		}
		return ackValue(r.Acknowledged, func() any {
			ids := bson.D{}
			for i, id := range r.InsertedIDs {
				ids = append(ids, bson.E{Key: strconv.Itoa(i), Value: id})
			}
			return bson.D{{Key: "insertedIds", Value: ids}}
		})
	})
}

func collReplaceOne(ctx context.Context, e *collectionEntity, a *args) (opResult, error) {
	f, err := a.filter()
	if err != nil {
		return opResult{}, err
	}
	repl := a.any("replacement")
	o := &sturdy.ReplaceOptions{Upsert: a.boolean("upsert"), Hint: a.any("hint"), Let: a.any("let"), Sort: a.any("sort"),
		Comment: a.any("comment"), BypassDocumentValidation: a.boolPtr("bypassDocumentValidation")}
	if o.Collation, o.Session, err = a.collationAndSession(); err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) { return updateResult(e.coll.ReplaceOne(ctx, f, repl, o)) })
}

func collCreateIndex(ctx context.Context, e *collectionEntity, a *args) (opResult, error) {
	keys, err := a.doc("keys")
	if err != nil {
		return opResult{}, err
	}
	io := &sturdy.IndexOptions{Unique: a.boolPtr("unique"), Sparse: a.boolPtr("sparse"), Hidden: a.boolPtr("hidden"),
		PartialFilterExpression: a.any("partialFilterExpression")}
	if a.has("name") {
		n := a.str("name")
		io.Name = &n
	}
	if v, ok := a.get("expireAfterSeconds"); ok {
		n, _ := asInt(v)
		s := int32(n)
		io.ExpireAfterSeconds = &s
	}
	o := &sturdy.CreateIndexOptions{CommitQuorum: a.any("commitQuorum"), Comment: a.any("comment"), MaxTime: a.maxTime()}
	if o.Session, err = a.session(); err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) {
		return valueResult(e.coll.CreateIndex(ctx, sturdy.IndexModel{Keys: keys, Options: io}, o))
	})
}

func collDropIndex(ctx context.Context, e *collectionEntity, a *args) (opResult, error) {
	name := a.str("name")
	o, err := dropIndexOptions(a)
	if err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) { return opResult{}, e.coll.DropIndex(ctx, name, o) })
}

func collDropIndexes(ctx context.Context, e *collectionEntity, a *args) (opResult, error) {
	o, err := dropIndexOptions(a)
	if err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) { return opResult{}, e.coll.DropIndexes(ctx, o) })
}

func collListIndexes(ctx context.Context, e *collectionEntity, a *args) (opResult, error) {
	o := &sturdy.ListOptions{TimeoutMode: sturdy.TimeoutMode(a.str("timeoutMode"))}
	var err error
	if o.Session, err = a.session(); err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) {
		cur, err := e.coll.ListIndexes(ctx, o)
		return cursorResult(ctx, cur, err)
	})
}

func collListIndexNames(ctx context.Context, e *collectionEntity, a *args) (opResult, error) {
	o := &sturdy.ListOptions{}
	var err error
	if o.Session, err = a.session(); err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) {
		cur, err := e.coll.ListIndexes(ctx, o)
		if err != nil {
			return opResult{}, err
		}
		var all []bson.Raw
		if err := cur.All(ctx, &all); err != nil {
			return opResult{}, err
		}
		names := bson.A{}
		for _, d := range all {
			names = append(names, lookupString(d, "name"))
		}
		return value(names)
	})
}

func collDrop(ctx context.Context, e *collectionEntity, a *args) (opResult, error) {
	return checked(a, func() (opResult, error) { return opResult{}, e.coll.Drop(ctx) })
}

func collRename(ctx context.Context, e *collectionEntity, a *args) (opResult, error) {
	to := a.str("to")
	o := &sturdy.RenameOptions{DropTarget: a.boolean("dropTarget"), Comment: a.any("comment")}
	var err error
	if o.Session, err = a.session(); err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) { return opResult{}, e.coll.Rename(ctx, to, o) })
}

// collCreateFindCursor opens a find cursor without iterating it.
func collCreateFindCursor(ctx context.Context, e *collectionEntity, a *args) (opResult, error) {
	f, o, err := findArgs(a)
	if err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) {
		cur, err := e.coll.Find(ctx, f, o)
		if err != nil {
			return opResult{}, err
		}
		return a.tr.keepEntity(ctx, "$cursor", &cursorEntity{cur: cur})
	})
}

// findArgs reads the filter and options of find, findOne,
// createFindCursor and a bucket's find.
func findArgs(a *args) (any, *sturdy.FindOptions, error) {
	f, err := a.filter()
	if err != nil {
		return nil, nil, err
	}
	o, err := findOptions(a)
	if err != nil {
		return nil, nil, err
	}
	return f, o, nil
}
