// Package soak runs the chaos workload behind `sturdy soak`: many goroutines
// doing exactly-once increments, inserts with client _ids, versioned
// optimistic saves and register reads and writes through one client —
// sturdy's, or another driver's through adapt (Options.Driver) — while a
// fault schedule derived from a seed injects reply loss, request loss,
// connection resets, step-downs, overload and slow replies through fail
// points. Afterwards it proves, from the data, that every operation
// reported successful was applied exactly once and every failed one at most
// once, that no operation outlived its deadline, and (with porcupine) that
// the register history is linearizable.
//
// With Options.Transactions every operation is instead a transaction over
// the two halves of one collection, on two shards of a sharded cluster, and
// the checks also find half-committed transactions; router restarts, shard
// step-downs and commit replies lost after the commit join the faults.
//
// The records kept for the checks are a byte per operation (see
// records.go), so a long run's memory does not grow with strings or
// latencies per operation.
//
// The package needs only a MongoDB URI that accepts configureFailPoint and
// replSetStepDown (mongosim, or mongod with enableTestCommands); the command
// in cmd/sturdy starts an embedded mongosim replica set by default.
package soak
