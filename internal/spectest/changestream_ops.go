package spectest

import (
	"context"
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
		if name == "createChangeStream" {
			return tr.createChangeStream(e.db.Watch)
		}
		return tr.commandCursorOps(e.db, name)
	case *collectionEntity:
		if name == "createChangeStream" {
			return tr.createChangeStream(e.coll.Watch)
		}
	case *changeStreamEntity:
		return changeStreamOps(e)[name]
	case *cursorEntity:
		return cursorOps(e)[name]
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
			id := fmt.Sprintf("$changeStream%d", len(tr.entities.order))
			if err := tr.entities.add(id, ent); err != nil {
				_ = cs.Close(context.WithoutCancel(ctx))
				return opResult{}, &runnerError{err}
			}
			return opResult{entity: ent}, nil
		})
	}
}

// changeStreamOps are the iteration operations of a change stream entity.
func changeStreamOps(e *changeStreamEntity) map[string]opFunc {
	return map[string]opFunc{
		"iterateUntilDocumentOrError": func(ctx context.Context, a *args) (opResult, error) {
			return checked(a, func() (opResult, error) {
				if !e.cs.Next(ctx) {
					if err := e.cs.Err(); err != nil {
						return opResult{}, err
					}
					return opResult{}, fmt.Errorf("change stream ended without a document")
				}
				return opResult{v: bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: e.cs.Current}}, nil
			})
		},
		"iterateOnce": func(ctx context.Context, a *args) (opResult, error) {
			return checked(a, func() (opResult, error) {
				if e.cs.TryNext(ctx) {
					return opResult{v: bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: e.cs.Current}}, nil
				}
				return opResult{}, e.cs.Err()
			})
		},
		"close": func(ctx context.Context, a *args) (opResult, error) {
			return checked(a, func() (opResult, error) { return opResult{}, e.cs.Close(ctx) })
		},
	}
}
