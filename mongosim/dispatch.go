package mongosim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/blackpipe"
	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/wire"
)

// Error codes and labels used by the dispatcher.
const (
	codeInternalError              = 1
	codeUnsupportedOpQueryCommand  = 352
	codeNoReplicationEnabled       = 76
	codeTxnNumberNotAllowed        = 50768
	codeOpMsgRequiresDB            = 40571
	codeProtocolError              = 17
	labelRetryableWrite            = "RetryableWriteError"
	labelSystemOverloaded          = "SystemOverloadedError"
	labelRetryable                 = "RetryableError"
	failCommandMessage             = "Failing command via 'failCommand' failpoint"
	failBeforeCommitMessage        = "Failing write via 'onPrimaryTransactionalWrite' failpoint"
	notPrimaryMessage              = "not primary"
	ingressRateLimitExceededErrmsg = "Rate limiter 'ingressRequestRateLimiter' rate exceeded"
)

// retryableWriteCodes are the codes a 4.4+ server labels RetryableWriteError
// on a command that carries a txnNumber.
var retryableWriteCodes = []int32{
	cmderr.InterruptedAtShutdown, cmderr.InterruptedDueToReplState, cmderr.NotWritablePrimary,
	cmderr.NotPrimaryNoSecondaryOk, cmderr.NotPrimaryOrSecondary, cmderr.PrimarySteppedDown,
	cmderr.ShutdownInProgress, cmderr.HostNotFound, cmderr.HostUnreachable, cmderr.NetworkTimeout,
	cmderr.SocketException, cmderr.ExceededTimeLimit,
}

// outcome is what the dispatcher learned about a request on its way through,
// used to decorate the reply.
type outcome struct {
	hasTxnNumber   bool
	explicitLabels []string // a fail point's errorLabels, replacing the server's own
	labelsSet      bool
	extraInfo      bson.D // a fail point's errorExtraInfo, merged into the error reply
	inTxn          bool   // the command carried autocommit (a transaction statement)
	name           string // the command's canonical name
}

// handle is the member's blackpipe Handler: every request ends here.
func (m *Member) handle(br *blackpipe.Request) bool {
	c := m.cluster
	c.stats.commands.Add(1)
	defer m.recoverRequest(br)
	if !m.awaitAdmission(br) {
		br.NoReply() // the connection closed while queued
		return true
	}
	r, cmd, cancel, ok := m.decode(br)
	if !ok {
		return true
	}
	c.adm.ops.begin(r)
	c.adm.opc.count(r)
	if mayRunScript(br) {
		// A script may run long: the connection's reader reads on, so a
		// client that closes the connection interrupts the script, as
		// mongod interrupts an operation whose client disconnected.
		br.WatchClose()
		go func() {
			defer m.recoverRequest(br)
			m.work(r, cmd, cancel)
		}()
		return true
	}
	m.work(r, cmd, cancel)
	return true
}

// work runs a decoded request, records its latency and releases it.
func (m *Member) work(r *request, cmd *command, cancel context.CancelFunc) {
	c := m.cluster
	defer cancel()
	defer c.adm.ops.end(r)
	m.run(r, cmd)
	c.adm.lat.record(r, time.Since(r.op.started)) // begun just before
}

// memberRequest is a member's request with the context opRegistry.begin
// gives it: one allocation for both. (The context is not a field of
// request, which is copied: a request for explain's inner command.)
type memberRequest struct {
	request
	opCtx opContext
}

// decode checks the message's framing, the command's name and maxTimeMS,
// and builds the request, whose context ends at maxTimeMS (cancel
// releases it); ok is false when it answered an error.
func (m *Member) decode(br *blackpipe.Request) (r *request, cmd *command, cancel context.CancelFunc, ok bool) {
	refuse := func(e *cmderr.Error) (*request, *command, context.CancelFunc, bool) {
		_ = br.Reply(m.withClusterTime(errorDoc(e, nil), bson.Timestamp{}))
		return nil, nil, nil, false
	}
	if br.OpCode != wire.OpMsg && !isHelloName(br.Name) {
		_ = br.Reply(errorDoc(errLegacyOpcode(br.Name), nil))
		return nil, nil, nil, false
	}
	if cmd = lookupCommand(br.Name); cmd == nil {
		return refuse(cmderr.New(cmderr.CommandNotFound, "no such command: '%s'", br.Name))
	}
	doc, err := br.Doc()
	if err != nil {
		return refuse(cmderr.New(cmderr.FailedToParse, "%v", err))
	}
	if br.OpCode == wire.OpMsg && br.DB == "" {
		return refuse(errNoDB())
	}
	c := m.cluster
	mr := &memberRequest{request: request{ctx: br.Context(), cluster: c, member: m, raw: br, db: br.DB, name: cmd.name, cmd: doc, now: c.now(), keys: newCmdKeys(doc)}}
	r = &mr.request
	r.opCtx = &mr.opCtx
	limit, badLimit := maxTimeArg(r)
	if badLimit != nil {
		return refuse(badLimit)
	}
	cancel = func() {}
	if limit > 0 {
		r.ctx, cancel = context.WithTimeout(r.ctx, limit)
	}
	return r, cmd, cancel, true
}

// errLegacyOpcode is mongod's answer to a command other than hello sent
// as OP_QUERY.
func errLegacyOpcode(name string) *cmderr.Error {
	return cmderr.New(codeUnsupportedOpQueryCommand,
		"Unsupported OP_QUERY command: %s. The client driver may require an upgrade. For more details see https://dochub.mongodb.org/core/legacy-opcode-removal", name)
}

// errNoDB is mongod's answer to an OP_MSG without $db.
func errNoDB() *cmderr.Error {
	return cmderr.New(codeOpMsgRequiresDB, "OP_MSG requests require a $db argument")
}

// recoverRequest answers a request whose handler panicked with an internal
// error (if it has no answer yet) and logs the panic.
func (m *Member) recoverRequest(br *blackpipe.Request) {
	if p := recover(); p != nil {
		m.cluster.logf("mongosim %s: %s panicked: %v\n%s", m.addr, br.Name, p, debug.Stack())
		if !br.Replied() {
			_ = br.Reply(m.withClusterTime(errorDoc(cmderr.New(codeInternalError, "mongosim internal error in %s: %v", br.Name, p), nil), bson.Timestamp{}))
		}
	}
}

// mayRunScript reports a request that may run server-side JavaScript
// (a cheap look at its bytes). Fire-and-forget requests are left out: the
// next one on the connection must run after them.
func mayRunScript(br *blackpipe.Request) bool {
	if br.Flags&wire.MoreToCome != 0 {
		return false
	}
	if strings.EqualFold(br.Name, "mapReduce") {
		return true
	}
	// One pass over the command, stopping at each '$', instead of one
	// search per operator.
	b := []byte(br.Command)
	for {
		i := bytes.IndexByte(b, '$')
		if i < 0 {
			return false
		}
		b = b[i:]
		if bytes.HasPrefix(b, []byte("$where")) || bytes.HasPrefix(b, []byte("$function")) || bytes.HasPrefix(b, []byte("$accumulator")) {
			return true
		}
		b = b[1:]
	}
}

// badRequest answers a message whose framing is intact but whose command
// nests deeper than the wire limit: an error reply, as mongod sends, and the
// connection stays open.
func (m *Member) badRequest(br *blackpipe.Request, err error) {
	m.cluster.warn("refused a request nested too deeply", "member", m.addr, "conn", br.Conn.ID(),
		"remote", br.Conn.RemoteAddr().String(), "error", err.Error())
	_ = br.Reply(m.withClusterTime(errorDoc(cmderr.New(cmderr.Overflow, "%s", blackpipe.MaxNestingErrmsg), nil), bson.Timestamp{}))
}

// maxTimeArg validates maxTimeMS as mongod does (a number in
// [0, 2147483647]; 0 means no limit). The limit becomes r.ctx's deadline,
// so anything that blocks on r.ctx answers MaxTimeMSExpired when it passes.
func maxTimeArg(r *request) (time.Duration, *cmderr.Error) {
	v, ok := r.get("maxTimeMS")
	if !ok {
		return 0, nil
	}
	f, ok := asFloat(v)
	if !ok {
		return 0, cmderr.New(cmderr.BadValue, "maxTimeMS must be a number")
	}
	if f != math.Trunc(f) || f < 0 || f > math.MaxInt32 {
		return 0, cmderr.New(cmderr.BadValue, "%v value for maxTimeMS is out of range [0, 2147483647]", v)
	}
	return time.Duration(f) * time.Millisecond, nil
}

// errMaxTime is mongod's answer when a command outlives its maxTimeMS.
func errMaxTime() error {
	return cmderr.New(cmderr.MaxTimeMSExpired, "operation exceeded time limit")
}

// expired reports whether the command's maxTimeMS deadline has passed.
func (r *request) expired() bool {
	return errors.Is(r.ctx.Err(), context.DeadlineExceeded)
}

// memberRun is what run learns about a request on its way to the handler
// and needs again after it, to label, decorate and answer the reply.
type memberRun struct {
	cmd       *command
	out       outcome
	txnNumber int64
	hasTxn    bool         // the request carried a txnNumber
	txnStmt   bool         // a transaction statement (autocommit, startTransaction, commit/abort)
	wc        writeConcern // the request's own writeConcern
	wce       bson.D       // a failCommand fail point's writeConcernError
}

// run takes a decoded request through the checks in order: authentication,
// the ingress limiter, the concerns, failCommand, writability, the
// transaction or retryable-write table, the handler and
// onPrimaryTransactionalWrite; then it replies. A step that answered the
// request itself (or hung up) returns errReplied.
func (m *Member) run(r *request, cmd *command) {
	st := &memberRun{cmd: cmd}
	err := m.admit(r, st)
	if err == nil {
		err = m.parseArgs(r, st)
	}
	if err == nil {
		err = m.gate(r, st)
	}
	if err != nil {
		m.fail(r, st, err)
		return
	}
	held, err := m.bindTxn(r, st)
	if err != nil {
		m.fail(r, st, err)
		return
	}
	if held != nil {
		// The transaction or retryable write stays checked out until
		// the reply is sent, so a retry waits for this attempt's outcome.
		defer held.release()
	}
	reply, err := m.execute(r, st)
	if err != nil {
		m.fail(r, st, err)
		return
	}
	if err := r.send(m.decorate(r, st, reply)); err != nil {
		m.cluster.logf("mongosim %s: reply to %s: %v", m.addr, cmd.name, err)
	}
}

// fail answers err, unless a step answered the request itself.
func (m *Member) fail(r *request, st *memberRun, err error) {
	if !errors.Is(err, errReplied) {
		m.replyErr(r, &st.out, err)
	}
}

// authRequired refuses a command that needs authentication (cmd nil: an
// unknown one, which does) on a connection that has not authenticated.
func authRequired(a *authenticator, cmd *command, name string, conn *blackpipe.Conn) error {
	if a != nil && (cmd == nil || !cmd.noAuth) && !a.authenticated(conn) {
		return cmderr.New(cmderr.Unauthorized, "Command %s requires authentication", name)
	}
	return nil
}

// errRateLimited is the ingress rate limiter's refusal, labelled so that
// drivers back off and retry.
func errRateLimited() error {
	e := cmderr.New(cmderr.IngressRequestRateLimitExceeded, ingressRateLimitExceededErrmsg)
	e.Labels = []string{labelSystemOverloaded, labelRetryable}
	return e
}

// admit applies authentication and the ingress rate limiter. The limiter
// counts only authenticated requests (and exempts some commands), as
// mongod's does.
func (m *Member) admit(r *request, st *memberRun) error {
	c := m.cluster
	if err := authRequired(c.auth, st.cmd, st.cmd.name, r.raw.Conn); err != nil {
		return err
	}
	if st.cmd.exempt || (c.auth != nil && !c.auth.authenticated(r.raw.Conn)) {
		return nil
	}
	admitted, on := c.limiter.admit()
	if on && !admitted {
		c.stats.rejected.Add(1)
		return errRateLimited()
	}
	if on {
		c.stats.admitted.Add(1)
	}
	return nil
}

// noteTxn reads r's txnNumber and autocommit into out, which labels the
// reply.
func (out *outcome) noteTxn(r *request, name string) (txnNumber int64, hasTxn bool, err error) {
	txnNumber, hasTxn, err = txnNumberOf(r)
	if err != nil {
		return 0, false, err
	}
	_, hasAuto := r.get("autocommit")
	out.hasTxnNumber, out.name, out.inTxn = hasTxn, name, hasAuto && hasTxn
	return txnNumber, hasTxn, nil
}

// parseArgs reads the generic arguments: $clusterTime, the session, the
// transaction fields and the read and write concerns.
func (m *Member) parseArgs(r *request, st *memberRun) error {
	if err := r.gossipIn(); err != nil {
		return err
	}
	m.localSessions.touch(r)
	var err error
	if st.txnNumber, st.hasTxn, err = st.out.noteTxn(r, st.cmd.name); err != nil {
		return err
	}
	_, hasAuto := r.get("autocommit")
	_, hasStart := r.get("startTransaction")
	st.txnStmt = hasAuto || hasStart || isTxnControl(st.cmd.name)
	if st.txnStmt {
		if err := m.checkTxnArgs(r, st.cmd, st.hasTxn); err != nil {
			return err
		}
	} else {
		// A transaction's statements read its snapshot; their readConcern
		// is the transaction's, checked by checkTxnArgs.
		rc, err := parseReadConcern(r, st.cmd)
		if err != nil {
			return err
		}
		r.rc = rc
	}
	if takesWriteConcern(st.cmd, r) {
		st.wc, err = parseWriteConcern(r)
		return err
	}
	if _, ok := r.get("writeConcern"); ok {
		return cmderr.New(cmderr.InvalidOptions, "Command does not support writeConcern")
	}
	return nil
}

// gate applies the fail points that act before a command runs
// (failCommand, maxTimeAlwaysTimeOut), then refuses writes on a
// secondary and holds them while an fsync lock is on.
func (m *Member) gate(r *request, st *memberRun) error {
	var answered bool
	if st.wce, answered = m.applyFailCommand(r, &st.out); answered {
		return errReplied
	}
	if m.maxTimeAlwaysTimesOut(r) {
		m.cluster.stats.failPointsFired.Add(1)
		return errMaxTime()
	}
	if (st.cmd.write || st.txnStmt) && !m.IsPrimary() {
		return cmderr.New(cmderr.NotWritablePrimary, notPrimaryMessage)
	}
	if st.cmd.write {
		// An fsync lock holds writes back until fsyncUnlock.
		return m.fsync.wait(r.ctx)
	}
	return nil
}

// bindTxn checks out the request's transaction (a transaction statement)
// or its retryable write's entry in the transaction table (a txnNumber
// without autocommit); held.release gives it back (held nil: nothing
// checked out).
func (m *Member) bindTxn(r *request, st *memberRun) (held *txnContext, err error) {
	c := m.cluster
	switch {
	case st.txnStmt:
		tc, t, err := m.enterTransaction(r, st.cmd, st.txnNumber)
		if err != nil {
			return nil, err
		}
		r.tx = t
		t.statements++
		return tc, nil
	case st.hasTxn:
		if c.setName == "" {
			return nil, cmderr.New(cmderr.IllegalOperation, "Transaction numbers are only allowed on a replica set member or mongos")
		}
		if !st.cmd.retryableWrite {
			return nil, cmderr.New(codeTxnNumberNotAllowed,
				"txnNumber may only be provided for multi-document transactions and retryable write commands. autocommit:false was not provided, and %s is not a retryable write command.", st.cmd.name)
		}
		lsid, err := lsidOf(r)
		if err != nil {
			return nil, err
		}
		txn, err := c.txns.begin(r.ctx, lsid, st.txnNumber)
		if err != nil {
			return nil, err
		}
		r.txnEntry = txn
		r.txn = &r.txnEntry
		return r.txn, nil
	}
	return nil, nil
}

// execute runs the handler between the two halves of the
// onPrimaryTransactionalWrite fail point and turns a deadline or a kill
// that passed meanwhile into mongod's error.
func (m *Member) execute(r *request, st *memberRun) (bson.D, error) {
	if err := m.failTransactionalWrite(r, true); err != nil {
		return nil, err
	}
	reply, err := m.callHandler(r, st.cmd)
	if errors.Is(err, errReplied) {
		return nil, err
	}
	if r.expired() && st.cmd.name != "getMore" {
		// The work outlived maxTimeMS (getMore's maxTimeMS is its await
		// time, not a limit): mongod would have interrupted it.
		if !hasCode(err, cmderr.MaxTimeMSExpired) {
			err = errMaxTime()
		}
	} else if r.killed() && !hasCode(err, cmderr.Interrupted) {
		err = errInterrupted()
	}
	if err != nil {
		return nil, err
	}
	return reply, m.failTransactionalWrite(r, false)
}

// failTransactionalWrite applies onPrimaryTransactionalWrite to a
// retryable write: before it runs (the write is not committed) or after
// it executed statements (it is committed, and the client must retry to
// learn the result). closeConnection (the default) hangs up; otherwise
// only the fail point before the write answers, with its error. As in
// mongod, the two options combine.
func (m *Member) failTransactionalWrite(r *request, beforeCommit bool) error {
	if r.txn == nil || !beforeCommit && r.txn.executed == 0 || !m.IsPrimary() {
		return nil
	}
	opw := m.evalTransactionalWrite(beforeCommit)
	if opw == nil {
		return nil
	}
	c := m.cluster
	c.stats.failPointsFired.Add(1)
	if opw.closeConnection {
		c.stats.hangups.Add(1)
		_ = r.hangup()
		return errReplied
	}
	if beforeCommit {
		return cmderr.New(opw.failBeforeCommitCode, failBeforeCommitMessage)
	}
	return nil
}

// callHandler runs the command's handler, profiles it, closes a
// transaction statement and ticks the cluster time for DDL.
func (m *Member) callHandler(r *request, cmd *command) (bson.D, error) {
	c := m.cluster
	clock := c.data.clusterClock
	before := clock.current()
	started := time.Now()
	reply, err := cmd.run(r)
	m.profileOp(r, reply, err, time.Since(started))
	if r.tx != nil && !isTxnControl(cmd.name) {
		reply, err = finishStatement(r.tx, reply, err)
	}
	if r.tx != nil {
		r.tx.forgetIfDone()
	}
	if err == nil && (cmd.write && !cmd.retryableWrite || cmd.name == "aggregate" && hasOutStage(r) || cmd.name == "mapReduce" && mapReduceWrites(r)) {
		// DDL (create, drop, createIndexes, ...) writes an oplog entry
		// on mongod, which advances the cluster time. The change log does
		// not record it, so snapshot reads before it cannot be rebuilt.
		if clock.current() == before {
			clock.tick()
		}
		c.data.markDDL(ddlDatabases(r), clock.current())
	}
	if r.txn != nil {
		c.stats.replayed.Add(int64(r.txn.replayed))
	}
	return reply, err
}

// decorate adds to a successful reply what mongod adds: the
// writeConcernError, the operation and cluster times, the error labels
// and, with a not-primary writeConcernError, the topologyVersion.
func (m *Member) decorate(r *request, st *memberRun, reply bson.D) bson.D {
	c := m.cluster
	// Room for the fields added below and for "ok": the reply grows
	// once, not at each field.
	reply = slices.Grow(reply, 6)
	wce := st.wce
	if wce == nil {
		wce = st.wc.satisfy(c)
	}
	if wce != nil {
		// mongod appends a fail point's document as it is (no codeName
		// is filled in): drivers and the spec tests see exactly that.
		reply = setField(reply, "writeConcernError", wce)
	}
	var opTime bson.Timestamp
	switch {
	case r.rc.level == "snapshot":
		opTime = r.rc.atClusterTime
		reply = withAtClusterTime(reply, opTime)
	case st.cmd.write:
		opTime = c.data.clusterClock.current()
		switch st.cmd.name {
		case "insert", "update", "delete":
			reply = m.withWriteOpTime(reply, opTime)
		}
	}
	reply = m.withClusterTime(reply, opTime)
	if labels := m.replyLabels(&st.out, reply); len(labels) > 0 {
		reply = setField(reply, "errorLabels", labels)
	}
	if code, ok := wceCode(reply); ok && m.isNotPrimaryErrorOnSet(code) {
		reply = setField(reply, "topologyVersion", m.topologyVersionDoc())
	}
	if r.stream == nil && !hasField(reply, "ok") {
		// What blackpipe would append, on a copy of the reply; a
		// streamed reply's "ok" says whether more follow (send).
		reply = append(reply, bson.E{Key: "ok", Value: 1.0})
	}
	return reply
}

// applyFailCommand applies an activated failCommand fail point to r, in
// mongod's order: closeConnection, then blockConnection, then errorCode
// (with errorExtraInfo). It returns the writeConcernError to add to a
// successful reply, and answered when r needs nothing more (answered with
// an error, or its connection closed).
func (m *Member) applyFailCommand(r *request, out *outcome) (wce bson.D, answered bool) {
	c := m.cluster
	act := m.evalFailCommand(r)
	if act == nil {
		return nil, false
	}
	c.stats.failPointsFired.Add(1)
	if act.errorLabels != nil {
		out.labelsSet, out.explicitLabels = true, act.errorLabels
	}
	if act.closeConnection {
		c.stats.hangups.Add(1)
		_ = r.hangup()
		return nil, true
	}
	if act.blockConnection {
		// As mongod's, the block is interruptible by maxTimeMS, except
		// getMore's: its maxTimeMS is an await time, not a limit.
		bctx := r.ctx
		if r.name == "getMore" {
			bctx = r.raw.Context()
		}
		if !sleepCtx(bctx, act.blockTime) {
			if r.expired() && r.raw.Context().Err() == nil {
				m.replyErr(r, out, errMaxTime())
			} else if r.killed() {
				m.replyErr(r, out, errInterrupted())
			}
			return nil, true // else the connection or server closed while blocked
		}
	}
	if act.errorCode != 0 {
		e := cmderr.New(act.errorCode, failCommandMessage)
		out.extraInfo = act.errorExtraInfo
		m.replyErr(r, out, e)
		return nil, true
	}
	return act.writeConcernError, false
}

// errReplied is returned by handlers that answered the request themselves.
var errReplied = errors.New("mongosim: request already answered")

// replyLabels decides the errorLabels of a successful reply: a fail point's
// explicit labels, else RetryableWriteError when a retryable write got a
// retryable writeConcernError.
func (m *Member) replyLabels(out *outcome, reply bson.D) []string {
	if out.labelsSet {
		return out.explicitLabels
	}
	if !out.hasTxnNumber {
		return nil
	}
	if out.inTxn && out.name != "commitTransaction" {
		return nil // statements and abort: no write concern of their own
	}
	for _, e := range reply {
		if e.Key != "writeConcernError" {
			continue
		}
		if d, ok := e.Value.(bson.D); ok {
			for _, f := range d {
				if f.Key == "code" {
					if code, ok := asInt64(f.Value); ok && slices.Contains(retryableWriteCodes, int32(code)) {
						if out.inTxn {
							return []string{labelRetryableWrite, labelUnknownCommit}
						}
						return []string{labelRetryableWrite}
					}
				}
			}
		}
	}
	return nil
}

// replyErr answers with a command error, labelled as a 4.4+ server would.
func (m *Member) replyErr(r *request, out *outcome, err error) {
	e, extra := labelledError(out, err, m.cluster.limiter.baseBackoffMS())
	if r.raw.Flags&wire.MoreToCome != 0 && (e.Code == cmderr.NotWritablePrimary || e.Code == cmderr.NotPrimaryNoSecondaryOk || e.Code == cmderr.NotPrimaryOrSecondary) {
		// A fire-and-forget (moreToCome) write gets no reply, so mongod
		// closes the connection to send the client back to server
		// selection.
		m.cluster.warn("closing the connection: not-primary error during fire-and-forget command processing",
			"member", m.addr, "conn", r.raw.Conn.ID(), "command", r.name)
		_ = r.raw.Hangup()
		return
	}
	switch e.Code {
	case cmderr.AuthenticationFailed, cmderr.Unauthorized:
		m.cluster.warn("refused "+r.name, "member", m.addr, "conn", r.raw.Conn.ID(),
			"remote", r.raw.Conn.RemoteAddr().String(), "code", e.Code, "error", e.Message)
	}
	if m.isNotPrimaryErrorOnSet(e.Code) {
		extra = append(extra, bson.E{Key: "topologyVersion", Value: m.topologyVersionDoc()})
	}
	if err := r.send(m.withClusterTime(errorDoc(&e, extra), bson.Timestamp{})); err != nil {
		m.cluster.logf("mongosim %s: reply to %s: %v", m.addr, r.name, err)
	}
}

// labelledError is err as the command error a server answers, labelled
// as mongod and mongos label it: a fail point's labels, else a
// transaction's, else RetryableWriteError on a retryable write's
// retryable error. extra holds baseBackoffMS (when backoffMS > 0) on an
// overload error and the fail point's errorExtraInfo.
func labelledError(out *outcome, err error, backoffMS int32) (cmderr.Error, bson.D) {
	var ce *cmderr.Error
	if !errors.As(err, &ce) {
		ce = cmderr.New(codeInternalError, "%v", err)
	}
	e := *ce
	switch {
	case out.labelsSet:
		e.Labels = out.explicitLabels
	case out.inTxn:
		e.Labels = txnErrorLabels(out.name, e.Code)
	case out.hasTxnNumber && slices.Contains(retryableWriteCodes, e.Code) && !slices.Contains(e.Labels, labelRetryableWrite):
		e.Labels = append(slices.Clone(e.Labels), labelRetryableWrite)
	}
	var extra bson.D
	if slices.Contains(e.Labels, labelSystemOverloaded) && backoffMS > 0 {
		extra = append(extra, bson.E{Key: "baseBackoffMS", Value: backoffMS})
	}
	for _, x := range out.extraInfo {
		if _, dup := lookupD(extra, x.Key); !dup && !slices.Contains(errorDocKeys, x.Key) {
			extra = append(extra, x)
		}
	}
	return e, extra
}

// errorDocKeys are the fields errorDoc writes; errorExtraInfo cannot
// replace them.
var errorDocKeys = []string{"ok", "errmsg", "code", "codeName", "errorLabels", "topologyVersion"}

// notPrimaryErrorCodes are mongod's NotPrimaryError category: a replica
// set member adds its topologyVersion to a reply carrying one of them, as
// the command error or in writeConcernError, so drivers can tell a stale
// error from a new one. (ShutdownError codes get it only while mongod
// quiesces before shutdown, which mongosim does not do.)
var notPrimaryErrorCodes = []int32{
	cmderr.NotWritablePrimary, cmderr.NotPrimaryNoSecondaryOk, cmderr.NotPrimaryOrSecondary,
	cmderr.PrimarySteppedDown, cmderr.InterruptedDueToReplState,
}

func (m *Member) isNotPrimaryErrorOnSet(code int32) bool {
	return m.cluster.setName != "" && slices.Contains(notPrimaryErrorCodes, code)
}

func (m *Member) topologyVersionDoc() bson.D {
	counter, _ := m.topologyVersion()
	return bson.D{{Key: "processId", Value: m.processID}, {Key: "counter", Value: counter}}
}

// wceCode returns the code of a reply's writeConcernError.
func wceCode(reply bson.D) (int32, bool) {
	v, ok := lookupD(reply, "writeConcernError")
	if !ok {
		return 0, false
	}
	d, ok := v.(bson.D)
	if !ok {
		return 0, false
	}
	cv, _ := lookupD(d, "code")
	n, ok := asInt64(cv)
	return int32(n), ok
}

// extraCodeNames are codeNames of codes only the dispatcher uses.
var extraCodeNames = map[int32]string{
	codeInternalError:               "InternalError",
	codeProtocolError:               "ProtocolError",
	codeNoReplicationEnabled:        "NoReplicationEnabled",
	codeUnsupportedOpQueryCommand:   "UnsupportedOpQueryCommand",
	codeClusterTimeFailsRateLimiter: "ClusterTimeFailsRateLimiter",
}

// errorDoc renders {ok: 0, errmsg, code, codeName, errorLabels, extra...}.
func errorDoc(e *cmderr.Error, extra bson.D) bson.D {
	name := e.Name
	if name == "" || strings.HasPrefix(name, "Location") {
		name = cmderr.Name(e.Code)
		if n, ok := extraCodeNames[e.Code]; ok {
			name = n
		}
	}
	d := bson.D{
		{Key: "ok", Value: 0.0},
		{Key: "errmsg", Value: e.Message},
		{Key: "code", Value: e.Code},
		{Key: "codeName", Value: name},
	}
	if len(e.Labels) > 0 {
		d = append(d, bson.E{Key: "errorLabels", Value: e.Labels})
	}
	return append(d, extra...)
}

// setField returns d with key set to v (replaced in place or appended
// before a trailing "ok").
func setField(d bson.D, key string, v any) bson.D {
	for i := range d {
		if d[i].Key == key {
			d[i].Value = v
			return d
		}
	}
	if n := len(d); n > 0 && d[n-1].Key == "ok" {
		return slices.Insert(d, n-1, bson.E{Key: key, Value: v})
	}
	return append(d, bson.E{Key: key, Value: v})
}

func isHelloName(name string) bool {
	return name == "hello" || strings.EqualFold(name, "isMaster")
}

// asInt64 converts a BSON number to int64 (doubles truncated).
func asInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case float64:
		return int64(n), true
	case int:
		return int64(n), true
	}
	return 0, false
}

// asFloat converts a BSON number to float64.
func asFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case float64:
		return n, true
	case int:
		return float64(n), true
	}
	return 0, false
}

// asBool interprets a BSON value as MongoDB does for flags: booleans, and
// numbers (non-zero is true).
func asBool(v any) bool {
	if b, ok := v.(bool); ok {
		return b
	}
	if f, ok := asFloat(v); ok {
		return f != 0
	}
	return false
}

// lookupD returns the value of key in d.
func lookupD(d bson.D, key string) (any, bool) {
	for _, e := range d {
		if e.Key == key {
			return e.Value, true
		}
	}
	return nil, false
}

func typeErr(field, want string, v any) error {
	return cmderr.New(cmderr.TypeMismatch, "BSON field '%s' is the wrong type '%s', expected type '%s'", field, bsonTypeName(v), want)
}

func bsonTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "bool"
	case int32:
		return "int"
	case int64:
		return "long"
	case float64:
		return "double"
	case string:
		return "string"
	case bson.D, bson.M:
		return "object"
	case bson.A:
		return "array"
	case bson.Binary:
		return "binData"
	case bson.ObjectID:
		return "objectId"
	case bson.DateTime:
		return "date"
	}
	return fmt.Sprintf("%T", v)
}

// hasCode reports whether err is a command error with code, which the
// handler already shaped (e.g. with mongod's executor prefix).
func hasCode(err error, code int32) bool {
	var ce *cmderr.Error
	return errors.As(err, &ce) && ce.Code == code
}
