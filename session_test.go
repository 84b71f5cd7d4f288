package sturdy_test

import (
	"errors"
	"testing"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/mongosim"
)

func TestExplicitSessionReusesLSID(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	rec := &recorder{}
	c := connect(t, cluster.URI(), func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	coll := c.Database("db").Collection("sess")

	s, err := c.StartSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, d("_id", 1), &sturdy.InsertOneOptions{Session: s}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.UpdateOne(ctx, d("_id", 1), d("$set", d("a", 1)), &sturdy.UpdateOptions{Session: s}); err != nil {
		t.Fatal(err)
	}
	cur, err := coll.Find(ctx, nil, &sturdy.FindOptions{Session: s})
	if err != nil {
		t.Fatal(err)
	}
	_ = cur.Close(ctx)
	lsid := s.ID()
	if lsid == nil {
		t.Fatal("session has no id after use")
	}
	var txns []int64
	for _, name := range []string{"insert", "update", "find"} {
		evs := rec.startedNamed(name)
		if len(evs) != 1 || !bytesEqual(evs[0].LSID, lsid) {
			t.Fatalf("%s: lsid %v, want the session's %v", name, evs, lsid)
		}
		if name != "find" {
			if evs[0].TxnNumber == nil {
				t.Fatalf("%s without txnNumber", name)
			}
			txns = append(txns, *evs[0].TxnNumber)
		}
	}
	if txns[1] != txns[0]+1 {
		t.Fatalf("txnNumbers %v: want consecutive numbers on one session", txns)
	}
	s.EndSession(ctx)
	if _, err := coll.InsertOne(ctx, d("_id", 2), &sturdy.InsertOneOptions{Session: s}); !errors.Is(err, sturdy.ErrSessionEnded) {
		t.Fatalf("ended session: %v", err)
	}

	// Another client's session is refused.
	other := connect(t, cluster.URI(), nil)
	s2, err := other.StartSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.EndSession(ctx)
	if _, err := coll.InsertOne(ctx, d("_id", 3), &sturdy.InsertOneOptions{Session: s2}); err == nil {
		t.Fatal("a session of another client was accepted")
	}
}

func TestDisconnectEndsSessions(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	rec := &recorder{}
	c := connect(t, cluster.URI(), func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	coll := c.Database("db").Collection("end")
	if _, err := coll.InsertOne(ctx, d("a", 1), nil); err != nil {
		t.Fatal(err)
	}
	lsid := rec.startedNamed("insert")[0].LSID
	if err := c.Disconnect(ctx); err != nil {
		t.Fatal(err)
	}
	ends := rec.startedNamed("endSessions")
	if len(ends) != 1 {
		t.Fatalf("%d endSessions commands", len(ends))
	}
	arr, _ := commandField(ends[0], "endSessions").ArrayOK()
	vals, _ := arr.Values()
	if len(vals) != 1 || !bytesEqual(vals[0].Document(), lsid) || ends[0].LSID != nil {
		t.Fatalf("endSessions %v, want the pooled session %v", ends[0].Command, lsid)
	}
}

func TestCommandEventIdentity(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	rec := &recorder{}
	c := connect(t, cluster.URI(), func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	coll := c.Database("db").Collection("ev")
	if _, err := coll.InsertOne(ctx, d("a", 1), nil); err != nil {
		t.Fatal(err)
	}
	st, ok := rec.startedNamed("insert"), rec.succeededNamed("insert")
	if len(st) != 1 || len(ok) != 1 {
		t.Fatalf("events: %d started, %d succeeded", len(st), len(ok))
	}
	s, e := st[0], ok[0]
	if s.OperationID == 0 || s.RequestID == 0 || s.ConnectionID == 0 || s.ServerAddress != cluster.Members()[0].Addr() || s.DatabaseName != "db" {
		t.Fatalf("started event identity %+v", s)
	}
	if e.OperationID != s.OperationID || e.RequestID != s.RequestID || e.ConnectionID != s.ConnectionID || e.ServerAddress != s.ServerAddress {
		t.Fatalf("succeeded event %+v does not match started %+v", e, s)
	}
	if s.ServerConnectionID == nil || *s.ServerConnectionID <= 0 {
		t.Fatal("no server connection id")
	}
	if commandField(s, "$db").StringValue() != "db" || commandField(s, "documents").Type == 0 {
		t.Fatalf("started command %v lacks $db or documents", s.Command)
	}

	// saslStart is redacted, whatever the server answers.
	_, _ = c.Database("admin").RunCommand(ctx, d("saslStart", 1, "mechanism", "SCRAM-SHA-256", "payload", []byte("n,,n=user,r=secret")), nil)
	sasl := rec.startedNamed("saslStart")
	if len(sasl) != 1 {
		t.Fatalf("%d saslStart events", len(sasl))
	}
	if len(sasl[0].Command) != 5 {
		t.Fatalf("saslStart not redacted: %v", sasl[0].Command)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, f := range rec.failed {
		if f.CommandName == "saslStart" {
			return
		}
	}
	for _, sc := range rec.succeeded {
		if sc.CommandName == "saslStart" && len(sc.Reply) != 5 {
			t.Fatalf("saslStart reply not redacted: %v", sc.Reply)
		}
	}
}
