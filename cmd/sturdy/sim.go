package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/sturdy-go/sturdy/mongosim"
)

func runSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sturdy sim", flag.ContinueOnError)
	var o mongosim.Options
	fs.StringVar(&o.Host, "host", "127.0.0.1", "address to listen on")
	fs.IntVar(&o.Port, "port", 27017, "port of the first member; members use port+i (0: ephemeral)")
	fs.IntVar(&o.Members, "members", 1, "replica-set members")
	fs.BoolVar(&o.Standalone, "standalone", false, "run a standalone server instead of a replica set")
	fs.IntVar(&o.Routers, "routers", 0, "mongos routers in front of the replica set (listening on port+members+i); the printed URI lists them")
	fs.IntVar(&o.Shards, "shards", 0, "shards, each a replica set of -members (alone: 2 routers); more than 1 starts a sharded cluster, shards 1.. listening after the routers")
	fs.BoolVar(&o.LoadBalanced, "load-balanced", false, "put a load balancer in front of the routers (listening on port+members+routers); the printed URI names it with loadBalanced=true (-routers defaults to 2)")
	fs.StringVar(&o.ReplicaSetName, "replset", "rs0", "replica-set name")
	fs.StringVar(&o.Auth.Username, "user", "", "require SCRAM authentication as this user")
	fs.StringVar(&o.Auth.Password, "password", "", "password for -user")
	fs.Float64Var(&o.Limiter.RequestsPerSecond, "rate", 0, "ingress request limit per second per member, or per router with -routers (0: off)")
	fs.IntVar(&o.Limiter.Burst, "burst", 0, "ingress request burst capacity (0: same as -rate)")
	fs.IntVar(&o.Limiter.MaxConnections, "max-conns", 0, "maximum connections per member (0: unlimited)")
	fs.DurationVar(&o.PartialMessageTimeout, "partial-timeout", 30*time.Second, "disconnect a client that stalls this long in the middle of a message (negative: never)")
	fs.DurationVar(&o.IdleTimeout, "idle-timeout", 0, "disconnect a client idle this long between messages (0: never)")
	fs.DurationVar(&o.TTLMonitorInterval, "ttl-interval", 60*time.Second, "how often the TTL monitor deletes expired documents, as mongod's ttlMonitorSleepSecs (negative: never)")
	fs.BoolVar(&o.JavaScriptDisabled, "noscripting", false, "disable server-side JavaScript ($where, $function, $accumulator, mapReduce), as mongod's --noscripting")
	seed := fs.Int64("seed", 1, "seed for fail point activationProbability")
	exitOnEOF := fs.Bool("exit-on-eof", false, "exit when stdin reaches end of file (ties the sim's lifetime to a parent's pipe)")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if o.Auth.Username != "" && o.Auth.Password == "" {
		fmt.Fprintln(stderr, "-user needs -password")
		return errUsage
	}
	o.Seed = *seed
	if (o.Shards > 0 || o.LoadBalanced) && o.Routers == 0 {
		o.Routers = 2
	}
	if *exitOnEOF {
		var cancel context.CancelFunc
		ctx, cancel = cancelOnEOF(ctx)
		defer cancel()
	}
	// What the server refuses (malformed messages, failed authentication,
	// ...) is logged to stderr, as mongod logs it.
	o.Logger = slog.New(slog.NewTextHandler(stderr, nil))
	c, err := mongosim.Launch(o)
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Fprintln(stdout, c.URI())
	if o.Shards > 1 {
		for i, sh := range c.Shards() {
			fmt.Fprintf(stderr, "shard%d: %s\n", i, sh.ReplicaSetURI())
		}
	}
	<-ctx.Done()
	return nil
}
