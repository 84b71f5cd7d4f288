package conn_test

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/blackpipe"
	"github.com/sturdy-go/sturdy/internal/conn"
)

// TestParseDescriptionReadsLikeMongod checks, over a real handshake, the
// readings ParseDescription settles where servers and proxies differ.
func TestParseDescriptionReadsLikeMongod(t *testing.T) {
	srv := blackpipe.Start(t)
	srv.Autorespond(blackpipe.Command("hello"), func(r *blackpipe.Request) bool {
		return r.Reply(bson.D{
			{Key: "isWritablePrimary", Value: true},
			{Key: "ismaster", Value: false}, // isWritablePrimary wins, in any order
			{Key: "secondary", Value: 0.5},  // any non-zero number is true
			{Key: "hidden", Value: int64(0)},
			{Key: "maxWireVersion", Value: 25.0},                           // a double is read as an integer
			{Key: "maxBsonObjectSize", Value: int64(1<<32 + 16*1024*1024)}, // out of int32 range: absent, not wrapped
			{Key: "logicalSessionTimeoutMinutes", Value: int64(1 << 40)},   // int64 kept whole
			{Key: "topologyVersion", Value: bson.D{{Key: "processId", Value: bson.NewObjectID()}, {Key: "counter", Value: int64(7)}}},
		}) == nil
	})
	c, err := conn.Dial(context.Background(), srv.Addr(), conn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d := c.Description()
	if !d.IsWritablePrimary {
		t.Error("ismaster: false overrode isWritablePrimary: true")
	}
	if !d.Secondary || d.Hidden {
		t.Errorf("secondary %v hidden %v, want true false", d.Secondary, d.Hidden)
	}
	if d.MaxWireVersion != 25 {
		t.Errorf("maxWireVersion %d, want 25", d.MaxWireVersion)
	}
	if d.MaxBSONObjectSize != 0 {
		t.Errorf("out-of-range maxBsonObjectSize read as %d, want 0 (absent)", d.MaxBSONObjectSize)
	}
	if d.LogicalSessionTimeoutMinutes == nil || *d.LogicalSessionTimeoutMinutes != 1<<40 {
		t.Errorf("logicalSessionTimeoutMinutes %v, want %d", d.LogicalSessionTimeoutMinutes, int64(1<<40))
	}
	if d.TopologyVersion == nil || d.TopologyVersion.Counter != 7 {
		t.Errorf("topologyVersion %+v, want counter 7", d.TopologyVersion)
	}
}

func TestParseDescriptionLegacyAndMalformed(t *testing.T) {
	raw, _ := bson.Marshal(bson.D{{Key: "ismaster", Value: int32(1)}, {Key: "isreplicaset", Value: true},
		{Key: "minWireVersion", Value: "nine"}, {Key: "hosts", Value: bson.A{"a:1", 2, "b:2"}}})
	d, err := conn.ParseDescription(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !d.IsWritablePrimary || !d.IsReplicaSet || d.MinWireVersion != 0 || len(d.Hosts) != 2 {
		t.Errorf("parsed %+v", d)
	}
	if _, err := conn.ParseDescription(bson.Raw{5, 0, 0, 0, 1}); err == nil {
		t.Error("a malformed reply parsed without error")
	}
}
