// Package mongoerr defines the error types every layer of the client
// returns — command errors, write exceptions, network errors, server
// selection errors — and the classification helpers built on them. The root
// sturdy package re-exports them as type aliases, so errors.As works with the
// public names whatever layer produced the error.
package mongoerr
