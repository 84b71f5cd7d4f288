package mongosim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	mevent "go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// The official driver pins each transaction to one router: every command
// of it goes there, every successful reply in it carries a recoveryToken,
// and the commit sends that token back. A transaction is its session's
// lsid with its txnNumber: the driver may give a later StartSession a
// fresh server session (it discards one it cannot yet tell is unexpired,
// e.g. while its view of the topology trails), whose txnNumbers start
// again at 1.
func TestRouterTransactionThroughOfficialDriver(t *testing.T) {
	var mu sync.Mutex
	hosts := map[string]map[string]bool{} // transaction -> routers its commands went to
	committed := map[string]bool{}        // transactions that sent commitTransaction
	var commits, withToken, replies, replyTokens int
	inTxn := map[int64]bool{} // requestID -> a transaction command
	mon := &mevent.CommandMonitor{
		Started: func(_ context.Context, e *mevent.CommandStartedEvent) {
			n, ok := e.Command.Lookup("txnNumber").Int64OK()
			if _, auto := e.Command.Lookup("autocommit").BooleanOK(); !ok || !auto {
				return
			}
			_, lsid, _ := e.Command.Lookup("lsid", "id").BinaryOK()
			txn := fmt.Sprintf("%x/%d", lsid, n)
			host, _, _ := strings.Cut(e.ConnectionID, "[")
			mu.Lock()
			defer mu.Unlock()
			if hosts[txn] == nil {
				hosts[txn] = map[string]bool{}
			}
			hosts[txn][host] = true
			inTxn[e.RequestID] = true
			if e.CommandName == "commitTransaction" {
				commits++
				committed[txn] = true
				if _, err := e.Command.LookupErr("recoveryToken"); err == nil {
					withToken++
				}
			}
		},
		Succeeded: func(_ context.Context, e *mevent.CommandSucceededEvent) {
			mu.Lock()
			defer mu.Unlock()
			if inTxn[e.RequestID] {
				replies++
				if _, err := e.Reply.LookupErr("recoveryToken", "recoveryShardId"); err == nil {
					replyTokens++
				}
			}
		},
	}
	client, _ := routedClient(t, Options{Members: 3}, options.Client().SetMonitor(mon).SetLocalThreshold(1e9))
	ctx := context.Background()
	coll := client.Database("db").Collection("c")
	for i := 0; i < 10; i++ {
		sess, err := client.StartSession()
		if err != nil {
			t.Fatal(err)
		}
		_, err = sess.WithTransaction(ctx, func(ctx context.Context) (any, error) {
			for j := 0; j < 3; j++ {
				if _, err := coll.InsertOne(ctx, bson.D{{Key: "i", Value: i}, {Key: "j", Value: j}}); err != nil {
					return nil, err
				}
			}
			return nil, coll.FindOne(ctx, bson.D{{Key: "i", Value: i}}).Err()
		})
		sess.EndSession(ctx)
		if err != nil {
			t.Fatalf("transaction %d: %v", i, err)
		}
	}
	if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != 30 {
		t.Fatalf("%d documents (%v), want 30", n, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(committed) != 10 || withToken != commits || replyTokens != replies || replies < 50 {
		t.Fatalf("%d transactions seen, %d committed, %d commits (%d with a recoveryToken), %d of %d replies with one",
			len(hosts), len(committed), commits, withToken, replyTokens, replies)
	}
	for txn, hs := range hosts {
		if len(hs) != 1 {
			t.Errorf("transaction %s went to routers %v, want one", txn, hs)
		}
	}
}

// txnCmd is a command of transaction n of session lsid.
func txnCmd(lsid bson.D, n int64, cmd bson.D, extra ...bson.E) bson.D {
	cmd = append(cmd, bson.E{Key: "lsid", Value: lsid}, bson.E{Key: "txnNumber", Value: n}, bson.E{Key: "autocommit", Value: false})
	return append(cmd, extra...)
}

func replyCodeLabels(t *testing.T, reply bson.Raw) (int32, []string) {
	t.Helper()
	if ok, _ := reply.Lookup("ok").AsFloat64OK(); ok == 1 {
		return 0, nil
	}
	code, _ := reply.Lookup("code").Int32OK()
	var labels []string
	if arr, ok := reply.Lookup("errorLabels").ArrayOK(); ok {
		vals, _ := arr.Values()
		for _, v := range vals {
			labels = append(labels, v.StringValue())
		}
	}
	return code, labels
}

// A router answers NoSuchTransaction (TransientTransactionError) to a
// statement of a transaction another router began, and recovers a commit
// it did not route only with the recoveryToken: a transaction that never
// began committing is aborted, a committed one reported committed.
func TestRouterTransactionOnAnotherRouter(t *testing.T) {
	c := StartWithOptions(t, Options{Members: 3, Routers: 2})
	r0, r1 := dialRaw(t, c.Routers()[0].Addr()), dialRaw(t, c.Routers()[1].Addr())
	lsid := bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: []byte("0123456789abcdef")}}}
	run := func(rc *rawConn, cmd bson.D) bson.Raw {
		t.Helper()
		reply, err := rc.msg(cmd)
		if err != nil {
			t.Fatal(err)
		}
		return reply
	}
	insert := func(id int) bson.D {
		return bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: id}}}}, {Key: "$db", Value: "db"}}
	}
	commit := bson.D{{Key: "commitTransaction", Value: 1}, {Key: "$db", Value: "admin"}}

	// Transaction 1 begins on router 0.
	reply := run(r0, txnCmd(lsid, 1, insert(1), bson.E{Key: "startTransaction", Value: true}))
	if code, _ := replyCodeLabels(t, reply); code != 0 {
		t.Fatalf("insert on router 0: %v", reply)
	}
	token, err := reply.LookupErr("recoveryToken")
	if err != nil {
		t.Fatalf("no recoveryToken in %v", reply)
	}
	// Router 1 does not know it.
	reply = run(r1, txnCmd(lsid, 1, insert(2)))
	if code, labels := replyCodeLabels(t, reply); code != 251 || !slices.Contains(labels, "TransientTransactionError") {
		t.Fatalf("statement on router 1: %v, want NoSuchTransaction with TransientTransactionError", reply)
	}
	reply = run(r1, txnCmd(lsid, 1, commit))
	if code, _ := replyCodeLabels(t, reply); code != 251 {
		t.Fatalf("commit without recoveryToken on router 1: %v, want NoSuchTransaction", reply)
	}
	// With the token, router 1 asks the shard: the transaction never
	// began committing, so it is aborted, not committed.
	reply = run(r1, txnCmd(lsid, 1, commit, bson.E{Key: "recoveryToken", Value: token}))
	if code, labels := replyCodeLabels(t, reply); code != 251 || !slices.Contains(labels, "TransientTransactionError") {
		t.Fatalf("recovered commit of an uncommitted transaction: %v, want NoSuchTransaction", reply)
	}
	reply = run(r0, txnCmd(lsid, 1, commit))
	if code, _ := replyCodeLabels(t, reply); code != 251 {
		t.Fatalf("commit on router 0 after the recovery aborted it: %v, want NoSuchTransaction", reply)
	}

	// Transaction 2 commits on router 0; router 1 recovers the outcome.
	reply = run(r0, txnCmd(lsid, 2, insert(3), bson.E{Key: "startTransaction", Value: true}))
	if code, _ := replyCodeLabels(t, reply); code != 0 {
		t.Fatalf("insert: %v", reply)
	}
	if reply = run(r0, txnCmd(lsid, 2, commit)); !rawOK(reply) {
		t.Fatalf("commit on router 0: %v", reply)
	}
	if reply = run(r1, txnCmd(lsid, 2, commit, bson.E{Key: "recoveryToken", Value: token})); !rawOK(reply) {
		t.Fatalf("recovered commit of a committed transaction: %v, want ok", reply)
	}
	reply = run(r1, bson.D{{Key: "find", Value: "c"}, {Key: "$db", Value: "db"}})
	docs, _ := reply.Lookup("cursor", "firstBatch").Array().Values()
	if len(docs) != 1 || docs[0].Document().Lookup("_id").Int32() != 3 {
		t.Fatalf("documents %v, want only transaction 2's {_id: 3}", docs)
	}

	// A restarted router forgets its transactions.
	reply = run(r0, txnCmd(lsid, 3, insert(4), bson.E{Key: "startTransaction", Value: true}))
	if !rawOK(reply) {
		t.Fatalf("insert: %v", reply)
	}
	rt := c.Routers()[0]
	if err := rt.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(); err != nil {
		t.Fatal(err)
	}
	r0 = dialRaw(t, rt.Addr())
	if code, _ := replyCodeLabels(t, run(r0, txnCmd(lsid, 3, insert(5)))); code != 251 {
		t.Fatal("a restarted router continued a transaction it began before the restart")
	}
}

func rawOK(reply bson.Raw) bool {
	ok, _ := reply.Lookup("ok").AsFloat64OK()
	return ok == 1
}

// More concurrent commands than the router keeps idle shard connections
// (32): releasing the extra connections closes them, which must not
// deadlock the router.
func TestRouterReleasesExtraShardConnections(t *testing.T) {
	client, c := routedClient(t, Options{Routers: 1}, options.Client().SetMaxPoolSize(100))
	if err := c.SetFailPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 48}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"find"}}, {Key: "blockConnection", Value: true}, {Key: "blockTimeMS", Value: 300}}}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	coll := client.Database("db").Collection("c")
	var wg sync.WaitGroup
	errs := make(chan error, 48)
	for i := 0; i < 48; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := coll.FindOne(ctx, bson.D{}).Err(); err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatalf("the router after 48 concurrent finds: %v", err)
	}
}
