// Package mongoerr defines the errors every layer of the client returns —
// command errors, write exceptions, network errors, server selection,
// authentication and connection-pool errors — with their fields, and the
// classification helpers built on them. It imports nothing else of the
// module, so the driver core and the root sturdy package (which re-exports
// the types as aliases) share one definition and errors.As works with either
// name.
package mongoerr
