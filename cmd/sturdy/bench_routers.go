package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim"
)

// sturdy bench overload --routers N: a sharded mongosim with N mongos
// routers, of which the first admits only C requests per second and the
// others are healthy (unlimited unless -healthy-capacity). The clients see
// every router in the latency window, so a share of first attempts meets
// the overloaded one; what a client does with its 462 (retry on the same
// router, retry elsewhere, give up) decides its goodput.

// routersResult is one cell of the routers benchmark.
type routersResult struct {
	overloadResult
	Rejected int64 `json:"rejected"` // 462s the overloaded router answered this client
}

type routersBench struct {
	routers         int
	capacity        int
	healthyCapacity int
	loads           []int
	clients         []string
	duration        time.Duration
	opTimeout       time.Duration
	jsonOut         string
}

func runRoutersOverload(ctx context.Context, b routersBench, stdout, stderr io.Writer) error {
	sim, err := mongosim.Launch(mongosim.Options{Routers: b.routers})
	if err != nil {
		return err
	}
	defer sim.Close()
	routers := sim.Routers()
	busy := routers[0]
	fmt.Fprintf(stderr, "overload --routers %d: router %s admits %d req/s; the others are healthy; the official driver runs with heartbeatFrequencyMS=500, otherwise defaults\n",
		b.routers, busy.Addr(), b.capacity)
	// Checked in go.mongodb.org/mongo-driver/v2 v2.10.0 (x/mongo/driver
	// operation.go): on a sharded topology it deprioritizes the mongos of
	// every failed attempt; enableOverloadRetargeting (off by default)
	// matters only for replica sets.
	fmt.Fprintln(stderr, "overload --routers: both clients deprioritize the failed mongos on a retry by default (the official driver does so for any retry on a sharded topology; its enableOverloadRetargeting opt-in is for replica sets)")
	healthy := mongosim.LimiterOptions{}
	if b.healthyCapacity > 0 {
		healthy = mongosim.LimiterOptions{RequestsPerSecond: float64(b.healthyCapacity), Burst: max(1, b.healthyCapacity/20)}
	}
	limit := func(on bool) {
		for i, r := range routers {
			switch {
			case !on:
				r.SetLimiter(mongosim.LimiterOptions{})
			case i == 0:
				r.SetLimiter(mongosim.LimiterOptions{RequestsPerSecond: float64(b.capacity), Burst: max(1, b.capacity/20)})
			default:
				r.SetLimiter(healthy)
			}
		}
	}
	// A wide latency window: both routers are candidates for every
	// operation, as on a LAN where mongoses answer within 15 ms.
	uri := sim.URI() + "?localThresholdMS=1000"
	var results []routersResult
	for _, load := range b.loads {
		for _, name := range b.clients {
			fmt.Fprintf(stderr, "overload --routers %d %dx C=%d: %s\n", b.routers, load, b.capacity, name)
			limit(false) // no limit while connecting
			var attempts atomic.Int64
			c, err := newBenchClient(ctx, name, uri, &attempts)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if err := awaitRouters(ctx, c); err != nil {
				c.close(ctx)
				return fmt.Errorf("%s: %w", name, err)
			}
			limit(true)
			rejected := busy.Stats().Rejected
			res := offerLoad(ctx, c, load, b.capacity, b.duration, b.opTimeout)
			c.close(ctx)
			res.Client, res.Load, res.Attempts = name, load, attempts.Load()
			if res.Started > 0 {
				res.Amplification = float64(res.Attempts) / float64(res.Started)
			}
			if res.Succeeded > 0 {
				res.PerSuccess = float64(res.Attempts) / float64(res.Succeeded)
			}
			results = append(results, routersResult{overloadResult: res, Rejected: busy.Stats().Rejected - rejected})
		}
	}
	printRoutersTable(stdout, results, b)
	if b.jsonOut != "" {
		out, err := json.MarshalIndent(results, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(b.jsonOut, append(out, '\n'), 0o644)
	}
	return nil
}

// awaitRouters lets the client discover the routers before the load
// starts: every router is a seed in the URI, so each client monitors all
// of them from the start; one insert proves one is known, and half a
// second is ample for the other monitors' first check on loopback.
func awaitRouters(ctx context.Context, c benchClient) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.insert(ctx, bson.D{{Key: "_id", Value: bson.NewObjectID()}}); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(500 * time.Millisecond):
		return nil
	}
}

func printRoutersTable(w io.Writer, results []routersResult, b routersBench) {
	fmt.Fprintf(w, "%d routers; router 1 admits C = %d req/s, the others %s; %v per cell;\n", b.routers, b.capacity, healthyDesc(b.healthyCapacity), b.duration)
	fmt.Fprintf(w, "goodput = successful inserts per second; attempts/op = insert commands per operation started; 462s = rejections by the overloaded router\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "load\tclient\tgoodput\tof offered\tattempts/op\t462s\tp50\tp99\terrors\t")
	for _, r := range results {
		offered := float64(r.Load * b.capacity)
		fmt.Fprintf(tw, "%dx\t%s\t%.0f/s\t%.0f%%\t%.2f\t%d\t%.1fms\t%.1fms\t%d\t\n",
			r.Load, r.Client, r.Goodput, 100*r.Goodput/offered, r.Amplification, r.Rejected, r.P50ms, r.P99ms, r.Failed)
	}
	tw.Flush()
	// The ratio the benchmark is about: sturdy's goodput over the
	// official driver's at each load.
	for _, load := range b.loads {
		var st, off *routersResult
		for i := range results {
			r := &results[i]
			if r.Load != load {
				continue
			}
			switch r.Client {
			case "sturdy":
				st = r
			case "official":
				off = r
			}
		}
		if st != nil && off != nil && off.Goodput > 0 {
			fmt.Fprintf(w, "\n%dx: sturdy/official goodput = %.2f, errors %d vs %d", load, st.Goodput/off.Goodput, st.Failed, off.Failed)
		}
	}
	fmt.Fprintln(w)
}

func healthyDesc(c int) string {
	if c <= 0 {
		return "are unlimited"
	}
	return fmt.Sprintf("admit %d req/s", c)
}
