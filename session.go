package sturdy

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/internal/csot"
	"github.com/sturdy-go/sturdy/internal/exec"
	"github.com/sturdy-go/sturdy/internal/session"
	"github.com/sturdy-go/sturdy/mongoerr"
)

// Session is an explicit client session: operations given the same Session
// (through the Session field of their options) run with the same logical
// session id on the server, and may form a multi-document transaction
// (StartTransaction, or WithTransaction). A Session is for one goroutine at
// a time, like the official driver's.
type Session struct {
	client *Client
	defTxn TransactionOptions
	// timeout is the session's defaultTimeoutMS (nil: the client's).
	timeout *time.Duration

	mu sync.Mutex
	sc *session.Client
	// txn is the current transaction's options, resolved at
	// StartTransaction.
	txn resolvedTxn
	// wtDeadline is the deadline of the WithTransaction in progress under
	// a timeoutMS (zero: none); operations on the session share it.
	wtDeadline time.Time
}

// SessionOptions configures StartSession. The zero value is the default.
type SessionOptions struct {
	// DefaultTransactionOptions apply to the session's transactions where
	// StartTransaction's options leave a field unset.
	DefaultTransactionOptions *TransactionOptions
	// CausalConsistency: nil or true (the default) makes the session
	// causally consistent — its reads and the first command of its
	// transactions wait (readConcern.afterClusterTime) for the latest
	// operationTime the session has seen.
	CausalConsistency *bool
	// DefaultTimeout is the session's defaultTimeoutMS: the timeout of
	// CommitTransaction, AbortTransaction, WithTransaction and EndSession
	// (a WithTimeout context still overrides it). nil (the default): the
	// client's Options.Timeout; 0: no limit.
	DefaultTimeout *time.Duration
	// Snapshot makes the session read from one point in time: its
	// commands carry readConcern {level: "snapshot"} and, from the first
	// reply on, the atClusterTime that reply read at (MongoDB 5.0+, replica
	// sets and sharded clusters). A snapshot session cannot run
	// transactions and is not causally consistent (CausalConsistency true
	// is refused).
	Snapshot bool
	// SnapshotTime, with Snapshot, is the time the session reads at from
	// its first command on (another snapshot session's SnapshotTime, say).
	SnapshotTime *bson.Timestamp
}

// TransactionOptions configures a transaction. Unset fields come from the
// session's DefaultTransactionOptions, then from the client.
type TransactionOptions struct {
	// ReadConcernLevel is sent with the transaction's first command
	// ("local", "majority", "snapshot"). Collection read concerns are
	// ignored inside a transaction.
	ReadConcernLevel string
	// WriteConcern is sent with commitTransaction and abortTransaction;
	// collection write concerns are ignored inside a transaction. It must
	// be acknowledged.
	WriteConcern *WriteConcern
	// ReadPreference applies to the transaction's reads; it must be
	// primary when a read runs.
	ReadPreference *ReadPreference
	// MaxCommitTime is sent as commitTransaction's maxTimeMS. Default 0:
	// none.
	MaxCommitTime time.Duration
}

type resolvedTxn struct {
	wc        *WriteConcern
	rp        *ReadPreference
	maxCommit time.Duration
}

// Errors from misuse of a session's transaction API. Their texts contain the
// transactions specification's required messages.
var (
	ErrTransactionInProgress     = errors.New("sturdy: Transaction already in progress")
	ErrNoTransactionStarted      = errors.New("sturdy: No transaction started")
	ErrCommitAfterAbort          = errors.New("sturdy: Cannot call commitTransaction after calling abortTransaction")
	ErrAbortAfterCommit          = errors.New("sturdy: Cannot call abortTransaction after calling commitTransaction")
	ErrAbortTwice                = errors.New("sturdy: Cannot call abortTransaction twice")
	ErrUnacknowledgedTransaction = errors.New("sturdy: transactions do not support unacknowledged write concerns")
	ErrTransactionReadPreference = errors.New("sturdy: read preference in a transaction must be primary")
	// ErrTransactionWriteConcern is the error of an operation given its
	// own write concern inside a transaction: the transaction's write
	// concern applies, at commit.
	ErrTransactionWriteConcern = errors.New("sturdy: Cannot set write concern after starting a transaction")
)

// Error labels of transactions.
const (
	// LabelTransientTransactionError: the whole transaction can be
	// retried from the start.
	LabelTransientTransactionError = mongoerr.LabelTransientTxn
	// LabelUnknownTransactionCommitResult: the commit's outcome is unknown;
	// committing again is safe.
	LabelUnknownTransactionCommitResult = mongoerr.LabelUnknownCommitResult
)

// TransactionState is a session's transaction state.
type TransactionState = session.TxnState

// The transaction states.
const (
	TransactionNone       = session.TxnNone
	TransactionStarting   = session.TxnStarting
	TransactionInProgress = session.TxnInProgress
	TransactionCommitted  = session.TxnCommitted
	TransactionAborted    = session.TxnAborted
)

// StartSession starts an explicit session. It fails if the deployment does
// not support sessions (a standalone server before 3.6, or one that reports
// no logicalSessionTimeoutMinutes).
func (c *Client) StartSession(ctx context.Context, opts ...*SessionOptions) (*Session, error) {
	if c.closed.Load() {
		return nil, ErrClientDisconnected
	}
	ok, err := c.sessionsSupported(ctx)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errors.New("sturdy: the deployment does not support sessions")
	}
	s := &Session{client: c, sc: session.NewClient(c.sessions, false)}
	s.sc.Causal = true
	for _, o := range opts {
		if o == nil {
			continue
		}
		if o.DefaultTransactionOptions != nil {
			s.defTxn = *o.DefaultTransactionOptions
		}
		if o.CausalConsistency != nil {
			s.sc.Causal = *o.CausalConsistency
		}
		if o.DefaultTimeout != nil {
			if *o.DefaultTimeout < 0 {
				return nil, argError("negative SessionOptions.DefaultTimeout %v", *o.DefaultTimeout)
			}
			d := *o.DefaultTimeout
			s.timeout = &d
		}
		if o.Snapshot {
			if o.CausalConsistency != nil && *o.CausalConsistency {
				return nil, argError("a session cannot be both causally consistent and a snapshot session")
			}
			s.sc.Snapshot, s.sc.Causal = true, false
		}
		if o.SnapshotTime != nil {
			if !o.Snapshot {
				return nil, argError("SessionOptions.SnapshotTime needs Snapshot")
			}
			s.sc.SetSnapshotTime(*o.SnapshotTime)
		}
	}
	return s, nil
}

// SnapshotTime returns the time a snapshot session reads at: known once
// its first command has answered, or from SessionOptions.SnapshotTime.
// ok is false for other sessions.
func (s *Session) SnapshotTime() (ts bson.Timestamp, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.sc.Snapshot {
		return ts, false
	}
	return s.sc.SnapshotTime()
}

// UseSession runs fn with a new session and ends the session afterwards
// (aborting a transaction fn left open).
func (c *Client) UseSession(ctx context.Context, fn func(ctx context.Context, s *Session) error, opts ...*SessionOptions) error {
	s, err := c.StartSession(ctx, opts...)
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := cleanupContext(ctx)
		defer cancel()
		s.EndSession(ctx)
	}()
	return fn(ctx, s)
}

// cleanupAbortTimeout bounds a best-effort abortTransaction sent after the
// caller's context ended: the server would abort the transaction itself
// after transactionLifetimeLimitSeconds, but until then it holds its
// locks, so one prompt attempt is worth a second.
const cleanupAbortTimeout = time.Second

// cleanupContext is ctx while it is live, else a short context of its own
// for a best-effort abort.
func cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Err() == nil {
		return ctx, func() {}
	}
	return context.WithTimeout(context.WithoutCancel(ctx), cleanupAbortTimeout)
}

// begin starts a session operation (commit, abort, end) under the
// session's defaultTimeoutMS, else the client's timeoutMS.
func (s *Session) begin(ctx context.Context) (context.Context, context.CancelFunc) {
	return csot.Start(ctx, s.timeout, s.client.timeout())
}

// Client returns the client that started the session.
func (s *Session) Client() *Client { return s.client }

// ID returns the session's lsid document ({id: UUID}), or nil before the
// session's first operation (the server session is taken from the pool
// lazily, when the first command is sent).
func (s *Session) ID() bson.Raw {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sc.ID()
}

// TransactionState returns the session's transaction state.
func (s *Session) TransactionState() TransactionState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sc.Txn.State
}

// EndSession ends the session and returns its server session to the client's
// pool, aborting a transaction in progress first (ignoring its errors).
// Using the session afterwards fails with ErrSessionEnded.
func (s *Session) EndSession(ctx context.Context) {
	s.mu.Lock()
	ended := s.sc.Ended
	active := s.sc.Txn.Active()
	s.mu.Unlock()
	if !ended && active {
		_ = s.AbortTransaction(ctx)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sc.End()
}

// StartTransaction starts a transaction: the session's next operations run
// in it until CommitTransaction or AbortTransaction. Nothing is sent to the
// server until the first operation, which carries startTransaction. Options
// left unset come from the session's defaults, then from the client.
func (s *Session) StartTransaction(opts *TransactionOptions) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sc.Ended {
		return ErrSessionEnded
	}
	if s.sc.Txn.Active() {
		return ErrTransactionInProgress
	}
	if s.sc.Snapshot {
		return argError("Transactions are not supported in snapshot sessions")
	}
	var o TransactionOptions
	if opts != nil {
		o = *opts
	}
	c := s.client
	rc := firstNonEmpty(o.ReadConcernLevel, s.defTxn.ReadConcernLevel, c.opts.ReadConcernLevel)
	r := resolvedTxn{
		wc:        firstNonNil(o.WriteConcern, s.defTxn.WriteConcern, c.opts.WriteConcern),
		rp:        firstNonNil(o.ReadPreference, s.defTxn.ReadPreference, c.opts.ReadPreference),
		maxCommit: o.MaxCommitTime,
	}
	if r.maxCommit == 0 {
		r.maxCommit = s.defTxn.MaxCommitTime
	}
	if r.wc.Unacknowledged() {
		return ErrUnacknowledgedTransaction
	}
	var rcDoc bson.D
	if rc != "" {
		rcDoc = bson.D{{Key: "level", Value: rc}}
	}
	s.txn = r
	s.sc.StartTxn(rcDoc)
	return nil
}

func firstNonEmpty(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}

func firstNonNil[T any](v ...*T) *T {
	for _, p := range v {
		if p != nil {
			return p
		}
	}
	return nil
}

// CommitTransaction commits the session's transaction. Committing a
// transaction that sent no command sends nothing. A commit that fails with
// a retryable error is retried once (twice counting overload retries, as
// for any command) with w:majority; calling CommitTransaction again after
// an error labelled UnknownTransactionCommitResult commits again, also
// with w:majority. The session is in the committed state afterwards, even
// on error.
func (s *Session) CommitTransaction(ctx context.Context) error {
	s.mu.Lock()
	if s.sc.Ended {
		s.mu.Unlock()
		return ErrSessionEnded
	}
	t := &s.sc.Txn
	again := false
	switch t.State {
	case session.TxnNone:
		s.mu.Unlock()
		return ErrNoTransactionStarted
	case session.TxnAborted:
		s.mu.Unlock()
		return ErrCommitAfterAbort
	case session.TxnStarting:
		t.State = session.TxnCommitted
		s.mu.Unlock()
		return nil
	case session.TxnCommitted:
		if t.Number == 0 {
			s.mu.Unlock()
			return nil // an empty transaction: nothing was sent the first time either
		}
		again = true
	}
	r := s.txn
	s.mu.Unlock()

	cmd := bson.D{{Key: "commitTransaction", Value: int32(1)}}
	if wc := writeConcernDoc(r.wc); wc != nil {
		cmd = append(cmd, bson.E{Key: "writeConcern", Value: wc})
	}
	if r.maxCommit > 0 {
		cmd = append(cmd, bson.E{Key: "maxTimeMS", Value: r.maxCommit.Milliseconds()})
	}
	ctx, cancel := s.begin(ctx)
	defer cancel()
	_, err := s.client.execute(ctx, &exec.Operation{
		Name: "commitTransaction", DB: "admin", Command: cmd, Flags: exec.Write | exec.TxnCommand | exec.MajorityCommit.If(again),
	}, s)
	s.mu.Lock()
	if t.State == session.TxnInProgress || t.State == session.TxnCommitted {
		t.State = session.TxnCommitted
	}
	s.mu.Unlock()
	return err
}

// AbortTransaction aborts the session's transaction. Aborting a transaction
// that sent no command sends nothing. Errors of the abortTransaction
// command are not returned (the server aborts the transaction anyway when
// it expires); only misuse is an error.
func (s *Session) AbortTransaction(ctx context.Context) error {
	s.mu.Lock()
	if s.sc.Ended {
		s.mu.Unlock()
		return ErrSessionEnded
	}
	t := &s.sc.Txn
	switch t.State {
	case session.TxnNone:
		s.mu.Unlock()
		return ErrNoTransactionStarted
	case session.TxnCommitted:
		s.mu.Unlock()
		return ErrAbortAfterCommit
	case session.TxnAborted:
		s.mu.Unlock()
		return ErrAbortTwice
	case session.TxnStarting:
		// Nothing reached a server; a mongos picked for a command that
		// was never sent is let go all the same.
		t.State, t.Pinned = session.TxnAborted, ""
		s.mu.Unlock()
		return nil
	}
	r := s.txn
	s.mu.Unlock()

	cmd := bson.D{{Key: "abortTransaction", Value: int32(1)}}
	if wc := writeConcernDoc(r.wc); wc != nil {
		cmd = append(cmd, bson.E{Key: "writeConcern", Value: wc})
	}
	ctx, cancel := s.begin(ctx)
	defer cancel()
	_, _ = s.client.execute(ctx, &exec.Operation{
		Name: "abortTransaction", DB: "admin", Command: cmd, Flags: exec.Write | exec.TxnCommand,
	}, s)
	s.mu.Lock()
	t.State = session.TxnAborted
	s.mu.Unlock()
	return nil
}

// Convenient API numbers (transactions-convenient-api spec).
const (
	// WithTransactionTimeout bounds WithTransaction's retries when the
	// context has no earlier deadline.
	WithTransactionTimeout = 120 * time.Second
	txnBackoffInitial      = 5 * time.Millisecond
	txnBackoffMax          = 500 * time.Millisecond
)

// TransactionTimeoutError is returned by WithTransaction when its time ran
// out before a retry: the timeoutMS that applies to it (see
// WithTransaction), else 120 s or the context's deadline if sooner. It
// wraps the last error met and carries its labels; errors.Is(err,
// context.DeadlineExceeded) holds.
type TransactionTimeoutError struct{ Err error }

func (e *TransactionTimeoutError) Error() string {
	return fmt.Sprintf("sturdy: transaction retries timed out: %v", e.Err)
}
func (e *TransactionTimeoutError) Unwrap() error   { return e.Err }
func (e *TransactionTimeoutError) Timeout() bool   { return true }
func (e *TransactionTimeoutError) Temporary() bool { return false }

// Is makes the error a context.DeadlineExceeded, like a TimeoutError.
func (e *TransactionTimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// WithTransaction runs fn in a transaction on s and commits it, retrying as
// the convenient transactions API specifies:
//
//   - if fn or the commit fails with TransientTransactionError, the
//     transaction is aborted and the whole of it (fn included) runs again
//     after a backoff of jitter × min(5 ms × 1.5^attempt, 500 ms);
//   - if the commit fails with UnknownTransactionCommitResult (and not
//     MaxTimeMSExpired), the commit runs again (with w:majority);
//   - any other error is returned as it is, after aborting.
//
// fn may therefore run more than once: it must not have side effects
// outside the transaction, and it must pass s to every operation.
//
// Under a timeoutMS (WithTimeout on ctx, else the session's DefaultTimeout,
// else the client's Options.Timeout) one deadline, timeoutMS after the
// start or ctx's deadline if sooner, bounds the whole call: every run of
// fn, every commit and the backoffs between them. The operations fn runs
// with s share that deadline (whatever context they are given) and do not
// get a timeout of their own: one that sets its own (WithTimeout, or a
// context deadline earlier than the transaction's) fails with an argument
// error. When fn fails the abort gets a fresh timeoutMS, so that a timed
// out transaction still releases its locks. An operation in fn that uses
// neither s nor fn's context is not bounded by the transaction's deadline.
//
// Without a timeoutMS (or with timeoutMS 0) retries stop after 120 s, or
// at ctx's deadline if sooner. Either way a timeout is a
// *TransactionTimeoutError wrapping the last error, or the operation's
// own timeout error. If fn commits or aborts the transaction itself,
// WithTransaction returns fn's result.
func (s *Session) WithTransaction(ctx context.Context, fn func(ctx context.Context) error, opts *TransactionOptions) error {
	e := s.client.exec
	b, done, err := s.startTxnBudget(ctx)
	if err != nil {
		return err
	}
	defer done()
	tctx := b.tctx
	var lastErr error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			d := time.Duration(jitter(e) * float64(min(float64(txnBackoffInitial)*pow15(attempt), float64(txnBackoffMax))))
			if b.expired(d) {
				return &TransactionTimeoutError{Err: lastErr}
			}
			if err := sleep(tctx, e, d); err != nil {
				return &TransactionTimeoutError{Err: lastErr}
			}
		}
		if err := s.StartTransaction(opts); err != nil {
			return err
		}
		if err := fn(tctx); err != nil {
			lastErr = err
			s.abortOpenTxn(ctx, b)
			if HasErrorLabel(err, LabelTransientTransactionError) {
				if b.expired(0) {
					return &TransactionTimeoutError{Err: err}
				}
				continue
			}
			return err
		}
		if st := s.TransactionState(); st != session.TxnStarting && st != session.TxnInProgress {
			return nil // fn committed or aborted the transaction itself
		}
		retry, err := s.commitWithRetry(tctx, b, &lastErr)
		if !retry {
			return err
		}
	}
}

// txnBudget is the time a WithTransaction may take: until start+limit,
// or until tctx ends. Under timeoutMS (csotOn) tctx carries the
// transaction's deadline and timeout is the timeoutMS.
type txnBudget struct {
	now     func() time.Time
	start   time.Time
	limit   time.Duration
	tctx    context.Context
	timeout time.Duration
	csotOn  bool
}

// expired reports whether the budget is spent, or will be after extra.
func (b txnBudget) expired(extra time.Duration) bool {
	return b.now().Add(extra).Sub(b.start) >= b.limit || b.tctx.Err() != nil
}

// startTxnBudget resolves the budget of a WithTransaction starting now
// and, under timeoutMS, records its deadline on s; done releases both.
func (s *Session) startTxnBudget(ctx context.Context) (b txnBudget, done func(), err error) {
	b.now = s.client.exec.Now
	if b.now == nil {
		b.now = time.Now
	}
	b.start = b.now()
	b.limit = WithTransactionTimeout
	b.tctx = ctx
	done = func() {}
	b.timeout, b.csotOn = csot.Resolve(ctx, s.timeout, s.client.timeout())
	if b.csotOn && b.timeout < 0 {
		return b, done, argError("negative timeout %v", b.timeout)
	}
	if b.csotOn && b.timeout > 0 {
		var cancel context.CancelFunc
		b.tctx, cancel = csot.StartTxn(ctx, b.timeout)
		b.limit = b.timeout
		dl, _ := b.tctx.Deadline()
		s.mu.Lock()
		s.wtDeadline = dl
		s.mu.Unlock()
		done = func() {
			s.mu.Lock()
			s.wtDeadline = time.Time{}
			s.mu.Unlock()
			cancel()
		}
	} else {
		b.csotOn = false
	}
	if dl, ok := ctx.Deadline(); ok && dl.Sub(b.start) < b.limit {
		b.limit = dl.Sub(b.start)
	}
	return b, done, nil
}

// abortOpenTxn ends the transaction fn left open. Under timeoutMS it gets
// a fresh timeout (the CSOT spec: the transaction's time may be gone and
// its locks must still be released).
func (s *Session) abortOpenTxn(ctx context.Context, b txnBudget) {
	if st := s.TransactionState(); st != session.TxnStarting && st != session.TxnInProgress {
		return
	}
	if b.csotOn {
		actx, cancel := csot.StartWith(context.WithoutCancel(ctx), b.timeout, false)
		_ = s.AbortTransaction(actx)
		cancel()
		return
	}
	actx, cancel := cleanupContext(ctx)
	_ = s.AbortTransaction(actx)
	cancel()
}

// commitWithRetry commits the transaction fn left open, retrying the
// commit on an unknown commit result. retry reports a transient error:
// the whole transaction is to run again. Each failure is kept in lastErr.
func (s *Session) commitWithRetry(tctx context.Context, b txnBudget, lastErr *error) (retry bool, err error) {
	for {
		err := s.CommitTransaction(tctx)
		if err == nil {
			return false, nil
		}
		*lastErr = err
		if !mongoerr.IsMaxTimeExpired(err) && HasErrorLabel(err, LabelUnknownTransactionCommitResult) {
			if b.expired(0) {
				return false, &TransactionTimeoutError{Err: err}
			}
			continue
		}
		if HasErrorLabel(err, LabelTransientTransactionError) {
			if b.expired(0) {
				return false, &TransactionTimeoutError{Err: err}
			}
			return true, nil // retry the whole transaction
		}
		return false, err
	}
}

// txnContext applies the deadline of a WithTransaction in progress on s to
// an operation on s whose context is not the callback's (the CSOT spec
// keeps the transaction's timeout on the session): the operation may not
// set its own timeout.
func (s *Session) txnContext(ctx context.Context) (context.Context, context.CancelFunc, error) {
	s.mu.Lock()
	dl := s.wtDeadline
	s.mu.Unlock()
	if dl.IsZero() || csot.InTxn(ctx) {
		return ctx, func() {}, nil
	}
	if _, ok := csot.OperationTimeout(ctx); ok {
		return ctx, func() {}, argError("%v", csot.ErrOverride)
	}
	ctx, cancel := csot.WithDeadline(ctx, dl, false)
	return ctx, cancel, nil
}

func pow15(n int) float64 {
	f := 1.0
	for range n {
		f *= 1.5
	}
	return f
}

// jitter and sleep use the executor's injected jitter and sleep (tests set
// them through ExecutorOf), else math/rand and a timer.
func jitter(e *exec.Executor) float64 {
	if e.Jitter != nil {
		return e.Jitter()
	}
	return rand.Float64()
}

func sleep(ctx context.Context, e *exec.Executor, d time.Duration) error {
	if e.Sleep != nil {
		return e.Sleep(ctx, d)
	}
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// use returns the internal session for an operation of client c.
func (s *Session) use(c *Client) (*session.Client, error) {
	if s.client != c {
		return nil, errors.New("sturdy: session was started by a different client")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sc.Ended {
		return nil, ErrSessionEnded
	}
	return s.sc, nil
}

// inTransaction reports whether s (nil: no session) has an active
// transaction: the next operation on it runs as one of its statements.
func (s *Session) inTransaction() bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sc.Txn.Active()
}

// checkOperationReadPref refuses an operation's own read preference
// other than primary inside a transaction, before anything is sent
// (transactions spec: a transaction reads from the primary only).
func (s *Session) checkOperationReadPref(rp *ReadPreference) error {
	if rp != nil && rp.Mode != PrimaryMode && s.inTransaction() {
		return ErrTransactionReadPreference
	}
	return nil
}

// txnReadPref is the read preference of a read in s's active transaction
// (nil: primary); ok is false when s has no active transaction.
func (s *Session) txnReadPref() (rp *ReadPreference, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.sc.Txn.Active() {
		return nil, false
	}
	return s.txn.rp, true
}
