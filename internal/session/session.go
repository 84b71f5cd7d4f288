package session

import (
	"crypto/rand"
	"encoding/binary"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongoerr"
)

// expiryMargin is how long a server session must still be valid for to be
// handed out or pooled: an operation started with it must not find it
// expired on the server.
const expiryMargin = time.Minute

// Server is a server session: the lsid sent with commands, when it was last
// sent, and the last transaction number used with it.
type Server struct {
	ID        bson.Raw  // {id: UUID v4 as binary subtype 4}
	LastUse   time.Time // updated each time the id is sent to a server
	TxnNumber int64     // last transaction number used; survives pooling
	Dirty     bool      // saw a network error: never pooled again

	epoch uint64 // pool epoch it was created in; see Pool.Clear
	idv   any    // ID boxed once, for commands (IDValue)
}

// IDValue is ID as the value of a command's lsid element, boxed once per
// server session rather than once per command.
func (s *Server) IDValue() any {
	if s.idv == nil {
		s.idv = s.ID
	}
	return s.idv
}

// NextTxnNumber increments the transaction number and returns it. Retryable
// writes call it once per write command; a retry reuses the number.
func (s *Server) NextTxnNumber() int64 {
	s.TxnNumber++
	return s.TxnNumber
}

// UUID returns the 16 bytes of the session id.
func (s *Server) UUID() []byte {
	v, err := s.ID.LookupErr("id")
	if err != nil {
		return nil
	}
	_, data, ok := v.BinaryOK()
	if !ok {
		return nil
	}
	return data
}

// newServer creates a server session with a fresh random id.
func newServer(now time.Time, epoch uint64) *Server {
	var u [16]byte
	_, _ = rand.Read(u[:])  // crypto/rand.Read never fails (Go 1.24+)
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	// {id: BinData(4, u)} laid out by hand: it cannot fail.
	id := make([]byte, 0, 30)
	id = binary.LittleEndian.AppendUint32(id, 30)
	id = append(id, byte(bson.TypeBinary), 'i', 'd', 0)
	id = binary.LittleEndian.AppendUint32(id, 16)
	id = append(id, bson.TypeBinaryUUID)
	id = append(id, u[:]...)
	id = append(id, 0)
	return &Server{ID: id, LastUse: now, epoch: epoch}
}

// Pool is the server-session pool of one client. It is safe for concurrent
// use. The zero value is not usable; call NewPool.
type Pool struct {
	now func() time.Time

	mu    sync.Mutex
	stack []*Server // the most recently returned session is last
	epoch uint64
}

// NewPool returns an empty pool. now is the clock (nil: time.Now).
func NewPool(now func() time.Time) *Pool {
	if now == nil {
		now = time.Now
	}
	return &Pool{now: now}
}

// expiresSoon reports whether s has less than a minute left before the
// server considers it stale. A nil timeout means the deployment reported
// none (sessions unsupported or not yet known): nothing expires.
func expiresSoon(s *Server, now time.Time, timeoutMinutes *int64) bool {
	if timeoutMinutes == nil {
		return false
	}
	expires := s.LastUse.Add(time.Duration(*timeoutMinutes) * time.Minute)
	return expires.Sub(now) < expiryMargin
}

// Get returns the most recently returned session that still has at least a
// minute to live, discarding the stale ones it passes over, or a new session
// if there is none. timeoutMinutes is the deployment's
// logicalSessionTimeoutMinutes.
func (p *Pool) Get(timeoutMinutes *int64) *Server {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.stack) > 0 {
		s := p.stack[len(p.stack)-1]
		p.stack[len(p.stack)-1] = nil
		p.stack = p.stack[:len(p.stack)-1]
		if !expiresSoon(s, now, timeoutMinutes) {
			return s
		}
	}
	return newServer(now, p.epoch)
}

// Put returns s to the pool. Sessions about to expire are first pruned from
// the least recently used end; s itself is dropped if it is dirty, about to
// expire, or was handed out before the last Clear. Its transaction number
// is kept for the next user.
func (p *Pool) Put(s *Server, timeoutMinutes *int64) {
	if s == nil {
		return
	}
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	// The least recently used sessions are at the front of the slice.
	drop := 0
	for drop < len(p.stack) && expiresSoon(p.stack[drop], now, timeoutMinutes) {
		p.stack[drop] = nil
		drop++
	}
	p.stack = p.stack[drop:]
	if s.Dirty || s.epoch != p.epoch || expiresSoon(s, now, timeoutMinutes) {
		return
	}
	p.stack = append(p.stack, s)
}

// Drain empties the pool and returns the ids of its sessions, most recently
// used first, for endSessions (which the caller sends in batches of at most
// 10 000). Sessions checked out at the time are not affected and may still
// be returned later.
func (p *Pool) Drain() []bson.Raw {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := make([]bson.Raw, 0, len(p.stack))
	for i := len(p.stack) - 1; i >= 0; i-- {
		ids = append(ids, p.stack[i].ID)
	}
	p.stack = nil
	return ids
}

// Clear empties the pool without ending the sessions on the server (for
// example after the process forked). Sessions checked out at the time are
// dropped when returned instead of rejoining the pool.
func (p *Pool) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stack = nil
	p.epoch++
}

// Len is the number of pooled sessions.
func (p *Pool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.stack)
}

// Client is a client session: the session an operation runs with. It holds
// a server session from the pool from the first time one is needed until
// End. Like the sessions specification's ClientSession it is meant for one
// goroutine at a time and is not safe for concurrent use.
type Client struct {
	// Server is the server session, nil until the first Acquire and again
	// after End.
	Server *Server
	// Implicit is set for sessions the executor starts for one operation
	// (or one cursor) on the application's behalf.
	Implicit bool
	// Ended is set by End; an ended session cannot run operations.
	Ended bool
	// Txn is the session's transaction, if any (explicit sessions only).
	Txn Txn
	// Causal makes the session causally consistent: its reads, and the
	// first command of its transactions, ask for a readConcern with
	// afterClusterTime = the session's operationTime.
	Causal bool
	// Snapshot makes every command of the session read from one snapshot:
	// readConcern {level: "snapshot"}, with atClusterTime once the first
	// reply has fixed it (or SetSnapshotTime has).
	Snapshot bool

	snapshotTime    bson.Timestamp
	hasSnapshotTime bool

	pool         *Pool
	pendingTxns  int64    // transactions started before a server session was acquired
	lastTimeout  *int64   // logicalSessionTimeoutMinutes seen at the last Acquire
	lastTimeoutV int64    // what lastTimeout points to
	clusterTime  bson.Raw // highest $clusterTime seen with this session

	operationTime bson.Timestamp // latest operationTime of a reply
	hasOpTime     bool

	// Pinned is, in load-balanced mode, the connection the session's
	// transaction runs on (set by the executor); nil otherwise.
	Pinned PinnedConn
}

// PinnedConn is a connection pinned to a transaction; the executor
// implements it.
type PinnedConn interface {
	// UnpinTransaction lets go of the connection for the transaction: it
	// returns to the pool unless a cursor still holds it.
	UnpinTransaction()
}

// Unpin releases the transaction's pinned connection, if any: when the
// transaction is aborted, fails with a transient error, a new one starts,
// a non-transaction operation uses the session, or the session ends.
func (c *Client) Unpin() {
	if p := c.Pinned; p != nil {
		c.Pinned = nil
		p.UnpinTransaction()
	}
}

// NewClient starts a client session backed by p. No server session is
// taken from the pool until Acquire.
func NewClient(p *Pool, implicit bool) *Client {
	c := new(Client)
	InitClient(c, p, implicit)
	return c
}

// InitClient makes *c a new client session backed by p, as NewClient does,
// in storage the caller provides.
func InitClient(c *Client, p *Pool, implicit bool) {
	*c = Client{pool: p, Implicit: implicit}
}

// Acquire returns the session's server session, taking one from the pool
// on first use. It fails with mongoerr.ErrSessionEnded once the session has ended.
// timeoutMinutes is the deployment's logicalSessionTimeoutMinutes.
func (c *Client) Acquire(timeoutMinutes *int64) (*Server, error) {
	if c.Ended {
		return nil, mongoerr.ErrSessionEnded
	}
	if timeoutMinutes != nil {
		c.lastTimeoutV = *timeoutMinutes
		c.lastTimeout = &c.lastTimeoutV
	}
	if c.Server == nil {
		c.Server = c.pool.Get(timeoutMinutes)
		c.Server.TxnNumber += c.pendingTxns
		c.pendingTxns = 0
	}
	return c.Server, nil
}

// ID returns the lsid of the acquired server session, or nil.
func (c *Client) ID() bson.Raw {
	if c.Server != nil {
		return c.Server.ID
	}
	return nil
}

// MarkDirty records that the session saw a network error, so its server
// session is discarded, not pooled, when the session ends. It stays usable
// until then.
func (c *Client) MarkDirty() {
	if c.Server != nil {
		c.Server.Dirty = true
	}
}

// CheckUsable returns mongoerr.ErrSessionEnded if the session has ended.
func (c *Client) CheckUsable() error {
	if c.Ended {
		return mongoerr.ErrSessionEnded
	}
	return nil
}

// End ends the session and returns its server session to the pool. Calls
// after the first do nothing.
func (c *Client) End() {
	if c.Ended {
		return
	}
	c.Ended = true
	c.Unpin()
	c.Txn.Pinned = "" // an ended session is unpinned
	if c.Server != nil {
		c.pool.Put(c.Server, c.lastTimeout)
		c.Server = nil
	}
}

// ClusterTime returns the highest $clusterTime document this session has
// seen, or nil.
func (c *Client) ClusterTime() bson.Raw { return c.clusterTime }

// AdvanceClusterTime records ct ({clusterTime: Timestamp, signature: ...})
// if it is later than the one the session holds; others are ignored.
func (c *Client) AdvanceClusterTime(ct bson.Raw) {
	c.clusterTime = MaxClusterTime(c.clusterTime, ct)
}

// MaxClusterTime returns the later of two $clusterTime documents, compared
// by their clusterTime timestamps; either may be nil. A document without a
// readable timestamp never wins.
func MaxClusterTime(a, b bson.Raw) bson.Raw {
	if len(b) == 0 || len(a) == len(b) && &a[0] == &b[0] {
		return a // b cannot win: spare the parsing
	}
	ta, okA := clusterTimestamp(a)
	tb, okB := clusterTimestamp(b)
	switch {
	case !okB:
		return a
	case !okA:
		return b
	case tb.After(ta):
		return b
	}
	return a
}

// ClusterTimestamp is the clusterTime timestamp of a $clusterTime
// document, which MaxClusterTime compares; false when it has none.
func ClusterTimestamp(ct bson.Raw) (bson.Timestamp, bool) { return clusterTimestamp(ct) }

func clusterTimestamp(ct bson.Raw) (bson.Timestamp, bool) {
	if len(ct) == 0 {
		return bson.Timestamp{}, false
	}
	v, err := ct.LookupErr("clusterTime")
	if err != nil {
		return bson.Timestamp{}, false
	}
	t, i, ok := v.TimestampOK()
	return bson.Timestamp{T: t, I: i}, ok
}

// TxnState is a client session's transaction state (transactions spec,
// "ClientSession changes").
type TxnState int

// The five transaction states.
const (
	TxnNone       TxnState = iota // no transaction
	TxnStarting                   // started; no command sent yet
	TxnInProgress                 // its first command was sent
	TxnCommitted                  // commitTransaction ran (even if it failed)
	TxnAborted                    // abortTransaction ran
)

func (s TxnState) String() string {
	switch s {
	case TxnStarting:
		return "starting"
	case TxnInProgress:
		return "in_progress"
	case TxnCommitted:
		return "committed"
	case TxnAborted:
		return "aborted"
	}
	return "none"
}

// Txn is the transaction of a client session: its state and what the
// executor adds to the transaction's commands.
type Txn struct {
	State TxnState
	// ReadConcern is sent with the first command only; nil: none (the
	// server's default).
	ReadConcern bson.D
	// RecoveryToken is the last recoveryToken a reply carried (sharded
	// transactions), sent with commitTransaction and abortTransaction.
	RecoveryToken bson.Raw
	// Number is the transaction's txnNumber, taken from the server session
	// by its first command; 0 until then.
	Number int64
	// Pinned is the address of the mongos the transaction is pinned to
	// (transactions spec, "Mongos Pinning"); "" when unpinned. Starting a
	// new transaction or running an operation outside one resets Txn, and
	// so unpins.
	Pinned string
}

// Active reports whether commands run inside the transaction: it is
// starting or in progress.
func (t *Txn) Active() bool { return t.State == TxnStarting || t.State == TxnInProgress }

// StartTxn starts a transaction: state starting, a new transaction number
// to be taken at the first command, readConcern for that command. The
// caller checks that the state allows it.
func (c *Client) StartTxn(readConcern bson.D) {
	c.Unpin()
	c.Txn = Txn{State: TxnStarting, ReadConcern: readConcern}
	// Every transaction gets a new number, even one that sends nothing;
	// without a server session yet, Acquire adds it.
	if c.Server != nil {
		c.Server.TxnNumber++
	} else {
		c.pendingTxns++
	}
}

// TxnNumber returns the transaction's number, read from the server session
// (ss, the acquired one) at the transaction's first command.
func (c *Client) TxnNumber(ss *Server) int64 {
	if c.Txn.Number == 0 {
		c.Txn.Number = ss.TxnNumber
	}
	return c.Txn.Number
}

// OperationTime returns the latest operationTime seen in a reply to this
// session's commands; ok is false before the first.
func (c *Client) OperationTime() (ts bson.Timestamp, ok bool) {
	return c.operationTime, c.hasOpTime
}

// AdvanceOperationTime records ts if it is later than the session's
// operationTime.
func (c *Client) AdvanceOperationTime(ts bson.Timestamp) {
	if !c.hasOpTime || ts.After(c.operationTime) {
		c.operationTime, c.hasOpTime = ts, true
	}
}

// SnapshotTime returns the time a snapshot session reads at, once known.
func (c *Client) SnapshotTime() (bson.Timestamp, bool) {
	return c.snapshotTime, c.hasSnapshotTime
}

// SetSnapshotTime fixes the time a snapshot session reads at; the first
// time set wins, as the session reads one snapshot throughout.
func (c *Client) SetSnapshotTime(ts bson.Timestamp) {
	if !c.hasSnapshotTime {
		c.snapshotTime, c.hasSnapshotTime = ts, true
	}
}
