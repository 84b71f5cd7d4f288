package faultproxy_test

import (
	"net"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/sturdy-go/sturdy/faultproxy"
	"github.com/sturdy-go/sturdy/internal/testcert"
	"github.com/sturdy-go/sturdy/mongosim"
)

// The proxy can speak TLS to the server, and accept TLS from clients; rules
// still apply to the decrypted traffic.
func TestTLS(t *testing.T) {
	cert := testcert.New(t, "127.0.0.1")
	drop := faultproxy.Rule{Match: insertOnly, Action: faultproxy.Action{Kind: faultproxy.DropRequest, RST: true}, Times: 1}

	t.Run("to the server", func(t *testing.T) {
		sim := mongosim.StartWithOptions(t, mongosim.Options{TLS: cert.ServerTLS()})
		p := startProxyWith(t, sim, faultproxy.Options{UpstreamTLS: cert.ClientTLS(), Rules: []faultproxy.Rule{drop}})
		c := driver(t, p.URI(), "retryWrites=false")
		coll := c.Database("db").Collection("c")
		if _, err := coll.InsertOne(testCtx(t), bson.D{{Key: "_id", Value: 1}}); !mongo.IsNetworkError(err) {
			t.Fatalf("first insert: %v", err)
		}
		if _, err := coll.InsertOne(testCtx(t), bson.D{{Key: "_id", Value: 2}}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("from the client", func(t *testing.T) {
		sim := mongosim.Start(t)
		p := startProxyWith(t, sim, faultproxy.Options{TLS: cert.ServerTLS(), Rules: []faultproxy.Rule{drop}})
		if !strings.Contains(p.URI(), "tls=true") {
			t.Fatalf("URI %s does not ask for TLS", p.URI())
		}
		c, err := mongo.Connect(options.Client().ApplyURI(p.URI()).SetTLSConfig(cert.ClientTLS()).SetRetryWrites(false))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Disconnect(testCtx(t))
		coll := c.Database("db").Collection("c")
		if _, err := coll.InsertOne(testCtx(t), bson.D{{Key: "_id", Value: 1}}); !mongo.IsNetworkError(err) {
			t.Fatalf("first insert: %v", err)
		}
		if _, err := coll.InsertOne(testCtx(t), bson.D{{Key: "_id", Value: 2}}); err != nil {
			t.Fatal(err)
		}
		if n := countDirect(t, sim, "db", "c", nil); n != 1 {
			t.Errorf("%d documents, want 1", n)
		}
	})
}

// An upstream given by another name than the one it calls itself gets one
// listener, not two.
func TestUpstreamAlias(t *testing.T) {
	sim := mongosim.Start(t)
	_, port, _ := net.SplitHostPort(sim.Members()[0].Addr())
	p := startProxyWith(t, sim, faultproxy.Options{Upstreams: []string{"localhost:" + port}})
	if len(p.Addrs()) != 1 {
		t.Fatalf("listeners %v for one member", p.Addrs())
	}
	r := roundTrip(t, testCtx(t), p.Addrs()[0], bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}})
	vals, _ := r.Lookup("hosts").Array().Values()
	if len(vals) != 1 || vals[0].StringValue() != p.Addrs()[0] || len(p.Addrs()) != 1 {
		t.Errorf("hosts %v, listeners %v", vals, p.Addrs())
	}
}
