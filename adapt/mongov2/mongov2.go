package mongov2

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/adapt"
)

// Coll is an adapt.Collection over an official driver collection.
type Coll struct {
	c *mongo.Collection
}

var _ adapt.Collection = (*Coll)(nil)

// Collection returns c as an adapt.Collection.
func Collection(c *mongo.Collection) *Coll { return &Coll{c: c} }

// Unwrap returns the official driver's collection.
func (a *Coll) Unwrap() *mongo.Collection { return a.c }

func last[T any](opts []*T) *T {
	var o *T
	for _, p := range opts {
		if p != nil {
			o = p
		}
	}
	return o
}

func noSession(s *sturdy.Session) error {
	if s != nil {
		return fmt.Errorf("%w: mongov2: a sturdy session cannot be used with the official driver (use mongo.WithSession on the context)", sturdy.ErrInvalidArgument)
	}
	return nil
}

func collation(c *sturdy.Collation) *options.Collation {
	if c == nil {
		return nil
	}
	return &options.Collation{
		Locale: c.Locale, CaseLevel: c.CaseLevel, CaseFirst: c.CaseFirst, Strength: c.Strength,
		NumericOrdering: c.NumericOrdering, Alternate: c.Alternate, MaxVariable: c.MaxVariable,
		Normalization: c.Normalization, Backwards: c.Backwards,
	}
}

// InsertOne implements adapt.Collection.
func (a *Coll) InsertOne(ctx context.Context, doc any, opts ...*sturdy.InsertOneOptions) (*sturdy.InsertOneResult, error) {
	o := options.InsertOne()
	if p := last(opts); p != nil {
		if err := noSession(p.Session); err != nil {
			return nil, err
		}
		if p.BypassDocumentValidation != nil {
			o.SetBypassDocumentValidation(*p.BypassDocumentValidation)
		}
		if p.Comment != nil {
			o.SetComment(p.Comment)
		}
	}
	r, err := a.c.InsertOne(ctx, doc, o)
	if err != nil {
		return nil, translate(err)
	}
	return &sturdy.InsertOneResult{InsertedID: r.InsertedID, Acknowledged: r.Acknowledged}, nil
}

func updateResult(r *mongo.UpdateResult) *sturdy.UpdateResult {
	return &sturdy.UpdateResult{MatchedCount: r.MatchedCount, ModifiedCount: r.ModifiedCount,
		UpsertedCount: r.UpsertedCount, UpsertedID: r.UpsertedID, Acknowledged: r.Acknowledged}
}

// writeSetter is what the official driver's update, replace and delete
// option builders share; each Set method returns its own builder type.
type writeSetter[B any] interface {
	SetCollation(*options.Collation) B
	SetHint(any) B
	SetLet(any) B
	SetComment(any) B
}

// setWrite copies the options every write shares onto o, leaving unset
// ones to the driver's defaults.
func setWrite[B writeSetter[B]](o B, c *sturdy.Collation, hint, let, comment any) {
	if c != nil {
		o.SetCollation(collation(c))
	}
	if hint != nil {
		o.SetHint(hint)
	}
	if let != nil {
		o.SetLet(let)
	}
	if comment != nil {
		o.SetComment(comment)
	}
}

// updateSetter is what the UpdateOne, UpdateMany and Replace builders share.
type updateSetter[B any] interface {
	writeSetter[B]
	SetUpsert(bool) B
	SetBypassDocumentValidation(bool) B
}

// setUpdate copies the options updates and replacements share onto o;
// ArrayFilters and Sort, which not every builder has, are the caller's.
func setUpdate[B updateSetter[B]](o B, p *sturdy.UpdateOptions) {
	o.SetUpsert(p.Upsert)
	setWrite(o, p.Collation, p.Hint, p.Let, p.Comment)
	if p.BypassDocumentValidation != nil {
		o.SetBypassDocumentValidation(*p.BypassDocumentValidation)
	}
}

// UpdateOne implements adapt.Collection.
func (a *Coll) UpdateOne(ctx context.Context, filter, update any, opts ...*sturdy.UpdateOptions) (*sturdy.UpdateResult, error) {
	o := options.UpdateOne()
	if p := last(opts); p != nil {
		if err := noSession(p.Session); err != nil {
			return nil, err
		}
		setUpdate(o, p)
		if p.ArrayFilters != nil {
			o.SetArrayFilters(p.ArrayFilters)
		}
		if p.Sort != nil {
			o.SetSort(p.Sort)
		}
	}
	r, err := a.c.UpdateOne(ctx, filter, update, o)
	if err != nil {
		return nil, translate(err)
	}
	return updateResult(r), nil
}

// UpdateMany implements adapt.Collection.
func (a *Coll) UpdateMany(ctx context.Context, filter, update any, opts ...*sturdy.UpdateOptions) (*sturdy.UpdateResult, error) {
	o := options.UpdateMany()
	if p := last(opts); p != nil {
		if err := noSession(p.Session); err != nil {
			return nil, err
		}
		if p.Sort != nil {
			return nil, fmt.Errorf("%w: Sort applies to UpdateOne only", sturdy.ErrInvalidArgument)
		}
		setUpdate(o, p)
		if p.ArrayFilters != nil {
			o.SetArrayFilters(p.ArrayFilters)
		}
	}
	r, err := a.c.UpdateMany(ctx, filter, update, o)
	if err != nil {
		return nil, translate(err)
	}
	return updateResult(r), nil
}

// ReplaceOne implements adapt.Collection.
func (a *Coll) ReplaceOne(ctx context.Context, filter, replacement any, opts ...*sturdy.ReplaceOptions) (*sturdy.UpdateResult, error) {
	o := options.Replace()
	if p := last(opts); p != nil {
		if err := noSession(p.Session); err != nil {
			return nil, err
		}
		setUpdate(o, &sturdy.UpdateOptions{Upsert: p.Upsert, Collation: p.Collation, Hint: p.Hint, Let: p.Let,
			Comment: p.Comment, BypassDocumentValidation: p.BypassDocumentValidation})
		if p.Sort != nil {
			o.SetSort(p.Sort)
		}
	}
	r, err := a.c.ReplaceOne(ctx, filter, replacement, o)
	if err != nil {
		return nil, translate(err)
	}
	return updateResult(r), nil
}

// DeleteOne implements adapt.Collection.
func (a *Coll) DeleteOne(ctx context.Context, filter any, opts ...*sturdy.DeleteOptions) (*sturdy.DeleteResult, error) {
	return a.delete(ctx, filter, false, last(opts))
}

// DeleteMany implements adapt.Collection.
func (a *Coll) DeleteMany(ctx context.Context, filter any, opts ...*sturdy.DeleteOptions) (*sturdy.DeleteResult, error) {
	return a.delete(ctx, filter, true, last(opts))
}

func (a *Coll) delete(ctx context.Context, filter any, many bool, p *sturdy.DeleteOptions) (*sturdy.DeleteResult, error) {
	var p0 sturdy.DeleteOptions
	if p != nil {
		p0 = *p
	}
	if err := noSession(p0.Session); err != nil {
		return nil, err
	}
	var (
		r   *mongo.DeleteResult
		err error
	)
	if many {
		o := options.DeleteMany()
		setWrite(o, p0.Collation, p0.Hint, p0.Let, p0.Comment)
		r, err = a.c.DeleteMany(ctx, filter, o)
	} else {
		o := options.DeleteOne()
		setWrite(o, p0.Collation, p0.Hint, p0.Let, p0.Comment)
		r, err = a.c.DeleteOne(ctx, filter, o)
	}
	if err != nil {
		return nil, translate(err)
	}
	return &sturdy.DeleteResult{DeletedCount: r.DeletedCount, Acknowledged: r.Acknowledged}, nil
}

// FindOne implements adapt.Collection.
func (a *Coll) FindOne(ctx context.Context, filter any, opts ...*sturdy.FindOneOptions) *sturdy.SingleResult {
	o := options.FindOne()
	if p := last(opts); p != nil {
		if err := noSession(p.Session); err != nil {
			return sturdy.NewSingleResult(nil, err)
		}
		if p.MaxTime != 0 || p.Let != nil {
			return sturdy.NewSingleResult(nil, fmt.Errorf("%w: mongov2: FindOne with MaxTime or Let (use a context deadline)", sturdy.ErrInvalidArgument))
		}
		if p.Sort != nil {
			o.SetSort(p.Sort)
		}
		if p.Projection != nil {
			o.SetProjection(p.Projection)
		}
		if p.Skip != 0 {
			o.SetSkip(p.Skip)
		}
		if p.Hint != nil {
			o.SetHint(p.Hint)
		}
		if p.Collation != nil {
			o.SetCollation(collation(p.Collation))
		}
		if p.Comment != nil {
			o.SetComment(p.Comment)
		}
		if p.ReturnKey {
			o.SetReturnKey(true)
		}
		if p.ShowRecordID {
			o.SetShowRecordID(true)
		}
	}
	raw, err := a.c.FindOne(ctx, filter, o).Raw()
	if err != nil {
		return sturdy.NewSingleResult(nil, translate(err))
	}
	return sturdy.NewSingleResult(raw, nil)
}

// Find implements adapt.Collection.
func (a *Coll) Find(ctx context.Context, filter any, opts ...*sturdy.FindOptions) (*sturdy.Cursor, error) {
	o := options.Find()
	if p := last(opts); p != nil {
		if err := noSession(p.Session); err != nil {
			return nil, err
		}
		if p.MaxTime != 0 {
			return nil, fmt.Errorf("%w: mongov2: Find with MaxTime (use a context deadline)", sturdy.ErrInvalidArgument)
		}
		if p.Sort != nil {
			o.SetSort(p.Sort)
		}
		if p.Projection != nil {
			o.SetProjection(p.Projection)
		}
		if p.Skip != 0 {
			o.SetSkip(p.Skip)
		}
		if p.Limit != 0 {
			o.SetLimit(p.Limit)
		}
		if p.BatchSize != 0 {
			o.SetBatchSize(p.BatchSize)
		}
		if p.Hint != nil {
			o.SetHint(p.Hint)
		}
		if p.Min != nil {
			o.SetMin(p.Min)
		}
		if p.Max != nil {
			o.SetMax(p.Max)
		}
		if p.Collation != nil {
			o.SetCollation(collation(p.Collation))
		}
		if p.Let != nil {
			o.SetLet(p.Let)
		}
		if p.Comment != nil {
			o.SetComment(p.Comment)
		}
		if p.AllowDiskUse != nil {
			o.SetAllowDiskUse(*p.AllowDiskUse)
		}
		if p.AllowPartialResults {
			o.SetAllowPartialResults(true)
		}
		if p.NoCursorTimeout {
			o.SetNoCursorTimeout(true)
		}
		if p.ReturnKey {
			o.SetReturnKey(true)
		}
		if p.ShowRecordID {
			o.SetShowRecordID(true)
		}
	}
	cur, err := a.c.Find(ctx, filter, o)
	if err != nil {
		return nil, translate(err)
	}
	return sturdy.NewCursor(&cursor{c: cur}), nil
}

// cursor feeds an official driver cursor to sturdy.NewCursor.
type cursor struct{ c *mongo.Cursor }

func (c *cursor) Next(ctx context.Context) (bson.Raw, bool) {
	if !c.c.Next(ctx) {
		return nil, false
	}
	return c.c.Current, true
}

func (c *cursor) Err() error { return translate(c.c.Err()) }

func (c *cursor) Close(ctx context.Context) error { return translate(c.c.Close(ctx)) }
