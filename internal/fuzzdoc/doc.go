// Package fuzzdoc builds well-formed variants of BSON documents for
// structure-aware fuzz targets: a seed document with one value of a fuzzed
// type set at a fuzzed dotted path. A fuzz target that mutates a command's
// or a reply's bytes spends nearly all its inputs on BSON the validator
// rejects; one built from (seed, path, kind, number, string) reaches the
// code that reads the document on every input.
package fuzzdoc
