package mongosim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/blackpipe"
	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/wire"
)

// Router is a mongos: it answers hello as mongos does and forwards every
// other command to the shard's current primary over a pooled TCP
// connection. It has its own fail points (configureFailPoint sent to it),
// its own ingress limiter and its own topologyVersion; it can be stopped and
// started again on the same address.
type Router struct {
	cluster   *Cluster
	index     int
	addr      string
	processID bson.ObjectID // guarded by mu (Start renews it)
	fails     *failPoints
	limiter   *limiter
	commands  atomic.Int64
	rejected  atomic.Int64
	conns     atomic.Int64 // open client connections, for MaxConnections
	txns      routerTxns   // transactions this router routed (shard_txn_router.go)
	streams   sync.Map     // change stream cursor ids (int64) it relayed (shard_router_cursor.go)

	mu      sync.Mutex
	srv     *blackpipe.Server // nil while stopped
	idle    map[string][]net.Conn
	stopped bool
	// dialed holds the local addresses of the router's open connections
	// to the shard: members trust them as mongod trusts mongos' internal
	// authentication.
	dialed map[string]bool
}

// Router errors and limits.
const (
	// routerShardAttempts is how many times a router sends a read or a
	// retryable write to the shard when the shard's primary is unreachable
	// or steps down, as mongos retries such commands internally.
	routerShardAttempts = 3
	// routerPrimaryWait bounds how long a retry waits for the shard to
	// elect a primary.
	routerPrimaryWait = 5 * time.Second
	// routerShardTimeout bounds one round trip to the shard when the
	// client's connection gives no other limit, so a wedged shard
	// connection cannot hold a router goroutine forever.
	routerShardTimeout = 10 * time.Minute
)

// validateRouterOptions checks Shards and Routers before anything starts.
func validateRouterOptions(o Options) error {
	if o.Shards < 0 || o.Routers < 0 {
		return fmt.Errorf("mongosim: Shards and Routers must not be negative, got Shards=%d Routers=%d", o.Shards, o.Routers)
	}
	if o.Routers == 0 {
		if o.Shards >= 1 {
			return fmt.Errorf("mongosim: Shards=%d needs Routers >= 1 (shards are reached through mongos routers)", o.Shards)
		}
		return nil
	}
	switch {
	case o.Standalone:
		return errors.New("mongosim: Routers need a replica-set shard, not Standalone")
	case o.TLS != nil:
		return errors.New("mongosim: Routers with TLS are not implemented")
	}
	return nil
}

// startRouters starts o.Routers routers in front of the (already running)
// members. Routers listen on Port+Members+i when Port is set.
func (c *Cluster) startRouters() error {
	if c.auth != nil && c.opts.Routers > 0 {
		c.auth.trusted = c.isRouterConn
	}
	for i := 0; i < c.opts.Routers; i++ {
		r := &Router{
			cluster:   c,
			index:     i,
			processID: bson.NewObjectID(),
			fails:     newFailPoints(),
			limiter:   newLimiter(c.now, c.opts.Limiter),
			idle:      map[string][]net.Conn{},
			dialed:    map[string]bool{},
		}
		addr := net.JoinHostPort(c.opts.Host, "0")
		if c.opts.Port != 0 {
			addr = net.JoinHostPort(c.opts.Host, strconv.Itoa(c.opts.Port+c.opts.Members+i))
		}
		if err := r.listen(addr); err != nil {
			for _, started := range c.routers {
				_ = started.Stop()
			}
			c.routers = nil
			return fmt.Errorf("mongosim: router %d: %w", i, err)
		}
		r.addr = r.srv.Addr()
		c.routers = append(c.routers, r)
	}
	return nil
}

func (r *Router) listen(addr string) error {
	c := r.cluster
	bo := blackpipe.Options{
		Addr:                  addr,
		Compressors:           c.opts.Compressors,
		NoDefaults:            true,
		Handler:               r.handle,
		AcceptConn:            r.acceptConn,
		OnConnClose:           func(*blackpipe.Conn) { r.conns.Add(-1) },
		PartialMessageTimeout: c.opts.PartialMessageTimeout,
		IdleTimeout:           c.opts.IdleTimeout,
	}
	if lg := c.opts.Logger; lg != nil {
		bo.Logf = func(format string, args ...any) { lg.Debug(fmt.Sprintf(format, args...)) }
	}
	r.conns.Store(0) // a stopped router's connections are all closed
	srv, err := blackpipe.Listen(bo)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.srv, r.stopped = srv, false
	r.mu.Unlock()
	return nil
}

// acceptConn applies the router's MaxConnections.
func (r *Router) acceptConn(*blackpipe.Conn) bool {
	n := r.conns.Add(1)
	if limit := r.limiter.maxConnections(); limit > 0 && n > int64(limit) {
		r.conns.Add(-1)
		return false
	}
	return true
}

// Routers returns the deployment's mongos routers (none unless
// Options.Routers was set).
func (c *Cluster) Routers() []*Router { return slices.Clone(c.routers) }

// routersURI lists the routers, as a connection string to mongos has no
// replicaSet option.
func (c *Cluster) routersURI() string {
	hosts := make([]string, len(c.routers))
	for i, r := range c.routers {
		hosts[i] = r.addr
	}
	return "mongodb://" + strings.Join(hosts, ",") + "/"
}

// closeRouters stops every router; Close calls it before closing members.
func (c *Cluster) closeRouters() []error {
	var errs []error
	for _, r := range c.routers {
		if err := r.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("router %s: %w", r.addr, err))
		}
	}
	return errs
}

// Addr returns the router's "host:port"; it stays the same across Stop and
// Start.
func (r *Router) Addr() string { return r.addr }

// URI returns a connection string to this router alone.
func (r *Router) URI() string { return "mongodb://" + r.addr + "/" }

// Stop closes the router's listener and client connections, and its pooled
// connections to the shard, as if the mongos process went away. It is a no-op
// on a stopped router.
func (r *Router) Stop() error {
	r.mu.Lock()
	srv := r.srv
	r.srv, r.stopped = nil, true
	idle := r.idle
	r.idle = map[string][]net.Conn{}
	r.mu.Unlock()
	for _, conns := range idle {
		for _, nc := range conns {
			_ = nc.Close()
		}
	}
	if srv == nil {
		return nil
	}
	return srv.Close()
}

// Start restarts a stopped router on its address with a new processId, as a
// restarted mongos has. It is a no-op on a running router.
func (r *Router) Start() error {
	r.mu.Lock()
	running := r.srv != nil
	r.mu.Unlock()
	if running {
		return nil
	}
	if r.cluster.isClosed() {
		return ErrClosed
	}
	r.mu.Lock()
	r.processID = bson.NewObjectID()
	r.mu.Unlock()
	r.txns.reset() // a restarted mongos knows no transactions
	return r.listen(r.addr)
}

// SetLimiter sets this router's ingress limiters (the request bucket and
// MaxConnections are what a router applies), so one router can be
// overloaded while another is healthy.
func (r *Router) SetLimiter(l LimiterOptions) { r.limiter.set(l) }

// SetFailPoint configures a fail point on this router only, as the
// configureFailPoint command sent to it does.
func (r *Router) SetFailPoint(cmd bson.D) error {
	_, err := r.fails.configure(cmd)
	return err
}

// RouterStats are a router's own counters.
type RouterStats struct {
	Commands int64 // requests the router received
	Rejected int64 // requests its ingress limiter rejected with code 462
}

// Stats returns the router's counters.
func (r *Router) Stats() RouterStats {
	return RouterStats{Commands: r.commands.Load(), Rejected: r.rejected.Load()}
}

func (c *Cluster) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// handle is the router's blackpipe Handler: decode, admit, answer what
// mongos answers itself, and forward the rest.
func (r *Router) handle(br *blackpipe.Request) bool {
	r.commands.Add(1)
	rq, cmd, ok := r.decode(br)
	if !ok {
		return true
	}
	var out outcome
	action, wce, answered := r.admit(rq, cmd, &out)
	if answered || r.answerLocally(rq, cmd, &out) {
		return true
	}
	r.dispatch(rq, cmd, &out, wce, action)
	return true
}

// decode checks the message's framing and builds the request; cmd is nil
// for a command mongosim's members do not know (mongos may).
func (r *Router) decode(br *blackpipe.Request) (rq *request, cmd *command, ok bool) {
	if br.OpCode != wire.OpMsg && !isHelloName(br.Name) {
		_ = br.Reply(errorDoc(errLegacyOpcode(br.Name), nil))
		return nil, nil, false
	}
	doc, err := br.Doc()
	if err != nil {
		_ = br.Reply(errorDoc(cmderr.New(cmderr.FailedToParse, "%v", err), nil))
		return nil, nil, false
	}
	if br.OpCode == wire.OpMsg && br.DB == "" {
		_ = br.Reply(errorDoc(errNoDB(), nil))
		return nil, nil, false
	}
	cmd = lookupCommand(br.Name)
	name := br.Name
	if cmd != nil {
		name = cmd.name
	}
	c := r.cluster
	return &request{ctx: br.Context(), cluster: c, raw: br, db: br.DB, name: name, cmd: doc, now: c.now()}, cmd, true
}

// admit applies authentication, the router's ingress limiter, the
// transaction checks and the router's own failCommand and
// maxTimeAlwaysTimeOut fail points; answered when it sent the answer.
func (r *Router) admit(rq *request, cmd *command, out *outcome) (action txnAction, wce bson.D, answered bool) {
	if err := authRequired(r.cluster.auth, cmd, rq.name, rq.raw.Conn); err != nil {
		r.replyErr(rq, out, err)
		return txnAnswered, nil, true
	}
	if cmd == nil || !cmd.exempt {
		if admitted, on := r.limiter.admit(); on && !admitted {
			r.rejected.Add(1)
			r.replyErr(rq, out, errRateLimited())
			return txnAnswered, nil, true
		}
	}
	if _, _, err := out.noteTxn(rq, rq.name); err != nil {
		r.replyErr(rq, out, err)
		return txnAnswered, nil, true
	}
	action = txnForward
	if out.inTxn {
		if action = r.checkTxn(rq, out); action == txnAnswered {
			return action, nil, true
		}
	}
	if wce, answered = r.applyFailCommand(rq, out); answered {
		return action, nil, true
	}
	if maxTimeAlwaysTimesOut(r.fails, r.cluster, rq) {
		r.replyErr(rq, out, errMaxTime())
		return action, nil, true
	}
	return action, wce, false
}

// answerLocally answers the commands mongos runs itself (hello,
// authentication, checkMetadataConsistency, its own fail points) and a
// getMore its fail point fails; false for the rest.
func (r *Router) answerLocally(rq *request, cmd *command, out *outcome) bool {
	name := rq.raw.Name
	switch {
	case isHelloName(name):
		r.hello(rq)
	case cmd != nil && (cmd.name == "saslStart" || cmd.name == "saslContinue" || cmd.name == "connectionStatus"):
		// Clients authenticate to mongos itself.
		reply, err := cmd.run(rq)
		if err != nil {
			r.replyErr(rq, out, err)
			return true
		}
		_ = rq.send(reply)
	case name == "checkMetadataConsistency":
		// A mongos-only command. With one shard and no sharded
		// collections there is no sharding metadata to be inconsistent:
		// the cursor is empty.
		ns := rq.db + ".$cmd.checkMetadataConsistency"
		_ = rq.send(bson.D{{Key: "cursor", Value: bson.D{{Key: "id", Value: int64(0)}, {Key: "ns", Value: ns}, {Key: "firstBatch", Value: bson.A{}}}}, {Key: "ok", Value: 1.0}})
	case strings.EqualFold(name, "configureFailPoint"):
		if rq.db != "admin" {
			r.replyErr(rq, out, cmderr.New(cmderr.Unauthorized, "configureFailPoint may only be run against the admin database."))
			return true
		}
		count, err := r.fails.configure(rq.cmd)
		if err != nil {
			r.replyErr(rq, out, err)
			return true
		}
		_ = rq.send(bson.D{{Key: "count", Value: count}, {Key: "ok", Value: 1.0}})
	default:
		return rq.name == "getMore" && r.failGetMore(rq, out)
	}
	return true
}

// dispatch forwards the request to the shards, or asks the recovery
// shard for a commit's outcome.
func (r *Router) dispatch(rq *request, cmd *command, out *outcome, wce bson.D, action txnAction) {
	if rq.raw.OpCode == wire.OpMsg && rq.raw.Flags&wire.MoreToCome != 0 {
		// An unacknowledged write runs before the connection's next
		// message is read, as on mongod, so the client's next command
		// sees it.
		r.forward(rq, cmd, out, wce)
		return
	}
	// Forwarding blocks on the shard; run it off the connection's reader
	// so a client hanging up cancels the round trip.
	rq.raw.WatchClose()
	work := func() { r.forward(rq, cmd, out, wce) }
	if action == txnRecover {
		work = func() { r.recoverCommit(rq, out) }
	}
	if !r.cluster.goAsync(work) {
		_ = rq.hangup()
	}
}

// forward sends the command to the shard primary, retrying as mongos does,
// and relays the reply.
func (r *Router) forward(rq *request, cmd *command, out *outcome, wce bson.D) {
	defer func() {
		if p := recover(); p != nil {
			r.cluster.logf("mongosim router %s: forwarding %s panicked: %v\n%s", r.addr, rq.name, p, debug.Stack())
			if !rq.raw.Replied() {
				_ = rq.send(errorDoc(cmderr.New(codeInternalError, "mongosim internal error in %s: %v", rq.name, p), nil))
			}
		}
	}()
	if r.cluster.sharding != nil {
		r.routeSharded(rq, cmd, out, wce) // shard_dispatch.go
		return
	}
	retryable := routerRetries(rq.name, cmd, out.hasTxnNumber)
	var (
		reply   bson.D
		lastErr error
	)
	for attempt := 1; attempt <= routerShardAttempts; attempt++ {
		reply, lastErr = r.roundTrip(rq)
		if lastErr == nil {
			code, _ := replyCode(reply)
			if !retryable || !slices.Contains(routerRetryCodes, code) || attempt == routerShardAttempts {
				break
			}
		} else if !retryable || rq.ctx.Err() != nil {
			break
		}
		if !r.awaitPrimary(rq.ctx) {
			break
		}
	}
	if lastErr != nil {
		if rq.ctx.Err() != nil {
			_ = rq.hangup() // the client went away
			return
		}
		if errors.Is(lastErr, errNoTarget) {
			r.replyErr(rq, out, &cmderr.Error{Code: codeFailedToSatisfyReadPreference, Name: "FailedToSatisfyReadPreference",
				Message: fmt.Sprintf("Could not find host matching read preference for set %s", r.cluster.setName)})
			return
		}
		r.replyErr(rq, out, cmderr.New(cmderr.HostUnreachable, "Connection to the shard failed: %v", lastErr))
		return
	}
	// The shard's topologyVersion describes the shard member, not this
	// mongos: mongos does not relay it.
	reply = deleteField(reply, "topologyVersion")
	r.reply(rq, out, reply, wce, r.recoveryToken())
}

// reply finishes a relayed reply as mongos does and sends it: the fail
// point's writeConcernError, the transaction's recoveryToken (nil: none)
// on success, and the error labels the router owes.
func (r *Router) reply(rq *request, out *outcome, reply, wce, token bson.D) {
	r.noteStreamCursor(rq, reply) // change stream cursors relayed (shard_router_cursor.go)
	if wce != nil {
		reply = setField(reply, "writeConcernError", wce)
	}
	if out.inTxn && token != nil && replyOK(reply) {
		reply = setField(reply, "recoveryToken", token)
	}
	if out.labelsSet {
		if len(out.explicitLabels) > 0 {
			reply = setField(reply, "errorLabels", out.explicitLabels)
		} else {
			reply = deleteField(reply, "errorLabels")
		}
	} else if wce != nil && out.inTxn {
		if labels := txnReplyLabels(rq.name, wce); labels != nil {
			reply = setField(reply, "errorLabels", labels)
		}
	} else if wce != nil && out.hasTxnNumber {
		// The router's own writeConcernError on a retryable write is
		// labelled as mongos labels a retryable one.
		if code, ok := wceCode(reply); ok && slices.Contains(retryableWriteCodes, code) {
			reply = setField(reply, "errorLabels", []string{labelRetryableWrite})
		}
	}
	if err := rq.send(reply); err != nil {
		r.cluster.logf("mongosim router %s: reply to %s: %v", r.addr, rq.name, err)
	}
}

// routerRetryCodes are shard errors after which mongos retries a read or
// a retryable write on the shard's new primary.
var routerRetryCodes = []int32{
	cmderr.NotWritablePrimary, cmderr.NotPrimaryNoSecondaryOk, cmderr.NotPrimaryOrSecondary,
	cmderr.PrimarySteppedDown, cmderr.InterruptedDueToReplState, cmderr.ShutdownInProgress,
	cmderr.InterruptedAtShutdown,
}

// routerRetries reports whether mongos retries the command on the shard:
// reads (not getMore, whose cursor may be gone) and retryable writes.
func routerRetries(name string, cmd *command, hasTxn bool) bool {
	if cmd == nil || name == "getMore" || name == "killCursors" {
		return false
	}
	if cmd.write {
		return hasTxn && cmd.retryableWrite
	}
	return true
}

// awaitPrimary waits until the shard has a primary; false if ctx ends or
// the wait outlasts routerPrimaryWait.
func (r *Router) awaitPrimary(ctx context.Context) bool {
	deadline := time.Now().Add(routerPrimaryWait)
	for {
		if r.cluster.Primary() != nil {
			return true
		}
		if time.Now().After(deadline) || !sleepCtx(ctx, 10*time.Millisecond) {
			return false
		}
	}
}

// errNoTarget: no shard member matches the read preference (no primary
// during an election).
var errNoTarget = errors.New("no shard member matches the read preference")

// codeFailedToSatisfyReadPreference is mongos' answer when no shard member
// matches a command's read preference.
const codeFailedToSatisfyReadPreference = 133

// target picks the shard member for rq as mongos does from its
// $readPreference: the primary for mode primary (the default) and for
// every write, a secondary for secondary, either for the preferred modes
// and nearest.
func (r *Router) target(rq *request) *Member {
	cmd := lookupCommand(rq.raw.Name)
	return r.shardTarget(rq, r.cluster, cmd == nil || cmd.write)
}

// roundTrip sends rq's command, as received, to the shard member its read
// preference selects (the primary for writes)
// and returns the reply; an error means the shard could not be reached or
// the connection failed.
func (r *Router) roundTrip(rq *request) (bson.D, error) {
	p := r.target(rq)
	if p == nil {
		return nil, errNoTarget
	}
	br := rq.raw
	return r.exchange(rq.ctx, p, br.RequestID, &wire.Msg{Body: br.Command, Sequences: br.Sequences})
}

// exchange sends msg to shard member p on a pooled connection and returns
// the reply. A connection that failed, or whose deadline ctx may have set,
// is closed rather than reused.
func (r *Router) exchange(ctx context.Context, p *Member, requestID int32, msg *wire.Msg) (bson.D, error) {
	nc, err := r.conn(ctx, p.addr)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	_ = nc.SetDeadline(time.Now().Add(routerShardTimeout))
	if _, err := nc.Write(wire.AppendMsg(nil, requestID, 0, msg)); err != nil {
		_ = nc.Close()
		return nil, err
	}
	reply, err := readShardReply(nc)
	if err != nil {
		_ = nc.Close()
		return nil, err
	}
	if !stop() {
		_ = nc.Close() // the deadline may have been set: do not reuse it
		return reply, nil
	}
	r.release(p.addr, nc)
	return reply, nil
}

// conn returns an idle pooled connection to addr or dials one.
func (r *Router) conn(ctx context.Context, addr string) (net.Conn, error) {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return nil, errors.New("router stopped")
	}
	if conns := r.idle[addr]; len(conns) > 0 {
		nc := conns[len(conns)-1]
		r.idle[addr] = conns[:len(conns)-1]
		r.mu.Unlock()
		return nc, nil
	}
	r.mu.Unlock()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	local := nc.LocalAddr().String()
	r.mu.Lock()
	r.dialed[local] = true
	r.mu.Unlock()
	return &shardConn{Conn: nc, r: r, local: local}, nil
}

// shardConn is a router's connection to a shard member; closing it
// withdraws the members' trust in its address.
type shardConn struct {
	net.Conn
	r     *Router
	local string
}

func (sc *shardConn) Close() error {
	sc.r.mu.Lock()
	delete(sc.r.dialed, sc.local)
	sc.r.mu.Unlock()
	return sc.Conn.Close()
}

// isRouterConn reports whether a member's connection comes from a router.
func (c *Cluster) isRouterConn(conn *blackpipe.Conn) bool {
	remote := conn.RemoteAddr().String()
	for _, r := range c.routers {
		r.mu.Lock()
		ok := r.dialed[remote]
		r.mu.Unlock()
		if ok {
			return true
		}
	}
	return false
}

// release returns a healthy connection to the pool. A connection not kept
// is closed after unlocking: shardConn.Close takes r.mu itself.
func (r *Router) release(addr string, nc net.Conn) {
	r.mu.Lock()
	if r.stopped || len(r.idle[addr]) >= 32 {
		r.mu.Unlock()
		_ = nc.Close()
		return
	}
	r.idle[addr] = append(r.idle[addr], nc)
	r.mu.Unlock()
}

// replyCode returns the code of an error reply.
func replyCode(reply bson.D) (int32, bool) {
	ok, _ := lookupD(reply, "ok")
	if asBool(ok) {
		return 0, false
	}
	v, _ := lookupD(reply, "code")
	n, isNum := asInt64(v)
	return int32(n), isNum
}

func deleteField(d bson.D, key string) bson.D {
	return slices.DeleteFunc(d, func(e bson.E) bool { return e.Key == key })
}

// applyFailCommand applies an activated failCommand fail point of this
// router, in mongod's order (closeConnection, blockConnection, errorCode).
func (r *Router) applyFailCommand(rq *request, out *outcome) (wce bson.D, answered bool) {
	act := r.fails.evaluate(fpFailCommand, r.cluster, func(fp *failPoint) bool { return failCommandMatches(fp, rq) })
	if act == nil {
		return nil, false
	}
	if act.errorLabels != nil {
		out.labelsSet, out.explicitLabels = true, act.errorLabels
	}
	if act.closeConnection {
		_ = rq.hangup()
		return nil, true
	}
	if act.blockConnection {
		// As on mongod, the block is interruptible by maxTimeMS, except
		// getMore's: its maxTimeMS is an await time, not a limit.
		ctx := rq.ctx
		if limit, bad := maxTimeArg(rq); bad == nil && limit > 0 && rq.name != "getMore" {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, limit)
			defer cancel()
		}
		if !sleepCtx(ctx, act.blockTime) {
			if rq.ctx.Err() == nil {
				r.replyErr(rq, out, errMaxTime())
			}
			return nil, true // else the client or the router went away
		}
	}
	if act.errorCode != 0 {
		out.extraInfo = act.errorExtraInfo
		r.replyErr(rq, out, cmderr.New(act.errorCode, failCommandMessage))
		return nil, true
	}
	return act.writeConcernError, false
}

// replyErr answers with a command error labelled as mongos does: a fail
// point's labels, else RetryableWriteError on a retryable write's
// retryable error; overload errors carry the router's baseBackoffMS.
func (r *Router) replyErr(rq *request, out *outcome, err error) {
	e, extra := labelledError(out, err, r.limiter.baseBackoffMS())
	if err := rq.send(errorDoc(&e, extra)); err != nil {
		r.cluster.logf("mongosim router %s: reply to %s: %v", r.addr, rq.name, err)
	}
}

// hello answers hello/isMaster as mongos: writable, msg "isdbgrid", no
// replica-set fields. An awaitable hello waits out maxAwaitTimeMS (a
// router's topology never changes while it runs), streaming with exhaust.
func (r *Router) hello(rq *request) {
	aw, awaitable, err := parseAwait(rq)
	if err != nil {
		r.replyErr(rq, &outcome{}, err)
		return
	}
	exhaust := rq.raw.OpCode == wire.OpMsg && rq.raw.Flags&wire.ExhaustAllowed != 0
	if exhaust && !awaitable {
		r.replyErr(rq, &outcome{}, cmderr.New(codeExhaustNeedsMaxAwait, "An isMaster or hello request with exhaust must specify 'maxAwaitTimeMS'"))
		return
	}
	if !awaitable {
		_ = rq.send(r.helloReply(rq))
		return
	}
	if aw.pid == r.pid() && aw.counter > 0 {
		r.replyErr(rq, &outcome{}, cmderr.New(codeTopologyVersionAhead,
			"Received a topology version with the same process ID and a higher counter than the current topology version"))
		return
	}
	// Stream fails only on a request already answered: nothing to send.
	_ = rq.awaitLater(r.cluster, exhaust, func() { r.awaitHello(rq, aw) })
}

func (r *Router) awaitHello(rq *request, aw awaitArgs) {
	done := rq.raw.Context().Done()
	for first := true; ; first = false {
		if !first {
			if _, answered := r.applyFailCommand(rq, &outcome{}); answered {
				return
			}
		}
		if aw.pid == r.pid() && aw.maxAwait > 0 {
			t := time.NewTimer(aw.maxAwait)
			select {
			case <-t.C:
			case <-done:
				t.Stop()
				return
			}
		}
		if err := rq.send(r.helloReply(rq)); err != nil || rq.stream == nil {
			return
		}
		r.cluster.stats.streamed.Add(1)
		aw.pid, aw.counter = r.pid(), 0
	}
}

func (r *Router) helloReply(rq *request) bson.D {
	c := r.cluster
	d := bson.D{}
	if v, ok := rq.get("helloOk"); ok && asBool(v) {
		d = append(d, bson.E{Key: "helloOk", Value: true})
	}
	if rq.raw.Name != "hello" {
		d = append(d, bson.E{Key: "ismaster", Value: true})
	} else {
		d = append(d, bson.E{Key: "isWritablePrimary", Value: true})
	}
	now := c.now()
	d = append(d,
		bson.E{Key: "msg", Value: "isdbgrid"},
		bson.E{Key: "topologyVersion", Value: bson.D{{Key: "processId", Value: r.pid()}, {Key: "counter", Value: int64(0)}}},
		bson.E{Key: "maxBsonObjectSize", Value: int32(maxBSONObjectSize)},
		bson.E{Key: "maxMessageSizeBytes", Value: int32(maxMessageSizeBytes)},
		bson.E{Key: "maxWriteBatchSize", Value: c.maxWriteBatch()},
		bson.E{Key: "localTime", Value: bson.NewDateTimeFromTime(now)},
		bson.E{Key: "logicalSessionTimeoutMinutes", Value: int32(sessionTimeoutMins)},
		bson.E{Key: "connectionId", Value: int32(rq.raw.Conn.ID())},
		bson.E{Key: "minWireVersion", Value: int32(0)},
		bson.E{Key: "maxWireVersion", Value: int32(maxWireVersion)},
		bson.E{Key: "readOnly", Value: false},
	)
	return c.helloHandshake(rq, d)
}

// memberLimits is the members' limiter configuration: with routers the
// clients' ingress is the routers, so Options.Limiter applies there.
func memberLimits(o Options) LimiterOptions {
	if o.Routers > 0 {
		return LimiterOptions{}
	}
	return o.Limiter
}

func (r *Router) pid() bson.ObjectID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.processID
}
