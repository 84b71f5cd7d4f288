package connstring

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sturdy-go/sturdy/readpref"
)

// Schemes of a connection string.
const (
	SchemeMongoDB = "mongodb"
	SchemeSRV     = "mongodb+srv"
)

// DefaultPort is the port of a host given without one.
const DefaultPort = 27017

// HostType says how a host identifier was written.
type HostType int

// The host types.
const (
	Hostname   HostType = iota // a DNS name
	IPv4                       // a dotted IPv4 address
	IPLiteral                  // an IPv6 address written in brackets
	UnixSocket                 // a percent-encoded path ending in ".sock"
)

func (t HostType) String() string {
	switch t {
	case Hostname:
		return "hostname"
	case IPv4:
		return "ipv4"
	case IPLiteral:
		return "ip_literal"
	case UnixSocket:
		return "unix"
	}
	return fmt.Sprintf("HostType(%d)", int(t))
}

// Host is one host identifier of the host list.
type Host struct {
	Type HostType
	Name string // lower-cased hostname, IP without brackets, or socket path
	Port int    // 0 when not given
}

// Address returns the host in dialable form: "name:port" with the default
// port filled in, "[::1]:27017" for IPv6, or the socket path.
func (h Host) Address() string {
	if h.Type == UnixSocket {
		return h.Name
	}
	port := h.Port
	if port == 0 {
		port = DefaultPort
	}
	return net.JoinHostPort(h.Name, strconv.Itoa(port))
}

// ConnString is a parsed connection string. Options that were not given
// keep their zero value (nil pointers, empty strings); Has tells whether an
// option was given with a valid value.
type ConnString struct {
	Scheme string
	// Hosts are the seeds; empty for mongodb+srv until Resolve fills it in.
	Hosts []Host
	// SRVHost is the DNS name of a mongodb+srv URI.
	SRVHost string

	Username    string
	Password    string
	HasUsername bool // userinfo was present (the username may be empty)
	HasPassword bool // a ":" followed the username (the password may be empty)
	// Database is the auth database from the path, percent-decoded.
	Database string

	// Warnings are the problems Parse tolerated, in the order found.
	Warnings []Warning

	AppName                 string
	AuthMechanism           string // upper-cased
	AuthMechanismProperties map[string]string
	AuthSource              string
	Compressors             []string // supported ones only, in the given order
	ZlibCompressionLevel    *int
	ConnectTimeout          *time.Duration
	DirectConnection        *bool
	HeartbeatFrequency      *time.Duration
	Journal                 *bool
	LoadBalanced            *bool
	LocalThreshold          *time.Duration
	MaxIdleTime             *time.Duration
	MaxPoolSize             *int
	MinPoolSize             *int
	MaxConnecting           *int
	MaxStalenessSeconds     *int // -1 means no maximum
	ProxyHost               string
	ProxyPort               *int
	ProxyUsername           string
	ProxyPassword           string
	ReadConcernLevel        string
	ReadPreference          *readpref.Mode      // nil: not given
	ReadPreferenceTags      []map[string]string // one map per readPreferenceTags, in order; empty map = any
	ReplicaSet              string
	RetryReads              *bool
	RetryWrites             *bool
	ServerMonitoringMode    string
	ServerSelectionTimeout  *time.Duration
	ServerSelectionTryOnce  *bool
	SocketTimeout           *time.Duration
	SRVMaxHosts             *int
	SRVServiceName          string
	Timeout                 *time.Duration // timeoutMS

	TLS                                  *bool // from tls or ssl
	TLSAllowInvalidCertificates          *bool
	TLSAllowInvalidHostnames             *bool
	TLSCAFile                            string
	TLSCertificateKeyFile                string
	TLSCertificateKeyFilePassword        string
	TLSDisableCertificateRevocationCheck *bool
	TLSDisableOCSPEndpointCheck          *bool
	TLSInsecure                          *bool

	W                any // int or string
	WTimeout         *time.Duration
	WaitQueueTimeout *time.Duration

	MaxAdaptiveRetries        *int
	AdaptiveRetries           *bool
	EnableOverloadRetargeting *bool

	set     map[string]bool // lower-cased canonical keys applied
	present map[string]bool // lower-cased keys that appeared at all
}

// IsSRV reports whether the URI used the mongodb+srv scheme.
func (cs *ConnString) IsSRV() bool { return cs.Scheme == SchemeSRV }

// Has reports whether the option (any case) was given with a valid value
// (or, for SRV URIs after Resolve, by the TXT record).
func (cs *ConnString) Has(option string) bool { return cs.set[lowerASCII(option)] }

// TLSEnabled reports whether connections should use TLS: as tls/ssl say
// when given; otherwise on for mongodb+srv and when a tlsCAFile or
// tlsCertificateKeyFile is given, off otherwise.
func (cs *ConnString) TLSEnabled() bool {
	if cs.TLS != nil {
		return *cs.TLS
	}
	return cs.IsSRV() || cs.TLSCAFile != "" || cs.TLSCertificateKeyFile != ""
}

// Error is a connection string that cannot be used.
type Error struct {
	Option string // canonical option name, or "" for a syntax error
	Msg    string
	Err    error // underlying cause, if any (e.g. a DNS error)
}

func (e *Error) Error() string {
	if e.Err != nil {
		return "connection string: " + e.Msg + ": " + e.Err.Error()
	}
	return "connection string: " + e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

func syntaxErr(format string, args ...any) *Error {
	return &Error{Msg: fmt.Sprintf(format, args...)}
}

// WarningKind classifies a Warning.
type WarningKind int

// The warning kinds.
const (
	// UnknownOption: an option this package does not know; ignored.
	UnknownOption WarningKind = iota + 1
	// InvalidValue: the value does not fit the option; the option is ignored.
	InvalidValue
	// EmptyValue: an integer or boolean option with an empty value; ignored.
	EmptyValue
	// RepeatedOption: a non-list option given more than once; the last wins.
	RepeatedOption
	// DeprecatedOption: an old option name; it still works.
	DeprecatedOption
	// DeprecatedValue: an old spelling of a boolean ("1", "yes", ...); it
	// still works.
	DeprecatedValue
	// UnsupportedValue: part of a list value (e.g. an unknown compressor)
	// that is dropped while the rest is used.
	UnsupportedValue
)

// Warning is a problem in a connection string that Parse tolerated.
type Warning struct {
	Kind   WarningKind
	Option string // canonical name when known, else as written
	Value  string
	Msg    string
}

// Error returns the message, so a Warning can be reported as an error.
func (w Warning) Error() string { return "connection string: " + w.Msg }

func (w Warning) String() string { return w.Error() }

// Parse parses a mongodb:// or mongodb+srv:// connection string. It does
// not touch the network; call Resolve for mongodb+srv.
func Parse(uri string) (*ConnString, error) {
	cs := &ConnString{set: map[string]bool{}, present: map[string]bool{}}
	scheme, rest, ok := strings.Cut(uri, "://")
	switch {
	case uri == "":
		return nil, syntaxErr("empty connection string")
	case !ok:
		return nil, syntaxErr("missing scheme: a connection string starts with mongodb:// or mongodb+srv://")
	case strings.EqualFold(scheme, SchemeMongoDB):
		cs.Scheme = SchemeMongoDB
	case strings.EqualFold(scheme, SchemeSRV):
		cs.Scheme = SchemeSRV
	default:
		return nil, syntaxErr("unsupported scheme %q: want mongodb or mongodb+srv", scheme)
	}

	// The host information ends at the first "/" or "?"; neither may appear
	// unencoded in userinfo or hosts.
	hostInfo, tail := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		hostInfo, tail = rest[:i], rest[i:]
	}
	if i := strings.LastIndexByte(hostInfo, '@'); i >= 0 {
		if err := cs.parseUserinfo(hostInfo[:i]); err != nil {
			return nil, err
		}
		hostInfo = hostInfo[i+1:]
	}
	if hostInfo == "" {
		if len(tail) > 1 && tail[0] == '/' && tail[1] != '?' {
			return nil, syntaxErr("missing host (a UNIX socket path must be URL-encoded, e.g. %%2Ftmp%%2Fmongodb-27017.sock)")
		}
		return nil, syntaxErr("missing host")
	}
	if err := cs.parseHosts(hostInfo); err != nil {
		return nil, err
	}

	tail = strings.TrimPrefix(tail, "/")
	db, query, _ := strings.Cut(tail, "?")
	if db != "" {
		dec, err := url.PathUnescape(db)
		if err != nil {
			return nil, syntaxErr("invalid percent-encoding in database name %q", db)
		}
		if i := strings.IndexAny(dec, "/\\ \"$"); i >= 0 {
			return nil, syntaxErr("database name %q contains the prohibited character %q", dec, dec[i])
		}
		cs.Database = dec
	}
	if err := cs.parseOptions(query); err != nil {
		return nil, err
	}
	if err := cs.validate(); err != nil {
		return nil, err
	}
	return cs, nil
}

func (cs *ConnString) parseUserinfo(ui string) error {
	const hint = "; the username and password must be URL-encoded"
	if strings.Contains(ui, "@") {
		return syntaxErr("unescaped \"@\" in userinfo" + hint)
	}
	if strings.Count(ui, ":") > 1 {
		return syntaxErr("more than one unescaped \":\" in userinfo" + hint)
	}
	if !validPercentEncoding(ui) {
		return syntaxErr("unescaped \"%%\" in userinfo" + hint)
	}
	user, pass, hasPass := strings.Cut(ui, ":")
	var err error
	if cs.Username, err = url.PathUnescape(user); err != nil {
		return syntaxErr("invalid username" + hint)
	}
	if cs.Password, err = url.PathUnescape(pass); err != nil {
		return syntaxErr("invalid password" + hint)
	}
	cs.HasUsername, cs.HasPassword = true, hasPass
	return nil
}

// validPercentEncoding reports whether every "%" starts a %XX escape.
func validPercentEncoding(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			continue
		}
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			return false
		}
		i += 2
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func (cs *ConnString) parseHosts(hostInfo string) error {
	for _, s := range strings.Split(hostInfo, ",") {
		h, err := parseHost(s)
		if err != nil {
			return err
		}
		cs.Hosts = append(cs.Hosts, h)
	}
	if !cs.IsSRV() {
		return nil
	}
	// mongodb+srv names exactly one DNS name; its port comes from DNS.
	switch h := cs.Hosts[0]; {
	case len(cs.Hosts) > 1:
		return syntaxErr("a mongodb+srv URI must name exactly one host, got %d", len(cs.Hosts))
	case h.Port != 0:
		return syntaxErr("a mongodb+srv URI must not give a port (%q)", hostInfo)
	case h.Type != Hostname:
		return syntaxErr("a mongodb+srv URI needs a DNS name, not %s %q", h.Type, h.Name)
	default:
		cs.SRVHost = h.Name
		cs.Hosts = nil
	}
	return nil
}

func parseHost(s string) (Host, error) {
	if s == "" {
		return Host{}, syntaxErr("empty host in the host list")
	}
	if s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return Host{}, syntaxErr("IP literal %q lacks the closing \"]\"", s)
		}
		name, err := url.PathUnescape(s[1:end])
		if err != nil || net.ParseIP(stripZone(name)) == nil || !strings.Contains(name, ":") {
			return Host{}, syntaxErr("invalid IPv6 literal %q", s)
		}
		h := Host{Type: IPLiteral, Name: strings.ToLower(name)}
		switch rest := s[end+1:]; {
		case rest == "":
		case rest[0] == ':':
			if h.Port, err = parsePort(rest[1:]); err != nil {
				return Host{}, err
			}
		default:
			return Host{}, syntaxErr("unexpected %q after IP literal %q", rest, s[:end+1])
		}
		return h, nil
	}
	dec, err := url.PathUnescape(s)
	if err != nil {
		return Host{}, syntaxErr("invalid percent-encoding in host %q", s)
	}
	if strings.Contains(dec, "/") {
		if !strings.HasSuffix(dec, ".sock") {
			return Host{}, syntaxErr("UNIX socket path %q must end in \".sock\"", dec)
		}
		return Host{Type: UnixSocket, Name: dec}, nil
	}
	h := Host{Type: Hostname}
	switch strings.Count(dec, ":") {
	case 0:
		h.Name = dec
	case 1:
		var port string
		h.Name, port, _ = strings.Cut(dec, ":")
		if h.Port, err = parsePort(port); err != nil {
			return Host{}, err
		}
	default:
		return Host{}, syntaxErr("host %q has more than one \":\" (IPv6 literals must be enclosed in [ ])", dec)
	}
	if h.Name == "" {
		return Host{}, syntaxErr("empty host name in %q", dec)
	}
	if strings.ContainsAny(h.Name, " \t\r\n") {
		return Host{}, syntaxErr("host name %q contains whitespace", h.Name)
	}
	h.Name = strings.ToLower(h.Name)
	if ip := net.ParseIP(h.Name); ip != nil && ip.To4() != nil {
		h.Type = IPv4
	}
	return h, nil
}

func stripZone(ip string) string {
	if i := strings.IndexByte(ip, '%'); i >= 0 {
		return ip[:i]
	}
	return ip
}

func parsePort(s string) (int, error) {
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 || s[0] == '+' {
		return 0, syntaxErr("invalid port %q: must be an integer from 1 to 65535", s)
	}
	return p, nil
}

// lowerASCII lower-cases A-Z only, as the spec normalises option keys.
func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}
