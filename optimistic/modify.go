package optimistic

import (
	"context"
	"errors"
	"fmt"

	"github.com/sturdy-go/sturdy"
)

// ModifyOptions configures Modify. The zero value is the default.
type ModifyOptions struct {
	// MaxAttempts bounds the load-modify-save cycles, the first included.
	// Default 0: 10.
	MaxAttempts int
	// CreateIfMissing starts from the zero T (version 0) when no document
	// has the id, so the save creates it. Default false: ErrNoDocuments.
	CreateIfMissing bool
}

// ModifyResult is the result of Modify.
type ModifyResult[T any] struct {
	Doc       T     // the document as saved
	Version   int64 // its new version
	Conflicts int   // cycles lost to concurrent writers
	Created   bool
}

// Modify loads the document with _id id into a T, lets fn change it, and
// saves it at the version it was loaded at. On a conflict it starts over
// with a fresh load, up to MaxAttempts cycles; then it returns the last
// *ConflictError. An error from fn stops Modify and is returned as is.
// fn may run more than once, so it should only change the document.
//
// T is usually a tagged struct; it need not contain the version field,
// because Modify tracks the loaded version itself. The saved document's
// _id is id.
func Modify[T any](ctx context.Context, c *Collection, id any, fn func(doc *T) error, opts ...*ModifyOptions) (*ModifyResult[T], error) {
	var o ModifyOptions
	for _, p := range opts {
		if p != nil {
			o = *p
		}
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 10
	}
	res := &ModifyResult[T]{}
	var lastErr error
	for attempt := 0; attempt < o.MaxAttempts; attempt++ {
		var doc T
		version, err := c.Load(ctx, id, &doc)
		if errors.Is(err, sturdy.ErrNoDocuments) && o.CreateIfMissing {
			version, err = 0, nil
		}
		if err != nil {
			return nil, err
		}
		if err := fn(&doc); err != nil {
			return nil, err
		}
		raw, err := marshal(&doc)
		if err != nil {
			return nil, err
		}
		set, onInsert, err := c.split(raw)
		if err != nil {
			return nil, err
		}
		saved, err := c.Write(ctx, id, version, set, onInsert)
		if errors.Is(err, ErrConflict) {
			res.Conflicts++
			lastErr = err
			if ctx.Err() != nil {
				break
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		setVersion(&doc, c.o.VersionField, saved.Version)
		res.Doc, res.Version, res.Created = doc, saved.Version, saved.Created
		return res, nil
	}
	return nil, fmt.Errorf("optimistic: gave up after %d conflicting attempts: %w", res.Conflicts, lastErr)
}
