package blackpipe

import (
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/wire"
)

func request(t *testing.T, cmd bson.D, seqs ...wire.DocumentSequence) *Request {
	t.Helper()
	raw, err := bson.Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return &Request{Command: raw, Name: wire.CommandName(raw), Sequences: seqs, OpCode: wire.OpMsg}
}

func TestMatchers(t *testing.T) {
	oid := bson.NewObjectID()
	doc1, _ := bson.Marshal(bson.D{{Key: "_id", Value: int32(1)}, {Key: "v", Value: "a"}})
	doc2, _ := bson.Marshal(bson.D{{Key: "_id", Value: int64(2)}})
	insert := request(t, bson.D{
		{Key: "insert", Value: "coll"},
		{Key: "ordered", Value: true},
		{Key: "lsid", Value: bson.D{{Key: "id", Value: oid}}},
		{Key: "txnNumber", Value: int64(3)},
		{Key: "writeConcern", Value: bson.D{{Key: "w", Value: "majority"}, {Key: "wtimeout", Value: int32(100)}}},
		{Key: "$db", Value: "db"},
	}, wire.DocumentSequence{Identifier: "documents", Documents: []bson.Raw{doc1, doc2}})
	isMaster := request(t, bson.D{{Key: "ismaster", Value: int32(1)}, {Key: "$db", Value: "admin"}})

	cases := []struct {
		name string
		m    Matcher
		r    *Request
		want bool
	}{
		{"Any", Any, insert, true},
		{"Command exact", Command("insert"), insert, true},
		{"Command case-insensitive", Command("isMaster"), isMaster, true},
		{"Command other", Command("find"), insert, false},
		{"Doc subset", Doc(bson.D{{Key: "insert", Value: "coll"}}), insert, true},
		{"Doc first key case-insensitive", Doc(bson.D{{Key: "isMaster", Value: 1}}), isMaster, true},
		{"Doc first key wrong value", Doc(bson.D{{Key: "insert", Value: "other"}}), insert, false},
		{"Doc int vs int64", Doc(bson.D{{Key: "txnNumber", Value: 3}}), insert, true},
		{"Doc float vs int64", Doc(bson.D{{Key: "txnNumber", Value: 3.0}}), insert, true},
		{"Doc number differs", Doc(bson.D{{Key: "txnNumber", Value: 4}}), insert, false},
		{"Doc fractional", Doc(bson.D{{Key: "txnNumber", Value: 3.5}}), insert, false},
		{"Doc number vs string", Doc(bson.D{{Key: "insert", Value: 1}}), insert, false},
		{"Doc nested subset", Doc(bson.D{{Key: "writeConcern", Value: bson.D{{Key: "w", Value: "majority"}}}}), insert, true},
		{"Doc nested mismatch", Doc(bson.D{{Key: "writeConcern", Value: bson.D{{Key: "w", Value: 1}}}}), insert, false},
		{"Doc nested not a doc", Doc(bson.D{{Key: "ordered", Value: bson.D{}}}), insert, false},
		{"Doc missing field", Doc(bson.D{{Key: "bypassDocumentValidation", Value: true}}), insert, false},
		{"Doc ObjectID", Doc(bson.D{{Key: "lsid", Value: bson.D{{Key: "id", Value: oid}}}}), insert, true},
		{"Doc sequence folded", Doc(bson.D{{Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}}}}), insert, true},
		{"Doc array length differs", Doc(bson.D{{Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}}), insert, false},
		{"Doc typed slice", Doc(bson.D{{Key: "documents", Value: []bson.D{{{Key: "v", Value: "a"}}, {}}}}), insert, true},
		{"Doc Absent ok", Doc(bson.D{{Key: "comment", Value: Absent}}), insert, true},
		{"Doc Absent fails", Doc(bson.D{{Key: "txnNumber", Value: Absent}}), insert, false},
		{"Doc nested Absent", Doc(bson.D{{Key: "writeConcern", Value: bson.D{{Key: "j", Value: Absent}}}}), insert, true},
		{"Doc Anything ok", Doc(bson.D{{Key: "lsid", Value: Anything}}), insert, true},
		{"Doc Anything fails", Doc(bson.D{{Key: "comment", Value: Anything}}), insert, false},
		{"Doc Pred ok", Doc(bson.D{{Key: "txnNumber", Value: Pred(func(v any) bool { n, ok := v.(int64); return ok && n > 2 })}}), insert, true},
		{"Doc Pred fails", Doc(bson.D{{Key: "txnNumber", Value: Pred(func(v any) bool { return false })}}), insert, false},
		{"Doc bson.M", Doc(bson.M{"insert": "coll", "ordered": true, "comment": Absent}), insert, true},
		{"Doc bson.M mismatch", Doc(bson.M{"insert": "coll", "ordered": false}), insert, false},
		{"Doc bson.M case-insensitive name", Doc(bson.M{"isMaster": 1.0}), isMaster, true},
		{"Doc bson.Raw", Doc(bson.Raw(mustMarshal(t, bson.D{{Key: "$db", Value: "db"}}))), insert, true},
		{"Doc struct", Doc(struct {
			Insert string `bson:"insert"`
		}{"coll"}), insert, true},
		{"AllOf true", AllOf(Command("insert"), Doc(bson.D{{Key: "ordered", Value: true}})), insert, true},
		{"AllOf false", AllOf(Command("insert"), Command("find")), insert, false},
		{"AnyOf true", AnyOf(Command("find"), Command("insert")), insert, true},
		{"AnyOf false", AnyOf(Command("find"), Command("update")), insert, false},
		{"Func", Func(func(r *Request) bool { return r.Name == "ismaster" }), isMaster, true},
	}
	for _, c := range cases {
		if got := c.m.Match(c.r); got != c.want {
			t.Errorf("%s: %s.Match = %v, want %v", c.name, describe(c.m), got, c.want)
		}
	}
}

func mustMarshal(t *testing.T, d bson.D) []byte {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestMatcherDescriptions(t *testing.T) {
	m := AllOf(Command("insert"), AnyOf(Doc(bson.D{{Key: "x", Value: Absent}}), Any))
	got := describe(m)
	for _, want := range []string{`Command("insert")`, "AnyOf(", "Absent", "Any"} {
		if !strings.Contains(got, want) {
			t.Errorf("description %q lacks %q", got, want)
		}
	}
}

func TestDocRejectsNonDocumentPattern(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Doc(42) did not panic")
		}
	}()
	Doc(42)
}

// TestMatchersOverDriver checks matching on what the official driver really
// sends: case-insensitive names and numbers by value.
func TestMatchersOverDriver(t *testing.T) {
	s := Start(t)
	c := connect(t, s.URI())
	ctx := testCtx(t, 10*time.Second)
	errc := runAsync(func() error {
		return c.Database("db").RunCommand(ctx, bson.D{{Key: "myCmd", Value: 1}, {Key: "n", Value: int64(5)}}).Err()
	})
	r, err := s.Receive(ctx, AllOf(
		Doc(bson.D{{Key: "MYCMD", Value: 1.0}, {Key: "n", Value: int32(5)}, {Key: "$db", Value: "db"}, {Key: "lsid", Value: Anything}, {Key: "txnNumber", Value: Absent}}),
		Command("mycmd"),
	))
	if err != nil {
		t.Fatal(err)
	}
	_ = r.Reply(nil)
	if err := waitErr(t, errc); err != nil {
		t.Fatal(err)
	}
}
