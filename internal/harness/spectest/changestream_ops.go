package spectest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
)

// changeStreamEntity is a change stream the runner opened. Every stream is
// also kept in the entity map under a generated id so that it is closed
// (before its client) when the test ends.
type changeStreamEntity struct {
	cs *sturdy.ChangeStream
}

func (e *changeStreamEntity) close(ctx context.Context) { _ = e.cs.Close(ctx) }

type watchFunc = func(context.Context, any, ...*sturdy.ChangeStreamOptions) (*sturdy.ChangeStream, error)

// createChangeStream opens a stream, which saveResultAsEntity may name.
func createChangeStream(ctx context.Context, a *args, watch watchFunc) (opResult, error) {
	p, err := a.pipeline()
	if err != nil {
		return opResult{}, err
	}
	o := &sturdy.ChangeStreamOptions{FullDocument: a.str("fullDocument"), FullDocumentBeforeChange: a.str("fullDocumentBeforeChange"),
		ResumeAfter: a.any("resumeAfter"), StartAfter: a.any("startAfter"), BatchSize: int32(a.int64("batchSize")),
		MaxAwaitTime: time.Duration(a.int64("maxAwaitTimeMS")) * time.Millisecond, Comment: a.any("comment"),
		ShowExpandedEvents: a.boolPtr("showExpandedEvents")}
	if v, ok := a.get("startAtOperationTime"); ok {
		t, i, ok := v.TimestampOK()
		if !ok {
			return opResult{}, &runnerError{fmt.Errorf("startAtOperationTime must be a timestamp, got %s", v.Type)}
		}
		o.StartAtOperationTime = &bson.Timestamp{T: t, I: i}
	}
	if o.Collation, err = a.collation(); err != nil {
		return opResult{}, err
	}
	if o.Session, err = a.session(); err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) {
		// The stream outlives this operation's context.
		cs, err := watch(ctx, p, o)
		if err != nil {
			return opResult{}, err
		}
		ent := &changeStreamEntity{cs: cs}
		// Kept under a generated id as well, so that an unsaved
		// stream is closed with the test too (close is idempotent).
		return a.tr.keepEntity(ctx, "$changeStream", ent)
	})
}

// changeStreamOperations are the operations on a change stream entity.
var changeStreamOperations = opTable[*changeStreamEntity]{
	"iterateUntilDocumentOrError": iterateUntilDocumentOrError[*changeStreamEntity],
	"iterateOnce":                 iterateOnce[*changeStreamEntity],
	"close":                       changeStreamClose,
}

func changeStreamClose(ctx context.Context, e *changeStreamEntity, a *args) (opResult, error) {
	return checked(a, func() (opResult, error) { return opResult{}, e.cs.Close(ctx) })
}

// iterator is what change streams and cursors share for iteration.
type iterator interface {
	Next(ctx context.Context) bool
	TryNext(ctx context.Context) bool
	Err() error
}

// iterable is a change stream or cursor entity: its iterator, the document
// the iterator moved to, and the error iterateUntilDocumentOrError returns
// when it ended.
type iterable interface {
	iter() iterator
	current() bson.Raw
	exhausted() string
}

func (e *changeStreamEntity) iter() iterator    { return e.cs }
func (e *changeStreamEntity) current() bson.Raw { return e.cs.Current }
func (e *changeStreamEntity) exhausted() string { return "change stream ended without a document" }

func (e *cursorEntity) iter() iterator    { return e.cur }
func (e *cursorEntity) current() bson.Raw { return e.cur.Current }
func (e *cursorEntity) exhausted() string { return "cursor exhausted without a document" }

// currentDoc is the document e's iterator moved to, as a result.
func currentDoc(e iterable) opResult {
	return opResult{v: bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: e.current()}}
}

func iterateUntilDocumentOrError[E iterable](ctx context.Context, e E, a *args) (opResult, error) {
	return checked(a, func() (opResult, error) {
		it := e.iter()
		if !it.Next(ctx) {
			if err := it.Err(); err != nil {
				return opResult{}, err
			}
			return opResult{}, errors.New(e.exhausted())
		}
		return currentDoc(e), nil
	})
}

func iterateOnce[E iterable](ctx context.Context, e E, a *args) (opResult, error) {
	return checked(a, func() (opResult, error) {
		it := e.iter()
		if it.TryNext(ctx) {
			return currentDoc(e), nil
		}
		return opResult{}, it.Err()
	})
}

// cursorEntity is a cursor saved by createFindCursor; like change streams
// it is also kept under a generated id so that it is closed with the test.
type cursorEntity struct {
	cur *sturdy.Cursor
}

func (e *cursorEntity) close(ctx context.Context) { _ = e.cur.Close(ctx) }

// closer is an entity the runner closes when the test ends.
type closer interface{ close(ctx context.Context) }

// keepEntity keeps a stream or cursor under a generated id as well, so that
// one the test does not save is closed with the test too (close is
// idempotent), and returns it as the operation's result.
func (tr *testRun) keepEntity(ctx context.Context, prefix string, ent closer) (opResult, error) {
	id := fmt.Sprintf("%s%d", prefix, len(tr.entities.order))
	if err := tr.entities.add(id, ent); err != nil {
		ent.close(context.WithoutCancel(ctx))
		return opResult{}, &runnerError{err}
	}
	return opResult{entity: ent}, nil
}

// cursorOperations are the operations on a cursor entity.
var cursorOperations = opTable[*cursorEntity]{
	"iterateUntilDocumentOrError": iterateUntilDocumentOrError[*cursorEntity],
	"iterateOnce":                 iterateOnce[*cursorEntity],
	"close":                       cursorClose,
}

// cursorClose closes the cursor: the format says runners suppress every
// error of a cursor's close (killCursors is best effort); events show its
// outcome.
func cursorClose(ctx context.Context, e *cursorEntity, a *args) (opResult, error) {
	return checked(a, func() (opResult, error) { _ = e.cur.Close(ctx); return opResult{}, nil })
}
