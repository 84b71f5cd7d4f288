package blackpipe

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// NetworkBytes counts whole wire messages both ways: a command whose
// request and reply are each larger than 10 kB moves both counters by at
// least that much.
func TestNetworkBytes(t *testing.T) {
	s := Start(t)
	s.Autorespond(Command("echo"), func(r *Request) bool {
		_ = r.Reply(bson.D{{Key: "pad", Value: string(make([]byte, 20_000))}, {Key: "ok", Value: 1.0}})
		return true
	})
	c := connect(t, s.URI())
	ctx := testCtx(t, 10*time.Second)
	if err := c.Ping(ctx, nil); err != nil {
		t.Fatal(err)
	}
	in0, out0 := s.NetworkBytes()
	if in0 <= 0 || out0 <= 0 {
		t.Fatalf("after ping: in %d out %d", in0, out0)
	}
	if err := c.Database("admin").RunCommand(ctx, bson.D{{Key: "echo", Value: string(make([]byte, 10_000))}}).Err(); err != nil {
		t.Fatal(err)
	}
	in1, out1 := s.NetworkBytes()
	if in1-in0 < 10_000 || out1-out0 < 20_000 {
		t.Fatalf("echo moved in %d out %d bytes", in1-in0, out1-out0)
	}
}
