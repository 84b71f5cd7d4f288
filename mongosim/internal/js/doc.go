// Package js runs mongod's server-side JavaScript for mongosim: the $where
// query operator, the $function and $accumulator aggregation operators and
// the mapReduce command's map, reduce and finalize functions. Scripts run in
// github.com/dop251/goja runtimes with mongod's shell helpers (emit, sleep,
// ObjectId, ISODate, NumberLong, NumberInt, NumberDecimal, Timestamp,
// BinData, UUID, tojson, print, hex_md5, Array.sum, ...).
//
// BSON values cross into JavaScript and back as they do on mongod: int32 and
// double become numbers, int64 a NumberLong, decimal a NumberDecimal, dates
// Date objects, and so on; a number comes back as a double unless the field
// it replaces in the document it came from was an int32.
//
// Every run is tied to an Env whose context carries the operation's
// deadline (maxTimeMS), killOp and the member's shutdown: when it ends the
// runtime is interrupted, so no script (a runaway loop, a sleep) can hold a
// member. Runtimes are pooled; a Function is compiled once and is safe for
// concurrent use. Errors are *cmderr.Error values with mongod's codes.
package js
