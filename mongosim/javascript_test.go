package mongosim

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// everyType is a document holding one value of each BSON type a script can
// see, for round trips through $function and mapReduce.
func everyType(t *testing.T) bson.D {
	t.Helper()
	dec, err := bson.ParseDecimal128("12.345")
	sdNoErr(t, err)
	return bson.D{
		{Key: "i32", Value: int32(7)}, {Key: "i64", Value: int64(1) << 62}, {Key: "dbl", Value: 2.5},
		{Key: "str", Value: "héllo"}, {Key: "yes", Value: true}, {Key: "nil", Value: nil},
		{Key: "oid", Value: bson.NewObjectID()}, {Key: "date", Value: bson.DateTime(1700000000123)},
		{Key: "dec", Value: dec}, {Key: "bin", Value: bson.Binary{Subtype: 0, Data: []byte{0, 1, 2, 250}}},
		{Key: "uuid", Value: bson.Binary{Subtype: 4, Data: []byte("0123456789abcdef")}},
		{Key: "ts", Value: bson.Timestamp{T: 1700000000, I: 3}}, {Key: "re", Value: bson.Regex{Pattern: "^ab+", Options: "i"}},
		{Key: "min", Value: bson.MinKey{}}, {Key: "max", Value: bson.MaxKey{}},
		{Key: "arr", Value: bson.A{int32(1), int64(2), 3.5, "four", bson.D{{Key: "five", Value: int32(5)}}}},
		{Key: "sub", Value: bson.D{{Key: "deep", Value: bson.D{{Key: "x", Value: int32(1)}}}}},
	}
}

func marshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := bson.Marshal(v)
	sdNoErr(t, err)
	return b
}

func TestJSWhere(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("js")
	coll := db.Collection("where")
	_, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}, {Key: "b", Value: 1}},
		bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: 2}, {Key: "b", Value: 3}},
		bson.D{{Key: "_id", Value: 3}, {Key: "a", Value: 3}, {Key: "b", Value: 3}},
	})
	sdNoErr(t, err)
	ids := func(filter bson.D) []int32 {
		t.Helper()
		cur, err := coll.Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
		sdNoErr(t, err)
		var docs []struct {
			ID int32 `bson:"_id"`
		}
		sdNoErr(t, cur.All(ctx, &docs))
		out := []int32{}
		for _, d := range docs {
			out = append(out, d.ID)
		}
		return out
	}
	for _, c := range []struct {
		name  string
		where any
		want  string
	}{
		{"expression", "this.a == this.b", "[1 3]"},
		{"body", "return this.a > 1", "[2 3]"},
		{"obj", "obj.a < 2", "[1]"},
		{"false", "false", "[]"},
		{"function code", bson.JavaScript("function() { return this.b == 3 && this._id != 3; }"), "[2]"},
		{"function string", "function() { sleep(1); return true; }", "[1 2 3]"},
		{"with scope", bson.CodeWithScope{Code: "function() { return this.a == want; }", Scope: bson.D{{Key: "want", Value: 3}}}, "[3]"},
	} {
		if got := fmt.Sprint(ids(bson.D{{Key: "$where", Value: c.where}})); got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, got, c.want)
		}
	}
	// Cheaper predicates run first: the script never sees _id 1.
	if got := fmt.Sprint(ids(bson.D{{Key: "$where", Value: "if (this._id == 1) throw 'saw 1'; return true"}, {Key: "_id", Value: bson.D{{Key: "$gt", Value: 1}}}})); got != "[2 3]" {
		t.Errorf("$where with another predicate: %s", got)
	}
	// The count command takes $where; CountDocuments (an aggregate $match)
	// does not, as on mongod.
	res0 := mustRun(t, ctx, db, bson.D{{Key: "count", Value: "where"}, {Key: "query", Value: bson.D{{Key: "$where", Value: "this.a >= 2"}}}})
	if n := lookupInt(t, res0, "n"); n != 2 {
		t.Errorf("count with $where: %d", n)
	}
	_, err = coll.CountDocuments(ctx, bson.D{{Key: "$where", Value: "true"}})
	commandError(t, err, 2)
	res, err := coll.UpdateMany(ctx, bson.D{{Key: "$where", Value: "this.a == 2"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "hit", Value: true}}}})
	sdNoErr(t, err)
	if res.ModifiedCount != 1 {
		t.Errorf("update with $where modified %d", res.ModifiedCount)
	}
	dist := coll.Distinct(ctx, "b", bson.D{{Key: "$where", Value: "this.a < 3"}})
	sdNoErr(t, dist.Err())
	var bs []int32
	sdNoErr(t, dist.Decode(&bs))
	if fmt.Sprint(bs) != "[1 3]" {
		t.Errorf("distinct with $where: %v", bs)
	}
	var fam bson.D
	sdNoErr(t, coll.FindOneAndUpdate(ctx, bson.D{{Key: "$where", Value: "this.hit === true"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "seen", Value: 1}}}}).Decode(&fam))
	if id, _ := fam[0].Value.(int32); id != 2 {
		t.Errorf("findOneAndUpdate with $where: %v", fam)
	}
	del, err := coll.DeleteMany(ctx, bson.D{{Key: "$where", Value: "this.seen == 1"}})
	sdNoErr(t, err)
	if del.DeletedCount != 1 {
		t.Errorf("delete with $where deleted %d", del.DeletedCount)
	}

	_, err = coll.Find(ctx, bson.D{{Key: "$where", Value: "function myFunction() { return a(); }"}})
	ce := commandError(t, err, 139)
	if !strings.Contains(ce.Message, "ReferenceError") {
		t.Errorf("JS error message: %s", ce.Message)
	}
	_, err = coll.Find(ctx, bson.D{{Key: "$where", Value: "function ( {"}})
	commandError(t, err, 139)
	_, err = coll.Find(ctx, bson.D{{Key: "$where", Value: 1}})
	commandError(t, err, 2)
	_, err = coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "$where", Value: "true"}}}}})
	commandError(t, err, 2)
	_, err = coll.Find(ctx, bson.D{{Key: "arr", Value: bson.D{{Key: "$elemMatch", Value: bson.D{{Key: "x", Value: 1}, {Key: "$where", Value: "true"}}}}}})
	commandError(t, err, 2)
	_, err = coll.Find(ctx, bson.D{{Key: "a", Value: bson.D{{Key: "$where", Value: "true"}}}})
	commandError(t, err, 2)
}

func TestJSFunctionRoundTripsTypes(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("js").Collection("types")
	doc := everyType(t)
	_, err := coll.InsertOne(ctx, append(bson.D{{Key: "_id", Value: 1}}, doc...))
	sdNoErr(t, err)
	fn := func(body string, args bson.A) bson.D {
		return bson.D{{Key: "$function", Value: bson.D{{Key: "body", Value: body}, {Key: "args", Value: args}, {Key: "lang", Value: "js"}}}}
	}
	cur, err := coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$project", Value: bson.D{
		{Key: "_id", Value: 0},
		{Key: "same", Value: fn("function(d) { delete d._id; return d; }", bson.A{"$$ROOT"})},
		{Key: "made", Value: fn(`function(n) {
			return {n: n + 1, l: NumberLong("9007199254740993"), i: NumberInt(5), d: NumberDecimal("0.1"),
				o: ObjectId("0123456789abcdef01234567"), t: ISODate("2024-05-06T07:08:09.010Z"), ts: Timestamp(3, 4),
				b: BinData(0, "AAEC"), u: UUID("00112233-4455-6677-8899-aabbccddeeff"), md5: hex_md5("mongo"),
				s: Array.sum([1, 2, 3]), j: tojson({a: [1]}, "", true), c: new Date(0), mk: MinKey(), x: MaxKey()};
		}`, bson.A{"$i32"})},
	}}}})
	sdNoErr(t, err)
	var out []bson.Raw
	sdNoErr(t, cur.All(ctx, &out))
	if len(out) != 1 {
		t.Fatalf("got %d documents", len(out))
	}
	if got := out[0].Lookup("same").Document(); !bytes.Equal(got, marshal(t, doc)) {
		t.Errorf("$function changed the document:\n got %s\nwant %s", got, bson.Raw(marshal(t, doc)))
	}
	dec, _ := bson.ParseDecimal128("0.1")
	oid, _ := bson.ObjectIDFromHex("0123456789abcdef01234567")
	want := bson.D{
		{Key: "n", Value: 8.0}, {Key: "l", Value: int64(9007199254740993)}, {Key: "i", Value: int32(5)}, {Key: "d", Value: dec},
		{Key: "o", Value: oid}, {Key: "t", Value: bson.DateTime(1714979289010)}, {Key: "ts", Value: bson.Timestamp{T: 3, I: 4}},
		{Key: "b", Value: bson.Binary{Data: []byte{0, 1, 2}}},
		{Key: "u", Value: bson.Binary{Subtype: 4, Data: []byte{0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}}},
		{Key: "md5", Value: "e2c2a4d8d5e5f1e4e3c1e1f7c5fb8b3a"}, {Key: "s", Value: 6.0}, {Key: "j", Value: `{ "a" : [ 1 ] }`},
		{Key: "c", Value: bson.DateTime(0)}, {Key: "mk", Value: bson.MinKey{}}, {Key: "x", Value: bson.MaxKey{}},
	}
	want[9].Value = md5Hex("mongo")
	if got := out[0].Lookup("made").Document(); !bytes.Equal(got, marshal(t, want)) {
		t.Errorf("values made in JavaScript:\n got %s\nwant %s", got, bson.Raw(marshal(t, want)))
	}

	_, err = coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$project", Value: bson.D{{Key: "x", Value: fn("function() { throw new Error('boom'); }", bson.A{})}}}}})
	if ce := commandError(t, err, 139); !strings.Contains(ce.Message, "boom") {
		t.Errorf("thrown error: %s", ce.Message)
	}
	_, err = coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$project", Value: bson.D{{Key: "x", Value: bson.D{{Key: "$function", Value: bson.D{{Key: "body", Value: "function() {}"}, {Key: "args", Value: bson.A{}}, {Key: "lang", Value: "python"}}}}}}}}})
	commandError(t, err, 31419)
	_, err = coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$project", Value: bson.D{{Key: "x", Value: bson.D{{Key: "$function", Value: bson.D{{Key: "body", Value: "function() {}"}, {Key: "args", Value: "$i32"}, {Key: "lang", Value: "js"}}}}}}}}})
	commandError(t, err, 31266)
	// $function in a find's $expr.
	n, err := coll.CountDocuments(ctx, bson.D{{Key: "$expr", Value: fn("function(x) { return x == 7; }", bson.A{"$i32"})}})
	sdNoErr(t, err)
	if n != 1 {
		t.Errorf("$expr with $function matched %d", n)
	}
}

func TestJSAccumulator(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("js").Collection("acc")
	_, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "g", Value: "a"}, {Key: "v", Value: 1}}, bson.D{{Key: "g", Value: "a"}, {Key: "v", Value: 2}},
		bson.D{{Key: "g", Value: "b"}, {Key: "v", Value: 10}}, bson.D{{Key: "g", Value: "a"}, {Key: "v", Value: int64(3)}},
	})
	sdNoErr(t, err)
	avg := bson.D{{Key: "$accumulator", Value: bson.D{
		{Key: "init", Value: "function(label) { return {label: label, count: 0, sum: 0}; }"},
		{Key: "initArgs", Value: bson.A{"$g"}},
		{Key: "accumulate", Value: "function(state, v) { return {label: state.label, count: state.count + 1, sum: state.sum + v}; }"},
		{Key: "accumulateArgs", Value: bson.A{"$v"}},
		{Key: "merge", Value: "function(a, b) { return {label: a.label, count: a.count + b.count, sum: a.sum + b.sum}; }"},
		{Key: "finalize", Value: "function(state) { return state.label + ':' + (state.sum / state.count); }"},
		{Key: "lang", Value: "js"},
	}}}
	cur, err := coll.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$g"}, {Key: "avg", Value: avg}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}},
		{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}},
	})
	sdNoErr(t, err)
	var groups []bson.D
	sdNoErr(t, cur.All(ctx, &groups))
	if fmt.Sprint(groups) != `[{"_id":"a","avg":"a:2","n":{"$numberInt":"3"}} {"_id":"b","avg":"b:10","n":{"$numberInt":"1"}}]` {
		t.Errorf("$accumulator groups: %v", groups)
	}
	// The same accumulator in $bucket, without finalize: the state itself.
	noFinal := bson.D{{Key: "$accumulator", Value: bson.D{
		{Key: "init", Value: "function() { return []; }"},
		{Key: "accumulate", Value: "function(s, v) { s.push(v); return s; }"},
		{Key: "accumulateArgs", Value: bson.A{"$v"}},
		{Key: "merge", Value: "function(a, b) { return a.concat(b); }"},
		{Key: "lang", Value: "js"},
	}}}
	cur, err = coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$bucket", Value: bson.D{
		{Key: "groupBy", Value: "$v"}, {Key: "boundaries", Value: bson.A{0, 5, 100}}, {Key: "output", Value: bson.D{{Key: "vs", Value: noFinal}}},
	}}}})
	sdNoErr(t, err)
	var buckets []bson.Raw
	sdNoErr(t, cur.All(ctx, &buckets))
	// The accumulate calls share the state in JavaScript: the int32s come
	// back as doubles, the NumberLong as a long.
	wantB := []bson.D{{{Key: "_id", Value: int32(0)}, {Key: "vs", Value: bson.A{1.0, 2.0, int64(3)}}}, {{Key: "_id", Value: int32(5)}, {Key: "vs", Value: bson.A{10.0}}}}
	if len(buckets) != 2 || !bytes.Equal(buckets[0], marshal(t, wantB[0])) || !bytes.Equal(buckets[1], marshal(t, wantB[1])) {
		t.Errorf("$bucket with $accumulator: %v", buckets)
	}
	badArgs := bson.D{{Key: "$accumulator", Value: bson.D{
		{Key: "init", Value: "function() { return 0; }"}, {Key: "accumulate", Value: "function(s) { return s; }"},
		{Key: "accumulateArgs", Value: "$v"}, {Key: "merge", Value: "function(a) { return a; }"}, {Key: "lang", Value: "js"},
	}}}
	_, err = coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "x", Value: badArgs}}}}})
	commandError(t, err, 4544712)
}

func md5Hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestJSMapReduce(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("js")
	coll := db.Collection("orders")
	_, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "cust", Value: "ann"}, {Key: "price", Value: 10}, {Key: "st", Value: "A"}},
		bson.D{{Key: "_id", Value: 2}, {Key: "cust", Value: "ann"}, {Key: "price", Value: 5}, {Key: "st", Value: "A"}},
		bson.D{{Key: "_id", Value: 3}, {Key: "cust", Value: "bob"}, {Key: "price", Value: 7}, {Key: "st", Value: "A"}},
		bson.D{{Key: "_id", Value: 4}, {Key: "cust", Value: "bob"}, {Key: "price", Value: 100}, {Key: "st", Value: "B"}},
	})
	sdNoErr(t, err)
	mr := func(extra ...bson.E) bson.D {
		return append(bson.D{
			{Key: "mapReduce", Value: "orders"},
			{Key: "map", Value: bson.JavaScript("function() { emit(this.cust, this.price * factor); }")},
			{Key: "reduce", Value: "function(key, values) { return Array.sum(values); }"},
			{Key: "query", Value: bson.D{{Key: "st", Value: "A"}}},
			{Key: "scope", Value: bson.D{{Key: "factor", Value: 2}}},
		}, extra...)
	}
	res := mustRun(t, ctx, db, mr(bson.E{Key: "out", Value: bson.D{{Key: "inline", Value: 1}}}))
	// ann's two values are reduced (a double), bob's single value is not
	// reduced but was computed in JavaScript (a double too).
	want := bson.A{bson.D{{Key: "_id", Value: "ann"}, {Key: "value", Value: 30.0}}, bson.D{{Key: "_id", Value: "bob"}, {Key: "value", Value: 14.0}}}
	if got := res.Lookup("results").Array(); !bytes.Equal(got, arrayBytes(t, want)) {
		t.Errorf("inline results %s", got)
	}
	// finalize, sort and limit: only the first order by price.
	res = mustRun(t, ctx, db, mr(bson.E{Key: "out", Value: bson.D{{Key: "inline", Value: 1}}},
		bson.E{Key: "sort", Value: bson.D{{Key: "price", Value: 1}}}, bson.E{Key: "limit", Value: 1},
		bson.E{Key: "finalize", Value: "function(key, v) { return {key: key, total: v}; }"}))
	want = bson.A{bson.D{{Key: "_id", Value: "ann"}, {Key: "value", Value: bson.D{{Key: "key", Value: "ann"}, {Key: "total", Value: 10.0}}}}}
	if got := res.Lookup("results").Array(); !bytes.Equal(got, arrayBytes(t, want)) {
		t.Errorf("finalize/sort/limit results %s", got)
	}

	// out to a collection: replace, then merge and reduce into it.
	out := db.Collection("totals")
	_, err = out.InsertOne(ctx, bson.D{{Key: "_id", Value: "zed"}, {Key: "value", Value: 1.0}})
	sdNoErr(t, err)
	res = mustRun(t, ctx, db, mr(bson.E{Key: "out", Value: "totals"}))
	if res.Lookup("result").StringValue() != "totals" {
		t.Errorf("out reply %s", res)
	}
	totals := func() string {
		cur, err := out.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
		sdNoErr(t, err)
		var docs []bson.D
		sdNoErr(t, cur.All(ctx, &docs))
		return fmt.Sprint(docs)
	}
	if got := totals(); got != `[{"_id":"ann","value":{"$numberDouble":"30.0"}} {"_id":"bob","value":{"$numberDouble":"14.0"}}]` {
		t.Errorf("after replace: %s", got)
	}
	_, err = out.InsertOne(ctx, bson.D{{Key: "_id", Value: "zed"}, {Key: "value", Value: 1.0}})
	sdNoErr(t, err)
	_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 5}, {Key: "cust", Value: "bob"}, {Key: "price", Value: 1}, {Key: "st", Value: "A"}})
	sdNoErr(t, err)
	mustRun(t, ctx, db, mr(bson.E{Key: "out", Value: bson.D{{Key: "merge", Value: "totals"}}}))
	if got := totals(); got != `[{"_id":"ann","value":{"$numberDouble":"30.0"}} {"_id":"bob","value":{"$numberDouble":"16.0"}} {"_id":"zed","value":{"$numberDouble":"1.0"}}]` {
		t.Errorf("after merge: %s", got)
	}
	res = mustRun(t, ctx, db, mr(bson.E{Key: "out", Value: bson.D{{Key: "reduce", Value: "totals"}, {Key: "db", Value: "js"}}}))
	if res.Lookup("result", "collection").StringValue() != "totals" || res.Lookup("result", "db").StringValue() != "js" {
		t.Errorf("out with db reply %s", res)
	}
	if got := totals(); got != `[{"_id":"ann","value":{"$numberDouble":"60.0"}} {"_id":"bob","value":{"$numberDouble":"32.0"}} {"_id":"zed","value":{"$numberDouble":"1.0"}}]` {
		t.Errorf("after reduce: %s", got)
	}

	// Values keep their BSON types through emit when a key has one value.
	typed := db.Collection("typed")
	doc := everyType(t)
	_, err = typed.InsertOne(ctx, append(bson.D{{Key: "_id", Value: 1}}, doc...))
	sdNoErr(t, err)
	res = mustRun(t, ctx, db, bson.D{{Key: "mapReduce", Value: "typed"},
		{Key: "map", Value: "function() { var d = this; delete d._id; emit(this.oid, d); }"},
		{Key: "reduce", Value: "function(k, vs) { return vs[0]; }"}, {Key: "out", Value: bson.D{{Key: "inline", Value: 1}}}})
	got := res.Lookup("results").Array().Index(0).Document()
	if !bytes.Equal(got.Lookup("value").Document(), marshal(t, doc)) || got.Lookup("_id").ObjectID() != doc[6].Value {
		t.Errorf("typed mapReduce result %s", got)
	}

	_, err = runCmd(ctx, db, bson.D{{Key: "mapReduce", Value: "orders"}, {Key: "map", Value: "function() { emit(this.cust, 1); }"}, {Key: "reduce", Value: "function(k, v) { return nope; }"}, {Key: "out", Value: bson.D{{Key: "inline", Value: 1}}}})
	commandError(t, err, 139)
	_, err = runCmd(ctx, db, bson.D{{Key: "mapReduce", Value: "orders"}, {Key: "map", Value: "function() {}"}, {Key: "reduce", Value: "function() {}"}})
	commandError(t, err, 40414)
	_, err = runCmd(ctx, db, bson.D{{Key: "mapReduce", Value: "orders"}, {Key: "map", Value: "function() {}"}, {Key: "reduce", Value: "function() {}"}, {Key: "out", Value: bson.D{{Key: "bogus", Value: "x"}}}})
	commandError(t, err, 13522)
}

func arrayBytes(t *testing.T, a bson.A) bson.RawArray {
	t.Helper()
	b := marshal(t, bson.D{{Key: "a", Value: a}})
	return bson.Raw(b).Lookup("a").Array()
}

// opInProgress waits until an operation whose command has the given field
// shows in currentOp and returns its opid.
func opInProgress(t *testing.T, ctx context.Context, admin *mongo.Database, field string) int64 {
	t.Helper()
	for {
		raw := mustRun(t, ctx, admin, bson.D{{Key: "currentOp", Value: 1}, {Key: "command." + field, Value: bson.D{{Key: "$exists", Value: true}}}})
		if ops := mustValues(raw.Lookup("inprog")); len(ops) > 0 {
			return lookupInt(t, ops[0].Document(), "opid")
		}
		if ctx.Err() != nil {
			t.Fatalf("no %s operation showed in currentOp", field)
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not synchronisation
	}
}

func TestJSSleepHoldsOnlyItsOperation(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("js")
	coll := db.Collection("sleepy")
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
	sdNoErr(t, err)

	// A find sleeping in $where until killOp ends it.
	done := make(chan error, 1)
	go func() {
		_, err := coll.Find(ctx, bson.D{{Key: "$where", Value: "function() { sleep(600000); return true; }"}})
		done <- err
	}()
	admin := client.Database("admin")
	opid := opInProgress(t, ctx, admin, "filter.$where")
	// The member answers other operations meanwhile, including writes to
	// the collection the sleeping find reads.
	mustRun(t, ctx, admin, bson.D{{Key: "ping", Value: 1}})
	_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}})
	sdNoErr(t, err)
	n, err := coll.CountDocuments(ctx, bson.D{})
	sdNoErr(t, err)
	select {
	case err := <-done:
		t.Fatalf("the sleeping find ended early: %v", err)
	default:
	}
	if n != 2 {
		t.Fatalf("count %d", n)
	}
	mustRun(t, ctx, admin, bson.D{{Key: "killOp", Value: 1}, {Key: "op", Value: opid}})
	commandError(t, <-done, 11601)

	// maxTimeMS ends a sleep with MaxTimeMSExpired, after the limit.
	start := time.Now()
	_, err = runCmd(ctx, db, bson.D{{Key: "find", Value: "sleepy"}, {Key: "filter", Value: bson.D{{Key: "$where", Value: "sleep(600000) || true"}}}, {Key: "maxTimeMS", Value: 150}})
	if ce := commandError(t, err, 50); ce.Message != "Executor error during find command :: caused by :: operation exceeded time limit" {
		t.Errorf("maxTimeMS message: %s", ce.Message)
	}
	if el := time.Since(start); el < 150*time.Millisecond || el > 30*time.Second {
		t.Errorf("a 150ms maxTimeMS ended the sleep after %v", el)
	}
}

// TestJSTimeoutsThroughTheGoDriver is how drivers' timeout tests hold a
// connection: a $where that sleeps, under the client's timeoutMS (CSOT) or
// a context deadline; the driver sends maxTimeMS and reports a timeout.
func TestJSTimeoutsThroughTheGoDriver(t *testing.T) {
	c := StartWithOptions(t, Options{})
	ctx := sdCtx(t)
	client := connect(t, c.URI(), options.Client().SetTimeout(300*time.Millisecond))
	coll := client.Database("js").Collection("csot")
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
	sdNoErr(t, err)
	cur, err := coll.Find(context.Background(), bson.D{{Key: "$where", Value: "function() { sleep(100); return true; }"}})
	sdNoErr(t, err) // 100ms fits in 300ms
	sdNoErr(t, cur.Close(ctx))
	_, err = coll.Find(context.Background(), bson.D{{Key: "$where", Value: "function() { sleep(60000); return true; }"}})
	if !mongo.IsTimeout(err) {
		t.Fatalf("find past timeoutMS: %v", err)
	}
	dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	err = coll.FindOne(dctx, bson.D{{Key: "$where", Value: "while (true) {}"}}).Err()
	if !mongo.IsTimeout(err) {
		t.Fatalf("runaway loop past the context deadline: %v", err)
	}
	// The member still answers.
	sdNoErr(t, client.Ping(ctx, nil))

	// A context cancelled while the script sleeps: the driver gives up on
	// the connection (context.Canceled), the member answers the others.
	cctx, ccancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := coll.Find(cctx, bson.D{{Key: "$where", Value: "function() { sleep(1000); return false; }"}})
		done <- err
	}()
	opInProgress(t, ctx, client.Database("admin"), "filter.$where")
	ccancel()
	if err := <-done; !errors.Is(err, context.Canceled) || mongo.IsTimeout(err) {
		t.Fatalf("cancelled find: %v", err)
	}
	sdNoErr(t, client.Ping(ctx, nil))

	// A client that closes the connection interrupts its script: a loop
	// without a time limit leaves currentOp once the connection is gone.
	other := connect(t, c.URI())
	lctx, lcancel := context.WithCancel(ctx)
	looped := make(chan error, 1)
	go func() {
		_, err := other.Database("js").Collection("csot").Find(lctx, bson.D{{Key: "$where", Value: "while (true) {}"}})
		looped <- err
	}()
	admin := client.Database("admin")
	opInProgress(t, ctx, admin, "filter.$where")
	lcancel()
	<-looped
	for {
		raw := mustRun(t, ctx, admin, bson.D{{Key: "currentOp", Value: 1}, {Key: "command.filter.$where", Value: bson.D{{Key: "$exists", Value: true}}}})
		if len(mustValues(raw.Lookup("inprog"))) == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the script of a disconnected client kept running")
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not synchronisation
	}
}

func TestJSRunawayScriptsAreInterrupted(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("js")
	coll := db.Collection("loop")
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
	sdNoErr(t, err)
	_, err = runCmd(ctx, db, bson.D{{Key: "find", Value: "loop"}, {Key: "filter", Value: bson.D{{Key: "$where", Value: "while (true) {}"}}}, {Key: "maxTimeMS", Value: 100}})
	commandError(t, err, 50)
	_, err = runCmd(ctx, db, bson.D{{Key: "mapReduce", Value: "loop"}, {Key: "map", Value: "function() { for (;;) {} }"},
		{Key: "reduce", Value: "function() {}"}, {Key: "out", Value: bson.D{{Key: "inline", Value: 1}}}, {Key: "maxTimeMS", Value: 100}})
	commandError(t, err, 50)

	// killOp ends a looping $function, even one that catches exceptions.
	done := make(chan error, 1)
	go func() {
		_, err := coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$project", Value: bson.D{{Key: "x", Value: bson.D{{Key: "$function", Value: bson.D{
			{Key: "body", Value: "function() { while (true) { try { sleep(1); } catch (e) {} } }"}, {Key: "args", Value: bson.A{}}, {Key: "lang", Value: "js"},
		}}}}}}}})
		done <- err
	}()
	opid := opInProgress(t, ctx, client.Database("admin"), "pipeline")
	mustRun(t, ctx, client.Database("admin"), bson.D{{Key: "killOp", Value: 1}, {Key: "op", Value: opid}})
	commandError(t, <-done, 11601)
	// Runtimes go back to the pool clean: the next script runs.
	res := mustRun(t, ctx, db, bson.D{{Key: "count", Value: "loop"}, {Key: "query", Value: bson.D{{Key: "$where", Value: "true"}}}})
	if n := lookupInt(t, res, "n"); n != 1 {
		t.Fatalf("count after interrupts: %d", n)
	}
}

func TestJSDisabled(t *testing.T) {
	c := StartWithOptions(t, Options{JavaScriptDisabled: true})
	ctx := sdCtx(t)
	client := connect(t, c.URI())
	db := client.Database("js")
	coll := db.Collection("off")
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: 1}})
	sdNoErr(t, err)
	_, err = coll.Find(ctx, bson.D{{Key: "$where", Value: "true"}})
	if ce := commandError(t, err, 6108304); ce.Message != "no globalScriptEngine in $where parsing" {
		t.Errorf("$where: %s", ce.Message)
	}
	_, err = coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$project", Value: bson.D{{Key: "x", Value: bson.D{{Key: "$function", Value: bson.D{
		{Key: "body", Value: "function() { return 1; }"}, {Key: "args", Value: bson.A{}}, {Key: "lang", Value: "js"}}}}}}}}})
	commandError(t, err, 31264)
	acc := bson.D{{Key: "$accumulator", Value: bson.D{
		{Key: "init", Value: "function() { return 0; }"}, {Key: "accumulate", Value: "function(s, v) { return s + v; }"},
		{Key: "accumulateArgs", Value: bson.A{"$v"}}, {Key: "merge", Value: "function(a, b) { return a + b; }"}, {Key: "lang", Value: "js"},
	}}}
	_, err = coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "s", Value: acc}}}}})
	commandError(t, err, 31264)
	_, err = runCmd(ctx, db, bson.D{{Key: "mapReduce", Value: "off"}, {Key: "map", Value: "function() { emit(1, 1); }"},
		{Key: "reduce", Value: "function(k, v) { return 1; }"}, {Key: "out", Value: bson.D{{Key: "inline", Value: 1}}}})
	commandError(t, err, 31246)
}

func TestJSInAView(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("js")
	_, err := db.Collection("base").InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 2}}, bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: 5}}})
	sdNoErr(t, err)
	sdNoErr(t, db.CreateView(ctx, "doubled", "base", mongo.Pipeline{{{Key: "$project", Value: bson.D{{Key: "d", Value: bson.D{{Key: "$function", Value: bson.D{
		{Key: "body", Value: "function(a) { return a * 2; }"}, {Key: "args", Value: bson.A{"$a"}}, {Key: "lang", Value: "js"}}}}}}}}}))
	cur, err := db.Collection("doubled").Find(ctx, bson.D{{Key: "$where", Value: "this.d > 5"}})
	sdNoErr(t, err)
	var docs []bson.D
	sdNoErr(t, cur.All(ctx, &docs))
	if fmt.Sprint(docs) != `[{"_id":{"$numberInt":"2"},"d":{"$numberDouble":"10.0"}}]` {
		t.Errorf("view with $function read with $where: %v", docs)
	}
	// A runaway script in a view's pipeline ends with the reader's maxTimeMS.
	sdNoErr(t, db.CreateView(ctx, "looping", "base", mongo.Pipeline{{{Key: "$project", Value: bson.D{{Key: "d", Value: bson.D{{Key: "$function", Value: bson.D{
		{Key: "body", Value: "function() { while (true) {} }"}, {Key: "args", Value: bson.A{}}, {Key: "lang", Value: "js"}}}}}}}}}))
	_, err = runCmd(ctx, db, bson.D{{Key: "find", Value: "looping"}, {Key: "maxTimeMS", Value: 100}})
	commandError(t, err, 50)
}
