package mongosim

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/blackpipe"
	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// Balancer is the listener of load-balanced mode (Options.LoadBalanced): an
// L4 load balancer in front of the routers. Each client connection is bound
// to one router, chosen round-robin among the running ones when the
// connection opens, for its whole life, as a TCP balancer binds a client
// socket to one backend socket. Everything on the connection is that
// router's: its fail points and ingress limiter. The balancer also opens a
// real backend connection to the router for each client connection (the
// requests themselves are handed to the router in process): the router's
// MaxConnections counts and refuses it, and when the router stops and
// closes it, the balancer closes the client's connection at once, as a TCP
// balancer does when its backend socket dies.
//
// The router answers the connection's first hello as a mongos started
// with loadBalancerPort answers a connection arriving through the
// balancer: with serviceId (the router's processId, so a restarted router
// is a new service) when the hello says loadBalanced: true, and with
// LoadBalancerSupportMismatch (354) when it does not.
type Balancer struct {
	cluster *Cluster
	routers []*Router // the backends
	addr    string

	mu       sync.Mutex
	srv      *blackpipe.Server
	stopped  bool
	next     int                   // round-robin position
	backends map[net.Conn]struct{} // open backend connections
	wg       sync.WaitGroup        // backend watchers
}

// codeLoadBalancerSupportMismatch is mongos' answer to a driver that
// reached it through a load balancer without saying loadBalanced: true.
const codeLoadBalancerSupportMismatch = 354

// lbConnKey keys a balancer connection's *lbConn in blackpipe.Conn values.
type lbConnKey struct{}

// lbConn is a client connection's binding to its router.
type lbConn struct {
	r       *Router
	backend net.Conn

	mu      sync.Mutex
	helloed bool // the first hello was answered
	served  bool // a request was handed to the router
	closing bool // the client connection is closing
}

// validateBalancerOptions checks LoadBalanced against the router options.
func validateBalancerOptions(o Options) error {
	if o.LoadBalanced && o.Routers == 0 {
		return errors.New("mongosim: LoadBalanced needs Routers >= 1 (the balancer fronts mongos routers)")
	}
	return nil
}

// startBalancer starts, when Options.LoadBalanced is set, the load
// balancer in front of every router (on the first port after the routers and
// shards when Port is set) and one in front of the first router only (the next port), as the
// load balancer specification's test setup has both.
func (c *Cluster) startBalancer() error {
	if !c.opts.LoadBalanced {
		return nil
	}
	if err := validateBalancerOptions(c.opts); err != nil {
		return err
	}
	var err error
	if c.balancer, err = c.listenBalancer(c.routers, 0); err != nil {
		return err
	}
	if c.singleBalancer, err = c.listenBalancer(c.routers[:1], 1); err != nil {
		_ = c.balancer.close()
		c.balancer = nil
		return err
	}
	return nil
}

func (c *Cluster) listenBalancer(routers []*Router, i int) (*Balancer, error) {
	addr := net.JoinHostPort(c.opts.Host, "0")
	if c.opts.Port != 0 {
		// After the routers and, in a multi-shard cluster, after the
		// other shards' members (shard_cluster.go).
		port := c.opts.Port + c.opts.Members + c.opts.Routers + i
		if c.opts.Shards > 1 {
			port += (c.opts.Shards - 1) * c.opts.Members
		}
		addr = net.JoinHostPort(c.opts.Host, strconv.Itoa(port))
	}
	b := &Balancer{cluster: c, routers: routers, backends: map[net.Conn]struct{}{}}
	bo := blackpipe.Options{
		Addr:                  addr,
		Compressors:           c.opts.Compressors,
		NoDefaults:            true,
		Handler:               b.handle,
		AcceptConn:            b.accept,
		OnConnClose:           b.closed,
		PartialMessageTimeout: c.opts.PartialMessageTimeout,
		IdleTimeout:           c.opts.IdleTimeout,
	}
	if lg := c.opts.Logger; lg != nil {
		bo.Logf = func(format string, args ...any) { lg.Debug(fmt.Sprintf(format, args...)) }
	}
	srv, err := blackpipe.Listen(bo)
	if err != nil {
		return nil, fmt.Errorf("mongosim: load balancer: %w", err)
	}
	b.mu.Lock()
	b.srv, b.addr = srv, srv.Addr()
	b.mu.Unlock()
	return b, nil
}

// Balancer returns the load balancer in front of every router, nil unless
// Options.LoadBalanced.
func (c *Cluster) Balancer() *Balancer { return c.balancer }

// SingleRouterBalancer returns the load balancer in front of the first
// router only, nil unless Options.LoadBalanced: through it every
// connection reaches the same mongos, so a fail point set through one
// connection applies to all of them.
func (c *Cluster) SingleRouterBalancer() *Balancer { return c.singleBalancer }

// LoadBalancedURI is the connection string through the load balancer,
// with loadBalanced=true; "" unless Options.LoadBalanced. URI returns the
// same in load-balanced mode.
func (c *Cluster) LoadBalancedURI() string {
	if c.balancer == nil {
		return ""
	}
	return c.balancer.URI()
}

// Addr is the balancer's "host:port".
func (b *Balancer) Addr() string { return b.addr }

// URI is the connection string a load-balancer-aware driver uses.
func (b *Balancer) URI() string { return "mongodb://" + b.addr + "/?loadBalanced=true" }

// close stops the listener, closes every client connection and its
// backend connection, and waits for the backend watchers.
func (b *Balancer) close() error {
	b.mu.Lock()
	srv := b.srv
	b.srv, b.stopped = nil, true
	b.mu.Unlock()
	var err error
	if srv != nil {
		err = srv.Close()
	}
	b.mu.Lock()
	for nc := range b.backends {
		_ = nc.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
	return err
}

// accept binds a new client connection to the next running router, round
// robin, and opens its backend connection; with no router running, or
// none accepting a connection, the client's connection is refused
// (closed), as a balancer with no healthy backend does.
func (b *Balancer) accept(conn *blackpipe.Conn) bool {
	routers := b.routers
	for range routers {
		b.mu.Lock()
		if b.stopped {
			b.mu.Unlock()
			return false
		}
		r := routers[b.next%len(routers)]
		b.next++
		b.mu.Unlock()
		if !r.running() {
			continue
		}
		nc, err := net.DialTimeout("tcp", r.addr, 5*time.Second)
		if err != nil {
			continue
		}
		lc := &lbConn{r: r, backend: nc}
		b.mu.Lock()
		b.backends[nc] = struct{}{}
		b.wg.Add(1)
		b.mu.Unlock()
		conn.SetValue(lbConnKey{}, lc)
		go b.watch(conn, lc)
		return true
	}
	return false
}

// watch reads the backend connection, on which the router never sends
// anything, until it ends: closed by the router (stopped, or over its
// MaxConnections) it closes the client's connection too. A backend the
// router drops while still running after serving requests (its
// IdleTimeout: the requests do not pass on the backend connection) is let
// go without closing the client's.
func (b *Balancer) watch(conn *blackpipe.Conn, lc *lbConn) {
	defer b.wg.Done()
	var buf [1]byte
	_, _ = lc.backend.Read(buf[:])
	_ = lc.backend.Close()
	b.mu.Lock()
	delete(b.backends, lc.backend)
	b.mu.Unlock()
	lc.mu.Lock()
	closing, served := lc.closing, lc.served
	lc.mu.Unlock()
	if !closing && (!lc.r.running() || !served) {
		_ = conn.Close()
	}
}

func (b *Balancer) closed(conn *blackpipe.Conn) {
	if lc, ok := conn.Value(lbConnKey{}).(*lbConn); ok {
		lc.mu.Lock()
		lc.closing = true
		lc.mu.Unlock()
		_ = lc.backend.Close()
	}
}

// running reports whether the router is listening.
func (r *Router) running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.srv != nil
}

// handle passes each request to the connection's router, answering the
// first hello with the service id itself.
func (b *Balancer) handle(br *blackpipe.Request) bool {
	lc, ok := br.Conn.Value(lbConnKey{}).(*lbConn)
	if !ok {
		_ = br.Hangup()
		return true
	}
	r := lc.r
	if !r.running() {
		// The router went away (its watcher is closing the connection).
		_ = br.Hangup()
		return true
	}
	lc.mu.Lock()
	lc.served = true
	lc.mu.Unlock()
	if isHelloName(br.Name) {
		lc.mu.Lock()
		first := !lc.helloed
		lc.helloed = true
		lc.mu.Unlock()
		if first {
			b.firstHello(r, br)
			return true
		}
	}
	return r.handle(br)
}

// firstHello answers a connection's first hello as mongos answers one
// arriving through its load-balancer port.
func (b *Balancer) firstHello(r *Router, br *blackpipe.Request) {
	c := b.cluster
	r.commands.Add(1)
	doc, err := br.Doc()
	if err != nil {
		_ = br.Reply(errorDoc(cmderr.New(cmderr.FailedToParse, "%v", err), nil))
		return
	}
	rq := &request{ctx: br.Context(), cluster: c, raw: br, db: br.DB, name: br.Name, cmd: doc, now: c.now()}
	var out outcome
	if _, answered := r.applyFailCommand(rq, &out); answered {
		return
	}
	lb, _ := rq.get("loadBalanced")
	if !asBool(lb) {
		r.replyErr(rq, &out, cmderr.New(codeLoadBalancerSupportMismatch,
			"The server is being accessed through a load balancer, but this driver does not have load balancing enabled"))
		// The error closes the connection on mongos.
		_ = br.Conn.Close()
		return
	}
	reply := r.helloReply(rq)
	// serviceId goes before ok, as mongos places it among its fields.
	reply = append(reply[:len(reply)-1:len(reply)-1],
		bson.E{Key: "serviceId", Value: r.pid()}, reply[len(reply)-1])
	_ = rq.send(reply)
}

// ServiceID is the serviceId the router reports through the load
// balancer: its processId, renewed when it restarts.
func (r *Router) ServiceID() bson.ObjectID { return r.pid() }
