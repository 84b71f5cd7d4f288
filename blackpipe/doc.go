// Package blackpipe is a scriptable MongoDB wire-protocol server for tests,
// in the spirit of MockupDB: any MongoDB driver connects to it over TCP (or
// TLS) and the test decides, request by request, what the "server" answers,
// including network faults a real server cannot be made to produce on cue.
//
// By default the server answers the commands every driver sends on its own
// (hello and the legacy isMaster over OP_MSG and OP_QUERY, buildInfo, ping,
// endSessions), so a driver can connect and the test only scripts the
// commands it is about. Each request is offered in turn to the
// autoresponders (newest first), Options.Handler, the built-in defaults and
// finally a queue that Receive pops from:
//
//	s := blackpipe.Start(t)
//	client, _ := mongo.Connect(options.Client().ApplyURI(s.URI()))
//	go func() { _, _ = client.Database("db").Collection("c").InsertOne(ctx, bson.D{{"x", 1}}) }()
//	r, err := s.Receive(ctx, blackpipe.Command("insert"))
//	if err != nil {
//		t.Fatal(err)
//	}
//	r.Reply(bson.D{{"n", 1}}) // or r.Hangup(), r.Reset(), r.NoReply(), r.ReplyError(...)
//
// A connection reads its next message only when the current request is
// resolved (replied to or faulted), as a real server processes one command
// per connection at a time. Compressed requests (snappy, zlib, zstd) are
// decompressed transparently and answered with the same compressor, and
// OP_MSG checksums are verified. Legacy operations MongoDB 5.1+ dropped get
// mongod's answer (legacy.go). A client that sends something malformed is
// logged and disconnected. Close stops every goroutine the server started.
package blackpipe
