package mongosim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/blackpipe"
)

// ErrClosed is returned by Cluster methods called after Close.
var ErrClosed = errors.New("mongosim: cluster closed")

// Cluster is a running mongosim deployment: a standalone server or a replica
// set whose members share one data store and one retryable-write table.
type Cluster struct {
	opts    Options
	now     func() time.Time
	setName string // "" when standalone
	started time.Time

	data *storage
	txns *txnTable
	// txnLifetimeSecs is the transactionLifetimeLimitSeconds parameter.
	txnLifetimeSecs atomic.Int64
	// The transaction reaper (reapTransactions) and its shutdown.
	reaperStop, reaperDone chan struct{}
	// ttlStop stops the TTL monitor (ttl.go); nil when it is off.
	ttlStop func()
	// profile is the database profiler's settings (maintenance.go).
	profile profileState
	// ttl holds the TTL monitor's parameters (ttlMonitorSleepSecs,
	// ttlMonitorEnabled), which setParameter changes while it runs.
	ttl ttlParams

	limiter *limiter
	fails   *failPoints    // fail points set with Cluster.SetFailPoint (all members)
	auth    *authenticator // set when authentication is required
	stats   counters
	adm     adminState // monitoring and user commands (adminstate.go)

	// routers are the mongos routers in front of the members (shard_router.go);
	// set by Launch, read-only afterwards.
	routers []*Router
	// sharding is the multi-shard metadata and the other shards
	// (shard_cluster.go); nil unless Options.Shards > 1.
	sharding *shardSet
	// balancer fronts the routers in load-balanced mode (Options.LoadBalanced).
	balancer       *Balancer
	singleBalancer *Balancer // in front of routers[0] only

	randMu sync.Mutex
	rand   *rand.Rand // activationProbability; seeded for reproducible runs

	mu      sync.Mutex // guards the replica-set state below
	members []*Member
	primary int // index into members; -1 during an election
	// lastPrimary is the member that was primary last; elections start
	// looking after it.
	lastPrimary int
	electTimer  *time.Timer // a pending election (no eligible member yet)
	term        int64
	setVersion  int32
	closed      bool
	async       sync.WaitGroup // goroutines answering awaitable hellos
	closeOnce   sync.Once
	closeErr    error
}

// counters are the Stats counters, updated atomically.
type counters struct {
	commands, admitted, rejected           atomic.Int64
	connsAccepted, connsRejected           atomic.Int64
	failPointsFired, replayed, hangups     atomic.Int64
	stepDowns, authSuccesses, authFailures atomic.Int64
	streamed                               atomic.Int64
	awaiting                               atomic.Int64 // awaitable hellos in progress (not in Stats)
}

// Stats are cumulative counters of a Cluster, summed over its members.
type Stats struct {
	Commands        int64 // requests dispatched to a command (known or not)
	Admitted        int64 // requests the ingress request limiter admitted (0 while it is off)
	Rejected        int64 // requests the ingress limiter rejected with code 462
	ConnsAccepted   int64 // connections accepted
	ConnsRejected   int64 // connections closed at once by the connection limiter
	FailPointsFired int64 // failCommand / onPrimaryTransactionalWrite activations
	Replayed        int64 // retryable-write statements answered from the transaction table
	Hangups         int64 // connections closed by a fail point
	StepDowns       int64 // primary changes
	AuthSuccesses   int64
	AuthFailures    int64
	Streamed        int64 // exhaust hello replies sent with moreToCome (no request of their own)
	// Multi-document transactions started, committed and aborted (by
	// abortTransaction, an error, expiry, step-down or killed sessions).
	TxnStarted, TxnCommitted, TxnAborted int64
}

// Launch starts a deployment as described by o. Call Close to stop it.
func Launch(o Options) (*Cluster, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	c, err := newCluster(o)
	if err != nil {
		return nil, err
	}
	if err := c.startMembers(); err != nil {
		return nil, err
	}
	c.startMonitors()
	// From here Close stops what has started.
	for _, start := range []func() error{c.startShards, c.startRouters, c.startBalancer} {
		if err := start(); err != nil {
			_ = c.Close()
			return nil, err
		}
	}
	return c, nil
}

// withDefaults checks o and fills in the zero values' defaults.
func (o Options) withDefaults() (Options, error) {
	if o.Members < 0 {
		return o, fmt.Errorf("mongosim: Members must not be negative, got %d", o.Members)
	}
	if o.Members == 0 {
		o.Members = 1
	}
	if err := validateRouterOptions(o); err != nil {
		return o, err
	}
	if err := validateBalancerOptions(o); err != nil {
		return o, err
	}
	if o.Standalone && o.Members != 1 {
		return o, fmt.Errorf("mongosim: a standalone server has one member, got Members=%d", o.Members)
	}
	if o.ReplicaSetName == "" {
		o.ReplicaSetName = "rs0"
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Compressors == nil {
		o.Compressors = []string{"zstd", "zlib", "snappy"}
	}
	return o, nil
}

// newCluster builds the deployment's shared state, before any member
// listens.
func newCluster(o Options) (*Cluster, error) {
	c := &Cluster{
		opts:       o,
		now:        o.Now,
		started:    o.Now(),
		data:       newStorage(o.Now, o.clusterClock),
		txns:       newTxnTable(),
		limiter:    newLimiter(o.Now, memberLimits(o)),
		fails:      newFailPoints(),
		rand:       rand.New(rand.NewPCG(uint64(o.Seed), 0x6d6f6e676f73696d)),
		term:       1,
		setVersion: 1,
	}
	c.txnLifetimeSecs.Store(defaultTxnLifetimeSecs)
	c.data.logger = o.Logger
	c.data.scriptsOff = o.JavaScriptDisabled
	if !o.Standalone {
		c.setName = o.ReplicaSetName
		if err := c.initOplog(); err != nil {
			return nil, err
		}
	}
	c.adm.users = newAuthenticator(o.Auth)
	if o.Auth.Username != "" {
		c.auth = c.adm.users
	}
	return c, nil
}

// startMembers starts the members, member 0 the primary; on an error it
// closes those it started.
func (c *Cluster) startMembers() error {
	members := make([]*Member, 0, c.opts.Members)
	for i := 0; i < c.opts.Members; i++ {
		m, err := c.startMember(i)
		if err != nil {
			for _, m := range members {
				_ = m.srv.Close()
			}
			return err
		}
		members = append(members, m)
	}
	c.mu.Lock()
	c.members = members
	c.primary = 0
	c.mu.Unlock()
	return nil
}

// startMonitors starts the background work: the TTL monitor (unless
// switched off) and, on a replica set, the reaper of expired
// transactions.
func (c *Cluster) startMonitors() {
	c.ttl.interval.Store(int64(defaultTTLMonitorInterval))
	if interval := c.opts.TTLMonitorInterval; interval >= 0 {
		if interval == 0 {
			interval = defaultTTLMonitorInterval
		}
		c.startTTLMonitor(interval)
	}
	if c.setName != "" {
		c.reaperStop, c.reaperDone = make(chan struct{}), make(chan struct{})
		go c.reapTransactions(time.Second)
	}
}

func (c *Cluster) startMember(i int) (*Member, error) {
	m := &Member{cluster: c, index: i, processID: bson.NewObjectID(), fails: newFailPoints(), tvChanged: make(chan struct{}), localSessions: newLocalSessions()}
	addr := net.JoinHostPort(c.opts.Host, "0")
	if c.opts.Port != 0 {
		addr = net.JoinHostPort(c.opts.Host, strconv.Itoa(c.opts.Port+i))
	}
	bo := blackpipe.Options{
		Addr:         addr,
		TLS:          c.opts.TLS,
		Compressors:  c.opts.Compressors,
		NoDefaults:   true,
		Handler:      m.handle,
		AcceptConn:   m.acceptConn,
		OnConnClose:  m.connClosed,
		OnBadRequest: m.badRequest,

		PartialMessageTimeout: c.opts.PartialMessageTimeout,
		IdleTimeout:           c.opts.IdleTimeout,
	}
	if lg := c.opts.Logger; lg != nil {
		// blackpipe logs only what it refuses or fails at: malformed or
		// too-large messages, accept errors, handler panics.
		bo.Logf = func(format string, args ...any) {
			lg.Warn(fmt.Sprintf(format, args...), "component", "network")
		}
	}
	srv, err := blackpipe.Listen(bo)
	if err != nil {
		return nil, fmt.Errorf("mongosim: member %d: %w", i, err)
	}
	m.srv = srv
	m.addr = srv.Addr()
	return m, nil
}

// Start starts the default deployment (a single-member replica set "rs0")
// for a test and closes it when the test ends.
func Start(t testing.TB) *Cluster {
	t.Helper()
	return StartWithOptions(t, Options{})
}

// StartWithOptions is Start with options; it fails the test if the
// deployment cannot start.
func StartWithOptions(t testing.TB, o Options) *Cluster {
	t.Helper()
	c, err := Launch(o)
	if err != nil {
		t.Fatalf("mongosim: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("mongosim: close: %v", err)
		}
	})
	return c
}

// URI returns a connection string for the whole deployment: every member and
// the replicaSet option, or the single host of a standalone server.
func (c *Cluster) URI() string {
	if c.balancer != nil {
		return c.balancer.URI()
	}
	if len(c.routers) > 0 {
		return c.routersURI()
	}
	var hosts []string
	for _, m := range c.Members() {
		hosts = append(hosts, m.addr)
	}
	var params []string
	if c.setName != "" {
		params = append(params, "replicaSet="+c.setName)
	}
	if c.opts.TLS != nil {
		params = append(params, "tls=true")
	}
	return "mongodb://" + strings.Join(hosts, ",") + "/" + joinParams(params)
}

func joinParams(p []string) string {
	if len(p) == 0 {
		return ""
	}
	return "?" + strings.Join(p, "&")
}

// Members returns the members in order; member 0 is the first primary.
func (c *Cluster) Members() []*Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Member(nil), c.members...)
}

// Primary returns the current primary (the only member of a standalone
// deployment), or nil during an election.
func (c *Cluster) Primary() *Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.primary < 0 || c.primary >= len(c.members) {
		return nil
	}
	return c.members[c.primary]
}

// SetFailPoint configures a fail point on every member, with one shared
// activation count: cmd is the same document as the configureFailPoint
// command, e.g. {configureFailPoint: "failCommand", mode: {times: 1},
// data: {failCommands: ["insert"], closeConnection: true}}.
func (c *Cluster) SetFailPoint(cmd bson.D) error {
	_, err := c.fails.configure(cmd)
	return err
}

// SetLimiter reconfigures the ingress request and connection limiters at
// run time; the request bucket starts full.
func (c *Cluster) SetLimiter(l LimiterOptions) { c.limiter.set(l) }

// Stats returns the cumulative counters.
func (c *Cluster) Stats() Stats {
	s := &c.stats
	return Stats{
		Commands: s.commands.Load(), Admitted: s.admitted.Load(), Rejected: s.rejected.Load(),
		ConnsAccepted: s.connsAccepted.Load(), ConnsRejected: s.connsRejected.Load(),
		FailPointsFired: s.failPointsFired.Load(), Replayed: s.replayed.Load(), Hangups: s.hangups.Load(),
		StepDowns: s.stepDowns.Load(), AuthSuccesses: s.authSuccesses.Load(), AuthFailures: s.authFailures.Load(),
		Streamed:   s.streamed.Load(),
		TxnStarted: c.data.clock.started.Load(), TxnCommitted: c.data.clock.committed.Load(), TxnAborted: c.data.clock.aborted.Load(),
	}
}

// Close closes every member's listener and connections, wakes pending
// awaitable hellos and blocked fail points, and waits for every goroutine.
// It is idempotent.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		if c.electTimer != nil {
			c.electTimer.Stop()
		}
		members := append([]*Member(nil), c.members...)
		c.mu.Unlock()
		// Writers waiting for a transaction's documents must not hold up
		// the members' shutdown.
		if c.reaperStop != nil {
			close(c.reaperStop)
			<-c.reaperDone
		}
		if c.ttlStop != nil {
			c.ttlStop()
		}
		c.endAllTransactions("the server is shutting down")
		var errs []error
		for _, b := range []*Balancer{c.balancer, c.singleBalancer} {
			if b == nil {
				continue
			}
			if err := b.close(); err != nil {
				errs = append(errs, fmt.Errorf("load balancer: %w", err))
			}
		}
		errs = append(errs, c.closeRouters()...)
		for _, m := range members {
			if err := m.srv.Close(); err != nil {
				errs = append(errs, fmt.Errorf("member %s: %w", m.addr, err))
			}
		}
		// Closing the listeners canceled every connection's context,
		// which ends every awaitable hello still waiting.
		c.async.Wait()
		errs = append(errs, c.closeShards()...)
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

// goAsync runs f on a goroutine that Close waits for; it reports false,
// without running f, once the cluster is closed.
func (c *Cluster) goAsync(f func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.async.Add(1)
	go func() {
		defer c.async.Done()
		f()
	}()
	return true
}

// randFloat returns a pseudo-random number in [0, 1) from the seeded source.
func (c *Cluster) randFloat() float64 {
	c.randMu.Lock()
	defer c.randMu.Unlock()
	return c.rand.Float64()
}

// warn logs what the server refused and why.
func (c *Cluster) warn(msg string, args ...any) {
	c.adm.log.add(c.now(), "W", "NETWORK", msg, args...)
	if c.opts.Logger != nil {
		c.opts.Logger.Warn(msg, args...)
	}
}

func (c *Cluster) logf(format string, args ...any) {
	if c.opts.Logger != nil {
		c.opts.Logger.Debug(fmt.Sprintf(format, args...))
	}
}

// sleepCtx waits d or until ctx is done; it reports whether the full time
// elapsed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
