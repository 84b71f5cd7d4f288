package sturdy

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/internal/csot"
	"github.com/sturdy-go/sturdy/internal/exec"
)

// Database is a handle to a database. It is cheap to create and safe for
// concurrent use.
type Database struct {
	client *Client
	name   string
	wc     *WriteConcern
	rp     *ReadPreference
	rc     string
	// timeout is the database's timeoutMS (nil: none set at any level).
	timeout *time.Duration
}

// begin starts an operation under the database's timeoutMS (see csot).
func (db *Database) begin(ctx context.Context) (context.Context, context.CancelFunc) {
	return csot.Start(ctx, db.timeout)
}

// Name returns the database's name.
func (db *Database) Name() string { return db.name }

// Client returns the client the database belongs to.
func (db *Database) Client() *Client { return db.client }

// Collection returns a handle to the named collection. Nothing is sent to
// the server.
func (db *Database) Collection(name string, opts ...*CollectionOptions) *Collection {
	coll := &Collection{client: db.client, db: db.name, name: name, nameV: name, wc: db.wc, rp: db.rp, rc: db.rc, timeout: db.timeout}
	for _, o := range opts {
		coll.wc, coll.rp, coll.rc = inherit(o, coll.wc, coll.rp, coll.rc)
		if o != nil && o.Timeout != nil {
			coll.timeout = o.Timeout
		}
	}
	return coll
}

// RunCommand runs cmd (an ordered document such as bson.D whose first key is
// the command name) and returns the server's reply. An {ok: 0} reply is
// returned as a *CommandError, together with the reply. The command goes to
// the primary unless opts gives another read preference, and is never
// retried as a write. Inside a transaction (opts.Session has one active) it
// is a read of the transaction: a read preference other than primary, the
// operation's own or the transaction's, is refused with
// ErrTransactionReadPreference before anything is sent.
func (db *Database) RunCommand(ctx context.Context, cmd any, optList ...*RunCommandOptions) (bson.Raw, error) {
	ctx, cancel := db.begin(ctx)
	defer cancel()
	opts := lastOptions(optList)
	if opts == nil {
		opts = &RunCommandOptions{}
	}
	raw, err := toDoc(cmd, false)
	if err != nil {
		return nil, err
	}
	elems, err := raw.Elements()
	if err != nil {
		return nil, argError("invalid command document: %v", err)
	}
	if len(elems) == 0 {
		return nil, argError("command document is empty")
	}
	// Keep the caller's values byte for byte.
	d := make(bson.D, 0, len(elems))
	for _, e := range elems {
		d = append(d, bson.E{Key: e.Key(), Value: e.Value()})
	}
	if err := opts.Session.checkOperationReadPref(opts.ReadPreference); err != nil {
		return nil, err
	}
	op := &exec.Operation{Name: elems[0].Key(), DB: db.name, Command: d, ReadPref: readPref(opts.ReadPreference), Flags: exec.RunCommand}
	res, err := db.client.execute(ctx, op, opts.Session)
	if err != nil {
		var ce *CommandError
		if errors.As(err, &ce) && res.Reply == nil {
			return ce.Raw, err
		}
		return res.Reply, err
	}
	return res.Reply, nil
}

// RunCursorCommand runs a command that returns a cursor (find, aggregate,
// listCollections, or any other) and returns the cursor; its getMores go to
// the same server with the same session. The command is never retried as a
// write. Under timeoutMS RunCommand's rule applies: sturdy sets maxTimeMS.
func (db *Database) RunCursorCommand(ctx context.Context, cmd any, optList ...*RunCursorCommandOptions) (*Cursor, error) {
	ctx, cancel := db.begin(ctx)
	defer cancel()
	opts := lastOptions(optList)
	if opts == nil {
		opts = &RunCursorCommandOptions{}
	}
	d, name, err := commandDoc(cmd)
	if err != nil {
		return nil, err
	}
	if err := opts.Session.checkOperationReadPref(opts.ReadPreference); err != nil {
		return nil, err
	}
	op := &exec.Operation{Name: name, DB: db.name, Command: d, ReadPref: readPref(opts.ReadPreference), Flags: exec.RunCommand}
	return openCursor(ctx, db.client, op, cursorSpec{session: opts.Session, batchSize: opts.BatchSize, comment: opts.Comment, mode: opts.TimeoutMode,
		cursorType: opts.CursorType, maxAwait: opts.MaxAwaitTime})
}

// commandDoc turns a command document into a bson.D kept byte for byte,
// with its name.
func commandDoc(cmd any) (bson.D, string, error) {
	raw, err := toDoc(cmd, false)
	if err != nil {
		return nil, "", err
	}
	elems, err := raw.Elements()
	if err != nil {
		return nil, "", argError("invalid command document: %v", err)
	}
	if len(elems) == 0 {
		return nil, "", argError("command document is empty")
	}
	d := make(bson.D, 0, len(elems))
	for _, e := range elems {
		d = append(d, bson.E{Key: e.Key(), Value: e.Value()})
	}
	return d, elems[0].Key(), nil
}

// Aggregate runs a database-level aggregation (for stages such as
// $currentOp or $documents) and returns a cursor over its results.
func (db *Database) Aggregate(ctx context.Context, pipeline any, optList ...*AggregateOptions) (*Cursor, error) {
	ctx, cancel := db.begin(ctx)
	defer cancel()
	opts := lastOptions(optList)
	return aggregate(ctx, db.client, db.name, "", db.rp, db.rc, db.wc, pipeline, opts)
}

// Drop drops the database.
func (db *Database) Drop(ctx context.Context, optList ...*DropDatabaseOptions) error {
	ctx, cancel := db.begin(ctx)
	defer cancel()
	var s *Session
	if o := lastOptions(optList); o != nil {
		s = o.Session
	}
	cmd := cmdBuilder{{Key: "dropDatabase", Value: int32(1)}}
	cmd.addIf("writeConcern", writeConcernDoc(db.wc))
	_, err := db.client.execute(ctx, &exec.Operation{Name: "dropDatabase", DB: db.name, Command: bson.D(cmd), Flags: exec.Write}, s)
	return err
}
