package spectest

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
)

// cursorEntity is a command cursor the runner opened (createCommandCursor).
// Like change streams, every cursor is also kept under a generated id so
// that it is closed, before its client, when the test ends.
type cursorEntity struct {
	cur *sturdy.Cursor
}

func (e *cursorEntity) close(ctx context.Context) { _ = e.cur.Close(ctx) }

// runCursorCommandArgs reads the arguments of runCursorCommand and
// createCommandCursor.
func runCursorCommandArgs(a *args) (bson.Raw, *sturdy.RunCursorCommandOptions, error) {
	cmd, err := a.doc("command")
	if err != nil {
		return nil, nil, err
	}
	a.str("commandName")
	o := &sturdy.RunCursorCommandOptions{BatchSize: int32(a.int64("batchSize")), Comment: a.any("comment"),
		MaxTime: time.Duration(a.int64("maxTimeMS")) * time.Millisecond}
	// The initial command carries tailable/awaitData itself; the cursor
	// type only says how getMore behaves, which TryNext and Next cover.
	switch ct := a.str("cursorType"); ct {
	case "", "nonTailable", "tailable", "tailableAwait":
	default:
		return nil, nil, &runnerError{fmt.Errorf("unknown cursorType %q", ct)}
	}
	if v, ok := a.get("readPreference"); ok {
		if o.ReadPreference, err = readPreference(v); err != nil {
			return nil, nil, err
		}
	}
	if o.Session, err = a.session(); err != nil {
		return nil, nil, err
	}
	return cmd, o, nil
}

// commandCursorOps are the database operations that open command cursors.
func (tr *testRun) commandCursorOps(db *sturdy.Database, name string) opFunc {
	switch name {
	case "runCursorCommand":
		return func(ctx context.Context, a *args) (opResult, error) {
			cmd, o, err := runCursorCommandArgs(a)
			if err != nil {
				return opResult{}, err
			}
			return checked(a, func() (opResult, error) {
				cur, err := db.RunCursorCommand(ctx, cmd, o)
				return cursorResult(ctx, cur, err)
			})
		}
	case "createCommandCursor":
		return func(ctx context.Context, a *args) (opResult, error) {
			cmd, o, err := runCursorCommandArgs(a)
			if err != nil {
				return opResult{}, err
			}
			return checked(a, func() (opResult, error) {
				cur, err := db.RunCursorCommand(ctx, cmd, o)
				if err != nil {
					return opResult{}, err
				}
				ent := &cursorEntity{cur: cur}
				id := fmt.Sprintf("$cursor%d", len(tr.entities.order))
				if err := tr.entities.add(id, ent); err != nil {
					_ = cur.Close(context.WithoutCancel(ctx))
					return opResult{}, &runnerError{err}
				}
				return opResult{entity: ent}, nil
			})
		}
	}
	return nil
}

// cursorOps are the iteration operations of a cursor entity.
func cursorOps(e *cursorEntity) map[string]opFunc {
	doc := func() opResult {
		return opResult{v: bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: e.cur.Current}}
	}
	return map[string]opFunc{
		"iterateUntilDocumentOrError": func(ctx context.Context, a *args) (opResult, error) {
			return checked(a, func() (opResult, error) {
				if !e.cur.Next(ctx) {
					if err := e.cur.Err(); err != nil {
						return opResult{}, err
					}
					return opResult{}, fmt.Errorf("cursor exhausted without a document")
				}
				return doc(), nil
			})
		},
		"iterateOnce": func(ctx context.Context, a *args) (opResult, error) {
			return checked(a, func() (opResult, error) {
				if e.cur.TryNext(ctx) {
					return doc(), nil
				}
				return opResult{}, e.cur.Err()
			})
		},
		"close": func(ctx context.Context, a *args) (opResult, error) {
			return checked(a, func() (opResult, error) { return opResult{}, e.cur.Close(ctx) })
		},
	}
}
