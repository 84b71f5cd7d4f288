package blackpipe

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/sturdy-go/sturdy/wire"
)

func TestDefaultsLetDriverConnectAndPing(t *testing.T) {
	s := Start(t)
	c := connect(t, s.URI(), options.Client().SetAppName("myapp"))
	ctx := testCtx(t, 10*time.Second)
	if err := c.Ping(ctx, nil); err != nil {
		t.Fatalf("ping: %v", err)
	}
	var info bson.M
	if err := c.Database("admin").RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err != nil {
		t.Fatalf("buildInfo: %v", err)
	}
	if info["version"] != "8.0.0" {
		t.Errorf("buildInfo version = %v", info["version"])
	}
	var hello bson.M
	if err := c.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		t.Fatalf("hello: %v", err)
	}
	if hello["isWritablePrimary"] != true || hello["maxWireVersion"] != int32(25) || hello["maxWriteBatchSize"] != int32(100000) {
		t.Errorf("hello = %v", hello)
	}
	if tv, _ := hello["topologyVersion"].(bson.D); len(tv) != 2 || tv[0].Key != "processId" {
		t.Errorf("hello topologyVersion = %v", hello["topologyVersion"])
	}
	// The driver may have just opened a connection (a monitor's or the
	// pool's) whose hello has not arrived yet: wait for every handshake.
	var conns []*Conn
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		conns = s.Connections()
		handshaken := len(conns) > 0
		for _, cn := range conns {
			handshaken = handshaken && cn.AppName() != ""
		}
		if handshaken || time.Now().After(deadline) {
			break
		}
	}
	if len(conns) == 0 {
		t.Fatal("no connections")
	}
	for _, cn := range conns {
		if cn.AppName() != "myapp" {
			t.Errorf("conn %d AppName = %q", cn.ID(), cn.AppName())
		}
	}
	if s.Requests() < 3 {
		t.Errorf("Requests = %d", s.Requests())
	}
}

func TestHelloMergesOptionsAndNegotiatesCompression(t *testing.T) {
	s := StartWithOptions(t, Options{
		MaxWireVersion: 21,
		Compressors:    []string{"zlib", "zstd"},
		Hello:          bson.D{{Key: "maxWriteBatchSize", Value: int32(7)}, {Key: "msg", Value: "isdbgrid"}},
	})
	rc := dialRaw(t, s.Addr())
	reply := rc.roundTrip(bson.D{
		{Key: "hello", Value: 1},
		{Key: "compression", Value: bson.A{"snappy", "zstd", "zlib"}},
		{Key: "$db", Value: "admin"},
	})
	var h bson.M
	if err := bson.Unmarshal(reply, &h); err != nil {
		t.Fatal(err)
	}
	if h["maxWireVersion"] != int32(21) || h["maxWriteBatchSize"] != int32(7) || h["msg"] != "isdbgrid" {
		t.Errorf("hello = %v", h)
	}
	if comp, _ := h["compression"].(bson.A); len(comp) != 1 || comp[0] != "zstd" {
		t.Errorf("compression = %v, want [zstd]", h["compression"])
	}
}

func TestLegacyOpQueryHello(t *testing.T) {
	s := Start(t)
	rc := dialRaw(t, s.Addr())
	q, _ := bson.Marshal(bson.D{{Key: "$query", Value: bson.D{
		{Key: "isMaster", Value: 1},
		{Key: "helloOk", Value: true},
		{Key: "client", Value: bson.D{{Key: "application", Value: bson.D{{Key: "name", Value: "legacy"}}}}},
	}}})
	rc.send(wire.AppendQuery(nil, 42, 0, &wire.Query{FullCollectionName: "admin.$cmd", NumberToReturn: -1, Query: q}))
	m, err := rc.read()
	if err != nil {
		t.Fatal(err)
	}
	if m.Reply == nil || m.Header.ResponseTo != 42 || len(m.Reply.Documents) != 1 {
		t.Fatalf("want one OP_REPLY to 42, got %+v", m)
	}
	var h bson.M
	if err := bson.Unmarshal(m.Reply.Documents[0], &h); err != nil {
		t.Fatal(err)
	}
	if h["ismaster"] != true || h["helloOk"] != true || h["ok"] != 1.0 {
		t.Errorf("legacy hello = %v", h)
	}
	if _, ok := h["isWritablePrimary"]; ok {
		t.Errorf("legacy hello has isWritablePrimary: %v", h)
	}
	if conns := s.Connections(); len(conns) != 1 || conns[0].AppName() != "legacy" {
		t.Errorf("AppName not recorded from legacy hello")
	}
}

func TestReceiveAndReplyInsert(t *testing.T) {
	s := Start(t)
	c := connect(t, s.URI())
	ctx := testCtx(t, 10*time.Second)
	coll := c.Database("db").Collection("coll")
	type result struct {
		res *mongo.InsertManyResult
		err error
	}
	ch := make(chan result, 1)
	go func() {
		res, err := coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}})
		ch <- result{res, err}
	}()
	r, err := s.Receive(ctx, Command("insert"))
	if err != nil {
		t.Fatal(err)
	}
	if r.DB != "db" || r.OpCode != wire.OpMsg || r.Name != "insert" {
		t.Errorf("request = %v opcode %v", r, r.OpCode)
	}
	if len(r.Sequences) != 1 || r.Sequences[0].Identifier != "documents" || len(r.Sequences[0].Documents) != 2 {
		t.Fatalf("sequences = %+v", r.Sequences)
	}
	d, err := r.Doc()
	if err != nil {
		t.Fatal(err)
	}
	v, _ := lookup(d, "documents")
	docs, _ := v.(bson.A)
	if len(docs) != 2 || docs[1].(bson.D)[0].Value != int32(2) {
		t.Errorf("Doc documents = %v", d)
	}
	if !Doc(bson.D{{Key: "insert", Value: "coll"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: int64(2)}}}}}).Match(r) {
		t.Errorf("Doc matcher did not match the folded sequence")
	}
	if err := r.Reply(bson.D{{Key: "n", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	if !r.Replied() {
		t.Error("Replied() = false after Reply")
	}
	if err := r.Reply(bson.D{}); !errors.Is(err, ErrAlreadyReplied) {
		t.Errorf("second Reply: %v", err)
	}
	res := <-ch
	if res.err != nil || len(res.res.InsertedIDs) != 2 {
		t.Fatalf("InsertMany = %+v, %v", res.res, res.err)
	}
}

// A reply the server cannot encode still answers the client: InternalError
// instead of a command that waits for its timeout.
func TestUnencodableReplyAnswersInternalError(t *testing.T) {
	s := Start(t)
	c := connect(t, s.URI())
	ctx := testCtx(t, 10*time.Second)
	errc := make(chan error, 1)
	go func() {
		errc <- c.Database("db").RunCommand(ctx, bson.D{{Key: "count", Value: "c"}}).Err()
	}()
	r, err := s.Receive(ctx, Command("count"))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Reply(bson.D{{Key: "bad\x00key", Value: 1}}); err == nil {
		t.Fatal("Reply encoded a key holding NUL")
	}
	var ce mongo.CommandError
	if err := <-errc; !errors.As(err, &ce) || ce.Code != 1 || !strings.Contains(ce.Message, "could not be encoded") {
		t.Fatalf("the client got %v, want InternalError naming the encoding failure", err)
	}
}

func TestReplyHelpersSeenByDriver(t *testing.T) {
	s := Start(t)
	c := connect(t, s.URI())
	ctx := testCtx(t, 10*time.Second)
	coll := c.Database("db").Collection("coll")

	errc := runAsync(func() error { _, err := coll.InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); return err })
	r, err := s.Receive(ctx, Command("insert"))
	if err != nil {
		t.Fatal(err)
	}
	// Not a state-change code: that would make the driver wait for its
	// monitor's next awaitable hello before selecting this server again.
	_ = r.ReplyError(2, "bad value", "SomeLabel")
	err = waitErr(t, errc)
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 2 || ce.Name != "BadValue" || !ce.HasErrorLabel("SomeLabel") {
		t.Errorf("ReplyError seen as %v", err)
	}

	errc = runAsync(func() error { _, err := coll.InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); return err })
	if r, err = s.Receive(ctx, Command("insert")); err != nil {
		t.Fatal(err)
	}
	_ = r.ReplyWriteErrors(0, WriteError{Index: 0, Code: 11000, Message: "dup"})
	if err := waitErr(t, errc); !mongo.IsDuplicateKeyError(err) {
		t.Errorf("ReplyWriteErrors seen as %v", err)
	}

	errc = runAsync(func() error { _, err := coll.InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); return err })
	if r, err = s.Receive(ctx, Command("insert")); err != nil {
		t.Fatal(err)
	}
	_ = r.ReplyWriteConcernError(1, WriteConcernError{Code: 64, Message: "waiting for replication timed out", Labels: []string{"X"}})
	err = waitErr(t, errc)
	var we mongo.WriteException
	if !errors.As(err, &we) || we.WriteConcernError == nil || we.WriteConcernError.Code != 64 || !we.HasErrorLabel("X") {
		t.Errorf("ReplyWriteConcernError seen as %v", err)
	}

	type found struct {
		docs []bson.M
		err  error
	}
	fc := make(chan found, 1)
	go func() {
		cur, err := coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(1))
		if err != nil {
			fc <- found{nil, err}
			return
		}
		var docs []bson.M
		err = cur.All(ctx, &docs)
		fc <- found{docs, err}
	}()
	if r, err = s.Receive(ctx, Command("find")); err != nil {
		t.Fatal(err)
	}
	_ = r.ReplyCursor("db.coll", 77, true, bson.D{{Key: "a", Value: 1}})
	r, err = s.Receive(ctx, Doc(bson.D{{Key: "getMore", Value: int64(77)}, {Key: "collection", Value: "coll"}}))
	if err != nil {
		t.Fatal(err)
	}
	_ = r.ReplyCursor("db.coll", 0, false, bson.D{{Key: "a", Value: 2}})
	f := <-fc
	if f.err != nil || len(f.docs) != 2 || f.docs[1]["a"] != int32(2) {
		t.Errorf("find = %v, %v", f.docs, f.err)
	}
}

func TestReceiveTimeoutNamesMatcher(t *testing.T) {
	s := StartWithOptions(t, Options{ReceiveTimeout: 100 * time.Millisecond})
	rc := dialRaw(t, s.Addr())
	rc.sendMsg(0, bson.D{{Key: "find", Value: "c"}, {Key: "$db", Value: "db"}})
	start := time.Now()
	_, err := s.Receive(context.Background(), Command("insert"))
	if time.Since(start) > 2*time.Second {
		t.Errorf("Receive took %v with ReceiveTimeout 100ms", time.Since(start))
	}
	var re *ReceiveError
	if !errors.As(err, &re) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(err.Error(), `Command("insert")`) || !strings.Contains(err.Error(), "find") {
		t.Errorf("error does not name matcher and queued request: %v", err)
	}
	// The unmatched request is still queued.
	r, err := s.Receive(context.Background(), Command("FIND"))
	if err != nil || r.Name != "find" {
		t.Fatalf("find not queued: %v", err)
	}
	_ = r.Reply(nil)
	if b := rc.nc; b == nil {
		t.Fatal()
	}
	if m, err := rc.read(); err != nil || m.Msg == nil {
		t.Fatalf("reply: %v", err)
	}
}

func TestAutorespondNewestFirstAndCancel(t *testing.T) {
	s := Start(t)
	c := connect(t, s.URI())
	ctx := testCtx(t, 10*time.Second)
	reply := func(v int) Handler {
		return func(r *Request) bool { _ = r.Reply(bson.D{{Key: "v", Value: v}}); return true }
	}
	cancel1 := s.Autorespond(Command("foo"), reply(1))
	cancel2 := s.Autorespond(Command("foo"), reply(2))
	var passed atomic.Int32
	cancel3 := s.Autorespond(Any, func(r *Request) bool { passed.Add(1); return false })
	defer cancel3()
	run := func() (int32, error) {
		var out struct{ V int32 }
		err := c.Database("db").RunCommand(ctx, bson.D{{Key: "foo", Value: 1}}).Decode(&out)
		return out.V, err
	}
	if v, err := run(); err != nil || v != 2 {
		t.Errorf("newest autoresponder: v=%d err=%v", v, err)
	}
	cancel2()
	if v, err := run(); err != nil || v != 1 {
		t.Errorf("after cancel: v=%d err=%v", v, err)
	}
	cancel1()
	cancel1() // idempotent
	errc := runAsync(func() error { _, err := run(); return err })
	r, err := s.Receive(ctx, Command("foo"))
	if err != nil {
		t.Fatalf("foo not queued after cancel: %v", err)
	}
	_ = r.Reply(nil)
	if err := waitErr(t, errc); err != nil {
		t.Fatal(err)
	}
	if passed.Load() < 3 {
		t.Errorf("pass-through autoresponder saw %d requests", passed.Load())
	}
}

func TestHandlerOrder(t *testing.T) {
	s := StartWithOptions(t, Options{Handler: func(r *Request) bool {
		switch r.Name {
		case "ping", "bar":
			_ = r.Reply(bson.D{{Key: "by", Value: "handler"}})
			return true
		}
		return false
	}})
	s.Autorespond(Command("bar"), func(r *Request) bool {
		_ = r.Reply(bson.D{{Key: "by", Value: "auto"}})
		return true
	})
	rc := dialRaw(t, s.Addr())
	by := func(name string) bson.RawValue {
		return rc.roundTrip(bson.D{{Key: name, Value: 1}, {Key: "$db", Value: "admin"}}).Lookup("by")
	}
	if v := by("ping"); v.StringValue() != "handler" {
		t.Errorf("ping answered by %v, want handler before defaults", v)
	}
	if v := by("bar"); v.StringValue() != "auto" {
		t.Errorf("bar answered by %v, want autoresponder before handler", v)
	}
	if v := by("buildInfo"); v.Type != 0 {
		t.Errorf("buildInfo answered by %v, want the defaults", v)
	}
}

func TestNoDefaults(t *testing.T) {
	s := StartWithOptions(t, Options{NoDefaults: true})
	rc := dialRaw(t, s.Addr())
	rc.sendMsg(0, bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}})
	r, err := s.Receive(testCtx(t, 5*time.Second), Command("hello"))
	if err != nil {
		t.Fatalf("hello not queued with NoDefaults: %v", err)
	}
	_ = r.Reply(bson.D{{Key: "custom", Value: true}})
	m, err := rc.read()
	if err != nil || !m.Msg.Body.Lookup("custom").Boolean() {
		t.Fatalf("custom hello reply: %v", err)
	}
}

func TestMoreToComeGetsNoReply(t *testing.T) {
	s := Start(t)
	var seen atomic.Int32
	s.Autorespond(Command("insert"), func(r *Request) bool {
		seen.Add(1)
		return r.Reply(nil) == nil
	})
	rc := dialRaw(t, s.Addr())
	rc.sendMsg(wire.MoreToCome, bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "db"}})
	// The next reply on the wire must be for ping, not for the insert.
	reply := rc.roundTrip(bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})
	if reply.Lookup("ok").Double() != 1 || seen.Load() != 1 {
		t.Errorf("reply %v seen %d", reply, seen.Load())
	}
}

func TestAwaitableHelloWaits(t *testing.T) {
	s := StartWithOptions(t, Options{MaxAwaitTime: time.Hour})
	rc := dialRaw(t, s.Addr())
	h := rc.roundTrip(bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}})
	tv := h.Lookup("topologyVersion").Document()
	awaitable := bson.D{
		{Key: "hello", Value: 1},
		{Key: "topologyVersion", Value: tv},
		{Key: "maxAwaitTimeMS", Value: int64(300)},
		{Key: "$db", Value: "admin"},
	}
	start := time.Now()
	rc.roundTrip(awaitable)
	if d := time.Since(start); d < 290*time.Millisecond || d > 3*time.Second {
		t.Errorf("awaitable hello answered after %v, want ~300ms", d)
	}

	// UpdateHello answers it at once with the new counter.
	awaitable[2].Value = int64(10_000)
	go func() {
		time.Sleep(100 * time.Millisecond)
		s.UpdateHello(bson.D{{Key: "isWritablePrimary", Value: false}})
	}()
	start = time.Now()
	h = rc.roundTrip(awaitable)
	if d := time.Since(start); d > 3*time.Second || d < 90*time.Millisecond {
		t.Errorf("UpdateHello did not wake the awaitable hello (%v)", d)
	}
	if h.Lookup("isWritablePrimary").Boolean() || h.Lookup("topologyVersion", "counter").Int64() != 1 {
		t.Errorf("after UpdateHello: %v", h)
	}

	// The default MaxAwaitTime caps the hold.
	s2 := Start(t)
	rc2 := dialRaw(t, s2.Addr())
	h = rc2.roundTrip(bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}})
	awaitable[1].Value = h.Lookup("topologyVersion").Document()
	start = time.Now()
	rc2.roundTrip(awaitable)
	if d := time.Since(start); d < DefaultMaxAwaitTime-10*time.Millisecond || d > 3*time.Second {
		t.Errorf("default hold %v, want %v", d, DefaultMaxAwaitTime)
	}

	// An awaitable hello with a stale topologyVersion is answered at once.
	start = time.Now()
	rc.roundTrip(awaitable)
	if d := time.Since(start); d > time.Second {
		t.Errorf("stale topologyVersion waited %v", d)
	}
}

func TestCloseIsFastAndUnblocks(t *testing.T) {
	s, err := Listen(Options{MaxAwaitTime: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	// Pending: a NoReply request, a ReplyAfter of an hour, an awaitable hello,
	// and a Receive.
	s.Autorespond(Command("stuck"), func(r *Request) bool { r.NoReply(); return true })
	rc1 := dialRaw(t, s.Addr())
	rc1.sendMsg(0, bson.D{{Key: "stuck", Value: 1}, {Key: "$db", Value: "db"}})
	rc2 := dialRaw(t, s.Addr())
	rc2.sendMsg(0, bson.D{{Key: "slow", Value: 1}, {Key: "$db", Value: "db"}})
	r, err := s.Receive(testCtx(t, 5*time.Second), Command("slow"))
	if err != nil {
		t.Fatal(err)
	}
	after := runAsync(func() error { return r.ReplyAfter(time.Hour, nil) })
	rc3 := dialRaw(t, s.Addr())
	h := rc3.roundTrip(bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}})
	rc3.sendMsg(0, bson.D{{Key: "hello", Value: 1}, {Key: "topologyVersion", Value: h.Lookup("topologyVersion").Document()},
		{Key: "maxAwaitTimeMS", Value: int64(3_600_000)}, {Key: "$db", Value: "admin"}})
	recv := runAsync(func() error { _, err := s.Receive(context.Background(), Command("never")); return err })
	time.Sleep(100 * time.Millisecond)

	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Close took %v", d)
	}
	if err := waitErr(t, after); !errors.Is(err, ErrConnClosed) {
		t.Errorf("ReplyAfter after Close: %v", err)
	}
	if err := waitErr(t, recv); !errors.Is(err, ErrServerClosed) {
		t.Errorf("Receive after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if n := len(s.Connections()); n != 0 {
		t.Errorf("%d connections after Close", n)
	}
	for _, rc := range []*rawClient{rc1, rc2, rc3} {
		if _, err := rc.read(); err == nil {
			t.Error("connection still answering after Close")
		}
	}
}

func TestConnValuesAndOnConnClose(t *testing.T) {
	closed := make(chan int64, 1)
	s := StartWithOptions(t, Options{OnConnClose: func(c *Conn) { closed <- c.ID() }})
	s.Autorespond(Command("set"), func(r *Request) bool {
		r.Conn.SetValue("k", "v1")
		return r.Reply(nil) == nil
	})
	s.Autorespond(Command("get"), func(r *Request) bool {
		return r.Reply(bson.D{{Key: "v", Value: r.Conn.Value("k")}}) == nil
	})
	rc := dialRaw(t, s.Addr())
	rc.roundTrip(bson.D{{Key: "set", Value: 1}, {Key: "$db", Value: "db"}})
	if v := rc.roundTrip(bson.D{{Key: "get", Value: 1}, {Key: "$db", Value: "db"}}).Lookup("v").StringValue(); v != "v1" {
		t.Errorf("Value = %q", v)
	}
	conns := s.Connections()
	if len(conns) != 1 {
		t.Fatalf("%d conns", len(conns))
	}
	ctx := conns[0].Context()
	_ = rc.nc.Close()
	select {
	case id := <-closed:
		if id != conns[0].ID() {
			t.Errorf("OnConnClose id %d", id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("OnConnClose not called")
	}
	if ctx.Err() == nil {
		t.Error("Conn context not canceled")
	}
}

// WatchClose: while a request waits, a client hanging up cancels its
// context at once; a request sent meanwhile is held until the first is
// answered, then served in order.
func TestWatchCloseNoticesHangupAndHoldsNextRequest(t *testing.T) {
	s := Start(t)
	pending := make(chan *Request, 2)
	s.Autorespond(Command("wait"), func(r *Request) bool {
		r.WatchClose()
		pending <- r
		return true
	})
	// A client that hangs up while its request waits.
	rc := dialRaw(t, s.Addr())
	rc.sendMsg(0, bson.D{{Key: "wait", Value: 1}, {Key: "$db", Value: "admin"}})
	r := <-pending
	_ = rc.nc.Close()
	select {
	case <-r.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("hang-up not noticed while the request waited")
	}
	// A client that sends another request while the first waits.
	rc2 := dialRaw(t, s.Addr())
	id := rc2.sendMsg(0, bson.D{{Key: "wait", Value: 1}, {Key: "$db", Value: "admin"}})
	r2 := <-pending
	pingID := rc2.sendMsg(0, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})
	if err := r2.Reply(bson.D{{Key: "n", Value: int32(1)}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []int32{id, pingID} {
		m, err := rc2.read()
		if err != nil {
			t.Fatal(err)
		}
		if m.Header.ResponseTo != want {
			t.Fatalf("reply to %d, want %d", m.Header.ResponseTo, want)
		}
	}
}

// TestTooDeepGetsErrorReply: a well-framed request nested deeper than
// wire.MaxDocumentNesting is answered with mongod's error, not a closed
// connection.
func TestTooDeepGetsErrorReply(t *testing.T) {
	s := Start(t)
	rc := dialRaw(t, s.Addr())
	var d any = int32(1)
	for range wire.MaxDocumentNesting + 5 {
		d = bson.D{{Key: "a", Value: d}}
	}
	reply := rc.roundTrip(bson.D{{Key: "insert", Value: "c"}, {Key: "x", Value: d}, {Key: "$db", Value: "db"}})
	if reply.Lookup("code").Int32() != 15 || reply.Lookup("errmsg").StringValue() != MaxNestingErrmsg {
		t.Fatalf("reply %v", reply)
	}
	if reply := rc.roundTrip(bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}); reply.Lookup("ok").Double() != 1 {
		t.Fatalf("ping %v", reply)
	}
}
