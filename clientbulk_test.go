package sturdy_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/blackpipe"
	"github.com/sturdy-go/sturdy/mongosim"
)

// mixedClientModels writes to two collections of two databases: every model
// kind once, so that each kind of per-model result is exercised.
func mixedClientModels() []sturdy.ClientWriteModel {
	return []sturdy.ClientWriteModel{
		{Database: "a", Collection: "x", Model: &sturdy.InsertOneModel{Document: d("_id", 1, "v", 1)}},
		{Database: "b", Collection: "y", Model: &sturdy.InsertOneModel{Document: d("_id", 1, "v", 10)}},
		{Database: "a", Collection: "x", Model: &sturdy.InsertOneModel{Document: d("_id", 2, "v", 2)}},
		{Database: "b", Collection: "y", Model: &sturdy.UpdateOneModel{Filter: d("_id", 1), Update: d("$inc", d("v", 5))}},
		{Database: "a", Collection: "x", Model: &sturdy.UpdateManyModel{Filter: nil, Update: d("$set", d("w", true))}},
		{Database: "b", Collection: "y", Model: &sturdy.ReplaceOneModel{Filter: d("_id", 7), Replacement: d("v", 70), Upsert: true}},
		{Database: "a", Collection: "x", Model: &sturdy.DeleteOneModel{Filter: d("_id", 2)}},
		{Database: "b", Collection: "y", Model: &sturdy.DeleteManyModel{Filter: d("v", d("$gte", 100))}},
	}
}

func TestClientBulkWriteAcrossNamespaces(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	rec := &recorder{}
	c := connect(t, cluster.URI(), func(o *sturdy.Options) { o.Monitor = rec.monitor() })

	res, err := c.BulkWrite(ctx, mixedClientModels(), &sturdy.ClientBulkWriteOptions{VerboseResults: true})
	if err != nil {
		t.Fatal(err)
	}
	got := [...]int64{res.InsertedCount, res.UpsertedCount, res.MatchedCount, res.ModifiedCount, res.DeletedCount}
	if want := [...]int64{3, 1, 1 + 2, 1 + 2, 1}; got != want || !res.Acknowledged || !res.HasVerboseResults {
		t.Fatalf("inserted, upserted, matched, modified, deleted = %v, want %v (%+v)", got, want, res)
	}
	wantIns := map[int]sturdy.ClientInsertResult{0: {InsertedID: int32(1)}, 1: {InsertedID: int32(1)}, 2: {InsertedID: int32(2)}}
	wantUpd := map[int]sturdy.ClientUpdateResult{3: {MatchedCount: 1, ModifiedCount: 1}, 4: {MatchedCount: 2, ModifiedCount: 2},
		5: {MatchedCount: 1, UpsertedID: int32(7)}}
	wantDel := map[int]sturdy.ClientDeleteResult{6: {DeletedCount: 1}, 7: {DeletedCount: 0}}
	if !reflect.DeepEqual(res.InsertResults, wantIns) || !reflect.DeepEqual(res.UpdateResults, wantUpd) || !reflect.DeepEqual(res.DeleteResults, wantDel) {
		t.Fatalf("per-model results\n ins %v\n upd %v\n del %v", res.InsertResults, res.UpdateResults, res.DeleteResults)
	}
	assertDocs(t, c.Database("a").Collection("x"), `[{"_id":1,"v":1,"w":true}]`)
	assertDocs(t, c.Database("b").Collection("y"), `[{"_id":1,"v":15},{"_id":7,"v":70}]`)

	// One command on admin; nsInfo lists each namespace once, in order of
	// first use, and every op points at its own.
	started := rec.startedNamed("bulkWrite")
	if len(started) != 1 || started[0].DatabaseName != "admin" {
		t.Fatalf("%d bulkWrite commands", len(started))
	}
	cmd := started[0].Command
	if cmd.Lookup("errorsOnly").Boolean() || !cmd.Lookup("ordered").Boolean() {
		t.Errorf("errorsOnly/ordered wrong in %v", cmd)
	}
	var nsInfo []string
	vals, _ := cmd.Lookup("nsInfo").Array().Values()
	for _, v := range vals {
		nsInfo = append(nsInfo, v.Document().Lookup("ns").StringValue())
	}
	if strings.Join(nsInfo, ",") != "a.x,b.y" {
		t.Fatalf("nsInfo %v", nsInfo)
	}
	ops, _ := cmd.Lookup("ops").Array().Values()
	for i, op := range ops {
		first := op.Document().Index(0)
		if want := int32(i % 2); first.Value().Int32() != want {
			t.Errorf("op %d (%s) names nsInfo %d, want %d", i, first.Key(), first.Value().Int32(), want)
		}
	}
	// The batch has multi: true ops, so it is not a retryable write.
	if started[0].TxnNumber != nil {
		t.Errorf("a bulkWrite with UpdateMany and DeleteMany carries txnNumber %d", *started[0].TxnNumber)
	}

	// Without multi ops the command is a retryable write; by default only
	// the counts come back.
	rec.reset()
	res, err = c.BulkWrite(ctx, []sturdy.ClientWriteModel{
		{Database: "a", Collection: "x", Model: sturdy.InsertOneModel{Document: d("v", 3)}},
		{Database: "a", Collection: "x", Model: sturdy.DeleteOneModel{Filter: d("_id", 1)}},
	})
	if err != nil || res.InsertedCount != 1 || res.DeletedCount != 1 || res.HasVerboseResults || res.InsertResults != nil {
		t.Fatalf("summary write: %+v, %v", res, err)
	}
	started = rec.startedNamed("bulkWrite")
	if len(started) != 1 || started[0].TxnNumber == nil || !started[0].Command.Lookup("errorsOnly").Boolean() {
		t.Fatalf("summary write: %d commands, first %v", len(started), started)
	}
}

// assertDocs checks a collection's documents, sorted by _id, as relaxed
// extended JSON.
func assertDocs(t *testing.T, coll *sturdy.Collection, want string) {
	t.Helper()
	ctx := testCtx(t)
	cur, err := coll.Find(ctx, nil, &sturdy.FindOptions{Sort: d("_id", 1)})
	if err != nil {
		t.Fatal(err)
	}
	var docs []bson.Raw
	if err := cur.All(ctx, &docs); err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, doc := range docs {
		b, err := bson.MarshalExtJSON(doc, false, false)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, string(b))
	}
	if got := "[" + strings.Join(parts, ",") + "]"; got != want {
		t.Fatalf("%s: %s, want %s", coll.Name(), got, want)
	}
}

func TestClientBulkWriteErrors(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	c := connect(t, cluster.URI(), nil)
	if _, err := c.Database("db").Collection("e").InsertOne(ctx, d("_id", 2)); err != nil {
		t.Fatal(err)
	}
	ins := func(id int) sturdy.ClientWriteModel {
		return sturdy.ClientWriteModel{Database: "db", Collection: "e", Model: &sturdy.InsertOneModel{Document: d("_id", id)}}
	}
	models := []sturdy.ClientWriteModel{ins(1), ins(2), ins(3), ins(1), ins(4)}

	// Ordered: stops at model 1; model 0 is the partial result.
	_, err := c.BulkWrite(ctx, models, &sturdy.ClientBulkWriteOptions{VerboseResults: true})
	var cbe *sturdy.ClientBulkWriteException
	if !errors.As(err, &cbe) || cbe.Err != nil || len(cbe.WriteErrors) != 1 || cbe.WriteErrors[1].Code != 11000 || cbe.WriteErrors[1].Index != 1 {
		t.Fatalf("ordered: %v", err)
	}
	if pr := cbe.PartialResult; pr == nil || pr.InsertedCount != 1 || len(pr.InsertResults) != 1 || pr.InsertResults[0].InsertedID != int32(1) {
		t.Fatalf("ordered partial result %+v", cbe.PartialResult)
	}
	if !sturdy.IsDuplicateKey(err) {
		t.Error("IsDuplicateKey false for a client bulk write duplicate")
	}
	if ix, ok := sturdy.DuplicateKeyIndex(err); !ok || ix != "_id_" {
		t.Errorf("DuplicateKeyIndex = %q, %v", ix, ok)
	}

	// Unordered: every model runs; the duplicates are reported by index.
	_, err = c.BulkWrite(ctx, models, &sturdy.ClientBulkWriteOptions{Ordered: ptr(false)})
	if !errors.As(err, &cbe) || len(cbe.WriteErrors) != 3 {
		t.Fatalf("unordered: %v", err)
	}
	for _, i := range []int{0, 1, 3} {
		if cbe.WriteErrors[i].Code != 11000 {
			t.Errorf("unordered: no duplicate key error at model %d: %v", i, err)
		}
	}
	if pr := cbe.PartialResult; pr == nil || pr.InsertedCount != 2 || pr.InsertResults != nil {
		t.Fatalf("unordered partial result %+v", cbe.PartialResult)
	}

	// Nothing written: no partial result.
	_, err = c.BulkWrite(ctx, []sturdy.ClientWriteModel{ins(1)})
	if !errors.As(err, &cbe) || cbe.PartialResult != nil || len(cbe.WriteErrors) != 1 {
		t.Fatalf("all failed: %v, partial %+v", err, cbe.PartialResult)
	}

	// A write concern error does not stop the write and keeps the result.
	if err := cluster.SetFailPoint(d("configureFailPoint", "failCommand", "mode", d("times", 1),
		"data", d("failCommands", bson.A{"bulkWrite"}, "writeConcernError", d("code", 64, "errmsg", "waiting for replication timed out")))); err != nil {
		t.Fatal(err)
	}
	_, err = c.BulkWrite(ctx, []sturdy.ClientWriteModel{ins(5), ins(6)})
	if !errors.As(err, &cbe) || len(cbe.WriteConcernErrors) != 1 || cbe.WriteConcernErrors[0].Code != 64 || len(cbe.WriteErrors) != 0 {
		t.Fatalf("write concern error: %v", err)
	}
	if cbe.PartialResult == nil || cbe.PartialResult.InsertedCount != 2 {
		t.Fatalf("write concern error partial result %+v", cbe.PartialResult)
	}

	// A top-level error before anything was written comes back alone.
	if err := cluster.SetFailPoint(d("configureFailPoint", "failCommand", "mode", d("times", 1),
		"data", d("failCommands", bson.A{"bulkWrite"}, "errorCode", 8))); err != nil {
		t.Fatal(err)
	}
	_, err = c.BulkWrite(ctx, []sturdy.ClientWriteModel{ins(7)})
	var ce *sturdy.CommandError
	if !errors.As(err, &ce) || ce.Code != 8 || errors.As(err, &cbe) {
		t.Fatalf("top-level error: %T %v", err, err)
	}
}

func TestClientBulkWriteClientSideErrors(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	c := connect(t, cluster.URI(), nil)
	one := []sturdy.ClientWriteModel{{Database: "db", Collection: "c", Model: &sturdy.InsertOneModel{Document: d("x", 1)}}}
	w0 := &sturdy.WriteConcern{W: 0}
	cases := []struct {
		name   string
		models []sturdy.ClientWriteModel
		opts   *sturdy.ClientBulkWriteOptions
		want   string
	}{
		{"no models", nil, nil, "at least one"},
		{"w0 ordered", one, &sturdy.ClientBulkWriteOptions{WriteConcern: w0}, "unacknowledged write concern and ordered"},
		{"w0 verbose", one, &sturdy.ClientBulkWriteOptions{WriteConcern: w0, Ordered: ptr(false), VerboseResults: true}, "unacknowledged write concern and verbose"},
		{"no namespace", []sturdy.ClientWriteModel{{Model: &sturdy.InsertOneModel{Document: d("x", 1)}}}, nil, "Database and a Collection"},
		{"nil model", []sturdy.ClientWriteModel{{Database: "db", Collection: "c"}}, nil, "nil write model"},
		{"update without operators", []sturdy.ClientWriteModel{{Database: "db", Collection: "c", Model: &sturdy.UpdateOneModel{Filter: nil, Update: d("x", 1)}}}, nil, "$-operators"},
		{"replace with operators", []sturdy.ClientWriteModel{{Database: "db", Collection: "c", Model: &sturdy.ReplaceOneModel{Replacement: d("$set", d("x", 1))}}}, nil, "$-operators"},
		{"op too large", []sturdy.ClientWriteModel{{Database: "db", Collection: "c", Model: &sturdy.UpdateOneModel{Filter: d("b", strings.Repeat("x", 17<<20)), Update: d("$set", d("x", 1))}}}, nil, "as a bulkWrite op"},
		{"document too large", []sturdy.ClientWriteModel{{Database: "db", Collection: "c", Model: &sturdy.InsertOneModel{Document: d("b", strings.Repeat("x", 17<<20))}}}, nil, "maxBsonObjectSize"},
	}
	for _, tc := range cases {
		_, err := c.BulkWrite(ctx, tc.models, tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	if n, _ := c.Database("db").Collection("c").CountDocuments(ctx, nil); n != 0 {
		t.Fatalf("rejected writes wrote %d documents", n)
	}

	// Unacknowledged and unordered: sent, no result.
	res, err := c.BulkWrite(ctx, one, &sturdy.ClientBulkWriteOptions{WriteConcern: w0, Ordered: ptr(false)})
	if err != nil || res.Acknowledged {
		t.Fatalf("w0: %+v, %v", res, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for n := int64(0); n != 1; time.Sleep(10 * time.Millisecond) {
		if n, _ = c.Database("db").Collection("c").CountDocuments(ctx, nil); n != 1 && time.Now().After(deadline) {
			t.Fatalf("w0 write: %d documents", n)
		}
	}

	// A server before 8.0 has no bulkWrite command.
	old := blackpipe.StartWithOptions(t, blackpipe.Options{MaxWireVersion: 21})
	oc := connect(t, old.URI(), nil)
	if _, err := oc.BulkWrite(ctx, one); err == nil || !strings.Contains(err.Error(), "MongoDB 8.0") {
		t.Fatalf("7.0 server: %v", err)
	}
}

// scriptedBulkWrite is a blackpipe handler for the bulkWrite command: it
// records each command's ops and nsInfo, fails ops whose document or filter
// has fail: true, and returns the results one per batch, so that every
// result after the first needs a getMore.
type scriptedBulkWrite struct {
	mu sync.Mutex
	// hangupAt, when positive, closes the connection instead of answering
	// the bulkWrite command with that number (1-based), once.
	hangupAt int
	seen     int
	// wce adds a write concern error to every reply; getMoreErr fails
	// every getMore with code 8.
	wce, getMoreErr bool
	txns            []int64 // txnNumber of every bulkWrite received, -1 for none
	commands        []bulkCommand
	getMores        int
	pending         map[int64][]bson.D
	lsids           map[int64]string // cursor id → lsid of the command that opened it
	nextID          int64
}

type bulkCommand struct {
	ns   []string // nsInfo
	ops  []string // "<kind>:<namespace>:<_id or filter _id>"
	txn  bool     // carried a txnNumber
	errs bool     // errorsOnly
}

func (s *scriptedBulkWrite) handle(r *blackpipe.Request) bool {
	switch r.Name {
	case "bulkWrite":
		s.mu.Lock()
		defer s.mu.Unlock()
		s.seen++
		txn, ok := r.Command.Lookup("txnNumber").Int64OK()
		if !ok {
			txn = -1
		}
		s.txns = append(s.txns, txn)
		if s.seen == s.hangupAt {
			_ = r.Hangup()
			return true
		}
		var bc bulkCommand
		var ops []bson.Raw
		for _, seq := range r.Sequences {
			switch seq.Identifier {
			case "nsInfo":
				for _, doc := range seq.Documents {
					bc.ns = append(bc.ns, doc.Lookup("ns").StringValue())
				}
			case "ops":
				ops = seq.Documents
			}
		}
		_, bc.txn = r.Command.Lookup("txnNumber").Int64OK()
		bc.errs = r.Command.Lookup("errorsOnly").Boolean()
		var results []bson.D
		for i, op := range ops {
			first := op.Index(0)
			target := op.Lookup("document")
			if first.Key() != "insert" {
				target = op.Lookup("filter")
			}
			bc.ops = append(bc.ops, fmt.Sprintf("%s:%s:%d", first.Key(), bc.ns[first.Value().Int32()], target.Document().Lookup("_id").Int32()))
			if fail, _ := target.Document().Lookup("fail").BooleanOK(); fail {
				results = append(results, d("ok", 0.0, "idx", int32(i), "code", int32(11000), "errmsg", "E11000 duplicate key", "n", int32(0)))
				continue
			}
			if !bc.errs {
				results = append(results, d("ok", 1.0, "idx", int32(i), "n", int32(1)))
			}
		}
		s.commands = append(s.commands, bc)
		id := int64(0)
		first := bson.A{}
		if len(results) > 0 {
			first = append(first, results[0])
		}
		if len(results) > 1 {
			s.nextID++
			id = s.nextID
			if s.pending == nil {
				s.pending = map[int64][]bson.D{}
			}
			s.pending[id] = results[1:]
			if s.lsids == nil {
				s.lsids = map[int64]string{}
			}
			s.lsids[id] = r.Command.Lookup("lsid").String()
		}
		reply := d("cursor", d("id", id, "ns", "admin.$cmd.bulkWrite", "firstBatch", first),
			"nErrors", int32(0), "nInserted", int32(len(ops)), "nMatched", int32(0), "nModified", int32(0), "nUpserted", int32(0), "nDeleted", int32(0))
		if s.wce {
			reply = append(reply, bson.E{Key: "writeConcernError", Value: d("code", int32(64), "errmsg", "waiting for replication timed out")})
		}
		_ = r.Reply(reply)
		return true
	case "getMore":
		s.mu.Lock()
		defer s.mu.Unlock()
		s.getMores++
		if s.getMoreErr {
			_ = r.ReplyError(8, "getMore failed")
			return true
		}
		id := r.Command.Lookup("getMore").Int64()
		if coll := r.Command.Lookup("collection").StringValue(); coll != "$cmd.bulkWrite" || r.DB != "admin" {
			_ = r.ReplyError(26, "getMore on "+r.DB+"."+coll)
			return true
		}
		// The results cursor belongs to the command's session.
		if lsid := r.Command.Lookup("lsid").String(); lsid != s.lsids[id] {
			_ = r.ReplyError(50738, "cursor opened in session "+s.lsids[id]+" used in session "+lsid)
			return true
		}
		rest := s.pending[id]
		next, left := rest[:1], rest[1:]
		if len(left) == 0 {
			delete(s.pending, id)
			id = 0
		} else {
			s.pending[id] = left
		}
		_ = r.ReplyCursor("admin.$cmd.bulkWrite", id, false, next[0])
		return true
	case "killCursors":
		_ = r.Reply(d("cursorsKilled", bson.A{}))
		return true
	}
	return false
}

func TestClientBulkWriteBatchesBlackpipe(t *testing.T) {
	ctx := testCtx(t)
	script := &scriptedBulkWrite{}
	// A one-member replica set, so that writes can be retryable.
	members := blackpipe.StartReplicaSet(t, "rs0", 1, blackpipe.Options{
		Hello:   bson.D{{Key: "maxWriteBatchSize", Value: int32(3)}},
		Handler: script.handle,
	})
	c := connect(t, blackpipe.ReplicaSetURI("rs0", members), nil)
	m := func(db, coll string, model sturdy.WriteModel) sturdy.ClientWriteModel {
		return sturdy.ClientWriteModel{Database: db, Collection: coll, Model: model}
	}
	models := []sturdy.ClientWriteModel{
		m("a", "x", &sturdy.InsertOneModel{Document: d("_id", 0)}),
		m("b", "y", &sturdy.InsertOneModel{Document: d("_id", 1)}),
		m("a", "x", &sturdy.InsertOneModel{Document: d("_id", 2)}),
		m("b", "y", &sturdy.InsertOneModel{Document: d("_id", 3)}),               // batch 2 starts: b.y is nsInfo 0
		m("c", "z", &sturdy.DeleteManyModel{Filter: d("_id", 4)}),                // multi: batch 2 is not retryable
		m("a", "x", &sturdy.InsertOneModel{Document: d("_id", 5)}),               //
		m("a", "x", &sturdy.InsertOneModel{Document: d("_id", 6, "fail", true)}), // batch 3
		m("a", "x", &sturdy.InsertOneModel{Document: d("_id", 7)}),
	}
	res, err := c.BulkWrite(ctx, models, &sturdy.ClientBulkWriteOptions{VerboseResults: true, Ordered: ptr(false)})
	var cbe *sturdy.ClientBulkWriteException
	if !errors.As(err, &cbe) || len(cbe.WriteErrors) != 1 || cbe.WriteErrors[6].Index != 6 || res != nil {
		t.Fatalf("err %v, result %+v", err, res)
	}
	want := []bulkCommand{
		{ns: []string{"a.x", "b.y"}, ops: []string{"insert:a.x:0", "insert:b.y:1", "insert:a.x:2"}, txn: true},
		{ns: []string{"b.y", "c.z", "a.x"}, ops: []string{"insert:b.y:3", "delete:c.z:4", "insert:a.x:5"}, txn: false},
		{ns: []string{"a.x"}, ops: []string{"insert:a.x:6", "insert:a.x:7"}, txn: true},
	}
	got := script.commands
	for i := range got {
		got[i].errs = false
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("commands\n got %+v\nwant %+v", got, want)
	}
	// Results arrive one per batch: 3+3+2 results need 2+2+1 getMores.
	if script.getMores != 5 {
		t.Errorf("%d getMores, want 5", script.getMores)
	}
	pr := cbe.PartialResult
	var ids []int
	for i := range pr.InsertResults {
		ids = append(ids, i)
	}
	sort.Ints(ids)
	if fmt.Sprint(ids) != "[0 1 2 3 5 7]" || pr.DeleteResults[4].DeletedCount != 1 || pr.InsertResults[7].InsertedID != int32(7) {
		t.Fatalf("per-model results %v %v", pr.InsertResults, pr.DeleteResults)
	}

	// A network error on the first attempt of the third command: that
	// batch alone is retried, with the same txnNumber.
	script.mu.Lock()
	script.commands, script.txns, script.seen, script.hangupAt = nil, nil, 0, 3
	script.mu.Unlock()
	models[6] = m("a", "x", &sturdy.InsertOneModel{Document: d("_id", 6)})
	res, err = c.BulkWrite(ctx, models)
	if err != nil || res.InsertedCount != 3+3+2 {
		t.Fatalf("with a retried batch: %+v, %v", res, err)
	}
	if txns := script.txns; len(txns) != 4 || txns[0] < 0 || txns[1] != -1 || txns[2] < 0 || txns[3] != txns[2] || txns[2] == txns[0] {
		t.Fatalf("txnNumbers %v: want a number for batch 1, none for batch 2, one number for both attempts of batch 3", txns)
	}
	if len(script.commands) != 3 {
		t.Fatalf("%d answered commands, want 3", len(script.commands))
	}

	// Write concern errors do not stop the write: one per command.
	script.mu.Lock()
	script.wce = true
	script.mu.Unlock()
	_, err = c.BulkWrite(ctx, models, &sturdy.ClientBulkWriteOptions{VerboseResults: true})
	if !errors.As(err, &cbe) || len(cbe.WriteConcernErrors) != 3 || len(cbe.WriteErrors) != 0 || cbe.Err != nil {
		t.Fatalf("write concern errors: %v", err)
	}
	if pr := cbe.PartialResult; pr == nil || len(pr.InsertResults)+len(pr.DeleteResults) != len(models) {
		t.Fatalf("write concern errors: partial result %+v", cbe.PartialResult)
	}

	// A failed getMore of the results is a top-level error; the results
	// read before it are the partial result.
	script.mu.Lock()
	script.wce, script.getMoreErr = false, true
	script.mu.Unlock()
	_, err = c.BulkWrite(ctx, models, &sturdy.ClientBulkWriteOptions{VerboseResults: true})
	var ce *sturdy.CommandError
	if !errors.As(err, &cbe) || !errors.As(err, &ce) || ce.Code != 8 || cbe.PartialResult == nil || len(cbe.PartialResult.InsertResults) != 1 {
		t.Fatalf("getMore error: %v (partial %+v)", err, cbe.PartialResult)
	}
	script.mu.Lock()
	script.getMoreErr = false
	script.mu.Unlock()

	// Ordered: the failing batch is the last one sent.
	script.mu.Lock()
	script.commands = nil
	script.mu.Unlock()
	models[2] = m("a", "x", &sturdy.InsertOneModel{Document: d("_id", 2, "fail", true)})
	_, err = c.BulkWrite(ctx, models)
	if !errors.As(err, &cbe) || len(cbe.WriteErrors) != 1 || cbe.WriteErrors[2].Code != 11000 || len(script.commands) != 1 {
		t.Fatalf("ordered: %v after %d commands", err, len(script.commands))
	}
}

func TestClientBulkWriteSplitsByMessageSize(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	rec := &recorder{}
	c := connect(t, cluster.URI(), func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	// 50 documents of 1 MB across two collections: more than one 48 MB
	// message.
	blob := strings.Repeat("x", 1<<20)
	var models []sturdy.ClientWriteModel
	for i := range 50 {
		models = append(models, sturdy.ClientWriteModel{Database: "db", Collection: fmt.Sprint("c", i%2), Model: &sturdy.InsertOneModel{Document: d("_id", i, "blob", blob)}})
	}
	res, err := c.BulkWrite(ctx, models)
	if err != nil || res.InsertedCount != 50 {
		t.Fatalf("%+v, %v", res, err)
	}
	started := rec.startedNamed("bulkWrite")
	if len(started) != 2 {
		t.Fatalf("%d bulkWrite commands, want 2", len(started))
	}
	for _, e := range started {
		if len(e.Command) > 48_000_000 {
			t.Errorf("a command of %d bytes exceeds maxMessageSizeBytes", len(e.Command))
		}
	}
	for _, coll := range []string{"c0", "c1"} {
		if n, err := c.Database("db").Collection(coll).CountDocuments(ctx, nil); err != nil || n != 25 {
			t.Fatalf("%s: %d documents, %v", coll, n, err)
		}
	}
}

// TestBulkPartialResultOnLaterBatchFailure fails the second command of
// InsertMany, Collection.BulkWrite and Client.BulkWrite, with a command
// error or with a network error whose retry fails too: each error carries
// the partial result of the first command, which matches what the server
// holds. (Every pair of API and fault would move 300 MB; each API meets
// one fault, Client.BulkWrite both.)
func TestBulkPartialResultOnLaterBatchFailure(t *testing.T) {
	// The server advertises maxWriteBatchSize 10, so 25 writes take three
	// commands: small documents keep the test quick under -race.
	const docs = 25
	commandError := d("errorCode", 8)
	failedRetry := d("closeConnection", true)
	isFault := func(fault bson.D, err error) bool {
		var ce *sturdy.CommandError
		if fault[0].Key == "errorCode" {
			return errors.As(err, &ce) && ce.Code == 8
		}
		// The network error of the retry, labelled as a retryable write
		// error that may be retried again.
		return sturdy.IsNetworkError(err) && sturdy.HasErrorLabel(err, sturdy.LabelRetryableWrite)
	}
	// write runs one API on collection coll and returns the number of
	// inserts its partial result reports and its error.
	type write func(ctx context.Context, coll *sturdy.Collection) (int64, error)
	insertMany := func(ctx context.Context, coll *sturdy.Collection) (int64, error) {
		many := make([]any, docs)
		for i := range many {
			many[i] = d("_id", i)
		}
		_, err := coll.InsertMany(ctx, many)
		var bwe *sturdy.BulkWriteException
		if !errors.As(err, &bwe) || bwe.PartialResult == nil || bwe.Err == nil || len(bwe.WriteErrors) != 0 {
			return 0, fmt.Errorf("not a BulkWriteException with Err and PartialResult: %T %w", err, err)
		}
		return bwe.PartialResult.InsertedCount, err
	}
	collBulk := func(ctx context.Context, coll *sturdy.Collection) (int64, error) {
		models := make([]sturdy.WriteModel, docs)
		for i := range models {
			models[i] = &sturdy.InsertOneModel{Document: d("_id", i)}
		}
		_, err := coll.BulkWrite(ctx, models)
		var bwe *sturdy.BulkWriteException
		if !errors.As(err, &bwe) || bwe.PartialResult == nil || bwe.Err == nil {
			return 0, fmt.Errorf("not a BulkWriteException with Err and PartialResult: %T %w", err, err)
		}
		return bwe.PartialResult.InsertedCount, err
	}
	clientBulk := func(ctx context.Context, coll *sturdy.Collection) (int64, error) {
		models := make([]sturdy.ClientWriteModel, docs)
		for i := range models {
			models[i] = sturdy.ClientWriteModel{Database: "db", Collection: coll.Name(), Model: &sturdy.InsertOneModel{Document: d("_id", i)}}
		}
		_, err := coll.Database().Client().BulkWrite(ctx, models, &sturdy.ClientBulkWriteOptions{VerboseResults: true})
		var cbe *sturdy.ClientBulkWriteException
		if !errors.As(err, &cbe) || cbe.PartialResult == nil || cbe.Err == nil {
			return 0, fmt.Errorf("not a ClientBulkWriteException with Err and PartialResult: %T %w", err, err)
		}
		if pr := cbe.PartialResult; int64(len(pr.InsertResults)) != pr.InsertedCount {
			return 0, fmt.Errorf("%d insert results for %d inserts", len(pr.InsertResults), pr.InsertedCount)
		}
		return cbe.PartialResult.InsertedCount, err
	}

	ctx := testCtx(t)
	cluster := mongosim.StartWithOptions(t, mongosim.Options{MaxWriteBatchSize: 10})
	c := connect(t, cluster.URI(), nil)
	for _, tc := range []struct {
		name    string
		command string
		fault   bson.D
		run     write
	}{
		{"InsertMany/command error", "insert", commandError, insertMany},
		{"Collection.BulkWrite/failed retry", "insert", failedRetry, collBulk},
		{"Client.BulkWrite/command error", "bulkWrite", commandError, clientBulk},
		{"Client.BulkWrite/failed retry", "bulkWrite", failedRetry, clientBulk},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// skip 1: the first command passes, every later one fails
			// (a retry too).
			if err := cluster.SetFailPoint(d("configureFailPoint", "failCommand", "mode", d("skip", 1),
				"data", append(d("failCommands", bson.A{tc.command}), tc.fault...))); err != nil {
				t.Fatal(err)
			}
			coll := c.Database("db").Collection(strings.NewReplacer("/", "_", " ", "_", ".", "_").Replace(tc.name))
			inserted, err := tc.run(ctx, coll)
			if err := cluster.SetFailPoint(d("configureFailPoint", "failCommand", "mode", "off")); err != nil {
				t.Fatal(err)
			}
			if inserted == 0 || !isFault(tc.fault, err) {
				t.Fatalf("error %v", err)
			}
			n, cerr := coll.CountDocuments(ctx, nil)
			if cerr != nil {
				t.Fatal(cerr)
			}
			if n == docs || inserted != n {
				t.Fatalf("partial result: %d inserted, the server has %d of %d", inserted, n, docs)
			}
		})
	}
}

// TestClientBulkWriteMatchesOfficialDriver runs the same models through
// the official driver's Client.BulkWrite and sturdy's against mongosim: the
// results and the data written must agree.
func TestClientBulkWriteMatchesOfficialDriver(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	c := connect(t, cluster.URI(), nil)
	official, err := mongo.Connect(options.Client().ApplyURI(cluster.URI()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = official.Disconnect(context.Background()) })

	res, err := c.BulkWrite(ctx, mixedClientModels(), &sturdy.ClientBulkWriteOptions{VerboseResults: true})
	if err != nil {
		t.Fatal(err)
	}
	var sturdyData []string
	for _, ns := range [][2]string{{"a", "x"}, {"b", "y"}} {
		sturdyData = append(sturdyData, dumpColl(ctx, t, official.Database(ns[0]).Collection(ns[1])))
		if err := official.Database(ns[0]).Drop(ctx); err != nil {
			t.Fatal(err)
		}
	}

	ns := func(db, coll string, m mongo.ClientWriteModel) mongo.ClientBulkWrite {
		return mongo.ClientBulkWrite{Database: db, Collection: coll, Model: m}
	}
	ores, err := official.BulkWrite(ctx, []mongo.ClientBulkWrite{
		ns("a", "x", mongo.NewClientInsertOneModel().SetDocument(d("_id", 1, "v", 1))),
		ns("b", "y", mongo.NewClientInsertOneModel().SetDocument(d("_id", 1, "v", 10))),
		ns("a", "x", mongo.NewClientInsertOneModel().SetDocument(d("_id", 2, "v", 2))),
		ns("b", "y", mongo.NewClientUpdateOneModel().SetFilter(d("_id", 1)).SetUpdate(d("$inc", d("v", 5)))),
		ns("a", "x", mongo.NewClientUpdateManyModel().SetFilter(d()).SetUpdate(d("$set", d("w", true)))),
		ns("b", "y", mongo.NewClientReplaceOneModel().SetFilter(d("_id", 7)).SetReplacement(d("v", 70)).SetUpsert(true)),
		ns("a", "x", mongo.NewClientDeleteOneModel().SetFilter(d("_id", 2))),
		ns("b", "y", mongo.NewClientDeleteManyModel().SetFilter(d("v", d("$gte", 100)))),
	}, options.ClientBulkWrite().SetVerboseResults(true))
	if err != nil {
		t.Fatal(err)
	}
	got := [...]int64{res.InsertedCount, res.UpsertedCount, res.MatchedCount, res.ModifiedCount, res.DeletedCount}
	want := [...]int64{ores.InsertedCount, ores.UpsertedCount, ores.MatchedCount, ores.ModifiedCount, ores.DeletedCount}
	if got != want {
		t.Errorf("counts: sturdy %v, official %v", got, want)
	}
	if len(res.InsertResults) != len(ores.InsertResults) || len(res.UpdateResults) != len(ores.UpdateResults) || len(res.DeleteResults) != len(ores.DeleteResults) {
		t.Fatalf("per-model results: sturdy %d/%d/%d, official %d/%d/%d", len(res.InsertResults), len(res.UpdateResults), len(res.DeleteResults),
			len(ores.InsertResults), len(ores.UpdateResults), len(ores.DeleteResults))
	}
	for i, u := range ores.UpdateResults {
		s := res.UpdateResults[int(i)]
		if s.MatchedCount != u.MatchedCount || s.ModifiedCount != u.ModifiedCount || !reflect.DeepEqual(s.UpsertedID, u.UpsertedID) {
			t.Errorf("update result %d: sturdy %+v, official %+v", i, s, u)
		}
	}
	for i, dr := range ores.DeleteResults {
		if res.DeleteResults[int(i)].DeletedCount != dr.DeletedCount {
			t.Errorf("delete result %d: sturdy %+v, official %+v", i, res.DeleteResults[int(i)], dr)
		}
	}
	for i, nsName := range [][2]string{{"a", "x"}, {"b", "y"}} {
		if got := dumpColl(ctx, t, official.Database(nsName[0]).Collection(nsName[1])); got != sturdyData[i] {
			t.Errorf("%s.%s: official wrote %s, sturdy %s", nsName[0], nsName[1], got, sturdyData[i])
		}
	}
}

func dumpColl(ctx context.Context, t *testing.T, coll *mongo.Collection) string {
	t.Helper()
	cur, err := coll.Find(ctx, bson.D{}, options.Find().SetSort(d("_id", 1)))
	if err != nil {
		t.Fatal(err)
	}
	var docs []bson.D
	if err := cur.All(ctx, &docs); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(docs)
}

// BenchmarkClientBulkWrite inserts 1 000 small documents into two
// namespaces per operation with Client.BulkWrite, sturdy's and the
// official driver's, against one mongosim (in this process, so the times
// include the server's work).
func BenchmarkClientBulkWrite(b *testing.B) {
	const n = 1000
	cluster, err := mongosim.Launch(mongosim.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer cluster.Close()
	ctx := context.Background()
	b.Run("sturdy", func(b *testing.B) {
		c, err := sturdy.Connect(ctx, cluster.URI())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Disconnect(ctx)
		models := make([]sturdy.ClientWriteModel, n)
		b.ReportAllocs()
		for b.Loop() {
			for i := range models {
				models[i] = sturdy.ClientWriteModel{Database: "bench", Collection: fmt.Sprint("s", i%2), Model: &sturdy.InsertOneModel{Document: d("x", i, "s", "hello world")}}
			}
			res, err := c.BulkWrite(ctx, models)
			if err != nil || res.InsertedCount != n {
				b.Fatalf("%+v, %v", res, err)
			}
		}
	})
	b.Run("official", func(b *testing.B) {
		c, err := mongo.Connect(options.Client().ApplyURI(cluster.URI()))
		if err != nil {
			b.Fatal(err)
		}
		defer c.Disconnect(ctx)
		models := make([]mongo.ClientBulkWrite, n)
		b.ReportAllocs()
		for b.Loop() {
			for i := range models {
				models[i] = mongo.ClientBulkWrite{Database: "bench", Collection: fmt.Sprint("o", i%2), Model: mongo.NewClientInsertOneModel().SetDocument(d("x", i, "s", "hello world"))}
			}
			res, err := c.BulkWrite(ctx, models)
			if err != nil || res.InsertedCount != n {
				b.Fatalf("%+v, %v", res, err)
			}
		}
	})
}
