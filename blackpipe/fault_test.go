package blackpipe

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/sturdy-go/sturdy/wire"
)

// faultCase runs an insert through the driver and resolves it with fault;
// it returns the driver's error.
func insertWithFault(t *testing.T, fault func(r *Request) error) error {
	t.Helper()
	s := Start(t)
	c := connect(t, s.URI())
	ctx := testCtx(t, 10*time.Second)
	errc := runAsync(func() error {
		_, err := c.Database("db").Collection("c").InsertOne(ctx, bson.D{{Key: "x", Value: 1}})
		return err
	})
	r, err := s.Receive(ctx, Command("insert"))
	if err != nil {
		t.Fatal(err)
	}
	if err := fault(r); err != nil {
		t.Fatalf("fault: %v", err)
	}
	if !r.Replied() {
		t.Error("Replied() = false after a fault")
	}
	return waitErr(t, errc)
}

func TestFaultsAreNetworkErrorsToDriver(t *testing.T) {
	cases := map[string]func(r *Request) error{
		"Hangup":       (*Request).Hangup,
		"Reset":        (*Request).Reset,
		"ReplyPartial": func(r *Request) error { return r.ReplyPartial(bson.D{{Key: "n", Value: 1}}, 20) },
		"ReplyPartialHeader": func(r *Request) error {
			return r.ReplyPartial(bson.D{{Key: "n", Value: 1}}, 7)
		},
	}
	for name, fault := range cases {
		t.Run(name, func(t *testing.T) {
			err := insertWithFault(t, fault)
			if !mongo.IsNetworkError(err) {
				t.Errorf("driver error %v is not a network error", err)
			}
		})
	}
}

func TestReplyMalformedFailsDriver(t *testing.T) {
	for _, kind := range []Malformation{BadLength, TooLarge, BadBSON, TruncatedSection, UnknownOpCode, EmptyMsg} {
		t.Run(kind.String(), func(t *testing.T) {
			err := insertWithFault(t, func(r *Request) error { return r.ReplyMalformed(kind) })
			if err == nil {
				t.Fatal("driver accepted a malformed reply")
			}
			t.Logf("driver error: %v (network: %v)", err, mongo.IsNetworkError(err))
		})
	}
}

func TestReplyMalformedDecodesAsMalformed(t *testing.T) {
	s := Start(t)
	s.Autorespond(Command("bad"), func(r *Request) bool {
		var kind Malformation
		_ = bson.Raw(r.Command).Lookup("kind").Unmarshal(&kind)
		return r.ReplyMalformed(kind) == nil
	})
	for _, kind := range []Malformation{BadLength, TooLarge, BadBSON, TruncatedSection, UnknownOpCode, EmptyMsg} {
		rc := dialRaw(t, s.Addr())
		rc.sendMsg(0, bson.D{{Key: "bad", Value: 1}, {Key: "kind", Value: int32(kind)}, {Key: "$db", Value: "db"}})
		_, err := rc.read()
		if err == nil {
			t.Errorf("%v: wire decoded the malformed reply", kind)
		}
	}
	// An unknown kind is refused and the request stays unresolved.
	rc := dialRaw(t, s.Addr())
	rc.sendMsg(0, bson.D{{Key: "x", Value: 1}, {Key: "$db", Value: "db"}})
	r, err := s.Receive(testCtx(t, 5*time.Second), Command("x"))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.ReplyMalformed(Malformation(99)); err == nil || r.Replied() {
		t.Errorf("unknown malformation: %v", err)
	}
	_ = r.Reply(nil)
}

func TestNoReplyHitsDriverDeadline(t *testing.T) {
	s := Start(t)
	s.Autorespond(Command("insert"), func(r *Request) bool { r.NoReply(); return true })
	c := connect(t, s.URI())
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Database("db").Collection("c").InsertOne(ctx, bson.D{{Key: "x", Value: 1}})
	if !errors.Is(err, context.DeadlineExceeded) && !mongo.IsTimeout(err) {
		t.Fatalf("err = %v, want a deadline error", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("failed after %v, before the deadline", d)
	}
}

func TestReplyAfterDelayObserved(t *testing.T) {
	s := Start(t)
	s.Autorespond(Command("slow"), func(r *Request) bool {
		return r.ReplyAfter(300*time.Millisecond, bson.D{{Key: "done", Value: true}}) == nil
	})
	c := connect(t, s.URI())
	ctx := testCtx(t, 10*time.Second)
	if err := c.Ping(ctx, nil); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	raw, err := c.Database("db").RunCommand(ctx, bson.D{{Key: "slow", Value: 1}}).Raw()
	if err != nil || !raw.Lookup("done").Boolean() {
		t.Fatalf("slow: %v %v", raw, err)
	}
	if d := time.Since(start); d < 290*time.Millisecond || d > 5*time.Second {
		t.Errorf("reply took %v, want ~300ms", d)
	}
}

// TestHangupVersusReset checks on the wire that Hangup sends a FIN (the
// client reads io.EOF) and Reset an RST (connection reset by peer).
func TestHangupVersusReset(t *testing.T) {
	s := Start(t)
	s.Autorespond(Command("hangup"), func(r *Request) bool { return r.Hangup() == nil })
	s.Autorespond(Command("reset"), func(r *Request) bool { return r.Reset() == nil })

	rc := dialRaw(t, s.Addr())
	rc.sendMsg(0, bson.D{{Key: "hangup", Value: 1}, {Key: "$db", Value: "db"}})
	if _, err := rc.nc.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("after Hangup read err = %v, want io.EOF", err)
	}

	rc = dialRaw(t, s.Addr())
	rc.sendMsg(0, bson.D{{Key: "reset", Value: 1}, {Key: "$db", Value: "db"}})
	_, err := rc.nc.Read(make([]byte, 1))
	if !errors.Is(err, syscall.ECONNRESET) || !strings.Contains(err.Error(), "connection reset by peer") {
		t.Errorf("after Reset read err = %v, want connection reset by peer", err)
	}
}

func TestCloseNewConnectionsAndAcceptConn(t *testing.T) {
	s := Start(t)
	c := connect(t, s.URI())
	ctx := testCtx(t, 10*time.Second)
	if err := c.Ping(ctx, nil); err != nil {
		t.Fatal(err)
	}
	before := len(s.Connections())
	s.CloseNewConnections(true)
	rc := dialRaw(t, s.Addr())
	if _, err := rc.nc.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("new connection not closed: %v", err)
	}
	// Existing connections keep working.
	if err := c.Ping(ctx, nil); err != nil {
		t.Errorf("existing connection broken: %v", err)
	}
	c2 := connect(t, s.URI(), options.Client().SetServerSelectionTimeout(300*time.Millisecond))
	if err := c2.Ping(ctx, nil); err == nil {
		t.Error("new client connected while CloseNewConnections(true)")
	}
	if n := len(s.Connections()); n != before {
		t.Errorf("shed connections registered: %d -> %d", before, n)
	}
	s.CloseNewConnections(false)
	rc = dialRaw(t, s.Addr())
	if reply := rc.roundTrip(bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}); reply.Lookup("ok").Double() != 1 {
		t.Errorf("ping after CloseNewConnections(false): %v", reply)
	}

	shed := 0
	s2 := StartWithOptions(t, Options{AcceptConn: func(c *Conn) bool { shed++; return shed > 1 }})
	rc = dialRaw(t, s2.Addr())
	if _, err := rc.nc.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("AcceptConn false: %v", err)
	}
	rc = dialRaw(t, s2.Addr())
	rc.roundTrip(bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})
}

// TestMalformedClientInputClosesConnection sends broken messages; the server
// must close that connection and keep serving others.
func TestMalformedClientInputClosesConnection(t *testing.T) {
	s := Start(t)
	good := func() []byte {
		b, _ := bson.Marshal(bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})
		return wire.AppendMsg(nil, 1, 0, &wire.Msg{Body: b})
	}
	cases := map[string][]byte{
		"length below header": {8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0xdd, 7, 0, 0},
		"huge length":         {0, 0, 0, 0x7f, 1, 0, 0, 0, 0, 0, 0, 0, 0xdd, 7, 0, 0},
		"bad bson": func() []byte {
			b := good()
			b[21+4] = 0x7f // first element type of the body
			return b
		}(),
		"section overruns": func() []byte {
			b := good()
			binary.LittleEndian.PutUint32(b[21:], 1000)
			return b
		}(),
		"unknown opcode": func() []byte {
			b := good()
			binary.LittleEndian.PutUint32(b[12:], 4242)
			return b
		}(),
		"op_reply from client": wire.AppendReply(nil, 1, 0, &wire.Reply{}),
		"bad checksum": func() []byte {
			b, _ := bson.Marshal(bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})
			m := wire.AppendMsg(nil, 1, 0, &wire.Msg{Flags: wire.ChecksumPresent, Body: b})
			m[len(m)-1] ^= 0xff
			return m
		}(),
		"empty command": func() []byte {
			b, _ := bson.Marshal(bson.D{})
			return wire.AppendMsg(nil, 1, 0, &wire.Msg{Body: b})
		}(),
	}
	for name, msg := range cases {
		t.Run(name, func(t *testing.T) {
			rc := dialRaw(t, s.Addr())
			rc.send(msg)
			_, err := rc.read()
			if err == nil {
				t.Fatal("server answered a malformed message")
			}
			if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("read err = %v, want the connection closed", err)
			}
		})
	}
	// A half message then close: no goroutine left behind (goleak checks).
	nc, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = nc.Write(good()[:10])
	_ = nc.Close()
	rc := dialRaw(t, s.Addr())
	if r := rc.roundTrip(bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}); r.Lookup("ok").Double() != 1 {
		t.Error("server stopped serving after malformed input")
	}
}

func TestHandlerPanicClosesConnection(t *testing.T) {
	s := StartWithOptions(t, Options{
		Handler: func(r *Request) bool {
			if r.Name == "boom" {
				panic("boom")
			}
			return false
		},
		Logf: func(string, ...any) {},
	})
	rc := dialRaw(t, s.Addr())
	rc.sendMsg(0, bson.D{{Key: "boom", Value: 1}, {Key: "$db", Value: "db"}})
	if _, err := rc.read(); err == nil {
		t.Fatal("answered after handler panic")
	}
	rc = dialRaw(t, s.Addr())
	rc.roundTrip(bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})
}
