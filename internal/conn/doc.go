// Package conn is one client connection to a MongoDB server: dial, the hello
// handshake, and command round trips over OP_MSG under a context deadline.
//
// A connection that suffers a network error is closed and never reused; the
// error it returns is a *NetworkError so callers can decide to retry. Command
// failures ({ok: 0}) are returned as *CommandError with the server's code,
// codeName and error labels.
package conn
