// Package mongosim is an in-memory MongoDB-compatible server for tests and
// demos: a standalone server or an N-member replica set on loopback ports, with
// sessions, the retryable-write transaction table, multi-document transactions
// (snapshot isolation, first-writer-wins conflicts), failCommand fail points, an
// ingress request limiter and step-down, speaking the real wire protocol so any
// driver in any language can connect.
//
// It is built on package blackpipe (the listener, connections and codec) and
// adds the command handlers. Every member of a replica set shares one data
// store, so replication is instant and a retried write finds its transaction
// record on whichever member is primary, as it would after real replication.
//
// What mongosim does not support fails loudly: a command or operator it does
// not implement answers an error naming it, never a silently wrong result.
package mongosim
