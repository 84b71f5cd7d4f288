package blackpipe

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"github.com/sturdy-go/sturdy/internal/testcert"
	"github.com/sturdy-go/sturdy/wire"
)

func TestCompression(t *testing.T) {
	for _, name := range []string{"zstd", "zlib", "snappy"} {
		t.Run(name, func(t *testing.T) {
			want, _ := wire.CompressorByName(name)
			s := StartWithOptions(t, Options{Compressors: []string{"zstd", "zlib", "snappy"}})
			c := connect(t, s.URI()+"&compressors="+name)
			ctx := testCtx(t, 10*time.Second)
			errc := runAsync(func() error {
				_, err := c.Database("db").Collection("c").InsertOne(ctx, bson.D{{Key: "big", Value: string(make([]byte, 4096))}})
				return err
			})
			r, err := s.Receive(ctx, Command("insert"))
			if err != nil {
				t.Fatal(err)
			}
			if r.Compressor != want {
				t.Errorf("Compressor = %v, want %v", r.Compressor, want)
			}
			if !Doc(bson.D{{Key: "documents", Value: bson.A{bson.D{{Key: "big", Value: Anything}}}}}).Match(r) {
				t.Error("decompressed insert does not hold the document")
			}
			// The reply goes back compressed; the driver must decode it.
			if err := r.Reply(bson.D{{Key: "n", Value: 1}}); err != nil {
				t.Fatal(err)
			}
			if err := waitErr(t, errc); err != nil {
				t.Fatalf("insert over %s: %v", name, err)
			}
		})
	}
	// Not negotiated: the server does not accept the client's compressor.
	s := Start(t)
	c := connect(t, s.URI()+"&compressors=zlib")
	ctx := testCtx(t, 10*time.Second)
	errc := runAsync(func() error { return c.Database("db").RunCommand(ctx, bson.D{{Key: "x", Value: 1}}).Err() })
	r, err := s.Receive(ctx, Command("x"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Compressor != wire.CompressorNoop {
		t.Errorf("Compressor = %v without negotiation", r.Compressor)
	}
	_ = r.Reply(nil)
	if err := waitErr(t, errc); err != nil {
		t.Fatal(err)
	}
}

func TestTLS(t *testing.T) {
	cert := testcert.New(t, "127.0.0.1")
	s := StartWithOptions(t, Options{TLS: cert.ServerTLS()})
	c := connect(t, s.URI(), options.Client().SetTLSConfig(cert.ClientTLS()))
	ctx := testCtx(t, 10*time.Second)
	if err := c.Ping(ctx, nil); err != nil {
		t.Fatalf("ping over TLS: %v", err)
	}
	errc := runAsync(func() error { return c.Database("db").RunCommand(ctx, bson.D{{Key: "x", Value: 1}}).Err() })
	r, err := s.Receive(ctx, Command("x"))
	if err != nil {
		t.Fatal(err)
	}
	_ = r.Reply(nil)
	if err := waitErr(t, errc); err != nil {
		t.Fatal(err)
	}

	// Insecure client, and faults over TLS.
	c2 := connect(t, s.URI()+"&tlsInsecure=true")
	errc = runAsync(func() error { return c2.Database("db").RunCommand(ctx, bson.D{{Key: "y", Value: 1}}).Err() })
	if r, err = s.Receive(ctx, Command("y")); err != nil {
		t.Fatal(err)
	}
	if err := r.Reset(); err != nil {
		t.Fatal(err)
	}
	if err := waitErr(t, errc); err == nil {
		t.Error("Reset over TLS not seen by the driver")
	}

	// A plain-TCP client cannot talk to the TLS server; the server survives.
	rc := dialRaw(t, s.Addr())
	b, _ := bson.Marshal(bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})
	rc.send(wire.AppendMsg(nil, 1, 0, &wire.Msg{Body: b}))
	if _, err := rc.read(); err == nil {
		t.Error("plain client got an answer from the TLS server")
	}
	if err := c.Ping(ctx, nil); err != nil {
		t.Errorf("ping after bad client: %v", err)
	}
}

func TestReplicaSet(t *testing.T) {
	members := StartReplicaSet(t, "rs0", 3, Options{})
	c := connect(t, ReplicaSetURI("rs0", members))
	ctx := testCtx(t, 10*time.Second)
	errc := runAsync(func() error {
		_, err := c.Database("db").Collection("c").InsertOne(ctx, bson.D{{Key: "x", Value: 1}})
		return err
	})
	r, err := members[0].Receive(ctx, Command("insert"))
	if err != nil {
		t.Fatalf("insert did not reach the primary: %v", err)
	}
	_ = r.Reply(bson.D{{Key: "n", Value: 1}})
	if err := waitErr(t, errc); err != nil {
		t.Fatal(err)
	}
	for i, m := range members[1:] {
		short := testCtx(t, 50*time.Millisecond)
		if r, err := m.Receive(short, Command("insert")); err == nil {
			t.Errorf("secondary %d got %v", i+1, r)
		}
	}
	// Each member describes itself.
	for i, m := range members {
		rc := dialRaw(t, m.Addr())
		h := rc.roundTrip(bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}})
		if h.Lookup("setName").StringValue() != "rs0" || h.Lookup("me").StringValue() != m.Addr() ||
			h.Lookup("isWritablePrimary").Boolean() != (i == 0) || h.Lookup("secondary").Boolean() != (i != 0) ||
			h.Lookup("primary").StringValue() != members[0].Addr() {
			t.Errorf("member %d hello = %v", i, h)
		}
		if hosts, _ := h.Lookup("hosts").Array().Values(); len(hosts) != 3 {
			t.Errorf("member %d hosts = %v", i, hosts)
		}
	}
	// Reads with secondary preference go to a secondary.
	errc = runAsync(func() error {
		return c.Database("db").RunCommand(ctx, bson.D{{Key: "find", Value: "c"}},
			options.RunCmd().SetReadPreference(readSecondary())).Err()
	})
	got := make(chan int, 2)
	for i, m := range members[1:] {
		m.Autorespond(Command("find"), func(r *Request) bool {
			got <- i + 1
			return r.ReplyCursor("db.c", 0, true) == nil
		})
	}
	if err := waitErr(t, errc); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
	default:
		t.Error("secondary read did not reach a secondary")
	}
}

func readSecondary() *readpref.ReadPref { return readpref.Secondary() }
