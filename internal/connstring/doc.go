// Package connstring parses MongoDB connection strings (mongodb:// and
// mongodb+srv://) into a ConnString, following the connection string and URI
// options specifications: malformed URIs and contradictory options are
// errors, while unknown options and invalid option values are reported as
// Warnings and ignored. Resolve expands a mongodb+srv name into its seed list
// from DNS SRV and TXT records.
//
// It also holds what a client's connection settings are below the public
// API: Settings, which the client hands to every layer, and Defaults, the
// one table of the values zero settings stand for. It sits below conn, so
// that each layer (conn, pool, topology, exec) can build its own options
// from Settings.
package connstring
