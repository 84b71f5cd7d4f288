package conn_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"
	"unsafe"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/blackpipe"
	"github.com/sturdy-go/sturdy/internal/bufpool"
	"github.com/sturdy-go/sturdy/internal/conn"
	"github.com/sturdy-go/sturdy/mongoerr"
	"github.com/sturdy-go/sturdy/wire"
)

func mustRaw(t testing.TB, d bson.D) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func dial(t testing.TB, addr string) *conn.Conn {
	t.Helper()
	c, err := conn.Dial(context.Background(), addr, conn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestSendAppendsDBAndOwnsReply(t *testing.T) {
	srv := blackpipe.Start(t)
	srv.Autorespond(blackpipe.Command("find"), func(r *blackpipe.Request) bool {
		return r.ReplyCursor(r.DB+".c", 0, true, bson.D{{Key: "db", Value: r.DB}}) == nil
	})
	c := dial(t, srv.Addr())
	before := c.LastUsed()
	time.Sleep(2 * time.Millisecond)
	req := &conn.Request{DB: "shop", Command: mustRaw(t, bson.D{{Key: "find", Value: "c"}})}
	r1, err := c.Send(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	id1 := req.RequestID
	r2, err := c.Send(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if req.RequestID == id1 || id1 <= 0 {
		t.Errorf("request ids %d then %d", id1, req.RequestID)
	}
	// Each reply is the caller's own copy: the second round trip must not
	// have overwritten the first.
	v, err := r1.Body.LookupErr("cursor", "firstBatch")
	if err != nil {
		t.Fatalf("first reply corrupted: %v", err)
	}
	if vals, _ := v.Array().Values(); len(vals) != 1 || vals[0].Document().Lookup("db").StringValue() != "shop" {
		t.Errorf("reply %v", r1.Body)
	}
	if &r1.Body[0] == &r2.Body[0] {
		t.Error("replies share memory")
	}
	if !c.LastUsed().After(before) {
		t.Error("LastUsed not updated")
	}
	// Bad input is refused without touching the connection.
	if _, err := c.Send(context.Background(), &conn.Request{DB: "db", Command: bson.Raw{1, 2}}); err == nil || mongoerr.IsNetworkError(err) {
		t.Errorf("invalid command: %v", err)
	}
	if c.Closed() {
		t.Error("input error closed the connection")
	}
}

func TestConnIDsAndGeneration(t *testing.T) {
	srv := blackpipe.Start(t)
	a, b := dial(t, srv.Addr()), dial(t, srv.Addr())
	if a.ID() <= 0 || b.ID() <= 0 || a.ID() == b.ID() {
		t.Errorf("ids %d %d", a.ID(), b.ID())
	}
	if *a.ServerConnectionID() == *b.ServerConnectionID() {
		t.Error("server connection ids equal")
	}
	a.SetGeneration(7)
	if a.Generation() != 7 || b.Generation() != 0 {
		t.Errorf("generations %d %d", a.Generation(), b.Generation())
	}
}

func TestCommandErrorReturnsReplyToo(t *testing.T) {
	srv := blackpipe.Start(t)
	srv.Autorespond(blackpipe.Command("insert"), func(r *blackpipe.Request) bool {
		return r.ReplyWriteErrors(0, blackpipe.WriteError{Index: 0, Code: 11000, Message: "dup"}) == nil
	})
	c := dial(t, srv.Addr())
	r, err := c.Send(context.Background(), &conn.Request{DB: "db", Command: mustRaw(t, bson.D{{Key: "insert", Value: "c"}})})
	var we *mongoerr.WriteException
	if !errors.As(err, &we) || r == nil || r.Body == nil {
		t.Fatalf("got %v, %v", r, err)
	}
	if c.Closed() {
		t.Error("write errors must not close the connection")
	}
}

func TestMoreToComeSendsWithoutReading(t *testing.T) {
	srv := blackpipe.Start(t)
	c := dial(t, srv.Addr())
	ctx := context.Background()
	r, err := c.Send(ctx, &conn.Request{DB: "db", Command: mustRaw(t, bson.D{{Key: "insert", Value: "c"}}), MoreToCome: true})
	if r != nil || err != nil {
		t.Fatalf("got %v, %v", r, err)
	}
	got, err := srv.Receive(ctx, blackpipe.Command("insert"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Flags&wire.MoreToCome == 0 {
		t.Error("request lacks the moreToCome flag")
	}
	got.Reply(bson.D{}) // no reply goes out for moreToCome requests
	if _, err := c.RoundTrip(ctx, "admin", bson.D{{Key: "ping", Value: 1}}); err != nil {
		t.Errorf("ping after an unacknowledged write: %v", err)
	}
}

func TestNetworkFaultsCloseConnection(t *testing.T) {
	faults := map[string]blackpipe.Handler{
		"hangup":  func(r *blackpipe.Request) bool { return r.Hangup() == nil },
		"reset":   func(r *blackpipe.Request) bool { return r.Reset() == nil },
		"partial": func(r *blackpipe.Request) bool { return r.ReplyPartial(bson.D{{Key: "n", Value: 1}}, 20) == nil },
		"header":  func(r *blackpipe.Request) bool { return r.ReplyPartial(bson.D{{Key: "n", Value: 1}}, 7) == nil },
		"mismatched responseTo": func(r *blackpipe.Request) bool {
			r.RequestID++
			return r.Reply(bson.D{{Key: "n", Value: 1}}) == nil
		},
	}
	ops := map[string]string{"hangup": "read", "reset": "read", "partial": "read", "header": "read", "mismatched responseTo": "decode"}
	for _, m := range []blackpipe.Malformation{blackpipe.BadLength, blackpipe.TooLarge, blackpipe.BadBSON,
		blackpipe.TruncatedSection, blackpipe.UnknownOpCode, blackpipe.EmptyMsg} {
		faults[m.String()] = func(r *blackpipe.Request) bool { return r.ReplyMalformed(m) == nil }
		ops[m.String()] = "decode"
	}
	for name, h := range faults {
		t.Run(name, func(t *testing.T) {
			srv := blackpipe.Start(t)
			srv.Autorespond(blackpipe.Command("insert"), h)
			c := dial(t, srv.Addr())
			ctx := context.Background()
			r, err := c.Send(ctx, &conn.Request{DB: "db", Command: mustRaw(t, bson.D{{Key: "insert", Value: "c"}})})
			var ne *mongoerr.NetworkError
			if !errors.As(err, &ne) || r != nil {
				t.Fatalf("got %v, %v; want a NetworkError", r, err)
			}
			if ne.Op != ops[name] || ne.Addr != srv.Addr() {
				t.Errorf("op %q addr %q, want %q", ne.Op, ne.Addr, ops[name])
			}
			if mongoerr.IsTimeout(err) {
				t.Errorf("%v classified as a timeout", err)
			}
			if !c.Closed() {
				t.Error("connection still open")
			}
			_, err = c.RoundTrip(ctx, "admin", bson.D{{Key: "ping", Value: 1}})
			if !errors.Is(err, conn.ErrClosed) || !mongoerr.IsNetworkError(err) {
				t.Errorf("reuse after failure: %v", err)
			}
		})
	}
}

func TestCancelAbortsRoundTrip(t *testing.T) {
	srv := blackpipe.Start(t)
	srv.Autorespond(blackpipe.Command("find"), func(r *blackpipe.Request) bool { r.NoReply(); return true })
	c := dial(t, srv.Addr())
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err := c.RoundTrip(ctx, "db", bson.D{{Key: "find", Value: "c"}})
	if !errors.Is(err, context.Canceled) || !mongoerr.IsNetworkError(err) {
		t.Fatalf("got %v", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Error("a cancellation is not a deadline")
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("cancel took %v", time.Since(start))
	}
	if !c.Closed() {
		t.Error("a canceled connection must be closed")
	}
}

func TestExpiredContextFailsFast(t *testing.T) {
	srv := blackpipe.Start(t)
	c := dial(t, srv.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	_, err := c.RoundTrip(ctx, "admin", bson.D{{Key: "ping", Value: 1}})
	if !errors.Is(err, context.DeadlineExceeded) || !mongoerr.IsTimeout(err) {
		t.Fatalf("got %v", err)
	}
}

func TestDeadlineDoesNotLeakIntoNextRoundTrip(t *testing.T) {
	srv := blackpipe.Start(t)
	srv.Autorespond(blackpipe.Command("find"), func(r *blackpipe.Request) bool {
		go r.ReplyAfter(150*time.Millisecond, bson.D{})
		return true
	})
	c := dial(t, srv.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	if _, err := c.RoundTrip(ctx, "admin", bson.D{{Key: "ping", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	cancel()
	// The earlier deadline has passed; a context without one must clear it.
	time.Sleep(60 * time.Millisecond)
	if _, err := c.RoundTrip(context.Background(), "db", bson.D{{Key: "find", Value: "c"}}); err != nil {
		t.Fatalf("round trip after an earlier deadline: %v", err)
	}
}

func TestConcurrentSendsAreSerialized(t *testing.T) {
	srv := blackpipe.Start(t)
	c := dial(t, srv.Addr())
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Go(func() {
			if _, err := c.RoundTrip(context.Background(), "admin", bson.D{{Key: "ping", Value: 1}}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// exhaustServer is a minimal wire server that answers hello and then streams
// n replies (moreToCome set on all but the last) to an exhaustAllowed hello.
// blackpipe resolves each request with one reply, so streaming needs this.
func exhaustServer(t *testing.T, n int, wrongTo bool) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { l.Close(); <-done })
	go func() {
		defer close(done)
		nc, err := l.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		var buf []byte
		replyID := int32(1000)
		for {
			buf, err = wire.ReadMessage(nc, buf[:0], 0)
			if err != nil {
				return
			}
			m, err := wire.Decode(buf, 0)
			if err != nil || m.Msg == nil {
				return
			}
			respTo := m.Header.RequestID
			count := 1
			if m.Msg.Flags&wire.ExhaustAllowed != 0 {
				count = n
			}
			for i := range count {
				var flags wire.MsgFlags
				if i < count-1 {
					flags = wire.MoreToCome
				}
				replyID++
				body, _ := bson.Marshal(bson.D{{Key: "isWritablePrimary", Value: true}, {Key: "maxWireVersion", Value: int32(25)},
					{Key: "seq", Value: int32(i)}, {Key: "ok", Value: 1.0}})
				to := respTo
				if wrongTo && i == 2 {
					to = 424242
				}
				if _, err := nc.Write(wire.AppendMsg(nil, replyID, to, &wire.Msg{Flags: flags, Body: body})); err != nil {
					return
				}
				respTo = replyID
			}
		}
	}()
	return l.Addr().String()
}

func TestExhaustReadReply(t *testing.T) {
	addr := exhaustServer(t, 3, false)
	c := dial(t, addr)
	ctx := context.Background()
	if _, err := c.ReadReply(ctx); !errors.Is(err, conn.ErrNotStreaming) {
		t.Errorf("ReadReply before streaming: %v", err)
	}
	hello := mustRaw(t, bson.D{{Key: "hello", Value: 1}})
	r, err := c.Send(ctx, &conn.Request{DB: "admin", Command: hello, ExhaustAllowed: true})
	if err != nil || !r.MoreToCome {
		t.Fatalf("first streamed reply: %v, %v", r, err)
	}
	if _, err := c.Send(ctx, &conn.Request{DB: "admin", Command: hello}); !errors.Is(err, conn.ErrStreaming) {
		t.Errorf("Send while streaming: %v", err)
	}
	for i := 1; i < 3; i++ {
		r, err = c.ReadReply(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if seq := r.Body.Lookup("seq").Int32(); int(seq) != i {
			t.Errorf("reply %d has seq %d", i, seq)
		}
		if r.MoreToCome != (i < 2) {
			t.Errorf("reply %d moreToCome %v", i, r.MoreToCome)
		}
	}
	if _, err := c.Send(ctx, &conn.Request{DB: "admin", Command: hello}); err != nil {
		t.Errorf("Send after the stream ended: %v", err)
	}
}

func TestExhaustMismatchedResponseTo(t *testing.T) {
	addr := exhaustServer(t, 4, true)
	c := dial(t, addr)
	ctx := context.Background()
	if _, err := c.Send(ctx, &conn.Request{DB: "admin", Command: mustRaw(t, bson.D{{Key: "hello", Value: 1}}), ExhaustAllowed: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReadReply(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := c.ReadReply(ctx)
	var ne *mongoerr.NetworkError
	if !errors.As(err, &ne) || ne.Op != "decode" || !c.Closed() {
		t.Fatalf("got %v", err)
	}
}

func TestMessageTooLargeIsRefusedBeforeSending(t *testing.T) {
	srv := blackpipe.Start(t)
	captureHello(t, srv, bson.E{Key: "maxMessageSizeBytes", Value: int32(1000)})
	c := dial(t, srv.Addr())
	doc := mustRaw(t, bson.D{{Key: "x", Value: string(make([]byte, 2000))}})
	_, err := c.Send(context.Background(), &conn.Request{DB: "db", Command: mustRaw(t, bson.D{{Key: "insert", Value: "c"}}),
		Sequences: []wire.DocumentSequence{{Identifier: "documents", Documents: []bson.Raw{doc}}}})
	if err == nil || mongoerr.IsNetworkError(err) || c.Closed() {
		t.Fatalf("got %v (closed %v)", err, c.Closed())
	}
}

func BenchmarkSend(b *testing.B) {
	srv := blackpipe.Start(b)
	reply := mustRaw(b, bson.D{{Key: "n", Value: int32(1)}, {Key: "ok", Value: 1.0}})
	srv.Autorespond(blackpipe.Command("insert"), func(r *blackpipe.Request) bool { return r.Reply(reply) == nil })
	c := dial(b, srv.Addr())
	req := &conn.Request{DB: "db", Command: mustRaw(b, bson.D{{Key: "insert", Value: "c"}}),
		Sequences: []wire.DocumentSequence{{Identifier: "documents", Documents: []bson.Raw{mustRaw(b, bson.D{{Key: "x", Value: 1}})}}}}
	for _, name := range []string{"background", "deadline"} {
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			if name == "deadline" {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Hour)
				defer cancel()
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Send(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// echoServer answers every request with the same pre-encoded OP_MSG reply,
// allocating nothing per request, so allocation counts measure the client.
func echoServer(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	body, _ := bson.Marshal(bson.D{{Key: "isWritablePrimary", Value: true}, {Key: "maxWireVersion", Value: int32(25)},
		{Key: "n", Value: int32(1)}, {Key: "ok", Value: 1.0}})
	reply := wire.AppendMsg(nil, 1, 0, &wire.Msg{Body: body})
	wg.Go(func() {
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer nc.Close()
				out := slices.Clone(reply)
				var buf []byte
				for {
					var err error
					if buf, err = wire.ReadMessage(nc, buf[:0], 0); err != nil {
						return
					}
					copy(out[8:12], buf[4:8]) // responseTo = requestID
					if _, err := nc.Write(out); err != nil {
						return
					}
				}
			})
		}
	})
	return l.Addr().String()
}

func TestSendAllocations(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("allocation counts are not meaningful under -race or -short")
	}
	c := dial(t, echoServer(t))
	req := &conn.Request{DB: "db", Command: mustRaw(t, bson.D{{Key: "insert", Value: "c"}}),
		Sequences: []wire.DocumentSequence{{Identifier: "documents", Documents: []bson.Raw{mustRaw(t, bson.D{{Key: "x", Value: 1}})}}}}
	ctx := context.Background()
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := c.Send(ctx, req); err != nil {
			t.Fatal(err)
		}
	})
	// The reply's buffer (which the body aliases), the Reply and the
	// decoded OP_MSG.
	if allocs > 3 {
		t.Errorf("Send allocates %.1f times per call, want at most 3", allocs)
	}
	t.Logf("%.1f allocations per Send", allocs)
}

func BenchmarkSendEcho(b *testing.B) {
	c := dial(b, echoServer(b))
	req := &conn.Request{DB: "db", Command: mustRaw(b, bson.D{{Key: "insert", Value: "c"}})}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Send(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRepliesAreOwnedWhateverTheirPath: small uncompressed replies are read
// into a buffer of their own, large or compressed ones through the
// connection's reused buffer; every reply must survive the next round trip.
func TestRepliesAreOwnedWhateverTheirPath(t *testing.T) {
	for _, comp := range []string{"", "snappy", "zlib", "zstd"} {
		for _, size := range []int{10, 3 << 20} {
			srv := blackpipe.StartWithOptions(t, blackpipe.Options{Compressors: []string{"snappy", "zlib", "zstd"}})
			srv.Autorespond(blackpipe.Command("echo"), func(r *blackpipe.Request) bool {
				tag := r.Command.Lookup("echo").StringValue()
				return r.Reply(bson.D{{Key: "tag", Value: tag}, {Key: "pad", Value: string(make([]byte, size))}}) == nil
			})
			var o conn.Options
			if comp != "" {
				o.Compressors = []string{comp}
			}
			c, err := conn.Dial(context.Background(), srv.Addr(), o)
			if err != nil {
				t.Fatal(err)
			}
			var replies []bson.Raw
			for _, tag := range []string{"first", "second", "third"} {
				r, err := c.Send(context.Background(), &conn.Request{DB: "db", Command: mustRaw(t, bson.D{{Key: "echo", Value: tag}})})
				if err != nil {
					t.Fatalf("%q/%d: %v", comp, size, err)
				}
				replies = append(replies, r.Body)
			}
			for i, tag := range []string{"first", "second", "third"} {
				if got, _ := replies[i].Lookup("tag").StringValueOK(); got != tag {
					t.Errorf("compressor %q, %d-byte replies: reply %d reads %q after later round trips", comp, size, i, got)
				}
				if len(replies[i]) < size {
					t.Errorf("compressor %q: reply %d is %d bytes", comp, i, len(replies[i]))
				}
			}
			c.Close()
		}
	}
}

// TestPooledReplyBuffer: a reply of a size bufpool pools is read into a
// pooled buffer, which Reply.Buffer hands over, only when the request asks
// for it; small and compressed replies never come in one. Beyond
// ownReadMax a reply is read straight into a buffer only when the pool
// holds one; else its body is copied into one once it has arrived.
func TestPooledReplyBuffer(t *testing.T) {
	for _, comp := range []string{"", "zstd"} {
		srv := blackpipe.StartWithOptions(t, blackpipe.Options{Compressors: []string{"zstd"}})
		srv.Autorespond(blackpipe.Command("echo"), func(r *blackpipe.Request) bool {
			size := int(r.Command.Lookup("size").Int32())
			return r.Reply(bson.D{{Key: "pad", Value: string(make([]byte, size))}}) == nil
		})
		var o conn.Options
		if comp != "" {
			o.Compressors = []string{comp}
		}
		c, err := conn.Dial(context.Background(), srv.Addr(), o)
		if err != nil {
			t.Fatal(err)
		}
		for _, size := range []int{10, 100 << 10, 3 << 20} {
			for _, pooled := range []bool{false, true} {
				r, err := c.Send(context.Background(), &conn.Request{DB: "db", PooledReply: pooled,
					Command: mustRaw(t, bson.D{{Key: "echo", Value: 1}, {Key: "size", Value: int32(size)}})})
				if err != nil {
					t.Fatal(err)
				}
				want := pooled && size > 10 && comp == ""
				if got := r.Buffer != nil; got != want {
					t.Fatalf("compressor %q, %d-byte reply, PooledReply %v: pooled buffer %v, want %v", comp, size, pooled, got, want)
				}
				if want && !liesIn(r.Body, *r.Buffer, size) {
					t.Fatalf("%d-byte reply: body does not lie in its pooled buffer of its size class (cap %d)", size, cap(*r.Buffer))
				}
				if p, _ := r.Body.Lookup("pad").StringValueOK(); len(p) != size {
					t.Fatalf("pad of %d bytes, want %d", len(p), size)
				}
			}
		}
		c.Close()
	}
}

// liesIn reports whether body lies in buf, whose capacity is the power of
// two just above size.
func liesIn(body bson.Raw, buf []byte, size int) bool {
	start := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	at := uintptr(unsafe.Pointer(unsafe.SliceData(body)))
	return cap(buf) >= size && cap(buf) < 2*size && cap(buf)&(cap(buf)-1) == 0 &&
		at >= start && at+uintptr(len(body)) <= start+uintptr(len(buf))
}

// TestLargePooledReplyReusesBuffer: a reply beyond ownReadMax is read
// straight into a pooled buffer handed back after an earlier one.
func TestLargePooledReplyReusesBuffer(t *testing.T) {
	srv := blackpipe.Start(t)
	srv.Autorespond(blackpipe.Command("echo"), func(r *blackpipe.Request) bool {
		return r.Reply(bson.D{{Key: "pad", Value: string(make([]byte, 3<<20))}}) == nil
	})
	c := dial(t, srv.Addr())
	req := func() *conn.Reply {
		r, err := c.Send(context.Background(), &conn.Request{DB: "db", PooledReply: true, Command: mustRaw(t, bson.D{{Key: "echo", Value: 1}})})
		if err != nil {
			t.Fatal(err)
		}
		if r.Buffer == nil || !liesIn(r.Body, *r.Buffer, len(r.Body)) {
			t.Fatal("a 3 MB reply asked to be pooled is not in a pooled buffer")
		}
		return r
	}
	// sync.Pool may drop what it is given (at random under -race): the
	// reuse is observed, not required, on each try.
	for range 50 {
		prev := req()
		bufpool.Put(prev.Buffer)
		if next := req(); next.Buffer == prev.Buffer {
			// Read straight in, not copied: the message header and flags
			// come before the body in the buffer.
			if unsafe.SliceData(next.Body) != &(*next.Buffer)[wire.HeaderLen+5] {
				t.Fatal("the recycled buffer holds a copy of the body, not the message read into it")
			}
			if p, _ := next.Body.Lookup("pad").StringValueOK(); len(p) != 3<<20 {
				t.Fatalf("reply read into a recycled buffer has a pad of %d bytes", len(p))
			}
			return
		}
	}
	t.Fatal("a 3 MB reply was never read into the pooled buffer handed back before it")
}

// BenchmarkLargeReply reads 3 MB replies (a cursor batch beyond
// ownReadMax), recycling each one's buffer as a cursor does, or not.
func BenchmarkLargeReply(b *testing.B) {
	srv := blackpipe.Start(b)
	srv.Autorespond(blackpipe.Command("echo"), func(r *blackpipe.Request) bool {
		return r.Reply(bson.D{{Key: "pad", Value: string(make([]byte, 3<<20))}}) == nil
	})
	c := dial(b, srv.Addr())
	cmd := mustRaw(b, bson.D{{Key: "echo", Value: 1}})
	for _, recycle := range []bool{false, true} {
		b.Run(fmt.Sprintf("recycle=%v", recycle), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r, err := c.Send(context.Background(), &conn.Request{DB: "db", Command: cmd, PooledReply: recycle})
				if err != nil {
					b.Fatal(err)
				}
				bufpool.Put(r.Buffer)
			}
		})
	}
}
