package mongosim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// twoShardDocs shards db.t on a hashed key over two shards and inserts
// n documents {k: i, x: 0}, some on each shard.
func twoShardDocs(t *testing.T, n int) (*mongo.Client, *Cluster, *mongo.Collection) {
	t.Helper()
	client, c := shardedClient(t, 2, nil)
	ctx := testCtx(t)
	shardCollection(t, ctx, client, "db.t", bson.D{{Key: "k", Value: "hashed"}})
	coll := client.Database("db").Collection("t")
	var docs []any
	for i := range n {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "k", Value: i}, {Key: "x", Value: 0}})
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	if counts := directCounts(t, ctx, c, "db", "t"); counts[0] == 0 || counts[1] == 0 {
		t.Fatalf("documents per shard = %v, want some on each", counts)
	}
	return client, c, coll
}

// xPerShard reads every document's x on each shard through the shard's
// own primary: shard → _id → x.
func xPerShard(t *testing.T, ctx context.Context, c *Cluster) []map[int32]int32 {
	t.Helper()
	var out []map[int32]int32
	for i := range c.Shards() {
		cur, err := shardDirect(t, c, i).Database("db").Collection("t").Find(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		var docs []struct {
			ID int32 `bson:"_id"`
			X  int32 `bson:"x"`
		}
		if err := cur.All(ctx, &docs); err != nil {
			t.Fatal(err)
		}
		m := map[int32]int32{}
		for _, d := range docs {
			m[d.ID] = d.X
		}
		out = append(out, m)
	}
	return out
}

// wantX fails unless every document on every shard has x == want.
func wantX(t *testing.T, ctx context.Context, c *Cluster, n int, want int32) {
	t.Helper()
	seen := 0
	for s, m := range xPerShard(t, ctx, c) {
		for id, x := range m {
			seen++
			if x != want {
				t.Errorf("shard %d: document %d has x=%d, want %d (a transaction half-committed)", s, id, x, want)
			}
		}
	}
	if seen != n {
		t.Errorf("%d documents across the shards, want %d", seen, n)
	}
}

// recordStages installs a coordinator hook that records the stages it
// sees and runs fault once at stage at.
func recordStages(c *Cluster, at coordStage, fault func(coordinator *Cluster)) func() []coordStage {
	var (
		mu     sync.Mutex
		stages []coordStage
		fired  atomic.Bool
	)
	h := coordHook(func(stage coordStage, coordinator *Cluster) {
		mu.Lock()
		stages = append(stages, stage)
		mu.Unlock()
		if stage == at && fault != nil && fired.CompareAndSwap(false, true) {
			fault(coordinator)
		}
	})
	c.sharding.hook.Store(&h)
	return func() []coordStage {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(stages)
	}
}

func TestShardedTwoPhaseCommit(t *testing.T) {
	const n = 20
	client, c, coll := twoShardDocs(t, n)
	ctx := testCtx(t)
	stages := recordStages(c, "", nil)
	sess, err := client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)

	// Writes on both shards: prepare, decision, commit.
	if _, err := sess.WithTransaction(ctx, func(ctx context.Context) (any, error) {
		return coll.UpdateMany(ctx, bson.D{}, bson.D{{Key: "$inc", Value: bson.D{{Key: "x", Value: 1}}}})
	}); err != nil {
		t.Fatalf("two-shard write transaction: %v", err)
	}
	if got := stages(); !slices.Equal(got, []coordStage{stagePrepared, stageDecided}) {
		t.Fatalf("coordinator stages = %v, want prepared then decided", got)
	}
	wantX(t, ctx, c, n, 1)

	// Reads on both shards, or reads on both and a write on one: mongos'
	// fast paths, no coordinator.
	for _, write := range []bool{false, true} {
		if _, err := sess.WithTransaction(ctx, func(ctx context.Context) (any, error) {
			if _, err := coll.CountDocuments(ctx, bson.D{}); err != nil {
				return nil, err
			}
			if write {
				return coll.UpdateOne(ctx, bson.D{{Key: "k", Value: 3}}, bson.D{{Key: "$set", Value: bson.D{{Key: "y", Value: 1}}}})
			}
			return nil, nil
		}); err != nil {
			t.Fatalf("fast-path transaction (write %v): %v", write, err)
		}
	}
	if got := stages(); len(got) != 2 {
		t.Fatalf("coordinator stages after the fast paths = %v, want none added", got)
	}
	if n, err := coll.CountDocuments(ctx, bson.D{{Key: "y", Value: 1}}); err != nil || n != 1 {
		t.Fatalf("single-writer transaction's document: %d, %v", n, err)
	}
}

func TestShardedTwoPhaseCommitPrepareFails(t *testing.T) {
	const n = 20
	client, c, coll := twoShardDocs(t, n)
	ctx := testCtx(t)
	if err := c.Shards()[1].SetFailPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"prepareTransaction"}}, {Key: "errorCode", Value: 251}}}}); err != nil {
		t.Fatal(err)
	}
	sess, err := client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	if err := sess.StartTransaction(); err != nil {
		t.Fatal(err)
	}
	sctx := mongo.NewSessionContext(ctx, sess)
	if _, err := coll.UpdateMany(sctx, bson.D{}, bson.D{{Key: "$inc", Value: bson.D{{Key: "x", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	err = sess.CommitTransaction(ctx)
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 251 || !ce.HasErrorLabel("TransientTransactionError") {
		t.Fatalf("commit with a participant failing prepare = %v, want NoSuchTransaction labelled TransientTransactionError", err)
	}
	wantX(t, ctx, c, n, 0)
	// Every participant aborted: writes outside the transaction go through.
	if _, err := coll.UpdateMany(ctx, bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 5}}}}); err != nil {
		t.Fatal(err)
	}
	wantX(t, ctx, c, n, 5)
}

// TestShardedTwoPhaseCommitFaults interrupts the commit between prepare
// and decision and between decision and commit, by stepping down the
// coordinator shard's primary or stopping the router the client committed
// through, and checks every shard's data: the transaction is committed on
// all of them, never on one only.
func TestShardedTwoPhaseCommitFaults(t *testing.T) {
	for _, stage := range []coordStage{stagePrepared, stageDecided} {
		for _, fault := range []string{"coordinator step-down", "router stop"} {
			t.Run(fmt.Sprintf("%s at %s", fault, stage), func(t *testing.T) {
				const n = 20
				client, c, coll := twoShardDocs(t, n)
				ctx := testCtx(t)
				stages := recordStages(c, stage, func(coordinator *Cluster) {
					if fault == "router stop" {
						for _, r := range c.Routers() {
							if r.running() {
								_ = r.Stop()
								return
							}
						}
					}
					if err := coordinator.StepDown(context.Background()); err != nil {
						t.Error(err)
					}
				})
				sess, err := client.StartSession()
				if err != nil {
					t.Fatal(err)
				}
				defer sess.EndSession(ctx)
				if _, err := sess.WithTransaction(ctx, func(ctx context.Context) (any, error) {
					return coll.UpdateMany(ctx, bson.D{}, bson.D{{Key: "$inc", Value: bson.D{{Key: "x", Value: 1}}}})
				}); err != nil {
					t.Fatalf("transaction: %v", err)
				}
				if !slices.Contains(stages(), stage) {
					t.Fatalf("stages %v never reached %s", stages(), stage)
				}
				wantX(t, ctx, c, n, 1)
			})
		}
	}
}

// The router a two-phase commit went through stops between prepare and
// decision; the commit sent with the recoveryToken to the other router
// joins the coordination and reports it committed, on every shard.
func TestShardedTwoPhaseCommitRecoveredOnAnotherRouter(t *testing.T) {
	const n = 20
	_, c, _ := twoShardDocs(t, n)
	ctx := testCtx(t)
	r0, r1 := c.Routers()[0], c.Routers()[1]
	stopped := make(chan struct{})
	recordStages(c, stagePrepared, func(*Cluster) {
		_ = r0.Stop()
		close(stopped)
	})
	db0 := connect(t, r0.URI()+"?directConnection=true").Database("db")
	lsid := bson.D{{Key: "id", Value: newUUID()}}
	txn := []bson.E{{Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: int64(1)}, {Key: "autocommit", Value: false}}
	var upd struct {
		N             int32  `bson:"n"`
		RecoveryToken bson.D `bson:"recoveryToken"`
	}
	cmd := append(bson.D{{Key: "update", Value: "t"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}},
		{Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "x", Value: 1}}}}}, {Key: "multi", Value: true}}}},
		{Key: "startTransaction", Value: true}}, txn...)
	if err := db0.RunCommand(ctx, cmd).Decode(&upd); err != nil || upd.N != n || upd.RecoveryToken == nil {
		t.Fatalf("update in the transaction: %+v, %v", upd, err)
	}
	commit := append(bson.D{{Key: "commitTransaction", Value: 1}}, txn...)
	if err := db0.Client().Database("admin").RunCommand(ctx, commit).Err(); err == nil {
		t.Fatal("the commit through the stopped router answered")
	}
	<-stopped
	commit = append(commit, bson.E{Key: "recoveryToken", Value: upd.RecoveryToken})
	if err := connect(t, r1.URI()+"?directConnection=true").Database("admin").RunCommand(ctx, commit).Err(); err != nil {
		t.Fatalf("commit recovered on the other router: %v", err)
	}
	wantX(t, ctx, c, n, 1)
}
