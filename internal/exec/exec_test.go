package exec_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/blackpipe"
	"github.com/sturdy-go/sturdy/event"
	"github.com/sturdy-go/sturdy/internal/exec"
	"github.com/sturdy-go/sturdy/internal/session"
	"github.com/sturdy-go/sturdy/internal/topology"
	"github.com/sturdy-go/sturdy/mongoerr"
	"github.com/sturdy-go/sturdy/readpref"
	"github.com/sturdy-go/sturdy/wire"
)

func TestRetryableWriteOnReplicaSetCarriesLsidAndTxnNumber(t *testing.T) {
	srv, env := replicaSet(t)
	ch := executeAsync(env.exec, insertOp())
	r := receive(t, srv, "insert")
	if r.DB != "db" {
		t.Errorf("$db = %q, want db", r.DB)
	}
	lsid, err := r.Command.LookupErr("lsid", "id")
	if err != nil {
		t.Fatalf("no lsid.id in %v", r.Command)
	}
	if st, _, ok := lsid.BinaryOK(); !ok || st != 4 {
		t.Errorf("lsid.id is not a UUID: %v", lsid)
	}
	txn, err := r.Command.LookupErr("txnNumber")
	if err != nil || txn.Type != bson.TypeInt64 || txn.Int64() != 1 {
		t.Errorf("txnNumber = %v (%v), want int64 1", txn, err)
	}
	if has(r.Command, "$readPreference") {
		t.Error("a write carries $readPreference")
	}
	if err := r.Reply(bson.D{{Key: "n", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	o := wait(t, ch)
	if o.err != nil {
		t.Fatal(o.err)
	}
	if n, _ := o.res.Reply.Lookup("n").AsInt64OK(); n != 1 {
		t.Errorf("reply %v", o.res.Reply)
	}
	if o.res.Server == nil || o.res.Server.Addr() != srv.Addr() {
		t.Errorf("result server %v", o.res.Server)
	}
	if o.res.Session != nil {
		t.Error("implicit session returned without KeepSession")
	}
}

func TestTxnNumberOnlyForRetryableWritesWithRetryWrites(t *testing.T) {
	srv, env := replicaSet(t)
	s := autoReply(srv, "update", bson.D{{Key: "n", Value: 1}})
	ctx := ctx10(t)

	multi := &exec.Operation{DB: "db", Command: bson.D{{Key: "update", Value: "c"}}, Flags: exec.Write} // updateMany: not retryable
	if _, err := env.exec.Execute(ctx, multi); err != nil {
		t.Fatal(err)
	}
	env.exec.RetryWrites = false
	single := &exec.Operation{DB: "db", Command: bson.D{{Key: "update", Value: "c"}}, Flags: exec.Write | exec.RetryableWrite}
	if _, err := env.exec.Execute(ctx, single); err != nil {
		t.Fatal(err)
	}
	env.exec.RetryWrites = true
	if _, err := env.exec.Execute(ctx, single); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{false, false, true} {
		cmd := s.get(i).Command
		if !has(cmd, "lsid") {
			t.Errorf("command %d has no lsid", i)
		}
		if has(cmd, "txnNumber") != want {
			t.Errorf("command %d: txnNumber present = %v, want %v: %v", i, !want, want, cmd)
		}
	}
}

func TestStandaloneGetsLsidButNoTxnNumber(t *testing.T) {
	srv := blackpipe.Start(t) // standalone; its hello reports logicalSessionTimeoutMinutes: 30
	env := newEnv(t, topology.Options{Hosts: []string{srv.Addr()}, Direct: true})
	s := autoReply(srv, "insert", bson.D{{Key: "n", Value: 1}})
	if _, err := env.exec.Execute(ctx10(t), insertOp()); err != nil {
		t.Fatal(err)
	}
	cmd := s.get(0).Command
	if !has(cmd, "lsid") || has(cmd, "txnNumber") {
		t.Errorf("standalone insert: want lsid and no txnNumber: %v", cmd)
	}
}

func TestNoSessionSupportNoLsid(t *testing.T) {
	srv := blackpipe.StartWithOptions(t, blackpipe.Options{Hello: bson.D{{Key: "logicalSessionTimeoutMinutes", Value: nil}}})
	env := newEnv(t, topology.Options{Hosts: []string{srv.Addr()}, Direct: true})
	s := autoReply(srv, "insert", bson.D{{Key: "n", Value: 1}})
	ctx := ctx10(t)
	if _, err := env.exec.Execute(ctx, insertOp()); err != nil {
		t.Fatal(err)
	}
	if cmd := s.get(0).Command; has(cmd, "lsid") || has(cmd, "txnNumber") {
		t.Errorf("server without sessions got lsid/txnNumber: %v", cmd)
	}
	if env.sessions.Len() != 0 {
		t.Error("a server session was pooled although sessions are unsupported")
	}
	// An explicit session cannot be used with it.
	op := insertOp()
	op.Session = session.NewClient(env.sessions, false)
	if _, err := env.exec.Execute(ctx, op); !errors.Is(err, exec.ErrSessionsNotSupported) {
		t.Fatalf("explicit session on a sessionless server: %v", err)
	}
	if s.len() != 1 {
		t.Error("the command was sent anyway")
	}
}

func TestReadPreferenceOnMongos(t *testing.T) {
	srv := blackpipe.StartWithOptions(t, blackpipe.Options{Hello: bson.D{{Key: "msg", Value: "isdbgrid"}}})
	env := newEnv(t, topology.Options{Hosts: []string{srv.Addr()}})
	s := autoReply(srv, "find", bson.D{{Key: "cursor", Value: bson.D{{Key: "id", Value: int64(0)}, {Key: "ns", Value: "db.c"}, {Key: "firstBatch", Value: bson.A{}}}}})
	ctx := ctx10(t)
	find := func(rp *readpref.ReadPref) bson.Raw {
		t.Helper()
		n := s.len()
		if _, err := env.exec.Execute(ctx, &exec.Operation{DB: "db", Command: bson.D{{Key: "find", Value: "c"}}, ReadPref: rp}); err != nil {
			t.Fatal(err)
		}
		return s.get(n).Command
	}
	if cmd := find(nil); has(cmd, "$readPreference") {
		t.Errorf("primary read to mongos carries $readPreference: %v", cmd)
	}
	if cmd := find(&readpref.ReadPref{Mode: readpref.Primary}); has(cmd, "$readPreference") {
		t.Errorf("explicit primary read to mongos carries $readPreference: %v", cmd)
	}
	cmd := find(&readpref.ReadPref{Mode: readpref.SecondaryPreferred, TagSets: []readpref.TagSet{{"dc": "ny", "rack": "1"}, {}}, MaxStaleness: 120 * time.Second})
	want, _ := bson.Marshal(bson.D{
		{Key: "mode", Value: "secondaryPreferred"},
		{Key: "tags", Value: bson.A{bson.D{{Key: "dc", Value: "ny"}, {Key: "rack", Value: "1"}}, bson.D{}}},
		{Key: "maxStalenessSeconds", Value: int64(120)},
	})
	if got, err := cmd.LookupErr("$readPreference"); err != nil || !bytes.Equal(got.Document(), want) {
		t.Errorf("$readPreference = %v, want %v", got, bson.Raw(want))
	}
	cmd = find(&readpref.ReadPref{Mode: readpref.Nearest})
	if got, err := cmd.LookupErr("$readPreference", "mode"); err != nil || got.StringValue() != "nearest" {
		t.Errorf("nearest: $readPreference = %v", got)
	}
}

func TestDirectConnectionToSecondaryReadsPrimaryPreferred(t *testing.T) {
	members := blackpipe.StartReplicaSet(t, "rs0", 2, blackpipe.Options{})
	sec := members[1]
	env := newEnv(t, topology.Options{Hosts: []string{sec.Addr()}, Direct: true})
	s := autoReply(sec, "find", bson.D{{Key: "cursor", Value: bson.D{{Key: "id", Value: int64(0)}, {Key: "ns", Value: "db.c"}, {Key: "firstBatch", Value: bson.A{}}}}})
	ctx := ctx10(t)
	if _, err := env.exec.Execute(ctx, &exec.Operation{DB: "db", Command: bson.D{{Key: "find", Value: "c"}}}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.get(0).Command.LookupErr("$readPreference", "mode"); err != nil || got.StringValue() != "primaryPreferred" {
		t.Errorf("direct read from a secondary: $readPreference mode %v (%v), want primaryPreferred", got, err)
	}
	rp := &readpref.ReadPref{Mode: readpref.Secondary}
	if _, err := env.exec.Execute(ctx, &exec.Operation{DB: "db", Command: bson.D{{Key: "find", Value: "c"}}, ReadPref: rp}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.get(1).Command.LookupErr("$readPreference", "mode"); err != nil || got.StringValue() != "secondary" {
		t.Errorf("secondary read: $readPreference mode %v (%v)", got, err)
	}
}

func TestDirectStandaloneNeverGetsReadPreference(t *testing.T) {
	srv := blackpipe.Start(t)
	env := newEnv(t, topology.Options{Hosts: []string{srv.Addr()}, Direct: true})
	s := autoReply(srv, "count", bson.D{{Key: "n", Value: 0}})
	rp := &readpref.ReadPref{Mode: readpref.Secondary}
	if _, err := env.exec.Execute(ctx10(t), &exec.Operation{DB: "db", Command: bson.D{{Key: "count", Value: "c"}}, ReadPref: rp}); err != nil {
		t.Fatal(err)
	}
	if has(s.get(0).Command, "$readPreference") {
		t.Errorf("standalone got $readPreference: %v", s.get(0).Command)
	}
}

func TestUnacknowledgedWriteUsesMoreToComeAndNoLsid(t *testing.T) {
	srv, env := replicaSet(t)
	op := insertOp()
	op.Command = append(op.Command, bson.E{Key: "writeConcern", Value: bson.D{{Key: "w", Value: 0}}})
	op.Flags |= exec.Unacknowledged
	ch := executeAsync(env.exec, op)
	r := receive(t, srv, "insert")
	if r.Flags&wire.MoreToCome == 0 {
		t.Error("w:0 insert sent without moreToCome")
	}
	if has(r.Command, "lsid") || has(r.Command, "txnNumber") {
		t.Errorf("w:0 insert carries lsid/txnNumber: %v", r.Command)
	}
	_ = r.Reply(bson.D{}) // resolves the request; nothing is written back for moreToCome
	o := wait(t, ch)
	if o.err != nil || o.res.Reply != nil {
		t.Fatalf("w:0 result %v, %v; want nil reply and no error", o.res.Reply, o.err)
	}
	evs := env.rec.all()
	if len(evs) != 2 {
		t.Fatalf("%d events, want 2", len(evs))
	}
	if se, ok := evs[1].(*event.CommandSucceededEvent); !ok || se.Reply.Lookup("ok").AsInt64() != 1 || se.LSID != nil {
		t.Errorf("w:0 succeeded event %+v, want reply {ok: 1} and no lsid", evs[1])
	}
	if env.sessions.Len() != 0 {
		t.Error("a server session was taken for an unacknowledged write")
	}

	explicit := insertOp()
	explicit.Flags |= exec.Unacknowledged
	explicit.Session = session.NewClient(env.sessions, false)
	if _, err := env.exec.Execute(ctx10(t), explicit); !errors.Is(err, mongoerr.ErrUnacknowledgedSession) {
		t.Fatalf("w:0 with an explicit session: %v", err)
	}
}

func TestEventsCarryIdentityInOrder(t *testing.T) {
	srv, env := replicaSet(t)
	ch := executeAsync(env.exec, insertOp())
	r := receive(t, srv, "insert")
	lsid := r.Command.Lookup("lsid").Document()
	_ = r.Reply(bson.D{{Key: "n", Value: 1}})
	o := wait(t, ch)
	if o.err != nil {
		t.Fatal(o.err)
	}
	failing := autoReply(srv, "delete", bson.D{{Key: "ok", Value: 0}, {Key: "code", Value: 11000}, {Key: "errmsg", Value: "dup"}})
	_ = failing
	_, err := env.exec.Execute(ctx10(t), &exec.Operation{Name: "delete", DB: "db", Command: bson.D{{Key: "delete", Value: "c"}}, Flags: exec.Write, OperationID: 777})
	var ce *mongoerr.CommandError
	if !errors.As(err, &ce) || ce.Code != 11000 {
		t.Fatalf("delete error %v, want a CommandError 11000", err)
	}

	evs := env.rec.all()
	if len(evs) != 4 {
		t.Fatalf("%d events, want 4: %v", len(evs), evs)
	}
	st, ok1 := evs[0].(*event.CommandStartedEvent)
	sc, ok2 := evs[1].(*event.CommandSucceededEvent)
	if !ok1 || !ok2 {
		t.Fatalf("events %T %T, want started then succeeded", evs[0], evs[1])
	}
	if st.CommandName != "insert" || st.DatabaseName != "db" || sc.CommandName != "insert" {
		t.Errorf("names %q/%q/%q", st.CommandName, st.DatabaseName, sc.CommandName)
	}
	if st.OperationID == 0 || st.OperationID != sc.OperationID || st.OperationID != o.res.OperationID {
		t.Errorf("operation ids %d %d %d", st.OperationID, sc.OperationID, o.res.OperationID)
	}
	if st.RequestID != r.RequestID || sc.RequestID != r.RequestID {
		t.Errorf("request ids %d/%d, wire %d", st.RequestID, sc.RequestID, r.RequestID)
	}
	if st.ConnectionID <= 0 || sc.ConnectionID != st.ConnectionID {
		t.Errorf("connection ids %d/%d", st.ConnectionID, sc.ConnectionID)
	}
	if st.ServerConnectionID == nil || *st.ServerConnectionID != r.Conn.ID() {
		t.Errorf("server connection id %v, want %d", st.ServerConnectionID, r.Conn.ID())
	}
	if st.ServerAddress != srv.Addr() || sc.ServerAddress != srv.Addr() {
		t.Errorf("addresses %q/%q", st.ServerAddress, sc.ServerAddress)
	}
	if !bytes.Equal(st.LSID, lsid) || !bytes.Equal(sc.LSID, lsid) {
		t.Errorf("event lsid %v/%v, sent %v", st.LSID, sc.LSID, lsid)
	}
	if st.TxnNumber == nil || *st.TxnNumber != 1 || sc.TxnNumber == nil || *sc.TxnNumber != 1 {
		t.Errorf("event txnNumber %v/%v", st.TxnNumber, sc.TxnNumber)
	}
	if v, err := st.Command.LookupErr("$db"); err != nil || v.StringValue() != "db" {
		t.Errorf("started command lacks $db: %v", st.Command)
	}
	if !has(st.Command, "lsid") || !has(st.Command, "documents") {
		t.Errorf("started command %v", st.Command)
	}
	if sc.Duration <= 0 || sc.Reply.Lookup("n").AsInt64() != 1 {
		t.Errorf("succeeded duration %v reply %v", sc.Duration, sc.Reply)
	}

	st2, ok1 := evs[2].(*event.CommandStartedEvent)
	fe, ok2 := evs[3].(*event.CommandFailedEvent)
	if !ok1 || !ok2 {
		t.Fatalf("events %T %T, want started then failed", evs[2], evs[3])
	}
	if st2.OperationID != 777 || fe.OperationID != 777 {
		t.Errorf("given operation id not used: %d/%d", st2.OperationID, fe.OperationID)
	}
	if st2.TxnNumber != nil || fe.TxnNumber != nil {
		t.Error("non-retryable delete has a txnNumber in events")
	}
	if !errors.Is(fe.Failure, err) && fe.Failure != err {
		t.Errorf("failed event failure %v, returned %v", fe.Failure, err)
	}
	if fe.RequestID != st2.RequestID || fe.RequestID == st.RequestID {
		t.Errorf("request ids: started %d failed %d (first op %d)", st2.RequestID, fe.RequestID, st.RequestID)
	}
}

func TestImplicitSessionReturnedAndReused(t *testing.T) {
	srv, env := replicaSet(t)
	s := autoReply(srv, "insert", bson.D{{Key: "n", Value: 1}})
	ctx := ctx10(t)
	for range 2 {
		if _, err := env.exec.Execute(ctx, insertOp()); err != nil {
			t.Fatal(err)
		}
		if env.sessions.Len() != 1 {
			t.Fatalf("session pool has %d sessions after an operation, want 1", env.sessions.Len())
		}
	}
	a, b := s.get(0).Command, s.get(1).Command
	if !bytes.Equal(a.Lookup("lsid").Document(), b.Lookup("lsid").Document()) {
		t.Error("second operation did not reuse the pooled session")
	}
	if a.Lookup("txnNumber").Int64() != 1 || b.Lookup("txnNumber").Int64() != 2 {
		t.Errorf("txnNumbers %v, %v; want 1, 2 (preserved across reuse)", a.Lookup("txnNumber"), b.Lookup("txnNumber"))
	}
}

func TestDirtySessionDiscardedAfterNetworkError(t *testing.T) {
	srv, env := replicaSet(t)
	ch := executeAsync(env.exec, insertOp())
	r := receive(t, srv, "insert")
	first := r.Command.Lookup("lsid").Document()
	_ = r.Hangup()
	// The retry reuses the session; the second hang-up ends the operation.
	r = receive(t, srv, "insert")
	if !bytes.Equal(r.Command.Lookup("lsid").Document(), first) {
		t.Error("the retry changed the lsid")
	}
	_ = r.Hangup()
	o := wait(t, ch)
	if !mongoerr.IsNetworkError(o.err) {
		t.Fatalf("error %v, want a network error", o.err)
	}
	if mongoerr.SafeToRetry(o.err) {
		t.Error("SafeToRetry for a command that was sent")
	}
	if env.sessions.Len() != 0 {
		t.Fatal("dirty session returned to the pool")
	}
	if ev, ok := env.rec.all()[1].(*event.CommandFailedEvent); !ok || !mongoerr.IsNetworkError(ev.Failure) {
		t.Errorf("second event %T, want CommandFailed with the network error", env.rec.all()[1])
	}
	p := o.res.Server.Pool()
	if st := p.Stats(); st.InUse != 0 {
		t.Errorf("connection not returned after a network error: %+v", st)
	}
	if p.Generation() == 0 {
		t.Error("network error did not clear the pool (SDAM handoff)")
	}

	s := autoReply(srv, "insert", bson.D{{Key: "n", Value: 1}})
	if _, err := env.exec.Execute(ctx10(t), insertOp()); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(s.get(0).Command.Lookup("lsid").Document(), first) {
		t.Error("dirty session reused")
	}
}

func TestConnectionReturnedOnCommandError(t *testing.T) {
	srv, env := replicaSet(t)
	srv.Autorespond(blackpipe.Command("insert"), func(r *blackpipe.Request) bool {
		return r.ReplyWriteErrors(0, blackpipe.WriteError{Index: 0, Code: 11000, Message: "dup"}) == nil
	})
	res, err := env.exec.Execute(ctx10(t), insertOp())
	var we *mongoerr.WriteException
	if !errors.As(err, &we) || len(we.WriteErrors) != 1 || !mongoerr.IsDuplicateKey(err) {
		t.Fatalf("error %v, want a WriteException with a duplicate key", err)
	}
	if mongoerr.SafeToRetry(err) {
		t.Error("SafeToRetry for a write the server answered")
	}
	if res.Reply == nil {
		t.Error("reply not returned with the write exception")
	}
	st := res.Server.Pool().Stats()
	if st.InUse != 0 || st.Idle != 1 {
		t.Errorf("pool after a command error %+v, want the connection idle", st)
	}
	if env.sessions.Len() != 1 {
		t.Error("session not returned after a command error")
	}
}

func TestExplicitSessionKeptAcrossOperations(t *testing.T) {
	srv, env := replicaSet(t)
	s := autoReply(srv, "insert", bson.D{{Key: "n", Value: 1}})
	ctx := ctx10(t)
	sess := session.NewClient(env.sessions, false)
	for range 2 {
		op := insertOp()
		op.Session = sess
		res, err := env.exec.Execute(ctx, op)
		if err != nil {
			t.Fatal(err)
		}
		if res.Session != sess {
			t.Error("result does not name the explicit session")
		}
	}
	if env.sessions.Len() != 0 {
		t.Error("explicit session's server session pooled before End")
	}
	if !bytes.Equal(s.get(0).Command.Lookup("lsid").Document(), sess.ID()) || !bytes.Equal(s.get(1).Command.Lookup("lsid").Document(), sess.ID()) {
		t.Error("explicit session's lsid not sent")
	}
	sess.End()
	if env.sessions.Len() != 1 {
		t.Error("ended session not pooled")
	}
	op := insertOp()
	op.Session = sess
	if _, err := env.exec.Execute(ctx, op); !errors.Is(err, mongoerr.ErrSessionEnded) {
		t.Fatalf("operation on an ended session: %v", err)
	}
	if s.len() != 2 {
		t.Error("command sent with an ended session")
	}
}

func TestKeepSessionAndPinnedGetMore(t *testing.T) {
	members := blackpipe.StartReplicaSet(t, "rs0", 2, blackpipe.Options{})
	env := newEnv(t, topology.Options{Hosts: []string{members[0].Addr()}, SetName: "rs0"})
	sec := members[1]
	finds := autoReply(sec, "find", bson.D{{Key: "cursor", Value: bson.D{{Key: "id", Value: int64(42)}, {Key: "ns", Value: "db.c"}, {Key: "firstBatch", Value: bson.A{}}}}})
	gets := autoReply(sec, "getMore", bson.D{{Key: "cursor", Value: bson.D{{Key: "id", Value: int64(0)}, {Key: "ns", Value: "db.c"}, {Key: "nextBatch", Value: bson.A{}}}}})
	ctx := ctx10(t)
	res, err := env.exec.Execute(ctx, &exec.Operation{DB: "db", Command: bson.D{{Key: "find", Value: "c"}},
		ReadPref: &readpref.ReadPref{Mode: readpref.Secondary}, Flags: exec.KeepSession})
	if err != nil {
		t.Fatal(err)
	}
	if res.Session == nil || res.Session.Ended || res.Server.Addr() != sec.Addr() {
		t.Fatalf("find result session %v server %v", res.Session, res.Server)
	}
	if env.sessions.Len() != 0 {
		t.Fatal("cursor's session pooled while the cursor is open")
	}
	if got := finds.get(0).Command.Lookup("$readPreference", "mode").StringValue(); got != "secondary" {
		t.Errorf("secondary read on a replica set: $readPreference mode %q", got)
	}
	_, err = env.exec.Execute(ctx, &exec.Operation{DB: "db", Command: bson.D{{Key: "getMore", Value: int64(42)}, {Key: "collection", Value: "c"}},
		Server: res.Server, Session: res.Session})
	if err != nil {
		t.Fatal(err)
	}
	gm := gets.get(0).Command
	if !bytes.Equal(gm.Lookup("lsid").Document(), finds.get(0).Command.Lookup("lsid").Document()) {
		t.Error("getMore did not reuse the cursor's session")
	}
	if has(gm, "$readPreference") {
		t.Errorf("pinned getMore carries $readPreference: %v", gm)
	}
	if n := res.Server.OperationCount(); n != 0 {
		t.Errorf("server operation count %d after all operations, want 0", n)
	}
	res.Session.End()
	if env.sessions.Len() != 1 {
		t.Error("cursor session not pooled after End")
	}
}

func TestRedactsSensitiveCommands(t *testing.T) {
	srv, env := replicaSet(t)
	autoReply(srv, "saslStart", bson.D{{Key: "payload", Value: "secret"}})
	ctx := ctx10(t)
	if _, err := env.exec.Execute(ctx, &exec.Operation{DB: "admin", Command: bson.D{{Key: "saslStart", Value: 1}, {Key: "payload", Value: "pw"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.exec.Execute(ctx, &exec.Operation{DB: "admin", Command: bson.D{{Key: "hello", Value: 1}, {Key: "speculativeAuthenticate", Value: bson.D{{Key: "x", Value: 1}}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.exec.Execute(ctx, &exec.Operation{DB: "admin", Command: bson.D{{Key: "hello", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	evs := env.rec.all()
	if len(evs) != 6 {
		t.Fatalf("%d events", len(evs))
	}
	for i := 0; i < 4; i += 2 {
		st, sc := evs[i].(*event.CommandStartedEvent), evs[i+1].(*event.CommandSucceededEvent)
		if len(st.Command) != 5 || len(sc.Reply) != 5 {
			t.Errorf("%s not redacted: %v / %v", st.CommandName, st.Command, sc.Reply)
		}
	}
	st, sc := evs[4].(*event.CommandStartedEvent), evs[5].(*event.CommandSucceededEvent)
	if !has(st.Command, "hello") || !has(sc.Reply, "isWritablePrimary") {
		t.Errorf("plain hello redacted: %v / %v", st.Command, sc.Reply)
	}
}

func TestDocumentSequencesSentAndShownInEvents(t *testing.T) {
	srv, env := replicaSet(t)
	s := autoReply(srv, "insert", bson.D{{Key: "n", Value: 2}})
	d1, _ := bson.Marshal(bson.D{{Key: "_id", Value: 1}})
	d2, _ := bson.Marshal(bson.D{{Key: "_id", Value: 2}})
	op := &exec.Operation{DB: "db", Command: bson.D{{Key: "insert", Value: "c"}}, Flags: exec.Write | exec.RetryableWrite,
		Sequences: []wire.DocumentSequence{{Identifier: "documents", Documents: []bson.Raw{d1, d2}}}}
	if _, err := env.exec.Execute(ctx10(t), op); err != nil {
		t.Fatal(err)
	}
	r := s.get(0)
	if len(r.Sequences) != 1 || r.Sequences[0].Identifier != "documents" || len(r.Sequences[0].Documents) != 2 {
		t.Fatalf("server got sequences %v", r.Sequences)
	}
	st := env.rec.all()[0].(*event.CommandStartedEvent)
	docs, err := st.Command.LookupErr("documents")
	if err != nil {
		t.Fatalf("started event command lacks documents: %v", st.Command)
	}
	if vals, _ := docs.Array().Values(); len(vals) != 2 {
		t.Errorf("documents in event: %v", docs)
	}
}

func TestClusterTimeGossip(t *testing.T) {
	srv, env := replicaSet(t)
	ct := bson.D{{Key: "clusterTime", Value: bson.Timestamp{T: 100, I: 1}}, {Key: "signature", Value: bson.D{{Key: "keyId", Value: int64(0)}}}}
	s := autoReply(srv, "ping2", bson.D{{Key: "$clusterTime", Value: ct}})
	ctx := ctx10(t)
	for range 2 {
		if _, err := env.exec.Execute(ctx, &exec.Operation{DB: "admin", Command: bson.D{{Key: "ping2", Value: 1}}}); err != nil {
			t.Fatal(err)
		}
	}
	if has(s.get(0).Command, "$clusterTime") {
		t.Error("first command carries a $clusterTime nobody sent")
	}
	got, err := s.get(1).Command.LookupErr("$clusterTime", "clusterTime")
	if err != nil {
		t.Fatalf("second command lacks $clusterTime: %v", s.get(1).Command)
	}
	if ts, i := got.Timestamp(); ts != 100 || i != 1 {
		t.Errorf("$clusterTime %v", got)
	}
}

func TestServerSelectionErrorPropagates(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	env := newEnv(t, topology.Options{Hosts: []string{addr}, ServerSelectionTimeout: 200 * time.Millisecond})
	_, err = env.exec.Execute(context.Background(), insertOp())
	var sse *mongoerr.ServerSelectionError
	if !errors.As(err, &sse) {
		t.Fatalf("error %v, want a ServerSelectionError", err)
	}
	if !mongoerr.SafeToRetry(err) || !mongoerr.SafeToRetry(fmt.Errorf("op: %w", err)) {
		t.Errorf("SafeToRetry false for %v, but nothing was sent", err)
	}
	if len(env.rec.all()) != 0 {
		t.Error("events published although nothing was sent")
	}
}

// logHandler collects slog records.
type logHandler struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *logHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *logHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}
func (h *logHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logHandler) WithGroup(string) slog.Handler      { return h }

func TestFailedAttemptIsLogged(t *testing.T) {
	srv, env := replicaSet(t)
	h := &logHandler{}
	env.exec.Logger = slog.New(h)
	srv.Autorespond(blackpipe.Command("insert"), func(r *blackpipe.Request) bool {
		return r.ReplyError(91, "shutting down", "RetryableWriteError") == nil
	})
	if _, err := env.exec.Execute(ctx10(t), insertOp()); err == nil {
		t.Fatal("want an error")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	// The failed attempt, the retry it caused, the failed retry.
	if len(h.records) != 3 {
		t.Fatalf("%d log records, want 3", len(h.records))
	}
	for i, r := range h.records {
		attrs := map[string]string{}
		r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
		if r.Level != slog.LevelDebug || attrs["command"] != "insert" || attrs["txnNumber"] != "1" {
			t.Errorf("log record %d: %q %v", i, r.Message, attrs)
		}
		switch i {
		case 0, 2:
			if r.Message != "command attempt failed" || !strings.Contains(attrs["error"], "shutting down") {
				t.Errorf("log record %d: %q %v", i, r.Message, attrs)
			}
		case 1:
			if r.Message != "retrying command" || attrs["retry"] != "1" || !strings.Contains(attrs["reason"], "shutting down") {
				t.Errorf("log record %d: %q %v", i, r.Message, attrs)
			}
		}
	}
}

// The started event goes out before the command is written, so a monitor
// sees it while the server is still holding the request.
func TestStartedEventPrecedesTheSend(t *testing.T) {
	srv, env := replicaSet(t)
	ch := executeAsync(env.exec, insertOp())
	r := receive(t, srv, "insert")
	evs := env.rec.all()
	if len(evs) != 1 {
		t.Fatalf("%d events while the server holds the request, want the started event alone", len(evs))
	}
	if st, ok := evs[0].(*event.CommandStartedEvent); !ok || st.RequestID != r.RequestID {
		t.Fatalf("event %#v, want started for request %d", evs[0], r.RequestID)
	}
	_ = r.Reply(bson.D{{Key: "n", Value: 1}})
	if o := wait(t, ch); o.err != nil {
		t.Fatal(o.err)
	}
}
