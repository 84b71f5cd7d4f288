package sturdy

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// CursorSource hands documents to a Cursor made by NewCursor. Adapters over
// other drivers (adapt/mongov2) use it so that code written against
// *Collection's method set runs over their collections too.
type CursorSource interface {
	// Next returns the next document, or false when there is none or an
	// error stopped the iteration (Err says which).
	Next(ctx context.Context) (bson.Raw, bool)
	Err() error
	Close(ctx context.Context) error
}

// NewCursor returns a Cursor whose documents come from src.
func NewCursor(src CursorSource) *Cursor { return &Cursor{src: src} }

func (c *Cursor) nextFromSource(ctx context.Context) bool {
	if c.closed {
		c.Current = nil
		return false
	}
	doc, ok := c.src.Next(ctx)
	if !ok {
		c.Current = nil
		return false
	}
	c.Current = doc
	return true
}

// NewSingleResult returns a SingleResult holding doc, or err when err is
// not nil (ErrNoDocuments when nothing matched). Adapters over other
// drivers use it, like NewCursor.
func NewSingleResult(doc bson.Raw, err error) *SingleResult {
	if err != nil {
		return &SingleResult{err: err}
	}
	return &SingleResult{raw: doc}
}
