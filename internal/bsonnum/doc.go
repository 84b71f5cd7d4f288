// Package bsonnum reads BSON numbers as integers, one way for the whole
// module: servers send counts, ids and limits as int32, int64 or double
// depending on their version and the value, and every reader must accept
// all three alike.
package bsonnum
