package mongosim

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// BenchmarkAdminHooks measures what every request now pays for currentOp,
// opcounters and latencyStats: registering the operation, counting it and
// recording its latency.
func BenchmarkAdminHooks(b *testing.B) {
	var a adminState
	cmd := bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{}}}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r := &request{ctx: context.Background(), db: "db", name: "find", cmd: cmd}
			a.ops.begin(r)
			a.opc.count(r)
			a.lat.record(r, 50*time.Microsecond)
			a.ops.end(r)
		}
	})
}

func BenchmarkAdminHooksParts(b *testing.B) {
	var a adminState
	cmd := bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{}}}
	r := &request{ctx: context.Background(), db: "db", name: "find", cmd: cmd}
	b.Run("begin", func(b *testing.B) {
		for range b.N {
			r.ctx = context.Background()
			a.ops.begin(r)
			a.ops.end(r)
		}
	})
	b.Run("count", func(b *testing.B) {
		for range b.N {
			a.opc.count(r)
		}
	})
	b.Run("record", func(b *testing.B) {
		for range b.N {
			a.lat.record(r, 50*time.Microsecond)
		}
	})
}
