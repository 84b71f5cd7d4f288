// Package update is mongosim's update engine: it compiles the update
// argument of the update, findAndModify and bulkWrite commands (a document
// of $-operators, a replacement document, or an aggregation pipeline) and
// applies it to in-memory documents with the MongoDB server's semantics,
// error codes and error messages.
//
// Operator updates are compiled, as the server does, into a tree keyed by
// path component. The tree gives conflict detection ("Updating the path 'a.b'
// would create a conflict at 'a'") and the 5.0+ rule that new fields are
// created in lexicographic order of their names (numeric names in numeric
// order), whatever order the update lists them in.
//
// Apply never mutates its input and reports whether the result differs
// byte for byte from the original, which is what nModified counts.
package update
