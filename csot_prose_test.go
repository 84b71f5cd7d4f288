package sturdy_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/blackpipe"
	"github.com/sturdy-go/sturdy/mongosim"
)

// The CSOT prose tests of the spec's tests/README that apply to sturdy
// (1 and 8 are in timeout_test.go, 5's tailable cursor in
// tailable_test.go). Their times are widened where a shared machine needs
// it; each blocked command still outlives the timeout.

// blockedFor is how long blockOnce blocks: far longer than any timeout
// here, so that the server never answers first, however late a loaded
// machine runs the client's timer (a block only somewhat longer than the
// timeout can end, and the command succeed, when both expire during one
// scheduling stall). The maxTimeMS the client sends ends the block early.
const blockedFor = 5 * time.Second

// blockOnce makes the next command of each name wait blockedFor before
// answering.
func blockOnce(t *testing.T, cluster *mongosim.Cluster, names ...string) {
	t.Helper()
	cmds := bson.A{}
	for _, n := range names {
		cmds = append(cmds, n)
	}
	setFailPoint(t, cluster, d("configureFailPoint", "failCommand", "mode", d("times", len(names)),
		"data", d("failCommands", cmds, "blockConnection", true, "blockTimeMS", int(blockedFor/time.Millisecond))))
	t.Cleanup(func() { _ = cluster.SetFailPoint(failPointOff("failCommand")) })
}

// connectWarm connects as connect does and leaves a pooled connection
// behind, made under a generous timeout: the 150 ms of the step under test
// are then not spent dialing and handshaking on a loaded machine.
func connectWarm(t *testing.T, uri string, edit func(*sturdy.Options)) *sturdy.Client {
	t.Helper()
	c := connect(t, uri, edit)
	if err := c.Ping(sturdy.WithTimeout(context.Background(), time.Minute)); err != nil {
		t.Fatal(err)
	}
	return c
}

func wantTimeout(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, context.DeadlineExceeded) || !sturdy.IsTimeout(err) {
		t.Fatalf("%s: got %v (%T), want a timeout", what, err, err)
	}
}

// An upload stream writes its chunks as they fill and the files document
// at Close; Abort removes the chunks of an unfinished upload.
func TestGridFSUploadStream(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	db := connect(t, cluster.URI(), nil).Database("db")
	b := db.GridFSBucket(&sturdy.BucketOptions{ChunkSize: 4})
	s, err := b.OpenUploadStream(ctx, "f.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{"hel", "lo, wor", "ld!"} { // 13 bytes over uneven writes
		if _, err := s.Write([]byte(part)); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := db.Collection("fs.chunks").CountDocuments(ctx, d("files_id", s.ID())); n != 3 {
		t.Errorf("%d chunks before Close, want the 3 full ones", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := b.DownloadToStream(ctx, s.ID(), &out); err != nil || out.String() != "hello, world!" {
		t.Fatalf("download %q, %v", out.String(), err)
	}
	if _, err := s.Write([]byte("x")); !errors.Is(err, sturdy.ErrUploadClosed) {
		t.Errorf("write after Close: %v", err)
	}

	a, err := b.OpenUploadStream(ctx, "aborted.txt")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Write([]byte("12345678")); err != nil {
		t.Fatal(err)
	}
	if err := a.Abort(); err != nil {
		t.Fatal(err)
	}
	if n, _ := db.Collection("fs.chunks").CountDocuments(ctx, d("files_id", a.ID())); n != 0 {
		t.Errorf("%d chunks left after Abort", n)
	}
	if n, _ := db.Collection("fs.files").CountDocuments(ctx, d("_id", a.ID())); n != 0 {
		t.Error("an aborted upload has a files document")
	}
}

// Prose test 6: an upload stream's timeout bounds its Close and its Abort.
func TestCSOTProse6GridFSUpload(t *testing.T) {
	t.Run("close", func(t *testing.T) {
		cluster := mongosim.Start(t)
		c := connectWarm(t, cluster.URI()+"&timeoutMS=150", nil)
		b := c.Database("db").GridFSBucket(nil)
		s, err := b.OpenUploadStream(context.Background(), "filename")
		if err != nil {
			t.Fatal(err)
		}
		blockOnce(t, cluster, "insert")
		if _, err := s.Write([]byte{0x12}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		wantTimeout(t, "Close", s.Close())
		if took := time.Since(start); took >= blockedFor/2 {
			t.Errorf("Close timed out after %v: it waited for the blocked insert", took)
		}
	})
	t.Run("abort", func(t *testing.T) {
		cluster := mongosim.Start(t)
		c := connectWarm(t, cluster.URI()+"&timeoutMS=150", nil)
		b := c.Database("db").GridFSBucket(&sturdy.BucketOptions{ChunkSize: 2})
		s, err := b.OpenUploadStream(context.Background(), "filename")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Write([]byte{1, 2, 3, 4}); err != nil {
			t.Fatal(err)
		}
		blockOnce(t, cluster, "delete")
		wantTimeout(t, "Abort", s.Abort())
	})
	t.Run("lifetime", func(t *testing.T) {
		// The timeout caps the stream's life, not each command: a stream
		// left open past it fails at Close without blocking anything.
		cluster := mongosim.Start(t)
		c := connectWarm(t, cluster.URI()+"&timeoutMS=150", nil)
		s, err := c.Database("db").GridFSBucket(nil).OpenUploadStream(context.Background(), "late")
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond) // the stream's life, not a synchronisation
		wantTimeout(t, "Close after the stream's timeout", s.Close())
	})
}

// Prose test 7: a download stream's timeout bounds its reads; the chunks
// are found at the first read.
func TestCSOTProse7GridFSDownload(t *testing.T) {
	cluster := mongosim.Start(t)
	ctx := testCtx(t)
	plain := connect(t, cluster.URI(), nil)
	id := bson.ObjectID{11: 5}
	if _, err := plain.Database("db").Collection("fs.files").InsertOne(ctx, d("_id", id, "length", int64(10), "chunkSize", int32(4),
		"uploadDate", bson.DateTime(0), "md5", "57d83cd477bfb1ccd975ab33d827a92b", "filename", "length-10",
		"contentType", "application/octet-stream", "aliases", bson.A{}, "metadata", d())); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	c := connectWarm(t, cluster.URI()+"&timeoutMS=150", func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	s, err := c.Database("db").GridFSBucket(nil).OpenDownloadStream(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	blockOnce(t, cluster, "find")
	_, err = io.ReadAll(s)
	wantTimeout(t, "Read", err)
	finds := rec.startedNamed("find")
	if len(finds) != 2 || commandField(finds[0], "find").StringValue() != "fs.files" || commandField(finds[1], "find").StringValue() != "fs.chunks" {
		t.Errorf("finds %v, want one on fs.files then one on fs.chunks", finds)
	}
}

// endSessionCase is one of prose test 9's three ways to give the timeout.
type endSessionCase struct {
	name string
	uri  string
	sess *sturdy.SessionOptions
	ctx  func(context.Context) context.Context
}

// Prose test 9: EndSession's abort of the open transaction is bounded by
// the timeout, whether it comes from the client, the session's default or
// the EndSession call. The spec's "fails with a timeout error after no
// more than 150 ms" is checked as what the client controls: the abort is
// sent with a maxTimeMS within the 150 ms, it fails with a timeout error,
// and EndSession returns long before the server would have answered
// (see blockedFor) — a wall-clock bound near 150 ms would measure the
// machine's scheduling, not the client.
func TestCSOTProse9EndSession(t *testing.T) {
	const timeout = 150 * time.Millisecond
	ms150 := timeout
	for _, tc := range []endSessionCase{
		{name: "client", uri: "&timeoutMS=150"},
		{name: "session", sess: &sturdy.SessionOptions{DefaultTimeout: &ms150}},
		{name: "operation", ctx: func(ctx context.Context) context.Context { return sturdy.WithTimeout(ctx, ms150) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cluster := mongosim.StartWithOptions(t, mongosim.Options{Members: 1})
			rec := &recorder{}
			c := connectWarm(t, cluster.URI()+tc.uri, func(o *sturdy.Options) { o.Monitor = rec.monitor() })
			ctx := context.Background()
			s, err := c.StartSession(ctx, tc.sess)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.StartTransaction(nil); err != nil {
				t.Fatal(err)
			}
			// The setup is not under test: its own generous timeout keeps a
			// slow connection checkout from failing it.
			setup := sturdy.WithTimeout(ctx, time.Minute)
			if _, err := c.Database("db").Collection("coll").InsertOne(setup, d("x", 1), &sturdy.InsertOneOptions{Session: s}); err != nil {
				t.Fatal(err)
			}
			blockOnce(t, cluster, "abortTransaction")
			ectx := ctx
			if tc.ctx != nil {
				ectx = tc.ctx(ctx)
			}
			start := time.Now()
			s.EndSession(ectx) // EndSession returns no error: the abort's failure shows in the events
			if took := time.Since(start); took >= blockedFor/2 {
				t.Errorf("EndSession took %v under a %v timeout: it waited for the blocked abort", took, timeout)
			}
			aborts := rec.startedNamed("abortTransaction")
			if len(aborts) != 1 {
				t.Fatalf("%d abortTransaction commands, want 1", len(aborts))
			}
			if mt, ok := commandField(aborts[0], "maxTimeMS").AsInt64OK(); !ok || mt <= 0 || mt > timeout.Milliseconds() {
				t.Errorf("abortTransaction maxTimeMS %v, want one in (0, %d]", mt, timeout.Milliseconds())
			}
			rec.mu.Lock()
			var failure error
			if n := len(rec.failed); n > 0 && rec.failed[n-1].CommandName == "abortTransaction" {
				failure = rec.failed[n-1].Failure
			}
			rec.mu.Unlock()
			if !sturdy.IsTimeout(failure) {
				t.Errorf("the blocked abortTransaction ended with %v, want a timeout error", failure)
			}
		})
	}
}

// Prose test 10: when the callback times out, the abort gets a fresh
// timeout (so it is sent and fails on its own timeout, not at once), and
// WithTransaction returns a timeout.
func TestCSOTProse10WithTransactionAbortRefreshed(t *testing.T) {
	cluster := mongosim.StartWithOptions(t, mongosim.Options{Members: 1})
	rec := &recorder{}
	c := connectWarm(t, cluster.URI()+"&timeoutMS=150", func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	ctx := context.Background()
	s, err := c.StartSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.EndSession(ctx)
	blockOnce(t, cluster, "insert", "abortTransaction")
	coll := c.Database("db").Collection("coll")
	err = s.WithTransaction(ctx, func(ctx context.Context) error {
		_, err := coll.InsertOne(ctx, d("_id", 1), &sturdy.InsertOneOptions{Session: s})
		return err
	}, nil)
	wantTimeout(t, "WithTransaction", err)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var seq []string
	for _, e := range rec.started {
		seq = append(seq, "started "+e.CommandName)
	}
	for _, e := range rec.failed {
		seq = append(seq, "failed "+e.CommandName)
	}
	want := map[string]bool{"started insert": true, "failed insert": true, "started abortTransaction": true, "failed abortTransaction": true}
	for _, s := range seq {
		delete(want, s)
	}
	if len(want) != 0 {
		t.Errorf("events %v, missing %v", seq, want)
	}
}

// Operations on a session inside WithTransaction share its one deadline
// (a second blocked insert fails although each alone fits: 2 s each under
// 3 s, a second of margin either way for a loaded machine), and an
// operation that sets its own timeout inside the callback is refused
// before anything is sent, even with a context other than the callback's.
func TestWithTransactionTimeoutNotRefreshed(t *testing.T) {
	cluster := mongosim.StartWithOptions(t, mongosim.Options{Members: 1})
	rec := &recorder{}
	c := connect(t, cluster.URI()+"&timeoutMS=3000", func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	ctx := context.Background()
	s, err := c.StartSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.EndSession(ctx)
	coll := c.Database("db").Collection("coll")
	setFailPoint(t, cluster, d("configureFailPoint", "failCommand", "mode", d("times", 2),
		"data", d("failCommands", bson.A{"insert"}, "blockConnection", true, "blockTimeMS", 2000)))
	t.Cleanup(func() { _ = cluster.SetFailPoint(failPointOff("failCommand")) })
	var second error
	err = s.WithTransaction(ctx, func(tctx context.Context) error {
		if _, err := coll.InsertOne(tctx, d("_id", 1), &sturdy.InsertOneOptions{Session: s}); err != nil {
			return err
		}
		// The outer ctx, not the callback's: the session still carries
		// the transaction's deadline.
		_, second = coll.InsertOne(ctx, d("_id", 2), &sturdy.InsertOneOptions{Session: s})
		return second
	}, nil)
	wantTimeout(t, "second insert", second)
	wantTimeout(t, "WithTransaction", err)
	for _, e := range rec.startedNamed("insert") {
		if commandField(e, "maxTimeMS").Type == 0 {
			t.Errorf("insert without maxTimeMS: %s", e.Command)
		}
	}

	rec.reset()
	for name, override := range map[string]func(context.Context) (context.Context, context.CancelFunc){
		"WithTimeout": func(ctx context.Context) (context.Context, context.CancelFunc) {
			return sturdy.WithTimeout(ctx, 100*time.Millisecond), func() {}
		},
		"earlier deadline": func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, 100*time.Millisecond)
		},
	} {
		var inner error
		err = s.WithTransaction(ctx, func(tctx context.Context) error {
			octx, cancel := override(tctx)
			defer cancel()
			_, inner = coll.InsertOne(octx, d("_id", 3), &sturdy.InsertOneOptions{Session: s})
			return inner
		}, nil)
		if !errors.Is(inner, sturdy.ErrInvalidArgument) || !errors.Is(err, sturdy.ErrInvalidArgument) {
			t.Errorf("%s inside the callback: %v, WithTransaction %v; want argument errors", name, inner, err)
		}
	}
	if n := len(rec.startedNamed("insert")); n != 0 {
		t.Errorf("%d inserts sent with an overriding timeout", n)
	}
	// Outside WithTransaction the session takes timeouts as usual.
	if _, err := coll.InsertOne(sturdy.WithTimeout(ctx, time.Second), d("_id", 4), &sturdy.InsertOneOptions{Session: s}); err != nil {
		t.Fatal(err)
	}
}

// Prose test 11 with the spec's times: a server whose maxWriteBatchSize is
// 2 makes a 4-model client bulkWrite two commands, each needing 1010 ms;
// under a 2 s timeout both are sent and the second times out. The timeout
// covers the whole BulkWrite, not each command: the second is sent with
// only what the first left (maxTimeMS under the 1010 ms it needs), which
// holds however slowly the machine runs.
func TestCSOTProse11MultiBatchClientBulkWrite(t *testing.T) {
	const timeout, perBatch = 2000 * time.Millisecond, 1010 * time.Millisecond
	srv := blackpipe.Start(t)
	advertiseMaxWriteBatch(srv, 2)
	var batches atomic.Int32
	srv.Autorespond(blackpipe.Command("bulkWrite"), func(r *blackpipe.Request) bool {
		// The second batch would be answered after perBatch too; it is
		// held for blockedFor so that a stall that runs out both its
		// reply's delay and the client's timer cannot let the reply win.
		delay := perBatch
		if batches.Add(1) > 1 {
			delay = blockedFor
		}
		_ = r.ReplyAfter(delay, d("cursor", d("id", int64(0), "ns", "admin.$cmd.bulkWrite", "firstBatch", bson.A{}),
			"nErrors", int32(0), "nInserted", int32(2), "nMatched", int32(0), "nModified", int32(0), "nUpserted", int32(0), "nDeleted", int32(0), "ok", 1.0))
		return true
	})
	rec := &recorder{}
	c := connect(t, srv.URI()+"&timeoutMS=2000&retryWrites=false", func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	var models []sturdy.ClientWriteModel
	for i := range 4 {
		models = append(models, sturdy.ClientWriteModel{Database: "db", Collection: "coll", Model: &sturdy.InsertOneModel{Document: d("_id", i)}})
	}
	_, err := c.BulkWrite(context.Background(), models)
	wantTimeout(t, "BulkWrite", err)
	sent := rec.startedNamed("bulkWrite")
	if len(sent) != 2 {
		t.Fatalf("%d bulkWrite commands, want 2 (the batches of one BulkWrite)", len(sent))
	}
	for i, e := range sent {
		limit := timeout
		if i == 1 {
			limit = timeout - perBatch
		}
		if mt, ok := commandField(e, "maxTimeMS").AsInt64OK(); !ok || mt <= 0 || mt > limit.Milliseconds() {
			t.Errorf("bulkWrite %d maxTimeMS %v (%v), want one in (0, %d]", i+1, mt, ok, limit.Milliseconds())
		}
	}
}

// Prose test 5, change streams, adapted: the prose test relies on the
// server answering the first blocked getMore with an empty batch inside
// the timeout; here MaxAwaitTime (50 ms) makes it do so (1950 ms blocked +
// 50 ms awaited < 3 s). Next then sends a second getMore, capped by the
// time left (about 1 s), which outlives the timeout: a timeout after one
// aggregate and two getMores. The times leave a second of margin on each
// side for a loaded machine.
func TestCSOTProse5ChangeStream(t *testing.T) {
	cluster := mongosim.StartWithOptions(t, mongosim.Options{Members: 1})
	setFailPoint(t, cluster, d("configureFailPoint", "failCommand", "mode", "alwaysOn",
		"data", d("failCommands", bson.A{"getMore"}, "blockConnection", true, "blockTimeMS", 1950)))
	t.Cleanup(func() { _ = cluster.SetFailPoint(failPointOff("failCommand")) })
	rec := &recorder{}
	c := connect(t, cluster.URI()+"&timeoutMS=3000", func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	ctx := context.Background()
	cs, err := c.Database("db").Collection("coll").Watch(ctx, nil, &sturdy.ChangeStreamOptions{MaxAwaitTime: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	if cs.ID() == 0 {
		t.Fatal("change stream cursor id 0")
	}
	if cs.Next(ctx) {
		t.Fatalf("Next returned %v", cs.Current)
	}
	wantTimeout(t, "Next", cs.Err())
	if n, m := len(rec.startedNamed("aggregate")), len(rec.startedNamed("getMore")); n != 1 || m != 2 {
		t.Errorf("%d aggregates and %d getMores, want 1 and 2", n, m)
	}
}
