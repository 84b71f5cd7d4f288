package mongosim

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func adminCmd(t *testing.T, client *mongo.Client, cmd bson.D) (bson.D, error) {
	t.Helper()
	var out bson.D
	err := client.Database("admin").RunCommand(sdCtx(t), cmd).Decode(&out)
	return out, err
}

// Drivers' test runners run fail-point tests only against a server
// started with enableTestCommands, which they read from getCmdLineOpts.
func TestGetCmdLineOptsEnablesTestCommands(t *testing.T) {
	client, _ := dataClient(t)
	reply, err := adminCmd(t, client, bson.D{{Key: "getCmdLineOpts", Value: 1}})
	sdNoErr(t, err)
	parsed, _ := lookupD(reply, "parsed")
	sp, _ := lookupD(parsed.(bson.D), "setParameter")
	if v, _ := lookupD(sp.(bson.D), "enableTestCommands"); v != "1" {
		t.Fatalf("parsed.setParameter: %v", sp)
	}
	argv, _ := lookupD(reply, "argv")
	if !slices.Contains(argv.(bson.A), any("enableTestCommands=1")) {
		t.Fatalf("argv: %v", argv)
	}
}

func TestSetParameterTTLMonitor(t *testing.T) {
	c := StartWithOptions(t, Options{TTLMonitorInterval: time.Hour})
	client, err := mongo.Connect(options.Client().ApplyURI(c.URI()))
	sdNoErr(t, err)
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	ctx := sdCtx(t)
	coll := client.Database("ttl").Collection("p")
	_, err = coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "at", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(0)})
	sdNoErr(t, err)
	_, err = coll.InsertOne(ctx, bson.D{{Key: "at", Value: time.Now().Add(-time.Hour)}})
	sdNoErr(t, err)

	if _, err := adminCmd(t, client, bson.D{{Key: "setParameter", Value: 1}, {Key: "ttlMonitorSleepSecs", Value: 0}}); sdCode(err) != 2 {
		t.Fatalf("ttlMonitorSleepSecs 0: %v, want 2 BadValue", err)
	}
	reply, err := adminCmd(t, client, bson.D{{Key: "setParameter", Value: 1}, {Key: "ttlMonitorSleepSecs", Value: 1}})
	sdNoErr(t, err)
	if was, _ := lookupD(reply, "was"); was != int32(3600) {
		t.Fatalf("was %v, want 3600", reply)
	}
	// The hour-long wait is cut to a second: the document goes.
	deadline := time.Now().Add(15 * time.Second)
	for {
		n, err := coll.CountDocuments(ctx, bson.D{})
		sdNoErr(t, err)
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the expired document was not deleted within 15 s of ttlMonitorSleepSecs: 1")
		}
		time.Sleep(20 * time.Millisecond)
	}
	reply, err = adminCmd(t, client, bson.D{{Key: "getParameter", Value: 1}, {Key: "ttlMonitorSleepSecs", Value: 1}, {Key: "ttlMonitorEnabled", Value: 1}})
	sdNoErr(t, err)
	if v, _ := lookupD(reply, "ttlMonitorSleepSecs"); v != int32(1) {
		t.Fatalf("getParameter: %v", reply)
	}
	if v, _ := lookupD(reply, "ttlMonitorEnabled"); v != true {
		t.Fatalf("getParameter: %v", reply)
	}
	// Disabled, the monitor deletes nothing; passes stop being counted.
	reply, err = adminCmd(t, client, bson.D{{Key: "setParameter", Value: 1}, {Key: "ttlMonitorEnabled", Value: false}})
	sdNoErr(t, err)
	if was, _ := lookupD(reply, "was"); was != true {
		t.Fatalf("was %v", reply)
	}
	reply, err = adminCmd(t, client, bson.D{{Key: "getParameter", Value: 1}, {Key: "ttlMonitorEnabled", Value: 1}})
	sdNoErr(t, err)
	if v, _ := lookupD(reply, "ttlMonitorEnabled"); v != false {
		t.Fatalf("getParameter: %v", reply)
	}
}

func TestSetParameterConnectionLimiterEnabled(t *testing.T) {
	c := Start(t)
	c.SetLimiter(LimiterOptions{ConnectionsPerSecond: 0.001, ConnectionBurst: 1})
	addr := c.Members()[0].Addr()
	ping := bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}
	first := dialRaw(t, addr)
	if _, err := first.msg(ping); err != nil {
		t.Fatal(err)
	}
	if _, err := dialRaw(t, addr).msg(ping); err == nil {
		t.Fatal("a connection beyond the bucket was served")
	}
	get := bson.D{{Key: "getParameter", Value: 1}, {Key: "ingressConnectionEstablishmentRateLimiterEnabled", Value: 1}, {Key: "$db", Value: "admin"}}
	reply, err := first.msg(get)
	sdNoErr(t, err)
	if !reply.Lookup("ingressConnectionEstablishmentRateLimiterEnabled").Boolean() {
		t.Fatalf("getParameter: %v", reply)
	}
	reply, err = first.msg(bson.D{{Key: "setParameter", Value: 1}, {Key: "ingressConnectionEstablishmentRateLimiterEnabled", Value: false}, {Key: "$db", Value: "admin"}})
	sdNoErr(t, err)
	if !reply.Lookup("was").Boolean() {
		t.Fatalf("setParameter: %v", reply)
	}
	for i := 0; i < 3; i++ {
		if _, err := dialRaw(t, addr).msg(ping); err != nil {
			t.Fatalf("connection %d with the limiter disabled: %v", i, err)
		}
	}
	reply, err = first.msg(get)
	sdNoErr(t, err)
	if reply.Lookup("ingressConnectionEstablishmentRateLimiterEnabled").Boolean() {
		t.Fatalf("getParameter after disabling: %v", reply)
	}
}
