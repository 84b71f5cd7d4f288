package blackpipe

import (
	"bytes"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestReplyBytes: a bson.D reply without "ok" arrives as bson.Marshal
// encodes it with "ok": 1 at its end, whether small or large enough to be
// written as header and body (writevReplySize), and an "ok" it has is kept
// where it is.
func TestReplyBytes(t *testing.T) {
	big := bson.A{}
	for i := range 200 {
		big = append(big, bson.D{{Key: "_id", Value: int32(i)}, {Key: "s", Value: strings.Repeat("y", 100)}})
	}
	replies := map[string]bson.D{
		"small":  {{Key: "n", Value: int32(1)}},
		"large":  {{Key: "cursor", Value: bson.D{{Key: "firstBatch", Value: big}, {Key: "id", Value: int64(0)}}}},
		"has ok": {{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: strings.Repeat("z", writevReplySize)}},
	}
	s := StartWithOptions(t, Options{Handler: func(r *Request) bool {
		d, ok := replies[r.Name]
		if ok {
			_ = r.Reply(d)
		}
		return ok
	}})
	c := dialRaw(t, s.Addr())
	for name, d := range replies {
		want := d
		if d[0].Key != "ok" {
			want = append(bson.D{}, d...)
			want = append(want, bson.E{Key: "ok", Value: 1.0})
		}
		wantRaw, err := bson.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		if name == "large" && len(wantRaw) < writevReplySize {
			t.Fatalf("the large reply is %d bytes, under writevReplySize", len(wantRaw))
		}
		got := c.roundTrip(bson.D{{Key: name, Value: int32(1)}, {Key: "$db", Value: "db"}})
		if !bytes.Equal(got, wantRaw) {
			t.Errorf("%s: reply %d bytes, want %d: %v", name, len(got), len(wantRaw), got)
		}
	}
}
