package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/mongosim"
)

// sturdy bench faults: failed operations per injected fault. Goroutines run $inc
// upserts against a mongosim replica set while a fail point injects a fault
// into a fraction of the writes; each client runs the same workload in turn
// against the same deployment, with its default options, and the table
// counts the operations that failed per injected fault.

// faultsResult is one client's row.
type faultsResult struct {
	Client           string  `json:"client"`
	Ops              int64   `json:"ops"` // operations finished (succeeded or failed)
	Failures         int64   `json:"failures"`
	Faults           int64   `json:"faults"` // fail point activations during the client's run
	FailuresPerFault float64 `json:"failures_per_fault"`
	OpsPerS          float64 `json:"ops_per_s"` // successful operations per second (goodput)
	P50ms            float64 `json:"p50_ms"`
	P99ms            float64 `json:"p99_ms"`
	// Applied is the sum of the counters after the run: every success
	// applied exactly once, and a failure at most once, means
	// ops-failures ≤ applied ≤ ops.
	Applied int64 `json:"applied"`
	// Errors counts the failures by kind, for the curious reader.
	Errors map[string]int64 `json:"errors,omitempty"`
	// Timeline is the run second by second, for the HTML page.
	Timeline []faultsSecond `json:"timeline,omitempty"`
}

// appliedCheck is "ok" when the counters' sum fits the operations: no
// success lost, no increment applied twice; "WRONG" otherwise.
func (r faultsResult) appliedCheck() string {
	if r.Applied < r.Ops-r.Failures || r.Applied > r.Ops {
		return "WRONG"
	}
	return "ok"
}

// settleTimeline gives the last second of the timeline the activations
// counted after the run ended: the server counts a fault after closing the
// connection, so the client can finish its operation before the count.
func (r *faultsResult) settleTimeline() {
	n := len(r.Timeline)
	if n == 0 {
		return
	}
	var sum int64
	for _, s := range r.Timeline {
		sum += s.Faults
	}
	r.Timeline[n-1].Faults += r.Faults - sum
}

// faultsSecond is one second of a client's run.
type faultsSecond struct {
	Succeeded int64   `json:"succeeded"`
	Failed    int64   `json:"failed"`
	Faults    int64   `json:"faults"` // fail point activations in this second
	P99ms     float64 `json:"p99_ms"`
}

// incClient runs one $inc upsert; both clients run with their defaults.
type incClient interface {
	inc(ctx context.Context, key int) error
	// total sums the counters the client incremented.
	total(ctx context.Context) (int64, error)
	close(ctx context.Context)
}

// benchVerbose prints every failure (STURDY_BENCH_VERBOSE=1).
var benchVerbose = os.Getenv("STURDY_BENCH_VERBOSE") != ""

var faultClients = []string{"sturdy", "official"}

func runBenchFaults(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sturdy bench faults", flag.ContinueOnError)
	fault := fs.String("fault", "reply-lost", "fault kind: reply-lost (onPrimaryTransactionalWrite closeConnection: "+
		"applied, reply lost), close-before (failCommand closeConnection: not applied), error:CODE (failCommand errorCode)")
	rate := fs.Float64("rate", 0.1, "fraction of writes that meet the fault (activationProbability)")
	members := fs.Int("members", 3, "replica-set members")
	goroutines := fs.Int("goroutines", 16, "concurrent goroutines per client")
	duration := fs.Duration("duration", 20*time.Second, "run time per client")
	keys := fs.Int("keys", 64, "distinct documents the $inc upserts spread over")
	seed := fs.Int64("seed", 1, "fail point seed (mongosim Options.Seed)")
	clientsFlag := fs.String("clients", strings.Join(faultClients, ","), "clients to run, in order")
	jsonOut := fs.String("json", "", "also write the results as JSON to this file")
	htmlOut := fs.String("html", "", "also write failures per fault, goodput and latency over time against the faults as HTML to this file")
	timeout := fs.Duration("timeout", 0, "timeoutMS for both clients (URI option); 0: none, the clients' legacy retry rules")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	clients, err := parseClients(*clientsFlag, faultClients, stderr)
	if err != nil {
		return err
	}
	fp, err := faultFailPoint(*fault, *rate)
	if err != nil {
		fmt.Fprintf(stderr, "-fault: %v\n", err)
		return errUsage
	}
	if *members <= 0 || *goroutines <= 0 || *duration <= 0 || *keys <= 0 || *rate < 0 || *rate > 1 || *timeout < 0 ||
		*timeout > 0 && *timeout < time.Millisecond {
		fmt.Fprintln(stderr, "-members, -goroutines, -duration and -keys must be positive, -rate in [0, 1], -timeout 0 or at least 1ms")
		return errUsage
	}

	sim, err := mongosim.Launch(mongosim.Options{Members: *members, Seed: *seed})
	if err != nil {
		return err
	}
	defer sim.Close()
	uri := sim.URI()
	opts := "both clients use their default options (no heartbeat or timeout is shortened)"
	if *timeout > 0 {
		uri = withURIOption(uri, "timeoutMS", strconv.FormatInt(timeout.Milliseconds(), 10))
		opts = fmt.Sprintf("both clients use timeoutMS=%d, otherwise their default options", timeout.Milliseconds())
	}
	fmt.Fprintf(stderr, "faults: %s at rate %g, %d members, %d goroutines, %v per client; %s\n",
		*fault, *rate, *members, *goroutines, *duration, opts)

	var results []faultsResult
	for _, name := range clients {
		res, err := runFaultsClient(ctx, sim, fp, name, uri, *goroutines, *keys, *duration, stderr)
		if err != nil {
			return err
		}
		results = append(results, res)
	}
	printFaultsTable(stdout, results, *fault, *rate, *duration)
	if err := writeJSON(*jsonOut, results); err != nil {
		return err
	}
	return writeHTMLFile(*htmlOut, func(w io.Writer) error {
		return writeFaultsHTML(w, results, faultsRun{Fault: *fault, Rate: *rate, Duration: *duration, Goroutines: *goroutines, Options: opts})
	})
}

// runFaultsClient runs one client's $inc workload with the fail point
// fp on, then counts what the server applied.
func runFaultsClient(ctx context.Context, sim *mongosim.Cluster, fp bson.D, name, uri string,
	goroutines, keys int, duration time.Duration, stderr io.Writer) (faultsResult, error) {
	off := bson.D{{Key: "configureFailPoint", Value: fp[0].Value}, {Key: "mode", Value: "off"}}
	if err := sim.SetFailPoint(off); err != nil {
		return faultsResult{}, err
	}
	c, err := newIncClient(ctx, name, uri, "c_"+name)
	if err != nil {
		return faultsResult{}, fmt.Errorf("%s: %w", name, err)
	}
	before := sim.Stats().FailPointsFired
	if err := sim.SetFailPoint(fp); err != nil {
		c.close(ctx)
		return faultsResult{}, err
	}
	fmt.Fprintf(stderr, "faults: running %s\n", name)
	res := runIncWorkload(ctx, c, goroutines, keys, duration, func() int64 { return sim.Stats().FailPointsFired })
	if err := sim.SetFailPoint(off); err != nil {
		c.close(ctx)
		return faultsResult{}, err
	}
	// Counting is not part of the measurement: it gets a minute whatever
	// -timeout says (the official driver takes a context deadline over
	// its timeoutMS, sturdy takes WithTimeout).
	tctx, tcancel := context.WithTimeout(sturdy.WithTimeout(ctx, time.Minute), time.Minute)
	applied, err := c.total(tctx)
	tcancel()
	c.close(ctx)
	if err != nil {
		return faultsResult{}, fmt.Errorf("%s: summing the counters: %w", name, err)
	}
	res.Client, res.Applied = name, applied
	res.Faults = sim.Stats().FailPointsFired - before
	res.settleTimeline()
	if res.Faults > 0 {
		res.FailuresPerFault = float64(res.Failures) / float64(res.Faults)
	}
	return res, nil
}

// faultFailPoint builds the configureFailPoint document for a fault kind.
func faultFailPoint(kind string, rate float64) (bson.D, error) {
	mode := bson.D{{Key: "activationProbability", Value: rate}}
	switch {
	case kind == "reply-lost":
		return bson.D{{Key: "configureFailPoint", Value: "onPrimaryTransactionalWrite"}, {Key: "mode", Value: mode},
			{Key: "data", Value: bson.D{{Key: "closeConnection", Value: true}}}}, nil
	case kind == "close-before":
		return bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: mode},
			{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"update"}}, {Key: "closeConnection", Value: true}}}}, nil
	case strings.HasPrefix(kind, "error:"):
		code, err := strconv.ParseInt(strings.TrimPrefix(kind, "error:"), 10, 32)
		if err != nil || code <= 0 {
			return nil, fmt.Errorf("%q: want error:CODE with a positive code", kind)
		}
		return bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: mode},
			{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"update"}}, {Key: "errorCode", Value: int32(code)}}}}, nil
	}
	return nil, fmt.Errorf("unknown fault %q (have reply-lost, close-before, error:CODE)", kind)
}

// runIncWorkload runs closed-loop $inc upserts from g goroutines for d;
// faultsFired (nil: none) reads the fail point activations so far, sampled
// once a second for the timeline.
func runIncWorkload(ctx context.Context, c incClient, g, keys int, d time.Duration, faultsFired func() int64) faultsResult {
	var (
		res       faultsResult
		mu        sync.Mutex
		latencies []time.Duration
		errs      = map[string]int64{}
		ops, fail atomic.Int64
		wg        sync.WaitGroup
		secs      = newSecondCounter(int(d/time.Second) + 2)
	)
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	faults := startSampler(runCtx, faultsFired)
	for i := 0; i < g; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 1))
			var local []time.Duration
			for runCtx.Err() == nil {
				t0 := time.Now()
				// The operation itself runs under ctx, not runCtx: the end
				// of the run must not count as a failure.
				err := c.inc(ctx, r.IntN(keys))
				ops.Add(1)
				secs.add(time.Since(start), time.Since(t0), err == nil)
				if err != nil {
					if benchVerbose {
						fmt.Fprintf(os.Stderr, "failure after %v: %v\n", time.Since(t0).Round(time.Millisecond), err)
					}
					fail.Add(1)
					mu.Lock()
					errs[errorKind(err)]++
					mu.Unlock()
					continue
				}
				local = append(local, time.Since(t0))
			}
			mu.Lock()
			latencies = append(latencies, local...)
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	elapsed := time.Since(start)
	res.Timeline = secs.timeline(faults.finish())
	res.Ops, res.Failures = ops.Load(), fail.Load()
	res.OpsPerS = float64(len(latencies)) / elapsed.Seconds()
	slices.Sort(latencies)
	res.P50ms, res.P99ms = percentileMS(latencies, 0.50), percentileMS(latencies, 0.99)
	if len(errs) > 0 {
		res.Errors = errs
	}
	return res
}

// errorKind names an error for the breakdown: its code name or type, and
// whether it was a network error.
func errorKind(err error) string {
	var te *sturdy.TimeoutError
	switch {
	case errors.As(err, &te): // timeoutMS ran out; it wraps the last error met
		return "timeout"
	case sturdy.IsNetworkError(err), mongo.IsNetworkError(err):
		return "network error"
	case sturdy.IsTimeout(err), mongo.IsTimeout(err):
		return "timeout"
	}
	var ce *sturdy.CommandError
	if errors.As(err, &ce) {
		return fmt.Sprintf("command error %d", ce.Code)
	}
	var me mongo.CommandError
	if errors.As(err, &me) && me.Code != 0 {
		return fmt.Sprintf("command error %d", me.Code)
	}
	var we mongo.WriteException
	if errors.As(err, &we) && we.WriteConcernError != nil {
		return fmt.Sprintf("write concern error %d", we.WriteConcernError.Code)
	}
	s := err.Error()
	if len(s) > 60 {
		s = s[:60]
	}
	return s
}

func printFaultsTable(w io.Writer, results []faultsResult, fault string, rate float64, d time.Duration) {
	fmt.Fprintf(w, "fault %s on %g of writes, %v per client; failures/fault = failed operations per injected fault; "+
		"goodput = successful operations per second\n\n", fault, rate, d)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "client\tops\tfailures\tfaults\tfailures/fault\tgoodput\tp50\tp99\tapplied\t")
	for _, r := range results {
		check := r.appliedCheck()
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.3f\t%.0f/s\t%.1fms\t%.1fms\t%d (%s)\t\n",
			r.Client, r.Ops, r.Failures, r.Faults, r.FailuresPerFault, r.OpsPerS, r.P50ms, r.P99ms, r.Applied, check)
	}
	tw.Flush()
	for _, r := range results {
		if len(r.Errors) == 0 {
			continue
		}
		kinds := make([]string, 0, len(r.Errors))
		for k := range r.Errors {
			kinds = append(kinds, k)
		}
		sort.Slice(kinds, func(i, j int) bool { return r.Errors[kinds[i]] > r.Errors[kinds[j]] })
		fmt.Fprintf(w, "\n%s failures:", r.Client)
		for _, k := range kinds {
			fmt.Fprintf(w, " %s ×%d;", k, r.Errors[k])
		}
		fmt.Fprintln(w)
	}
}

func parseClients(list string, known []string, stderr io.Writer) ([]string, error) {
	clients := strings.Split(list, ",")
	for _, c := range clients {
		if !slices.Contains(known, c) {
			fmt.Fprintf(stderr, "-clients: unknown client %q (have %s)\n", c, strings.Join(known, ", "))
			return nil, errUsage
		}
	}
	return clients, nil
}

func writeJSON(file string, v any) error {
	if file == "" {
		return nil
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, append(b, '\n'), 0o644)
}

func newIncClient(ctx context.Context, name, uri, coll string) (incClient, error) {
	switch name {
	case "sturdy":
		c, err := sturdy.Connect(ctx, uri)
		if err != nil {
			return nil, err
		}
		if err := c.Ping(ctx); err != nil {
			_ = c.Disconnect(ctx)
			return nil, err
		}
		return &sturdyInc{c: c, coll: c.Database("bench").Collection(coll)}, nil
	case "official":
		c, err := mongo.Connect(options.Client().ApplyURI(uri))
		if err != nil {
			return nil, err
		}
		if err := c.Ping(ctx, nil); err != nil {
			_ = c.Disconnect(ctx)
			return nil, err
		}
		return &officialInc{c: c, coll: c.Database("bench").Collection(coll)}, nil
	}
	return nil, fmt.Errorf("unknown client %q", name)
}

type sturdyInc struct {
	c    *sturdy.Client
	coll *sturdy.Collection
}

func (s *sturdyInc) inc(ctx context.Context, key int) error {
	_, err := s.coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: int32(key)}},
		bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: int32(1)}}}}, &sturdy.UpdateOptions{Upsert: true})
	return err
}

// totalPipeline sums every counter's n.
var totalPipeline = bson.A{bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "n", Value: bson.D{{Key: "$sum", Value: "$n"}}}}}}}

// decodingCursor is what sturdy's and the official driver's cursors share.
type decodingCursor interface {
	Next(ctx context.Context) bool
	Decode(v any) error
	Err() error
	Close(ctx context.Context) error
}

// totalOf reads totalPipeline's answer from cur and closes it.
func totalOf(ctx context.Context, cur decodingCursor) (int64, error) {
	defer cur.Close(ctx)
	var out struct{ N int64 }
	if cur.Next(ctx) {
		if err := cur.Decode(&out); err != nil {
			return 0, err
		}
	}
	return out.N, cur.Err()
}

func (s *sturdyInc) total(ctx context.Context) (int64, error) {
	cur, err := s.coll.Aggregate(ctx, totalPipeline)
	if err != nil {
		return 0, err
	}
	return totalOf(ctx, cur)
}

func (s *sturdyInc) close(ctx context.Context) { _ = s.c.Disconnect(ctx) }

type officialInc struct {
	c    *mongo.Client
	coll *mongo.Collection
}

func (o *officialInc) inc(ctx context.Context, key int) error {
	_, err := o.coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: int32(key)}},
		bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: int32(1)}}}}, options.UpdateOne().SetUpsert(true))
	return err
}

func (o *officialInc) total(ctx context.Context) (int64, error) {
	cur, err := o.coll.Aggregate(ctx, totalPipeline)
	if err != nil {
		return 0, err
	}
	return totalOf(ctx, cur)
}

func (o *officialInc) close(ctx context.Context) { _ = o.c.Disconnect(ctx) }

// withURIOption adds key=value to a connection string's options.
func withURIOption(uri, key, value string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return uri // sim.URI() is well formed
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	if u.Path == "" {
		u.Path = "/"
	}
	return u.String()
}
