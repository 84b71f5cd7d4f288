// Package session implements server sessions and client sessions as the
// driver sessions specification describes them.
//
// A server session (Server) is a session id ({id: UUID v4, binary subtype 4})
// generated locally, its last-use time and the last transaction number used
// with it. Server sessions are pooled (Pool) and reused most-recently-used
// first, so that an application with N concurrent operations keeps about N
// sessions alive on the server. Sessions close to expiring on the server, or
// that saw a network error (dirty: the server may still hold state for them
// that the client cannot know), are dropped instead of being reused.
//
// A client session (Client) is what an operation runs with: explicit ones are
// started and ended by the application, implicit ones by the executor around
// a single operation. Either acquires its server session lazily, after the
// executor has checked out a connection, so sessions never outnumber
// connections in use.
package session
