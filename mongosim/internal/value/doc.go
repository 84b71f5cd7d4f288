// Package value holds the BSON value semantics mongosim's query, update and
// aggregation engines share: the canonical comparison order of BSON types,
// numeric arithmetic with MongoDB's type promotion, type names and deep copies.
//
// Documents are held in memory as bson.D (nested documents bson.D, arrays
// bson.A), exactly as bson.Unmarshal produces them into a bson.D, so field
// order is preserved the way MongoDB preserves it.
package value
