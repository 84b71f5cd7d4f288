package mongosim

import (
	"crypto/tls"
	"log/slog"
	"time"
)

// Options configures a mongosim deployment. The zero value is a
// single-member replica set "rs0" on an ephemeral loopback port.
type Options struct {
	// Members is the number of replica-set members; 0 means 1.
	Members int
	// Routers, when positive, starts that many mongos routers in front of
	// the replica set (the one shard): URI lists them and drivers see a
	// sharded cluster. Options.Limiter then applies to each router, not to
	// the members. See shard_router.go and COMPATIBILITY.md.
	Routers int
	// LoadBalanced puts one listener, an L4 load balancer, in front of the
	// Routers (it needs Routers >= 1): each client connection is bound to
	// one router, round robin, and its first hello is answered with the
	// router's serviceId. URI then names the balancer with
	// loadBalanced=true. See shard_loadbalancer.go.
	LoadBalanced bool
	// Shards is the number of shards; 0 or 1 (with Routers) is one shard.
	// More than one fails at Launch: multi-shard routing is not implemented.
	Shards int
	// Standalone runs one server that is not a replica-set member, so
	// drivers see no retryable-write support, as with a real standalone.
	Standalone bool
	// clusterClock, set for shards 1.., is the deployment's cluster time,
	// shared with shard 0.
	clusterClock *logicalClock
	// ReplicaSetName defaults to "rs0".
	ReplicaSetName string
	// Host to listen on; default "127.0.0.1".
	Host string
	// Port of the first member; members listen on Port+i. 0 picks
	// ephemeral ports.
	Port int
	// TLS, when set, makes every member accept only TLS connections.
	TLS *tls.Config
	// Auth, when Username is set, requires SCRAM authentication.
	Auth AuthOptions
	// Limiter configures the ingress request and connection limiters.
	Limiter LimiterOptions
	// Now is the clock used for dates, cursors, the limiter and TTL
	// expiry; default time.Now. A test advancing its own clock can call
	// Cluster.ExpireTTL to run a TTL pass at once.
	Now func() time.Time
	// TTLMonitorInterval is how often the TTL monitor deletes expired
	// documents (mongod's ttlMonitorSleepSecs); 0 means 60s, negative
	// turns the monitor off.
	TTLMonitorInterval time.Duration
	// Seed seeds fail point activationProbability; 0 means 1, so runs are
	// reproducible unless a seed is chosen.
	Seed int64
	// Compressors the servers accept; nil means zstd, zlib and snappy.
	Compressors []string
	// Logger receives what the server refuses and why (malformed or
	// too-large messages, authentication failures, documents nested too
	// deeply) at level Warn, and internal detail at Debug; nil discards
	// everything.
	Logger *slog.Logger
	// PartialMessageTimeout disconnects a client that stalls in the middle
	// of a message for that long (default 30s; negative: never), and
	// IdleTimeout one that sends nothing between messages for that long
	// (default 0: never, as mongod). See blackpipe.Options.
	PartialMessageTimeout time.Duration
	// MaxWriteBatchSize is the maxWriteBatchSize hello advertises (0: mongod's
	// 100 000), so a test can make a driver split a small bulk write into
	// several commands. mongosim does not refuse larger batches.
	MaxWriteBatchSize int
	IdleTimeout       time.Duration
	// JavaScriptDisabled turns server-side JavaScript off, as mongod's
	// security.javascriptEnabled: false (--noscripting): $where,
	// $function, $accumulator and mapReduce then fail with mongod's
	// errors for a server without a script engine.
	JavaScriptDisabled bool
}

// AuthOptions holds the one user mongosim knows when auth is on.
type AuthOptions struct {
	Username string
	Password string
}

// LimiterOptions configures overload simulation. Zero values disable each
// limiter.
type LimiterOptions struct {
	// RequestsPerSecond is the refill rate of the ingress token bucket; a
	// request finding it empty fails with code 462 and the
	// SystemOverloadedError and RetryableError labels. 0 disables it.
	RequestsPerSecond float64
	// Burst is the bucket capacity; 0 means max(1, RequestsPerSecond).
	Burst int
	// BaseBackoffMS, when positive, is sent as baseBackoffMS in 462 errors.
	BaseBackoffMS int32
	// MaxConnections caps open connections per member; further connections
	// are closed at once. 0 means unlimited.
	MaxConnections int
	// RejectCost is what rejecting a request costs the server, as a
	// fraction of an admitted request's capacity: each rejection takes that
	// many tokens, and the bucket may go into debt down to -Burst. Real
	// servers pay for every request they turn away, which is how retry
	// storms outlast the overload that caused them. 0: rejections are free.
	RejectCost float64
	// ConnectionsPerSecond is the refill rate of the connection
	// establishment token bucket (mongod's
	// ingressConnectionEstablishmentRatePerSec); a new connection that
	// finds it empty waits in a queue of ConnectionQueueDepth before its
	// first command is served, or is closed at once when the queue is full.
	// 0 disables it.
	ConnectionsPerSecond float64
	// ConnectionBurst is that bucket's capacity; 0 means
	// max(1, ConnectionsPerSecond).
	ConnectionBurst int
	// ConnectionQueueDepth is how many connections may wait for a token.
	ConnectionQueueDepth int
}
