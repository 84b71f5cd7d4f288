// Package pool is the per-server connection pool of the client, following
// the Connection Monitoring and Pooling (CMAP) specification.
//
// A Pool starts "paused": check-outs fail with a *mongoerr.PoolClearedError
// until the server monitor calls Ready after a successful check. Clear (on a
// network or state-change error) bumps the pool's generation, so every
// connection made before it is discarded when next seen, fails the whole
// wait queue at once and pauses the pool again. Close ends the pool for good.
//
// Check-outs are served first come, first served from a FIFO wait queue. An
// idle connection is reused last-in, first-out (the most recently used
// socket is the one least likely to have been dropped by a middlebox); when
// there is none, a new connection is dialled, at most MaxConnecting at once
// and at most MaxPoolSize in total. Dialling happens outside the pool's lock
// in its own goroutine, so that a check-out whose context expires returns at
// once while the connection, once established, still joins the pool instead
// of being thrown away half-made (churning handshakes is exactly what an
// overloaded server cannot afford).
//
// Every event of the specification is published through Options.Monitor.
// Events are published while the pool's lock is held, so that their order
// matches the order of the state changes they report; a handler must not
// call back into the pool.
package pool
