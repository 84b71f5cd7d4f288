package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	mevent "go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/adapt"
	"github.com/sturdy-go/sturdy/adapt/mongov2"
	"github.com/sturdy-go/sturdy/event"
	"github.com/sturdy-go/sturdy/faultproxy"
	"github.com/sturdy-go/sturdy/internal/testhook"
	"github.com/sturdy-go/sturdy/mongosim"
	"github.com/sturdy-go/sturdy/once"
)

// The demo runs the workload of "How To Write Resilient MongoDB Applications"
// (A. Jesse Jiryu Davis, 2016) — count events by incrementing a counter in
// one document — under each kind of failure the article describes, with each
// application strategy, and measures what really landed. Every increment also
// bumps a per-operation field ops.<i>, so the demo can tell exactly which
// operations were lost (applied 0 times) or duplicated (applied more than
// once).

const demoDB, demoColl = "sturdy_demo", "counters"

type faultKind struct {
	name string
	desc string
	// rules returns the proxy rules for operation i of n (nil: no fault).
	// twoStep strategies send two updates per operation; either may fail.
	rules func(i, n int, rng *mrand.Rand, twoStep bool) []faultproxy.Rule
	// waitCap, when positive, caps the deadline of strategies that retry
	// until their deadline (the transaction): under this fault they only
	// wait, and the figures are the same with a shorter wait.
	waitCap time.Duration
}

var updates = faultproxy.Match{Commands: []string{"update"}}

var demoFaults = []faultKind{
	{"transient", "network error on 20% of operations: half lose the request, half lose the reply after the write applied", func(i, n int, rng *mrand.Rand, twoStep bool) []faultproxy.Rule {
		if rng.IntN(5) != 0 {
			return nil
		}
		at := 0
		if twoStep {
			at = rng.IntN(2) // either step may meet the fault
		}
		kind := faultproxy.DropRequest
		if rng.IntN(2) == 0 {
			kind = faultproxy.DropReply
		}
		return []faultproxy.Rule{{Match: updates, Action: faultproxy.Action{Kind: kind}, Skip: at, Times: 1}}
	}, 0},
	{"outage", "persistent outage: every write fails for 20% of the run (a transaction gets 50 ms per increment)", func(i, n int, _ *mrand.Rand, _ bool) []faultproxy.Rule {
		if i < n*2/5 || i >= n*3/5 {
			return nil
		}
		return []faultproxy.Rule{{Match: updates, Action: faultproxy.Action{Kind: faultproxy.DropRequest}}}
	}, 50 * time.Millisecond},
	{"command-error", "command error Unauthorized (10% of operations)", func(i, n int, rng *mrand.Rand, _ bool) []faultproxy.Rule {
		if rng.IntN(10) != 0 {
			return nil
		}
		return []faultproxy.Rule{{Match: updates, Action: faultproxy.Action{Kind: faultproxy.Error,
			Error: faultproxy.CommandError{Code: 13, CodeName: "Unauthorized", Message: "not authorized on sturdy_demo to execute command"}}}}
	}, 0},
	{"overload", "error 462 SystemOverloadedError twice (20% of operations), with baseBackoffMS 10", func(i, n int, rng *mrand.Rand, _ bool) []faultproxy.Rule {
		if rng.IntN(5) != 0 {
			return nil
		}
		// The overloaded server suggests a 10 ms backoff base (baseBackoffMS),
		// which replaces the Client Backpressure spec's 100 ms: the same
		// retries, a tenth of the waiting.
		return []faultproxy.Rule{{Match: updates, Action: faultproxy.Action{Kind: faultproxy.Shed, BaseBackoffMS: 10}, Times: 2}}
	}, 0},
}

// clientKind is how the strategy's sturdy client is configured.
type clientKind int

const (
	appRetriesOnly  clientKind = iota // the driver retries nothing; the application decides
	retryableWrites                   // Retryable Writes spec: retry once with the same lsid + txnNumber
	sturdyDefault                     // retryable writes plus the Client Backpressure spec's overload retries
)

type strategy struct {
	name    string
	twoStep bool
	client  clientKind
	run     func(ctx context.Context, env *cellEnv, op int) error
	// sturdyOnly strategies need sturdy's client; --driver official skips
	// them.
	sturdyOnly bool
	// txn strategies send an update and a commitTransaction per
	// operation: the faults hit either (a lost commit reply included).
	txn bool
	// opTimeout is the deadline of one increment; 0: 10 s.
	opTimeout time.Duration
}

// cellEnv is what a strategy works with during one cell: the application's
// collection, through sturdy or through the official driver's adapter.
type cellEnv struct {
	coll adapt.Collection
	once *once.Collection
}

var demoStrategies = []strategy{
	{name: "no retry", run: func(ctx context.Context, e *cellEnv, op int) error {
		return e.inc(ctx, op)
	}},
	{name: "always retry (5x)", run: func(ctx context.Context, e *cellEnv, op int) error {
		err := e.inc(ctx, op)
		for attempt := 0; attempt < 5 && err != nil; attempt++ {
			err = e.inc(ctx, op)
		}
		return err
	}},
	{name: "retry once", run: func(ctx context.Context, e *cellEnv, op int) error {
		err := e.inc(ctx, op)
		if sturdy.IsNetworkError(err) {
			err = e.inc(ctx, op)
		}
		return err
	}},
	{name: "retry once + idempotent", twoStep: true, run: func(ctx context.Context, e *cellEnv, op int) error {
		_, err := e.once.Increment(ctx, demoDay, incFields(op))
		return err
	}},
	{name: "retryable writes", client: retryableWrites, run: func(ctx context.Context, e *cellEnv, op int) error {
		return e.inc(ctx, op)
	}},
	{name: "sturdy (+ backpressure)", client: sturdyDefault, sturdyOnly: true, run: func(ctx context.Context, e *cellEnv, op int) error {
		return e.inc(ctx, op)
	}},
	// WithTransaction retries a transient error until its deadline: the
	// application's deadline for one increment (500 ms; 50 ms in the outage,
	// where it only waits) bounds it, not the API's 120 s.
	{name: "transaction", client: sturdyDefault, sturdyOnly: true, txn: true, opTimeout: 500 * time.Millisecond, run: func(ctx context.Context, e *cellEnv, op int) error {
		coll, ok := e.coll.(*sturdy.Collection)
		if !ok {
			return errors.New("the transaction strategy needs sturdy's client")
		}
		return coll.Database().Client().UseSession(ctx, func(ctx context.Context, s *sturdy.Session) error {
			return s.WithTransaction(ctx, func(ctx context.Context) error {
				_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: demoDay}},
					bson.D{{Key: "$inc", Value: incFields(op)}}, &sturdy.UpdateOptions{Upsert: true, Session: s})
				return err
			}, nil)
		})
	}},
}

const demoDay = "2016-06-28"

func incFields(op int) bson.D {
	return bson.D{{Key: "counter", Value: int32(1)}, {Key: "ops." + strconv.Itoa(op), Value: int32(1)}}
}

// inc is the article's updateOne: $inc the counter (and this operation's
// field) in today's document, upsert.
func (e *cellEnv) inc(ctx context.Context, op int) error {
	_, err := e.coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: demoDay}},
		bson.D{{Key: "$inc", Value: incFields(op)}}, &sturdy.UpdateOptions{Upsert: true})
	return err
}

// cellResult is one (fault, strategy) measurement.
type cellResult struct {
	Fault      string  `json:"fault"`
	Strategy   string  `json:"strategy"`
	Expected   int     `json:"expected"`
	Counted    int64   `json:"counted"`
	Lost       int     `json:"lost"`
	Duplicated int     `json:"duplicated"`
	Errors     int     `json:"errors"`
	Attempts   int64   `json:"attempts"`
	Seconds    float64 `json:"seconds"`
}

// MS is the cell's time in milliseconds, for reports.
func (r cellResult) MS() float64 { return r.Seconds * 1000 }

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sturdy demo", flag.ContinueOnError)
	uri := fs.String("uri", "", "run against this deployment (through the fault proxy, which fronts every member) instead of an embedded mongosim")
	ops := fs.Int("ops", 200, "increments per (fault, strategy) cell")
	seed := fs.Uint64("seed", 1, "seed for choosing which operations meet a fault")
	jsonOut := fs.String("json", "", "also write the results as JSON to this file")
	htmlOut := fs.String("html", "", "also write an HTML page with the table and charts to this file")
	sharded := fs.Bool("sharded", false, "run the embedded mongosim as a sharded cluster: two mongos routers (each behind the fault proxy) in front of one shard")
	driverName := fs.String("driver", "sturdy", "the application's client: sturdy, or official (go.mongodb.org/mongo-driver/v2; retryWrites off/on, the application's own retries, and once over adapt/mongov2)")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if *driverName != "sturdy" && *driverName != "official" {
		fmt.Fprintf(stderr, "-driver must be sturdy or official, not %q\n", *driverName)
		return errUsage
	}
	if *ops < 10 {
		fmt.Fprintln(stderr, "-ops must be at least 10")
		return errUsage
	}
	target := demoTarget{official: *driverName == "official"}
	if *sharded && *uri != "" {
		fmt.Fprintln(stderr, "-sharded starts an embedded sharded mongosim; with -uri the deployment's own topology is used")
		return errUsage
	}
	closeSim, err := resolveDemoTarget(&target, *uri, *sharded, stderr)
	if err != nil {
		return err
	}
	defer closeSim()
	// A driver waits at least 500 ms between two checks of a server, so
	// every network error costs up to half a second of rediscovery. The SDAM
	// spec forbids configuring it; the demo alone shortens it so that its
	// hundreds of injected errors finish in seconds.
	defer testhook.SetMinHeartbeatInterval(5 * time.Millisecond)()
	admin, err := sturdy.ConnectWithOptions(ctx, target.base)
	if err != nil {
		return err
	}
	defer admin.Disconnect(context.Background())

	results, err := runCells(ctx, target, admin, demoStrategiesFor(target.official), *ops, *seed, stderr)
	if err != nil {
		return err
	}
	if target.official {
		fmt.Fprintln(stdout, "client: the official Go driver (go.mongodb.org/mongo-driver/v2); \"retry once + idempotent\" is once over adapt/mongov2")
		fmt.Fprintln(stdout)
	}
	if *sharded {
		fmt.Fprintln(stdout, "deployment: mongosim sharded cluster, two mongos routers (each behind the fault proxy), one shard")
		fmt.Fprintln(stdout)
	}
	printDemoTable(stdout, results)
	if target.official {
		fmt.Fprintln(stdout, "  The official driver keeps its 500 ms minimum between server checks, and with retryable writes on it retries")
		fmt.Fprintln(stdout, "  a write for as long as the operation's context allows (the demo gives each operation 10 s).")
	}
	if err := writeJSON(*jsonOut, results); err != nil {
		return err
	}
	return writeHTMLFile(*htmlOut, func(w io.Writer) error { return writeDemoHTML(w, results) })
}

// resolveDemoTarget points target at the deployment -uri names or, with
// no -uri, at an embedded mongosim it starts; closeSim stops that one
// (a no-op otherwise).
func resolveDemoTarget(target *demoTarget, uri string, sharded bool, stderr io.Writer) (closeSim func(), err error) {
	if uri != "" {
		o, err := sturdy.ParseURI(uri)
		if err != nil {
			return func() {}, fmt.Errorf("-uri: %w", err)
		}
		if len(o.Hosts) == 0 {
			return func() {}, errors.New("-uri: mongodb+srv is not supported by the demo; give the hosts")
		}
		target.hosts, target.base = o.Hosts, o
		return func() {}, nil
	}
	so := mongosim.Options{}
	if sharded {
		so.Routers = 2
	}
	sim, err := mongosim.Launch(so)
	if err != nil {
		return func() {}, fmt.Errorf("starting mongosim: %w", err)
	}
	closeSim = func() { sim.Close() }
	base, err := sturdy.ParseURI(sim.URI())
	if err != nil {
		return closeSim, err
	}
	target.hosts, target.base = base.Hosts, base
	if sharded {
		fmt.Fprintf(stderr, "embedded mongosim sharded cluster: mongos routers at %s\n", sim.URI())
	} else {
		fmt.Fprintf(stderr, "embedded mongosim replica set at %s\n", sim.URI())
	}
	return closeSim, nil
}

// demoStrategiesFor returns the strategies the application's client
// can run: the official driver has not the sturdy-only ones.
func demoStrategiesFor(official bool) []strategy {
	if !official {
		return demoStrategies
	}
	var strategies []strategy
	for _, s := range demoStrategies {
		if !s.sturdyOnly {
			strategies = append(strategies, s)
		}
	}
	return strategies
}

// demoTarget is the deployment under test and how to reach it.
type demoTarget struct {
	hosts    []string
	base     sturdy.Options // options of the deployment's own URI (auth, replica set...)
	proxyURI string
	db       string // the cell's database
	official bool   // the application uses the official driver
}

// client connects through the fault proxy with the strategy's retry
// configuration, counting the update commands it sends.
func (t *demoTarget) client(ctx context.Context, kind clientKind, attempts *atomic.Int64) (*sturdy.Client, error) {
	o, err := sturdy.ParseURI(t.proxyURI)
	if err != nil {
		return nil, err
	}
	o.Auth = t.base.Auth
	o.AppName = "sturdy-demo"
	o.ServerSelectionTimeout = 5 * time.Second
	o.HeartbeatInterval = 500 * time.Millisecond
	off, zero := false, 0
	switch kind {
	case appRetriesOnly:
		o.RetryWrites, o.MaxAdaptiveRetries = &off, &zero
	case retryableWrites:
		o.MaxAdaptiveRetries = &zero
	}
	o.Monitor = &event.Monitor{CommandStarted: func(_ context.Context, e *event.CommandStartedEvent) {
		if e.CommandName == "update" {
			attempts.Add(1)
		}
	}}
	return sturdy.ConnectWithOptions(ctx, o)
}

// officialClient is client's counterpart for the official driver: the
// same proxy, retryable writes on unless the application retries alone.
// The official driver has no option to turn off its other retries.
func (t *demoTarget) officialClient(kind clientKind, attempts *atomic.Int64) (*mongo.Client, error) {
	o := options.Client().ApplyURI(t.proxyURI).SetAppName("sturdy-demo").
		SetServerSelectionTimeout(5 * time.Second).SetRetryWrites(kind != appRetriesOnly).
		SetMonitor(&mevent.CommandMonitor{Started: func(_ context.Context, e *mevent.CommandStartedEvent) {
			if e.CommandName == "update" {
				attempts.Add(1)
			}
		}})
	if a := t.base.Auth; a != nil {
		o.SetAuth(options.Credential{AuthMechanism: a.Mechanism, AuthSource: a.Source, Username: a.Username, Password: a.Password, PasswordSet: a.PasswordSet})
	}
	return mongo.Connect(o)
}

// appCollection connects the strategy's application client and returns
// its collection and a function that disconnects it.
func (t *demoTarget) appCollection(ctx context.Context, kind clientKind, attempts *atomic.Int64) (adapt.Collection, func(), error) {
	if t.official {
		app, err := t.officialClient(kind, attempts)
		if err != nil {
			return nil, nil, err
		}
		if err := app.Ping(ctx, nil); err != nil {
			app.Disconnect(context.Background())
			return nil, nil, err
		}
		return mongov2.Collection(app.Database(t.db).Collection(demoColl)), func() { app.Disconnect(context.Background()) }, nil
	}
	app, err := t.client(ctx, kind, attempts)
	if err != nil {
		return nil, nil, err
	}
	if err := app.Ping(ctx); err != nil {
		app.Disconnect(context.Background())
		return nil, nil, err
	}
	return app.Database(t.db).Collection(demoColl), func() { app.Disconnect(context.Background()) }, nil
}

// runCells runs every (fault, strategy) cell. The faults run at the same
// time, each behind its own fault proxy and in its own database, so one
// fault's rules never reach another's operations; within a fault the
// strategies run one after the other, as the fault placement is per cell.
// A progress line tells which cells are done.
func runCells(ctx context.Context, target demoTarget, admin *sturdy.Client, strategies []strategy, ops int, seed uint64, stderr io.Writer) ([]cellResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cells := make([][]cellResult, len(demoFaults))
	errs := make([]error, len(demoFaults))
	var (
		mu   sync.Mutex
		done int
		wg   sync.WaitGroup
	)
	total := len(demoFaults) * len(strategies)
	tty := isTerminal(stderr) // a progress line on a terminal; logs get none
	progress := func(f faultKind, s strategy) {
		if !tty {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		done++
		fmt.Fprintf(stderr, "\r%s %d/%d cells (last: %s / %s)%-20s", progressBar(done, total), done, total, f.name, s.name, "")
	}
	for fi, f := range demoFaults {
		wg.Add(1)
		go func() {
			defer wg.Done()
			proxy, err := faultproxy.Start(ctx, faultproxy.Options{Upstreams: target.hosts})
			if err != nil {
				errs[fi] = fmt.Errorf("starting the fault proxy: %w", err)
				cancel()
				return
			}
			defer proxy.Close()
			t := target
			t.proxyURI, t.db = proxy.URI(), demoDB+"_"+f.name
			for _, s := range strategies {
				res, err := runCell(ctx, &t, proxy, admin, f, s, ops, seed)
				if err != nil {
					errs[fi] = fmt.Errorf("%s / %s: %w", f.name, s.name, err)
					cancel()
					return
				}
				cells[fi] = append(cells[fi], res)
				progress(f, s)
			}
		}()
	}
	wg.Wait()
	if tty {
		fmt.Fprintf(stderr, "\r%-100s\r", "")
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var results []cellResult
	for _, c := range cells {
		results = append(results, c...)
	}
	return results, nil
}

func runCell(ctx context.Context, t *demoTarget, proxy *faultproxy.Proxy, admin *sturdy.Client, f faultKind, s strategy, n int, seed uint64) (cellResult, error) {
	res := cellResult{Fault: f.name, Strategy: s.name, Expected: n}
	coll := admin.Database(t.db).Collection(demoColl)
	if _, err := coll.DeleteMany(ctx, bson.D{}); err != nil {
		return res, err
	}
	var attempts atomic.Int64
	appColl, disconnect, err := t.appCollection(ctx, s.client, &attempts)
	if err != nil {
		return res, err
	}
	defer disconnect()
	env := &cellEnv{coll: appColl, once: once.New(appColl)}
	rng := mrand.New(mrand.NewPCG(seed, uint64(len(f.name))))
	start := time.Now()
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		rules := f.rules(i, n, rng, s.twoStep || s.txn)
		if s.txn {
			for j := range rules {
				rules[j].Match.Commands = []string{"update", "commitTransaction"}
			}
		}
		if err := proxy.SetRules(rules); err != nil {
			return res, err
		}
		timeout := cmp.Or(s.opTimeout, 10*time.Second)
		if s.opTimeout > 0 && f.waitCap > 0 {
			timeout = min(timeout, f.waitCap)
		}
		opCtx, cancel := context.WithTimeout(ctx, timeout)
		err := s.run(opCtx, env, i)
		cancel()
		if err != nil {
			res.Errors++
		}
	}
	if err := proxy.SetRules(nil); err != nil {
		return res, err
	}
	if s.twoStep {
		// The article's clean-up pass: fold tokens whose second step never
		// completed. Nothing runs concurrently now, as the article requires.
		if _, err := once.New(coll).Reconcile(ctx); err != nil {
			return res, fmt.Errorf("reconcile: %w", err)
		}
	}
	res.Seconds = time.Since(start).Seconds()
	res.Attempts = attempts.Load()

	var found struct {
		Counter int64            `bson:"counter"`
		Ops     map[string]int64 `bson:"ops"`
	}
	err = coll.FindOne(ctx, bson.D{{Key: "_id", Value: demoDay}}).Decode(&found)
	if err != nil && !errors.Is(err, sturdy.ErrNoDocuments) {
		return res, fmt.Errorf("reading the counter: %w", err)
	}
	res.Counted = found.Counter
	for i := 0; i < n; i++ {
		switch k := found.Ops[strconv.Itoa(i)]; {
		case k == 0:
			res.Lost++
		case k > 1:
			res.Duplicated += int(k - 1)
		}
	}
	return res, nil
}

func printDemoTable(w io.Writer, results []cellResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "fault\tstrategy\texpected\tcounted\tlost\tduplicated\terrors\tattempts\ttime\t")
	last := ""
	for _, r := range results {
		fault := r.Fault
		if fault == last {
			fault = ""
		}
		last = r.Fault
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%.0fms\t\n", fault, r.Strategy, r.Expected, r.Counted, r.Lost, r.Duplicated, r.Errors, r.Attempts, r.Seconds*1000)
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, f := range demoFaults {
		fmt.Fprintf(w, "  %-14s %s\n", f.name, f.desc)
	}
	fmt.Fprintln(w, "\n  lost: increments never applied; duplicated: extra applications; errors: operations that reported failure to the application;")
	fmt.Fprintln(w, "  attempts: update commands sent. The demo shortens the driver's 500 ms minimum between server checks to 5 ms;")
	fmt.Fprintln(w, "  a real application waits up to 500 ms to rediscover a server after each network error.")
}

// isTerminal reports whether w is a character device, where a progress bar
// redrawn with carriage returns reads well.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func progressBar(done, total int) string {
	const width = 20
	filled := done * width / total
	return "[" + strings.Repeat("#", filled) + strings.Repeat(".", width-filled) + "]"
}
