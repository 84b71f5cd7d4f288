package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
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
	"github.com/sturdy-go/sturdy/event"
	"github.com/sturdy-go/sturdy/mongosim"
)

// sturdy bench overload measures what retries do to an overloaded server:
// mongosim's ingress limiter admits C requests per second, and each client
// offers a multiple of C for a fixed time. The official driver is here as
// the peer we measure against (benchmarks may use it; the library never does).

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "overload":
			return runBenchOverload(ctx, args[1:], stdout, stderr)
		case "faults":
			return runBenchFaults(ctx, args[1:], stdout, stderr)
		case "failover":
			return runBenchFailover(ctx, args[1:], stdout, stderr)
		case "connect":
			return runBenchConnect(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintln(stderr, "usage: sturdy bench overload|faults|failover|connect [flags]")
	return errUsage
}

// benchClient issues one logical insert; attempts are counted by command
// monitoring (or by the naive loop itself).
type benchClient interface {
	insert(ctx context.Context, doc bson.D) error
	close(ctx context.Context)
}

type overloadResult struct {
	Client        string  `json:"client"`
	Load          int     `json:"load"` // multiple of capacity
	Offered       int64   `json:"offered"`
	Started       int64   `json:"started"` // offered operations the client had room to start
	Succeeded     int64   `json:"succeeded"`
	Failed        int64   `json:"failed"`
	Attempts      int64   `json:"attempts"`
	Goodput       float64 `json:"goodput"`       // successes per second
	Amplification float64 `json:"amplification"` // attempts per operation started: the retry amplification
	PerSuccess    float64 `json:"attempts_per_success"`
	P50ms         float64 `json:"p50_ms"`
	P99ms         float64 `json:"p99_ms"`
}

var benchClients = []string{"no-retries", "naive-5x", "official", "sturdy"}

func runBenchOverload(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sturdy bench overload", flag.ContinueOnError)
	capacity := fs.Int("capacity", 500, "requests per second the server admits (C)")
	duration := fs.Duration("duration", 3*time.Second, "offered-load time per cell")
	loadsFlag := fs.String("loads", "1,2,4,8", "offered loads as multiples of C")
	clientsFlag := fs.String("clients", strings.Join(benchClients, ","), "clients to run")
	opTimeout := fs.Duration("op-timeout", 2*time.Second, "deadline of each operation")
	jsonOut := fs.String("json", "", "also write the results as JSON to this file")
	spike := fs.Bool("spike", false, "instead of steady loads: offered -base×C, a spike of -spike-load×C for -spike-for, then -base×C for -after; report recovery time")
	spikeLoad := fs.Float64("spike-load", 8, "with -spike: the offered load during the spike, as a multiple of C")
	spikeFor := fs.Duration("spike-for", 3*time.Second, "with -spike: how long the spike lasts")
	base := fs.Float64("base", 0.8, "with -spike: the offered load outside the spike, as a multiple of C")
	before := fs.Duration("before", 2*time.Second, "with -spike: time at the base load before the spike")
	after := fs.Duration("after", 8*time.Second, "with -spike: time at the base load after the spike")
	rejectCost := fs.Float64("reject-cost", 0.25, "with -spike: capacity each rejection costs the server, as a fraction of an admitted request (mongosim RejectCost)")
	htmlOut := fs.String("html", "", "with -spike: also write goodput-over-time charts as HTML to this file")
	routers := fs.Int("routers", 0, "run a sharded mongosim with this many mongos routers (at least 2): the first admits -capacity req/s, the others are healthy; clients default to official,sturdy, loads to 2,4,8 and -capacity to 100")
	healthyCap := fs.Int("healthy-capacity", 0, "with -routers: req/s each healthy router admits (0: unlimited)")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if *routers != 0 {
		if err := applyRoutersDefaults(fs, routersFlags{routers: *routers, healthyCap: *healthyCap, spike: *spike,
			clients: clientsFlag, loads: loadsFlag, capacity: capacity}, stderr); err != nil {
			return err
		}
	}
	loads, err := parseLoads(*loadsFlag, stderr)
	if err != nil {
		return err
	}
	clients, err := parseClients(*clientsFlag, benchClients, stderr)
	if err != nil {
		return err
	}
	if *capacity <= 0 || *duration <= 0 {
		fmt.Fprintln(stderr, "-capacity and -duration must be positive")
		return errUsage
	}

	if *routers != 0 {
		return runRoutersOverload(ctx, routersBench{routers: *routers, capacity: *capacity, healthyCapacity: *healthyCap,
			loads: loads, clients: clients, duration: *duration, opTimeout: *opTimeout, jsonOut: *jsonOut}, stdout, stderr)
	}
	sim, err := mongosim.Launch(mongosim.Options{})
	if err != nil {
		return err
	}
	defer sim.Close()
	if slices.Contains(clients, "official") {
		fmt.Fprintln(stderr, "overload: the official driver runs with heartbeatFrequencyMS=500 (default 10000); every other option is the default")
	}
	if *spike {
		if *spikeLoad <= 0 || *spikeFor <= 0 || *base <= 0 || *before < 0 || *after <= 0 || *rejectCost < 0 {
			fmt.Fprintln(stderr, "-spike-load, -spike-for, -base and -after must be positive, -before and -reject-cost not negative")
			return errUsage
		}
		p := spikeProfile{Base: *base, Spike: *spikeLoad, Before: *before, For: *spikeFor, After: *after, Capacity: *capacity,
			Bucket: 250 * time.Millisecond, OpTimeout: *opTimeout, RecoveredAt: 0.9, Window: 1}
		return runSpike(ctx, sim, clients, p, *rejectCost, stdout, stderr, *jsonOut, *htmlOut)
	}
	return runSteadyOverload(ctx, sim, clients, loads, *capacity, *duration, *opTimeout, *jsonOut, stdout, stderr)
}

// routersFlags are the flags -routers changes the defaults of or
// checks.
type routersFlags struct {
	routers, healthyCap int
	spike               bool
	clients, loads      *string
	capacity            *int
}

// applyRoutersDefaults gives the flags the user did not set their
// -routers defaults and checks the ones -routers needs.
func applyRoutersDefaults(fs *flag.FlagSet, f routersFlags, stderr io.Writer) error {
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if !set["clients"] {
		*f.clients = "official,sturdy"
	}
	if !set["loads"] {
		*f.loads = "2,4,8"
	}
	if !set["capacity"] {
		// Two clients' full load goes through one process: a
		// lower C keeps the machine, not the clients, out of
		// the measurement.
		*f.capacity = 100
	}
	if f.routers < 2 || f.spike || f.healthyCap < 0 {
		fmt.Fprintln(stderr, "-routers needs at least 2 routers (one overloaded, one healthy), a non-negative -healthy-capacity, and no -spike")
		return errUsage
	}
	return nil
}

// parseLoads reads -loads: positive multiples of C, comma-separated.
func parseLoads(list string, stderr io.Writer) ([]int, error) {
	var loads []int
	for _, s := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			fmt.Fprintf(stderr, "-loads: %q is not a positive integer\n", s)
			return nil, errUsage
		}
		loads = append(loads, n)
	}
	return loads, nil
}

// runSteadyOverload offers each load to each client in turn, the
// server admitting capacity req/s, and prints the table.
func runSteadyOverload(ctx context.Context, sim *mongosim.Cluster, clients []string, loads []int, capacity int,
	duration, opTimeout time.Duration, jsonOut string, stdout, stderr io.Writer) error {
	limiter := mongosim.LimiterOptions{RequestsPerSecond: float64(capacity), Burst: max(1, capacity/20)}

	var results []overloadResult
	for _, load := range loads {
		for _, name := range clients {
			fmt.Fprintf(stderr, "overload %dx C=%d: %s\n", load, capacity, name)
			sim.SetLimiter(mongosim.LimiterOptions{}) // no limit while connecting
			var attempts atomic.Int64
			c, err := newBenchClient(ctx, name, sim.URI(), &attempts)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			sim.SetLimiter(limiter)
			res := offerLoad(ctx, c, load, capacity, duration, opTimeout)
			c.close(ctx)
			res.Client, res.Load, res.Attempts = name, load, attempts.Load()
			if res.Started > 0 {
				res.Amplification = float64(res.Attempts) / float64(res.Started)
			}
			if res.Succeeded > 0 {
				res.PerSuccess = float64(res.Attempts) / float64(res.Succeeded)
			}
			results = append(results, res)
		}
	}
	printOverloadTable(stdout, results, capacity, duration)
	return writeJSON(jsonOut, results)
}

// offerLoad starts load×capacity inserts per second, open loop, for d.
func offerLoad(ctx context.Context, c benchClient, load, capacity int, d, opTimeout time.Duration) overloadResult {
	var (
		res       overloadResult
		mu        sync.Mutex
		latencies []time.Duration
		wg        sync.WaitGroup
		succeeded atomic.Int64
		failed    atomic.Int64
	)
	rate := load * capacity
	interval := time.Second / time.Duration(rate)
	inflight := make(chan struct{}, 4096)
	start := time.Now()
	for i := 0; ; i++ {
		next := start.Add(time.Duration(i) * interval)
		if next.Sub(start) >= d || ctx.Err() != nil {
			break
		}
		if wait := time.Until(next); wait > 0 {
			time.Sleep(wait)
		}
		res.Offered++
		select {
		case inflight <- struct{}{}:
		default:
			failed.Add(1) // the client is saturated: the operation never starts
			continue
		}
		res.Started++
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-inflight }()
			opCtx, cancel := context.WithTimeout(ctx, opTimeout)
			defer cancel()
			t0 := time.Now()
			err := c.insert(opCtx, bson.D{{Key: "_id", Value: bson.NewObjectID()}, {Key: "i", Value: int32(i)}})
			if err != nil {
				failed.Add(1)
				return
			}
			succeeded.Add(1)
			mu.Lock()
			latencies = append(latencies, time.Since(t0))
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	elapsed := time.Since(start)
	res.Succeeded, res.Failed = succeeded.Load(), failed.Load()
	res.Goodput = float64(res.Succeeded) / elapsed.Seconds()
	slices.Sort(latencies)
	res.P50ms = percentileMS(latencies, 0.50)
	res.P99ms = percentileMS(latencies, 0.99)
	return res
}

func percentileMS(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p * float64(len(sorted)-1))
	return float64(sorted[i].Microseconds()) / 1000
}

func printOverloadTable(w io.Writer, results []overloadResult, capacity int, d time.Duration) {
	fmt.Fprintf(w, "capacity C = %d req/s, %v per cell; goodput = successful inserts per second;\n", capacity, d)
	fmt.Fprintf(w, "attempts/op = insert commands sent per operation started (retry amplification); errors = operations that failed\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "load\tclient\tgoodput\tof C\tattempts/op\tattempts/success\tp50\tp99\terrors\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%dx\t%s\t%.0f/s\t%.0f%%\t%.2f\t%.2f\t%.1fms\t%.1fms\t%d\t\n",
			r.Load, r.Client, r.Goodput, 100*r.Goodput/float64(capacity), r.Amplification, r.PerSuccess, r.P50ms, r.P99ms, r.Failed)
	}
	tw.Flush()
}

func newBenchClient(ctx context.Context, name, uri string, attempts *atomic.Int64) (benchClient, error) {
	switch name {
	case "official":
		return newOfficialClient(ctx, uri, attempts)
	case "sturdy":
		return newSturdyClient(ctx, uri, attempts, false, 0)
	case "no-retries":
		return newSturdyClient(ctx, uri, attempts, true, 0)
	case "naive-5x":
		return newSturdyClient(ctx, uri, attempts, true, 5)
	}
	return nil, fmt.Errorf("unknown client %q", name)
}

// sturdyClient is the sturdy client; with noRetries its own retries are off,
// and naive > 0 makes the application retry immediately up to naive times.
type sturdyClient struct {
	c     *sturdy.Client
	coll  *sturdy.Collection
	naive int
}

func newSturdyClient(ctx context.Context, uri string, attempts *atomic.Int64, noRetries bool, naive int) (*sturdyClient, error) {
	o, err := sturdy.ParseURI(uri)
	if err != nil {
		return nil, err
	}
	o.Monitor = &event.Monitor{CommandStarted: func(_ context.Context, e *event.CommandStartedEvent) {
		if e.CommandName == "insert" {
			attempts.Add(1)
		}
	}}
	if noRetries {
		off, zero := false, 0
		o.RetryWrites, o.RetryReads, o.MaxAdaptiveRetries = &off, &off, &zero
	}
	c, err := sturdy.ConnectWithOptions(ctx, o)
	if err != nil {
		return nil, err
	}
	if err := c.Ping(ctx); err != nil {
		c.Disconnect(ctx)
		return nil, err
	}
	return &sturdyClient{c: c, coll: c.Database("bench").Collection("overload"), naive: naive}, nil
}

func (s *sturdyClient) insert(ctx context.Context, doc bson.D) error {
	_, err := s.coll.InsertOne(ctx, doc)
	for i := 0; i < s.naive && err != nil && ctx.Err() == nil; i++ {
		_, err = s.coll.InsertOne(ctx, doc)
		if sturdy.IsDuplicateKey(err) {
			return nil // an earlier attempt landed after all
		}
	}
	return err
}

func (s *sturdyClient) close(ctx context.Context) { _ = s.c.Disconnect(ctx) }

type officialClient struct {
	c    *mongo.Client
	coll *mongo.Collection
}

func newOfficialClient(ctx context.Context, uri string, attempts *atomic.Int64) (*officialClient, error) {
	mon := &mevent.CommandMonitor{Started: func(_ context.Context, e *mevent.CommandStartedEvent) {
		if e.CommandName == "insert" {
			attempts.Add(1)
		}
	}}
	c, err := mongo.Connect(options.Client().ApplyURI(uri).SetMonitor(mon).SetHeartbeatInterval(500 * time.Millisecond))
	if err != nil {
		return nil, err
	}
	if err := c.Ping(ctx, nil); err != nil {
		_ = c.Disconnect(ctx)
		return nil, err
	}
	return &officialClient{c: c, coll: c.Database("bench").Collection("overload")}, nil
}

func (o *officialClient) insert(ctx context.Context, doc bson.D) error {
	_, err := o.coll.InsertOne(ctx, doc)
	return err
}

func (o *officialClient) close(ctx context.Context) { _ = o.c.Disconnect(ctx) }
