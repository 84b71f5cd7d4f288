// Package conn is one client connection to a MongoDB server: dial (TCP or
// TLS), the hello handshake (client metadata, compression negotiation,
// backpressure: true), authentication (SCRAM-SHA-256, SCRAM-SHA-1,
// MONGODB-X509, PLAIN, with speculative authentication in hello) and OP_MSG
// round trips under a context deadline.
//
// A connection that suffers a network or protocol error is closed and never
// reused; the error it returns is a *mongoerr.NetworkError so callers can
// decide to retry. Command failures ({ok: 0}) are returned as
// *mongoerr.CommandError with the server's code, codeName and error labels
// (mongoerr.FromReply), and leave the connection usable.
//
// The pool owns connections: it sets their generation and checks Closed,
// LastUsed and CreatedAt to discard stale ones.
package conn
