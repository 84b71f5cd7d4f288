package sturdy

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/internal/csot"
	"github.com/sturdy-go/sturdy/internal/exec"
	"github.com/sturdy-go/sturdy/internal/session"
	"github.com/sturdy-go/sturdy/internal/topology"
	"github.com/sturdy-go/sturdy/readpref"
)

// Client is a handle to a MongoDB deployment: it monitors the servers, pools
// connections and sessions, and runs every operation through one execution
// path. It is safe for concurrent use; create one per deployment and share it.
type Client struct {
	opts     Options // as given, SRV resolved; the layers below resolve defaults
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
//
// The options travel down as one connstring.Settings: the topology, its
// pools and their connections, and the executor each read the fields they
// need and apply the defaults of connstring.Defaults themselves.
func ConnectWithOptions(ctx context.Context, o Options) (*Client, error) {
	o, err := o.prepare(ctx)
	if err != nil {
		return nil, err
	}
	s := o.settings()
	topo, err := topology.New(topology.OptionsFrom(s))
	if err != nil {
		return nil, err
	}
	if err := topo.Connect(ctx); err != nil {
		return nil, err
	}
	sessions := session.NewPool(nil)
	return &Client{opts: o, topo: topo, sessions: sessions, exec: exec.New(topo, sessions, s)}, nil
}

// prepare validates o, resolves its SRV name into seeds and logs the
// connection string's warnings: what Connect does before any layer below
// sees the options.
func (o Options) prepare(ctx context.Context) (Options, error) {
	if err := o.validate(); err != nil {
		return Options{}, err
	}
	if o.SRVHost != "" {
		resolved, err := o.resolveSRV(ctx)
		if err != nil {
			return Options{}, err
		}
		o = resolved
	}
	if o.Logger != nil {
		for _, w := range o.Warnings {
			o.Logger.Warn("sturdy: connection string", "warning", w)
		}
	}
	return o, nil
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
		// An executor without a session pool (endSessions carries no lsid)
		// and without retries: ending sessions is best effort.
		noSessions := &exec.Executor{Topology: c.topo, Monitor: c.exec.Monitor, Logger: c.exec.Logger}
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
		sel := topology.ReadPrefSelector(readpref.ReadPref{Mode: readpref.PrimaryPreferred}, c.topo.Options().HeartbeatInterval)
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
