package mongosim

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestFailCommandData covers failCommand's data fields as mongod reads
// them: free-form (errmsg and other fields mongod ignores are accepted),
// failAllCommands, the namespace filter (a getMore's namespace is its
// collection), errorExtraInfo, and failCommand on getMore.
func TestFailCommandData(t *testing.T) {
	c := Start(t)
	ctx := testCtx(t)
	client := connect(t, c.URI())
	admin := client.Database("admin")
	coll := client.Database("fp").Collection("c")
	other := client.Database("fp").Collection("other")
	for _, cl := range []*mongo.Collection{coll, other} {
		if _, err := cl.InsertMany(ctx, []bson.D{{{Key: "x", Value: 1}}, {{Key: "x", Value: 2}}, {{Key: "x", Value: 3}}}); err != nil {
			t.Fatal(err)
		}
	}
	ping := func() error { return admin.RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err() }

	t.Run("errmsgAcceptedMessageIsMongods", func(t *testing.T) {
		setFailCommand(t, ctx, admin, bson.D{{Key: "times", Value: 1}}, bson.D{
			{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "errorCode", Value: 91},
			{Key: "errmsg", Value: "my message"}, {Key: "someFieldMongodIgnores", Value: true},
		})
		ce := commandError(t, ping(), 91)
		if ce.Message != failCommandMessage {
			t.Fatalf("message %q, want mongod's %q", ce.Message, failCommandMessage)
		}
	})
	t.Run("failAllCommands", func(t *testing.T) {
		// Every command on fp.c (hello too would fail without the
		// namespace, and the driver could not select a server).
		setFailCommand(t, ctx, admin, "alwaysOn", bson.D{{Key: "failAllCommands", Value: true}, {Key: "errorCode", Value: 8}, {Key: "namespace", Value: "fp.c"}})
		defer failPointOff(t, ctx, admin, "failCommand")
		commandError(t, coll.FindOne(ctx, bson.D{}).Err(), 8)
		_, err := coll.InsertOne(ctx, bson.D{})
		commandError(t, err, 8)
		if err := ping(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("configureFailPointNeverFailed", func(t *testing.T) {
		setFailCommand(t, ctx, admin, "alwaysOn", bson.D{{Key: "failCommands", Value: bson.A{"configureFailPoint"}}, {Key: "errorCode", Value: 8}})
		failPointOff(t, ctx, admin, "failCommand")
	})
	t.Run("namespace", func(t *testing.T) {
		setFailCommand(t, ctx, admin, "alwaysOn", bson.D{
			{Key: "failCommands", Value: bson.A{"find", "getMore"}}, {Key: "errorCode", Value: 8}, {Key: "namespace", Value: "fp.c"},
		})
		defer failPointOff(t, ctx, admin, "failCommand")
		commandError(t, coll.FindOne(ctx, bson.D{}).Err(), 8)
		if err := other.FindOne(ctx, bson.D{}).Err(); err != nil {
			t.Fatalf("find on another namespace: %v", err)
		}
	})
	t.Run("getMoreByNamespace", func(t *testing.T) {
		// Open both cursors first; then only the getMore on fp.c fails.
		cur, err := coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(1))
		if err != nil {
			t.Fatal(err)
		}
		defer cur.Close(ctx)
		cur2, err := other.Find(ctx, bson.D{}, options.Find().SetBatchSize(1))
		if err != nil {
			t.Fatal(err)
		}
		defer cur2.Close(ctx)
		setFailCommand(t, ctx, admin, "alwaysOn", bson.D{
			{Key: "failCommands", Value: bson.A{"getMore"}}, {Key: "errorCode", Value: 8},
			{Key: "namespace", Value: "fp.c"}, {Key: "errorExtraInfo", Value: bson.D{{Key: "why", Value: "test"}}},
		})
		defer failPointOff(t, ctx, admin, "failCommand")
		// The first document is the first batch, the second a getMore.
		for i := 0; i < 2; i++ {
			if !cur2.Next(ctx) {
				t.Fatalf("getMore on fp.other: %v", cur2.Err())
			}
		}
		if !cur.Next(ctx) {
			t.Fatalf("first batch: %v", cur.Err())
		}
		if cur.Next(ctx) {
			t.Fatal("getMore on fp.c was not failed")
		}
		ce := commandError(t, cur.Err(), 8)
		if why, _ := ce.Raw.Lookup("why").StringValueOK(); why != "test" {
			t.Fatalf("errorExtraInfo not merged: %s", ce.Raw)
		}
	})
	t.Run("tassertRefused", func(t *testing.T) {
		_, err := runCmd(ctx, admin, bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "alwaysOn"},
			{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "errorCode", Value: 8}, {Key: "tassert", Value: true}}}})
		commandError(t, err, 238)
	})
}

// TestMaxTimeAlwaysTimeOut: every operation with a maxTimeMS fails with
// MaxTimeMSExpired while the fail point is on; others run.
func TestMaxTimeAlwaysTimeOut(t *testing.T) {
	c := Start(t)
	ctx := testCtx(t)
	client := connect(t, c.URI())
	admin := client.Database("admin")
	coll := client.Database("fp").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	mustRun(t, ctx, admin, bson.D{{Key: "configureFailPoint", Value: "maxTimeAlwaysTimeOut"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 2}}}})
	// The driver derives a maxTimeMS from a context deadline; these
	// commands must carry exactly the one the test gives.
	ctx = context.WithoutCancel(ctx)
	find := func(maxTimeMS int64) error {
		cmd := bson.D{{Key: "find", Value: "c"}}
		if maxTimeMS > 0 {
			cmd = append(cmd, bson.E{Key: "maxTimeMS", Value: maxTimeMS})
		}
		return client.Database("fp").RunCommand(ctx, cmd).Err()
	}
	if err := find(0); err != nil {
		t.Fatalf("find without maxTimeMS: %v", err)
	}
	commandError(t, find(60_000), 50)
	commandError(t, client.Database("fp").RunCommand(ctx, bson.D{{Key: "count", Value: "c"}, {Key: "maxTimeMS", Value: 60_000}}).Err(), 50)
	if err := find(60_000); err != nil {
		t.Fatalf("find after the fail point's two activations: %v", err)
	}
}

// TestFailGetMoreAfterCursorCheckoutFilters: the fail point answers with
// mongod's message and honours failCommand's namespace filter.
func TestFailGetMoreAfterCursorCheckoutFilters(t *testing.T) {
	c := Start(t)
	ctx := testCtx(t)
	client := connect(t, c.URI())
	admin := client.Database("admin")
	db := client.Database("fp")
	for _, name := range []string{"c", "other"} {
		if _, err := db.Collection(name).InsertMany(ctx, []bson.D{{{Key: "x", Value: 1}}, {{Key: "x", Value: 2}}}); err != nil {
			t.Fatal(err)
		}
	}
	mustRun(t, ctx, admin, bson.D{{Key: "configureFailPoint", Value: "failGetMoreAfterCursorCheckout"}, {Key: "mode", Value: "alwaysOn"},
		{Key: "data", Value: bson.D{{Key: "errorCode", Value: 8}, {Key: "namespace", Value: "fp.c"}}}})
	defer failPointOff(t, ctx, admin, "failGetMoreAfterCursorCheckout")
	drain := func(name string) error {
		cur, err := db.Collection(name).Find(ctx, bson.D{}, options.Find().SetBatchSize(1))
		if err != nil {
			return err
		}
		defer cur.Close(ctx)
		for cur.Next(ctx) {
		}
		return cur.Err()
	}
	if err := drain("other"); err != nil {
		t.Fatalf("getMore on fp.other: %v", err)
	}
	ce := commandError(t, drain("c"), 8)
	if ce.Message != failGetMoreAfterCursorCheckoutMessage {
		t.Fatalf("message %q", ce.Message)
	}
}

// TestMaxTimeAlwaysTimeOutOnRouter: set on a router (configureFailPoint
// sent to it), the fail point fails that router's commands with a
// maxTimeMS.
func TestMaxTimeAlwaysTimeOutOnRouter(t *testing.T) {
	_, c := shardedClient(t, 1, nil)
	ctx := testCtx(t)
	// One router: the fail point is that router's own.
	client := connect(t, c.Routers()[0].URI()+"?directConnection=true")
	db := client.Database("fp")
	if _, err := db.Collection("c").InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	mustRun(t, ctx, client.Database("admin"), bson.D{{Key: "configureFailPoint", Value: "maxTimeAlwaysTimeOut"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 1}}}})
	ctx = context.WithoutCancel(ctx) // no deadline-derived maxTimeMS
	if err := db.RunCommand(ctx, bson.D{{Key: "find", Value: "c"}}).Err(); err != nil {
		t.Fatalf("find without maxTimeMS: %v", err)
	}
	commandError(t, db.RunCommand(ctx, bson.D{{Key: "find", Value: "c"}, {Key: "maxTimeMS", Value: 60_000}}).Err(), 50)
	if err := db.RunCommand(ctx, bson.D{{Key: "find", Value: "c"}, {Key: "maxTimeMS", Value: 60_000}}).Err(); err != nil {
		t.Fatalf("find after the one activation: %v", err)
	}
}
