package blackpipe

import (
	"bytes"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/wire"
)

// TestReplyBytes: a bson.D reply without "ok" arrives as bson.Marshal
// encodes it with "ok": 1 at its end, whether small or large enough to be
// written as header and body (writevReplySize), and an "ok" it has is kept
// where it is; ReplyD sends what Reply sends.
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
		switch {
		case ok && r.Name == "small":
			_ = r.ReplyD(d) // the same bytes without the interface
		case ok:
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

// TestCommandNameMatchesWire: the request's name is wire.CommandName's,
// whether it is one of the shared strings or not.
func TestCommandNameMatchesWire(t *testing.T) {
	docs := []bson.Raw{nil, {5, 0, 0, 0, 0}, {9, 0, 0, 0, 2, 'a', 'b'}, {7, 0, 0, 0, 2, 0, 0}}
	for _, name := range []string{"find", "insert", "update", "hello", "isMaster", "ping", "configureFailPoint", "x"} {
		raw, err := bson.Marshal(bson.D{{Key: name, Value: int32(1)}, {Key: "$db", Value: "db"}})
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, raw)
	}
	for _, d := range docs {
		if got, want := commandName(d), wire.CommandName(d); got != want {
			t.Errorf("commandName(%x) = %q, want %q", []byte(d), got, want)
		}
	}
}

// TestStringFieldMatchesLookup: $db is found as LookupErr and
// StringValueOK find it, past values of every type, and a truncated
// document neither panics nor finds more than LookupErr.
func TestStringFieldMatchesLookup(t *testing.T) {
	others := bson.D{
		{Key: "d", Value: 1.5}, {Key: "s", Value: "x"}, {Key: "o", Value: bson.D{{Key: "$db", Value: "inner"}}},
		{Key: "a", Value: bson.A{"$db"}}, {Key: "b", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}},
		{Key: "u", Value: bson.Undefined{}}, {Key: "oid", Value: bson.NewObjectID()}, {Key: "t", Value: true},
		{Key: "dt", Value: bson.DateTime(5)}, {Key: "n", Value: nil}, {Key: "re", Value: bson.Regex{Pattern: "a", Options: "i"}},
		{Key: "js", Value: bson.JavaScript("f()")}, {Key: "sym", Value: bson.Symbol("s")}, {Key: "i", Value: int32(1)},
		{Key: "ts", Value: bson.Timestamp{T: 1, I: 2}}, {Key: "l", Value: int64(3)}, {Key: "dec", Value: bson.NewDecimal128(1, 2)},
		{Key: "min", Value: bson.MinKey{}}, {Key: "max", Value: bson.MaxKey{}},
		{Key: "cws", Value: bson.CodeWithScope{Code: "f()", Scope: bson.D{{Key: "x", Value: int32(1)}}}},
	}
	var docs []bson.D
	for i := range others {
		docs = append(docs,
			bson.D{others[i], {Key: "$db", Value: "db"}},
			bson.D{others[i], {Key: "$db", Value: int32(1)}},
			bson.D{others[i]})
	}
	docs = append(docs, append(append(bson.D{}, others...), bson.E{Key: "$db", Value: "last"}, bson.E{Key: "$db", Value: "second"}),
		bson.D{{Key: "$db", Value: ""}}, bson.D{})
	for _, d := range docs {
		raw, err := bson.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		want := ""
		if v, err := bson.Raw(raw).LookupErr("$db"); err == nil {
			want, _ = v.StringValueOK()
		}
		if got := stringField(raw, "$db"); got != want {
			t.Errorf("%v: $db %q, want %q", d, got, want)
		}
		for n := range len(raw) {
			_ = stringField(raw[:n], "$db")
		}
	}
}
