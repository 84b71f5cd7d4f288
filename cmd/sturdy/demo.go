package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/internal/conn"
	"github.com/sturdy-go/sturdy/mongosim"
)

// The demo runs seed 001's workload — count events by incrementing a counter
// in one document — under each kind of failure the seed describes, with each
// application strategy, and measures what really landed. Every increment also
// bumps a per-operation field ops.<i>, so the demo can tell exactly which
// operations were lost (applied 0 times) or duplicated (applied more than once).

const demoDB, demoColl = "sturdy_demo", "counters"

type faultKind struct {
	name string
	desc string
	// plan returns the plan for operation i of n.
	plan func(i, n int, rng *mrand.Rand, twoStep bool) faultPlan
}

var demoFaults = []faultKind{
	{"transient", "network error on 20% of operations: half lose the request, half lose the reply after the write applied", func(i, n int, rng *mrand.Rand, twoStep bool) faultPlan {
		p := noFaults
		if rng.IntN(5) != 0 {
			return p
		}
		at := 0
		if twoStep {
			at = rng.IntN(2) // either step may meet the fault
		}
		if rng.IntN(2) == 0 {
			p.dropRequestAt = at
		} else {
			p.dropReplyAt = at
		}
		return p
	}},
	{"outage", "persistent outage: every write fails for 20% of the run", func(i, n int, _ *mrand.Rand, _ bool) faultPlan {
		p := noFaults
		p.outage = i >= n*2/5 && i < n*3/5
		return p
	}},
	{"command-error", "command error Unauthorized (10% of operations)", func(i, n int, rng *mrand.Rand, _ bool) faultPlan {
		p := noFaults
		p.commandError = rng.IntN(10) == 0
		return p
	}},
	{"overload", "error 462 SystemOverloadedError twice (20% of operations)", func(i, n int, rng *mrand.Rand, _ bool) faultPlan {
		p := noFaults
		if rng.IntN(5) == 0 {
			p.overloaded = 2
		}
		return p
	}},
}

type strategy struct {
	name    string
	twoStep bool
	run     func(ctx context.Context, c *demoClient, op int) error
}

var demoStrategies = []strategy{
	{name: "no retry", run: func(ctx context.Context, c *demoClient, op int) error {
		return c.update(ctx, counterFilter(), incOp(op), true, nil)
	}},
	{name: "always retry (5x)", run: func(ctx context.Context, c *demoClient, op int) error {
		var err error
		for attempt := 0; attempt <= 5; attempt++ {
			if err = c.update(ctx, counterFilter(), incOp(op), true, nil); err == nil {
				return nil
			}
		}
		return err
	}},
	{name: "retry once", run: func(ctx context.Context, c *demoClient, op int) error {
		return retryNetworkOnce(func() error { return c.update(ctx, counterFilter(), incOp(op), true, nil) })
	}},
	{name: "retry once + idempotent", twoStep: true, run: func(ctx context.Context, c *demoClient, op int) error {
		token := bson.NewObjectID()
		step1 := func() error {
			return c.update(ctx, counterFilter(), bson.D{{Key: "$addToSet", Value: bson.D{{Key: "pending", Value: token}}}}, true, nil)
		}
		if err := retryNetworkOnce(step1); err != nil {
			return err
		}
		filter := append(counterFilter(), bson.E{Key: "pending", Value: token})
		update := append(bson.D{{Key: "$pull", Value: bson.D{{Key: "pending", Value: token}}}}, incOp(op)...)
		return retryNetworkOnce(func() error { return c.update(ctx, filter, update, false, nil) })
	}},
	{name: "retryable writes", run: func(ctx context.Context, c *demoClient, op int) error {
		c.txnNumber++
		txn := bson.D{{Key: "lsid", Value: bson.D{{Key: "id", Value: c.lsid}}}, {Key: "txnNumber", Value: c.txnNumber}}
		err := c.update(ctx, counterFilter(), incOp(op), true, txn)
		var ce *conn.CommandError
		if isNetwork(err) || (errors.As(err, &ce) && ce.HasErrorLabel("RetryableWriteError")) {
			err = c.update(ctx, counterFilter(), incOp(op), true, txn)
		}
		return err
	}},
}

func counterFilter() bson.D { return bson.D{{Key: "_id", Value: "2016-06-28"}} }

func incOp(op int) bson.D {
	return bson.D{{Key: "$inc", Value: bson.D{{Key: "counter", Value: int32(1)}, {Key: "ops." + strconv.Itoa(op), Value: int32(1)}}}}
}

func isNetwork(err error) bool {
	var ne *conn.NetworkError
	return errors.As(err, &ne)
}

func retryNetworkOnce(f func() error) error {
	err := f()
	if isNetwork(err) {
		err = f()
	}
	return err
}

// demoClient is the application's connection: it redials after a network
// error, as any driver's pool would.
type demoClient struct {
	addr      string
	c         *conn.Conn
	lsid      bson.Binary
	txnNumber int64
}

func newDemoClient(addr string) *demoClient {
	var id [16]byte
	_, _ = rand.Read(id[:])
	id[6] = id[6]&0x0f | 0x40
	id[8] = id[8]&0x3f | 0x80
	return &demoClient{addr: addr, lsid: bson.Binary{Subtype: bson.TypeBinaryUUID, Data: id[:]}}
}

func (d *demoClient) close() {
	if d.c != nil {
		d.c.Close()
	}
}

func (d *demoClient) command(ctx context.Context, cmd bson.D) (bson.Raw, error) {
	if d.c == nil || d.c.Closed() {
		c, err := conn.Dial(ctx, d.addr, conn.Options{AppName: "sturdy-demo"})
		if err != nil {
			return nil, err
		}
		d.c = c
	}
	return d.c.RoundTrip(ctx, demoDB, cmd)
}

func (d *demoClient) update(ctx context.Context, filter, update bson.D, upsert bool, extra bson.D) error {
	cmd := bson.D{
		{Key: "update", Value: demoColl},
		{Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: filter}, {Key: "u", Value: update}, {Key: "upsert", Value: upsert}}}},
	}
	cmd = append(cmd, extra...)
	// Write errors in an ok: 1 reply come back as a WriteException.
	_, err := d.command(ctx, cmd)
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
	Attempts   int     `json:"attempts"`
	Seconds    float64 `json:"seconds"`
}

// MS is the cell's time in milliseconds, for reports.
func (r cellResult) MS() float64 { return r.Seconds * 1000 }

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sturdy demo", flag.ContinueOnError)
	uri := fs.String("uri", "", "run against this deployment (its first host, through the fault relay) instead of an embedded mongosim")
	ops := fs.Int("ops", 200, "increments per (fault, strategy) cell")
	seed := fs.Uint64("seed", 1, "seed for choosing which operations meet a fault")
	jsonOut := fs.String("json", "", "also write the results as JSON to this file")
	htmlOut := fs.String("html", "", "also write an HTML page with the table and charts to this file")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if *ops < 10 {
		fmt.Fprintln(stderr, "-ops must be at least 10")
		return errUsage
	}
	upstream, err := demoUpstream(*uri)
	if err != nil {
		return err
	}
	if upstream == "" {
		sim, err := mongosim.Launch(mongosim.Options{})
		if err != nil {
			return fmt.Errorf("starting mongosim: %w", err)
		}
		defer sim.Close()
		upstream = sim.Members()[0].Addr()
		fmt.Fprintf(stderr, "embedded mongosim replica set at %s\n", sim.URI())
	}
	rel, err := startRelay(upstream)
	if err != nil {
		return err
	}
	defer rel.close()

	var results []cellResult
	total := len(demoFaults) * len(demoStrategies)
	progress := isTerminal(stderr)
	for fi, f := range demoFaults {
		for si, s := range demoStrategies {
			if progress {
				fmt.Fprintf(stderr, "\r%s %-14s %-24s", progressBar(fi*len(demoStrategies)+si, total), f.name, s.name)
			}
			res, err := runCell(ctx, rel, f, s, *ops, *seed)
			if err != nil {
				if progress {
					fmt.Fprintln(stderr)
				}
				return fmt.Errorf("%s / %s: %w", f.name, s.name, err)
			}
			results = append(results, res)
		}
	}
	if progress {
		fmt.Fprintf(stderr, "\r%-80s\r", "")
	}
	printDemoTable(stdout, results)
	if *jsonOut != "" {
		b, err := json.MarshalIndent(results, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if *htmlOut != "" {
		f, err := os.Create(*htmlOut)
		if err != nil {
			return err
		}
		if err := writeDemoHTML(f, results); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	return nil
}

// demoUpstream returns the first host of a mongodb:// URI, or "" for none.
func demoUpstream(uri string) (string, error) {
	if uri == "" {
		return "", nil
	}
	rest, ok := strings.CutPrefix(uri, "mongodb://")
	if !ok {
		return "", fmt.Errorf("-uri: only mongodb:// URIs are supported by the demo, got %q", uri)
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		return "", errors.New("-uri: the demo does not authenticate yet; use a deployment without auth")
	}
	host, _, _ := strings.Cut(rest, "/")
	host, _, _ = strings.Cut(host, "?")
	host, _, _ = strings.Cut(host, ",")
	if host == "" {
		return "", fmt.Errorf("-uri: no host in %q", uri)
	}
	if !strings.Contains(host, ":") {
		host += ":27017"
	}
	return host, nil
}

func runCell(ctx context.Context, rel *relay, f faultKind, s strategy, n int, seed uint64) (cellResult, error) {
	res := cellResult{Fault: f.name, Strategy: s.name, Expected: n}
	admin := newDemoClient(rel.addr())
	defer admin.close()
	rel.setPlan(noFaults)
	if _, err := admin.command(ctx, bson.D{{Key: "delete", Value: demoColl}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "limit", Value: int32(0)}}}}}); err != nil {
		return res, err
	}
	app := newDemoClient(rel.addr())
	defer app.close()
	rng := mrand.New(mrand.NewPCG(seed, uint64(len(f.name))))
	start := time.Now()
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		rel.setPlan(f.plan(i, n, rng, s.twoStep))
		opCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := s.run(opCtx, app, i)
		cancel()
		rel.mu.Lock()
		res.Attempts += rel.writes
		rel.mu.Unlock()
		if err != nil {
			res.Errors++
		}
	}
	res.Seconds = time.Since(start).Seconds()
	rel.setPlan(noFaults)

	reply, err := admin.command(ctx, bson.D{{Key: "find", Value: demoColl}, {Key: "filter", Value: counterFilter()}})
	if err != nil {
		return res, err
	}
	var found struct {
		Cursor struct {
			FirstBatch []struct {
				Counter int64            `bson:"counter"`
				Ops     map[string]int64 `bson:"ops"`
			} `bson:"firstBatch"`
		} `bson:"cursor"`
	}
	if err := bson.Unmarshal(reply, &found); err != nil {
		return res, fmt.Errorf("reading the counter: %w", err)
	}
	applied := map[string]int64{}
	if b := found.Cursor.FirstBatch; len(b) > 0 {
		res.Counted = b[0].Counter
		applied = b[0].Ops
	}
	for i := 0; i < n; i++ {
		switch k := applied[strconv.Itoa(i)]; {
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
	fmt.Fprintln(w, "\n  lost: increments never applied; duplicated: extra applications; errors: operations that reported failure to the application")
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
