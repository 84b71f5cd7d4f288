package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/mongosim"
)

// sturdy bench failover: goroutines write steadily to a mongosim replica
// set whose primary steps down (replSetStepDown) every few seconds. For each step-down the
// write-unavailability window is the time from the step-down (its reply)
// to the first success of a write started after it (which the new primary
// served). By default the clients run at the same time against the same
// step-downs, each on a collection of its own, so that every window of one
// client has a window of the other from the same election and the load of
// the (shared) machine falls on both alike; -sequential runs them one after
// the other instead. Each client uses its default options.

type failoverResult struct {
	Client           string  `json:"client"`
	StepDowns        int     `json:"stepdowns"`
	UnavailableP50ms float64 `json:"unavailable_ms_p50"`
	UnavailableP90ms float64 `json:"unavailable_ms_p90"`
	UnavailableMaxms float64 `json:"unavailable_ms_max"`
	FailedOps        int64   `json:"failed_ops"`
	Ops              int64   `json:"ops"`
	P99ms            float64 `json:"p99_ms"`
	// Windows are the windows in ms, one per step-down in order (with the
	// clients run together, the same step-downs for every client).
	Windows []float64 `json:"unavailable_ms"`
	// Errors counts the failures by kind.
	Errors map[string]int64 `json:"errors,omitempty"`
}

func runBenchFailover(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sturdy bench failover", flag.ContinueOnError)
	members := fs.Int("members", 3, "replica-set members")
	goroutines := fs.Int("goroutines", 8, "concurrent writing goroutines per client")
	duration := fs.Duration("duration", 20*time.Second, "run time per client")
	every := fs.Duration("every", 2*time.Second, "time between step-downs")
	keys := fs.Int("keys", 64, "distinct documents the $inc upserts spread over")
	fault := fs.String("fault", "", "also inject this fault (as in bench faults: reply-lost, close-before, error:CODE); none by default")
	rate := fs.Float64("rate", 0.1, "with -fault, the fraction of writes that meet it")
	clientsFlag := fs.String("clients", strings.Join(faultClients, ","), "clients to run")
	sequential := fs.Bool("sequential", false, "run the clients one after the other (each for -duration) instead of at the same time against the same step-downs")
	jsonOut := fs.String("json", "", "also write the results as JSON to this file")
	htmlOut := fs.String("html", "", "also write each step-down's unavailability window, per client side by side, as HTML to this file")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	clients, err := parseClients(*clientsFlag, faultClients, stderr)
	if err != nil {
		return err
	}
	if *members < 2 || *goroutines <= 0 || *duration <= 0 || *every <= 0 || *keys <= 0 {
		fmt.Fprintln(stderr, "-members must be at least 2; -goroutines, -duration, -every and -keys positive")
		return errUsage
	}
	var fp bson.D
	if *fault != "" {
		if fp, err = faultFailPoint(*fault, *rate); err != nil {
			fmt.Fprintf(stderr, "-fault: %v\n", err)
			return errUsage
		}
	}
	sim, err := mongosim.Launch(mongosim.Options{Members: *members})
	if err != nil {
		return err
	}
	defer sim.Close()
	if fp != nil {
		if err := sim.SetFailPoint(fp); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "failover: with fault %s at rate %g\n", *fault, *rate)
	}
	mode := "the clients at the same time, against the same step-downs"
	if *sequential {
		mode = "one client after the other"
	}
	fmt.Fprintf(stderr, "failover: %d members, %d goroutines per client, a step-down every %v, %v, %s; "+
		"every client uses its default options (no heartbeat or timeout is shortened)\n",
		*members, *goroutines, *every, *duration, mode)

	stepDown, closeAdmins, err := primaryStepDowner(ctx, sim)
	defer closeAdmins()
	if err != nil {
		return err
	}
	results, err := runFailoverGroups(ctx, sim.URI(), stepDown, clients, *sequential,
		failoverLoad{goroutines: *goroutines, keys: *keys, duration: *duration, every: *every}, stderr)
	if err != nil {
		return err
	}
	printFailoverTable(stdout, results, *every, *duration, *sequential)
	if err := writeJSON(*jsonOut, results); err != nil {
		return err
	}
	return writeHTMLFile(*htmlOut, func(w io.Writer) error {
		return writeFailoverHTML(w, results, failoverRun{Every: *every, Duration: *duration, Sequential: *sequential, Fault: *fault, Rate: *rate})
	})
}

// primaryStepDowner returns a function that steps the current primary
// down, and the function that closes the connections it uses; the
// closer is to be called even when err is not nil.
func primaryStepDowner(ctx context.Context, sim *mongosim.Cluster) (stepDown func(context.Context) error, closeAll func(), err error) {
	// replSetStepDown goes to the primary over a direct connection of its
	// own, as an operator's shell would send it; not through a measured client.
	admins := map[string]*sturdy.Client{}
	closeAll = func() {
		for _, c := range admins {
			c.Disconnect(context.Background())
		}
	}
	for _, m := range sim.Members() {
		c, err := sturdy.Connect(ctx, m.URI())
		if err != nil {
			return nil, closeAll, err
		}
		admins[m.Addr()] = c
	}
	stepDown = func(ctx context.Context) error {
		p := sim.Primary()
		if p == nil {
			return errors.New("no primary to step down")
		}
		_, err := admins[p.Addr()].Database("admin").RunCommand(ctx,
			// A 1 s step-down period, as mongod keeps the member from
			// being re-elected for it: longer periods would leave the set
			// without an eligible member after a few step-downs.
			bson.D{{Key: "replSetStepDown", Value: int32(1)}, {Key: "secondaryCatchUpPeriodSecs", Value: int32(0)}})
		return err
	}
	return stepDown, closeAll, nil
}

// failoverLoad is the write load and step-down schedule of one run.
type failoverLoad struct {
	goroutines, keys int
	duration, every  time.Duration
}

// runFailoverGroups runs the clients, all at once or (sequential) one
// after the other, each run against its own step-downs.
func runFailoverGroups(ctx context.Context, uri string, stepDown func(context.Context) error, clients []string,
	sequential bool, load failoverLoad, stderr io.Writer) ([]failoverResult, error) {
	var groups [][]string
	if sequential {
		for _, name := range clients {
			groups = append(groups, []string{name})
		}
	} else {
		groups = [][]string{clients}
	}
	var results []failoverResult
	for _, names := range groups {
		var cs []incClient
		closeAll := func() {
			for _, c := range cs {
				c.close(ctx)
			}
		}
		for _, name := range names {
			c, err := newIncClient(ctx, name, uri, "f_"+name)
			if err != nil {
				closeAll()
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			cs = append(cs, c)
		}
		fmt.Fprintf(stderr, "failover: running %s\n", strings.Join(names, " and "))
		res, err := runFailover(ctx, stepDown, cs, load.goroutines, load.keys, load.duration, load.every)
		closeAll()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", strings.Join(names, ", "), err)
		}
		for i := range res {
			res[i].Client = names[i]
		}
		results = append(results, res...)
	}
	return results, nil
}

// opRecord is one finished write.
type opRecord struct {
	start, end time.Time
	ok         bool
}

// clientLoad is what one client's goroutines recorded.
type clientLoad struct {
	mu   sync.Mutex
	recs []opRecord
	errs map[string]int64
}

// runFailover runs g writing goroutines per client, all clients at once,
// while the primary steps down every `every`; it returns one result per
// client, measured against the same step-downs.
func runFailover(ctx context.Context, stepDown func(context.Context) error, cs []incClient, g, keys int, d, every time.Duration) ([]failoverResult, error) {
	loads := make([]*clientLoad, len(cs))
	var wg sync.WaitGroup
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for ci, c := range cs {
		ld := &clientLoad{errs: map[string]int64{}}
		loads[ci] = ld
		for i := 0; i < g; i++ {
			wg.Add(1)
			go func(c incClient, i int) {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(i), 2))
				var local []opRecord
				for runCtx.Err() == nil {
					t0 := time.Now()
					err := c.inc(ctx, r.IntN(keys))
					local = append(local, opRecord{start: t0, end: time.Now(), ok: err == nil})
					if err != nil {
						if benchVerbose {
							fmt.Printf("failure after %v: %v\n", time.Since(t0).Round(time.Millisecond), err)
						}
						ld.mu.Lock()
						ld.errs[errorKind(err)]++
						ld.mu.Unlock()
					}
				}
				ld.mu.Lock()
				ld.recs = append(ld.recs, local...)
				ld.mu.Unlock()
			}(c, i)
		}
	}

	// Step down every `every`, leaving the last interval free of step-downs
	// so the last window can close.
	var downs []time.Time
	var stepErr error
	tick := time.NewTicker(every)
	for stop := false; !stop; {
		select {
		case <-runCtx.Done():
			stop = true
		case <-tick.C:
			if time.Until(deadlineOf(runCtx)) < every/2 {
				continue
			}
			if err := stepDown(ctx); err != nil {
				stepErr = err
				cancel()
				stop = true
				break
			}
			// The step-down is done when its reply arrives: a write started
			// later cannot succeed on the old primary.
			downs = append(downs, time.Now())
		}
	}
	tick.Stop()
	wg.Wait()
	if stepErr != nil {
		return nil, stepErr
	}
	results := make([]failoverResult, len(cs))
	for i, ld := range loads {
		res, err := failoverStats(ld, downs)
		if err != nil {
			return nil, err
		}
		results[i] = res
	}
	return results, nil
}

// failoverStats measures one client's windows: for each step-down, the time
// from its reply to the first end of a successful write started after it.
func failoverStats(ld *clientLoad, downs []time.Time) (failoverResult, error) {
	var res failoverResult
	var lat []time.Duration
	var ok []opRecord
	for _, r := range ld.recs {
		res.Ops++
		if !r.ok {
			res.FailedOps++
			continue
		}
		ok = append(ok, r)
		lat = append(lat, r.end.Sub(r.start))
	}
	slices.Sort(lat)
	res.P99ms = percentileMS(lat, 0.99)
	res.StepDowns = len(downs)
	var windows []time.Duration
	res.Windows = []float64{}
	for _, t := range downs {
		first := time.Time{}
		for _, r := range ok {
			if !r.start.Before(t) && (first.IsZero() || r.end.Before(first)) {
				first = r.end
			}
		}
		if !first.IsZero() {
			windows = append(windows, first.Sub(t))
			res.Windows = append(res.Windows, float64(first.Sub(t).Microseconds())/1000)
		}
	}
	slices.Sort(windows)
	res.UnavailableP50ms = percentileMS(windows, 0.5)
	res.UnavailableP90ms = percentileMS(windows, 0.9)
	if len(windows) > 0 {
		res.UnavailableMaxms = float64(windows[len(windows)-1].Microseconds()) / 1000
	}
	if len(windows) < len(downs) {
		return res, fmt.Errorf("no write succeeded after %d of %d step-downs", len(downs)-len(windows), len(downs))
	}
	if len(ld.errs) > 0 {
		res.Errors = ld.errs
	}
	return res, nil
}

func deadlineOf(ctx context.Context) time.Time {
	dl, _ := ctx.Deadline()
	return dl
}

func printFailoverTable(w io.Writer, results []failoverResult, every, d time.Duration, sequential bool) {
	how := "all clients at the same time, against the same step-downs"
	if sequential {
		how = "per client, one after the other"
	}
	fmt.Fprintf(w, "a step-down every %v for %v, %s; unavailable = step-down → first success of a write started after it\n\n", every, d, how)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "client\tstep-downs\tunavailable p50\tp90\tmax\tops\tfailed ops\tp99\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%.2fms\t%.2fms\t%.2fms\t%d\t%d\t%.1fms\t\n",
			r.Client, r.StepDowns, r.UnavailableP50ms, r.UnavailableP90ms, r.UnavailableMaxms, r.Ops, r.FailedOps, r.P99ms)
	}
	tw.Flush()
	if !sequential && len(results) == 2 {
		printPaired(w, results[0], results[1])
	}
	for _, r := range results {
		if len(r.Errors) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s failures:", r.Client)
		for k, n := range r.Errors {
			fmt.Fprintf(w, " %s ×%d;", k, n)
		}
		fmt.Fprintln(w)
	}
}

// printPaired compares two clients run together step-down by step-down:
// both met the same election and the same load at that moment, so the
// per-step-down difference is a fairer comparison than the two
// distributions, whose tails are set by the machine's stalls.
func printPaired(w io.Writer, a, b failoverResult) {
	n := min(len(a.Windows), len(b.Windows))
	if n == 0 {
		return
	}
	aShorter, bShorter := 0, 0
	diffs := make([]float64, n)
	for i := range n {
		diffs[i] = a.Windows[i] - b.Windows[i]
		switch {
		case diffs[i] < 0:
			aShorter++
		case diffs[i] > 0:
			bShorter++
		}
	}
	slices.Sort(diffs)
	fmt.Fprintf(w, "\nper step-down: %s shorter %d times, %s shorter %d times; %s − %s: median %+.2fms, p10 %+.2fms, p90 %+.2fms\n",
		a.Client, aShorter, b.Client, bShorter, a.Client, b.Client,
		diffs[n/2], diffs[int(0.1*float64(n-1))], diffs[int(0.9*float64(n-1))])
}
