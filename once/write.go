package once

import (
	"context"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
)

// InsertResult is the result of InsertOne.
type InsertResult struct {
	// InsertedID is the document's _id: the caller's, or a generated
	// ObjectID.
	InsertedID any
	// Retried is true when the first attempt failed with a transient error
	// and the insert was sent again.
	Retried bool
	// ReplyLost is true when the retry hit a duplicate key on _id: the first
	// attempt had inserted the document and only its reply was lost.
	ReplyLost bool
}

// InsertOne inserts doc exactly once. A document without an _id gets a
// client-generated ObjectID first, so both attempts carry the same _id. On a
// transient error the insert is retried once; if the retry fails with a
// duplicate key on the _id index, the first attempt succeeded and InsertOne
// reports success (ReplyLost). A duplicate key on the first attempt (the _id
// was already taken) or on any other unique index is a *DuplicateKeyError:
// with other unique indexes, a clash there is a real conflict, perhaps a bug.
//
// A caller-supplied _id must be unique to this document: if another writer
// could insert the same _id between the two attempts, its insert would be
// mistaken for the first attempt. Generated ObjectIDs cannot collide.
func (c *Collection) InsertOne(ctx context.Context, doc any, opts ...*sturdy.InsertOneOptions) (*InsertResult, error) {
	raw, id, err := withID(doc)
	if err != nil {
		return nil, err
	}
	res := &InsertResult{InsertedID: id}
	_, err = c.coll.InsertOne(ctx, raw, opts...)
	if err == nil {
		return res, nil
	}
	if ix, dup := sturdy.DuplicateKeyIndex(err); dup {
		return nil, &DuplicateKeyError{Index: ix, ID: id, Err: err}
	}
	if !c.retryOn(err) || ctx.Err() != nil {
		return nil, err
	}
	res.Retried = true
	_, err = c.coll.InsertOne(ctx, raw, opts...)
	if err == nil {
		return res, nil
	}
	if ix, dup := sturdy.DuplicateKeyIndex(err); dup {
		if ix == "_id_" {
			res.ReplyLost = true
			return res, nil
		}
		return nil, &DuplicateKeyError{Index: ix, ID: id, Err: err}
	}
	return nil, err
}

// withID marshals doc and makes sure it has an _id, generating an ObjectID
// (placed first, as the server would) when it has none.
func withID(doc any) (bson.Raw, any, error) {
	var raw bson.Raw
	switch d := doc.(type) {
	case nil:
		return nil, nil, sturdy.ErrNilDocument
	case bson.Raw:
		raw = d
	default:
		b, err := bson.Marshal(doc)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: cannot marshal %T: %v", sturdy.ErrInvalidArgument, doc, err)
		}
		raw = b
	}
	if err := raw.Validate(); err != nil {
		return nil, nil, fmt.Errorf("%w: invalid document: %v", sturdy.ErrInvalidArgument, err)
	}
	if v, err := raw.LookupErr("_id"); err == nil {
		var id any
		if err := v.Unmarshal(&id); err != nil {
			return nil, nil, fmt.Errorf("%w: cannot decode _id: %v", sturdy.ErrInvalidArgument, err)
		}
		return raw, id, nil
	}
	id := bson.NewObjectID()
	elems, _ := raw.Elements()
	out := bson.D{{Key: "_id", Value: id}}
	for _, e := range elems {
		out = append(out, bson.E{Key: e.Key(), Value: e.Value()})
	}
	b, err := bson.Marshal(out)
	if err != nil {
		return nil, nil, err
	}
	return b, id, nil
}

// WriteResult is the result of a retried delete or update.
type WriteResult struct {
	// Retried is true when the first attempt failed with a transient error
	// and the operation was sent again. The counts below are then the
	// retry's: a retry after a lost reply matches what the first attempt
	// left, so zero does not mean the operation had nothing to do.
	Retried       bool
	MatchedCount  int64
	ModifiedCount int64
	DeletedCount  int64
	UpsertedID    any
}

// DeleteOne deletes the document matching filter, retrying once on a
// transient error. Give a filter on a unique key (such as _id): deleting it
// twice is the same as deleting it once, because the second delete matches
// nothing. With a non-unique filter a retry could delete a second document.
//
// As with any retry, another process may insert a matching document between
// the two attempts; the race is no worse than without the retry.
func (c *Collection) DeleteOne(ctx context.Context, filter any, opts ...*sturdy.DeleteOptions) (*WriteResult, error) {
	return c.delete(ctx, filter, false, opts)
}

// DeleteMany deletes every document matching filter, retrying once on a
// transient error: whether it runs once or twice, every matching document
// is gone.
func (c *Collection) DeleteMany(ctx context.Context, filter any, opts ...*sturdy.DeleteOptions) (*WriteResult, error) {
	return c.delete(ctx, filter, true, opts)
}

func (c *Collection) delete(ctx context.Context, filter any, many bool, opts []*sturdy.DeleteOptions) (*WriteResult, error) {
	var res *sturdy.DeleteResult
	retried, err := retry(ctx, c.retryOn, func(ctx context.Context) (err error) {
		if many {
			res, err = c.coll.DeleteMany(ctx, filter, opts...)
		} else {
			res, err = c.coll.DeleteOne(ctx, filter, opts...)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return &WriteResult{Retried: retried, DeletedCount: res.DeletedCount}, nil
}

// idempotentOperators leave the same document whether applied once or
// twice. $inc, $mul, $push, $pop, $bit, $rename and $currentDate do not.
var idempotentOperators = map[string]bool{
	"$set": true, "$unset": true, "$setOnInsert": true, "$min": true, "$max": true,
	"$addToSet": true, "$pull": true, "$pullAll": true,
}

// checkIdempotent accepts an update document made only of idempotent
// operators. Pipelines are rejected: their stages can compute from the
// document's own fields, which a retry would do again.
func checkIdempotent(update any) error {
	if update == nil {
		return sturdy.ErrNilDocument
	}
	b, err := bson.Marshal(bson.D{{Key: "u", Value: update}})
	if err != nil {
		return fmt.Errorf("%w: cannot marshal update %T: %v", sturdy.ErrInvalidArgument, update, err)
	}
	v := bson.Raw(b).Lookup("u")
	doc, ok := v.DocumentOK()
	if !ok {
		return fmt.Errorf("%w: pipeline updates cannot be checked; use the sturdy collection directly", ErrNotIdempotent)
	}
	elems, err := doc.Elements()
	if err != nil || len(elems) == 0 {
		return fmt.Errorf("%w: update document must not be empty", sturdy.ErrInvalidArgument)
	}
	for _, e := range elems {
		k := e.Key()
		if !strings.HasPrefix(k, "$") {
			return fmt.Errorf("%w: update document must contain only $-operators (found %q); use ReplaceOne", sturdy.ErrInvalidArgument, k)
		}
		if !idempotentOperators[k] {
			return fmt.Errorf("%w: %s applies again on a retry (use Increment for $inc)", ErrNotIdempotent, k)
		}
	}
	return nil
}

// UpdateOne applies an idempotent update to the document matching filter,
// retrying once on a transient error. Setting today's "sunny" field to true
// twice is as good as setting it once; incrementing a counter twice is not,
// so update must use only idempotent operators ($set, $unset, $setOnInsert,
// $min, $max, $addToSet, $pull, $pullAll) or ErrNotIdempotent is returned.
//
// The filter must keep matching the same document after the update: select
// it by a unique key, not by a field the update changes, or the retry could
// update a second document.
func (c *Collection) UpdateOne(ctx context.Context, filter, update any, opts ...*sturdy.UpdateOptions) (*WriteResult, error) {
	return c.update(ctx, filter, update, false, opts)
}

// UpdateMany is UpdateOne for every matching document. A retry may also
// update documents that began to match between the attempts, which is no
// worse than without the retry.
func (c *Collection) UpdateMany(ctx context.Context, filter, update any, opts ...*sturdy.UpdateOptions) (*WriteResult, error) {
	return c.update(ctx, filter, update, true, opts)
}

func (c *Collection) update(ctx context.Context, filter, update any, many bool, opts []*sturdy.UpdateOptions) (*WriteResult, error) {
	if err := checkIdempotent(update); err != nil {
		return nil, err
	}
	var res *sturdy.UpdateResult
	retried, err := retry(ctx, c.retryOn, func(ctx context.Context) (err error) {
		if many {
			res, err = c.coll.UpdateMany(ctx, filter, update, opts...)
		} else {
			res, err = c.coll.UpdateOne(ctx, filter, update, opts...)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return &WriteResult{Retried: retried, MatchedCount: res.MatchedCount, ModifiedCount: res.ModifiedCount, UpsertedID: res.UpsertedID}, nil
}

// ReplaceOne replaces the document matching filter, retrying once on a
// transient error. A replacement is idempotent: the document ends up the
// same however often it is written. The filter rule of UpdateOne applies.
func (c *Collection) ReplaceOne(ctx context.Context, filter, replacement any, opts ...*sturdy.ReplaceOptions) (*WriteResult, error) {
	var res *sturdy.UpdateResult
	retried, err := retry(ctx, c.retryOn, func(ctx context.Context) (err error) {
		res, err = c.coll.ReplaceOne(ctx, filter, replacement, opts...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &WriteResult{Retried: retried, MatchedCount: res.MatchedCount, ModifiedCount: res.ModifiedCount, UpsertedID: res.UpsertedID}, nil
}
