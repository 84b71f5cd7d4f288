package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim"
)

// sturdy bench connect: a connection storm. mongosim's connection
// establishment limiter admits R new connections per second (with a short
// queue, closing the rest at once), and each client starts cold with many
// goroutines, so its pools must grow against the limiter. A client that
// redials as fast as connections are refused spends the server's
// establishment capacity on refusals; sturdy's pools back off after an
// overload-like establishment failure (the client backpressure
// specification's future work, DRIVERS-3333).

type connectResult struct {
	Client       string  `json:"client"`
	Ops          int64   `json:"ops"`
	Failed       int64   `json:"failed"`
	Goodput      float64 `json:"ops_per_s"`
	ConnAttempts int64   `json:"conn_attempts"` // connections that reached the server
	ConnRefused  int64   `json:"conn_refused"`  // closed at once by the limiter
	FirstOpMS    float64 `json:"first_op_ms"`   // from start to the first success
}

func runBenchConnect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sturdy bench connect", flag.ContinueOnError)
	rate := fs.Float64("rate", 50, "new connections the server admits per second")
	burst := fs.Int("burst", 10, "connection establishment burst")
	queue := fs.Int("queue", 0, "connections that may wait for admission; more are closed at once")
	goroutines := fs.Int("goroutines", 200, "goroutines per client, each running inserts back to back")
	duration := fs.Duration("duration", 5*time.Second, "run time per client")
	clientsFlag := fs.String("clients", strings.Join(faultClients, ","), "clients to run, in order")
	jsonOut := fs.String("json", "", "also write the results as JSON to this file")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	clients, err := parseClients(*clientsFlag, faultClients, stderr)
	if err != nil {
		return err
	}
	if *rate <= 0 || *burst <= 0 || *queue < 0 || *goroutines <= 0 || *duration <= 0 {
		fmt.Fprintln(stderr, "-rate, -burst, -goroutines and -duration must be positive, -queue not negative")
		return errUsage
	}
	sim, err := mongosim.Launch(mongosim.Options{})
	if err != nil {
		return err
	}
	defer sim.Close()
	fmt.Fprintf(stderr, "connect: the server admits %.0f new connections/s (burst %d, queue %d); %d goroutines per client for %v; both clients use their default options\n",
		*rate, *burst, *queue, *goroutines, *duration)
	limiter := mongosim.LimiterOptions{ConnectionsPerSecond: *rate, ConnectionBurst: *burst, ConnectionQueueDepth: *queue}
	var results []connectResult
	for _, name := range clients {
		fmt.Fprintf(stderr, "connect: running %s\n", name)
		sim.SetLimiter(limiter)
		before := sim.Stats()
		res, err := connectStorm(ctx, name, sim.URI(), *goroutines, *duration)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		after := sim.Stats()
		res.ConnAttempts = after.ConnsAccepted + after.ConnsRejected - before.ConnsAccepted - before.ConnsRejected
		res.ConnRefused = after.ConnsRejected - before.ConnsRejected
		results = append(results, res)
		sim.SetLimiter(mongosim.LimiterOptions{})
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "client\tgoodput\tfailed ops\tconnection attempts\trefused\tfirst success\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%.0f/s\t%d\t%d\t%d\t%.0fms\t\n", r.Client, r.Goodput, r.Failed, r.ConnAttempts, r.ConnRefused, r.FirstOpMS)
	}
	tw.Flush()
	return writeJSON(*jsonOut, results)
}

// connectStorm connects a fresh client, its monitoring included, through
// the limiter and runs inserts from g goroutines.
func connectStorm(ctx context.Context, name, uri string, g int, d time.Duration) (connectResult, error) {
	res := connectResult{Client: name}
	var (
		attempts    atomic.Int64
		ops, failed atomic.Int64
		first       atomic.Int64
		wg          sync.WaitGroup
		c           benchClient
		err         error
	)
	start := time.Now()
	// Connecting pings; a ping the limiter refuses counts as a failed
	// operation, and the client is made again.
	giveUp := time.Now().Add(d + 10*time.Second)
	for {
		c, err = newBenchClient(ctx, name, uri, &attempts)
		if err == nil {
			break
		}
		if time.Now().After(giveUp) || ctx.Err() != nil {
			return res, err
		}
		ops.Add(1)
		failed.Add(1)
		time.Sleep(50 * time.Millisecond)
	}
	defer c.close(context.Background())
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for i := 0; i < g; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for n := 0; runCtx.Err() == nil; n++ {
				opCtx, opCancel := context.WithTimeout(runCtx, 5*time.Second)
				err := c.insert(opCtx, bson.D{{Key: "_id", Value: bson.NewObjectID()}, {Key: "g", Value: int32(i)}})
				opCancel()
				if runCtx.Err() != nil {
					return // cut off by the end of the run
				}
				ops.Add(1)
				if err != nil {
					failed.Add(1)
					continue
				}
				first.CompareAndSwap(0, int64(time.Since(start)))
			}
		}(i)
	}
	wg.Wait()
	res.Ops, res.Failed = ops.Load(), failed.Load()
	res.Goodput = float64(res.Ops-res.Failed) / time.Since(start).Seconds()
	res.FirstOpMS = float64(first.Load()) / float64(time.Millisecond)
	return res, nil
}
