// Package topology discovers and monitors a MongoDB deployment (the SDAM
// spec) and selects servers for operations (the server selection spec).
//
// A Topology keeps an immutable Description that is replaced on every
// change. One monitor goroutine per server checks it — by default with the
// streaming protocol (an awaitable hello whose replies the server pushes on
// every state change, RTT measured on a second connection), else by polling
// hello every HeartbeatInterval — and feeds the outcome through
// Description.Apply, the pure SDAM update rules. Each Server owns a connection pool; the pool is
// marked ready when the server is seen as data-bearing and cleared when an
// error marks the server Unknown. Errors seen by application operations come
// back through Server.ProcessError.
//
// The client speaks wire versions 9 (MongoDB 4.4) through 25 (MongoDB 8.x);
// a server outside that range makes the description incompatible and server
// selection fails with the reason.
package topology
