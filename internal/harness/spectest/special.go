package spectest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/internal/testhook"
)

// testRunnerOperations are the operations of the "testRunner" object; a
// handler that serves two operations tells them apart by a.op.
var testRunnerOperations = map[string]func(*testRun, context.Context, *args) error{
	"failPoint":                            (*testRun).failPoint,
	"targetedFailPoint":                    (*testRun).targetedFailPoint,
	"createEntities":                       (*testRun).createEntities,
	"assertSessionDirty":                   (*testRun).assertSessionDirty,
	"assertSessionNotDirty":                (*testRun).assertSessionDirty,
	"assertSameLsidOnLastTwoCommands":      (*testRun).assertLsidOnLastTwoCommands,
	"assertDifferentLsidOnLastTwoCommands": (*testRun).assertLsidOnLastTwoCommands,
	"assertCollectionExists":               (*testRun).assertCollectionExists,
	"assertCollectionNotExists":            (*testRun).assertCollectionExists,
	"assertIndexExists":                    (*testRun).assertIndexExists,
	"assertIndexNotExists":                 (*testRun).assertIndexExists,
	"waitForEvent":                         (*testRun).waitForEvent,
	"assertEventCount":                     (*testRun).assertEventCount,
	"assertNumberConnectionsCheckedOut":    (*testRun).assertNumberConnectionsCheckedOut,
	"wait":                                 (*testRun).wait,
	"assertSessionTransactionState":        (*testRun).assertSessionTransactionState,
	"assertSessionPinned":                  (*testRun).assertSessionPinned,
	"assertSessionUnpinned":                (*testRun).assertSessionPinned,
	"runOnThread":                          unsupportedTestRunnerOperation("thread entities"),
	"waitForThread":                        unsupportedTestRunnerOperation("thread entities"),
	"recordTopologyDescription":            unsupportedTestRunnerOperation("topology description entities"),
	"assertTopologyType":                   unsupportedTestRunnerOperation("topology description entities"),
	"waitForPrimaryChange":                 unsupportedTestRunnerOperation("topology description entities"),
}

// special runs a testRunner operation.
func (tr *testRun) special(ctx context.Context, name string, a *args) error {
	op, ok := testRunnerOperations[name]
	if !ok {
		return fmt.Errorf("unknown testRunner operation %q", name)
	}
	return op(tr, ctx, a)
}

// unsupportedTestRunnerOperation is the handler of a testRunner operation
// on what the runner does not support.
func unsupportedTestRunnerOperation(what string) func(*testRun, context.Context, *args) error {
	return func(_ *testRun, _ context.Context, a *args) error {
		return unsupportedf("%s (%s)", a.op, what)
	}
}

// clientArg is the client entity the client argument names.
func (tr *testRun) clientArg(a *args) (*clientEntity, error) {
	return lookup[*clientEntity](tr.entities, a.str("client"))
}

// sessionArg is the session entity the session argument names.
func (tr *testRun) sessionArg(a *args) (*sessionEntity, error) {
	return lookup[*sessionEntity](tr.entities, a.str("session"))
}

// failPointArg is the failPoint argument, the configureFailPoint command.
func failPointArg(a *args) (bson.Raw, error) {
	fp, err := a.doc("failPoint")
	if err != nil || fp == nil {
		return nil, fmt.Errorf("failPoint argument: %v", err)
	}
	return fp, nil
}

// configureFailPoint runs the configureFailPoint command fp through c and
// remembers to switch the fail point off when the test ends.
func (tr *testRun) configureFailPoint(ctx context.Context, c *sturdy.Client, fp bson.Raw) error {
	if _, err := c.Database("admin").RunCommand(ctx, fp); err != nil {
		return err
	}
	tr.failPoints = append(tr.failPoints, bson.D{{Key: "configureFailPoint", Value: lookupString(fp, "configureFailPoint")}, {Key: "mode", Value: "off"}})
	return nil
}

func (tr *testRun) failPoint(ctx context.Context, a *args) error {
	c, err := tr.clientArg(a)
	if err != nil {
		return err
	}
	fp, err := failPointArg(a)
	if err != nil {
		return err
	}
	if err := tr.configureFailPoint(ctx, c.client, fp); err != nil {
		return fmt.Errorf("configureFailPoint: %w", err)
	}
	return a.check()
}

// targetedFailPoint sets the fail point on the mongos the session is pinned
// to, through the runner's direct client to that mongos.
func (tr *testRun) targetedFailPoint(ctx context.Context, a *args) error {
	s, err := tr.sessionArg(a)
	if err != nil {
		return err
	}
	fp, err := failPointArg(a)
	if err != nil {
		return err
	}
	addr := s.sess.PinnedServer()
	if addr == "" {
		return errors.New("targetedFailPoint: the session is not pinned to a mongos")
	}
	var target *sturdy.Client
	for i, h := range tr.r.mongosAddrs {
		if sameAddr(h, addr) {
			target = tr.r.mongoses[i]
		}
	}
	if target == nil {
		return fmt.Errorf("targetedFailPoint: the session is pinned to %s, which is not one of the mongoses %v", addr, tr.r.mongosAddrs)
	}
	if err := tr.configureFailPoint(ctx, target, fp); err != nil {
		return fmt.Errorf("configureFailPoint on %s: %w", addr, err)
	}
	return a.check()
}

func (tr *testRun) createEntities(ctx context.Context, a *args) error {
	v, _ := a.get("entities")
	arr, ok := v.ArrayOK()
	if !ok {
		return errors.New("createEntities: entities must be an array")
	}
	vals, _ := arr.Values()
	for _, ev := range vals {
		d, err := docValue(ev, "entity")
		if err != nil {
			return err
		}
		if err := tr.createEntity(ctx, d); err != nil {
			return err
		}
	}
	return nil
}

// assertSessionDirty is assertSessionDirty and assertSessionNotDirty.
func (tr *testRun) assertSessionDirty(_ context.Context, a *args) error {
	s, err := tr.sessionArg(a)
	if err != nil {
		return err
	}
	want := a.op == "assertSessionDirty"
	if got := testhook.SessionDirty(s.sess); got != want {
		return fmt.Errorf("%s: session dirty is %v", a.op, got)
	}
	return nil
}

// assertLsidOnLastTwoCommands is assertSameLsidOnLastTwoCommands and
// assertDifferentLsidOnLastTwoCommands.
func (tr *testRun) assertLsidOnLastTwoCommands(_ context.Context, a *args) error {
	name := a.op
	c, err := tr.clientArg(a)
	if err != nil {
		return err
	}
	evs, _ := c.rec.snapshot()
	var started []*observed
	for _, o := range evs {
		if o.started != nil {
			started = append(started, o)
		}
	}
	if len(started) < 2 {
		return fmt.Errorf("%s: %d command started events observed, need 2", name, len(started))
	}
	x, y := started[len(started)-2].started.Command.Lookup("lsid"), started[len(started)-1].started.Command.Lookup("lsid")
	if x.Type == 0 || y.Type == 0 {
		return fmt.Errorf("%s: a command has no lsid", name)
	}
	same := bytes.Equal(x.Value, y.Value)
	if same != (name == "assertSameLsidOnLastTwoCommands") {
		return fmt.Errorf("%s: lsids %s and %s", name, shortJSON(x), shortJSON(y))
	}
	return nil
}

// assertCollectionExists is assertCollectionExists and
// assertCollectionNotExists.
func (tr *testRun) assertCollectionExists(ctx context.Context, a *args) error {
	dbName, collName := a.str("databaseName"), a.str("collectionName")
	names, err := tr.r.internal.Database(dbName).ListCollectionNames(ctx, bson.D{{Key: "name", Value: collName}})
	if err != nil {
		return err
	}
	exists := slices.Contains(names, collName)
	if exists != (a.op == "assertCollectionExists") {
		return fmt.Errorf("%s: %s.%s exists: %v", a.op, dbName, collName, exists)
	}
	return nil
}

// assertIndexExists is assertIndexExists and assertIndexNotExists.
func (tr *testRun) assertIndexExists(ctx context.Context, a *args) error {
	dbName, collName, index := a.str("databaseName"), a.str("collectionName"), a.str("indexName")
	exists, err := tr.indexExists(ctx, dbName, collName, index)
	if err != nil {
		return err
	}
	if exists != (a.op == "assertIndexExists") {
		return fmt.Errorf("%s: index %s on %s.%s exists: %v", a.op, index, dbName, collName, exists)
	}
	return nil
}

// indexExists reports whether the collection has the index; a collection
// that does not exist (NamespaceNotFound) has none.
func (tr *testRun) indexExists(ctx context.Context, dbName, collName, index string) (bool, error) {
	cur, err := tr.r.internal.Database(dbName).Collection(collName).ListIndexes(ctx)
	var ce *sturdy.CommandError
	switch {
	case errors.As(err, &ce) && ce.Code == 26:
		return false, nil
	case err != nil:
		return false, err
	}
	var all []bson.Raw
	if err := cur.All(ctx, &all); err != nil {
		return false, err
	}
	for _, d := range all {
		if lookupString(d, "name") == index {
			return true, nil
		}
	}
	return false, nil
}

// eventArgs reads the arguments of waitForEvent and assertEventCount: the
// client, the event to match and how many.
func (tr *testRun) eventArgs(a *args) (*clientEntity, bson.Raw, int, error) {
	c, err := tr.clientArg(a)
	if err != nil {
		return nil, nil, 0, err
	}
	ev, err := a.doc("event")
	if err != nil || ev == nil {
		return nil, nil, 0, fmt.Errorf("%s: event argument: %v", a.op, err)
	}
	return c, ev, int(a.int64("count")), nil
}

// countEvents counts c's events that match ev; next is closed when c
// observes another event.
func (tr *testRun) countEvents(c *clientEntity, ev bson.Raw) (n int, next <-chan struct{}, _ error) {
	evs, next := c.rec.snapshot()
	for _, o := range evs {
		if err := tr.m.matchEvent(ev, o); err == nil {
			n++
		} else {
			var ue *unsupportedError
			if errors.As(err, &ue) {
				return 0, nil, err
			}
		}
	}
	return n, next, nil
}

func (tr *testRun) assertEventCount(_ context.Context, a *args) error {
	c, ev, want, err := tr.eventArgs(a)
	if err != nil {
		return err
	}
	n, _, err := tr.countEvents(c, ev)
	if err != nil {
		return err
	}
	if n != want {
		return fmt.Errorf("assertEventCount: %d matching events, want %d", n, want)
	}
	return nil
}

func (tr *testRun) waitForEvent(ctx context.Context, a *args) error {
	c, ev, want, err := tr.eventArgs(a)
	if err != nil {
		return err
	}
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		n, next, err := tr.countEvents(c, ev)
		if err != nil {
			return err
		}
		if n >= want {
			return nil
		}
		select {
		case <-next:
		case <-deadline.C:
			return fmt.Errorf("waitForEvent: %d of %d %s events after 10s", n, want, firstKey(ev))
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (tr *testRun) assertNumberConnectionsCheckedOut(_ context.Context, a *args) error {
	c, err := tr.clientArg(a)
	if err != nil {
		return err
	}
	want := int(a.int64("connections"))
	c.rec.mu.Lock()
	got := c.rec.checkedOut
	c.rec.mu.Unlock()
	if got != want {
		return fmt.Errorf("assertNumberConnectionsCheckedOut: %d checked out, want %d", got, want)
	}
	return nil
}

func (tr *testRun) wait(ctx context.Context, a *args) error {
	select {
	case <-time.After(time.Duration(a.int64("ms")) * time.Millisecond):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (tr *testRun) assertSessionTransactionState(_ context.Context, a *args) error {
	s, err := tr.sessionArg(a)
	if err != nil {
		return err
	}
	if got, want := s.sess.TransactionState().String(), a.str("state"); got != want {
		return fmt.Errorf("assertSessionTransactionState: state %s, want %s", got, want)
	}
	return a.check()
}

// assertSessionPinned is assertSessionPinned and assertSessionUnpinned.
func (tr *testRun) assertSessionPinned(_ context.Context, a *args) error {
	s, err := tr.sessionArg(a)
	if err != nil {
		return err
	}
	// A sharded transaction pins a mongos; in load-balanced mode it pins a
	// connection.
	pinned := s.sess.PinnedServer() != "" || s.sess.PinnedConnection()
	if want := a.op == "assertSessionPinned"; pinned != want {
		return fmt.Errorf("%s: the session is pinned to %q (connection pinned: %v)", a.op, s.sess.PinnedServer(), s.sess.PinnedConnection())
	}
	return a.check()
}

// sameAddr compares two host:port addresses, ignoring case.
func sameAddr(a, b string) bool { return strings.EqualFold(a, b) }
