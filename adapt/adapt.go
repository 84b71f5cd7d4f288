package adapt

import (
	"context"

	"github.com/sturdy-go/sturdy"
)

// Collection is the part of *sturdy.Collection that once and optimistic
// use. An implementation over another driver must return errors that
// sturdy's classification understands (sturdy.CommandError,
// sturdy.WriteException, sturdy.NetworkError, sturdy.ServerSelectionError,
// sturdy.ErrNoDocuments), because the patterns decide on retries and
// outcomes from them.
type Collection interface {
	InsertOne(ctx context.Context, doc any, opts ...*sturdy.InsertOneOptions) (*sturdy.InsertOneResult, error)
	UpdateOne(ctx context.Context, filter, update any, opts ...*sturdy.UpdateOptions) (*sturdy.UpdateResult, error)
	UpdateMany(ctx context.Context, filter, update any, opts ...*sturdy.UpdateOptions) (*sturdy.UpdateResult, error)
	ReplaceOne(ctx context.Context, filter, replacement any, opts ...*sturdy.ReplaceOptions) (*sturdy.UpdateResult, error)
	DeleteOne(ctx context.Context, filter any, opts ...*sturdy.DeleteOptions) (*sturdy.DeleteResult, error)
	DeleteMany(ctx context.Context, filter any, opts ...*sturdy.DeleteOptions) (*sturdy.DeleteResult, error)
	FindOne(ctx context.Context, filter any, opts ...*sturdy.FindOneOptions) *sturdy.SingleResult
	Find(ctx context.Context, filter any, opts ...*sturdy.FindOptions) (*sturdy.Cursor, error)
}

var _ Collection = (*sturdy.Collection)(nil)
