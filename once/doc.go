// Package once applies writes to MongoDB exactly once in spite of network
// errors, following the strategy of "How To Write Resilient MongoDB
// Applications": retry a failed operation once, and only after a transient
// error (a network error or a primary stepping down), and make every
// operation idempotent so the retry cannot apply it twice.
//
// The retry-once rule comes from what a driver does on a network error: it
// marks the server unknown and makes the next operation wait, re-checking the
// deployment, until a primary is found or server selection times out. One
// retry therefore rides out a blip or a failover; a second retry would only
// queue behind an outage the driver has already waited on. Command errors are
// never retried: the server received the command and refused it.
//
// Each kind of operation is made idempotent in its own way:
//
//   - Reads are naturally idempotent: use [Retry].
//   - [Collection.InsertOne] gives the document a client-generated _id. If the
//     retry fails with a duplicate key on the _id index, the first attempt
//     succeeded and only its reply was lost. A duplicate key on any other
//     unique index is returned as a [*DuplicateKeyError].
//   - [Collection.DeleteOne] with a filter on a unique key is idempotent: a
//     second delete matches nothing. [Collection.DeleteMany] deletes whatever
//     still matches, which is the same outcome.
//   - [Collection.UpdateOne], [Collection.UpdateMany] and
//     [Collection.ReplaceOne] accept only idempotent updates: a replacement or
//     the operators $set, $unset, $setOnInsert, $min, $max, $addToSet, $pull and
//     $pullAll, which leave the same document whether applied once or twice.
//     Anything else ($inc, $push, $mul, pipelines...) is rejected with
//     [ErrNotIdempotent].
//   - [Collection.Increment] turns the non-idempotent $inc into two idempotent
//     updates. Step one $addToSet's a fresh token, recording the amounts, into
//     the document's pending array (upserting the document); step two, a single
//     update filtered on the _id and the token, $pull's the token and $inc's
//     the fields. An update is atomic, so the fields move if and only if the
//     token is pulled, and a retried step two matches nothing.
//   - [Collection.Reconcile] is the clean-up pass for tokens whose step two
//     never completed. It folds them into the fields exactly once, and may run
//     repeatedly and concurrently with itself and with incrementers.
//
// The document of an Increment looks like this (field names configurable):
//
//	{_id: "2016-06-28", counter: 41,
//	 pending: [{t: ObjectId("..."), inc: [{f: "counter", n: 1}]}],
//	 pendingCutoff: ObjectId("...")}
//
// The amounts are stored as {f, n} pairs rather than as a sub-document so that
// dotted field names ("stats.views") are valid on every server version.
// pendingCutoff is written by Reconcile; see [Collection.Reconcile] for why.
//
// Every blocking call takes a context; a retry is not attempted once the
// context is done. The client's own retryable writes (on by default in
// sturdy) make the first attempt more likely to succeed but are not needed
// for these guarantees: the package is tested with them on and off.
//
// New takes an adapt.Collection: a *sturdy.Collection, or the official Go
// driver's collection through adapt/mongov2. Every test runs over both.
package once
