package exec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/event"
	"github.com/sturdy-go/sturdy/internal/backoff"
	"github.com/sturdy-go/sturdy/internal/bsonnum"
	"github.com/sturdy-go/sturdy/internal/conn"
	"github.com/sturdy-go/sturdy/internal/csot"
	"github.com/sturdy-go/sturdy/internal/pool"
	"github.com/sturdy-go/sturdy/internal/session"
	"github.com/sturdy-go/sturdy/internal/topology"
	"github.com/sturdy-go/sturdy/mongoerr"
	"github.com/sturdy-go/sturdy/readpref"
	"github.com/sturdy-go/sturdy/wire"
)

// Errors Execute returns for operations it refuses to run.
var (
	// ErrSessionsNotSupported: an explicit session was used with a server
	// that does not support sessions (its hello had no
	// logicalSessionTimeoutMinutes).
	ErrSessionsNotSupported = errors.New("the server does not support sessions")
	// ErrEmptyCommand: Operation.Command is empty.
	ErrEmptyCommand = errors.New("empty command")
	// ErrServerNoLongerWritable: the server selected for a retryable
	// write was marked Unknown or seen to step down before the command
	// was sent, so it was not sent. The operation selects again (a free
	// retry, see MaxUnsentRetries); this is returned only once those run
	// out.
	ErrServerNoLongerWritable = errors.New("the server selected for the write stopped being writable before the command was sent")
	// ErrServerRemoved: the server selected for the operation left the
	// topology (its pool closed) before a connection was checked out, so
	// nothing was sent. The operation selects again (a free retry, see
	// MaxUnsentRetries) unless it is bound to that server (getMore,
	// killCursors); this is returned only then, or once those run out.
	ErrServerRemoved = errors.New("the server selected for the operation was removed from the topology before the command was sent")
)

// Executor runs operations against a topology. Its zero value is not
// usable: Topology is required; Sessions nil means no lsid is ever sent.
// An Executor is safe for concurrent use.
type Executor struct {
	Topology *topology.Topology
	Sessions *session.Pool
	Monitor  *event.Monitor
	Logger   *slog.Logger // nil: no logging
	// RetryWrites enables retryable writes (Retryable Writes spec: a
	// transaction number on eligible writes and one retry after a retryable
	// error) and the overload retries of write commands; RetryReads enables
	// retryable reads and the overload retries of read commands. Operations
	// marked RunCommand need both for overload retries.
	RetryWrites, RetryReads bool
	// MaxAdaptiveRetries caps the retries of an operation once an overload
	// error (RetryableError / SystemOverloadedError label) has been seen.
	// It is taken literally: 0 means no overload retries (retryable writes
	// and reads still get their one retry); New applies the default.
	MaxAdaptiveRetries int
	// DisableRetryTokens turns off the client-wide retry token bucket
	// (adaptiveRetries=false): retries are then limited only by
	// MaxAdaptiveRetries and the context deadline.
	DisableRetryTokens bool
	// BackoffBase is the overload backoff before the first retry, before
	// jitter, unless the server's error suggests one (baseBackoffMS); 0
	// means no wait.
	BackoffBase time.Duration
	// DisableOverloadRetargeting keeps a server that answered with
	// SystemOverloadedError eligible for the operation's next attempt
	// (enableOverloadRetargeting=false). Sharded clusters deprioritize the
	// failed mongos on every retry regardless.
	DisableOverloadRetargeting bool
	// Tokens is the retry token bucket; nil means a full bucket of
	// backoff.BucketCapacity created on first use. Ignored with
	// DisableRetryTokens.
	Tokens *backoff.TokenBucket
	// Sleep waits d before a retry, returning early with ctx's error; nil
	// means a timer. Jitter returns the backoff jitter in [0, 1); nil means
	// math/rand/v2. Now is the clock the deadline check reads; nil means
	// time.Now. Tests inject all three to check exact schedules.
	Sleep  func(ctx context.Context, d time.Duration) error
	Jitter func() float64
	Now    func() time.Time

	tokensOnce sync.Once
	primarySel atomic.Pointer[topology.Selector] // see primaryReads

	// clusterTime is the highest $clusterTime received from any server
	// (nil: none yet). It is swapped, never changed in place, without a
	// lock: every write's reply brings a new one, and from many goroutines
	// a mutex here was the client's most contended lock.
	clusterTime atomic.Pointer[clusterTimeBox]
}

// Operation is one command to run.
type Operation struct {
	Name      string // command name for events; "" → the command's first key
	DB        string
	Command   bson.D // without $db, lsid, txnNumber, $readPreference, $clusterTime
	Sequences []wire.DocumentSequence
	// Flags say which rules apply to the operation (flags.go).
	Flags    Flags
	ReadPref *readpref.ReadPref // nil = primary
	// Session is an explicit session (or a cursor's implicit one); nil
	// makes Execute use an implicit session for this operation.
	Session *session.Client
	// Server pins the operation to a server (getMore, killCursors).
	Server *topology.Server
	// OperationID links the events of all attempts; 0 → Execute assigns one.
	OperationID int64
	// Pin runs the operation on a cursor's pinned connection (getMore,
	// killCursors in load-balanced mode).
	Pin *Pin
	// KeptSession, when set, is the storage a KeepSession operation's
	// implicit session is made in (a cursor passes a field of its own), so
	// that the session costs no allocation; nil: it is allocated.
	KeptSession *session.Client
}

// Result is a successful operation's outcome.
type Result struct {
	Reply       bson.Raw         // nil for unacknowledged writes
	Server      *topology.Server // the server that answered
	Session     *session.Client  // the session used (kept alive only with KeepSession or when explicit)
	OperationID int64
	// Pin is the connection pinned to the cursor the operation opened
	// (PinCursor, load-balanced mode); the cursor unpins it.
	Pin *Pin
	// ReplyBuffer is the pooled buffer Reply lies in (RecycleReply), nil
	// if it has none or a command-succeeded listener was handed Reply. A
	// caller that keeps no reference into Reply (a cursor done with its
	// batch) may give it back with bufpool.Put; else it just drops it.
	ReplyBuffer *[]byte
}

var operationIDs atomic.Int64

// NextOperationID returns a new process-unique operation id, for callers
// that group several Execute calls (the commands of one bulk write).
func NextOperationID() int64 { return operationIDs.Add(1) }

// opState is what an operation carries from one attempt to the next.
type opState struct {
	opID int64
	name string
	// sess is the client session; nil for unacknowledged writes (and when
	// the executor has no session pool). ownSession: Execute started it.
	sess       *session.Client
	ownSession bool
	// txnNumber is taken from the server session by the first attempt that
	// may carry one; every retry sends the same number.
	txnNumber *int64
	// attempts counts finished attempts (including failed selection).
	attempts int
	// deprioritized lists servers selection should avoid (Client Backpressure
	// spec).
	deprioritized []string
	// server is the server of the last attempt, nil if selection failed.
	server *topology.Server
	// checkedOut is set once an attempt got a connection: the policy can
	// tell driver-side failures (nothing sent) from server-side ones.
	checkedOut bool
	// sent is set when the current attempt wrote its command: an error
	// before that is the driver's own (selection, check-out, encoding)
	// and says no write was attempted.
	sent bool
	// wire is the maxWireVersion of the last attempt's connection: servers
	// before 4.4 (wire < 9) do not label retryable write errors.
	wire int32
	// retry is the operation's retry policy state (kept here to save an
	// allocation per operation).
	retry retrier
	// stageReadPref is set when a WriteStage operation's server was
	// selected with its read preference (all servers 5.0+), which it then
	// sends as $readPreference.
	stageReadPref bool
	// inTxn: the operation runs in the session's transaction (a command
	// of a starting or in-progress transaction, or commit/abort).
	inTxn bool
	// replyBuffer is the pooled buffer of the last attempt's reply, when
	// nothing the executor did (a succeeded event) let it escape.
	replyBuffer *[]byte
	// everSent: some attempt wrote its command; a transaction's first
	// command then moves the transaction to in progress.
	everSent bool
	// commitMajority: a commitTransaction attempt failed with an error
	// other than an overload error, so the retries send w:majority.
	commitMajority bool
	// pin is the connection pinned to the cursor the operation opened.
	pin *Pin

	// What follows is storage for per-attempt values that would otherwise
	// each cost an allocation per operation.

	// txn is the value txnNumber points to.
	txn int64
	// implicit is the implicit session sess points to, unless the caller
	// keeps the session (KeepSession): that one outlives Execute, and this
	// state is recycled when Execute returns.
	implicit session.Client
	// cmdBuf backs the assembled command when it fits.
	cmdBuf [12]bson.E
	// started publishes the started event of the attempt being sent.
	started startedHook
}

// startedHook is the conn.SendObserver of an attempt: when Send has the
// request id it publishes the command-started event, just before the
// message is written, and records that the command was sent.
type startedHook struct {
	e   *Executor
	ctx context.Context
	op  *Operation
	st  *opState
	cmd bson.D
	ids attemptIdentity
}

func (h *startedHook) Sending(requestID int32) {
	h.ids.requestID = requestID
	h.st.sent = true
	h.st.everSent = true
	h.e.publishStarted(h.ctx, h.op, h.st, h.cmd, h.ids)
}

// opStates recycles operation states: an opState is most of the bytes an
// operation allocates, and nothing refers to it once Execute returns (the
// session of a KeepSession operation, which outlives it, is allocated on
// its own).
var opStates = sync.Pool{New: func() any { return new(opState) }}

// putOpState clears st, so that the pool holds no command, session or
// context alive, and returns it to the pool.
func putOpState(st *opState) {
	*st = opState{}
	opStates.Put(st)
}

// Execute runs op: a loop of server selection and attempt, retried as
// retry.go describes (retryable writes, retryable reads, overload).
func (e *Executor) Execute(ctx context.Context, op *Operation) (Result, error) {
	if len(op.Command) == 0 {
		return Result{}, ErrEmptyCommand
	}
	st := opStates.Get().(*opState)
	defer putOpState(st)
	st.opID, st.name = op.OperationID, op.Name
	if st.opID == 0 {
		st.opID = NextOperationID()
	}
	if st.name == "" {
		st.name = op.Command[0].Key
	}
	if err := e.bindSession(op, st); err != nil {
		return Result{OperationID: st.opID}, err
	}
	reply, err := e.run(ctx, op, st)
	if st.inTxn {
		err = finishTxnStatement(op, st, err)
	}
	if err != nil && csot.Active(ctx) {
		err = timeoutError(ctx, err)
	}
	if err != nil && !st.everSent {
		err = mongoerr.NotSent(err) // for SafeToRetry: only here is it known
	}
	return st.result(op, reply, err), err
}

// bindSession gives the operation its session: the caller's (ending a
// finished transaction, noting whether this statement is in one) or an
// implicit one for acknowledged operations when sessions are supported.
func (e *Executor) bindSession(op *Operation, st *opState) error {
	switch {
	case op.Session != nil:
		if op.Session.Ended {
			return mongoerr.ErrSessionEnded
		}
		if op.Flags.Has(Unacknowledged) && !op.Session.Implicit {
			return mongoerr.ErrUnacknowledgedSession
		}
		if !op.Flags.Has(Unacknowledged) {
			st.sess = op.Session
		}
		if !op.Session.Implicit {
			t := &op.Session.Txn
			if !op.Flags.Has(TxnCommand) && (t.State == session.TxnCommitted || t.State == session.TxnAborted) {
				// Any other operation ends a finished transaction.
				*t = session.Txn{}
				op.Session.Unpin()
			}
			st.inTxn = t.Active() || op.Flags.Has(TxnCommand)
		}
	case !op.Flags.Has(Unacknowledged) && e.Sessions != nil:
		// Implicit session: its server session is taken from the pool only
		// after a connection was checked out (Client.Acquire in attempt).
		switch {
		case op.Flags.Has(KeepSession) && op.KeptSession != nil:
			session.InitClient(op.KeptSession, e.Sessions, true)
			st.sess = op.KeptSession
		case op.Flags.Has(KeepSession):
			st.sess = session.NewClient(e.Sessions, true)
		default:
			session.InitClient(&st.implicit, e.Sessions, true)
			st.sess = &st.implicit
		}
		st.ownSession = true
	}
	return nil
}

// finishTxnStatement updates the transaction after one of its statements:
// it is in progress once the server has seen startTransaction, errors get
// the transaction labels, and the session unpins when the transactions
// specification says so.
func finishTxnStatement(op *Operation, st *opState, err error) error {
	if t := &op.Session.Txn; t.State == session.TxnStarting && st.everSent {
		// Even on error: the server has seen startTransaction.
		t.State = session.TxnInProgress
	}
	err = labelTxnError(op, err)
	if mongoerr.HasErrorLabel(err, mongoerr.LabelTransientTxn) || st.name == "abortTransaction" ||
		(st.name == "commitTransaction" && mongoerr.HasErrorLabel(err, mongoerr.LabelUnknownCommitResult)) {
		// When to unpin (transactions specification).
		op.Session.Unpin()
	}
	unpinAfter(op, err)
	return err
}

// result is what Execute returns for reply and err: the reply buffer only
// on success, and the implicit session either handed to the caller
// (KeepSession) or ended here.
func (st *opState) result(op *Operation, reply bson.Raw, err error) Result {
	res := Result{Reply: reply, Server: st.server, OperationID: st.opID, Pin: st.pin}
	if err == nil {
		res.ReplyBuffer = st.replyBuffer
	}
	if st.ownSession {
		// Kept too when the error came with a server reply (a write
		// concern error carries a bulkWrite's results cursor); the caller
		// ends it.
		if op.Flags.Has(KeepSession) && (err == nil || reply != nil) {
			res.Session = st.sess
		} else {
			st.sess.End()
		}
	} else {
		res.Session = op.Session
	}
	return res
}

// run is the attempt loop: select a server, run an attempt, and let the
// retry policy decide after every failure.
func (e *Executor) run(ctx context.Context, op *Operation, st *opState) (bson.Raw, error) {
	policy := e.policyFor(op, st)
	for {
		var reply bson.Raw
		st.sent = false
		srv, err := e.selectServer(ctx, op, st)
		st.server = srv
		if err == nil && st.attempts > 0 && st.txnNumber != nil {
			switch sd := srv.Description(); {
			case sd.Kind == topology.ServerUnknown:
				// Marked Unknown since selection (another operation's
				// error): select again, as for a stepped-down server.
				srv.Dec()
				err = ErrServerNoLongerWritable
			case !sd.SupportsRetryableWrites():
				// Retryable Writes spec: the server selected for the retry no
				// longer supports retryable writes (a downgrade in progress).
				srv.Dec()
				err = errRetryUnsupported
			}
		}
		if err == nil {
			reply, err = e.attempt(ctx, op, st, srv)
			err = e.labelNetworkError(op, st, err)
		}
		st.attempts++
		if err == nil {
			policy.succeeded(st)
			return reply, nil
		}
		again, finalReply, final := policy.retry(ctx, st, err, reply)
		if !again {
			return finalReply, final
		}
	}
}

// selectServer picks the server for the next attempt: the pinned one, or a
// writable one, or one matching the read preference. The server's
// operation count is incremented; attempt decrements it.
func (e *Executor) selectServer(ctx context.Context, op *Operation, st *opState) (*topology.Server, error) {
	if op.Server != nil {
		op.Server.Inc() // as SelectServer does for the server it returns
		return op.Server, nil
	}
	if st.inTxn {
		if addr := st.sess.Txn.Pinned; addr != "" {
			// Every command of a sharded transaction goes to the
			// mongos its first command went to; a mongos that left the
			// topology cannot take it, so the session is unpinned.
			if srv, ok := e.Topology.Server(addr); ok {
				srv.Inc()
				return srv, nil
			}
			st.sess.Txn.Pinned = ""
		}
	}
	var sel topology.Selector
	st.stageReadPref = false
	if op.Flags.Has(WriteStage) && op.ReadPref != nil && op.ReadPref.Mode != readpref.Primary {
		sel = &writeStageSelector{
			read: topology.ReadPrefSelector(*op.ReadPref, e.Topology.Options().HeartbeatInterval),
			st:   st,
		}
	} else if op.Flags.Has(Write) {
		sel = topology.WriteSelector()
	} else if op.ReadPref == nil {
		sel = e.primaryReads()
	} else {
		sel = topology.ReadPrefSelector(*op.ReadPref, e.Topology.Options().HeartbeatInterval)
	}
	return e.Topology.SelectServer(ctx, sel, st.deprioritized)
}

// primaryReads is the selector of reads with the default read preference,
// made once rather than boxed per operation.
func (e *Executor) primaryReads() topology.Selector {
	if s := e.primarySel.Load(); s != nil {
		return *s
	}
	s := topology.ReadPrefSelector(readpref.ReadPref{Mode: readpref.Primary}, e.Topology.Options().HeartbeatInterval)
	e.primarySel.Store(&s)
	return s
}

// attempt runs the command once on srv: get a connection, check it can
// take the attempt, attach the session, then the round trip; errors go to
// SDAM and the connection goes back to its pool (or stays pinned).
func (e *Executor) attempt(ctx context.Context, op *Operation, st *opState, srv *topology.Server) (reply bson.Raw, err error) {
	defer srv.Dec() // counted in progress since selection
	defer func() {
		if err != nil {
			e.logFailure(ctx, st, srv, err)
		}
	}()

	c, pin, err := e.connFor(ctx, op, st, srv)
	if err != nil {
		return nil, err
	}
	defer func() { releaseConn(op, st, srv, c, pin, reply, err) }()

	// Read before Writable: a description read after the server went
	// Unknown would make a retryable write go without a txnNumber.
	sd := srv.Description()
	if op.Flags.Has(Write) && op.Server == nil && !st.stageReadPref && (!srv.Writable() || sd.Kind == topology.ServerUnknown) && st.retry.retryableWrite(st) {
		// Known to have stepped down (or gone Unknown) since selection:
		// a retryable write selects again rather than meet a
		// NotWritablePrimary it would have to spend its retry on.
		return nil, ErrServerNoLongerWritable
	}
	st.checkedOut = true
	cd := c.Description()
	st.wire = cd.MaxWireVersion
	if st.txnNumber != nil && (cd.MaxWireVersion < 6 || cd.LogicalSessionTimeoutMinutes == nil) {
		return nil, errRetryUnsupported // the retry's connection cannot take the txnNumber
	}
	ss, err := e.attachSession(op, st, srv, sd, cd)
	if err != nil {
		return nil, err
	}
	return e.roundTrip(ctx, op, st, srv, sd, c, cd, ss)
}

// connFor returns the attempt's connection: in load-balanced mode the
// cursor's or transaction's pinned one (pin), with no check-out; else one
// checked out of srv's pool, a failure to establish it going to SDAM.
func (e *Executor) connFor(ctx context.Context, op *Operation, st *opState, srv *topology.Server) (*conn.Conn, *Pin, error) {
	if pin := pinnedConn(op, st); pin != nil {
		return pin.Conn(), pin, nil
	}
	p := srv.Pool()
	gen := p.Generation()
	c, err := p.CheckOut(ctx)
	if err != nil {
		if errors.Is(err, pool.ErrPoolClosed) {
			return nil, nil, e.poolClosed(srv)
		}
		if establishmentFailure(ctx, err) {
			srv.ProcessError(err, gen, true)
		}
		return nil, nil, err
	}
	return c, nil, nil
}

// releaseConn ends the attempt's use of c: a pinned connection updates
// its pin, a checked-out one is pinned to the new cursor or transaction
// or checked back in.
func releaseConn(op *Operation, st *opState, srv *topology.Server, c *conn.Conn, pin *Pin, reply bson.Raw, err error) {
	if pin != nil {
		afterPinned(op, st, pin, reply, err)
		return
	}
	if !keepPinned(op, st, srv, c, reply, err) {
		srv.Pool().CheckIn(c)
	}
}

// attachSession acquires the server session, only now that a connection
// is ours, and takes the txnNumber the attempt carries: the transaction's,
// or a new one for a retryable write's first attempt.
func (e *Executor) attachSession(op *Operation, st *opState, srv *topology.Server, sd topology.ServerDescription, cd conn.Description) (*session.Server, error) {
	var ss *session.Server
	if st.sess != nil {
		if cd.LogicalSessionTimeoutMinutes != nil {
			var err error
			if ss, err = st.sess.Acquire(e.sessionTimeout(cd)); err != nil {
				return nil, err
			}
		} else if !st.sess.Implicit {
			return nil, ErrSessionsNotSupported
		}
	}
	if ss != nil && st.inTxn {
		st.txn = st.sess.TxnNumber(ss)
		st.txnNumber = &st.txn
		if !op.Flags.Has(TxnCommand) && st.sess.Txn.Pinned == "" && (sd.Kind == topology.Mongos || cd.IsMongos()) {
			// The transaction's first command (or the first after an
			// unpinning error) pins the session to this mongos.
			st.sess.Txn.Pinned = srv.Addr()
		}
	} else if ss != nil && st.txnNumber == nil && op.Flags.Has(RetryableWrite) && e.RetryWrites &&
		supportsRetryableWrites(sd, cd) {
		st.txn = ss.NextTxnNumber()
		st.txnNumber = &st.txn
	}
	return ss, nil
}

// roundTrip assembles and encodes the command, publishes started, sends
// it on c and publishes succeeded or failed. sd is srv's description as
// the attempt read it.
func (e *Executor) roundTrip(ctx context.Context, op *Operation, st *opState, srv *topology.Server, sd topology.ServerDescription, c *conn.Conn, cd conn.Description, ss *session.Server) (bson.Raw, error) {
	cmd := e.assemble(op, st, sd.Kind, cd, ss)
	cmd, err := withMaxTime(ctx, cmd, sd.MinRTT, op.Flags.Has(RunCommand))
	if err != nil {
		return nil, err
	}
	// Encoded into a pooled buffer: Send copies it into the connection's
	// own, so it is free again once Send returns.
	buf := commandBuffers.Get().(*[]byte)
	defer putCommandBuffer(buf)
	body, err := wire.AppendDocument((*buf)[:0], cmd)
	if err != nil {
		return nil, fmt.Errorf("encoding %s command: %w", st.name, err)
	}
	*buf = body
	h := &st.started
	*h = startedHook{e: e, ctx: ctx, op: op, st: st, cmd: cmd, ids: e.identity(st, op, c, ss)}
	req := &conn.Request{DB: op.DB, Command: body, Sequences: op.Sequences, MoreToCome: op.Flags.Has(Unacknowledged), OnSend: h,
		PooledReply: op.Flags.Has(RecycleReply)}

	start := time.Now()
	if ss != nil {
		ss.LastUse = start
	}
	st.replyBuffer = nil
	var r conn.Reply
	got, err := c.SendTo(ctx, req, &r)
	var dur time.Duration // for events only
	if e.Monitor != nil {
		dur = time.Since(start)
	}
	ids := h.ids
	h.ctx, h.cmd = nil, nil // the attempt's; not to be kept for the next
	var reply bson.Raw
	if got {
		reply = r.Body
		e.absorbReply(st, reply, err)
	}
	if err != nil {
		var wex *mongoerr.WriteException
		if got && errors.As(err, &wex) {
			// ok: 1 with writeErrors or a writeConcernError: the command
			// succeeded as far as monitoring goes; the caller still gets
			// the error.
			e.publishSucceeded(ctx, st, ids, dur, reply)
		} else {
			e.publishFailed(ctx, st, ids, dur, err)
		}
		if mongoerr.IsNetworkError(err) && st.sess != nil {
			st.sess.MarkDirty()
		}
		if !errors.Is(err, context.Canceled) {
			srv.ProcessConnError(err, c)
		}
		return reply, err
	}
	e.publishSucceeded(ctx, st, ids, dur, reply)
	if got && (e.Monitor == nil || e.Monitor.CommandSucceeded == nil) {
		st.replyBuffer = r.Buffer
	}
	return reply, nil
}

// absorbReply takes what the session learns from a reply (err is the
// attempt's error): cluster and operation time, the snapshot time and a
// transaction's recovery token.
func (e *Executor) absorbReply(st *opState, reply bson.Raw, err error) {
	e.advanceClusterTime(st.sess, reply)
	if st.sess != nil && !st.sess.Implicit {
		if t, i, ok := reply.Lookup("operationTime").TimestampOK(); ok {
			st.sess.AdvanceOperationTime(bson.Timestamp{T: t, I: i})
		}
	}
	if st.sess != nil && st.sess.Snapshot && err == nil {
		recordSnapshotTime(st.sess, reply)
	}
	if st.inTxn {
		if tok, ok := reply.Lookup("recoveryToken").DocumentOK(); ok {
			st.sess.Txn.RecoveryToken = append(bson.Raw(nil), tok...)
		}
	}
}

// commandBuffers hold encoded command bodies between assembly and Send.
var commandBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

func putCommandBuffer(b *[]byte) {
	if cap(*b) <= 64<<10 { // a huge command's buffer is left to the GC
		commandBuffers.Put(b)
	}
}

// poolClosed is the error of a check-out that found srv's pool closed:
// the client was disconnected, or srv left the topology after it was
// selected. The pool's own error never reaches the caller.
func (e *Executor) poolClosed(srv *topology.Server) error {
	if e.Topology.Closed() {
		return topology.ErrTopologyClosed
	}
	return fmt.Errorf("%w: %s", ErrServerRemoved, srv.Addr())
}

// establishmentFailure reports whether a check-out error is a failure to
// open or authenticate a new connection that SDAM must hear about — not
// the pool's own errors, and not the caller's context ending.
func establishmentFailure(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var cleared *mongoerr.PoolClearedError
	if errors.As(err, &cleared) || errors.Is(err, pool.ErrPoolClosed) {
		return false
	}
	var authErr *mongoerr.AuthError
	return mongoerr.IsNetworkError(err) || errors.As(err, &authErr)
}

// sessionTimeout is the logicalSessionTimeoutMinutes the session pool
// judges expiry by: the deployment's (the minimum over its servers), or
// this connection's while the topology has none.
func (e *Executor) sessionTimeout(cd conn.Description) *int64 {
	d := e.Topology.Description()
	if d.Kind == topology.LoadBalanced {
		return nil // ignored in load-balanced mode: sessions are never pruned
	}
	if t := d.LogicalSessionTimeoutMinutes; t != nil {
		return t
	}
	return cd.LogicalSessionTimeoutMinutes
}

// supportsRetryableWrites is the Retryable Writes spec's test, on the
// selected server's description and on the connection's own handshake: wire
// version 6+, sessions supported, not a standalone.
func supportsRetryableWrites(sd topology.ServerDescription, cd conn.Description) bool {
	return sd.SupportsRetryableWrites() && cd.MaxWireVersion >= 6 && cd.LogicalSessionTimeoutMinutes != nil
}

// assemble builds the command sent: the operation's fields, then lsid,
// txnNumber, $clusterTime and $readPreference. sk is the kind of the
// server it goes to.
func (e *Executor) assemble(op *Operation, st *opState, sk topology.ServerKind, cd conn.Description, ss *session.Server) bson.D {
	var cmd bson.D
	if n := len(op.Command) + 8; n <= len(st.cmdBuf) {
		cmd = st.cmdBuf[:0]
	} else {
		cmd = make(bson.D, 0, n)
	}
	if st.inTxn && ss != nil {
		cmd = e.appendTxnCommand(cmd, op, st, ss)
	} else {
		cmd = append(cmd, op.Command...)
		if ss != nil && st.sess.Causal && causalCommand(op) {
			cmd = withAfterClusterTime(cmd, st.sess)
		}
		if ss != nil && st.sess.Snapshot && snapshotCommand(op) {
			cmd = withSnapshotReadConcern(cmd, st.sess)
		}
		if ss != nil {
			cmd = append(cmd, bson.E{Key: "lsid", Value: ss.IDValue()})
			if st.txnNumber != nil {
				cmd = append(cmd, bson.E{Key: "txnNumber", Value: *st.txnNumber})
			}
		}
	}
	if ct := e.clusterTimeValue(st.sess); ct != nil {
		cmd = append(cmd, bson.E{Key: "$clusterTime", Value: ct})
	}
	if rp := readPrefFor(op, st.stageReadPref, e.Topology, sk, cd); rp != nil {
		cmd = append(cmd, bson.E{Key: "$readPreference", Value: rp})
	}
	return cmd
}

// readPrefFor applies the server-selection spec's rules for sending
// $readPreference over OP_MSG. Writes never carry one, except an aggregate
// with a write stage whose server was selected by its read preference
// (stageReadPref); nor do operations pinned to a server without an
// explicit read preference (getMore, killCursors).
func readPrefFor(op *Operation, stageReadPref bool, topo *topology.Topology, sk topology.ServerKind, cd conn.Description) bson.D {
	if (op.Flags.Has(Write) && !stageReadPref) || (op.Server != nil && op.ReadPref == nil) {
		return nil
	}
	rp := readpref.ReadPref{Mode: readpref.Primary}
	if op.ReadPref != nil {
		rp = *op.ReadPref
	}
	mongos := sk == topology.Mongos || sk == topology.LoadBalancer || cd.IsMongos()
	switch {
	case mongos:
		// Sent for every mode but primary.
		if rp.Mode == readpref.Primary {
			return nil
		}
		return readPrefDoc(rp)
	case sk == topology.Standalone:
		return nil
	case topo.Kind() == topology.Single: // read only here: writes never get this far
		// A direct connection to a replica-set member: make any member
		// accept the read.
		if rp.Mode == readpref.Primary {
			return bson.D{{Key: "mode", Value: "primaryPreferred"}}
		}
		return readPrefDoc(rp)
	case rp.Mode == readpref.Primary:
		return nil
	default:
		return readPrefDoc(rp)
	}
}

// minWireWriteStageOnSecondary is the wire version of MongoDB 5.0, the
// first whose secondaries run aggregates with $out or $merge.
const minWireWriteStageOnSecondary = 13

// writeStageSelector selects the server of an aggregate with $out or $merge
// (CRUD spec, "Aggregation Pipelines with Write Stages"): by the read
// preference unless an available server is older than 5.0, in which case
// only a writable server will do. It records its choice in st, so the
// command carries $readPreference exactly when the read preference chose
// the server.
type writeStageSelector struct {
	read topology.Selector
	st   *opState
}

func (s *writeStageSelector) String() string {
	return fmt.Sprintf("%v (aggregate with a write stage)", s.read)
}

func (s *writeStageSelector) Select(d topology.Description, candidates []topology.ServerDescription) ([]topology.ServerDescription, error) {
	for _, sd := range d.Servers {
		// A load balancer fronts MongoDB 5.0+ (wire 13) services only.
		if sd.Available() && sd.Kind != topology.LoadBalancer && sd.MaxWireVersion < minWireWriteStageOnSecondary {
			s.st.stageReadPref = false
			return topology.WriteSelector().Select(d, candidates)
		}
	}
	s.st.stageReadPref = true
	return s.read.Select(d, candidates)
}

// readPrefDoc encodes rp as a $readPreference document.
func readPrefDoc(rp readpref.ReadPref) bson.D {
	d := bson.D{{Key: "mode", Value: rp.Mode.String()}} // selection rejected unknown modes
	if rp.Mode == readpref.Primary {
		return d
	}
	if len(rp.TagSets) > 0 {
		tags := make(bson.A, 0, len(rp.TagSets))
		for _, ts := range rp.TagSets {
			doc := make(bson.D, 0, len(ts))
			for _, k := range slices.Sorted(maps.Keys(ts)) {
				doc = append(doc, bson.E{Key: k, Value: ts[k]})
			}
			tags = append(tags, doc)
		}
		d = append(d, bson.E{Key: "tags", Value: tags})
	}
	if rp.MaxStaleness > 0 {
		d = append(d, bson.E{Key: "maxStalenessSeconds", Value: int64(rp.MaxStaleness / time.Second)})
	}
	return d
}

// clusterTimeValue is the $clusterTime to send, the later of the client's
// and the session's, as a bson.E value: nil if there is none. The client's
// is carried by pointer, which boxes without an allocation.
func (e *Executor) clusterTimeValue(sess *session.Client) any {
	box := e.clusterTime.Load()
	var ct bson.Raw
	if box != nil {
		ct = box.raw
	}
	if sess != nil {
		if sct := session.MaxClusterTime(ct, sess.ClusterTime()); !sameBytes(sct, ct) {
			return sct
		}
	}
	if box == nil {
		return nil
	}
	return &box.raw
}

// sameBytes reports whether a and b are the same slice (not merely equal).
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// advanceClusterTime records the reply's $clusterTime in the client and the
// session.
func (e *Executor) advanceClusterTime(sess *session.Client, reply bson.Raw) {
	v, err := reply.LookupErr("$clusterTime")
	if err != nil {
		return
	}
	doc, ok := v.DocumentOK()
	if !ok {
		return
	}
	if cur := e.clusterTime.Load(); cur != nil && bytes.Equal(doc, cur.raw) {
		// Usually unchanged since the last reply: share the copy held.
		doc = cur.raw
	} else {
		// Copied so as not to pin the whole reply.
		box := newClusterTimeBox(doc)
		doc = box.raw
		e.raiseClusterTime(box)
	}
	if sess != nil {
		sess.AdvanceClusterTime(doc)
	}
}

// raiseClusterTime makes box the client's cluster time if it is later
// (session.MaxClusterTime's rule: one without a timestamp never wins).
func (e *Executor) raiseClusterTime(box *clusterTimeBox) {
	if !box.valid {
		return
	}
	for {
		cur := e.clusterTime.Load()
		if cur != nil && !box.ts.After(cur.ts) {
			return
		}
		if e.clusterTime.CompareAndSwap(cur, box) {
			return
		}
	}
}

// clusterTimeBox holds a copy of a $clusterTime, its timestamp, and the
// bson.Raw over it that commands carry by pointer: a new cluster time,
// which comes with every write's reply, then costs one allocation instead
// of a copy and a boxing, and is parsed once.
type clusterTimeBox struct {
	raw   bson.Raw
	ts    bson.Timestamp
	valid bool // ts was read: raw has a clusterTime timestamp
	buf   [clusterTimeSize]byte
}

// clusterTimeSize fits a signed $clusterTime (about 90 bytes).
const clusterTimeSize = 128

func newClusterTimeBox(doc bson.Raw) *clusterTimeBox {
	box := new(clusterTimeBox)
	if len(doc) <= len(box.buf) {
		box.raw = append(box.buf[:0:len(doc)], doc...)
	} else {
		box.raw = append(bson.Raw(nil), doc...)
	}
	box.ts, box.valid = session.ClusterTimestamp(box.raw)
	return box
}

// ClusterTime returns the highest $clusterTime the executor has seen.
func (e *Executor) ClusterTime() bson.Raw {
	if box := e.clusterTime.Load(); box != nil {
		return box.raw
	}
	return nil
}

// logFailure writes one debug record per failed attempt.
func (e *Executor) logFailure(ctx context.Context, st *opState, srv *topology.Server, err error) {
	if e.Logger == nil || !e.Logger.Enabled(ctx, slog.LevelDebug) {
		return
	}
	attrs := []slog.Attr{
		slog.String("command", st.name),
		slog.Int64("operationId", st.opID),
		slog.Int("attempt", st.attempts+1),
		slog.String("server", srv.Addr()),
		slog.Bool("networkError", mongoerr.IsNetworkError(err)),
		slog.String("error", err.Error()),
	}
	if st.txnNumber != nil {
		attrs = append(attrs, slog.Int64("txnNumber", *st.txnNumber))
	}
	e.Logger.LogAttrs(ctx, slog.LevelDebug, "command attempt failed", attrs...)
}

// withMaxTime applies the operation's timeoutMS to cmd (CSOT "Command
// Execution"): maxTimeMS is the time left less the server's minimum round
// trip, replacing any maxTimeMS the command had (a deprecated option is
// ignored under timeoutMS); a command whose maxTimeMS is kept (a tailable
// getMore's maxAwaitTimeMS) gets at most that much. When the time left
// cannot cover the round trip the command is not sent.
func withMaxTime(ctx context.Context, cmd bson.D, minRTT time.Duration, runCommand bool) (bson.D, error) {
	if !csot.Active(ctx) {
		return cmd, nil
	}
	cmd = dropWTimeout(cmd)
	dl, ok := csot.Deadline(ctx)
	if !ok {
		// timeoutMS=0: a deprecated maxTimeMS option is ignored; a
		// getMore's await time and runCommand's own field are kept.
		if csot.SendMaxTime(ctx) && !runCommand {
			if i := slices.IndexFunc(cmd, func(e bson.E) bool { return e.Key == "maxTimeMS" }); i >= 0 {
				cmd = slices.Delete(cmd, i, i+1)
			}
		}
		return cmd, nil
	}
	left := time.Until(dl) - minRTT
	ms := min(left.Milliseconds(), math.MaxInt32) // the server's upper bound
	if ms <= 0 {
		return cmd, &mongoerr.TimeoutError{Detail: fmt.Sprintf("%v left, less than the server's minimum round trip %v; command not sent", time.Until(dl).Round(time.Microsecond), minRTT)}
	}
	i := slices.IndexFunc(cmd, func(e bson.E) bool { return e.Key == "maxTimeMS" })
	if !csot.SendMaxTime(ctx) {
		if i >= 0 {
			if cur, ok := bsonnum.Of(cmd[i].Value); ok && cur > ms {
				cmd[i].Value = ms
			}
		}
		return cmd, nil
	}
	if i >= 0 {
		cmd[i].Value = ms
		return cmd, nil
	}
	return append(cmd, bson.E{Key: "maxTimeMS", Value: ms}), nil
}

// dropWTimeout removes the deprecated wtimeout from cmd's write concern:
// timeoutMS replaces it.
func dropWTimeout(cmd bson.D) bson.D {
	for i, e := range cmd {
		wc, ok := e.Value.(bson.D)
		if e.Key != "writeConcern" || !ok {
			continue
		}
		j := slices.IndexFunc(wc, func(e bson.E) bool { return e.Key == "wtimeout" })
		if j < 0 {
			return cmd
		}
		if len(wc) == 1 {
			return slices.Delete(cmd, i, i+1) // only the server's default is left
		}
		cmd[i].Value = slices.Delete(slices.Clone(wc), j, j+1)
		return cmd
	}
	return cmd
}

// timeoutError turns err into the timeout error of an operation under
// timeoutMS when it is one: the deadline passed, the server answered
// MaxTimeMSExpired, or a socket timed out.
func timeoutError(ctx context.Context, err error) error {
	var te *mongoerr.TimeoutError
	if errors.As(err, &te) {
		return err
	}
	var sel *mongoerr.ServerSelectionError
	if errors.As(err, &sel) && ctx.Err() == nil {
		return err // serverSelectionTimeoutMS, shorter than the time left, ran out
	}
	// The deadline may have passed before the context's timer fired and
	// set ctx.Err: the retry loop stops on the clock, not on ctx.Err.
	dl, ok := ctx.Deadline()
	expired := ok && !time.Now().Before(dl)
	if expired || errors.Is(ctx.Err(), context.DeadlineExceeded) || mongoerr.IsTimeout(err) || mongoerr.IsMaxTimeExpired(err) {
		return &mongoerr.TimeoutError{Err: err}
	}
	return err
}
