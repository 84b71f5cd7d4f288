package faultproxy

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/wire"
)

// Whatever decodes as a message, inspecting, stripping and rewriting it
// must not panic, and a rewritten message must decode again.
func FuzzMessageHandling(f *testing.F) {
	add := func(d bson.D, flags wire.MsgFlags) {
		b, err := bson.Marshal(d)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(wire.AppendMsg(nil, 1, 0, &wire.Msg{Flags: flags, Body: b}))
		f.Add(wire.AppendQuery(nil, 1, 0, &wire.Query{FullCollectionName: "admin.$cmd", Query: b}))
		f.Add(wire.AppendReply(nil, 1, 0, &wire.Reply{Documents: []bson.Raw{b}}))
	}
	add(bson.D{{Key: "hello", Value: 1}, {Key: "compression", Value: bson.A{"zstd"}}, {Key: "client", Value: bson.D{{Key: "application", Value: bson.D{{Key: "name", Value: "x"}}}}}}, 0)
	add(bson.D{{Key: "$query", Value: bson.D{{Key: "isMaster", Value: 1}, {Key: "compression", Value: bson.A{"zlib"}}}}}, 0)
	add(bson.D{{Key: "hosts", Value: bson.A{"a:1", "b:2"}}, {Key: "me", Value: "a:1"}, {Key: "primary", Value: "b:2"}, {Key: "passives", Value: bson.A{3}}}, wire.MoreToCome)
	add(bson.D{{Key: "bulkWrite", Value: 1}, {Key: "nsInfo", Value: bson.A{bson.D{{Key: "ns", Value: "db.c"}}, 5}}, {Key: "$db", Value: "admin"}}, wire.ChecksumPresent)
	add(bson.D{{Key: "getMore", Value: int64(1)}, {Key: "collection", Value: 7}, {Key: "$db", Value: "db"}}, 0)
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := wire.Decode(data, 1<<20)
		if err != nil {
			return
		}
		in := inspect(m)
		_ = in.namespaces()
		_ = appName(in.cmd)
		if out := stripCompression(&in); out != nil {
			if _, err := wire.Decode(out, 0); err != nil {
				t.Fatalf("stripped message does not decode: %v", err)
			}
		}
		// A closed proxy maps nothing and opens no listener.
		p := &Proxy{closed: true, byUpstream: map[string]*listener{}, opts: Options{MaxListeners: 1}}
		if out := p.rewriteHelloReply(m, nil); out != nil {
			if _, err := wire.Decode(out, 0); err != nil {
				t.Fatalf("rewritten reply does not decode: %v", err)
			}
		}
	})
}
