package soak

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
	"unsafe"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/goleak"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/mongosim"
	"github.com/sturdy-go/sturdy/once"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func launch(t *testing.T) *mongosim.Cluster {
	t.Helper()
	c, err := mongosim.Launch(mongosim.Options{Members: 3, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestSoak is the 30-second chaos run of the normal test suite: every
// fault kind against a 3-member mongosim, and nothing lost, duplicated or
// stuck, a linearizable register history, no goroutine left behind.
func TestSoak(t *testing.T) {
	d := 30 * time.Second
	if testing.Short() {
		d = 5 * time.Second
	}
	c := launch(t)
	ctx := context.Background()
	rep, err := Run(ctx, Options{URI: c.URI(), Duration: d, Goroutines: 16, Seed: 3,
		FaultsFired: func() int64 { s := c.Stats(); return s.FailPointsFired + s.StepDowns }})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ops %d succeeded %d failed %d failed_applied %d lost %d dup %d stuck %d linearization %s faults %d heap %.1f MB p50 %.2f ms p99 %.2f ms",
		rep.Ops, rep.Succeeded, rep.Failed, rep.FailedApplied, rep.Lost, rep.Duplicated, rep.Stuck, rep.Linearization,
		rep.Faults, rep.HeapMaxMB, rep.P50ms, rep.P99ms)
	for e, n := range rep.Errors {
		t.Logf("  %5d  %s", n, e)
	}
	if !rep.OK() {
		t.Errorf("soak found problems: lost %d, duplicated %d, stuck %d, misreported %d, linearization %s, leaked goroutines %d",
			rep.Lost, rep.Duplicated, rep.Stuck, rep.Misreport, rep.Linearization, rep.LeakedGoroutines)
	}
	if rep.Faults == 0 {
		t.Error("no fault fired: the schedule did nothing")
	}
	for _, k := range []string{kindIncrement, kindInsert, kindSave, kindRegister} {
		if rep.ByKind[k].Ops == 0 {
			t.Errorf("no %s operations ran", k)
		}
	}
	if rep.Succeeded < rep.Ops/2 {
		t.Errorf("only %d of %d operations succeeded", rep.Succeeded, rep.Ops)
	}
}

// The checks must catch what they claim to: a lost or doubled increment, a
// lost insert, a doubled save, and a non-linearizable register history.
func TestChecksCatchLostAndDuplicatedWrites(t *testing.T) {
	c := launch(t)
	ctx := context.Background()
	client, err := sturdy.Connect(ctx, c.URI())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(ctx)
	db := client.Database("soakcheck")
	mustInsert := func(coll string, doc bson.D) {
		t.Helper()
		if _, err := db.Collection(coll).InsertOne(ctx, doc); err != nil {
			t.Fatal(err)
		}
	}
	// g0_0 applied twice; g0_1 acknowledged but missing; g0_2 failed but applied.
	mustInsert("increments", bson.D{{Key: "_id", Value: "inc/0/0"}, {Key: "n", Value: int64(3)},
		{Key: "m", Value: bson.D{{Key: "g0_0", Value: int64(2)}, {Key: "g0_2", Value: int64(1)}}}})
	mustInsert("inserts", bson.D{{Key: "_id", Value: "ins/0/1"}})
	mustInsert("saves", bson.D{{Key: "_id", Value: "save/0/0"}, {Key: "ops", Value: bson.A{"g0_0", "g0_0"}}, {Key: "version", Value: int64(2)}})
	w := &worker{byKind: map[string]*KindCount{}}
	w.incs.add(stOK, 0)
	w.incs.add(stOK, 0)
	w.incs.add(stFailed, once.NotApplied)
	w.inserts.add(stOK, 0)
	w.inserts.add(stFailed, 0)
	w.saves.add(stOK, 0)
	w.saves.add(stOK, 0)
	// The records' names are the ones the workload derives.
	for _, c := range [][2]string{{incDoc(0, 2), "inc/0/0"}, {incField(0, 2), "g0_2"}, {insertID(0, 1), "ins/0/1"}, {saveDoc(0, 1), "save/0/0"}, {saveOp(0, 1), "g0_1"}} {
		if c[0] != c[1] {
			t.Fatalf("derived name %q, want %q", c[0], c[1])
		}
	}
	rep := &Report{ByKind: map[string]KindCount{}, Errors: map[string]int64{}}
	if err := rep.check(ctx, db, []*worker{w}, &latencies{}); err != nil {
		t.Fatal(err)
	}
	want := map[string]KindCount{
		kindIncrement: {Lost: 1, Duplicated: 1, FailedApplied: 1},
		kindInsert:    {Lost: 1, FailedApplied: 1},
		kindSave:      {Lost: 1, Duplicated: 1},
	}
	for k, wc := range want {
		if got := rep.ByKind[k]; got != wc {
			t.Errorf("%s: got %+v, want %+v", k, got, wc)
		}
	}
	if rep.Misreport != 1 {
		t.Errorf("misreported = %d, want 1 (a NotApplied increment was applied)", rep.Misreport)
	}
	if rep.OK() {
		t.Error("report with lost and duplicated writes says OK")
	}
}

func TestRegisterCheck(t *testing.T) {
	ok := []regOp{
		{key: 1, write: true, value: 5, call: 0, ret: 10},
		{key: 1, value: 5, call: 20, ret: 30},
		{key: 2, value: 0, call: 0, ret: 5},
		// A failed write may take effect any time after its call.
		{key: 2, write: true, value: 9, call: 6, ret: math.MaxInt64},
		{key: 2, value: 9, call: 40, ret: 50},
	}
	if got := checkRegisters(ok, 10*time.Second); got != "ok" {
		t.Errorf("linearizable history: %s", got)
	}
	stale := []regOp{
		{key: 1, write: true, value: 5, call: 0, ret: 10},
		{key: 1, write: true, value: 6, call: 20, ret: 30},
		{key: 1, value: 5, call: 40, ret: 50}, // reads an overwritten value
	}
	if got := checkRegisters(stale, 10*time.Second); got != "illegal" {
		t.Errorf("stale read: %s, want illegal", got)
	}
}

func TestScheduleIsReproducible(t *testing.T) {
	mix, err := ParseMix(DefaultMix)
	if err != nil {
		t.Fatal(err)
	}
	a, b := Schedule(9, mix, time.Minute), Schedule(9, mix, time.Minute)
	if len(a) == 0 || len(a) != len(b) {
		t.Fatalf("schedules of one seed differ in length: %d, %d", len(a), len(b))
	}
	kinds := map[string]bool{}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("episode %d differs: %+v vs %+v", i, a[i], b[i])
		}
		if a[i].At+a[i].Duration > time.Minute {
			t.Errorf("episode %d ends after the run: %+v", i, a[i])
		}
		kinds[a[i].Kind] = true
	}
	if len(kinds) != len(mix) {
		t.Errorf("a minute of the default mix used %d of %d fault kinds", len(kinds), len(mix))
	}
	if c := Schedule(10, mix, time.Minute); len(c) == len(a) && c[0] == a[0] && c[1] == a[1] {
		t.Error("another seed gave the same schedule")
	}
	for _, bad := range []string{"reply-lost", "nope=1", "slow=-1", "slow=0"} {
		if _, err := ParseMix(bad); err == nil {
			t.Errorf("ParseMix(%q) accepted", bad)
		}
	}
}

func TestDirectURI(t *testing.T) {
	for in, want := range map[string]string{
		"mongodb://a:1,b:2/?replicaSet=rs0":               "mongodb://h:9/?directConnection=true",
		"mongodb://u:p@a:1,b:2/db?replicaSet=rs&tls=true": "mongodb://u:p@h:9/db?tls=true&directConnection=true",
		"mongodb://a:1": "mongodb://h:9/?directConnection=true",
	} {
		if got := directURI(in, "h:9"); got != want {
			t.Errorf("directURI(%q) = %q, want %q", in, got, want)
		}
	}
}

// The compact records: a byte per operation keeps status and outcome, the
// names the workload derives parse back to their worker and index, and the
// latency histograms give percentiles within a bucket's width (9%).
func TestCompactRecords(t *testing.T) {
	var l opLog
	l.add(stOK, 0)
	l.add(stFailed, once.Pending)
	l.add(stFailed, once.Unknown)
	l.cutLast()
	if l.status(0) != stOK || l.status(1) != stFailed || l.outcome(1) != once.Pending || l.status(2) != stCut || l.outcome(2) != once.Unknown {
		t.Errorf("log %v", l)
	}
	for _, c := range []struct {
		name, prefix, sep string
		a, b              int
	}{
		{insertID(13, 4711), "ins/", "/", 13, 4711},
		{saveOp(7, 99), "g", "_", 7, 99},
		{incField(9, 130), "g", "_", 9, 130 % incPerDoc},
		{incDoc(9, 130), "inc/", "/", 9 / incGroup, 130 / incPerDoc},
	} {
		if a, b, ok := parsePair(c.name, c.prefix, c.sep); !ok || a != c.a || b != c.b {
			t.Errorf("parsePair(%q) = %d, %d, %v; want %d, %d", c.name, a, b, ok, c.a, c.b)
		}
	}
	if _, _, ok := parsePair("ins/x/1", "ins/", "/"); ok {
		t.Error("parsePair accepted a non-number")
	}
	b := newBitset(100)
	if b.set(64) || !b.set(64) || !b.has(64) || b.has(63) || b.set(1000) || b.has(-1) {
		t.Error("bitset")
	}
	lat := &latencies{}
	for i := 1; i <= 1000; i++ {
		lat.add(i/500, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct{ p, want float64 }{{0.5, 500}, {0.99, 990}} {
		if got := lat.all.percentileMS(c.p); math.Abs(got-c.want)/c.want > 0.09 {
			t.Errorf("p%v = %.1f ms, want %v within 9%%", c.p*100, got, c.want)
		}
	}
	if lat.second(0) == nil || lat.second(5) != nil || lat.bytes() == 0 {
		t.Error("per-second histograms")
	}
	if n := unsafe.Sizeof(regOp{}); n != 32 {
		t.Errorf("a register record is %d bytes, want 32", n)
	}
}

// The transaction check catches a half-committed transaction (one marker
// without its twin), a lost one, a balance applied twice and one applied
// without its marker.
func TestTransactionCheckCatchesHalfCommits(t *testing.T) {
	c := launch(t)
	ctx := context.Background()
	client, err := sturdy.Connect(ctx, c.URI())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(ctx)
	coll := client.Database("soakcheck").Collection(txnColl)
	docs := []any{
		// Worker 0: transaction 0 whole, 1 only on "a", 2 lost (acknowledged, neither marker).
		bson.D{{Key: "_id", Value: txnMarker("a", 0, 0)}}, bson.D{{Key: "_id", Value: txnMarker("b", 0, 0)}},
		bson.D{{Key: "_id", Value: txnMarker("a", 0, 1)}},
		// Balances: "a" counts 3 for 2 markers (one applied twice), "b" 0 for 1 (one without its marker).
		bson.D{{Key: "_id", Value: txnBalance("a", 0)}, {Key: "n", Value: int64(3)}},
		bson.D{{Key: "_id", Value: txnBalance("b", 0)}, {Key: "n", Value: int64(0)}},
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	w := &worker{byKind: map[string]*KindCount{}}
	w.txns.add(stOK, 0)
	w.txns.add(stFailed, 0)
	w.txns.add(stOK, 0)
	rep := &Report{ByKind: map[string]KindCount{}, Errors: map[string]int64{}}
	if err := rep.checkTransactions(ctx, coll, []*worker{w}); err != nil {
		t.Fatal(err)
	}
	if got, want := rep.ByKind[kindTransaction], (KindCount{Lost: 1, Duplicated: 1}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if rep.HalfCommitted != 2 { // transaction 1, and the "b" balance short of its marker
		t.Errorf("half-committed %d, want 2", rep.HalfCommitted)
	}
	if rep.OK() {
		t.Error("a report with half-committed transactions says OK")
	}
}

// Every operation a transaction over both halves of a collection, under
// faults (on a replica set here; `sturdy soak --shards 2` puts the halves
// on two shards): nothing lost, duplicated or half-committed.
func TestSoakTransactions(t *testing.T) {
	c := launch(t)
	rep, err := Run(context.Background(), Options{URI: c.URI(), Duration: 5 * time.Second, Goroutines: 8, Seed: 4,
		Mix: "request-lost=2,reset=1,stepdown=2,overload=1,commit-lost=4", Transactions: true})
	if err != nil {
		t.Fatal(err)
	}
	kc := rep.ByKind[kindTransaction]
	t.Logf("transactions %d failed %d failed_applied %d lost %d dup %d half %d faults %d", kc.Ops, kc.Failed, kc.FailedApplied, kc.Lost, kc.Duplicated, rep.HalfCommitted, rep.Faults)
	for e, n := range rep.Errors {
		t.Logf("  %5d  %s", n, e)
	}
	if kc.Ops == 0 || kc.Ops != rep.Ops {
		t.Fatalf("%d transactions of %d operations", kc.Ops, rep.Ops)
	}
	for e := range rep.Errors {
		if strings.HasPrefix(e, "schedule: ") {
			t.Errorf("a fault was not injected: %s", e)
		}
	}
	if !rep.OK() {
		t.Errorf("lost %d, duplicated %d, half-committed %d, stuck %d, leaked %d", rep.Lost, rep.Duplicated, rep.HalfCommitted, rep.Stuck, rep.LeakedGoroutines)
	}
}

// On a sharded cluster every transaction commits on two shards (mongos's
// two-phase commit), under router restarts, shard step-downs and lost
// commit replies: nothing lost, duplicated or half-committed, and each
// shard holds one half of every committed transaction.
func TestSoakCrossShardTransactions(t *testing.T) {
	c, err := mongosim.Launch(mongosim.Options{Shards: 2, Routers: 2, Members: 3, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	o := Options{URI: c.URI(), Duration: 8 * time.Second, Goroutines: 8, Mix: ShardedMix, Transactions: true}
	// The first seed whose schedule has every fault this test is about.
	mix, _ := ParseMix(ShardedMix)
	for o.Seed = 1; ; o.Seed++ {
		kinds := map[string]bool{}
		for _, ep := range Schedule(o.Seed, mix, o.Duration) {
			kinds[ep.Kind] = true
		}
		if kinds[FaultRouterRestart] && kinds[FaultStepDown] && kinds[FaultCommitLost] {
			break
		}
	}
	for _, sh := range c.Shards() {
		o.ShardURIs = append(o.ShardURIs, sh.ReplicaSetURI())
	}
	for _, r := range c.Routers() {
		o.Routers = append(o.Routers, r)
	}
	ctx := context.Background()
	rep, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	kc := rep.ByKind[kindTransaction]
	t.Logf("transactions %d failed %d failed_applied %d lost %d dup %d half %d episodes %d commit replies lost %d", kc.Ops, kc.Failed, kc.FailedApplied, kc.Lost, kc.Duplicated, rep.HalfCommitted, len(rep.Schedule), rep.CommitRepliesLost)
	for e, n := range rep.Errors {
		t.Logf("  %5d  %s", n, e)
		if strings.HasPrefix(e, "schedule: ") {
			t.Errorf("a fault was not injected: %s", e)
		}
	}
	if rep.CommitRepliesLost == 0 {
		t.Error("no commit reply was lost")
	}
	if !rep.CrossShard || !rep.OK() {
		t.Fatalf("cross-shard %v; lost %d, duplicated %d, half-committed %d, stuck %d, leaked %d", rep.CrossShard,
			rep.Lost, rep.Duplicated, rep.HalfCommitted, rep.Stuck, rep.LeakedGoroutines)
	}
	// Each shard, read directly, holds exactly one half's markers.
	for i, sh := range c.Shards() {
		sc, err := sturdy.Connect(ctx, sh.ReplicaSetURI())
		if err != nil {
			t.Fatal(err)
		}
		coll := sc.Database("soak").Collection(txnColl)
		own, other := []string{"a", "b"}[i], []string{"b", "a"}[i]
		nOwn, err1 := coll.CountDocuments(ctx, bson.D{{Key: "h", Value: own}})
		nOther, err2 := coll.CountDocuments(ctx, bson.D{{Key: "h", Value: other}})
		_ = sc.Disconnect(ctx)
		if err := errors.Join(err1, err2); err != nil {
			t.Fatal(err)
		}
		if nOwn == 0 || nOther != 0 {
			t.Errorf("shard %d holds %d %q and %d %q documents", i, nOwn, own, nOther, other)
		}
	}
}
