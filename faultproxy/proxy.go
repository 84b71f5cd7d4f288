package faultproxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/wire"
)

// Options configures a Proxy. Only Upstreams is required.
type Options struct {
	// Upstreams are the servers to front ("host:port"): one standalone
	// server, any members of a replica set (the rest are discovered), or
	// mongos routers. Each gets its own listener, in this order.
	Upstreams []string
	// Listen is the address of the first listener; default
	// "127.0.0.1:0". When its port is not 0, listener i uses port+i.
	Listen string
	// AdvertiseHost is the host put in URI and in rewritten hello replies;
	// default the Listen host, or 127.0.0.1 when that is a wildcard.
	AdvertiseHost string
	// Rules are the initial rules; SetRules replaces them.
	Rules []Rule
	// Seed seeds the probability draws of rules without their own Seed;
	// 0 means 1, so runs are reproducible unless a seed is chosen.
	Seed int64
	// NoDiscovery skips the hello Start sends to each upstream to learn the
	// replica set's members and name. Members still get listeners when a
	// reply first names them, but URI lists only Upstreams' listeners and
	// Start does not fail when no upstream is reachable.
	NoDiscovery bool
	// MaxListeners bounds the listeners opened for servers that replies
	// name; default 64.
	MaxListeners int
	// DialTimeout bounds connecting to an upstream, and Start's discovery
	// hello to each; default 10s.
	DialTimeout time.Duration
	// MaxMessageSize is the largest message accepted from either side; 0
	// means wire.DefaultMaxMessageSize.
	MaxMessageSize int32
	// TLS, when set, makes the listeners accept only TLS clients.
	TLS *tls.Config
	// UpstreamTLS, when set, makes the proxy connect to upstreams with TLS.
	UpstreamTLS *tls.Config
	// Logf, when set, receives one line per fired rule and per connection
	// closed because of an error.
	Logf func(format string, args ...any)
}

// Errors of Start and Proxy methods.
var (
	ErrClosed     = errors.New("faultproxy: proxy closed")
	ErrNoUpstream = errors.New("faultproxy: no upstream server given")
)

// DiscoveryError is returned by Start when no upstream answered its hello.
type DiscoveryError struct {
	Errs map[string]error // by upstream address
}

func (e *DiscoveryError) Error() string {
	parts := make([]string, 0, len(e.Errs))
	for addr, err := range e.Errs {
		parts = append(parts, addr+": "+err.Error())
	}
	sort.Strings(parts)
	return "faultproxy: no upstream answered hello (" + strings.Join(parts, "; ") + ")"
}

// Proxy is a running fault-injection proxy.
type Proxy struct {
	opts       Options
	ctx        context.Context // canceled by Close
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	listenHost string
	basePort   int
	advertise  string

	rules      atomic.Pointer[ruleSet]
	nextConnID atomic.Int64
	nextReqID  atomic.Int32
	stats      counters

	mu         sync.Mutex
	closed     bool
	listeners  []*listener
	byUpstream map[string]*listener // lower-cased "host:port" of a server → its listener
	conns      map[*proxyConn]struct{}
	setName    string
	closeOnce  sync.Once
}

type listener struct {
	ln       net.Listener
	addr     string // advertised "host:port"
	upstream string
	conns    atomic.Int64
	requests atomic.Int64
}

type counters struct {
	connsAccepted, upstreamDials, discoveryDials, discoveryCommands atomic.Int64
	requests, forwarded, replies, injected, repliesDropped          atomic.Int64
	fired, hellosRewritten, malformed                               atomic.Int64
}

// Stats are cumulative counters of a Proxy.
type Stats struct {
	ConnsAccepted     int64 // client connections accepted
	UpstreamDials     int64 // connections opened to upstreams for clients
	DiscoveryDials    int64 // connections Start opened to upstreams for discovery
	DiscoveryCommands int64 // hellos Start sent on them
	Requests          int64 // messages read from clients
	Forwarded         int64 // messages forwarded to upstreams
	Replies           int64 // upstream replies passed to clients
	Injected          int64 // replies the proxy made up (error, shed)
	RepliesDropped    int64 // upstream replies swallowed (drop-reply)
	Fired             int64 // rule firings
	HellosRewritten   int64 // hello replies whose addresses were rewritten
	Malformed         int64 // connections closed for malformed or unexpected traffic
}

// ListenerInfo describes one listener.
type ListenerInfo struct {
	Addr     string // the address clients use
	Upstream string // the server it forwards to
	Conns    int64  // client connections accepted on it
	Requests int64  // messages read from its clients
}

// Start starts a proxy: it asks the upstreams for hello (unless
// NoDiscovery), opens one listener per server and serves until Close. ctx
// bounds only the start-up.
func Start(ctx context.Context, o Options) (*Proxy, error) {
	if len(o.Upstreams) == 0 {
		return nil, ErrNoUpstream
	}
	if o.Listen == "" {
		o.Listen = "127.0.0.1:0"
	}
	if o.MaxListeners <= 0 {
		o.MaxListeners = 64
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 10 * time.Second
	}
	if o.MaxMessageSize <= 0 {
		o.MaxMessageSize = wire.DefaultMaxMessageSize
	}
	host, portStr, err := net.SplitHostPort(o.Listen)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen address %q: %w", o.Listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("faultproxy: listen address %q: bad port", o.Listen)
	}
	for _, u := range o.Upstreams {
		if _, _, err := net.SplitHostPort(u); err != nil {
			return nil, fmt.Errorf("faultproxy: upstream %q: %w", u, err)
		}
	}
	rs, err := newRuleSet(o.Rules, o.Seed)
	if err != nil {
		return nil, err
	}
	adv := o.AdvertiseHost
	if adv == "" {
		adv = host
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			adv = "127.0.0.1"
		}
	}
	pctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		opts: o, ctx: pctx, cancel: cancel,
		listenHost: host, basePort: port, advertise: adv,
		byUpstream: map[string]*listener{},
		conns:      map[*proxyConn]struct{}{},
	}
	p.rules.Store(rs)

	var found []string      // servers named by discovery replies
	mes := map[int]string{} // upstream index → the name it calls itself
	if !o.NoDiscovery {
		errs := map[string]error{}
		for i, u := range o.Upstreams {
			d, err := p.discover(ctx, u)
			if err != nil {
				errs[u] = err
				continue
			}
			if d.me != "" {
				mes[i] = d.me
			}
			if d.setName != "" && p.setName == "" {
				p.setName = d.setName
			}
			found = append(found, d.hosts...)
		}
		if len(errs) == len(o.Upstreams) {
			cancel()
			return nil, &DiscoveryError{Errs: errs}
		}
	}
	if err := p.openListeners(mes, found); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// openListeners opens the listeners of the upstreams (aliased to the names
// they call themselves) and of the servers discovery found.
func (p *Proxy) openListeners(mes map[int]string, found []string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, u := range p.opts.Upstreams {
		l, err := p.listenerLocked(u)
		if err != nil {
			return err
		}
		if mes[i] != "" {
			p.aliasLocked(mes[i], l)
		}
	}
	for _, h := range found {
		if _, err := p.listenerLocked(h); err != nil {
			return err
		}
	}
	return nil
}

func (p *Proxy) logf(format string, args ...any) {
	if p.opts.Logf != nil {
		p.opts.Logf(format, args...)
	}
}

func hostKey(addr string) string { return strings.ToLower(addr) }

func (p *Proxy) aliasLocked(addr string, l *listener) {
	if _, ok := p.byUpstream[hostKey(addr)]; !ok {
		p.byUpstream[hostKey(addr)] = l
	}
}

// listenerLocked returns the listener for upstream, opening one if needed.
func (p *Proxy) listenerLocked(upstream string) (*listener, error) {
	if l, ok := p.byUpstream[hostKey(upstream)]; ok {
		return l, nil
	}
	if p.closed {
		return nil, ErrClosed
	}
	if len(p.listeners) >= p.opts.MaxListeners {
		return nil, fmt.Errorf("faultproxy: no listener for %s: MaxListeners (%d) reached", upstream, p.opts.MaxListeners)
	}
	port := 0
	if p.basePort != 0 {
		port = p.basePort + len(p.listeners)
	}
	addr := net.JoinHostPort(p.listenHost, strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listener for %s: %w", upstream, err)
	}
	_, actualPort, _ := net.SplitHostPort(ln.Addr().String())
	if p.opts.TLS != nil {
		ln = tls.NewListener(ln, p.opts.TLS)
	}
	l := &listener{ln: ln, addr: net.JoinHostPort(p.advertise, actualPort), upstream: upstream}
	p.listeners = append(p.listeners, l)
	p.byUpstream[hostKey(upstream)] = l
	p.wg.Add(1)
	go p.accept(l)
	return l, nil
}

// mapHost returns the proxy address standing for server addr; self, when
// set, is the listener of the server that calls itself addr ("me"). A
// server that cannot get a listener keeps its own address.
func (p *Proxy) mapHost(addr string, self *listener) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if self != nil {
		p.aliasLocked(addr, self)
		return self.addr
	}
	l, err := p.listenerLocked(addr)
	if err != nil {
		p.logf("faultproxy: %v; clients may reach %s directly", err, addr)
		return addr
	}
	return l.addr
}

type discovered struct {
	me, setName string
	hosts       []string
}

// discover asks one upstream for isMaster; DialTimeout bounds the whole
// exchange, so a server that accepts but never answers cannot hang Start.
func (p *Proxy) discover(ctx context.Context, upstream string) (discovered, error) {
	var d discovered
	ctx, cancel := context.WithTimeout(ctx, p.opts.DialTimeout)
	defer cancel()
	c, err := p.dialUpstream(ctx, upstream)
	if err != nil {
		return d, err
	}
	defer c.Close()
	p.stats.discoveryDials.Add(1)
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	body, err := bson.Marshal(bson.D{{Key: "isMaster", Value: int32(1)}, {Key: "$db", Value: "admin"}})
	if err != nil {
		return d, err
	}
	reqID := p.nextReqID.Add(1)
	if _, err := c.Write(wire.AppendMsg(nil, reqID, 0, &wire.Msg{Body: body})); err != nil {
		return d, err
	}
	p.stats.discoveryCommands.Add(1)
	b, err := wire.ReadMessage(c, nil, p.opts.MaxMessageSize)
	if err != nil {
		if ctx.Err() != nil {
			return d, ctx.Err()
		}
		return d, err
	}
	m, err := wire.Decode(b, p.opts.MaxMessageSize)
	if err != nil {
		return d, err
	}
	if m.Msg == nil {
		return d, fmt.Errorf("answered isMaster with %s", m.Header.OpCode)
	}
	doc := m.Msg.Body
	if ok, _ := doc.Lookup("ok").AsFloat64OK(); ok != 1 {
		return d, fmt.Errorf("isMaster failed: %s", doc)
	}
	d.me, _ = doc.Lookup("me").StringValueOK()
	d.setName, _ = doc.Lookup("setName").StringValueOK()
	for _, key := range []string{"hosts", "passives", "arbiters"} {
		arr, ok := doc.Lookup(key).ArrayOK()
		if !ok {
			continue
		}
		vals, _ := arr.Values()
		for _, v := range vals {
			if s, ok := v.StringValueOK(); ok {
				d.hosts = append(d.hosts, s)
			}
		}
	}
	return d, nil
}

func (p *Proxy) dialUpstream(ctx context.Context, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, p.opts.DialTimeout)
	defer cancel()
	if p.opts.UpstreamTLS != nil {
		cfg := p.opts.UpstreamTLS.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		d := tls.Dialer{Config: cfg}
		return d.DialContext(ctx, "tcp", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

func (p *Proxy) accept(l *listener) {
	defer p.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			if p.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			p.logf("faultproxy: accept on %s: %v", l.addr, err)
			if !sleepCtx(p.ctx, 10*time.Millisecond) {
				return
			}
			continue
		}
		pc := p.newConn(l, c)
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			pc.cancel()
			return
		}
		p.conns[pc] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		p.stats.connsAccepted.Add(1)
		l.conns.Add(1)
		go pc.serve()
	}
}

func (p *Proxy) untrack(pc *proxyConn) {
	p.mu.Lock()
	delete(p.conns, pc)
	p.mu.Unlock()
}

// Close stops the listeners, closes every connection and waits for every
// goroutine the proxy started. It is idempotent.
func (p *Proxy) Close() error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		ls := append([]*listener(nil), p.listeners...)
		conns := make([]*proxyConn, 0, len(p.conns))
		for c := range p.conns {
			conns = append(conns, c)
		}
		p.mu.Unlock()
		p.cancel()
		for _, l := range ls {
			_ = l.ln.Close()
		}
		for _, c := range conns {
			c.close(false)
		}
		p.wg.Wait()
	})
	return nil
}

// Addrs returns the listeners' addresses, in the order they were opened
// (Upstreams first, then discovered members).
func (p *Proxy) Addrs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, len(p.listeners))
	for i, l := range p.listeners {
		out[i] = l.addr
	}
	return out
}

// Listeners describes every listener.
func (p *Proxy) Listeners() []ListenerInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]ListenerInfo, len(p.listeners))
	for i, l := range p.listeners {
		out[i] = ListenerInfo{Addr: l.addr, Upstream: l.upstream, Conns: l.conns.Load(), Requests: l.requests.Load()}
	}
	return out
}

// URI returns a connection string that reaches the deployment through the
// proxy: every listener and, for a replica set, its name.
func (p *Proxy) URI() string {
	u := "mongodb://" + strings.Join(p.Addrs(), ",") + "/"
	var params []string
	p.mu.Lock()
	if p.setName != "" {
		params = append(params, "replicaSet="+p.setName)
	}
	p.mu.Unlock()
	if p.opts.TLS != nil {
		params = append(params, "tls=true")
	}
	if len(params) > 0 {
		u += "?" + strings.Join(params, "&")
	}
	return u
}

// SetRules validates and installs rules, replacing the current ones and
// their counters; connections already open use them from their next
// request.
func (p *Proxy) SetRules(rules []Rule) error {
	rs, err := newRuleSet(rules, p.opts.Seed)
	if err != nil {
		return err
	}
	p.rules.Store(rs)
	return nil
}

// Counts reports, for each installed rule in order, how many requests it
// matched and how often it fired.
func (p *Proxy) Counts() []RuleCount { return p.rules.Load().counts() }

// Stats returns the proxy's cumulative counters.
func (p *Proxy) Stats() Stats {
	s := &p.stats
	return Stats{
		ConnsAccepted: s.connsAccepted.Load(), UpstreamDials: s.upstreamDials.Load(),
		DiscoveryDials: s.discoveryDials.Load(), DiscoveryCommands: s.discoveryCommands.Load(),
		Requests: s.requests.Load(), Forwarded: s.forwarded.Load(), Replies: s.replies.Load(),
		Injected: s.injected.Load(), RepliesDropped: s.repliesDropped.Load(), Fired: s.fired.Load(),
		HellosRewritten: s.hellosRewritten.Load(), Malformed: s.malformed.Load(),
	}
}

// sleepCtx waits d or until ctx ends; it reports whether d passed.
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
