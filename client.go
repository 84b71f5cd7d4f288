package sturdy

import (
	"cmp"
	"context"
	"slices"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/internal/conn"
	"github.com/sturdy-go/sturdy/internal/csot"
	"github.com/sturdy-go/sturdy/internal/exec"
	"github.com/sturdy-go/sturdy/internal/pool"
	"github.com/sturdy-go/sturdy/internal/session"
	"github.com/sturdy-go/sturdy/internal/testhook"
	"github.com/sturdy-go/sturdy/internal/topology"
	"github.com/sturdy-go/sturdy/readpref"
)

// Client is a handle to a MongoDB deployment: it monitors the servers, pools
// connections and sessions, and runs every operation through one execution
// path. It is safe for concurrent use; create one per deployment and share it.
type Client struct {
	opts     Options // with defaults resolved
	topo     *topology.Topology
	sessions *session.Pool
	exec     *exec.Executor
	closed   atomic.Bool
}

// endSessionsBatch is the most session ids one endSessions command may carry.
const endSessionsBatch = 10_000

// Connect parses a connection string and connects. See ConnectWithOptions.
func Connect(ctx context.Context, uri string) (*Client, error) {
	o, err := ParseURI(uri)
	if err != nil {
		return nil, err
	}
	return ConnectWithOptions(ctx, o)
}

// ConnectWithOptions starts monitoring the deployment described by o and
// returns at once: servers are discovered in the background and operations
// wait (up to ServerSelectionTimeout or their context's deadline) for a
// suitable one. Call Disconnect to release everything.
func ConnectWithOptions(ctx context.Context, o Options) (*Client, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	if o.SRVHost != "" {
		resolved, err := o.resolveSRV(ctx)
		if err != nil {
			return nil, err
		}
		o = resolved
	}
	o = withDefaults(o)
	for _, w := range o.Warnings {
		if o.Logger != nil {
			o.Logger.Warn("sturdy: connection string", "warning", w)
		}
	}

	co := conn.Options{
		AppName:      o.AppName,
		DialTimeout:  o.ConnectTimeout,
		TLSConfig:    o.TLS,
		Compressors:  o.Compressors,
		ZlibLevel:    *o.ZlibLevel,
		Dialer:       o.Dialer,
		LoadBalanced: o.LoadBalanced,
	}
	if o.Auth != nil {
		co.Credential = &conn.Credential{
			Mechanism: o.Auth.Mechanism, Source: o.Auth.Source, Username: o.Auth.Username,
			Password: o.Auth.Password, PasswordSet: o.Auth.PasswordSet, MechanismProperties: o.Auth.MechanismProperties,
		}
	}
	maxPool := o.MaxPoolSize
	if maxPool < 0 {
		maxPool = 0 // unlimited
	}
	topo, err := topology.New(topology.Options{
		Hosts:                  o.Hosts,
		SetName:                o.ReplicaSet,
		Direct:                 o.Direct,
		HeartbeatInterval:      o.HeartbeatInterval,
		MinHeartbeatInterval:   cmp.Or(testhook.MinHeartbeatInterval(), defaults.MinHeartbeatInterval),
		ServerSelectionTimeout: o.ServerSelectionTimeout,
		SocketTimeout:          o.SocketTimeout,
		LocalThreshold:         *o.LocalThreshold,
		ServerMonitoringMode:   o.ServerMonitoringMode,
		Pool: pool.Options{
			MaxPoolSize:   maxPool,
			MinPoolSize:   o.MinPoolSize,
			MaxConnecting: o.MaxConnecting,
			MaxIdleTime:   o.MaxIdleTime,
			// CMAP's background thread; 0 would be none.
			BackgroundInterval: defaults.PoolBackgroundInterval,
			Conn:               co,
			Monitor:            o.Monitor,
		},
		Conn:    co,
		Monitor: o.Monitor,
		Logger:  o.Logger,
	})
	if err != nil {
		return nil, err
	}
	if err := topo.Connect(ctx); err != nil {
		return nil, err
	}
	sessions := session.NewPool(nil)
	c := &Client{
		opts:     o,
		topo:     topo,
		sessions: sessions,
		exec: &exec.Executor{
			Topology:                   topo,
			Sessions:                   sessions,
			Monitor:                    o.Monitor,
			Logger:                     o.Logger,
			RetryWrites:                *o.RetryWrites,
			RetryReads:                 *o.RetryReads,
			MaxAdaptiveRetries:         *o.MaxAdaptiveRetries,
			BackoffBase:                defaults.BackoffBase,
			DisableRetryTokens:         !*o.AdaptiveRetries,
			DisableOverloadRetargeting: !*o.EnableOverloadRetargeting,
		},
	}
	return c, nil
}

// withDefaults fills every zero-valued option with its default.
func withDefaults(o Options) Options {
	if o.MaxPoolSize == 0 {
		o.MaxPoolSize = defaults.MaxPoolSize
	}
	if o.MaxConnecting == 0 {
		o.MaxConnecting = defaults.MaxConnecting
	}
	switch {
	case o.ConnectTimeout == 0:
		o.ConnectTimeout = defaults.ConnectTimeout
	case o.ConnectTimeout < 0:
		// No timeout of its own (connectTimeoutMS=0): below the root, 0
		// means none and the operation's context governs.
		o.ConnectTimeout = 0
	}
	if o.ServerSelectionTimeout == 0 {
		o.ServerSelectionTimeout = defaults.ServerSelectionTimeout
	}
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = defaults.HeartbeatInterval
	}
	if o.LocalThreshold == nil {
		lt := defaults.LocalThreshold
		o.LocalThreshold = &lt
	}
	if o.ZlibLevel == nil {
		l := defaults.ZlibLevel
		o.ZlibLevel = &l
	}
	orDefault := func(b **bool, def bool) {
		if *b == nil {
			*b = &def
		}
	}
	orDefault(&o.RetryWrites, defaults.RetryWrites)
	orDefault(&o.RetryReads, defaults.RetryReads)
	orDefault(&o.AdaptiveRetries, defaults.AdaptiveRetries)
	orDefault(&o.EnableOverloadRetargeting, defaults.EnableOverloadRetargeting)
	if o.MaxAdaptiveRetries == nil {
		n := defaults.MaxAdaptiveRetries
		o.MaxAdaptiveRetries = &n
	}
	return o
}

// Disconnect ends the client's pooled server sessions on the server (best
// effort), stops monitoring and closes every connection. No goroutine the
// client started survives it. Operations afterwards fail with
// ErrClientDisconnected.
func (c *Client) Disconnect(ctx context.Context) error {
	if c.closed.Swap(true) {
		return ErrClientDisconnected
	}
	c.endSessions(ctx)
	return c.topo.Disconnect(ctx)
}

// endSessions tells the server to forget the pooled sessions, in batches of
// at most 10 000 ids. It is best effort: it gives up at the first error and
// does not wait for a server to become available.
func (c *Client) endSessions(ctx context.Context) {
	ids := c.sessions.Drain()
	if len(ids) == 0 || !c.hasSelectableServer() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rp := &readpref.ReadPref{Mode: readpref.PrimaryPreferred}
	for len(ids) > 0 {
		n := min(len(ids), endSessionsBatch)
		batch := make(bson.A, n)
		for i, id := range ids[:n] {
			batch[i] = id
		}
		ids = ids[n:]
		// An executor without a session pool: endSessions carries no lsid.
		noSessions := &exec.Executor{Topology: c.topo, Monitor: c.opts.Monitor, Logger: c.opts.Logger,
			MaxAdaptiveRetries: *c.opts.MaxAdaptiveRetries, BackoffBase: defaults.BackoffBase}
		_, err := noSessions.Execute(ctx, &exec.Operation{
			Name: "endSessions", DB: "admin",
			Command:  bson.D{{Key: "endSessions", Value: batch}},
			ReadPref: rp,
		})
		if err != nil {
			return
		}
	}
}

// hasSelectableServer reports whether monitoring knows a data-bearing server.
func (c *Client) hasSelectableServer() bool {
	for _, s := range c.topo.Description().Servers {
		if s.Kind.DataBearing() {
			return true
		}
	}
	return false
}

// sessionsSupported waits for a data-bearing server to be known, then reports
// whether the deployment supports sessions.
func (c *Client) sessionsSupported(ctx context.Context) (bool, error) {
	if !c.hasSelectableServer() {
		sel := topology.ReadPrefSelector(readpref.ReadPref{Mode: readpref.PrimaryPreferred}, c.opts.HeartbeatInterval)
		if _, err := c.topo.SelectServer(ctx, sel, nil); err != nil {
			return false, err
		}
	}
	return c.topo.Description().SupportsSessions(), nil
}

// Ping checks that a server matching the client's read preference answers.
func (c *Client) Ping(ctx context.Context) error {
	ctx, cancel := c.begin(ctx)
	defer cancel()
	_, err := c.Database("admin").RunCommand(ctx, bson.D{{Key: "ping", Value: int32(1)}},
		&RunCommandOptions{ReadPreference: c.opts.ReadPreference})
	return err
}

// Database returns a handle to the named database. Nothing is sent to the
// server. opts override the client's write concern, read preference and read
// concern.
func (c *Client) Database(name string, opts ...*DatabaseOptions) *Database {
	db := &Database{client: c, name: name, wc: c.opts.WriteConcern, rp: c.opts.ReadPreference, rc: c.opts.ReadConcernLevel, timeout: c.timeout()}
	for _, o := range opts {
		db.wc, db.rp, db.rc = inherit(o, db.wc, db.rp, db.rc)
		if o != nil && o.Timeout != nil {
			db.timeout = o.Timeout
		}
	}
	return db
}

func inherit(o *DatabaseOptions, wc *WriteConcern, rp *ReadPreference, rc string) (*WriteConcern, *ReadPreference, string) {
	if o == nil {
		return wc, rp, rc
	}
	if o.WriteConcern != nil {
		wc = o.WriteConcern
	}
	if o.ReadPreference != nil {
		rp = o.ReadPreference
	}
	if o.ReadConcernLevel != "" {
		rc = o.ReadConcernLevel
	}
	return wc, rp, rc
}

// timeout is the client's timeoutMS as a level for csot.Resolve: nil when
// unset, 0 for timeoutMS=0 (Options.Timeout < 0).
func (c *Client) timeout() *time.Duration {
	switch {
	case c.opts.Timeout > 0:
		d := c.opts.Timeout
		return &d
	case c.opts.Timeout < 0:
		d := time.Duration(0)
		return &d
	}
	return nil
}

// begin starts an operation under the client's timeoutMS (see csot).
func (c *Client) begin(ctx context.Context) (context.Context, context.CancelFunc) {
	return csot.Start(ctx, c.timeout())
}

// execute runs op with the explicit session s (nil: an implicit one). An
// operation not begun by its public method (see begin) is begun here under
// the client's timeoutMS.
func (c *Client) execute(ctx context.Context, op *exec.Operation, s *Session) (exec.Result, error) {
	if c.closed.Load() {
		return exec.Result{}, ErrClientDisconnected
	}
	if s != nil {
		sc, err := s.use(c)
		if err != nil {
			return exec.Result{}, err
		}
		if op.Flags.Has(exec.Unacknowledged) {
			return exec.Result{}, ErrUnacknowledgedSession
		}
		op.Session = sc
		op.Flags &^= exec.KeepSession
		if !op.Flags.Has(exec.TxnCommand) { // WithTransaction's own commits and aborts keep their contexts
			var cancel context.CancelFunc
			if ctx, cancel, err = s.txnContext(ctx); err != nil {
				return exec.Result{}, err
			}
			defer cancel()
		}
		if rp, inTxn := s.txnReadPref(); inTxn && !op.Flags.Has(exec.Write) && op.Server == nil {
			// The transaction's read preference replaces the
			// collection's; a transaction reads from the primary only.
			if rp != nil && rp.Mode != PrimaryMode {
				return exec.Result{}, ErrTransactionReadPreference
			}
			op.ReadPref = nil
		}
	}
	ctx, cancel := c.begin(ctx)
	defer cancel()
	if d, ok := csot.Timeout(ctx); ok && d < 0 {
		return exec.Result{}, argError("negative timeout %v (WithTimeout, DatabaseOptions.Timeout or BucketOptions.Timeout)", d)
	}
	if err := csot.Err(ctx); err != nil {
		return exec.Result{}, argError("%v", err)
	}
	res, err := c.exec.Execute(ctx, op)
	return res, err
}

// readPref is the read preference an operation selects by: nil for
// primary, else a copy the caller cannot change under the operation.
func readPref(rp *ReadPreference) *readpref.ReadPref {
	if rp == nil || rp.Mode == PrimaryMode {
		return nil
	}
	out := *rp
	out.TagSets = slices.Clone(rp.TagSets)
	return &out
}

// writeConcernDoc is the writeConcern field of a write command, or an
// untyped nil for the server's default.
func writeConcernDoc(wc *WriteConcern) any {
	if wc == nil {
		return nil
	}
	var d bson.D
	if wc.W != nil {
		d = append(d, bson.E{Key: "w", Value: wc.W})
	}
	if wc.Journal != nil {
		d = append(d, bson.E{Key: "j", Value: *wc.Journal})
	}
	if wc.WTimeout > 0 {
		d = append(d, bson.E{Key: "wtimeout", Value: wc.WTimeout.Milliseconds()})
	}
	if len(d) == 0 {
		return nil
	}
	return d
}
