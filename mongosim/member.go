package mongosim

import (
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/blackpipe"
)

// Member is one server of a deployment, with its own listener.
type Member struct {
	cluster   *Cluster
	index     int
	srv       *blackpipe.Server
	addr      string
	processID bson.ObjectID // topologyVersion.processId
	fails     *failPoints   // set with the configureFailPoint command on this member
	conns     atomic.Int64  // open connections, for the connection limiter
	// localSessions is this member's logical session cache.
	localSessions *localSessions
	// fsync is the member's fsync lock (maintenance.go).
	fsync fsyncGate
	// electionIDBox is the current term's electionId as a reply value,
	// boxed once per term (withWriteOpTime).
	electionIDBox atomic.Pointer[termValue]

	// topologyVersion counter and the channel closed when it changes; both
	// guarded by cluster.mu.
	tvCounter int64
	tvChanged chan struct{}
	// electableAt ends a replSetStepDown or replSetFreeze period: the
	// member is not elected before it. Guarded by cluster.mu.
	electableAt time.Time
}

// Addr returns the member's "host:port".
func (m *Member) Addr() string { return m.addr }

// URI returns a connection string for a direct connection to this member.
func (m *Member) URI() string {
	u := "mongodb://" + m.addr + "/?directConnection=true"
	if m.cluster.opts.TLS != nil {
		u += "&tls=true"
	}
	return u
}

// IsPrimary reports whether the member is the primary (always true for a
// standalone server).
func (m *Member) IsPrimary() bool {
	c := m.cluster
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.primary == m.index
}

// topologyVersion returns the member's current counter and a channel closed
// at its next change.
func (m *Member) topologyVersion() (int64, <-chan struct{}) {
	c := m.cluster
	c.mu.Lock()
	defer c.mu.Unlock()
	return m.tvCounter, m.tvChanged
}

// bumpTopologyLocked advances the topologyVersion and wakes awaitable
// hellos; cluster.mu must be held.
func (m *Member) bumpTopologyLocked() {
	m.tvCounter++
	close(m.tvChanged)
	m.tvChanged = make(chan struct{})
}

// acceptConn is the connection limiter: beyond MaxConnections open
// connections, new ones are closed at once.
func (m *Member) acceptConn(bc *blackpipe.Conn) bool {
	c := m.cluster
	limit := c.limiter.maxConnections()
	n := m.conns.Add(1)
	if limit > 0 && n > int64(limit) {
		m.conns.Add(-1)
		c.stats.connsRejected.Add(1)
		return false
	}
	switch c.limiter.admitConn() {
	case connRejected:
		m.conns.Add(-1)
		c.stats.connsRejected.Add(1)
		c.logf("mongosim %s: connection from %s rejected: the connection establishment queue is full", m.addr, bc.RemoteAddr())
		return false
	case connQueued:
		bc.SetValue(connQueuedKey{}, true)
	}
	c.stats.connsAccepted.Add(1)
	return true
}

// connQueuedKey marks a connection waiting in the establishment queue: its
// first command is served once it gets a token (awaitAdmission).
type connQueuedKey struct{}

// awaitAdmission holds a queued connection's first command until the
// establishment bucket admits it; false means the connection went away.
func (m *Member) awaitAdmission(br *blackpipe.Request) bool {
	if queued, _ := br.Conn.Value(connQueuedKey{}).(bool); !queued {
		return true
	}
	br.Conn.SetValue(connQueuedKey{}, false)
	return m.cluster.limiter.waitConnToken(br.Conn.Context().Done())
}

func (m *Member) connClosed(bc *blackpipe.Conn) {
	m.conns.Add(-1)
	if queued, _ := bc.Value(connQueuedKey{}).(bool); queued {
		m.cluster.limiter.leaveConnQueue() // closed before its first command
	}
}
