// Package mongov2 adapts the official Go driver's *mongo.Collection
// (go.mongodb.org/mongo-driver/v2) to adapt.Collection, so once and
// optimistic run over an application's existing client:
//
//	events := once.New(mongov2.Collection(officialColl))
//
// Errors are translated into sturdy's error types (the original stays
// reachable with errors.As), because once and optimistic decide on retries
// and outcomes from them. Options the official driver cannot express here
// (explicit sturdy sessions, MaxTime) fail with sturdy.ErrInvalidArgument.
//
// It is the only library package of the module that imports the official
// driver's mongo package.
package mongov2
