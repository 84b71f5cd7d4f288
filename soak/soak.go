package soak

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/adapt"
	"github.com/sturdy-go/sturdy/faultproxy"
	"github.com/sturdy-go/sturdy/once"
	"github.com/sturdy-go/sturdy/optimistic"
)

// Options configures a run. The zero value of each field is its default.
type Options struct {
	// URI of the deployment under test (required). It must accept
	// configureFailPoint and replSetStepDown.
	URI string
	// Database the workload writes to; default "soak". It is dropped at the
	// start of the run.
	Database string
	// Duration of the workload; default 30 s.
	Duration time.Duration
	// Goroutines running operations; default 16.
	Goroutines int
	// Seed makes the fault schedule and the operation mix reproducible;
	// 0 means 1.
	Seed uint64
	// Mix is the fault mix ("kind=weight,..." or "none"); default DefaultMix.
	Mix string
	// OpTimeout bounds each operation; one that returns later than this
	// (plus a second of grace) is counted as stuck. Default 10 s.
	OpTimeout time.Duration
	// Progress, if set, is called about once a second with the counters so
	// far.
	Progress func(Progress)
	// FaultsFired, if set, reports how many faults the deployment injected
	// so far (mongosim's Stats); otherwise faults counts episodes.
	FaultsFired func() int64
	// Driver is the client library the workload runs through; the zero
	// value is Sturdy. The checks read the data with sturdy either way.
	Driver Driver
	// ShardURIs are the replica-set URIs of a sharded cluster's shards:
	// step-downs go to them in turn (instead of to URI).
	ShardURIs []string
	// Routers are the routers the router-restart fault stops and starts
	// in turn (an embedded mongosim's).
	Routers []RouterControl
	// Transactions makes every operation a transaction writing to both
	// halves of one collection (see txn.go); on a sharded cluster of two
	// or more shards the halves live on two shards, so every transaction
	// is a cross-shard one. The driver's client must be a Transactor.
	Transactions bool
}

// Progress is the live state of a run.
type Progress struct {
	Elapsed    time.Duration
	Ops        int64
	Failed     int64
	Faults     int64
	Lost       int64 // acknowledged inserts found missing so far
	Goroutines int
	HeapMB     float64
}

// Report is the outcome of a run; the JSON names are `sturdy soak --json`'s.
type Report struct {
	Driver        string `json:"driver"` // the client library the workload ran through
	Ops           int64  `json:"ops"`
	Succeeded     int64  `json:"succeeded"`
	Failed        int64  `json:"failed"`
	FailedApplied int64  `json:"failed_applied"` // failed operations the data shows applied (once)
	Lost          int64  `json:"lost"`           // succeeded operations not applied
	Duplicated    int64  `json:"duplicated"`     // operations applied more than once
	// HalfCommitted counts transactions of which only part is visible
	// (Options.Transactions): a marker on one shard without its twin on
	// the other, or a balance that disagrees with its markers.
	HalfCommitted int64 `json:"half_committed"`
	// CrossShard: the transactions wrote to two shards.
	CrossShard bool `json:"cross_shard"`
	// CommitRepliesLost counts the commitTransaction replies the fault
	// proxy dropped after the commit (the commit-lost fault).
	CommitRepliesLost int64   `json:"commit_replies_lost"`
	Stuck             int64   `json:"stuck"` // operations that outlived their deadline
	Linearizable      bool    `json:"linearizable"`
	Linearization     string  `json:"linearization"` // "ok", "illegal" or "unknown" (checker timed out)
	Faults            int64   `json:"faults"`
	HeapMaxMB         float64 `json:"heap_max_mb"` // the whole process's, an embedded mongosim included
	// RecordsMB is what the run's records held for the checks at the end:
	// a byte per operation, the register history and the latency
	// histograms.
	RecordsMB float64 `json:"records_mb"`
	P50ms     float64 `json:"p50_ms"`
	P99ms     float64 `json:"p99_ms"`
	// LeakedGoroutines counts goroutines of the client (not of an embedded
	// server) left after it disconnected.
	LeakedGoroutines int `json:"leaked_goroutines"`

	ByKind    map[string]KindCount `json:"by_kind"`
	Errors    map[string]int64     `json:"errors,omitempty"` // failures by error text (first 100 chars)
	Schedule  []Episode            `json:"schedule"`
	Timeline  []Second             `json:"timeline"`
	Elapsed   time.Duration        `json:"elapsed_ns"`
	Misreport int64                `json:"misreported"` // failures reported "not applied" that were applied
}

// KindCount counts one operation kind.
type KindCount struct {
	Ops           int64 `json:"ops"`
	Failed        int64 `json:"failed"`
	FailedApplied int64 `json:"failed_applied"`
	Lost          int64 `json:"lost"`
	Duplicated    int64 `json:"duplicated"`
}

// Second is one second of the run, for the timeline charts.
type Second struct {
	Succeeded int64   `json:"succeeded"`
	Failed    int64   `json:"failed"`
	P99ms     float64 `json:"p99_ms"`
}

// OK reports that the run proved what it should: something succeeded, and
// nothing was lost, duplicated, half-committed or stuck, the register
// history is linearizable and no goroutine leaked.
func (r *Report) OK() bool {
	return r.Succeeded > 0 && r.Lost == 0 && r.Duplicated == 0 && r.HalfCommitted == 0 && r.Stuck == 0 && r.Misreport == 0 &&
		r.Linearization != "illegal" && r.LeakedGoroutines == 0
}

func (o *Options) withDefaults() error {
	if o.URI == "" {
		return errors.New("soak: no URI")
	}
	if o.Database == "" {
		o.Database = "soak"
	}
	if o.Duration <= 0 {
		o.Duration = 30 * time.Second
	}
	if o.Goroutines <= 0 {
		o.Goroutines = 16
	}
	if o.Goroutines > math.MaxUint16 {
		return fmt.Errorf("soak: %d goroutines, at most %d", o.Goroutines, math.MaxUint16)
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Mix == "" {
		o.Mix = DefaultMix
	}
	if o.OpTimeout <= 0 {
		o.OpTimeout = 10 * time.Second
	}
	return nil
}

// Operation kinds of the workload.
const (
	kindIncrement = "increment"
	kindInsert    = "insert"
	kindSave      = "save"
	kindRegister  = "register"
	// kindTransaction is Options.Transactions' only kind.
	kindTransaction = "transaction"
)

// incPerDoc and savesPerDoc bound how many operations share one document,
// so documents stay small however long the run is.
const (
	incPerDoc   = 64
	savesPerDoc = 32
	registers   = 64
	incGroup    = 4 // goroutines whose increments share documents
	saveGroup   = 4 // goroutines whose saves contend on the same documents
)

type savedDoc struct {
	ID      string   `bson:"_id"`
	Ops     []string `bson:"ops"`
	Version int64    `bson:"version"`
}

// worker is one goroutine's state; only it touches its logs. The n-th
// increment, insert and save of worker g touch incDoc(g, n), insertID(g,
// n) and saveDoc(g, n) (see records.go).
type worker struct {
	g        int
	rng      *rand.Rand
	incs     opLog
	saves    opLog
	inserts  opLog
	txns     opLog
	regOps   []regOp
	lat      *latencies
	errs     map[string]int64
	byKind   map[string]*KindCount
	finished []int64 // per second: succeeded, failed interleaved
}

// workload is what the workers run through.
type workload struct {
	incs, inserts *once.Collection
	saves         *optimistic.Collection
	regs          adapt.Collection
	acked         chan<- string
	txn           Transactor // with Options.Transactions
	db            string
}

// Run runs the workload and the fault schedule for o.Duration, then checks
// the data. The error is about the run itself (connecting, reading the
// data back); what the checks found is in the Report.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.withDefaults(); err != nil {
		return nil, err
	}
	mix, err := ParseMix(o.Mix)
	if err != nil {
		return nil, err
	}
	drv := o.Driver
	if drv.Connect == nil {
		drv = Sturdy
	}
	rep := &Report{Driver: drv.Name, ByKind: make(map[string]KindCount), Errors: make(map[string]int64)}
	rep.Schedule = Schedule(o.Seed, mix, o.Duration)

	adm, client, err := connect(ctx, o, drv, mix)
	if err != nil {
		return nil, err
	}
	defer adm.close(context.Background())
	acked := make(chan string, 4096)
	wl, err := newWorkload(ctx, o, adm, client, acked, rep)
	if err != nil {
		_ = client.Disconnect(ctx)
		return nil, err
	}
	// The checks read through the admin's sturdy client: the same reads
	// whichever driver the workload ran through.
	db := adm.rs.Database(o.Database)

	var cnt counters
	faults := func() int64 {
		if o.FaultsFired != nil {
			return o.FaultsFired()
		}
		return cnt.episodes.Load()
	}
	faults0 := faults()

	start := time.Now()
	runCtx, cancel := context.WithDeadline(ctx, start.Add(o.Duration))
	defer cancel()

	bg := startBackground(ctx, runCtx, o, adm, start, rep.Schedule, db.Collection("inserts"), acked, &cnt,
		func() int64 { return faults() - faults0 })
	workers, lat := runWorkers(runCtx, o, start, wl, &cnt)
	rep.Elapsed = time.Since(start)
	close(acked)
	cancel()
	scheduleErrs := bg.stop()
	rep.Faults = faults() - faults0
	rep.Stuck = cnt.stuck.Load()
	rep.Lost = cnt.lost.Load() // from the live check; the final check recounts
	rep.HeapMaxMB = float64(cnt.heapMax.Load()) / (1 << 20)
	if adm.proxy != nil {
		rep.CommitRepliesLost = adm.proxy.Stats().RepliesDropped
	}
	for _, err := range scheduleErrs {
		rep.Errors["schedule: "+truncate(err.Error())]++
	}
	if err := rep.finish(ctx, db, wl, workers, lat); err != nil {
		return nil, err
	}
	if err := client.Disconnect(context.Background()); err != nil {
		return nil, fmt.Errorf("soak: disconnect: %w", err)
	}
	adm.close(context.Background())
	owns := func(stack string) bool { return Sturdy.Owns(stack) || drv.Owns != nil && drv.Owns(stack) }
	rep.LeakedGoroutines = waitGoroutines(owns, 5*time.Second)
	return rep, nil
}

// background is what runs beside the workers: the fault schedule, the
// continuous check of acknowledged inserts and the progress sampler.
type background struct {
	wg           sync.WaitGroup
	stopSampler  chan struct{}
	mu           sync.Mutex
	scheduleErrs []error
}

// startBackground starts the schedule (until runCtx ends), the live
// insert check (until acked is closed) and the sampler (until stop).
func startBackground(ctx, runCtx context.Context, o Options, adm *admin, start time.Time, schedule []Episode,
	inserts *sturdy.Collection, acked <-chan string, cnt *counters, faults func() int64) *background {
	bg := &background{stopSampler: make(chan struct{})}
	bg.wg.Add(3)
	go func() {
		defer bg.wg.Done()
		runSchedule(runCtx, adm, start, schedule, func(Episode) { cnt.episodes.Add(1) }, func(err error) {
			bg.mu.Lock()
			bg.scheduleErrs = append(bg.scheduleErrs, err)
			bg.mu.Unlock()
		})
	}()
	// The continuous check: acknowledged inserts are looked up as they
	// come, so a lost write shows in the progress line within seconds.
	go func() {
		defer bg.wg.Done()
		checkInsertsLive(ctx, inserts, acked, &cnt.lost)
	}()
	go func() {
		defer bg.wg.Done()
		cnt.sample(bg.stopSampler, o.Progress, start, faults)
	}()
	return bg
}

// stop stops the sampler, waits for all three to end and returns the
// schedule's errors.
func (bg *background) stop() []error {
	close(bg.stopSampler)
	bg.wg.Wait()
	return bg.scheduleErrs
}

// runWorkers runs o.Goroutines workers until ctx ends.
func runWorkers(ctx context.Context, o Options, start time.Time, wl *workload, cnt *counters) ([]*worker, *latencies) {
	workers := make([]*worker, o.Goroutines)
	lat := &latencies{}
	var wg sync.WaitGroup
	for g := range workers {
		w := &worker{g: g, rng: rand.New(rand.NewPCG(o.Seed, uint64(g)+1)), lat: lat, errs: make(map[string]int64), byKind: make(map[string]*KindCount)}
		workers[g] = w
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				w.one(ctx, o, start, wl, cnt)
			}
		}()
	}
	wg.Wait()
	return workers, lat
}

// newWorkload builds what the workers run through; with Transactions it
// also lays the transactions' collection out over two shards, if there
// are.
func newWorkload(ctx context.Context, o Options, adm *admin, client Client, acked chan<- string, rep *Report) (*workload, error) {
	wl := &workload{
		incs:    once.New(client.Collection(o.Database, "increments")),
		inserts: once.New(client.Collection(o.Database, "inserts")),
		saves:   optimistic.New(client.Collection(o.Database, "saves")),
		regs:    client.Collection(o.Database, "registers"),
		acked:   acked,
		db:      o.Database,
	}
	if !o.Transactions {
		return wl, nil
	}
	t, ok := client.(Transactor)
	if !ok {
		return nil, errNoTransactions
	}
	wl.txn = t
	var err error
	rep.CrossShard, err = shardTxnCollection(ctx, adm.rs, o.Database)
	return wl, err
}

// counters are the live counts the workers, the live check and the
// progress line share.
type counters struct {
	ops, failed, lost, stuck, episodes atomic.Int64
	heapMax                            atomic.Uint64
}

// sample records the heap's high-water mark and reports progress once a
// second until stop is closed.
func (c *counters) sample(stop <-chan struct{}, progress func(Progress), start time.Time, faults func() int64) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var ms runtime.MemStats
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		runtime.ReadMemStats(&ms)
		if ms.HeapAlloc > c.heapMax.Load() {
			c.heapMax.Store(ms.HeapAlloc)
		}
		if progress != nil {
			progress(Progress{Elapsed: time.Since(start), Ops: c.ops.Load(), Failed: c.failed.Load(),
				Faults: faults(), Lost: c.lost.Load(), Goroutines: runtime.NumGoroutine(),
				HeapMB: float64(ms.HeapAlloc) / (1 << 20)})
		}
	}
}

// finish settles what failed increments left pending, then checks
// everything from the data with fresh, fault-free reads.
func (r *Report) finish(ctx context.Context, db *sturdy.Database, wl *workload, workers []*worker, lat *latencies) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := settle(ctx, wl.incs, db.Collection("increments")); err != nil {
		return err
	}
	records := lat.bytes()
	for _, w := range workers {
		records += w.recordBytes()
	}
	r.RecordsMB = float64(records) / (1 << 20)
	return r.check(ctx, db, workers, lat)
}

// connect connects the schedule's admin clients (with a fault proxy in
// front of the deployment when the mix loses commit replies), drops the
// database, and connects the workload's client (through the proxy, if
// any).
func connect(ctx context.Context, o Options, drv Driver, mix map[string]int) (*admin, Client, error) {
	adm, err := connectAdmin(ctx, o.URI, o.ShardURIs)
	if err != nil {
		return nil, nil, fmt.Errorf("soak: admin client: %w", err)
	}
	fail := func(err error) (*admin, Client, error) {
		adm.close(context.Background())
		return nil, nil, err
	}
	adm.routers = o.Routers
	if err := adm.rs.Database(o.Database).Drop(ctx); err != nil {
		return fail(fmt.Errorf("soak: drop %s: %w", o.Database, err))
	}
	uri := o.URI
	if mix[FaultCommitLost] > 0 {
		so, err := sturdy.ParseURI(o.URI)
		if err != nil {
			return fail(err)
		}
		if adm.proxy, err = faultproxy.Start(ctx, faultproxy.Options{Upstreams: so.Hosts, Seed: int64(o.Seed)}); err != nil {
			return fail(fmt.Errorf("soak: fault proxy: %w", err))
		}
		uri = adm.proxy.URI()
	}
	client, err := drv.Connect(ctx, uri)
	if err != nil {
		return fail(fmt.Errorf("soak: %s: %w", drv.Name, err))
	}
	return adm, client, nil
}

// settle runs Reconcile until no increment is pending, and stays so for
// quiet. An operation cut off by the end of the run may still be executing
// on the server (held by a slow-reply fault, which the server still runs
// after the client gave up) and record its token after a pass that found
// none, so one empty pass is not enough.
func settle(ctx context.Context, incs *once.Collection, coll *sturdy.Collection) error {
	const quiet = time.Second // well over the longest slow-reply block (200 ms)
	deadline := time.Now().Add(20 * time.Second)
	var emptySince time.Time
	for {
		if _, err := incs.Reconcile(ctx); err != nil {
			return fmt.Errorf("soak: reconcile increments: %w", err)
		}
		n, err := coll.CountDocuments(ctx, bson.D{{Key: "pending.0", Value: bson.D{{Key: "$exists", Value: true}}}})
		if err != nil {
			return fmt.Errorf("soak: count pending increments: %w", err)
		}
		switch {
		case n != 0:
			emptySince = time.Time{}
		case emptySince.IsZero():
			emptySince = time.Now()
		case time.Since(emptySince) >= quiet:
			return nil
		}
		if time.Now().After(deadline) {
			return nil // what is left is reported by checkIncrements
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitGoroutines waits until no goroutine of the clients is left, or d
// passes, and returns how many are left over.
func waitGoroutines(owns func(stack string) bool, d time.Duration) int {
	deadline := time.Now().Add(d)
	for {
		n := clientGoroutines(owns)
		if n == 0 || time.Now().After(deadline) {
			return n
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// clientGoroutines counts the goroutines owns claims.
func clientGoroutines(owns func(stack string) bool) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if owns(g) {
			count++
		}
	}
	return count
}

func truncate(s string) string {
	if len(s) > 100 {
		return s[:100]
	}
	return s
}

// one runs one operation of a kind the worker's random source picks.
func (w *worker) one(ctx context.Context, o Options, start time.Time, wl *workload, cnt *counters) {
	opCtx, cancel := context.WithTimeout(ctx, o.OpTimeout)
	defer cancel()
	began := time.Now()
	kind, log, outcome, err := w.do(opCtx, start, wl)
	if log != nil {
		st := stOK
		if err != nil {
			st = stFailed
		}
		log.add(st, outcome)
	}
	took := time.Since(began)
	if took > o.OpTimeout+time.Second {
		cnt.stuck.Add(1)
	}
	cnt.ops.Add(1)
	kc := w.byKind[kind]
	if kc == nil {
		kc = &KindCount{}
		w.byKind[kind] = kc
	}
	kc.Ops++
	sec := int(time.Since(start) / time.Second)
	for len(w.finished) < 2*(sec+1) {
		w.finished = append(w.finished, 0, 0)
	}
	if err != nil {
		// An operation cut off by the end of the run is not a failure (the
		// error need not say so: a network read cut by the deadline is a
		// network error). Whether it applied is unknowable and it was not
		// reported; the data is still checked for duplicates. A cut-off
		// register write stays in the history with an unknown result.
		if ctx.Err() != nil {
			if log != nil {
				log.cutLast()
			}
			kc.Ops--
			cnt.ops.Add(-1)
			return
		}
		cnt.failed.Add(1)
		kc.Failed++
		w.errs[kind+": "+truncate(err.Error())]++
		w.finished[2*sec+1]++
		return
	}
	w.finished[2*sec]++
	w.lat.add(sec, took)
}

// do runs one operation of a kind the worker's random draw picks: log is
// the kind's log (nil for registers), outcome what a failed increment
// left behind.
func (w *worker) do(opCtx context.Context, start time.Time, wl *workload) (kind string, log *opLog, outcome once.Outcome, err error) {
	outcome = once.NotApplied
	switch p := w.rng.IntN(100); {
	case wl.txn != nil:
		kind, log = kindTransaction, &w.txns
		err = w.transaction(opCtx, wl.txn, wl.db)
	case p < 30:
		kind, log = kindIncrement, &w.incs
		n := len(w.incs)
		_, err = wl.incs.Increment(opCtx, incDoc(w.g, n), bson.D{{Key: "n", Value: int64(1)}, {Key: "m." + incField(w.g, n), Value: int64(1)}})
		var ie *once.IncrementError
		if errors.As(err, &ie) {
			outcome = ie.Outcome
		}
	case p < 55:
		kind, log = kindInsert, &w.inserts
		id := insertID(w.g, len(w.inserts))
		_, err = wl.inserts.InsertOne(opCtx, bson.D{{Key: "_id", Value: id}, {Key: "g", Value: int32(w.g)}})
		if err == nil {
			wl.acked <- id
		}
	case p < 75:
		kind, log = kindSave, &w.saves
		n := len(w.saves)
		op := saveOp(w.g, n)
		_, err = optimistic.Modify(opCtx, wl.saves, saveDoc(w.g, n), func(d *savedDoc) error {
			d.Ops = append(d.Ops, op)
			return nil
		}, &optimistic.ModifyOptions{CreateIfMissing: true, MaxAttempts: 50})
	default:
		kind = kindRegister
		err = w.register(opCtx, wl.regs, start)
	}
	return kind, log, outcome, err
}

// checkInsertsLive looks up acknowledged insert ids in batches and counts
// the ones that are missing.
func checkInsertsLive(ctx context.Context, coll *sturdy.Collection, acked <-chan string, lost *atomic.Int64) {
	var batch []string
	flush := func() {
		if len(batch) == 0 {
			return
		}
		for attempt := 0; attempt < 20; attempt++ {
			n, err := countIDs(ctx, coll, batch)
			if err == nil {
				lost.Add(int64(len(batch)) - n)
				break
			}
			if ctx.Err() != nil {
				return
			}
			time.Sleep(100 * time.Millisecond) // a fault hit the check itself
		}
		batch = batch[:0]
	}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case id, ok := <-acked:
			if !ok {
				flush()
				return
			}
			batch = append(batch, id)
			if len(batch) >= 500 {
				flush()
			}
		case <-tick.C:
			flush()
		}
	}
}

func countIDs(ctx context.Context, coll *sturdy.Collection, ids []string) (int64, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return coll.CountDocuments(cctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: slices.Clone(ids)}}}})
}
