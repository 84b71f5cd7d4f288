package event

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// CommandStartedEvent is published before each attempt of a command is sent.
type CommandStartedEvent struct {
	Command            bson.Raw // redacted (empty) for sensitive commands
	DatabaseName       string
	CommandName        string
	RequestID          int32
	OperationID        int64 // shared by every attempt of one operation
	ConnectionID       int64 // client-side connection id
	ServerConnectionID *int64
	ServiceID          *bson.ObjectID // load-balanced mode: the service behind the load balancer
	ServerAddress      string
	LSID               bson.Raw // the session id sent, if any
	TxnNumber          *int64   // the transaction number sent, if any
}

// CommandSucceededEvent is published when an attempt got an ok: 1 reply.
type CommandSucceededEvent struct {
	CommandName        string
	DatabaseName       string
	RequestID          int32
	OperationID        int64
	ConnectionID       int64
	ServerConnectionID *int64
	ServiceID          *bson.ObjectID // load-balanced mode: the service behind the load balancer
	ServerAddress      string
	Duration           time.Duration
	Reply              bson.Raw // redacted (empty) for sensitive commands
	LSID               bson.Raw
	TxnNumber          *int64
}

// CommandFailedEvent is published when an attempt failed: a network error
// or an ok: 0 reply.
type CommandFailedEvent struct {
	CommandName        string
	DatabaseName       string
	RequestID          int32
	OperationID        int64
	ConnectionID       int64
	ServerConnectionID *int64
	ServiceID          *bson.ObjectID // load-balanced mode: the service behind the load balancer
	ServerAddress      string
	Duration           time.Duration
	Failure            error
	LSID               bson.Raw
	TxnNumber          *int64
}

// RetryEvent is published when an operation is about to be retried.
type RetryEvent struct {
	OperationID   int64
	CommandName   string
	Attempt       int           // 1 for the first retry
	Reason        error         // the error that caused the retry
	Backoff       time.Duration // how long the client waits before the retry
	TokensLeft    float64       // retry token bucket balance after this retry was granted
	ServerAddress string        // the server whose error caused the retry
	TxnNumber     *int64        // the transaction number the retry reuses
}

// PoolEventType names a connection-pool event, as the CMAP spec does.
type PoolEventType string

// Connection-pool event types.
const (
	PoolCreated               PoolEventType = "PoolCreated"
	PoolReady                 PoolEventType = "PoolReady"
	PoolCleared               PoolEventType = "PoolCleared"
	PoolClosed                PoolEventType = "PoolClosed"
	ConnectionCreated         PoolEventType = "ConnectionCreated"
	ConnectionReady           PoolEventType = "ConnectionReady"
	ConnectionClosed          PoolEventType = "ConnectionClosed"
	ConnectionCheckOutStarted PoolEventType = "ConnectionCheckOutStarted"
	ConnectionCheckOutFailed  PoolEventType = "ConnectionCheckOutFailed"
	ConnectionCheckedOut      PoolEventType = "ConnectionCheckedOut"
	ConnectionCheckedIn       PoolEventType = "ConnectionCheckedIn"
)

// Reasons carried by ConnectionClosed and ConnectionCheckOutFailed events.
const (
	ReasonStale           = "stale"
	ReasonIdle            = "idle"
	ReasonError           = "error"
	ReasonPoolClosed      = "poolClosed"
	ReasonTimeout         = "timeout"
	ReasonConnectionError = "connectionError"
)

// PoolOptions are the pool settings reported with PoolCreated.
type PoolOptions struct {
	MaxPoolSize   int
	MinPoolSize   int
	MaxConnecting int
	MaxIdleTime   time.Duration
}

// PoolEvent is a connection-pool event.
type PoolEvent struct {
	Type          PoolEventType
	Address       string
	ConnectionID  int64
	Reason        string
	Error         error
	Duration      time.Duration
	Interruptible bool           // PoolCleared: in-use connections are interrupted
	ServiceID     *bson.ObjectID // PoolCleared in load-balanced mode: the service whose connections were cleared
	Options       *PoolOptions   // PoolCreated only
}

// ServerDescription is the public view of what the client knows of a server.
type ServerDescription struct {
	Address         string
	Kind            string // Unknown, Standalone, Mongos, RSPrimary, RSSecondary, RSArbiter, RSOther, RSGhost, LoadBalancer
	SetName         string
	Hosts           []string
	RTT             time.Duration
	Error           error
	MaxWireVersion  int32
	TopologyVersion bson.Raw
}

// TopologyDescription is the public view of the whole deployment.
type TopologyDescription struct {
	Kind    string // Single, ReplicaSetNoPrimary, ReplicaSetWithPrimary, Sharded, LoadBalanced, Unknown
	SetName string
	Servers []ServerDescription
}

// ServerHeartbeatStartedEvent is published when a monitor sends hello.
type ServerHeartbeatStartedEvent struct {
	Address string
	Awaited bool
}

// ServerHeartbeatSucceededEvent is published when a monitor's hello succeeds.
type ServerHeartbeatSucceededEvent struct {
	Address  string
	Duration time.Duration
	Reply    bson.Raw
	Awaited  bool
}

// ServerHeartbeatFailedEvent is published when a monitor's hello fails.
type ServerHeartbeatFailedEvent struct {
	Address  string
	Duration time.Duration
	Failure  error
	Awaited  bool
}

// ServerDescriptionChangedEvent is published when a server's description changes.
type ServerDescriptionChangedEvent struct {
	Address  string
	Previous ServerDescription
	New      ServerDescription
}

// TopologyDescriptionChangedEvent is published when the topology description changes.
type TopologyDescriptionChangedEvent struct {
	Previous TopologyDescription
	New      TopologyDescription
}

// ServerOpeningEvent is published when the client starts monitoring a server.
type ServerOpeningEvent struct{ Address string }

// ServerClosedEvent is published when the client stops monitoring a server.
type ServerClosedEvent struct{ Address string }

// TopologyOpeningEvent is published when a client starts.
type TopologyOpeningEvent struct{}

// TopologyClosedEvent is published when a client disconnects.
type TopologyClosedEvent struct{}

// Monitor receives events. A nil func skips that event; a nil *Monitor
// skips all of them (the methods below are safe on nil).
type Monitor struct {
	CommandStarted             func(context.Context, *CommandStartedEvent)
	CommandSucceeded           func(context.Context, *CommandSucceededEvent)
	CommandFailed              func(context.Context, *CommandFailedEvent)
	Retry                      func(context.Context, *RetryEvent)
	Pool                       func(*PoolEvent)
	ServerHeartbeatStarted     func(*ServerHeartbeatStartedEvent)
	ServerHeartbeatSucceeded   func(*ServerHeartbeatSucceededEvent)
	ServerHeartbeatFailed      func(*ServerHeartbeatFailedEvent)
	ServerDescriptionChanged   func(*ServerDescriptionChangedEvent)
	TopologyDescriptionChanged func(*TopologyDescriptionChangedEvent)
	ServerOpening              func(*ServerOpeningEvent)
	ServerClosed               func(*ServerClosedEvent)
	TopologyOpening            func(*TopologyOpeningEvent)
	TopologyClosed             func(*TopologyClosedEvent)
}

// PublishPool sends e to the Pool handler, if any.
func (m *Monitor) PublishPool(e *PoolEvent) {
	if m != nil && m.Pool != nil {
		m.Pool(e)
	}
}

// PublishCommandStarted sends e to the CommandStarted handler, if any.
func (m *Monitor) PublishCommandStarted(ctx context.Context, e *CommandStartedEvent) {
	if m != nil && m.CommandStarted != nil {
		m.CommandStarted(ctx, e)
	}
}

// PublishCommandSucceeded sends e to the CommandSucceeded handler, if any.
func (m *Monitor) PublishCommandSucceeded(ctx context.Context, e *CommandSucceededEvent) {
	if m != nil && m.CommandSucceeded != nil {
		m.CommandSucceeded(ctx, e)
	}
}

// PublishCommandFailed sends e to the CommandFailed handler, if any.
func (m *Monitor) PublishCommandFailed(ctx context.Context, e *CommandFailedEvent) {
	if m != nil && m.CommandFailed != nil {
		m.CommandFailed(ctx, e)
	}
}

// PublishRetry sends e to the Retry handler, if any.
func (m *Monitor) PublishRetry(ctx context.Context, e *RetryEvent) {
	if m != nil && m.Retry != nil {
		m.Retry(ctx, e)
	}
}

// PublishServerHeartbeatStarted sends e to the ServerHeartbeatStarted
// handler, if any.
func (m *Monitor) PublishServerHeartbeatStarted(e *ServerHeartbeatStartedEvent) {
	if m != nil && m.ServerHeartbeatStarted != nil {
		m.ServerHeartbeatStarted(e)
	}
}

// PublishServerHeartbeatSucceeded sends e to the ServerHeartbeatSucceeded
// handler, if any.
func (m *Monitor) PublishServerHeartbeatSucceeded(e *ServerHeartbeatSucceededEvent) {
	if m != nil && m.ServerHeartbeatSucceeded != nil {
		m.ServerHeartbeatSucceeded(e)
	}
}

// PublishServerHeartbeatFailed sends e to the ServerHeartbeatFailed
// handler, if any.
func (m *Monitor) PublishServerHeartbeatFailed(e *ServerHeartbeatFailedEvent) {
	if m != nil && m.ServerHeartbeatFailed != nil {
		m.ServerHeartbeatFailed(e)
	}
}

// WantsCommands reports whether any command handler is set, so callers can
// skip building events nobody reads.
func (m *Monitor) WantsCommands() bool {
	return m != nil && (m.CommandStarted != nil || m.CommandSucceeded != nil || m.CommandFailed != nil)
}
