// Package connstring parses MongoDB connection strings (mongodb:// and
// mongodb+srv://) into a ConnString, following the connection string and URI
// options specifications: malformed URIs and contradictory options are
// errors, while unknown options and invalid option values are reported as
// Warnings and ignored. Resolve expands a mongodb+srv name into its seed list
// from DNS SRV and TXT records.
package connstring
