package mongosim

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestWaitForSessionEndsOnMaxTimeMSAndKillOp: a retryable write waits
// while another write of its session runs (here one sleeping in $where);
// its maxTimeMS ends the wait, and so does killOp, through the request's
// context (opContext). Writes go through the official driver with the
// session's lsid and txnNumber in the command.
func TestWaitForSessionEndsOnMaxTimeMSAndKillOp(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("waits")
	admin := client.Database("admin")
	_, err := db.Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
	sdNoErr(t, err)
	lsid := bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: bytes.Repeat([]byte{9}, 16)}}}
	write := func(kind string, txn int64, extra ...bson.E) bson.D {
		cmd := bson.D{{Key: kind, Value: "c"}}
		if kind == "update" {
			cmd = append(cmd, bson.E{Key: "updates", Value: bson.A{bson.D{
				{Key: "q", Value: bson.D{{Key: "$where", Value: "function() { sleep(600000); return true; }"}}},
				{Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}}}}})
		} else {
			cmd = append(cmd, bson.E{Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: txn}}}})
		}
		cmd = append(cmd, bson.E{Key: "lsid", Value: lsid}, bson.E{Key: "txnNumber", Value: txn})
		return append(cmd, extra...)
	}
	held := make(chan error, 1)
	go func() {
		_, err := runCmd(ctx, db, write("update", 1))
		held <- err
	}()
	holder := opInProgress(t, ctx, admin, "updates")

	_, err = runCmd(ctx, db, write("insert", 2, bson.E{Key: "maxTimeMS", Value: int32(100)}))
	if ce := commandError(t, err, 50); !strings.Contains(ce.Message, "waiting for session") {
		t.Fatalf("maxTimeMS while waiting for the session: %v", ce)
	}

	waited := make(chan error, 1)
	go func() {
		_, err := runCmd(ctx, db, write("insert", 3))
		waited <- err
	}()
	waiter := opInProgress(t, ctx, admin, "documents")
	mustRun(t, ctx, admin, bson.D{{Key: "killOp", Value: 1}, {Key: "op", Value: waiter}})
	// As mongod, killOp interrupts the wait: 11601, not maxTimeMS's 50.
	commandError(t, <-waited, 11601)
	select {
	case err := <-held:
		t.Fatalf("the sleeping update ended with the waiter: %v", err)
	default:
	}

	mustRun(t, ctx, admin, bson.D{{Key: "killOp", Value: 1}, {Key: "op", Value: holder}})
	commandError(t, <-held, 11601)
	// The session is free: its next write runs.
	mustRun(t, ctx, db, write("insert", 4))
}

// TestOpContextCancelsAsAChildContext: opContext behaves as the child of
// context.WithCancelCause it replaced: canceled by its parent (Err, Done,
// even when Done is asked for later), by killOp (Canceled, killed) and at
// the end of the request, the first cancellation winning, and it cancels
// the contexts derived from it.
func TestOpContextCancelsAsAChildContext(t *testing.T) {
	waitDone := func(what string, ctx context.Context) {
		t.Helper()
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: Done never closed", what)
		}
	}
	// The parent first: its error stands, a later kill is not one.
	parent, cancelParent := context.WithCancelCause(context.Background())
	c := &opContext{parent: parent}
	done := c.Done()
	cancelParent(errors.New("connection closed"))
	waitDone("parent canceled", c)
	c.cancel(context.Canceled, errKilled)
	if !errors.Is(c.Err(), context.Canceled) || c.killed() || <-done != struct{}{} {
		t.Fatalf("parent canceled first: err %v, killed %v", c.Err(), c.killed())
	}

	// killOp first: Canceled and killed, Done closed, derived contexts
	// canceled, the parent untouched.
	parent, cancelParent = context.WithCancelCause(context.Background())
	defer cancelParent(nil)
	c = &opContext{parent: parent}
	derived, cancelDerived := context.WithCancel(c)
	defer cancelDerived()
	if derived.Value(opContextKey{}) != c || c.Err() != nil {
		t.Fatal("a derived context does not find its opContext, or it starts canceled")
	}
	c.cancel(context.Canceled, errKilled)
	waitDone("killed", c)
	waitDone("derived of killed", derived)
	if !errors.Is(c.Err(), context.Canceled) || !c.killed() || parent.Err() != nil {
		t.Fatalf("killed: err %v, killed %v, parent %v", c.Err(), c.killed(), parent.Err())
	}
	c.cancel(context.Canceled, nil) // the request's end changes nothing
	if !c.killed() {
		t.Fatal("the end of a killed request forgot the kill")
	}

	// maxTimeMS: the parent's deadline, DeadlineExceeded, Done asked for
	// after it passed.
	deadline, cancelDeadline := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancelDeadline()
	c = &opContext{parent: deadline}
	if d, ok := c.Deadline(); !ok || d.IsZero() {
		t.Fatal("no deadline")
	}
	<-deadline.Done()
	waitDone("deadline", c)
	if !errors.Is(c.Err(), context.DeadlineExceeded) || c.killed() {
		t.Fatalf("deadline: err %v", c.Err())
	}

	// The end of a request no one waited on.
	c = &opContext{parent: context.Background()}
	c.cancel(context.Canceled, nil)
	waitDone("ended", c)
	if !errors.Is(c.Err(), context.Canceled) || c.killed() {
		t.Fatalf("ended: err %v", c.Err())
	}
}
