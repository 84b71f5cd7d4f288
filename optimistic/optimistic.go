package optimistic

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/adapt"
)

// Options configures a Collection. The zero value is the default.
type Options struct {
	// VersionField holds the version number (int64). Default "version".
	VersionField string
	// CreateOnly names fields written only when the document is created
	// ($setOnInsert), such as "owner"; later saves leave them unchanged.
	CreateOnly []string
	// CreatedField, if set, is stamped with Now() when the document is
	// created ($setOnInsert). Default "": none.
	CreatedField string
	// ModifiedField, if set, is stamped with Now() on every save ($set).
	// Default "": none.
	ModifiedField string
	// Now is the clock for the stamps. Default time.Now.
	Now func() time.Time
	// KeepDeleted makes a save of version v > 0 fail with a conflict when the
	// document no longer exists, instead of recreating it. The update is then
	// sent without upsert and matching nothing is the conflict signal.
	// Default false: the single upsert path of "Optimistic Locking in
	// MongoDB" (2015), which recreates a deleted document.
	KeepDeleted bool
}

// ErrConflict is the sentinel every *ConflictError matches with errors.Is.
var ErrConflict = errors.New("optimistic: version conflict")

// ErrNoID is returned when a document to save has no _id.
var ErrNoID = errors.New("optimistic: document has no _id")

// ConflictError reports that the stored document was not at the expected
// version: someone else saved it first (or, with Expected 0, it already
// existed; with KeepDeleted, it was deleted).
type ConflictError struct {
	ID       any   // the document's _id
	Expected int64 // the version the save expected; 0 for a create
	Err      error // the server's duplicate-key error, or nil when nothing matched
}

func (e *ConflictError) Error() string {
	if e.Expected == 0 {
		return fmt.Sprintf("optimistic: version conflict: document %v already exists", e.ID)
	}
	return fmt.Sprintf("optimistic: version conflict: document %v is no longer at version %d", e.ID, e.Expected)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// Unwrap returns the server's error, if any.
func (e *ConflictError) Unwrap() error { return e.Err }

// Collection stores versioned documents in a sturdy collection. It is safe
// for concurrent use.
type Collection struct {
	coll adapt.Collection
	o    Options
}

// New wraps coll: a *sturdy.Collection, or another driver's collection
// through an adapter such as adapt/mongov2. At most one Options is used
// (the last non-nil one).
func New(coll adapt.Collection, opts ...*Options) *Collection {
	var o Options
	for _, p := range opts {
		if p != nil {
			o = *p
		}
	}
	if o.VersionField == "" {
		o.VersionField = "version"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Collection{coll: coll, o: o}
}

// Unwrap returns the underlying sturdy collection, or nil when New was
// given another implementation of adapt.Collection (see Underlying).
func (c *Collection) Unwrap() *sturdy.Collection {
	sc, _ := c.coll.(*sturdy.Collection)
	return sc
}

// Underlying returns the collection New was given.
func (c *Collection) Underlying() adapt.Collection { return c.coll }

// SaveResult is the result of a save.
type SaveResult struct {
	ID      any   // the document's _id
	Version int64 // the version now stored
	Created bool  // the save created the document
}

// Save writes doc — a tagged struct (or pointer to one), bson.D, bson.M or
// bson.Raw with an _id and the version it was read at (0 or absent for a
// new document) — as the next version. Every field except _id, the version
// and the CreateOnly fields is $set; CreateOnly fields are $setOnInsert.
// A stale version returns a *ConflictError. When doc is a pointer to a
// struct, its version field is updated to the new version.
func (c *Collection) Save(ctx context.Context, doc any) (*SaveResult, error) {
	raw, err := marshal(doc)
	if err != nil {
		return nil, err
	}
	idv, err := raw.LookupErr("_id")
	if err != nil {
		return nil, ErrNoID
	}
	version, err := c.versionOf(raw)
	if err != nil {
		return nil, err
	}
	set, onInsert, err := c.split(raw)
	if err != nil {
		return nil, err
	}
	res, err := c.Write(ctx, idv, version, set, onInsert)
	if err != nil {
		return nil, err
	}
	setVersion(doc, c.o.VersionField, res.Version)
	return res, nil
}

// Write is the single statement of "Optimistic Locking in MongoDB": it $set's
// set and $setOnInsert's onInsert (either may be nil) on the document with
// _id id, if it is at version (0: it does not exist yet or has no version),
// and increments the version. It returns a *ConflictError if the document is
// at another version.
func (c *Collection) Write(ctx context.Context, id any, version int64, set, onInsert any) (*SaveResult, error) {
	if version < 0 {
		return nil, fmt.Errorf("%w: negative version %d", sturdy.ErrInvalidArgument, version)
	}
	vf := c.o.VersionField
	filter := bson.D{{Key: "_id", Value: id}}
	if version == 0 {
		filter = append(filter, bson.E{Key: vf, Value: bson.D{{Key: "$exists", Value: false}}})
	} else {
		filter = append(filter, bson.E{Key: vf, Value: version})
	}
	setDoc, err := toD(set)
	if err != nil {
		return nil, err
	}
	insDoc, err := toD(onInsert)
	if err != nil {
		return nil, err
	}
	now := c.o.Now().Truncate(time.Millisecond)
	if f := c.o.ModifiedField; f != "" {
		setDoc = append(without(setDoc, f), bson.E{Key: f, Value: now})
	}
	if f := c.o.CreatedField; f != "" {
		insDoc = append(without(insDoc, f), bson.E{Key: f, Value: now})
		setDoc = without(setDoc, f)
	}
	for _, e := range append(slices.Clone(setDoc), insDoc...) {
		if e.Key == "_id" || e.Key == vf {
			return nil, fmt.Errorf("%w: %q cannot be set by a save", sturdy.ErrInvalidArgument, e.Key)
		}
	}
	update := bson.D{}
	if len(setDoc) > 0 {
		update = append(update, bson.E{Key: "$set", Value: setDoc})
	}
	if len(insDoc) > 0 {
		update = append(update, bson.E{Key: "$setOnInsert", Value: insDoc})
	}
	update = append(update, bson.E{Key: "$inc", Value: bson.D{{Key: vf, Value: int64(1)}}})
	upsert := version == 0 || !c.o.KeepDeleted
	idAny := idValue(id)
	r, err := c.coll.UpdateOne(ctx, filter, update, &sturdy.UpdateOptions{Upsert: upsert})
	if err != nil {
		if isDuplicateID(err) {
			return nil, &ConflictError{ID: idAny, Expected: version, Err: err}
		}
		return nil, err
	}
	if r.MatchedCount == 0 && r.UpsertedCount == 0 && r.UpsertedID == nil {
		return nil, &ConflictError{ID: idAny, Expected: version}
	}
	return &SaveResult{ID: idAny, Version: version + 1, Created: r.UpsertedID != nil || r.UpsertedCount > 0}, nil
}

// Load reads the document with _id id into out and returns its version (0
// if it has none). A missing document is sturdy.ErrNoDocuments.
func (c *Collection) Load(ctx context.Context, id any, out any) (int64, error) {
	raw, err := c.coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Raw()
	if err != nil {
		return 0, err
	}
	v, err := c.versionOf(raw)
	if err != nil {
		return 0, err
	}
	if out != nil {
		if err := bson.Unmarshal(raw, out); err != nil {
			return 0, err
		}
	}
	return v, nil
}

// Delete deletes the document with _id id if it is at version; otherwise
// (changed or already gone) it returns a *ConflictError.
func (c *Collection) Delete(ctx context.Context, id any, version int64) error {
	r, err := c.coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: c.o.VersionField, Value: version}})
	if err != nil {
		return err
	}
	if r.DeletedCount == 0 {
		return &ConflictError{ID: idValue(id), Expected: version}
	}
	return nil
}

// versionOf reads the version field of raw: absent or null is 0.
func (c *Collection) versionOf(raw bson.Raw) (int64, error) {
	v, err := raw.LookupErr(c.o.VersionField)
	if err != nil || v.Type == bson.TypeNull {
		return 0, nil
	}
	n, ok := v.AsInt64OK()
	if !ok || n < 0 {
		return 0, fmt.Errorf("%w: version field %q holds %s, want a non-negative integer", sturdy.ErrInvalidArgument, c.o.VersionField, v)
	}
	return n, nil
}

// split divides a document into its $set and $setOnInsert parts.
func (c *Collection) split(raw bson.Raw) (set, onInsert bson.D, err error) {
	elems, err := raw.Elements()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", sturdy.ErrInvalidArgument, err)
	}
	set, onInsert = bson.D{}, bson.D{}
	for _, e := range elems {
		k := e.Key()
		switch {
		case k == "_id" || k == c.o.VersionField:
		case slices.Contains(c.o.CreateOnly, k) || k == c.o.CreatedField:
			onInsert = append(onInsert, bson.E{Key: k, Value: e.Value()})
		default:
			set = append(set, bson.E{Key: k, Value: e.Value()})
		}
	}
	return set, onInsert, nil
}

func marshal(doc any) (bson.Raw, error) {
	switch d := doc.(type) {
	case nil:
		return nil, sturdy.ErrNilDocument
	case bson.Raw:
		if err := d.Validate(); err != nil {
			return nil, fmt.Errorf("%w: %v", sturdy.ErrInvalidArgument, err)
		}
		return d, nil
	}
	b, err := bson.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot marshal %T: %v", sturdy.ErrInvalidArgument, doc, err)
	}
	return b, nil
}

// toD converts a document (or nil) to a bson.D of raw values.
func toD(doc any) (bson.D, error) {
	if doc == nil {
		return nil, nil
	}
	raw, err := marshal(doc)
	if err != nil {
		return nil, err
	}
	elems, err := raw.Elements()
	if err != nil {
		return nil, err
	}
	out := make(bson.D, 0, len(elems))
	for _, e := range elems {
		out = append(out, bson.E{Key: e.Key(), Value: e.Value()})
	}
	return out, nil
}

func without(d bson.D, key string) bson.D {
	return slices.DeleteFunc(d, func(e bson.E) bool { return e.Key == key })
}

// idValue turns a raw _id back into a Go value for errors and results.
func idValue(id any) any {
	if rv, ok := id.(bson.RawValue); ok {
		var v any
		if err := rv.Unmarshal(&v); err == nil {
			return v
		}
	}
	return id
}

// setVersion writes the new version into doc when it is a pointer to a
// struct (through its bson tags) or a bson.M / *bson.D.
func setVersion(doc any, field string, v int64) {
	switch d := doc.(type) {
	case bson.M:
		d[field] = v
		return
	case *bson.D:
		for i := range *d {
			if (*d)[i].Key == field {
				(*d)[i].Value = v
				return
			}
		}
		*d = append(*d, bson.E{Key: field, Value: v})
		return
	}
	rv := reflect.ValueOf(doc)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return
	}
	// Unmarshalling a one-field document into the struct sets that field
	// only, with the struct's own tags and type conversions.
	b, err := bson.Marshal(bson.D{{Key: field, Value: v}})
	if err == nil {
		_ = bson.Unmarshal(b, doc)
	}
}

// isDuplicateID reports whether err is a duplicate key on the _id index
// (a duplicate on another unique index is not a version conflict).
func isDuplicateID(err error) bool {
	ix, dup := sturdy.DuplicateKeyIndex(err)
	return dup && ix == "_id_"
}
