package sturdy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/sturdy-go/sturdy/event"
	"github.com/sturdy-go/sturdy/internal/connstring"
	"github.com/sturdy-go/sturdy/readpref"
)

// Options configures a Client. The zero value of every field means its
// default, so Options{Hosts: []string{"localhost:27017"}} is a complete
// configuration. ParseURI builds an Options from a connection string.
type Options struct {
	// Hosts are the seed addresses as "host:port" ("[::1]:27017" for IPv6
	// literals) or UNIX socket paths ending in ".sock". Exactly one of Hosts
	// and SRVHost must be set.
	Hosts []string
	// SRVHost is the DNS name of a mongodb+srv connection string. Connect
	// looks up its SRV records (and TXT options) to find the seeds. SRVHost
	// does not switch TLS on by itself; ParseURI does that for mongodb+srv.
	SRVHost string
	// SRVServiceName is the service name of the SRV lookup. Default "mongodb".
	SRVServiceName string
	// SRVMaxHosts caps how many of the SRV results are used (picked at
	// random). Default 0: all of them.
	SRVMaxHosts int

	// ReplicaSet is the required replica set name. Default "": any.
	ReplicaSet string
	// Direct connects to the single host only (Single topology), without
	// discovering the rest of the deployment. Default false.
	Direct bool
	// LoadBalanced says the single host is a load balancer. Default false.
	LoadBalanced bool

	// TLS enables TLS with this configuration. Default nil: plain TCP.
	TLS *tls.Config
	// Auth is the credential to authenticate every connection with.
	// Default nil: no authentication.
	Auth *Credential
	// AppName is sent in the handshake's client metadata (at most 128
	// bytes). Default "".
	AppName string

	// MaxPoolSize is the largest number of connections per server.
	// Default 0: 100; a negative value means unlimited.
	MaxPoolSize int
	// MinPoolSize is the number of connections per server kept open in the
	// background. Default 0.
	MinPoolSize int
	// MaxConnecting is how many connections a pool establishes at once.
	// Default 0: 2.
	MaxConnecting int
	// MaxIdleTime closes pooled connections idle for longer. Default 0: never.
	MaxIdleTime time.Duration

	// ConnectTimeout bounds establishing a connection (TCP, TLS, handshake
	// and authentication). Default 0: 10 s; a negative value means no
	// timeout (connectTimeoutMS=0 in a URI).
	ConnectTimeout time.Duration
	// SocketTimeout bounds each network read or write. Default 0: none (the
	// operation's context governs).
	SocketTimeout time.Duration
	// ServerSelectionTimeout bounds the wait for a suitable server.
	// Default 0: 30 s.
	ServerSelectionTimeout time.Duration
	// HeartbeatInterval is the time between server checks; at least 500 ms.
	// Default 0: 10 s.
	HeartbeatInterval time.Duration
	// LocalThreshold is the width of the latency window in server
	// selection. Default nil: 15 ms; a pointer to 0 selects only the fastest.
	LocalThreshold *time.Duration
	// Timeout is the client's timeoutMS: one deadline for each whole
	// operation (selection, check-out, every attempt and backoff), told to
	// the server as maxTimeMS; retryable operations retry until it passes.
	// Databases, collections and WithTimeout override it; an earlier
	// context deadline still wins. Default 0: unset (legacy timeouts apply);
	// negative: timeoutMS=0, no limit but legacy timeouts ignored.
	Timeout time.Duration
	// ServerMonitoringMode is "auto", "stream" or "poll". Default "": auto.
	ServerMonitoringMode string

	// WriteConcern is the default write concern. Default nil: the server's.
	WriteConcern *WriteConcern
	// ReadPreference is the default read preference. Default nil: primary.
	ReadPreference *ReadPreference
	// ReadConcernLevel is the default read concern level. Default "": the
	// server's.
	ReadConcernLevel string

	// Compressors lists the wire compressors offered to the server in order
	// of preference: "zstd", "zlib", "snappy". Default nil: no compression.
	Compressors []string
	// ZlibLevel is the zlib level, -1 to 9. Default nil: -1 (zlib default).
	ZlibLevel *int

	// RetryWrites retries eligible writes once after a retryable error.
	// Default nil: true.
	RetryWrites *bool
	// RetryReads retries eligible reads once after a retryable error.
	// Default nil: true.
	RetryReads *bool
	// MaxAdaptiveRetries is the largest number of retries after overload
	// errors (SystemOverloadedError). Default nil: 5.
	MaxAdaptiveRetries *int
	// AdaptiveRetries enables the client-wide retry token bucket that
	// limits overload retries. Default nil: true.
	AdaptiveRetries *bool
	// EnableOverloadRetargeting makes a retry after an overload error
	// prefer another server. Default nil: true.
	EnableOverloadRetargeting *bool

	// Monitor receives command, retry, pool and topology events. Default nil.
	Monitor *event.Monitor
	// Logger receives warnings and retry logs. Default nil: no logging.
	Logger *slog.Logger
	// Resolver looks up SRV and TXT records for SRVHost. Default nil:
	// net.DefaultResolver.
	Resolver *net.Resolver
	// Dialer opens network connections. Default nil: a net.Dialer.
	Dialer func(ctx context.Context, network, addr string) (net.Conn, error)

	// Warnings are the problems ParseURI tolerated, such as unknown URI
	// options; Connect logs them through Logger. Default nil.
	Warnings []string

	// uri records which settings a connection string gave explicitly, so
	// the options of an SRV TXT record do not override them.
	uri uriExplicit
}

// settings are the options the layers below the API read (through
// topology.OptionsFrom and exec.New), defaults still unapplied.
func (o Options) settings() connstring.Settings {
	s := connstring.Settings{
		Hosts: o.Hosts, ReplicaSet: o.ReplicaSet, Direct: o.Direct, LoadBalanced: o.LoadBalanced,
		TLS: o.TLS, AppName: o.AppName, Dialer: o.Dialer,
		MaxPoolSize: o.MaxPoolSize, MinPoolSize: o.MinPoolSize, MaxConnecting: o.MaxConnecting, MaxIdleTime: o.MaxIdleTime,
		ConnectTimeout: o.ConnectTimeout, SocketTimeout: o.SocketTimeout,
		ServerSelectionTimeout: o.ServerSelectionTimeout, HeartbeatInterval: o.HeartbeatInterval,
		LocalThreshold: o.LocalThreshold, ServerMonitoringMode: o.ServerMonitoringMode,
		Compressors: o.Compressors, ZlibLevel: o.ZlibLevel,
		RetryWrites: o.RetryWrites, RetryReads: o.RetryReads, MaxAdaptiveRetries: o.MaxAdaptiveRetries,
		AdaptiveRetries: o.AdaptiveRetries, EnableOverloadRetargeting: o.EnableOverloadRetargeting,
		Monitor: o.Monitor, Logger: o.Logger,
	}
	if a := o.Auth; a != nil {
		s.Auth = &connstring.Credential{
			Mechanism: a.Mechanism, Source: a.Source, Username: a.Username,
			Password: a.Password, PasswordSet: a.PasswordSet, MechanismProperties: a.MechanismProperties,
		}
	}
	return s
}

// uriExplicit records how ParseURI set the options an SRV TXT record may
// also set: URI options win over the TXT record, defaults do not.
type uriExplicit struct {
	authSource      bool // authSource was given
	defaultedSource bool // Auth.Source is a default (from the path or the mechanism)
	loadBalanced    bool // loadBalanced was given
}

// Credential is what a connection authenticates with.
type Credential struct {
	// Mechanism is "SCRAM-SHA-256", "SCRAM-SHA-1", "MONGODB-X509" or
	// "PLAIN". Default "": negotiated with the server (SCRAM-SHA-256 if it
	// supports it, else SCRAM-SHA-1).
	Mechanism string
	// Source is the database the user is defined in. Default "": "admin"
	// ("$external" for MONGODB-X509).
	Source string
	// Username is the user name (for MONGODB-X509 it may be empty: the
	// certificate's subject is used).
	Username string
	// Password is the password; see PasswordSet.
	Password string
	// PasswordSet tells an empty password from none.
	PasswordSet bool
	// MechanismProperties are the mechanism's extra settings. Default nil.
	MechanismProperties map[string]string
}

// The authentication mechanisms a Credential may name.
const (
	MechanismSCRAMSHA1   = "SCRAM-SHA-1"
	MechanismSCRAMSHA256 = "SCRAM-SHA-256"
	MechanismX509        = "MONGODB-X509"
	MechanismPLAIN       = "PLAIN"
)

// WriteConcern is the acknowledgement a write asks for.
type WriteConcern struct {
	// W is nil (server default), a non-negative int (number of members;
	// 0 = unacknowledged), "majority" or a tag set name.
	W any
	// WTimeout bounds waiting for the acknowledgement. Default 0: none.
	WTimeout time.Duration
	// Journal requests on-disk journal acknowledgement. Default nil: the
	// server's.
	Journal *bool
}

// Unacknowledged reports whether the write concern is w: 0 without journal.
func (wc *WriteConcern) Unacknowledged() bool {
	if wc == nil {
		return false
	}
	n, ok := wc.W.(int)
	return ok && n == 0 && (wc.Journal == nil || !*wc.Journal)
}

func (wc *WriteConcern) validate() error {
	if wc == nil {
		return nil
	}
	switch w := wc.W.(type) {
	case nil:
	case int:
		if w < 0 {
			return fmt.Errorf("sturdy: invalid write concern: w must be non-negative, got %d", w)
		}
		if w == 0 && wc.Journal != nil && *wc.Journal {
			return errors.New("sturdy: invalid write concern: w: 0 cannot be combined with journal: true")
		}
	case string:
		if w == "" {
			return errors.New("sturdy: invalid write concern: w must not be an empty string")
		}
	default:
		return fmt.Errorf("sturdy: invalid write concern: w must be an int or a string, got %T", wc.W)
	}
	if wc.WTimeout < 0 {
		return fmt.Errorf("sturdy: invalid write concern: negative wtimeout %v", wc.WTimeout)
	}
	return nil
}

// ReadMode says which members of a replica set may serve a read. Its
// String method gives the name the server and connection strings use, e.g.
// "secondaryPreferred".
type ReadMode = readpref.Mode

// The read preference modes. The zero value is PrimaryMode.
const (
	PrimaryMode            = readpref.Primary
	PrimaryPreferredMode   = readpref.PrimaryPreferred
	SecondaryMode          = readpref.Secondary
	SecondaryPreferredMode = readpref.SecondaryPreferred
	NearestMode            = readpref.Nearest
)

// ParseReadMode parses a mode name such as "primaryPreferred" (ignoring
// ASCII case).
func ParseReadMode(s string) (ReadMode, error) {
	if m, ok := readpref.ParseMode(s); ok {
		return m, nil
	}
	return 0, fmt.Errorf("sturdy: unknown read preference mode %q", s)
}

// TagSet is one set of server tags a read may be routed by; an empty set
// matches every server.
type TagSet = readpref.TagSet

// ReadPreference routes reads to replica set members: its Mode, TagSets
// tried in order, and MaxStaleness (at least 90 s; 0: no limit). Neither
// tag sets nor maxStaleness go with PrimaryMode. The zero value reads
// from the primary.
type ReadPreference = readpref.ReadPref

// validateReadPref checks rp (nil: primary) against the heartbeat interval
// the client will use.
func validateReadPref(rp *ReadPreference, heartbeat time.Duration) error {
	if rp == nil {
		return nil
	}
	if err := rp.Validate(); err != nil {
		return fmt.Errorf("sturdy: invalid read preference: %w", err)
	}
	if rp.MaxStaleness > 0 {
		if heartbeat <= 0 {
			heartbeat = connstring.Defaults.HeartbeatInterval
		}
		if least := readpref.MinMaxStaleness(heartbeat); rp.MaxStaleness < least {
			return fmt.Errorf("sturdy: invalid read preference: maxStaleness %v is below the minimum %v", rp.MaxStaleness, least)
		}
	}
	return nil
}

// validate checks the rules that involve more than one field, and the
// ranges of single fields, so a bad configuration fails before Connect
// opens any connection. It reports every problem, not just the first.
func (o Options) validate() error {
	var p problems
	o.validateHosts(&p)
	if len(o.AppName) > connstring.Defaults.MaxAppNameBytes {
		p.bad("AppName is %d bytes, at most %d allowed", len(o.AppName), connstring.Defaults.MaxAppNameBytes)
	}
	o.validatePool(&p)
	o.validateTimes(&p)
	o.validateWire(&p)
	p.add(o.WriteConcern.validate())
	p.add(validateReadPref(o.ReadPreference, o.HeartbeatInterval))
	p.add(o.Auth.validate())
	return errors.Join(p...)
}

// problems collects what validate finds.
type problems []error

func (p *problems) bad(format string, args ...any) {
	*p = append(*p, fmt.Errorf("sturdy: invalid options: "+format, args...))
}

func (p *problems) add(err error) {
	if err != nil {
		*p = append(*p, err)
	}
}

// validateHosts checks the seeds and how they may be combined with SRV,
// direct connections and load balancing.
func (o Options) validateHosts(p *problems) {
	switch {
	case o.SRVHost == "" && len(o.Hosts) == 0:
		p.bad("no hosts: set Hosts or SRVHost")
	case o.SRVHost != "" && len(o.Hosts) > 0:
		p.bad("Hosts and SRVHost are mutually exclusive")
	}
	for _, h := range o.Hosts {
		if h == "" {
			p.bad("empty host in Hosts")
		}
	}
	if o.SRVHost == "" {
		if o.SRVServiceName != "" {
			p.bad("SRVServiceName requires SRVHost (a mongodb+srv URI)")
		}
		if o.SRVMaxHosts != 0 {
			p.bad("SRVMaxHosts requires SRVHost (a mongodb+srv URI)")
		}
	}
	if o.SRVMaxHosts < 0 {
		p.bad("SRVMaxHosts must be non-negative, got %d", o.SRVMaxHosts)
	}
	if o.SRVMaxHosts > 0 && o.ReplicaSet != "" {
		p.bad("SRVMaxHosts cannot be combined with ReplicaSet")
	}
	if o.Direct {
		if len(o.Hosts) > 1 {
			p.bad("a direct connection needs exactly one host, got %d", len(o.Hosts))
		}
		if o.SRVHost != "" {
			p.bad("a direct connection cannot use SRVHost")
		}
	}
	if o.LoadBalanced {
		o.validateLoadBalanced(p)
	}
}

func (o Options) validateLoadBalanced(p *problems) {
	if len(o.Hosts) > 1 {
		p.bad("load-balanced mode needs exactly one host, got %d", len(o.Hosts))
	}
	if o.Direct {
		p.bad("load-balanced mode cannot be combined with a direct connection")
	}
	if o.ReplicaSet != "" {
		p.bad("load-balanced mode cannot be combined with ReplicaSet")
	}
	if o.SRVMaxHosts > 0 {
		p.bad("load-balanced mode cannot be combined with SRVMaxHosts")
	}
}

func (o Options) validatePool(p *problems) {
	if o.MinPoolSize < 0 {
		p.bad("MinPoolSize must be non-negative, got %d", o.MinPoolSize)
	}
	maxPool := o.MaxPoolSize
	if maxPool == 0 {
		maxPool = connstring.Defaults.MaxPoolSize
	}
	if maxPool > 0 && o.MinPoolSize > maxPool {
		p.bad("MinPoolSize %d is greater than MaxPoolSize %d", o.MinPoolSize, maxPool)
	}
	if o.MaxConnecting < 0 {
		p.bad("MaxConnecting must be non-negative, got %d", o.MaxConnecting)
	}
}

func (o Options) validateTimes(p *problems) {
	for name, d := range map[string]time.Duration{
		"MaxIdleTime": o.MaxIdleTime, "SocketTimeout": o.SocketTimeout,
		"ServerSelectionTimeout": o.ServerSelectionTimeout, "HeartbeatInterval": o.HeartbeatInterval,
	} {
		if d < 0 {
			p.bad("%s must be non-negative, got %v", name, d)
		}
	}
	if o.HeartbeatInterval > 0 && o.HeartbeatInterval < connstring.Defaults.MinHeartbeatInterval {
		p.bad("HeartbeatInterval must be at least %v, got %v", connstring.Defaults.MinHeartbeatInterval, o.HeartbeatInterval)
	}
	if o.LocalThreshold != nil && *o.LocalThreshold < 0 {
		p.bad("LocalThreshold must be non-negative, got %v", *o.LocalThreshold)
	}
}

// validateWire checks monitoring, compression and the overload retries.
func (o Options) validateWire(p *problems) {
	switch o.ServerMonitoringMode {
	case "", "auto", "stream", "poll":
	default:
		p.bad("ServerMonitoringMode must be auto, stream or poll, got %q", o.ServerMonitoringMode)
	}
	for _, c := range o.Compressors {
		if !slices.Contains(connstring.SupportedCompressors, c) {
			p.bad("unknown compressor %q (supported: %s)", c, strings.Join(connstring.SupportedCompressors, ", "))
		}
	}
	if o.ZlibLevel != nil && (*o.ZlibLevel < -1 || *o.ZlibLevel > 9) {
		p.bad("ZlibLevel must be between -1 and 9, got %d", *o.ZlibLevel)
	}
	if o.MaxAdaptiveRetries != nil && *o.MaxAdaptiveRetries < 0 {
		p.bad("MaxAdaptiveRetries must be non-negative, got %d", *o.MaxAdaptiveRetries)
	}
}

// validate checks a credential against its mechanism's rules.
func (c *Credential) validate() error {
	if c == nil {
		return nil
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("sturdy: invalid credential: "+format, args...)
	}
	switch c.Mechanism {
	case "", MechanismSCRAMSHA1, MechanismSCRAMSHA256:
		if c.Username == "" {
			return fail("%s needs a username", credentialMechanismName(c.Mechanism))
		}
		if len(c.MechanismProperties) > 0 {
			return fail("%s takes no mechanism properties", credentialMechanismName(c.Mechanism))
		}
	case MechanismPLAIN:
		if c.Username == "" {
			return fail("PLAIN needs a username")
		}
		if !c.PasswordSet && c.Password == "" {
			return fail("PLAIN needs a password")
		}
	case MechanismX509:
		if c.PasswordSet || c.Password != "" {
			return fail("MONGODB-X509 takes no password")
		}
		if c.Source != "" && c.Source != "$external" {
			return fail("MONGODB-X509 must authenticate against $external, not %q", c.Source)
		}
	default:
		return fail("authentication mechanism %q is not supported (supported: SCRAM-SHA-256, SCRAM-SHA-1, MONGODB-X509, PLAIN)", c.Mechanism)
	}
	return nil
}

func credentialMechanismName(m string) string {
	if m == "" {
		return "the default mechanism (SCRAM)"
	}
	return m
}
