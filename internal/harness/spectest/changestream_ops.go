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

// extraOp returns the runner's change stream, command cursor and GridFS
// operations on an entity, or nil.
func (tr *testRun) extraOp(ent any, name string) opFunc {
	switch e := ent.(type) {
	case *clientEntity:
		if name == "createChangeStream" {
			return tr.createChangeStream(e.client.Watch)
		}
	case *databaseEntity:
		switch name {
		case "createChangeStream":
			return tr.createChangeStream(e.db.Watch)
		case "runCursorCommand":
			return tr.runCursorCommand(e.db, false)
		case "createCommandCursor":
			return tr.runCursorCommand(e.db, true)
		}
	case *collectionEntity:
		switch name {
		case "createChangeStream":
			return tr.createChangeStream(e.coll.Watch)
		case "createFindCursor":
			return tr.createFindCursor(e.coll)
		}
	case *cursorEntity:
		return cursorOps(e)[name]
	case *changeStreamEntity:
		return changeStreamOps(e)[name]
	case *bucketEntity:
		return bucketOps(e)[name]
	}
	return nil
}

type watchFunc = func(context.Context, any, ...*sturdy.ChangeStreamOptions) (*sturdy.ChangeStream, error)

// createChangeStream opens a stream, which saveResultAsEntity may name.
func (tr *testRun) createChangeStream(watch watchFunc) opFunc {
	return func(ctx context.Context, a *args) (opResult, error) {
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
			return tr.keepEntity(ctx, "$changeStream", ent)
		})
	}
}

// changeStreamOps are the iteration operations of a change stream entity.
func changeStreamOps(e *changeStreamEntity) map[string]opFunc {
	ops := iterationOps(e.cs, func() bson.Raw { return e.cs.Current }, "change stream ended without a document")
	ops["close"] = func(ctx context.Context, a *args) (opResult, error) {
		return checked(a, func() (opResult, error) { return opResult{}, e.cs.Close(ctx) })
	}
	return ops
}

// iterator is what change streams and cursors share for iteration.
type iterator interface {
	Next(ctx context.Context) bool
	TryNext(ctx context.Context) bool
	Err() error
}

// iterationOps are the iterate operations of a change stream or cursor;
// current returns the document it moved to, and exhausted is the error
// when iterateUntilDocumentOrError finds it ended.
func iterationOps(it iterator, current func() bson.Raw, exhausted string) map[string]opFunc {
	doc := func() opResult { return opResult{v: bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: current()}} }
	return map[string]opFunc{
		"iterateUntilDocumentOrError": func(ctx context.Context, a *args) (opResult, error) {
			return checked(a, func() (opResult, error) {
				if !it.Next(ctx) {
					if err := it.Err(); err != nil {
						return opResult{}, err
					}
					return opResult{}, errors.New(exhausted)
				}
				return doc(), nil
			})
		},
		"iterateOnce": func(ctx context.Context, a *args) (opResult, error) {
			return checked(a, func() (opResult, error) {
				if it.TryNext(ctx) {
					return doc(), nil
				}
				return opResult{}, it.Err()
			})
		},
	}
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

// createFindCursor opens a find cursor without iterating it.
func (tr *testRun) createFindCursor(coll *sturdy.Collection) opFunc {
	return func(ctx context.Context, a *args) (opResult, error) {
		f, err := a.filter()
		if err != nil {
			return opResult{}, err
		}
		o, err := findOptions(a)
		if err != nil {
			return opResult{}, err
		}
		return checked(a, func() (opResult, error) {
			cur, err := coll.Find(ctx, f, o)
			if err != nil {
				return opResult{}, err
			}
			ent := &cursorEntity{cur: cur}
			return tr.keepEntity(ctx, "$cursor", ent)
		})
	}
}

// cursorOps are the iteration operations of a cursor entity.
func cursorOps(e *cursorEntity) map[string]opFunc {
	ops := iterationOps(e.cur, func() bson.Raw { return e.cur.Current }, "cursor exhausted without a document")
	ops["close"] = func(ctx context.Context, a *args) (opResult, error) {
		// The format says runners suppress every error of a cursor's
		// close (killCursors is best effort); events show its outcome.
		return checked(a, func() (opResult, error) { _ = e.cur.Close(ctx); return opResult{}, nil })
	}
	return ops
}

// runCursorCommand runs a cursor command: iterated to the end
// (runCursorCommand) or saved as a cursor entity (createCommandCursor).
func (tr *testRun) runCursorCommand(db *sturdy.Database, keep bool) opFunc {
	return func(ctx context.Context, a *args) (opResult, error) {
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
		if v, ok := a.get("readPreference"); ok {
			if o.ReadPreference, err = readPreference(v); err != nil {
				return opResult{}, err
			}
		}
		if o.Session, err = a.session(); err != nil {
			return opResult{}, err
		}
		return checked(a, func() (opResult, error) {
			cur, err := db.RunCursorCommand(ctx, cmd, o)
			if !keep || err != nil {
				return cursorResult(ctx, cur, err)
			}
			ent := &cursorEntity{cur: cur}
			return tr.keepEntity(ctx, "$cursor", ent)
		})
	}
}
