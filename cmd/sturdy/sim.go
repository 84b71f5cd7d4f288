package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
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
	asJSON := fs.Bool("json", false, "print the ready line as one JSON object (uri, members, primary, routers, shards, load balancer, pid) instead of the bare connection string")
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
	if *asJSON {
		setName := o.ReplicaSetName
		if o.Standalone {
			setName = ""
		}
		line, err := json.Marshal(readyOf(c, setName))
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s\n", line)
	} else {
		fmt.Fprintln(stdout, c.URI())
	}
	if o.Shards > 1 {
		for i, sh := range c.Shards() {
			fmt.Fprintf(stderr, "shard%d: %s\n", i, sh.ReplicaSetURI())
		}
	}
	<-ctx.Done()
	return nil
}

// simReady is the -json ready line: everything a wrapper in another
// language needs to drive the deployment without parsing the URI. It is
// printed once Launch has returned, when every listener accepts
// connections and each replica set has elected its first primary.
type simReady struct {
	URI          string     `json:"uri"`
	ReplicaSet   string     `json:"replicaSet,omitempty"`
	Members      []string   `json:"members"`
	Primary      string     `json:"primary"`
	Routers      []string   `json:"routers,omitempty"`
	Shards       []simShard `json:"shards,omitempty"`
	LoadBalancer string     `json:"loadBalancer,omitempty"`
	PID          int        `json:"pid"`
}

// simShard is one shard of a sharded cluster in the ready line.
type simShard struct {
	URI     string   `json:"uri"`
	Members []string `json:"members"`
	Primary string   `json:"primary"`
}

func readyOf(c *mongosim.Cluster, setName string) simReady {
	r := simReady{URI: c.URI(), ReplicaSet: setName, PID: os.Getpid()}
	r.Members, r.Primary = memberAddrs(c)
	for _, rt := range c.Routers() {
		r.Routers = append(r.Routers, rt.Addr())
	}
	if shards := c.Shards(); len(shards) > 1 {
		for _, sh := range shards {
			s := simShard{URI: sh.ReplicaSetURI()}
			s.Members, s.Primary = memberAddrs(sh)
			r.Shards = append(r.Shards, s)
		}
	}
	if b := c.Balancer(); b != nil {
		r.LoadBalancer = b.Addr()
	}
	return r
}

// memberAddrs lists a replica set's (or standalone's) member addresses and
// its primary's.
func memberAddrs(c *mongosim.Cluster) (members []string, primary string) {
	for _, m := range c.Members() {
		members = append(members, m.Addr())
	}
	if p := c.Primary(); p != nil {
		primary = p.Addr()
	}
	return members, primary
}
