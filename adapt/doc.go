// Package adapt defines Collection, the method set the exactly-once patterns
// (once, optimistic) need from a MongoDB collection. *sturdy.Collection
// satisfies it as it is; adapt/mongov2 gives the official Go driver's
// *mongo.Collection the same methods.
package adapt
