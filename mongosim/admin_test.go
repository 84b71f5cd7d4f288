package mongosim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
)

// Admin and monitoring commands, through the official Go driver over TCP.

func lookupInt(t *testing.T, raw bson.Raw, path ...string) int64 {
	t.Helper()
	v, err := raw.LookupErr(path...)
	if err != nil {
		t.Fatalf("%s missing in %v", strings.Join(path, "."), raw)
	}
	n, ok := v.AsInt64OK()
	if !ok {
		t.Fatalf("%s is %v, want a number", strings.Join(path, "."), v)
	}
	return n
}

func TestServerStatusCounts(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	admin := client.Database("admin")
	before := mustRun(t, ctx, admin, bson.D{{Key: "serverStatus", Value: 1}})
	coll := client.Database("db").Collection("ss")
	_, err := coll.InsertMany(ctx, []any{bson.D{{Key: "a", Value: 1}}, bson.D{{Key: "a", Value: 2}}, bson.D{{Key: "a", Value: 3}}})
	sdNoErr(t, err)
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "a", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: 1}}}})
	sdNoErr(t, err)
	_, err = coll.DeleteMany(ctx, bson.D{{Key: "a", Value: 3}})
	sdNoErr(t, err)
	cur, err := coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(1))
	sdNoErr(t, err)
	var all []bson.D
	sdNoErr(t, cur.All(ctx, &all))
	after := mustRun(t, ctx, admin, bson.D{{Key: "serverStatus", Value: 1}})
	delta := func(name string) int64 {
		return lookupInt(t, after, "opcounters", name) - lookupInt(t, before, "opcounters", name)
	}
	// 3 documents inserted, 1 update and 1 delete statement, 1 find and
	// its getMore (2 documents in batches of 1), and at least the
	// serverStatus command.
	if delta("insert") != 3 || delta("update") != 1 || delta("delete") != 1 || delta("query") != 1 || delta("getmore") < 1 || delta("command") < 1 {
		t.Fatalf("opcounters before %v after %v", before.Lookup("opcounters"), after.Lookup("opcounters"))
	}
	for _, f := range [][]string{{"host"}, {"version"}, {"process"}, {"pid"}, {"uptime"}, {"localTime"},
		{"connections", "current"}, {"connections", "available"}, {"connections", "totalCreated"}, {"connections", "active"},
		{"mem", "bits"}, {"mem", "resident"}, {"mem", "virtual"},
		{"repl", "setName"}, {"repl", "isWritablePrimary"}, {"repl", "secondary"}, {"repl", "hosts"}, {"repl", "primary"},
		{"repl", "me"}, {"repl", "electionId"}, {"repl", "topologyVersion"},
		{"network", "bytesIn"}, {"network", "bytesOut"}, {"network", "numRequests"}, {"transactions", "totalStarted"}} {
		if _, err := after.LookupErr(f...); err != nil {
			t.Errorf("serverStatus lacks %s", strings.Join(f, "."))
		}
	}
	if after.Lookup("repl", "setName").StringValue() != "rs0" || !after.Lookup("repl", "isWritablePrimary").Boolean() {
		t.Fatalf("repl %v", after.Lookup("repl"))
	}
	if lookupInt(t, after, "connections", "current") < 1 || lookupInt(t, after, "connections", "active") < 1 || lookupInt(t, after, "mem", "bits") != 64 {
		t.Fatalf("connections/mem %v %v", after.Lookup("connections"), after.Lookup("mem"))
	}
	if lookupInt(t, after, "network", "bytesIn") <= lookupInt(t, before, "network", "bytesIn") ||
		lookupInt(t, after, "network", "bytesOut") <= lookupInt(t, before, "network", "bytesOut") {
		t.Fatalf("network.bytesIn did not grow: %v → %v", before.Lookup("network"), after.Lookup("network"))
	}
}

func TestReplSetConfigAndStatus(t *testing.T) {
	c := StartWithOptions(t, Options{Members: 3})
	ctx := testCtx(t)
	client := connect(t, c.URI())
	admin := client.Database("admin")
	_, err := client.Database("db").Collection("c").InsertOne(ctx, bson.D{{Key: "x", Value: 1}})
	sdNoErr(t, err)

	cfg := mustRun(t, ctx, admin, bson.D{{Key: "replSetGetConfig", Value: 1}}).Lookup("config").Document()
	if cfg.Lookup("_id").StringValue() != "rs0" || lookupInt(t, cfg, "version") < 1 || lookupInt(t, cfg, "term") < 1 {
		t.Fatalf("config %v", cfg)
	}
	members, _ := cfg.Lookup("members").Array().Values()
	if len(members) != 3 {
		t.Fatalf("config members %v", members)
	}
	for i, m := range members {
		d := m.Document()
		if lookupInt(t, d, "_id") != int64(i) || d.Lookup("host").StringValue() != c.Members()[i].Addr() ||
			d.Lookup("arbiterOnly").Boolean() || !d.Lookup("buildIndexes").Boolean() || d.Lookup("hidden").Boolean() ||
			lookupInt(t, d, "votes") != 1 || lookupInt(t, d, "secondaryDelaySecs") != 0 {
			t.Fatalf("member %d %v", i, d)
		}
		if _, err := d.LookupErr("tags"); err != nil {
			t.Fatalf("member %d lacks tags", i)
		}
		if p, _ := d.Lookup("priority").AsFloat64OK(); p != 1 {
			t.Fatalf("member %d priority %v", i, d.Lookup("priority"))
		}
	}
	if _, err := cfg.LookupErr("settings", "replicaSetId"); err != nil {
		t.Fatalf("settings %v", cfg.Lookup("settings"))
	}
	if cs := mustRun(t, ctx, admin, bson.D{{Key: "replSetGetConfig", Value: 1}, {Key: "commitmentStatus", Value: true}}); !cs.Lookup("commitmentStatus").Boolean() {
		t.Fatalf("commitmentStatus %v", cs)
	}

	st := mustRun(t, ctx, admin, bson.D{{Key: "replSetGetStatus", Value: 1}})
	committed := st.Lookup("optimes", "lastCommittedOpTime", "ts")
	ts, _, _ := committed.TimestampOK()
	if st.Lookup("set").StringValue() != "rs0" || lookupInt(t, st, "myState") != 1 || ts == 0 {
		t.Fatalf("status %v", st)
	}
	sm, _ := st.Lookup("members").Array().Values()
	if len(sm) != 3 {
		t.Fatalf("status members %v", sm)
	}
	self := 0
	for i, m := range sm {
		d := m.Document()
		want := "SECONDARY"
		if i == 0 {
			want = "PRIMARY"
		}
		if d.Lookup("stateStr").StringValue() != want || d.Lookup("name").StringValue() != c.Members()[i].Addr() {
			t.Fatalf("member %d %v", i, d)
		}
		if mts, _, _ := d.Lookup("optime", "ts").TimestampOK(); mts != ts {
			t.Fatalf("member %d optime %v, committed %v", i, d.Lookup("optime"), committed)
		}
		for _, f := range []string{"health", "uptime", "optimeDate"} {
			if _, err := d.LookupErr(f); err != nil {
				t.Fatalf("member %d lacks %s", i, f)
			}
		}
		if v, err := d.LookupErr("self"); err == nil && v.Boolean() {
			self++
		} else if _, err := d.LookupErr("lastHeartbeat"); err != nil {
			t.Fatalf("member %d lacks lastHeartbeat", i)
		}
	}
	if self != 1 {
		t.Fatalf("%d members say self", self)
	}
	// mongod refuses both outside admin
	_, err = runCmd(ctx, client.Database("db"), bson.D{{Key: "replSetGetConfig", Value: 1}})
	commandError(t, err, 13)

	// rs.printReplicationInfo() reads the oplog's first and last entries.
	oplog := client.Database("local").Collection("oplog.rs")
	for _, dir := range []int{1, -1} {
		var e bson.Raw
		sdNoErr(t, oplog.FindOne(ctx, bson.D{}, options.FindOne().SetSort(bson.D{{Key: "$natural", Value: dir}})).Decode(&e))
		if _, _, ok := e.Lookup("ts").TimestampOK(); !ok {
			t.Fatalf("oplog entry %v", e)
		}
	}
	stats := oplogStats(t, ctx, oplog)
	if lookupInt(t, stats, "maxSize") <= 0 || !stats.Lookup("capped").Boolean() {
		t.Fatalf("oplog storageStats %v", stats)
	}
}

func oplogStats(t *testing.T, ctx context.Context, coll *mongo.Collection) bson.Raw {
	t.Helper()
	cur, err := coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$collStats", Value: bson.D{{Key: "storageStats", Value: bson.D{}}}}}})
	sdNoErr(t, err)
	var out []bson.Raw
	sdNoErr(t, cur.All(ctx, &out))
	if len(out) != 1 {
		t.Fatalf("$collStats returned %d documents", len(out))
	}
	return out[0].Lookup("storageStats").Document()
}

func TestGetParameterAndGetLog(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	admin := client.Database("admin")
	got := mustRun(t, ctx, admin, bson.D{{Key: "getParameter", Value: 1}, {Key: "featureCompatibilityVersion", Value: 1}})
	if got.Lookup("featureCompatibilityVersion", "version").StringValue() != "8.0" {
		t.Fatalf("getParameter %v", got)
	}
	all := mustRun(t, ctx, admin, bson.D{{Key: "getParameter", Value: "*"}})
	if all.Lookup("featureCompatibilityVersion", "version").StringValue() != "8.0" || lookupInt(t, all, "transactionLifetimeLimitSeconds") != 60 {
		t.Fatalf("getParameter * %v", all)
	}
	_, err := runCmd(ctx, admin, bson.D{{Key: "getParameter", Value: 1}, {Key: "noSuchParameter", Value: 1}})
	commandError(t, err, 72)

	names := mustRun(t, ctx, admin, bson.D{{Key: "getLog", Value: "*"}})
	if fmt.Sprint(names.Lookup("names")) != `["global","startupWarnings"]` {
		t.Fatalf("getLog * %v", names)
	}
	// A refused authentication is logged as a warning; getLog shows it.
	bad := connect(t, strings.Replace(client2URI(t, client), "mongodb://", "mongodb://nobody:wrong@", 1))
	if err := bad.Ping(ctx, readpref.Primary()); err == nil {
		t.Fatal("a user that does not exist authenticated")
	}
	global := mustRun(t, ctx, admin, bson.D{{Key: "getLog", Value: "global"}})
	lines, _ := global.Lookup("log").Array().Values()
	found := false
	for _, l := range lines {
		if strings.Contains(l.StringValue(), `"s":"W"`) && strings.Contains(l.StringValue(), "saslStart") {
			found = true
		}
	}
	if !found || lookupInt(t, global, "totalLinesWritten") < 1 {
		t.Fatalf("getLog global %v", global)
	}
	if _, err := runCmd(ctx, admin, bson.D{{Key: "getLog", Value: "nope"}}); err == nil {
		t.Fatal("getLog of an unknown log succeeded")
	}
}

// client2URI is the URI the test's dataClient connected to.
func client2URI(t *testing.T, client *mongo.Client) string {
	t.Helper()
	raw := mustRun(t, sdCtx(t), client.Database("admin"), bson.D{{Key: "hello", Value: 1}})
	return "mongodb://" + raw.Lookup("me").StringValue() + "/?directConnection=true"
}

func TestUsersCreateAuthenticateDrop(t *testing.T) {
	client, c := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("app")
	mustRun(t, ctx, db, bson.D{{Key: "createUser", Value: "bob"}, {Key: "pwd", Value: "pw1"},
		{Key: "roles", Value: bson.A{"readWrite", bson.D{{Key: "role", Value: "read"}, {Key: "db", Value: "other"}}}},
		{Key: "customData", Value: bson.D{{Key: "team", Value: "x"}}}})
	_, err := runCmd(ctx, db, bson.D{{Key: "createUser", Value: "bob"}, {Key: "pwd", Value: "pw"}, {Key: "roles", Value: bson.A{}}})
	commandError(t, err, 51003)
	_, err = runCmd(ctx, db, bson.D{{Key: "createUser", Value: "eve"}, {Key: "pwd", Value: "pw"}, {Key: "roles", Value: bson.A{"root"}}})
	commandError(t, err, 31) // root exists only on admin
	mustRun(t, ctx, db, bson.D{{Key: "createUser", Value: "sha1only"}, {Key: "pwd", Value: "pw"}, {Key: "roles", Value: bson.A{}},
		{Key: "mechanisms", Value: bson.A{"SCRAM-SHA-1"}}})

	info := mustRun(t, ctx, db, bson.D{{Key: "usersInfo", Value: 1}})
	users, _ := info.Lookup("users").Array().Values()
	if len(users) != 2 {
		t.Fatalf("usersInfo %v", info)
	}
	bob := users[0].Document()
	if bob.Lookup("_id").StringValue() != "app.bob" || bob.Lookup("customData", "team").StringValue() != "x" ||
		fmt.Sprint(bob.Lookup("mechanisms")) != `["SCRAM-SHA-1","SCRAM-SHA-256"]` || len(mustValues(bob.Lookup("roles"))) != 2 {
		t.Fatalf("bob %v", bob)
	}
	if _, err := bob.LookupErr("credentials"); err == nil {
		t.Fatal("credentials shown without showCredentials")
	}
	one := mustRun(t, ctx, db, bson.D{{Key: "usersInfo", Value: bson.D{{Key: "user", Value: "bob"}, {Key: "db", Value: "app"}}}, {Key: "showCredentials", Value: true}})
	if _, err := one.LookupErr("users", "0", "credentials", "SCRAM-SHA-256", "storedKey"); err != nil {
		t.Fatalf("showCredentials %v", one)
	}

	uri := c.Members()[0].URI()
	for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-1"} {
		cl := connect(t, uri, options.Client().SetAuth(options.Credential{AuthMechanism: mech, AuthSource: "app", Username: "bob", Password: "pw1"}))
		raw := mustRun(t, ctx, cl.Database("app"), bson.D{{Key: "connectionStatus", Value: 1}})
		if raw.Lookup("authInfo", "authenticatedUsers", "0", "user").StringValue() != "bob" ||
			raw.Lookup("authInfo", "authenticatedUserRoles", "0", "role").StringValue() != "readWrite" {
			t.Fatalf("%s connectionStatus %v", mech, raw)
		}
	}
	// sha1only has no SCRAM-SHA-256 credentials
	sha256 := connect(t, uri, options.Client().SetAuth(options.Credential{AuthMechanism: "SCRAM-SHA-256", AuthSource: "app", Username: "sha1only", Password: "pw"}))
	if err := sha256.Ping(ctx, readpref.Primary()); err == nil {
		t.Fatal("SCRAM-SHA-256 authenticated a SCRAM-SHA-1-only user")
	}

	mustRun(t, ctx, db, bson.D{{Key: "updateUser", Value: "bob"}, {Key: "pwd", Value: "pw2"}})
	old := connect(t, uri, options.Client().SetAuth(options.Credential{AuthSource: "app", Username: "bob", Password: "pw1"}))
	if err := old.Ping(ctx, readpref.Primary()); err == nil {
		t.Fatal("the old password still authenticates")
	}
	renewed := connect(t, uri, options.Client().SetAuth(options.Credential{AuthSource: "app", Username: "bob", Password: "pw2"}))
	sdNoErr(t, renewed.Ping(ctx, readpref.Primary()))

	mustRun(t, ctx, db, bson.D{{Key: "dropUser", Value: "bob"}})
	_, err = runCmd(ctx, db, bson.D{{Key: "dropUser", Value: "bob"}})
	commandError(t, err, 11)
	_, err = runCmd(ctx, db, bson.D{{Key: "updateUser", Value: "bob"}, {Key: "pwd", Value: "x"}})
	commandError(t, err, 11)
	gone := connect(t, uri, options.Client().SetAuth(options.Credential{AuthSource: "app", Username: "bob", Password: "pw2"}))
	if err := gone.Ping(ctx, readpref.Primary()); err == nil {
		t.Fatal("a dropped user authenticated")
	}
	n := mustRun(t, ctx, db, bson.D{{Key: "dropAllUsersFromDatabase", Value: 1}})
	if lookupInt(t, n, "n") != 1 {
		t.Fatalf("dropAllUsersFromDatabase %v", n)
	}
}

func mustValues(v bson.RawValue) []bson.RawValue {
	vals, _ := v.Array().Values()
	return vals
}

// A user created with createUser authenticates on a deployment that
// requires authentication, alongside the Options user.
func TestCreatedUserAuthenticatesWithAuthOn(t *testing.T) {
	c := StartWithOptions(t, Options{Auth: AuthOptions{Username: "root", Password: "rootpw"}})
	ctx := testCtx(t)
	root := connect(t, c.URI(), options.Client().SetAuth(options.Credential{Username: "root", Password: "rootpw"}))
	mustRun(t, ctx, root.Database("admin"), bson.D{{Key: "createUser", Value: "ops"}, {Key: "pwd", Value: "opspw"}, {Key: "roles", Value: bson.A{"clusterMonitor"}}})
	ops := connect(t, c.URI(), options.Client().SetAuth(options.Credential{Username: "ops", Password: "opspw"}))
	mustRun(t, ctx, ops.Database("admin"), bson.D{{Key: "serverStatus", Value: 1}})
	info := mustRun(t, ctx, root.Database("admin"), bson.D{{Key: "usersInfo", Value: bson.D{{Key: "forAllDBs", Value: true}}}})
	if len(mustValues(info.Lookup("users"))) != 2 {
		t.Fatalf("usersInfo forAllDBs %v", info)
	}
}

func TestCurrentOpAndKillOp(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	admin := client.Database("admin")
	coll := client.Database("db").Collection("blocked")
	_, err := coll.InsertOne(ctx, bson.D{{Key: "x", Value: 1}})
	sdNoErr(t, err)
	setFailCommand(t, ctx, admin, bson.D{{Key: "times", Value: 1}}, bson.D{
		{Key: "failCommands", Value: bson.A{"find"}}, {Key: "blockConnection", Value: true}, {Key: "blockTimeMS", Value: 60000},
	})
	done := make(chan error, 1)
	go func() {
		_, err := coll.Find(ctx, bson.D{{Key: "x", Value: 1}})
		done <- err
	}()
	// Wait for the blocked find to show in currentOp.
	var opid int64
	for opid == 0 {
		if ctx.Err() != nil {
			t.Fatal("the blocked find never showed in currentOp")
		}
		raw := mustRun(t, ctx, admin, bson.D{{Key: "currentOp", Value: 1}, {Key: "ns", Value: "db.blocked"}})
		ops := mustValues(raw.Lookup("inprog"))
		if len(ops) == 1 {
			op := ops[0].Document()
			if op.Lookup("op").StringValue() != "query" || !op.Lookup("active").Boolean() ||
				op.Lookup("command", "find").StringValue() != "blocked" || op.Lookup("client").StringValue() == "" {
				t.Fatalf("currentOp entry %v", op)
			}
			_ = lookupInt(t, op, "secs_running")
			opid = lookupInt(t, op, "opid")
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not synchronisation
	}
	// The same operation through the $currentOp stage.
	cur, err := admin.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$currentOp", Value: bson.D{{Key: "allUsers", Value: true}}}},
		{{Key: "$match", Value: bson.D{{Key: "opid", Value: opid}}}},
	})
	sdNoErr(t, err)
	var staged []bson.Raw
	sdNoErr(t, cur.All(ctx, &staged))
	if len(staged) != 1 || staged[0].Lookup("ns").StringValue() != "db.blocked" {
		t.Fatalf("$currentOp %v", staged)
	}

	res := mustRun(t, ctx, admin, bson.D{{Key: "killOp", Value: 1}, {Key: "op", Value: opid}})
	if res.Lookup("info").StringValue() != "attempting to kill op" {
		t.Fatalf("killOp %v", res)
	}
	select {
	case err := <-done:
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != 11601 || ce.Name != "Interrupted" {
			t.Fatalf("killed find: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("killOp did not interrupt the blocked find")
	}
	_, err = runCmd(ctx, client.Database("db"), bson.D{{Key: "currentOp", Value: 1}})
	commandError(t, err, 13)

	// $all lists idle connections too: an application's pooled connection
	// that is doing nothing.
	idle := connect(t, client2URI(t, client), options.Client().SetAppName("idle-app"))
	sdNoErr(t, idle.Ping(ctx, readpref.Primary()))
	for _, cmd := range []bson.D{{{Key: "currentOp", Value: 1}, {Key: "$all", Value: true}, {Key: "appName", Value: "idle-app"}, {Key: "active", Value: false}}} {
		if len(mustValues(mustRun(t, ctx, admin, cmd).Lookup("inprog"))) == 0 {
			t.Fatalf("%v lists no idle connection", cmd)
		}
	}
	if n := len(mustValues(mustRun(t, ctx, admin, bson.D{{Key: "currentOp", Value: 1}, {Key: "appName", Value: "idle-app"}}).Lookup("inprog"))); n != 0 {
		t.Fatalf("currentOp without $all lists %d idle operations", n)
	}
}

func TestCollStatsAndDBStats(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("st")
	coll := db.Collection("c")
	docs := []any{}
	for i := range 10 {
		docs = append(docs, bson.D{{Key: "_id", Value: int32(i)}, {Key: "name", Value: strings.Repeat("n", i)}})
	}
	_, err := coll.InsertMany(ctx, docs)
	sdNoErr(t, err)
	_, err = coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "name", Value: 1}}})
	sdNoErr(t, err)
	var size int64
	for _, d := range docs {
		b, _ := bson.Marshal(d)
		size += int64(len(b))
	}

	st := mustRun(t, ctx, db, bson.D{{Key: "collStats", Value: "c"}})
	if lookupInt(t, st, "count") != 10 || lookupInt(t, st, "size") != size || lookupInt(t, st, "avgObjSize") != size/10 ||
		lookupInt(t, st, "nindexes") != 2 || st.Lookup("capped").Boolean() || lookupInt(t, st, "storageSize") != size {
		t.Fatalf("collStats (size %d) %v", size, st)
	}
	total := lookupInt(t, st, "totalIndexSize")
	if total <= 0 || lookupInt(t, st, "indexSizes", "_id_")+lookupInt(t, st, "indexSizes", "name_1") != total {
		t.Fatalf("index sizes %v", st)
	}
	scaled := mustRun(t, ctx, db, bson.D{{Key: "collStats", Value: "c"}, {Key: "scale", Value: 2}})
	if lookupInt(t, scaled, "size") != size/2 || lookupInt(t, scaled, "scaleFactor") != 2 {
		t.Fatalf("scaled collStats %v", scaled)
	}
	_, err = runCmd(ctx, db, bson.D{{Key: "collStats", Value: "missing"}})
	commandError(t, err, 26)

	cur, err := coll.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$collStats", Value: bson.D{{Key: "storageStats", Value: bson.D{}}, {Key: "count", Value: bson.D{}}}}},
	})
	sdNoErr(t, err)
	var out []bson.Raw
	sdNoErr(t, cur.All(ctx, &out))
	if len(out) != 1 || out[0].Lookup("ns").StringValue() != "st.c" || lookupInt(t, out[0], "count") != 10 ||
		lookupInt(t, out[0], "storageStats", "size") != size || lookupInt(t, out[0], "storageStats", "totalIndexSize") != total {
		t.Fatalf("$collStats %v", out)
	}
	_, err = coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$match", Value: bson.D{}}}, {{Key: "$collStats", Value: bson.D{}}}})
	commandError(t, err, 40602)

	// latencyStats counts the operations on the collection by kind: the
	// insert (one command) and createIndexes so far, then two reads.
	sdNoErr(t, coll.FindOne(ctx, bson.D{}).Err())
	_, err = coll.CountDocuments(ctx, bson.D{})
	sdNoErr(t, err)
	cur, err = coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$collStats", Value: bson.D{{Key: "latencyStats", Value: bson.D{{Key: "histograms", Value: true}}}}}}})
	sdNoErr(t, err)
	out = nil
	sdNoErr(t, cur.All(ctx, &out))
	lat := out[0].Lookup("latencyStats").Document()
	if lookupInt(t, lat, "writes", "ops") != 1 || lookupInt(t, lat, "reads", "ops") < 4 || lookupInt(t, lat, "commands", "ops") < 1 ||
		len(mustValues(lat.Lookup("reads", "histogram"))) == 0 {
		t.Fatalf("latencyStats %v", lat)
	}

	dbs := mustRun(t, ctx, db, bson.D{{Key: "dbStats", Value: 1}})
	if lookupInt(t, dbs, "objects") != 10 || lookupInt(t, dbs, "dataSize") != size || lookupInt(t, dbs, "indexSize") != total || lookupInt(t, dbs, "indexes") != 2 {
		t.Fatalf("dbStats %v", dbs)
	}
}

func explainOf(t *testing.T, ctx context.Context, db *mongo.Database, inner bson.D, verbosity string) bson.Raw {
	t.Helper()
	return mustRun(t, ctx, db, bson.D{{Key: "explain", Value: inner}, {Key: "verbosity", Value: verbosity}})
}

func TestExplain(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("ex")
	coll := db.Collection("c")
	for i := range 5 {
		_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: int32(i)}, {Key: "a", Value: int32(i % 2)}})
		sdNoErr(t, err)
	}

	q := explainOf(t, ctx, db, bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "a", Value: 1}}}}, "queryPlanner")
	if q.Lookup("queryPlanner", "namespace").StringValue() != "ex.c" ||
		q.Lookup("queryPlanner", "winningPlan", "stage").StringValue() != "COLLSCAN" ||
		fmt.Sprint(q.Lookup("queryPlanner", "parsedQuery")) != `{"a": {"$eq": {"$numberInt":"1"}}}` ||
		len(mustValues(q.Lookup("queryPlanner", "rejectedPlans"))) != 0 ||
		q.Lookup("serverInfo", "version").StringValue() != Version || q.Lookup("command", "find").StringValue() != "c" {
		t.Fatalf("queryPlanner explain %v", q)
	}
	if _, err := q.LookupErr("executionStats"); err == nil {
		t.Fatal("queryPlanner verbosity has executionStats")
	}

	e := explainOf(t, ctx, db, bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "a", Value: 1}}},
		{Key: "sort", Value: bson.D{{Key: "_id", Value: -1}}}, {Key: "limit", Value: 1}}, "executionStats")
	// As on mongod, the _id index gives the sort: walked backwards, it
	// stops at the first match (_id 4 has a: 0, _id 3 a: 1).
	if lookupInt(t, e, "executionStats", "nReturned") != 1 || lookupInt(t, e, "executionStats", "totalDocsExamined") != 2 ||
		lookupInt(t, e, "executionStats", "totalKeysExamined") != 2 ||
		e.Lookup("queryPlanner", "winningPlan", "stage").StringValue() != "LIMIT" ||
		e.Lookup("queryPlanner", "winningPlan", "inputStage", "inputStage", "direction").StringValue() != "backward" ||
		fmt.Sprint(e.Lookup("queryPlanner", "winningPlan", "inputStage", "inputStage", "indexBounds", "_id")) != `["[MaxKey, MinKey]"]` {
		t.Fatalf("executionStats explain %v", e)
	}
	// A sort no index gives is a SORT over the scan, holding the limit.
	e = explainOf(t, ctx, db, bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "a", Value: 1}}},
		{Key: "sort", Value: bson.D{{Key: "a", Value: -1}}}, {Key: "limit", Value: 1}}, "executionStats")
	if lookupInt(t, e, "executionStats", "nReturned") != 1 || lookupInt(t, e, "executionStats", "totalDocsExamined") != 5 ||
		lookupInt(t, e, "executionStats", "totalKeysExamined") != 0 ||
		e.Lookup("queryPlanner", "winningPlan", "stage").StringValue() != "SORT" ||
		lookupInt(t, e, "queryPlanner", "winningPlan", "limitAmount") != 1 ||
		e.Lookup("queryPlanner", "winningPlan", "inputStage", "stage").StringValue() != "COLLSCAN" ||
		lookupInt(t, e, "executionStats", "executionStages", "inputStage", "nReturned") != 2 {
		t.Fatalf("executionStats explain with SORT %v", e)
	}
	if _, err := e.LookupErr("executionStats", "executionTimeMillis"); err != nil {
		t.Fatal("no executionTimeMillis")
	}

	// Without a sort the scan stops at the limit: _id 1 is the first a: 1.
	lim := explainOf(t, ctx, db, bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "limit", Value: 1}}, "executionStats")
	if lim.Lookup("queryPlanner", "winningPlan", "stage").StringValue() != "LIMIT" ||
		lookupInt(t, lim, "executionStats", "totalDocsExamined") != 2 || lookupInt(t, lim, "executionStats", "nReturned") != 1 {
		t.Fatalf("limited scan %v", lim.Lookup("executionStats"))
	}

	id := explainOf(t, ctx, db, bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "_id", Value: 3}}}}, "allPlansExecution")
	if id.Lookup("queryPlanner", "winningPlan", "indexName").StringValue() != "_id_" || lookupInt(t, id, "executionStats", "totalDocsExamined") != 1 {
		t.Fatalf("_id explain %v", id)
	}
	if _, err := id.LookupErr("executionStats", "allPlansExecution"); err != nil {
		t.Fatal("allPlansExecution verbosity lacks allPlansExecution")
	}

	cnt := explainOf(t, ctx, db, bson.D{{Key: "count", Value: "c"}, {Key: "query", Value: bson.D{{Key: "a", Value: 0}}}}, "executionStats")
	if cnt.Lookup("queryPlanner", "winningPlan", "stage").StringValue() != "COUNT" || lookupInt(t, cnt, "executionStats", "executionStages", "nCounted") != 3 {
		t.Fatalf("count explain %v", cnt)
	}
	dis := explainOf(t, ctx, db, bson.D{{Key: "distinct", Value: "c"}, {Key: "key", Value: "a"}}, "executionStats")
	if lookupInt(t, dis, "executionStats", "nReturned") != 5 {
		t.Fatalf("distinct explain %v", dis)
	}
	upd := explainOf(t, ctx, db, bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{
		{Key: "q", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: 1}}}}}, {Key: "multi", Value: true}}}}}, "executionStats")
	if upd.Lookup("queryPlanner", "winningPlan", "stage").StringValue() != "UPDATE" || lookupInt(t, upd, "executionStats", "executionStages", "nMatched") != 2 {
		t.Fatalf("update explain %v", upd)
	}
	del := explainOf(t, ctx, db, bson.D{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{bson.D{
		{Key: "q", Value: bson.D{{Key: "a", Value: 0}}}, {Key: "limit", Value: 1}}}}}, "executionStats")
	if del.Lookup("queryPlanner", "winningPlan", "stage").StringValue() != "DELETE" || lookupInt(t, del, "executionStats", "executionStages", "nWouldDelete") != 1 {
		t.Fatalf("delete explain %v", del)
	}
	fam := explainOf(t, ctx, db, bson.D{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "remove", Value: true}}, "queryPlanner")
	if fam.Lookup("queryPlanner", "winningPlan", "stage").StringValue() != "DELETE" {
		t.Fatalf("findAndModify explain %v", fam)
	}
	// explain never writes
	if n, _ := coll.CountDocuments(ctx, bson.D{}); n != 5 {
		t.Fatalf("explain wrote: %d documents", n)
	}
	if n, _ := coll.CountDocuments(ctx, bson.D{{Key: "b", Value: 1}}); n != 0 {
		t.Fatalf("explain updated %d documents", n)
	}

	ag := explainOf(t, ctx, db, bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{
		bson.D{{Key: "$match", Value: bson.D{{Key: "a", Value: 1}}}},
		bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$a"}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}},
	}}, {Key: "cursor", Value: bson.D{}}}, "executionStats")
	stages := mustValues(ag.Lookup("stages"))
	if len(stages) != 2 || stages[0].Document().Lookup("$cursor", "queryPlanner", "winningPlan", "stage").StringValue() != "COLLSCAN" ||
		lookupInt(t, stages[0].Document(), "nReturned") != 2 || lookupInt(t, stages[1].Document(), "nReturned") != 1 {
		t.Fatalf("aggregate explain %v", ag)
	}
	// aggregate with explain: true, through the driver's command path
	opt := mustRun(t, ctx, db, bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$match", Value: bson.D{{Key: "a", Value: 0}}}}}}, {Key: "explain", Value: true}})
	if opt.Lookup("queryPlanner", "winningPlan", "stage").StringValue() != "COLLSCAN" {
		t.Fatalf("aggregate explain:true %v", opt)
	}

	_, err := runCmd(ctx, db, bson.D{{Key: "explain", Value: bson.D{{Key: "find", Value: "c"}}}, {Key: "verbosity", Value: "loud"}})
	commandError(t, err, 9)
	_, err = runCmd(ctx, db, bson.D{{Key: "explain", Value: bson.D{{Key: "nosuch", Value: "c"}}}})
	commandError(t, err, 59)
}

// Malformed admin commands answer a clear error, never an internal one
// (a recovered panic answers code 1).
func TestAdminCommandsRejectBadInput(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	admin, db := client.Database("admin"), client.Database("db")
	_, err := db.Collection("c").InsertOne(ctx, bson.D{{Key: "a", Value: 1}})
	sdNoErr(t, err)
	bad := []struct {
		db  *mongo.Database
		cmd bson.D
	}{
		{db, bson.D{{Key: "explain", Value: 1}}},
		{db, bson.D{{Key: "explain", Value: bson.D{}}}},
		{db, bson.D{{Key: "explain", Value: bson.D{{Key: "find", Value: 1}}}}},
		{db, bson.D{{Key: "explain", Value: bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: "x"}}}}},
		{db, bson.D{{Key: "explain", Value: bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "$bad", Value: 1}}}}}}},
		{db, bson.D{{Key: "explain", Value: bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{1}}}}}},
		{db, bson.D{{Key: "explain", Value: bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{}}}}}},
		{db, bson.D{{Key: "explain", Value: bson.D{{Key: "delete", Value: "c"}}}}},
		{db, bson.D{{Key: "explain", Value: bson.D{{Key: "distinct", Value: "c"}}}}},
		{db, bson.D{{Key: "explain", Value: bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: "x"}}}}},
		{db, bson.D{{Key: "explain", Value: bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{1}}}}}},
		{db, bson.D{{Key: "explain", Value: bson.D{{Key: "aggregate", Value: 1}, {Key: "pipeline", Value: bson.A{}}}}}},
		{db, bson.D{{Key: "explain", Value: bson.D{{Key: "find", Value: "c"}, {Key: "$db", Value: "other"}}}}},
		{db, bson.D{{Key: "createUser", Value: 1}, {Key: "pwd", Value: "x"}, {Key: "roles", Value: bson.A{}}}},
		{db, bson.D{{Key: "createUser", Value: "u"}, {Key: "roles", Value: bson.A{}}}},
		{db, bson.D{{Key: "createUser", Value: "u"}, {Key: "pwd", Value: "x"}}},
		{db, bson.D{{Key: "createUser", Value: "u"}, {Key: "pwd", Value: "x"}, {Key: "roles", Value: "x"}}},
		{db, bson.D{{Key: "createUser", Value: "u"}, {Key: "pwd", Value: "x"}, {Key: "roles", Value: bson.A{1}}}},
		{db, bson.D{{Key: "createUser", Value: "u"}, {Key: "pwd", Value: "x"}, {Key: "roles", Value: bson.A{bson.D{{Key: "role", Value: 1}}}}}},
		{db, bson.D{{Key: "createUser", Value: "u"}, {Key: "pwd", Value: "x"}, {Key: "roles", Value: bson.A{}}, {Key: "mechanisms", Value: bson.A{"MD5"}}}},
		{db, bson.D{{Key: "createUser", Value: "u"}, {Key: "pwd", Value: "x"}, {Key: "roles", Value: bson.A{}}, {Key: "customData", Value: 1}}},
		{db, bson.D{{Key: "updateUser", Value: "nobody"}, {Key: "pwd", Value: "x"}}},
		{db, bson.D{{Key: "usersInfo", Value: 2}}},
		{db, bson.D{{Key: "usersInfo", Value: bson.A{1}}}},
		{db, bson.D{{Key: "usersInfo", Value: bson.D{{Key: "user", Value: 1}}}}},
		{db, bson.D{{Key: "usersInfo", Value: 1}, {Key: "filter", Value: bson.D{{Key: "$bad", Value: 1}}}}},
		{admin, bson.D{{Key: "currentOp", Value: 1}, {Key: "$bad", Value: 1}}},
		{admin, bson.D{{Key: "killOp", Value: 1}}},
		{admin, bson.D{{Key: "killOp", Value: 1}, {Key: "op", Value: "x"}}},
		{admin, bson.D{{Key: "getLog", Value: 1}}},
		{db, bson.D{{Key: "collStats", Value: "c"}, {Key: "scale", Value: 0}}},
		{db, bson.D{{Key: "collStats", Value: "c"}, {Key: "scale", Value: "x"}}},
		{db, bson.D{{Key: "dbStats", Value: 1}, {Key: "scale", Value: -1}}},
		{db, bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$collStats", Value: 1}}}}, {Key: "cursor", Value: bson.D{}}}},
		{db, bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$collStats", Value: bson.D{{Key: "nope", Value: 1}}}}}}, {Key: "cursor", Value: bson.D{}}}},
		{db, bson.D{{Key: "aggregate", Value: "missing"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$collStats", Value: bson.D{{Key: "count", Value: bson.D{}}}}}}}, {Key: "cursor", Value: bson.D{}}}},
		{admin, bson.D{{Key: "aggregate", Value: 1}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$currentOp", Value: 1}}}}, {Key: "cursor", Value: bson.D{}}}},
		{admin, bson.D{{Key: "aggregate", Value: 1}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$currentOp", Value: bson.D{{Key: "allUsers", Value: 1}}}}}}, {Key: "cursor", Value: bson.D{}}}},
	}
	for _, b := range bad {
		_, err := runCmd(ctx, b.db, b.cmd)
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code == 1 || ce.Message == "" {
			t.Errorf("%v: %v", b.cmd, err)
		}
	}
}

// Where mongod would scan an index, explain says so: FETCH over IXSCAN
// with mongod's bounds and counts, the other usable indexes rejected.
func TestExplainIndexPlans(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("exi")
	coll := db.Collection("c")
	for i := range 10 {
		_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: int32(i)}, {Key: "a", Value: int32(i % 5)}, {Key: "b", Value: int32(i)}})
		sdNoErr(t, err)
	}
	_, err := coll.Indexes().CreateMany(ctx, []mongo.IndexModel{{Keys: bson.D{{Key: "a", Value: 1}}}, {Keys: bson.D{{Key: "b", Value: -1}, {Key: "a", Value: 1}}}})
	sdNoErr(t, err)

	e := explainOf(t, ctx, db, bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "a", Value: 2}, {Key: "b", Value: bson.D{{Key: "$gte", Value: 5}}}}}}, "executionStats")
	win := e.Lookup("queryPlanner", "winningPlan").Document()
	if win.Lookup("stage").StringValue() != "FETCH" || win.Lookup("inputStage", "stage").StringValue() != "IXSCAN" ||
		win.Lookup("inputStage", "indexName").StringValue() != "a_1" ||
		fmt.Sprint(win.Lookup("inputStage", "indexBounds", "a")) != `["[2, 2]"]` ||
		fmt.Sprint(win.Lookup("filter")) != `{"b": {"$gte": {"$numberInt":"5"}}}` {
		t.Fatalf("winning plan %v", win)
	}
	rejected := mustValues(e.Lookup("queryPlanner", "rejectedPlans"))
	if len(rejected) != 1 || rejected[0].Document().Lookup("inputStage", "indexName").StringValue() != "b_-1_a_1" ||
		fmt.Sprint(rejected[0].Document().Lookup("inputStage", "indexBounds", "b")) != `["[inf.0, 5]"]` {
		t.Fatalf("rejected plans %v", rejected)
	}
	// a: 2 holds for 2 of 10 documents, and b >= 5 for one of them
	if lookupInt(t, e, "executionStats", "totalKeysExamined") != 2 || lookupInt(t, e, "executionStats", "totalDocsExamined") != 2 ||
		lookupInt(t, e, "executionStats", "nReturned") != 1 {
		t.Fatalf("executionStats %v", e.Lookup("executionStats"))
	}

	h := explainOf(t, ctx, db, bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "a", Value: 2}}}, {Key: "hint", Value: "b_-1_a_1"}}, "executionStats")
	if h.Lookup("queryPlanner", "winningPlan", "inputStage", "indexName").StringValue() != "b_-1_a_1" ||
		fmt.Sprint(h.Lookup("queryPlanner", "winningPlan", "inputStage", "indexBounds", "b")) != `["[MaxKey, MinKey]"]` ||
		lookupInt(t, h, "executionStats", "totalKeysExamined") != 10 || len(mustValues(h.Lookup("queryPlanner", "rejectedPlans"))) != 0 {
		t.Fatalf("hinted plan %v", h)
	}
	// a sort the b index gives: walked backwards for {b: 1}, no SORT stage
	so := explainOf(t, ctx, db, bson.D{{Key: "find", Value: "c"}, {Key: "sort", Value: bson.D{{Key: "b", Value: 1}}}, {Key: "limit", Value: 3}}, "executionStats")
	if so.Lookup("queryPlanner", "winningPlan", "stage").StringValue() != "LIMIT" ||
		so.Lookup("queryPlanner", "winningPlan", "inputStage", "inputStage", "indexName").StringValue() != "b_-1_a_1" ||
		so.Lookup("queryPlanner", "winningPlan", "inputStage", "inputStage", "direction").StringValue() != "backward" ||
		lookupInt(t, so, "executionStats", "totalKeysExamined") != 3 || lookupInt(t, so, "executionStats", "nReturned") != 3 {
		t.Fatalf("sort by index %v", so)
	}
	// no usable index: a collection scan
	c := explainOf(t, ctx, db, bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "c", Value: 1}}}}, "queryPlanner")
	if c.Lookup("queryPlanner", "winningPlan", "stage").StringValue() != "COLLSCAN" {
		t.Fatalf("plan without a usable index %v", c)
	}
}

// killOp interrupts a getMore waiting for data on a tailable cursor.
func TestKillOpAwaitDataGetMore(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	admin, db := client.Database("admin"), client.Database("db")
	sdNoErr(t, db.CreateCollection(ctx, "cap", options.CreateCollection().SetCapped(true).SetSizeInBytes(1<<20)))
	coll := db.Collection("cap")
	_, err := coll.InsertOne(ctx, bson.D{{Key: "x", Value: 1}})
	sdNoErr(t, err)
	cur, err := coll.Find(ctx, bson.D{}, options.Find().SetCursorType(options.TailableAwait).SetMaxAwaitTime(50*time.Second))
	sdNoErr(t, err)
	defer cur.Close(context.Background())
	if !cur.Next(ctx) {
		t.Fatalf("first document: %v", cur.Err())
	}
	done := make(chan error, 1)
	go func() {
		cur.Next(ctx) // blocks in a getMore until killed
		done <- cur.Err()
	}()
	var opid int64
	for opid == 0 {
		if ctx.Err() != nil {
			t.Fatal("the waiting getMore never showed in currentOp")
		}
		ops := mustValues(mustRun(t, ctx, admin, bson.D{{Key: "currentOp", Value: 1}, {Key: "op", Value: "getmore"}, {Key: "ns", Value: "db.cap"}}).Lookup("inprog"))
		if len(ops) == 1 {
			opid = lookupInt(t, ops[0].Document(), "opid")
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not synchronisation
	}
	mustRun(t, ctx, admin, bson.D{{Key: "killOp", Value: 1}, {Key: "op", Value: opid}})
	select {
	case err := <-done:
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != 11601 {
			t.Fatalf("killed getMore: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("killOp did not interrupt the getMore")
	}
}

func TestFindNaturalReverse(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	coll := client.Database("db").Collection("nat")
	for _, x := range []int32{3, 1, 2} {
		_, err := coll.InsertOne(ctx, bson.D{{Key: "x", Value: x}})
		sdNoErr(t, err)
	}
	got := sdFindAll(t, ctx, coll, bson.D{}, options.Find().SetSort(bson.D{{Key: "$natural", Value: -1}}).SetLimit(2).SetProjection(bson.D{{Key: "_id", Value: 0}}))
	if fmt.Sprint(got) != `[{"x":{"$numberInt":"2"}} {"x":{"$numberInt":"1"}}]` {
		t.Fatalf("$natural: -1 = %v", got)
	}
}

func TestRolesInfoAndPrivileges(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("app")
	all := mustValues(mustRun(t, ctx, db, bson.D{{Key: "rolesInfo", Value: 1}, {Key: "showBuiltinRoles", Value: true}}).Lookup("roles"))
	names := []string{}
	for _, r := range all {
		names = append(names, r.Document().Lookup("role").StringValue())
	}
	if !strings.Contains(strings.Join(names, ","), "readWrite") || strings.Contains(strings.Join(names, ","), "root") {
		t.Fatalf("built-in roles on app: %v", names)
	}
	if n := len(mustValues(mustRun(t, ctx, db, bson.D{{Key: "rolesInfo", Value: 1}}).Lookup("roles"))); n != 0 {
		t.Fatalf("rolesInfo without built-in roles lists %d", n)
	}
	one := mustValues(mustRun(t, ctx, db, bson.D{{Key: "rolesInfo", Value: bson.D{{Key: "role", Value: "root"}, {Key: "db", Value: "admin"}}}}).Lookup("roles"))
	if len(one) != 1 || !one[0].Document().Lookup("isBuiltin").Boolean() {
		t.Fatalf("rolesInfo root@admin %v", one)
	}
	_, err := runCmd(ctx, db, bson.D{{Key: "createRole", Value: "r"}, {Key: "privileges", Value: bson.A{}}, {Key: "roles", Value: bson.A{}}})
	commandError(t, err, 238)
	cs := mustRun(t, ctx, db, bson.D{{Key: "connectionStatus", Value: 1}, {Key: "showPrivileges", Value: true}})
	if _, err := cs.LookupErr("authInfo", "authenticatedUserPrivileges"); err != nil {
		t.Fatalf("connectionStatus showPrivileges %v", cs)
	}
}
