// Package csot carries an operation's client-side timeout (timeoutMS) in its
// context: which level set it, when it started, and what the executor must
// do with it (send maxTimeMS, retry until the deadline, report a timeout).
//
// A timeout applies when any level set timeoutMS (client, database,
// collection, session, or the operation through WithOperationTimeout). The
// deadline itself is the context's: Start derives it once, at the start of
// the public operation, so that every command the operation sends (batches,
// retries, getMores of a cursorLifetime cursor) draws from the same clock.
package csot
