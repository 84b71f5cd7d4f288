package exec

import (
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/internal/conn"
	"github.com/sturdy-go/sturdy/internal/pool"
	"github.com/sturdy-go/sturdy/internal/topology"
	"github.com/sturdy-go/sturdy/mongoerr"
)

// Pin is a connection of a load-balanced topology kept checked out across
// operations, because a cursor's getMores and a transaction's commands must
// reach the same service behind the load balancer. A cursor opened in a
// transaction shares the transaction's pin; the connection returns to the
// pool when neither holds it any more.
type Pin struct {
	srv *topology.Server
	c   *conn.Conn

	mu          sync.Mutex
	txn, cursor bool // who holds it
}

func newPin(srv *topology.Server, c *conn.Conn) *Pin { return &Pin{srv: srv, c: c} }

// Conn is the pinned connection.
func (p *Pin) Conn() *conn.Conn { return p.c }

// Server is the server the connection belongs to.
func (p *Pin) Server() *topology.Server { return p.srv }

// hold adds a holder and tells the pool why the connection is out.
func (p *Pin) hold(txn, cursor bool) {
	p.mu.Lock()
	p.txn = p.txn || txn
	p.cursor = p.cursor || cursor
	p.retagLocked()
	p.mu.Unlock()
}

func (p *Pin) retagLocked() {
	kind := pool.PinCursor
	if p.txn {
		kind = pool.PinTransaction
	}
	p.srv.Pool().Pin(p.c, kind)
}

// UnpinCursor lets go of the connection for a cursor (drained, closed).
func (p *Pin) UnpinCursor() { p.release(false, true) }

// UnpinTransaction lets go of it for a transaction (session.PinnedConn).
func (p *Pin) UnpinTransaction() { p.release(true, false) }

func (p *Pin) release(txn, cursor bool) {
	p.mu.Lock()
	if txn {
		p.txn = false
	}
	if cursor {
		p.cursor = false
	}
	done := !p.txn && !p.cursor
	if !done {
		p.retagLocked()
	}
	p.mu.Unlock()
	if done {
		p.srv.Pool().CheckIn(p.c)
	}
}

// txnPin is the connection the operation's transaction is pinned to.
func (st *opState) txnPin() *Pin {
	if !st.inTxn || st.sess == nil {
		return nil
	}
	p, _ := st.sess.Pinned.(*Pin)
	return p
}

// pinnedConn returns the connection an operation must use in load-balanced
// mode: its cursor's (getMore, killCursors) or its transaction's; nil when
// it checks one out.
func pinnedConn(op *Operation, st *opState) *Pin {
	if op.Pin != nil {
		return op.Pin
	}
	return st.txnPin()
}

// afterPinned runs after an attempt on a pinned connection: a network
// error ends a transaction's pin (the connection is dead; a commit's retry
// takes a new one), and a cursor opened in the transaction shares it.
func afterPinned(op *Operation, st *opState, pin *Pin, reply bson.Raw, err error) {
	if pin == st.txnPin() {
		if err != nil && mongoerr.IsNetworkError(err) {
			st.sess.Unpin()
			return
		}
		if op.Flags.Has(PinCursor) && err == nil && openCursorID(reply) != 0 {
			pin.hold(false, true)
			st.pin = pin
		}
	}
}

// keepPinned decides, in load-balanced mode, whether a freshly checked-out
// connection stays out after the attempt: pinned to the transaction whose
// command it carried, or to the cursor its reply opened. It reports false
// when the connection goes back to the pool.
func keepPinned(op *Operation, st *opState, srv *topology.Server, c *conn.Conn, reply bson.Raw, err error) bool {
	if !srv.LoadBalanced() {
		return false
	}
	var pin *Pin
	// Commands of the transaction pin their connection; a commit or abort
	// that had to check one out (its pin was released by a network error)
	// does not: the transaction ends with it.
	if st.inTxn && st.sess != nil && st.sent && !op.Flags.Has(TxnCommand) &&
		(err == nil || !mongoerr.IsNetworkError(err)) {
		pin = newPin(srv, c)
		pin.hold(true, false)
		st.sess.Pinned = pin
	}
	if op.Flags.Has(PinCursor) && err == nil && openCursorID(reply) != 0 {
		if pin == nil {
			pin = newPin(srv, c)
		}
		pin.hold(false, true)
		st.pin = pin
	}
	return pin != nil
}

// openCursorID is the cursor id of a cursor-opening reply, 0 if none.
func openCursorID(reply bson.Raw) int64 {
	if reply == nil {
		return 0
	}
	id, _ := reply.Lookup("cursor", "id").AsInt64OK()
	return id
}
