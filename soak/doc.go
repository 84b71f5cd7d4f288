// Package soak runs the chaos workload behind `sturdy soak`: many goroutines
// doing exactly-once increments, inserts with client _ids, versioned
// optimistic saves and register reads and writes through one sturdy client,
// while a fault schedule derived from a seed injects reply loss, request
// loss, connection resets, step-downs, overload and slow replies through
// fail points. Afterwards it proves, from the data, that every operation
// reported successful was applied exactly once and every failed one at most
// once, that no operation outlived its deadline, and (with porcupine) that
// the register history is linearizable.
//
// The package needs only a MongoDB URI that accepts configureFailPoint and
// replSetStepDown (mongosim, or mongod with enableTestCommands); the command
// in cmd/sturdy starts an embedded mongosim replica set by default.
package soak
