package conn

import (
	"bufio"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/internal/connstring"
	"github.com/sturdy-go/sturdy/mongoerr"
	"github.com/sturdy-go/sturdy/wire"
)

// DriverName and DriverVersion identify sturdy in the handshake metadata.
const (
	DriverName    = "sturdy"
	DriverVersion = "0.1.0"
)

// maxMetadataSize is the handshake specification's limit on the client
// metadata document.
const maxMetadataSize = 512

// Options configures Dial. The zero value dials plain TCP with no timeout
// of its own (the ctx given to Dial governs), no compression and no
// authentication. Values are taken literally; OptionsFrom applies the
// client's defaults.
type Options struct {
	// AppName is sent as client.application.name (at most 128 bytes).
	AppName string
	// DialTimeout bounds connecting, TLS and the handshake together; 0
	// means no bound but the ctx given to Dial, which can end it sooner.
	DialTimeout time.Duration
	// TLSConfig turns on TLS; nil means plain TCP. ServerName defaults to
	// the host part of the address.
	TLSConfig *tls.Config
	// Compressors are offered in the handshake in order of preference:
	// "zstd", "zlib", "snappy". The first one the server accepts is used.
	Compressors []string
	// ZlibLevel is the zlib level, -1 to 9; 0 means zlib's default (-1),
	// since storing without compression would defeat the purpose.
	ZlibLevel int
	// Credential, if set, authenticates the connection.
	Credential *connstring.Credential
	// Dialer replaces net.Dialer (e.g. for a proxy or a test).
	Dialer func(ctx context.Context, network, addr string) (net.Conn, error)
	// DriverName, DriverVersion and DriverPlatform are appended (after a
	// "|") to sturdy's metadata by libraries that wrap sturdy.
	DriverName, DriverVersion, DriverPlatform string
	// LoadBalanced says the server is a load balancer in front of mongos
	// services: the handshake says loadBalanced: true and the reply must
	// carry the serviceId of the service the connection reached.
	LoadBalanced bool
	// ID, when positive, is the connection's id; a pool passes the id its
	// CMAP events use so command and pool events name one connection alike.
	// 0 takes the next id of a process-wide counter.
	ID int64
	// SocketTimeout, when positive, bounds every round trip after the
	// handshake whose context has no earlier deadline (socketTimeoutMS).
	SocketTimeout time.Duration
}

// OptionsFrom is the connection options a client's settings ask for, with
// the defaults of connstring.Defaults applied: a negative ConnectTimeout
// (connectTimeoutMS=0) becomes 0, no timeout of its own. SocketTimeout is
// left to the topology, which gives it to application connections only.
func OptionsFrom(s connstring.Settings) Options {
	dialTimeout := cmp.Or(s.ConnectTimeout, connstring.Defaults.ConnectTimeout)
	if dialTimeout < 0 {
		dialTimeout = 0
	}
	return Options{
		AppName:      s.AppName,
		DialTimeout:  dialTimeout,
		TLSConfig:    s.TLS,
		Compressors:  s.Compressors,
		ZlibLevel:    connstring.OrDefault(s.ZlibLevel, connstring.Defaults.ZlibLevel),
		Credential:   s.Auth,
		Dialer:       s.Dialer,
		LoadBalanced: s.LoadBalanced,
	}
}

// ErrNoServiceID is returned (wrapped) by Dial in load-balanced mode when
// the hello reply has no serviceId: the server is not behind a load
// balancer configured for drivers. The text is the load balancer
// specification's.
//
//lint:ignore ST1005 the load balancer specification fixes this text.
var ErrNoServiceID = errors.New("Driver attempted to initialize in load balancing mode, but the server does not support this mode.")

// Dial connects to addr (host:port), runs the hello handshake and
// authenticates if a Credential is set. Failures to connect or during the
// handshake are *NetworkError with Op "dial" or "handshake"; a rejected
// authentication is an *AuthError. Option mistakes are plain errors.
func Dial(ctx context.Context, addr string, o Options) (*Conn, error) {
	p, err := prepare(o)
	if err != nil {
		return nil, err
	}
	if o.DialTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.DialTimeout)
		defer cancel()
	}
	nc, err := dialNet(ctx, addr, o)
	if err != nil {
		return nil, netError(ctx, addr, "dial", err)
	}
	c := newConn(nc, addr, o)
	// The socket timeout applies after the handshake: DialTimeout bounds it.
	defer func() { c.socketTimeout = o.SocketTimeout }()
	if err := c.handshake(ctx, o, p); err != nil {
		c.Close()
		return nil, err
	}
	if p.auth != nil {
		if err := c.authenticate(ctx, o, p.auth); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// dialPlan is what Dial derives from its Options before connecting.
type dialPlan struct {
	comp bson.A // compressor names offered, in order of preference
	meta bson.D // client metadata
	auth authenticator
}

// prepare checks o and derives the handshake's parts, so that option
// mistakes fail before anything is dialled.
func prepare(o Options) (dialPlan, error) {
	var p dialPlan
	var err error
	if p.comp, err = offeredCompressors(o.Compressors); err != nil {
		return p, err
	}
	if len(o.AppName) > connstring.Defaults.MaxAppNameBytes {
		return p, fmt.Errorf("application name is %d bytes, more than the %d allowed", len(o.AppName), connstring.Defaults.MaxAppNameBytes)
	}
	if o.ZlibLevel < -1 || o.ZlibLevel > 9 {
		return p, fmt.Errorf("zlib level %d out of range -1..9", o.ZlibLevel)
	}
	if p.meta, err = clientMetadata(o); err != nil {
		return p, err
	}
	if o.Credential != nil {
		if p.auth, err = newAuthenticator(o.Credential); err != nil {
			return p, err
		}
	}
	return p, nil
}

// newConn wraps an established network connection.
func newConn(nc net.Conn, addr string, o Options) *Conn {
	now := time.Now()
	c := &Conn{
		nc:          nc,
		rd:          bufio.NewReaderSize(nc, readBufferSize),
		addr:        addr,
		id:          connID(o.ID),
		createdAt:   now,
		zlibLevel:   cmp.Or(o.ZlibLevel, -1), // see Options.ZlibLevel
		maxMsgSize:  wire.DefaultMaxMessageSize,
		maxSendSize: wire.DefaultMaxMessageSize,
	}
	c.lastUsed.Store(now.UnixNano())
	c.abortFn = c.abort
	return c
}

// helloCommand is the handshake's hello.
func helloCommand(o Options, p dialPlan) (bson.D, error) {
	hello := bson.D{
		{Key: "hello", Value: int32(1)},
		{Key: "helloOk", Value: true},
		{Key: "client", Value: p.meta},
	}
	if len(p.comp) > 0 {
		hello = append(hello, bson.E{Key: "compression", Value: p.comp})
	}
	hello = append(hello, bson.E{Key: "backpressure", Value: true})
	if o.LoadBalanced {
		hello = append(hello, bson.E{Key: "loadBalanced", Value: true})
	}
	if p.auth != nil {
		if u := p.auth.mechsQuery(); u != "" {
			hello = append(hello, bson.E{Key: "saslSupportedMechs", Value: u})
		}
		spec, err := p.auth.speculative()
		if err != nil {
			return nil, err
		}
		if spec != nil {
			hello = append(hello, bson.E{Key: "speculativeAuthenticate", Value: spec})
		}
	}
	return hello, nil
}

// handshake runs hello and applies the reply: the description, message
// size limits and the negotiated compressor.
func (c *Conn) handshake(ctx context.Context, o Options, p dialPlan) error {
	hello, err := helloCommand(o, p)
	if err != nil {
		return err
	}
	body, err := bson.Marshal(hello)
	if err != nil {
		return fmt.Errorf("encoding hello: %w", err)
	}
	start := time.Now()
	reply, err := c.Send(ctx, &Request{DB: "admin", Command: body})
	if err != nil {
		var ne *mongoerr.NetworkError
		if errors.As(err, &ne) {
			ne.Op = "handshake"
			return ne
		}
		return netError(ctx, c.addr, "handshake", err)
	}
	c.handshakeRTT = time.Since(start)
	desc, err := ParseDescription(reply.Body)
	if err != nil {
		return netError(ctx, c.addr, "handshake", fmt.Errorf("decoding hello reply: %w", err))
	}
	if o.LoadBalanced && desc.ServiceID == nil {
		return fmt.Errorf("%s: %w", c.addr, ErrNoServiceID)
	}
	c.desc = desc
	c.serverConnID = desc.ConnectionID
	if desc.MaxMessageSizeBytes > 0 {
		// Replies are accepted up to the larger of the advertised and the
		// default size; what we send must fit what the server accepts.
		c.maxSendSize = desc.MaxMessageSizeBytes
		c.maxMsgSize = max(desc.MaxMessageSizeBytes, wire.DefaultMaxMessageSize)
	}
	return c.useCompressor(ctx, p.comp)
}

// useCompressor turns on the compressor the server chose, which must be
// one that was offered.
func (c *Conn) useCompressor(ctx context.Context, offered bson.A) error {
	name := c.desc.Compression
	if name == "" {
		return nil
	}
	id, known := wire.CompressorByName(name)
	if !known || !slices.Contains(offered, any(name)) {
		return netError(ctx, c.addr, "handshake", fmt.Errorf("server chose compressor %q, which was not offered", name))
	}
	c.compressor, c.compress = id, true
	return nil
}

// authenticate runs the credential's conversation after the handshake.
func (c *Conn) authenticate(ctx context.Context, o Options, auth authenticator) error {
	err := auth.authenticate(ctx, c)
	if err == nil || c.desc.ServiceID == nil {
		return err
	}
	// After the handshake: SDAM error handling clears this service's
	// connections (load balancer specification), so the error says which
	// service, network errors too.
	var ae *mongoerr.AuthError
	if !errors.As(err, &ae) {
		ae = &mongoerr.AuthError{Mechanism: o.Credential.Mechanism, Err: err}
		err = ae
	}
	ae.ServiceID = c.desc.ServiceID
	return err
}

// HandshakeRTT is how long the hello round trip of the handshake took.
func (c *Conn) HandshakeRTT() time.Duration { return c.handshakeRTT }

func dialNet(ctx context.Context, addr string, o Options) (net.Conn, error) {
	dial := o.Dialer
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	nc, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tcp, ok := nc.(*net.TCPConn); ok {
		_ = tcp.SetKeepAlive(true)
		_ = tcp.SetNoDelay(true)
	}
	if o.TLSConfig == nil {
		return nc, nil
	}
	cfg := o.TLSConfig.Clone()
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		cfg.ServerName = host
	}
	tc := tls.Client(nc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return tc, nil
}

// offeredCompressors validates the configured compressor names.
func offeredCompressors(names []string) (bson.A, error) {
	var out bson.A
	for _, n := range names {
		c, ok := wire.CompressorByName(n)
		if !ok || c == wire.CompressorNoop {
			return nil, fmt.Errorf("unknown compressor %q (want zstd, zlib or snappy)", n)
		}
		out = append(out, c.String())
	}
	return out, nil
}

// clientMetadata builds hello's client document, shrinking it below 512 bytes
// as the handshake specification orders: first os keeps only its type, then
// platform is truncated.
func clientMetadata(o Options) (bson.D, error) {
	name, version, platform := DriverName, DriverVersion, runtime.Version()
	if o.DriverName != "" {
		name += "|" + o.DriverName
	}
	if o.DriverVersion != "" {
		version += "|" + o.DriverVersion
	}
	if o.DriverPlatform != "" {
		platform += "|" + o.DriverPlatform
	}
	build := func(fullOS bool, platform string) bson.D {
		var d bson.D
		if o.AppName != "" {
			d = append(d, bson.E{Key: "application", Value: bson.D{{Key: "name", Value: o.AppName}}})
		}
		d = append(d, bson.E{Key: "driver", Value: bson.D{{Key: "name", Value: name}, {Key: "version", Value: version}}})
		osDoc := bson.D{{Key: "type", Value: runtime.GOOS}}
		if fullOS {
			osDoc = append(osDoc, bson.E{Key: "name", Value: runtime.GOOS}, bson.E{Key: "architecture", Value: runtime.GOARCH})
		}
		d = append(d, bson.E{Key: "os", Value: osDoc})
		if platform != "" {
			d = append(d, bson.E{Key: "platform", Value: platform})
		}
		return d
	}
	size := func(d bson.D) int {
		b, err := bson.Marshal(d)
		if err != nil {
			return maxMetadataSize + 1
		}
		return len(b)
	}
	d := build(true, platform)
	if size(d) <= maxMetadataSize {
		return d, nil
	}
	d = build(false, platform)
	if n := size(d); n <= maxMetadataSize {
		return d, nil
	} else if cut := n - maxMetadataSize; cut < len(platform) {
		d = build(false, platform[:len(platform)-cut])
		if size(d) <= maxMetadataSize {
			return d, nil
		}
	}
	d = build(false, "")
	if size(d) <= maxMetadataSize {
		return d, nil
	}
	return nil, fmt.Errorf("client metadata exceeds %d bytes even without optional fields; shorten the driver name or version", maxMetadataSize)
}

func connID(id int64) int64 {
	if id > 0 {
		return id
	}
	return connIDs.Add(1)
}
