package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sturdy-go/sturdy/mongosim"
	"github.com/sturdy-go/sturdy/soak"
)

// errSoakFailed is returned when the run found lost, duplicated or stuck
// operations, a non-linearizable history or leaked goroutines.
var errSoakFailed = errors.New("the soak found problems (see the table)")

func runSoak(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sturdy soak", flag.ContinueOnError)
	var o soak.Options
	fs.DurationVar(&o.Duration, "duration", time.Minute, "how long the workload runs")
	fs.IntVar(&o.Goroutines, "goroutines", 16, "concurrent goroutines")
	fs.StringVar(&o.Mix, "faults", soak.DefaultMix, "fault mix as kind=weight,... (kinds: reply-lost, request-lost, reset, stepdown, overload, slow, router-restart, commit-lost), or none; with -shards the default is "+soak.ShardedMix)
	seed := fs.Uint64("seed", 1, "seed of the fault schedule, the operation mix and mongosim's fail point draws")
	fs.DurationVar(&o.OpTimeout, "op-timeout", 10*time.Second, "deadline of each operation; one that outlives it is stuck")
	fs.StringVar(&o.URI, "uri", "", "deployment to soak (must allow configureFailPoint and replSetStepDown); default: an embedded mongosim replica set")
	members := fs.Int("members", 3, "members of the embedded mongosim replica set")
	jsonOut := fs.String("json", "", "also write the report as JSON to this file")
	htmlOut := fs.String("html", "", "also write latency and failure timelines against the fault schedule as HTML to this file")
	quiet := fs.Bool("quiet", false, "no live progress line")
	shards := fs.Int("shards", 0, "run an embedded sharded cluster of this many shards (2 or more, each a -members replica set, behind 2 routers) and make every operation a cross-shard transaction")
	fs.BoolVar(&o.Transactions, "transactions", false, "make every operation a transaction writing to two halves of a collection (implied by -shards)")
	driver := fs.String("driver", "sturdy", "sturdy, or official: also run the workload through the official Go driver (after sturdy's run, same seed and fault schedule) and report both side by side")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	drivers, err := soakDrivers(*driver, stderr)
	if err != nil {
		return err
	}
	if o.Duration <= 0 || o.Goroutines <= 0 || o.OpTimeout <= 0 || *members <= 0 {
		fmt.Fprintln(stderr, "-duration, -goroutines, -op-timeout and -members must be positive")
		return errUsage
	}
	if *shards != 0 {
		if *shards < 2 || o.URI != "" {
			fmt.Fprintln(stderr, "-shards needs 2 or more shards, and no -uri")
			return errUsage
		}
		o.Transactions = true
		if !flagSet(fs, "faults") {
			o.Mix = soak.ShardedMix
		}
	}
	if _, err := soak.ParseMix(o.Mix); err != nil {
		fmt.Fprintf(stderr, "-faults: %v\n", err)
		return errUsage
	}
	o.Seed = *seed
	where := o.URI
	if o.URI == "" {
		sim, err := launchSoakSim(&o, *members, *shards, *seed)
		if err != nil {
			return err
		}
		defer sim.Close()
		where = fmt.Sprintf("an embedded %d-member mongosim", *members)
		if *shards > 0 {
			where = fmt.Sprintf("an embedded mongosim of %d shards (%d members each) behind %d routers", *shards, *members, len(o.Routers))
		}
	}
	var reps []*soak.Report
	for _, drv := range drivers {
		fmt.Fprintf(stderr, "soak: %v through %s against %s, %d goroutines, faults %s, seed %d; the client runs with its default options\n",
			o.Duration, drv.Name, where, o.Goroutines, o.Mix, o.Seed)
		if !*quiet {
			o.Progress = func(p soak.Progress) {
				fmt.Fprintf(stderr, "\r%4.0fs  ops %9d  failed %6d  faults %6d  lost %d  goroutines %5d  heap %6.1f MB ",
					p.Elapsed.Seconds(), p.Ops, p.Failed, p.Faults, p.Lost, p.Goroutines, p.HeapMB)
			}
		}
		o.Driver = drv
		rep, err := soak.Run(ctx, o)
		if !*quiet {
			fmt.Fprintln(stderr)
		}
		if err != nil {
			return err
		}
		reps = append(reps, rep)
	}
	return writeSoakReports(stdout, reps, *jsonOut, *htmlOut)
}

// soakDrivers returns the drivers -driver names: sturdy alone, or
// sturdy then the official driver.
func soakDrivers(name string, stderr io.Writer) ([]soak.Driver, error) {
	drivers := []soak.Driver{soak.Sturdy}
	switch name {
	case "sturdy":
	case "official":
		drivers = append(drivers, officialDriver)
	default:
		fmt.Fprintf(stderr, "-driver: %q is neither sturdy nor official\n", name)
		return nil, errUsage
	}
	return drivers, nil
}

// launchSoakSim starts the embedded deployment: a replica set, or shards
// behind two routers, which o's faults then reach (shard step-downs,
// router restarts).
func launchSoakSim(o *soak.Options, members, shards int, seed uint64) (*mongosim.Cluster, error) {
	so := mongosim.Options{Members: members, Seed: int64(seed)}
	if shards > 0 {
		so.Shards, so.Routers = shards, 2
	}
	sim, err := mongosim.Launch(so)
	if err != nil {
		return nil, err
	}
	o.URI = sim.URI()
	if shards == 0 {
		o.FaultsFired = func() int64 { s := sim.Stats(); return s.FailPointsFired + s.StepDowns }
		return sim, nil
	}
	for _, sh := range sim.Shards() {
		o.ShardURIs = append(o.ShardURIs, sh.ReplicaSetURI())
	}
	for _, r := range sim.Routers() {
		o.Routers = append(o.Routers, r)
	}
	return sim, nil
}

// flagSet reports whether the command line set the flag name.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// writeSoakReports prints the runs' reports (side by side for more than
// one), writes their JSON (an array for more than one) and HTML (one file
// per run, the later ones named after their driver: soak.official.html),
// and fails when a run found problems.
func writeSoakReports(stdout io.Writer, reps []*soak.Report, jsonOut, htmlOut string) error {
	if len(reps) == 1 {
		printSoakReport(stdout, reps[0])
		if err := writeJSON(jsonOut, reps[0]); err != nil {
			return err
		}
	} else {
		printSoakComparison(stdout, reps)
		if err := writeJSON(jsonOut, reps); err != nil {
			return err
		}
	}
	for i, rep := range reps {
		file := htmlOut
		if i > 0 && file != "" {
			ext := filepath.Ext(file)
			file = strings.TrimSuffix(file, ext) + "." + rep.Driver + ext
		}
		if err := writeHTMLFile(file, func(w io.Writer) error { return writeSoakHTML(w, rep) }); err != nil {
			return err
		}
	}
	for _, rep := range reps {
		if !rep.OK() {
			return errSoakFailed
		}
	}
	return nil
}

// printSoakComparison prints the runs' tables side by side, then each
// run's summary and failures.
func printSoakComparison(w io.Writer, reps []*soak.Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head, sub := "\t", "operation\t"
	for _, r := range reps {
		head += r.Driver + "\t\t\t\t\t"
		sub += "ops\tfailed\tfailed, applied\tlost\tduplicated\t"
	}
	fmt.Fprintln(tw, head)
	fmt.Fprintln(tw, sub)
	kinds := map[string]bool{}
	for _, r := range reps {
		for k := range r.ByKind {
			kinds[k] = true
		}
	}
	names := make([]string, 0, len(kinds))
	for k := range kinds {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range append(names, "all") {
		line := k + "\t"
		for _, r := range reps {
			c := r.ByKind[k]
			if k == "all" {
				c = soak.KindCount{Ops: r.Ops, Failed: r.Failed, FailedApplied: r.FailedApplied, Lost: r.Lost, Duplicated: r.Duplicated}
			}
			line += fmt.Sprintf("%d\t%d\t%d\t%d\t%d\t", c.Ops, c.Failed, c.FailedApplied, c.Lost, c.Duplicated)
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
	for _, r := range reps {
		fmt.Fprintf(w, "\n%s: ", r.Driver)
		printSoakSummary(w, r)
	}
}

func printSoakReport(w io.Writer, r *soak.Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "operation\tops\tfailed\tfailed, applied\tlost\tduplicated\t")
	kinds := make([]string, 0, len(r.ByKind))
	for k := range r.ByKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		c := r.ByKind[k]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t\n", k, c.Ops, c.Failed, c.FailedApplied, c.Lost, c.Duplicated)
	}
	fmt.Fprintf(tw, "all\t%d\t%d\t%d\t%d\t%d\t\n", r.Ops, r.Failed, r.FailedApplied, r.Lost, r.Duplicated)
	tw.Flush()
	fmt.Fprintln(w)
	printSoakSummary(w, r)
}

// printSoakSummary prints a run's numbers below its table, its failures
// by error and its verdict.
func printSoakSummary(w io.Writer, r *soak.Report) {
	fmt.Fprintf(w, "%d ops in %.1fs (%.0f/s), %d faults injected over %d episodes; p50 %.2f ms, p99 %.2f ms\n",
		r.Ops, r.Elapsed.Seconds(), float64(r.Ops)/r.Elapsed.Seconds(), r.Faults, len(r.Schedule), r.P50ms, r.P99ms)
	fmt.Fprintf(w, "stuck %d, linearizable registers: %s, failures reported not-applied that applied: %d, heap max %.1f MB (records for the checks %.1f MB), client goroutines left after Disconnect: %d\n",
		r.Stuck, r.Linearization, r.Misreport, r.HeapMaxMB, r.RecordsMB, r.LeakedGoroutines)
	if tc, ok := r.ByKind["transaction"]; ok {
		where := "on one replica set"
		if r.CrossShard {
			where = "each across two shards"
		}
		fmt.Fprintf(w, "transactions %s: %d committed, %d failed, %d lost, %d duplicated, %d half-committed; %d commit replies lost\n",
			where, tc.Ops-tc.Failed, tc.Failed, tc.Lost, tc.Duplicated, r.HalfCommitted, r.CommitRepliesLost)
	}
	if len(r.Errors) > 0 {
		fmt.Fprintln(w, "\nfailures by error:")
		type kv struct {
			k string
			n int64
		}
		var es []kv
		for k, n := range r.Errors {
			es = append(es, kv{k, n})
		}
		sort.Slice(es, func(i, j int) bool { return es[i].n > es[j].n || es[i].n == es[j].n && es[i].k < es[j].k })
		for i, e := range es {
			if i == 10 {
				fmt.Fprintf(w, "  … %d more kinds\n", len(es)-10)
				break
			}
			fmt.Fprintf(w, "  %7d  %s\n", e.n, e.k)
		}
	}
	if r.OK() {
		fmt.Fprintln(w, "\nOK: nothing lost, nothing applied twice, nothing stuck.")
	}
}
