// Package sturdy is a MongoDB client built for writes that must neither be
// lost nor applied twice: every command runs through one execution path
// that attaches sessions and transaction numbers, retries retryable writes
// and reads, and backs off when the server reports overload.
//
// The API reads like the official Go driver's, with plain option structs
// whose zero value is the default:
//
//	client, err := sturdy.Connect(ctx, "mongodb://localhost:27017/?replicaSet=rs0")
//	if err != nil {
//		return err
//	}
//	defer client.Disconnect(context.Background())
//
//	coll := client.Database("shop").Collection("orders")
//	res, err := coll.InsertOne(ctx, bson.D{{Key: "item", Value: "tea"}, {Key: "qty", Value: 2}}, nil)
//	if err != nil {
//		return err
//	}
//	_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: res.InsertedID}},
//		bson.D{{Key: "$inc", Value: bson.D{{Key: "qty", Value: 1}}}}, &sturdy.UpdateOptions{Upsert: true})
//
//	cur, err := coll.Find(ctx, bson.D{{Key: "qty", Value: bson.D{{Key: "$gt", Value: 1}}}},
//		&sturdy.FindOptions{Sort: bson.D{{Key: "qty", Value: -1}}, Limit: 10})
//	if err != nil {
//		return err
//	}
//	defer cur.Close(ctx)
//	for cur.Next(ctx) {
//		var order struct{ Item string; Qty int }
//		if err := cur.Decode(&order); err != nil {
//			return err
//		}
//	}
//	return cur.Err()
//
// Documents and filters are anything bson.Marshal accepts (bson.D, bson.M,
// bson.Raw, tagged structs). Errors are typed and work with errors.As:
// *CommandError, *WriteException, *BulkWriteException,
// *ClientBulkWriteException, *NetworkError,
// *ServerSelectionError; HasErrorLabel, IsDuplicateKey, IsNetworkError and
// IsTimeout classify them. Every blocking call takes a context, and no
// goroutine outlives Client.Disconnect.
//
// # The packages
//
// The driver core is layered as pgx's is, each package one job, imports
// pointing down:
//
//	internal/connstring  connection strings, the client's Settings and the one table of Defaults
//	wire                 the wire-protocol codec shared by the client and the servers
//	internal/bufpool     the pooled buffers a cursor's replies are read into
//	internal/conn        one connection: dial, TLS, hello handshake, SCRAM, one round trip
//	internal/pool        a server's connection pool (CMAP)
//	internal/topology    server monitoring (SDAM) and server selection
//	internal/session     the server-session pool: lsid and txnNumber
//	internal/exec        the one execution loop: retries, overload backoff, token bucket
//	                     (with internal/backoff, internal/csot and internal/bsonnum)
//	sturdy (this)        Client, Database, Collection, Cursor, Session, options, URI
//
// Beside it: event (monitoring events), mongoerr (error types and server
// codes), readpref, once and optimistic (the exactly-once and
// optimistic-locking patterns), adapt/mongov2 (the patterns over the
// official driver), blackpipe and mongosim (the test servers), faultproxy
// (fault injection in front of a real deployment), soak (the chaos run
// behind `sturdy soak`) and cmd/sturdy (the CLI). The harnesses that import
// this package from inside the module (the specification-test runner, the
// client benchmarks) live in internal/harness, so that the rest of
// internal/ is the core below the API.
//
// Options travel down once: Connect validates them, resolves an SRV name
// and hands the result to the layers below as one connstring.Settings;
// topology.OptionsFrom, pool.OptionsFrom, conn.OptionsFrom and exec.New
// each read the fields their layer needs and apply connstring.Defaults.
//
// # How a command travels
//
// Collection.InsertOne builds the insert command and hands it to the
// executor (internal/exec) as an operation. The executor selects a server
// from the topology, checks a connection out of that server's pool,
// attaches the session's lsid and the next txnNumber, and sends the command
// with one round trip. On a retryable error (a network error, a primary
// stepping down) it marks the server unknown, selects again and sends the
// same command with the same txnNumber once more, so the server applies it
// at most once; on an overload error it backs off with jitter, paying a
// token from the client's retry bucket. Every attempt publishes command
// events. Start reading at collection.go, then internal/exec. docs/design.md
// follows one insert, one retry and one mongosim command file by file,
// function by function.
package sturdy
