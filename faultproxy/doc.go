// Package faultproxy is a MongoDB-aware fault-injection proxy: it sits
// between any MongoDB driver and a real mongod, mongos or replica set (or
// mongosim) and, following a list of rules, makes chosen commands fail the
// way networks and servers fail in production — the reply lost after the
// server applied a write, the request lost before it, a TCP reset, a delay,
// a command error with labels, or overload shedding with code 462.
//
//	p, err := faultproxy.Start(ctx, faultproxy.Options{
//		Upstreams: []string{"db1.example:27017"},
//		Rules: []faultproxy.Rule{{
//			Match:  faultproxy.Match{Commands: []string{"update"}, Namespace: "app.counters"},
//			Action: faultproxy.Action{Kind: faultproxy.DropReply},
//			Probability: 0.2, Times: 5,
//		}},
//	})
//	...
//	client, err := sturdy.Connect(ctx, p.URI())
//
// # Discovery
//
// Each upstream server gets its own listener. At Start the proxy asks the
// first reachable upstream for isMaster and opens a listener for every member
// it names, so URI lists one proxy address per member. In every hello and
// isMaster reply that passes through (OP_MSG and the legacy OP_QUERY form,
// streamed replies included) the hosts, passives, arbiters, primary and me
// fields are rewritten to the proxy's addresses, so a driver that discovers
// the deployment keeps talking through the proxy. A member named later (a
// reconfig) gets a listener when a reply first names it.
//
// # What the proxy changes on the way
//
// The compression field is removed from every hello the client sends, so the
// server never negotiates compression and all traffic stays readable; an
// OP_COMPRESSED message that arrives anyway is decompressed to inspect it and
// forwarded unchanged. Streaming hello (exhaustAllowed requests answered with
// moreToCome replies) is forwarded as it is, each streamed reply rewritten;
// requests with moreToCome (unacknowledged writes) get no reply and expect
// none. Nothing else is modified: authentication, sessions and cursors pass
// through untouched.
//
// # Rules
//
// Every request is offered to the rules in order; the first rule that
// matches and fires decides what happens to it, and a request no rule fires
// on is forwarded. A rule matches on command names (case-insensitive),
// namespace ("db" or "db.coll"), the appName the connection sent in its
// handshake, and the proxy's connection id. Skip, Times and Probability
// decide which matching requests it fires on; each rule draws from its own
// generator seeded from Seed, so for a given sequence of matching requests the
// same ones fail on every run. Rules can be replaced at run time (SetRules),
// loaded from a small JSON file (ParseRules, LoadRulesFile), and Counts
// reports how often each one matched and fired.
//
// Malformed traffic from either side closes the connection pair; nothing
// from the network can make the proxy panic. Close stops every goroutine.
package faultproxy
