// Package rawdoc reads the top-level fields of a raw BSON document that a
// caller needs, in one walk over it: a reply is read on every operation,
// and a lookup by name per field walks it once per field (and all of it for
// a field that is absent, as writeErrors is from a successful write).
package rawdoc
