package conn_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/blackpipe"
	"github.com/sturdy-go/sturdy/internal/conn"
	"github.com/sturdy-go/sturdy/internal/connstring"
	"github.com/sturdy-go/sturdy/internal/testcert"
	"github.com/sturdy-go/sturdy/mongoerr"
	"github.com/sturdy-go/sturdy/wire"
)

// captureHello makes srv answer hello normally and hands each hello request
// to the returned channel.
func captureHello(t *testing.T, srv *blackpipe.Server, extra ...bson.E) <-chan *blackpipe.Request {
	t.Helper()
	seen := make(chan *blackpipe.Request, 16)
	srv.Autorespond(blackpipe.Command("hello"), func(r *blackpipe.Request) bool {
		seen <- r
		reply := srv.HelloReply(r)
		reply = append(reply[:len(reply)-1:len(reply)-1], extra...)
		return r.Reply(append(reply, bson.E{Key: "ok", Value: 1.0})) == nil
	})
	return seen
}

func TestHandshakeMetadataAndDescription(t *testing.T) {
	srv := blackpipe.Start(t)
	oid := bson.NewObjectID()
	seen := captureHello(t, srv,
		bson.E{Key: "setName", Value: "rs0"}, bson.E{Key: "setVersion", Value: int64(3)},
		bson.E{Key: "electionId", Value: oid}, bson.E{Key: "me", Value: "a:1"},
		bson.E{Key: "hosts", Value: bson.A{"a:1", "b:2"}}, bson.E{Key: "tags", Value: bson.D{{Key: "dc", Value: "east"}}},
		bson.E{Key: "msg", Value: "isdbgrid"})
	c, err := conn.Dial(context.Background(), srv.Addr(), conn.Options{AppName: "app1", DriverName: "wrapper", DriverVersion: "9"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := <-seen
	hello := r.Command
	if r.DB != "admin" || r.OpCode != wire.OpMsg || r.Compressor != wire.CompressorNoop {
		t.Errorf("hello sent as %v to %q compressed %v", r.OpCode, r.DB, r.Compressor)
	}
	for _, key := range []string{"helloOk", "backpressure"} {
		if v, err := hello.LookupErr(key); err != nil || !v.Boolean() {
			t.Errorf("hello lacks %s: true: %v", key, hello)
		}
	}
	for _, absent := range []string{"compression", "saslSupportedMechs", "speculativeAuthenticate", "loadBalanced"} {
		if _, err := hello.LookupErr(absent); err == nil {
			t.Errorf("hello has %s though not configured", absent)
		}
	}
	checks := map[string]string{
		"client.application.name": "app1",
		"client.driver.name":      "sturdy|wrapper",
		"client.driver.version":   conn.DriverVersion + "|9",
		"client.os.type":          runtime.GOOS,
		"client.os.architecture":  runtime.GOARCH,
		"client.platform":         runtime.Version(),
	}
	for path, want := range checks {
		v, err := hello.LookupErr(strings.Split(path, ".")...)
		if err != nil || v.StringValue() != want {
			t.Errorf("%s = %v, want %q", path, v, want)
		}
	}
	client, _ := hello.LookupErr("client")
	if len(client.Value) > 512 {
		t.Errorf("client metadata is %d bytes", len(client.Value))
	}

	d := c.Description()
	if d.MaxWireVersion != 25 || d.SetName != "rs0" || !d.IsWritablePrimary || d.LogicalSessionTimeoutMinutes == nil ||
		d.MaxBSONObjectSize != blackpipe.MaxBSONObjectSize || d.MaxWriteBatchSize != blackpipe.MaxWriteBatchSize ||
		d.MaxMessageSizeBytes != blackpipe.MaxMessageSizeBytes || !d.HelloOK || d.TopologyVersion == nil ||
		d.SetVersion == nil || *d.SetVersion != 3 || d.ElectionID == nil || *d.ElectionID != oid || d.Me != "a:1" ||
		len(d.Hosts) != 2 || d.Tags["dc"] != "east" || !d.IsMongos() || d.Raw == nil || d.Compression != "" {
		t.Errorf("description %+v", d)
	}
	if id := c.ServerConnectionID(); id == nil || *id != r.Conn.ID() {
		t.Errorf("server connection id %v, want %d", id, r.Conn.ID())
	}
	if c.ID() <= 0 || c.Addr() != srv.Addr() || c.CreatedAt().IsZero() || c.HandshakeRTT() <= 0 {
		t.Errorf("id %d addr %q created %v rtt %v", c.ID(), c.Addr(), c.CreatedAt(), c.HandshakeRTT())
	}
}

func TestMetadataShrinksToLimit(t *testing.T) {
	srv := blackpipe.Start(t)
	seen := captureHello(t, srv)
	long := strings.Repeat("p", 400)
	c, err := conn.Dial(context.Background(), srv.Addr(), conn.Options{AppName: strings.Repeat("a", 128), DriverPlatform: long})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	hello := (<-seen).Command
	client, _ := hello.LookupErr("client")
	if len(client.Value) > 512 {
		t.Errorf("client metadata is %d bytes", len(client.Value))
	}
	if _, err := hello.LookupErr("client", "os", "architecture"); err == nil {
		t.Error("os details kept though the document was too large")
	}
	if v, err := hello.LookupErr("client", "os", "type"); err != nil || v.StringValue() != runtime.GOOS {
		t.Error("os.type must survive truncation")
	}
	p, err := hello.LookupErr("client", "platform")
	if err != nil || !strings.HasPrefix(p.StringValue(), "go") || len(p.StringValue()) >= len(long) {
		t.Errorf("platform not truncated: %v", p)
	}

	if _, err := conn.Dial(context.Background(), srv.Addr(), conn.Options{AppName: strings.Repeat("a", 129)}); err == nil {
		t.Error("a 129-byte application name must be refused")
	}
}

func TestDialOptionErrors(t *testing.T) {
	srv := blackpipe.Start(t)
	for name, o := range map[string]conn.Options{
		"compressor": {Compressors: []string{"lz4"}},
		"zlib level": {ZlibLevel: 11},
		"mechanism":  {Credential: &connstring.Credential{Mechanism: "GSSAPI", Username: "u"}},
		"no user":    {Credential: &connstring.Credential{Password: "p"}},
	} {
		c, err := conn.Dial(context.Background(), srv.Addr(), o)
		if err == nil {
			c.Close()
			t.Errorf("%s: Dial succeeded", name)
			continue
		}
		if mongoerr.IsNetworkError(err) {
			t.Errorf("%s: option error reported as a network error: %v", name, err)
		}
	}
	var ae *mongoerr.AuthError
	_, err := conn.Dial(context.Background(), srv.Addr(), conn.Options{Credential: &connstring.Credential{Mechanism: "MONGODB-AWS", Username: "u"}})
	if !errors.As(err, &ae) || ae.Mechanism != "MONGODB-AWS" || !strings.Contains(err.Error(), "not supported") {
		t.Errorf("unsupported mechanism: %v", err)
	}
	if srv.Requests() != 0 {
		t.Errorf("option errors must fail before connecting; server saw %d requests", srv.Requests())
	}
}

func TestCompressionWithEachCompressor(t *testing.T) {
	for _, name := range []string{"zstd", "zlib", "snappy"} {
		t.Run(name, func(t *testing.T) {
			srv := blackpipe.StartWithOptions(t, blackpipe.Options{Compressors: []string{name}})
			seen := captureHello(t, srv)
			want, _ := wire.CompressorByName(name)
			var got atomic.Int32
			got.Store(-1)
			big := strings.Repeat("compressible ", 1000)
			srv.Autorespond(blackpipe.Command("insert"), func(r *blackpipe.Request) bool {
				got.Store(int32(r.Compressor))
				return r.Reply(bson.D{{Key: "n", Value: int32(1)}, {Key: "echo", Value: big}}) == nil
			})
			var saslCompressor atomic.Int32
			saslCompressor.Store(-1)
			srv.Autorespond(blackpipe.Command("saslStart"), func(r *blackpipe.Request) bool {
				saslCompressor.Store(int32(r.Compressor))
				return r.ReplyError(18, "Authentication failed.") == nil
			})
			c, err := conn.Dial(context.Background(), srv.Addr(), conn.Options{Compressors: []string{"zstd", "zlib", "snappy"}, ZlibLevel: 6})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			offered, _ := (<-seen).Command.LookupErr("compression")
			if vals, _ := offered.Array().Values(); len(vals) != 3 || vals[0].StringValue() != "zstd" {
				t.Errorf("offered %v", offered)
			}
			if c.Description().Compression != name {
				t.Fatalf("negotiated %q", c.Description().Compression)
			}
			cmd, _ := bson.Marshal(bson.D{{Key: "insert", Value: "c"}})
			doc, _ := bson.Marshal(bson.D{{Key: "x", Value: big}})
			r, err := c.Send(context.Background(), &conn.Request{DB: "db", Command: cmd,
				Sequences: []wire.DocumentSequence{{Identifier: "documents", Documents: []bson.Raw{doc}}}})
			if err != nil {
				t.Fatal(err)
			}
			if wire.Compressor(got.Load()) != want {
				t.Errorf("insert sent with compressor %d, want %v", got.Load(), want)
			}
			if v, err := r.Body.LookupErr("echo"); err != nil || v.StringValue() != big {
				t.Error("compressed reply not decoded")
			}
			sasl, _ := bson.Marshal(bson.D{{Key: "saslStart", Value: int32(1)}})
			if _, err := c.Send(context.Background(), &conn.Request{DB: "admin", Command: sasl}); err == nil {
				t.Error("expected the scripted saslStart error")
			}
			if wire.Compressor(saslCompressor.Load()) != wire.CompressorNoop {
				t.Errorf("saslStart was compressed with %d", saslCompressor.Load())
			}
		})
	}
}

func TestTLS(t *testing.T) {
	cert := testcert.New(t, "127.0.0.1", "localhost")
	srv := blackpipe.StartWithOptions(t, blackpipe.Options{TLS: cert.ServerTLS()})
	ctx := context.Background()
	c, err := conn.Dial(ctx, srv.Addr(), conn.Options{TLSConfig: cert.ClientTLS()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RoundTrip(ctx, "admin", bson.D{{Key: "ping", Value: 1}}); err != nil {
		t.Errorf("ping over TLS: %v", err)
	}
	c.Close()

	// ServerName comes from the host, so a certificate for another name fails.
	_, port, _ := net.SplitHostPort(srv.Addr())
	if c, err := conn.Dial(ctx, "localhost:"+port, conn.Options{TLSConfig: cert.ClientTLS()}); err != nil {
		t.Errorf("dial by name: %v", err)
	} else {
		c.Close()
	}
	_, err = conn.Dial(ctx, srv.Addr(), conn.Options{TLSConfig: &tls.Config{RootCAs: cert.Roots, ServerName: "other.example"}})
	var ne *mongoerr.NetworkError
	if !errors.As(err, &ne) || ne.Op != "dial" {
		t.Errorf("wrong server name: got %v, want a dial NetworkError", err)
	}
	_, err = conn.Dial(ctx, srv.Addr(), conn.Options{TLSConfig: &tls.Config{}})
	var ue x509.UnknownAuthorityError
	if !errors.As(err, &ne) || !errors.As(err, &ue) {
		t.Errorf("untrusted certificate: got %v", err)
	}
}

func TestCustomDialerAndDialTimeout(t *testing.T) {
	srv := blackpipe.Start(t)
	var dialed atomic.Int32
	d := func(ctx context.Context, network, addr string) (net.Conn, error) {
		dialed.Add(1)
		var nd net.Dialer
		return nd.DialContext(ctx, network, addr)
	}
	c, err := conn.Dial(context.Background(), srv.Addr(), conn.Options{Dialer: d})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if dialed.Load() != 1 {
		t.Errorf("custom dialer called %d times", dialed.Load())
	}

	blocking := func(ctx context.Context, network, addr string) (net.Conn, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	start := time.Now()
	_, err = conn.Dial(context.Background(), srv.Addr(), conn.Options{Dialer: blocking, DialTimeout: 50 * time.Millisecond})
	var ne *mongoerr.NetworkError
	if !errors.As(err, &ne) || ne.Op != "dial" || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v, want a dial NetworkError with DeadlineExceeded", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("DialTimeout not honoured: %v", time.Since(start))
	}

	// The handshake is bounded by the same timeout.
	hung := blackpipe.Start(t)
	hung.Autorespond(blackpipe.Command("hello"), func(r *blackpipe.Request) bool { r.NoReply(); return true })
	_, err = conn.Dial(context.Background(), hung.Addr(), conn.Options{DialTimeout: 50 * time.Millisecond})
	if !errors.As(err, &ne) || ne.Op != "handshake" || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("hung handshake: got %v", err)
	}

	// Refused connection.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	if _, err := conn.Dial(context.Background(), addr, conn.Options{}); !errors.As(err, &ne) || ne.Op != "dial" {
		t.Errorf("refused: got %v", err)
	}
}

func TestHandshakeFailures(t *testing.T) {
	for name, h := range map[string]blackpipe.Handler{
		"hangup":    func(r *blackpipe.Request) bool { return r.Hangup() == nil },
		"error":     func(r *blackpipe.Request) bool { return r.ReplyError(8000, "nope") == nil },
		"malformed": func(r *blackpipe.Request) bool { return r.ReplyMalformed(blackpipe.BadBSON) == nil },
	} {
		t.Run(name, func(t *testing.T) {
			srv := blackpipe.Start(t)
			srv.Autorespond(blackpipe.Command("hello"), h)
			_, err := conn.Dial(context.Background(), srv.Addr(), conn.Options{})
			var ne *mongoerr.NetworkError
			if !errors.As(err, &ne) || ne.Op != "handshake" {
				t.Fatalf("got %v, want a handshake NetworkError", err)
			}
		})
	}
}

func TestServerChoosingUnofferedCompressorFails(t *testing.T) {
	srv := blackpipe.Start(t)
	captureHello(t, srv, bson.E{Key: "compression", Value: bson.A{"snappy"}})
	_, err := conn.Dial(context.Background(), srv.Addr(), conn.Options{Compressors: []string{"zstd"}})
	var ne *mongoerr.NetworkError
	if !errors.As(err, &ne) || ne.Op != "handshake" {
		t.Errorf("got %v", err)
	}
}

// In load-balanced mode the hello says loadBalanced: true (over OP_MSG) and
// the reply's serviceId becomes the connection's; a reply without one is
// refused with ErrNoServiceID.
func TestHandshakeLoadBalanced(t *testing.T) {
	srv := blackpipe.Start(t)
	sid := bson.NewObjectID()
	seen := captureHello(t, srv, bson.E{Key: "msg", Value: "isdbgrid"}, bson.E{Key: "serviceId", Value: sid})
	c, err := conn.Dial(context.Background(), srv.Addr(), conn.Options{LoadBalanced: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := <-seen
	if v, err := r.Command.LookupErr("loadBalanced"); err != nil || !v.Boolean() || r.OpCode != wire.OpMsg {
		t.Fatalf("hello %v (%v) lacks loadBalanced: true over OP_MSG", r.Command, r.OpCode)
	}
	if got := c.ServiceID(); got == nil || *got != sid {
		t.Fatalf("ServiceID() = %v, want %v", got, sid)
	}

	plain := blackpipe.Start(t)
	_, err = conn.Dial(context.Background(), plain.Addr(), conn.Options{LoadBalanced: true})
	if !errors.Is(err, conn.ErrNoServiceID) {
		t.Fatalf("Dial to a server without serviceId: %v, want ErrNoServiceID", err)
	}
	if c, err := conn.Dial(context.Background(), plain.Addr(), conn.Options{}); err != nil || c.ServiceID() != nil {
		t.Fatalf("not load balanced: %v, serviceId %v", err, c.ServiceID())
	} else {
		c.Close()
	}
}
