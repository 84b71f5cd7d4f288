// Package query is mongosim's query engine: MongoDB query filters
// (CompileFilter, Match, MatchPosition for the positional $ operator), the
// document an upsert starts from (UpsertSeed), sort specifications
// (CompileSort) and find projections (CompileProjection), all as pure
// functions over in-memory bson.D documents.
//
// Filters are compiled once into a tree of predicates and then matched
// against many documents without per-document allocation. Semantics follow
// the MongoDB 8.0 server: implicit array traversal along dotted paths, null
// matching missing fields, type bracketing for comparisons, and the server's
// error codes and messages. Anything not implemented fails with a
// NotImplemented command error naming it, never with a wrong answer.
package query
