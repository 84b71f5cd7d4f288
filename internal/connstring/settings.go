package connstring

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"time"

	"github.com/sturdy-go/sturdy/event"
	"github.com/sturdy-go/sturdy/internal/backoff"
)

// Defaults are what zero-valued client settings stand for, and the limits
// the client validates: the only place the driver's defaults are defined.
// Each layer below the API reads the Settings fields it needs and applies
// these defaults itself (conn.OptionsFrom, pool.OptionsFrom,
// topology.OptionsFrom, exec.New); the option structs those return are
// taken literally, zero meaning none.
var Defaults = struct {
	MaxPoolSize, MaxConnecting, MaxAdaptiveRetries, ZlibLevel int
	ConnectTimeout, ServerSelectionTimeout, LocalThreshold    time.Duration
	HeartbeatInterval                                         time.Duration
	// MinHeartbeatInterval is fixed by the SDAM spec (not an option; only
	// testhook shortens it) and is also the lowest HeartbeatInterval.
	MinHeartbeatInterval time.Duration
	MaxAppNameBytes      int
	// The boolean options that default to on.
	RetryWrites, RetryReads, AdaptiveRetries, EnableOverloadRetargeting bool
	SRVServiceName                                                      string
	// BackoffBase is the Client Backpressure spec's base backoff;
	// PoolBackgroundInterval how often a pool keeps minPoolSize and closes
	// idle connections.
	BackoffBase, PoolBackgroundInterval time.Duration
}{
	// MaxAdaptiveRetries: the first accepted Client Backpressure spec's
	// MAX_ATTEMPTS; newer text says 2, see docs/design.md ("Where the
	// sources disagree").
	MaxPoolSize: 100, MaxConnecting: 2, MaxAdaptiveRetries: 5, ZlibLevel: -1,
	ConnectTimeout: 10 * time.Second, ServerSelectionTimeout: 30 * time.Second, LocalThreshold: 15 * time.Millisecond,
	HeartbeatInterval:    10 * time.Second,
	MinHeartbeatInterval: 500 * time.Millisecond,
	MaxAppNameBytes:      128,
	RetryWrites:          true, RetryReads: true, AdaptiveRetries: true, EnableOverloadRetargeting: true,
	SRVServiceName: "mongodb",
	BackoffBase:    backoff.Base, PoolBackgroundInterval: 100 * time.Millisecond,
}

// Settings are a client's connection settings as the layers below the API
// receive them: the root's Options (from a URI or set in code), validated,
// with the SRV name resolved, and nothing defaulted. Each field means what
// the root Options field of the same name means; its zero value (nil for
// pointers) stands for the default in Defaults.
type Settings struct {
	Hosts        []string
	ReplicaSet   string
	Direct       bool
	LoadBalanced bool

	TLS     *tls.Config
	Auth    *Credential
	AppName string
	Dialer  func(ctx context.Context, network, addr string) (net.Conn, error)

	// MaxPoolSize: negative means unlimited.
	MaxPoolSize, MinPoolSize, MaxConnecting int
	MaxIdleTime                             time.Duration

	// ConnectTimeout: negative means no timeout of its own.
	ConnectTimeout, SocketTimeout             time.Duration
	ServerSelectionTimeout, HeartbeatInterval time.Duration
	LocalThreshold                            *time.Duration
	ServerMonitoringMode                      string

	Compressors []string
	ZlibLevel   *int

	RetryWrites, RetryReads                    *bool
	MaxAdaptiveRetries                         *int
	AdaptiveRetries, EnableOverloadRetargeting *bool

	Monitor *event.Monitor
	Logger  *slog.Logger
}

// Credential is what a connection authenticates with (the authentication
// options of a connection string).
type Credential struct {
	// Mechanism is SCRAM-SHA-256, SCRAM-SHA-1, MONGODB-X509 or PLAIN; ""
	// negotiates SCRAM-SHA-256 or SCRAM-SHA-1 with the server.
	Mechanism string
	// Source is the authentication database: default "admin" for SCRAM,
	// "$external" for MONGODB-X509 and PLAIN.
	Source   string
	Username string
	Password string
	// MechanismProperties are not used by the supported mechanisms.
	MechanismProperties map[string]string
	// PasswordSet records that a password was given, even an empty one.
	PasswordSet bool
}

// OrDefault is *p, or def when p is nil: how a layer reads a pointer
// setting against Defaults.
func OrDefault[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
