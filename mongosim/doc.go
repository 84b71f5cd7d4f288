// Package mongosim is an in-memory MongoDB-compatible server for tests and
// demos: a standalone server, an N-member replica set, or a sharded cluster
// with routers (and optionally a load balancer in front of them) on loopback
// ports, with sessions, retryable writes, multi-document transactions,
// failCommand fail points, an ingress request limiter and step-down,
// speaking the real wire protocol so any driver in any language can connect.
//
// It is built on package blackpipe (the listener, connections and codec) and
// adds the command handlers. Every member of a replica set shares one data
// store, so replication is instant and a retried write finds its transaction
// record on whichever member is primary, as it would after real replication.
//
// What mongosim does not support fails loudly: a command or operator it does
// not implement answers an error naming it, never a silently wrong result.
// COMPATIBILITY.md lists every known difference from mongod and mongos.
//
// # Files
//
// One package, its files in named groups. The query, update, aggregation,
// collation and value engines are packages of their own under internal/
// (they take documents and return documents); what stays here shares the
// Cluster, Member, request and storage types, which is why sharding and
// transactions are file groups rather than packages: a router reuses the
// member's command table, request, error replies and fail points, and a
// package boundary would need a copy of each.
//
//   - Deployment: cluster.go (Cluster, Start, Close), options.go, member.go,
//     repl.go and replstatus.go (elections, step-down, replSetGetStatus),
//     hello.go, clustertime.go, limiter.go, failpoint.go.
//   - Commands: command.go (the request, the command table, register),
//     dispatch.go (a member's handle, then run's steps: admit, parseArgs,
//     gate, bindTxn, execute, decorate; the error replies and labels), then
//     one file per family: crud.go, bulkwrite.go, find.go, cursor.go,
//     aggregate.go, changestream.go, index.go, catalog.go, collmod.go,
//     views.go, validation.go, explain*.go, admin*.go, users.go, auth.go,
//     currentop.go, collstats.go, ttl.go, tailable.go, textsearch.go (text
//     indexes and $text over the tokenizer, scoring and inverted index of
//     internal/text), geoindex.go, geofind.go and geonear.go (2dsphere
//     and 2d indexes, $near and indexed $geoWithin in find and writes, the
//     $geoNear stage, over the S2 geometry of internal/geo),
//     mapreduce.go. Server-side JavaScript ($where,
//     $function, $accumulator, mapReduce) runs in internal/js under each
//     operation's context.
//   - Storage: storage.go (collections, records, indexes' upkeep), with the
//     canonical key of a value in internal/value (value.Key).
//   - Transactions, member side (txn_*.go): txn_retryable.go is the
//     retryable-write table (one record per session: txnNumber and the
//     statements it ran), txn_snapshot.go the snapshot engine of
//     multi-document transactions, txn_commands.go their commands, argument
//     checks and error labels.
//   - Sharding (shard_*.go): the routers and everything only a sharded
//     cluster has, listed below.
//
// # Sharding
//
// With Options.Routers > 0 clients talk to routers (shard_router.go), which
// behave as mongos: hello says "isdbgrid", they keep their own fail points
// and limiter, and relay commands to shard primaries over their own
// connection pools, retrying a read or retryable write on a new primary as
// mongos does. With Options.Shards > 1 the Cluster is shard 0 and further
// replica sets are started beside it (shard_cluster.go); the routers hold
// the config servers' metadata in process (shard_metadata.go: each
// database's primary shard, each sharded collection's key and chunks, and
// the chunk math that maps a document or filter to a shard).
//
// Router.handle (shard_router.go) decodes and admits a command and answers
// what mongos answers itself (hello, authentication, its fail points);
// with several shards it then routes it in this order (shard_dispatch.go): a
// transaction's statements go to the transaction's shard (shard_txn.go);
// the commands the router runs rather than relays by namespace
// (shardCollection, listShards, getMore on a merged cursor, listDatabases,
// the session commands…) are found in routerCommands, a table with the shape of the member's; a command on a
// sharded collection is targeted by its shard key: reads in shard_read.go
// (one shard relayed, several merged by the router into its own cursor),
// writes in shard_write.go and the client-level bulkWrite in shard_bulk.go;
// everything else goes to the database's primary shard. shard_rpc.go is
// the round trip to a shard, shard_admin.go the admin commands.
//
// # Load balancing
//
// Options.LoadBalanced starts a Balancer (shard_loadbalancer.go) in front of
// the routers, as an L4 load balancer: each client connection is bound to
// one router for its life, and hello answers carry the router's serviceId,
// as the load-balancer spec requires.
//
// # Transactions
//
// A member runs a transaction on a snapshot of the collections it touches
// (txn_snapshot.go): writes go to private copies and a document another
// open transaction wrote is a WriteConflict (first writer wins); commit
// applies the copies to the live collections at once. The session's record
// in the retryable-write table (txn_retryable.go) holds the transaction, so
// it survives step-down and connection loss as mongod's config.transactions
// does. txn_prepare.go is a participant's side of two-phase commit
// (prepareTransaction, commit at a commitTimestamp; a prepared transaction
// survives step-down and blocks what it wrote).
//
// On a sharded cluster the router side is shard_txn.go: every shard a
// statement reaches becomes a participant, the first that writes is the
// coordinator, and commitTransaction takes mongos' paths, two-phase commit
// through shard_txn_coordinator.go when several shards wrote (its decision
// outlives the router and the coordinator's primary);
// shard_txn_router.go is what a router remembers of the transactions it
// routed. Updates that change a shard key move the document in a
// transaction (shard_keychange*.go); change streams over several shards
// are merged by cluster time (shard_changestream.go); hashed keys use
// mongod's hash (shard_hash.go).
package mongosim
