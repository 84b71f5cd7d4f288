package sturdy_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/blackpipe"
)

// txnServer is a one-member blackpipe replica set that accepts the
// commands of transactions; fail, when set, answers a command first.
type txnServer struct {
	srv *blackpipe.Server
	mu  sync.Mutex
	// fail is consulted for every insert, find, commitTransaction and
	// abortTransaction; it returns true when it answered the request.
	fail func(r *blackpipe.Request) bool
}

func startTxnServer(t *testing.T) *txnServer {
	ts := &txnServer{srv: blackpipe.StartReplicaSet(t, "rs0", 1, blackpipe.Options{})[0]}
	ts.srv.Autorespond(blackpipe.AnyOf(blackpipe.Command("insert"), blackpipe.Command("find"),
		blackpipe.Command("commitTransaction"), blackpipe.Command("abortTransaction")), func(r *blackpipe.Request) bool {
		ts.mu.Lock()
		f := ts.fail
		ts.mu.Unlock()
		if f != nil && f(r) {
			return true
		}
		switch r.Name {
		case "insert":
			return r.Reply(d("n", int32(1), "recoveryToken", d("tok", r.RequestID))) == nil
		case "find":
			return r.ReplyCursor("db.c", 0, true, d("_id", 1)) == nil
		}
		return r.Reply(d()) == nil
	})
	return ts
}

func (ts *txnServer) setFail(f func(r *blackpipe.Request) bool) {
	ts.mu.Lock()
	ts.fail = f
	ts.mu.Unlock()
}

func (ts *txnServer) uri() string { return blackpipe.ReplicaSetURI("rs0", []*blackpipe.Server{ts.srv}) }

func has(cmd bson.Raw, key string) bool { _, err := cmd.LookupErr(key); return err == nil }

// The commands of a transaction carry what the transactions spec says:
// startTransaction and the transaction's readConcern on the first only,
// autocommit:false and one txnNumber on all, writeConcern on the commit
// only, the last recoveryToken on the commit; the next transaction gets
// the next txnNumber, and the events carry it.
func TestTransactionCommandFields(t *testing.T) {
	ts := startTxnServer(t)
	c, rec, _ := watchRetries(t, ts.uri(), 0.5, nil)
	ctx := testCtx(t)
	coll := c.Database("db").Collection("c", &sturdy.CollectionOptions{
		WriteConcern: &sturdy.WriteConcern{W: 1}, ReadConcernLevel: "local"})
	s, err := c.StartSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.EndSession(ctx)
	if err := s.StartTransaction(&sturdy.TransactionOptions{ReadConcernLevel: "snapshot",
		WriteConcern: &sturdy.WriteConcern{W: "majority"}}); err != nil {
		t.Fatal(err)
	}
	if s.TransactionState() != sturdy.TransactionStarting {
		t.Fatalf("state %v", s.TransactionState())
	}
	for i := range 2 {
		if _, err := coll.InsertOne(ctx, d("_id", i), &sturdy.InsertOneOptions{Session: s}); err != nil {
			t.Fatal(err)
		}
	}
	if s.TransactionState() != sturdy.TransactionInProgress {
		t.Fatalf("state %v", s.TransactionState())
	}
	if err := coll.FindOne(ctx, d(), &sturdy.FindOneOptions{Session: s}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if s.TransactionState() != sturdy.TransactionCommitted {
		t.Fatalf("state %v", s.TransactionState())
	}

	ins, finds, commits := rec.startedNamed("insert"), rec.startedNamed("find"), rec.startedNamed("commitTransaction")
	if len(ins) != 2 || len(finds) != 1 || len(commits) != 1 {
		t.Fatalf("%d inserts, %d finds, %d commits", len(ins), len(finds), len(commits))
	}
	first, second, find, commit := ins[0].Command, ins[1].Command, finds[0].Command, commits[0].Command
	if !first.Lookup("startTransaction").Boolean() || first.Lookup("readConcern", "level").StringValue() != "snapshot" {
		t.Errorf("first command %s", first)
	}
	for _, cmd := range []bson.Raw{first, second, find, commit} {
		if cmd.Lookup("autocommit").Boolean() || cmd.Lookup("txnNumber").Int64() != 1 || has(cmd, "$readPreference") {
			t.Errorf("command without autocommit:false / txnNumber 1: %s", cmd)
		}
	}
	for _, cmd := range []bson.Raw{second, find, commit} {
		if has(cmd, "startTransaction") || has(cmd, "readConcern") {
			t.Errorf("later command with startTransaction or readConcern: %s", cmd)
		}
	}
	for _, cmd := range []bson.Raw{first, second, find} {
		if has(cmd, "writeConcern") {
			t.Errorf("statement with a writeConcern: %s", cmd)
		}
	}
	if commit.Lookup("writeConcern", "w").StringValue() != "majority" || commits[0].DatabaseName != "admin" {
		t.Errorf("commit %s on %s", commit, commits[0].DatabaseName)
	}
	if commit.Lookup("recoveryToken", "tok").Int32() != ins[1].RequestID {
		t.Errorf("commit's recoveryToken %s, want the second insert's (%d)", commit.Lookup("recoveryToken"), ins[1].RequestID)
	}
	if ins[0].TxnNumber == nil || *ins[0].TxnNumber != 1 || commits[0].TxnNumber == nil || *commits[0].TxnNumber != 1 {
		t.Errorf("events' txnNumber %v %v", ins[0].TxnNumber, commits[0].TxnNumber)
	}

	// The next transaction, and an operation after it outside any.
	if err := s.StartTransaction(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, d("_id", 5), &sturdy.InsertOneOptions{Session: s}); err != nil {
		t.Fatal(err)
	}
	if err := s.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, d("_id", 6), &sturdy.InsertOneOptions{Session: s}); err != nil {
		t.Fatal(err)
	}
	if s.TransactionState() != sturdy.TransactionNone {
		t.Fatalf("state after a plain operation %v", s.TransactionState())
	}
	ins = rec.startedNamed("insert")
	aborts := rec.startedNamed("abortTransaction")
	if len(ins) != 4 || len(aborts) != 1 {
		t.Fatalf("%d inserts, %d aborts", len(ins), len(aborts))
	}
	if n := ins[2].Command.Lookup("txnNumber").Int64(); n != 2 || !ins[2].Command.Lookup("startTransaction").Boolean() ||
		has(ins[2].Command, "readConcern") {
		t.Errorf("second transaction's first command %s", ins[2].Command)
	}
	if aborts[0].Command.Lookup("txnNumber").Int64() != 2 || aborts[0].Command.Lookup("autocommit").Boolean() {
		t.Errorf("abort %s", aborts[0].Command)
	}
	plain := ins[3].Command
	if has(plain, "autocommit") || has(plain, "startTransaction") || plain.Lookup("txnNumber").Int64() != 3 ||
		plain.Lookup("writeConcern", "w").Int32() != 1 {
		t.Errorf("retryable write after the transaction %s", plain)
	}
}

// Misuse of the transaction API fails with typed errors and leaves the
// state as it was; empty transactions send nothing.
func TestTransactionStateErrors(t *testing.T) {
	ts := startTxnServer(t)
	c, rec, _ := watchRetries(t, ts.uri(), 0.5, nil)
	ctx := testCtx(t)
	s, err := c.StartSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, got, want error) {
		t.Helper()
		if !errors.Is(got, want) {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
	}
	check("commit without a transaction", s.CommitTransaction(ctx), sturdy.ErrNoTransactionStarted)
	check("abort without a transaction", s.AbortTransaction(ctx), sturdy.ErrNoTransactionStarted)
	check("start", s.StartTransaction(nil), nil)
	check("start twice", s.StartTransaction(nil), sturdy.ErrTransactionInProgress)
	check("abort empty", s.AbortTransaction(ctx), nil)
	check("abort twice", s.AbortTransaction(ctx), sturdy.ErrAbortTwice)
	check("commit after abort", s.CommitTransaction(ctx), sturdy.ErrCommitAfterAbort)
	check("start again", s.StartTransaction(nil), nil)
	check("commit empty", s.CommitTransaction(ctx), nil)
	check("commit empty again", s.CommitTransaction(ctx), nil)
	check("abort after commit", s.AbortTransaction(ctx), sturdy.ErrAbortAfterCommit)
	check("unacknowledged", s.StartTransaction(&sturdy.TransactionOptions{WriteConcern: &sturdy.WriteConcern{W: 0}}),
		sturdy.ErrUnacknowledgedTransaction)
	if s.TransactionState() != sturdy.TransactionCommitted {
		t.Errorf("state %v after the refused start", s.TransactionState())
	}
	check("start secondary", s.StartTransaction(&sturdy.TransactionOptions{ReadPreference: &sturdy.ReadPreference{Mode: sturdy.SecondaryMode}}), nil)
	coll := c.Database("db").Collection("c")
	check("read from a secondary", coll.FindOne(ctx, d(), &sturdy.FindOneOptions{Session: s}).Err(), sturdy.ErrTransactionReadPreference)
	if s.TransactionState() != sturdy.TransactionStarting {
		t.Errorf("a client-side error changed the state to %v", s.TransactionState())
	}
	if _, err := coll.InsertOne(ctx, d("_id", 1), &sturdy.InsertOneOptions{Session: s}); err != nil {
		t.Fatal(err)
	}
	s.EndSession(ctx) // aborts the transaction in progress
	check("start after end", s.StartTransaction(nil), sturdy.ErrSessionEnded)
	check("commit after end", s.CommitTransaction(ctx), sturdy.ErrSessionEnded)
	if n := len(rec.startedNamed("commitTransaction")); n != 0 {
		t.Errorf("%d commits sent for empty transactions", n)
	}
	aborts := rec.startedNamed("abortTransaction")
	if len(aborts) != 1 || aborts[0].Command.Lookup("txnNumber").Int64() != 3 {
		t.Errorf("aborts %v, want one for txnNumber 3 (EndSession)", aborts)
	}
}

// A commit that fails with a network error is retried once with
// w:majority and wtimeout 10000; when the retry fails too the error says
// the outcome is unknown, and committing again asks for majority from its
// first attempt. A statement inside the transaction is never retried and
// its network error is labelled TransientTransactionError.
func TestTransactionCommitRetry(t *testing.T) {
	ts := startTxnServer(t)
	c, rec, _ := watchRetries(t, ts.uri(), 0.5, nil)
	ctx := testCtx(t)
	coll := c.Database("db").Collection("c")
	s, err := c.StartSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.EndSession(ctx)
	var commits atomic.Int32
	ts.setFail(func(r *blackpipe.Request) bool {
		if r.Name == "commitTransaction" && commits.Add(1) <= 3 {
			return r.Hangup() == nil
		}
		return false
	})
	if err := s.StartTransaction(&sturdy.TransactionOptions{WriteConcern: &sturdy.WriteConcern{W: 1, WTimeout: 50 * time.Millisecond}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, d("_id", 1), &sturdy.InsertOneOptions{Session: s}); err != nil {
		t.Fatal(err)
	}
	err = s.CommitTransaction(ctx)
	if !sturdy.IsNetworkError(err) || !sturdy.HasErrorLabel(err, sturdy.LabelUnknownTransactionCommitResult) ||
		sturdy.HasErrorLabel(err, sturdy.LabelTransientTransactionError) {
		t.Fatalf("commit: %v", err)
	}
	err = s.CommitTransaction(ctx) // third attempt hangs up, fourth succeeds
	if err != nil {
		t.Fatalf("commit again: %v", err)
	}
	cs := rec.startedNamed("commitTransaction")
	if len(cs) != 4 {
		t.Fatalf("%d commit attempts, want 4", len(cs))
	}
	wantWC := []string{`{"w": {"$numberInt":"1"},"wtimeout": {"$numberLong":"50"}}`,
		`{"w": "majority","wtimeout": {"$numberLong":"50"}}`,
		`{"w": "majority","wtimeout": {"$numberLong":"50"}}`,
		`{"w": "majority","wtimeout": {"$numberLong":"50"}}`}
	for i, e := range cs {
		if got := e.Command.Lookup("writeConcern").Document().String(); got != wantWC[i] {
			t.Errorf("commit attempt %d writeConcern %s, want %s", i+1, got, wantWC[i])
		}
		if e.Command.Lookup("txnNumber").Int64() != 1 {
			t.Errorf("commit attempt %d: %s", i+1, e.Command)
		}
	}

	// Without a write concern of its own the retry gets wtimeout 10000.
	ts.setFail(nil)
	commits.Store(0)
	ts.setFail(func(r *blackpipe.Request) bool {
		switch {
		case r.Name == "commitTransaction" && commits.Add(1) == 1:
			return r.ReplyError(91, "shutting down", "RetryableWriteError") == nil
		case r.Name == "insert" && r.Command.Lookup("documents").Type == 0 && len(r.Sequences) > 0 &&
			r.Sequences[0].Documents[0].Lookup("_id").Int32() == 3:
			return r.Hangup() == nil
		}
		return false
	})
	if err := s.StartTransaction(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, d("_id", 2), &sturdy.InsertOneOptions{Session: s}); err != nil {
		t.Fatal(err)
	}
	if err := s.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	cs = rec.startedNamed("commitTransaction")
	if len(cs) != 6 || has(cs[4].Command, "writeConcern") ||
		cs[5].Command.Lookup("writeConcern").Document().String() != `{"w": "majority","wtimeout": {"$numberLong":"10000"}}` {
		t.Fatalf("commits %d: %s / %s", len(cs), cs[4].Command, cs[5].Command)
	}

	// A statement's network error: not retried, labelled transient.
	before := len(rec.startedNamed("insert"))
	if err := s.StartTransaction(nil); err != nil {
		t.Fatal(err)
	}
	_, err = coll.InsertOne(ctx, d("_id", 3), &sturdy.InsertOneOptions{Session: s})
	if !sturdy.IsNetworkError(err) || !sturdy.HasErrorLabel(err, sturdy.LabelTransientTransactionError) ||
		sturdy.HasErrorLabel(err, "RetryableWriteError") {
		t.Fatalf("insert in transaction: %v", err)
	}
	if n := len(rec.startedNamed("insert")) - before; n != 1 {
		t.Fatalf("%d insert attempts inside the transaction, want 1", n)
	}
	if s.TransactionState() != sturdy.TransactionInProgress {
		t.Fatalf("state %v after the failed first statement", s.TransactionState())
	}
	// Abort errors are not reported.
	ts.setFail(func(r *blackpipe.Request) bool {
		return r.Name == "abortTransaction" && r.ReplyError(251, "NoSuchTransaction") == nil
	})
	if err := s.AbortTransaction(ctx); err != nil {
		t.Fatalf("abort: %v", err)
	}
}

// An overload error on commit is retried through the overload policy:
// backoff, token bucket, and the write concern left as it was.
func TestTransactionCommitOverload(t *testing.T) {
	ts := startTxnServer(t)
	c, rec, w := watchRetries(t, ts.uri(), 0.5, nil)
	ctx := testCtx(t)
	var commits atomic.Int32
	ts.setFail(func(r *blackpipe.Request) bool {
		if r.Name == "commitTransaction" && commits.Add(1) <= 2 {
			return r.ReplyError(462, "overloaded", "SystemOverloadedError", "RetryableError") == nil
		}
		return false
	})
	tokens := sturdy.ExecutorOf(c).RetryTokens().Tokens()
	err := c.UseSession(ctx, func(ctx context.Context, s *sturdy.Session) error {
		if err := s.StartTransaction(&sturdy.TransactionOptions{WriteConcern: &sturdy.WriteConcern{W: 1}}); err != nil {
			return err
		}
		if _, err := c.Database("db").Collection("c").InsertOne(ctx, d("_id", 1), &sturdy.InsertOneOptions{Session: s}); err != nil {
			return err
		}
		return s.CommitTransaction(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	cs := rec.startedNamed("commitTransaction")
	if len(cs) != 3 {
		t.Fatalf("%d commits, want 3", len(cs))
	}
	for i, e := range cs {
		if got := e.Command.Lookup("writeConcern").Document().String(); got != `{"w": {"$numberInt":"1"}}` {
			t.Errorf("commit %d writeConcern %s", i+1, got)
		}
	}
	if b := w.backoffs(); len(b) != 2 || b[0] != 50*time.Millisecond || b[1] != 100*time.Millisecond {
		t.Errorf("backoffs %v, want [50ms 100ms]", b)
	}
	// Two retries taken (2), one success on a retry (+1.1) and one
	// first-try success (+0.1, the insert): 0.2 fewer than before, up to
	// the bucket's capacity.
	if got := sturdy.ExecutorOf(c).RetryTokens().Tokens(); got > tokens || got < tokens-2 {
		t.Errorf("tokens %v, started with %v", got, tokens)
	}
}

// WithTransaction reruns the callback after a TransientTransactionError
// (with backoff between attempts), commits again after an
// UnknownTransactionCommitResult, and returns other errors at once.
func TestWithTransactionRetries(t *testing.T) {
	ts := startTxnServer(t)
	c, rec, w := watchRetries(t, ts.uri(), 0.5, nil)
	ctx := testCtx(t)
	coll := c.Database("db").Collection("c")
	var inserts, commits atomic.Int32
	ts.setFail(func(r *blackpipe.Request) bool {
		switch {
		case r.Name == "insert" && inserts.Add(1) <= 2:
			return r.ReplyError(112, "WriteConflict", "TransientTransactionError") == nil
		case r.Name == "commitTransaction" && commits.Add(1) <= 2:
			// Past the executor's own retry: a write concern timeout.
			return r.ReplyWriteConcernError(0, blackpipe.WriteConcernError{Code: 64, Message: "waiting for replication timed out"}) == nil
		}
		return false
	})
	calls := 0
	err := c.UseSession(ctx, func(ctx context.Context, s *sturdy.Session) error {
		return s.WithTransaction(ctx, func(ctx context.Context) error {
			calls++
			_, err := coll.InsertOne(ctx, d("_id", 1), &sturdy.InsertOneOptions{Session: s})
			return err
		}, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 3 {
		t.Errorf("callback ran %d times, want 3", calls)
	}
	if n := len(rec.startedNamed("abortTransaction")); n != 2 {
		t.Errorf("%d aborts, want 2 (one per failed callback)", n)
	}
	cs := rec.startedNamed("commitTransaction")
	if len(cs) != 3 {
		t.Fatalf("%d commits, want 3", len(cs))
	}
	if has(cs[0].Command, "writeConcern") || cs[2].Command.Lookup("writeConcern", "w").StringValue() != "majority" {
		t.Errorf("commits %s / %s", cs[0].Command, cs[2].Command)
	}
	ins := rec.startedNamed("insert")
	for i, e := range ins {
		if e.Command.Lookup("txnNumber").Int64() != int64(i+1) || !e.Command.Lookup("startTransaction").Boolean() {
			t.Errorf("insert %d: %s", i+1, e.Command)
		}
	}
	// jitter 0.5 × 5 ms × 1.5^attempt, for attempts 1 and 2.
	if b := w.backoffs(); len(b) != 2 || b[0] != 3750*time.Microsecond || b[1] != 5625*time.Microsecond {
		t.Errorf("backoffs %v", b)
	}

	// A non-transient error: returned as is, after one abort.
	ts.setFail(func(r *blackpipe.Request) bool {
		return r.Name == "insert" && r.ReplyWriteErrors(0, blackpipe.WriteError{Code: 11000, Message: "E11000 duplicate key"}) == nil
	})
	aborts := len(rec.startedNamed("abortTransaction"))
	err = c.UseSession(ctx, func(ctx context.Context, s *sturdy.Session) error {
		return s.WithTransaction(ctx, func(ctx context.Context) error {
			_, err := coll.InsertOne(ctx, d("_id", 1), &sturdy.InsertOneOptions{Session: s})
			return err
		}, nil)
	})
	if !sturdy.IsDuplicateKey(err) || len(rec.startedNamed("abortTransaction")) != aborts+1 {
		t.Fatalf("duplicate key: %v, aborts %d", err, len(rec.startedNamed("abortTransaction"))-aborts)
	}
}

// WithTransaction's retries stop at the context's deadline (here before
// the 120 s limit) with a timeout error carrying the last error's labels.
func TestWithTransactionDeadline(t *testing.T) {
	ts := startTxnServer(t)
	c, _, _ := watchRetries(t, ts.uri(), 1, nil)
	ex := sturdy.ExecutorOf(c)
	var mu sync.Mutex
	now := time.Now()
	ex.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	ex.Sleep = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		now = now.Add(d)
		mu.Unlock()
		return ctx.Err()
	}
	ts.setFail(func(r *blackpipe.Request) bool {
		return r.Name == "insert" && r.ReplyError(112, "WriteConflict", "TransientTransactionError") == nil
	})
	ctx, cancel := context.WithTimeout(testCtx(t), 20*time.Second)
	defer cancel()
	calls := 0
	err := c.UseSession(ctx, func(ctx context.Context, s *sturdy.Session) error {
		return s.WithTransaction(ctx, func(ctx context.Context) error {
			calls++
			_, err := c.Database("db").Collection("c").InsertOne(ctx, d("_id", 1), &sturdy.InsertOneOptions{Session: s})
			return err
		}, nil)
	})
	var te *sturdy.TransactionTimeoutError
	if !errors.As(err, &te) || !sturdy.IsTimeout(err) || !sturdy.HasErrorLabel(err, sturdy.LabelTransientTransactionError) {
		t.Fatalf("err %v", err)
	}
	// Backoffs of 5 ms × 1.5^n, capped at 500 ms, fill 20 s of the
	// injected clock: about 50 attempts, not the 120 s limit's ~250.
	if calls < 40 || calls > 60 {
		t.Errorf("callback ran %d times", calls)
	}
}

// A causally consistent session (the default) sends the latest
// operationTime it saw as readConcern.afterClusterTime on its reads and on
// the first command of a transaction; with CausalConsistency false it
// does not.
func TestCausalConsistencyAfterClusterTime(t *testing.T) {
	ts := startTxnServer(t)
	ts.setFail(func(r *blackpipe.Request) bool {
		if r.Name == "insert" {
			return r.Reply(d("n", int32(1), "operationTime", bson.Timestamp{T: 42, I: int32ToU(r.RequestID)})) == nil
		}
		return false
	})
	c, rec, _ := watchRetries(t, ts.uri(), 0.5, nil)
	ctx := testCtx(t)
	coll := c.Database("db").Collection("c", &sturdy.CollectionOptions{ReadConcernLevel: "majority"})
	run := func(causal bool) (find, first bson.Raw, opTime bson.Timestamp) {
		s, err := c.StartSession(ctx, &sturdy.SessionOptions{CausalConsistency: &causal})
		if err != nil {
			t.Fatal(err)
		}
		defer s.EndSession(ctx)
		if err := coll.FindOne(ctx, d(), &sturdy.FindOneOptions{Session: s}).Err(); err != nil {
			t.Fatal(err)
		}
		if rc := rec.startedNamed("find")[len(rec.startedNamed("find"))-1].Command.Lookup("readConcern"); has(rc.Document(), "afterClusterTime") {
			t.Errorf("a read before any operationTime sent afterClusterTime: %s", rc)
		}
		if _, err := coll.InsertOne(ctx, d("_id", 1), &sturdy.InsertOneOptions{Session: s}); err != nil {
			t.Fatal(err)
		}
		ins := rec.startedNamed("insert")
		opTime = bson.Timestamp{T: 42, I: int32ToU(ins[len(ins)-1].RequestID)}
		if err := coll.FindOne(ctx, d(), &sturdy.FindOneOptions{Session: s}).Err(); err != nil {
			t.Fatal(err)
		}
		finds := rec.startedNamed("find")
		find = finds[len(finds)-1].Command
		if _, err := coll.InsertOne(ctx, d("_id", 2), &sturdy.InsertOneOptions{Session: s}); err != nil {
			t.Fatal(err)
		}
		ins = rec.startedNamed("insert")
		if rc, ok := ins[len(ins)-1].Command.Lookup("readConcern").DocumentOK(); causal != ok ||
			ok && (has(rc, "level") || !rc.Lookup("afterClusterTime").Equal(bson.RawValue{Type: bson.TypeTimestamp, Value: tsBytes(opTime)})) {
			t.Errorf("causal %v: write after a reply with operationTime: %s", causal, ins[len(ins)-1].Command)
		}
		if err := s.StartTransaction(nil); err != nil {
			t.Fatal(err)
		}
		if err := coll.FindOne(ctx, d(), &sturdy.FindOneOptions{Session: s}).Err(); err != nil {
			t.Fatal(err)
		}
		finds = rec.startedNamed("find")
		return find, finds[len(finds)-1].Command, opTime
	}
	before := len(rec.startedNamed("insert"))
	find, first, opTime := run(true)
	if ins := rec.startedNamed("insert"); len(ins) < before+1 || has(ins[before].Command, "readConcern") {
		t.Errorf("first insert of the session: %s", ins[before].Command)
	}
	if got := find.Lookup("readConcern"); got.Document().Lookup("level").StringValue() != "majority" ||
		!got.Document().Lookup("afterClusterTime").Equal(bson.RawValue{Type: bson.TypeTimestamp, Value: tsBytes(opTime)}) {
		t.Errorf("causal read's readConcern %s, want level majority and afterClusterTime %v", got, opTime)
	}
	if rc := first.Lookup("readConcern").Document(); has(rc, "level") || !has(rc, "afterClusterTime") {
		t.Errorf("transaction's first command readConcern %s: want only afterClusterTime", rc)
	}
	find, first, _ = run(false)
	if has(find.Lookup("readConcern").Document(), "afterClusterTime") || has(first, "readConcern") {
		t.Errorf("non-causal session: read %s, transaction start %s", find, first)
	}
}

func int32ToU(n int32) uint32 { return uint32(n) }

func tsBytes(ts bson.Timestamp) []byte {
	_, b, _ := bson.MarshalValue(ts)
	return b
}

// abortTransaction is retried once after a network error, whatever
// retryWrites says, and its failure is not reported.
func TestTransactionAbortRetry(t *testing.T) {
	ts := startTxnServer(t)
	c, rec, _ := watchRetries(t, ts.uri()+"&retryWrites=false", 0.5, nil)
	ctx := testCtx(t)
	ts.setFail(func(r *blackpipe.Request) bool {
		return r.Name == "abortTransaction" && r.Hangup() == nil
	})
	s, err := c.StartSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.EndSession(ctx)
	if err := s.StartTransaction(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Database("db").Collection("c").InsertOne(ctx, d("_id", 1), &sturdy.InsertOneOptions{Session: s}); err != nil {
		t.Fatal(err)
	}
	if err := s.AbortTransaction(ctx); err != nil {
		t.Fatalf("abort: %v", err)
	}
	if n := len(rec.startedNamed("abortTransaction")); n != 2 || s.TransactionState() != sturdy.TransactionAborted {
		t.Fatalf("%d abort attempts, state %v; want 2, aborted", n, s.TransactionState())
	}
}
