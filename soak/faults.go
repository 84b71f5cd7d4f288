package soak

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/faultproxy"
)

// Fault kinds of the schedule.
const (
	FaultReplyLost   = "reply-lost"   // the write is applied, the connection closes before the reply
	FaultRequestLost = "request-lost" // the connection closes before a write runs
	FaultReset       = "reset"        // the connection closes before a read or write runs
	FaultStepDown    = "stepdown"     // the primary steps down
	FaultOverload    = "overload"     // 462 with SystemOverloadedError and RetryableError
	FaultSlow        = "slow"         // replies are held back
	// Faults of sharded clusters.
	FaultRouterRestart = "router-restart" // a mongos router goes away and comes back (Options.Routers)
	FaultCommitLost    = "commit-lost"    // a commitTransaction's reply is lost after the commit (through a fault proxy)
)

// DefaultMix is the default fault mix: relative weights of the kinds.
const DefaultMix = "reply-lost=3,request-lost=2,reset=1,stepdown=1,overload=1,slow=1"

// ShardedMix is the default mix of transactions on a sharded cluster:
// router restarts, shard primaries stepping down, commit replies lost, and
// the command faults at the routers. (Lost replies of retryable writes do
// not apply: every write is in a transaction.)
const ShardedMix = "request-lost=2,reset=1,stepdown=2,overload=1,slow=1,router-restart=2,commit-lost=3"

var faultKinds = []string{FaultReplyLost, FaultRequestLost, FaultReset, FaultStepDown, FaultOverload, FaultSlow, FaultRouterRestart, FaultCommitLost}

// ParseMix parses "kind=weight,..." into weights; weights are
// non-negative integers and at least one is positive. "none" is no faults.
func ParseMix(s string) (map[string]int, error) {
	mix := make(map[string]int)
	if s == "" || s == "none" {
		return mix, nil
	}
	total := 0
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, fmt.Errorf("fault mix %q: want kind=weight, got %q", s, part)
		}
		known := false
		for _, f := range faultKinds {
			known = known || f == k
		}
		if !known {
			return nil, fmt.Errorf("fault mix: unknown kind %q (have %s)", k, strings.Join(faultKinds, ", "))
		}
		w, err := strconv.Atoi(v)
		if err != nil || w < 0 {
			return nil, fmt.Errorf("fault mix: weight of %q must be a non-negative integer, got %q", k, v)
		}
		mix[k] = w
		total += w
	}
	if total == 0 {
		return nil, fmt.Errorf("fault mix %q: every weight is 0", s)
	}
	return mix, nil
}

// Episode is one entry of the fault schedule: from At (since the start of
// the run) for Duration, Kind hits a fraction Rate of the commands it
// targets. A step-down is instantaneous.
type Episode struct {
	At       time.Duration `json:"at_ns"`
	Duration time.Duration `json:"duration_ns"`
	Kind     string        `json:"kind"`
	Rate     float64       `json:"rate"`
	BlockMS  int           `json:"block_ms,omitempty"` // slow: how long a reply is held
}

// Schedule derives the fault episodes for a run of length d from the seed:
// the same seed, mix and duration give the same schedule.
func Schedule(seed uint64, mix map[string]int, d time.Duration) []Episode {
	var kinds []string
	for k := range mix {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	total := 0
	for _, k := range kinds {
		total += mix[k]
	}
	if total == 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(seed, 0x50a4))
	var eps []Episode
	at := 500*time.Millisecond + time.Duration(rng.Int64N(int64(time.Second)))
	for at < d {
		pick := rng.IntN(total)
		kind := kinds[0]
		for _, k := range kinds {
			if pick < mix[k] {
				kind = k
				break
			}
			pick -= mix[k]
		}
		ep := Episode{At: at, Kind: kind}
		switch kind {
		case FaultStepDown:
		case FaultRouterRestart:
			ep.Duration = 200*time.Millisecond + time.Duration(rng.Int64N(int64(800*time.Millisecond))) // down time
		case FaultOverload:
			ep.Duration = 300*time.Millisecond + time.Duration(rng.Int64N(int64(1500*time.Millisecond)))
			ep.Rate = 0.3 + 0.4*rng.Float64()
		case FaultSlow:
			ep.Duration = 500*time.Millisecond + time.Duration(rng.Int64N(int64(2*time.Second)))
			ep.Rate = 0.05 + 0.1*rng.Float64()
			ep.BlockMS = 20 + rng.IntN(180)
		default:
			ep.Duration = 500*time.Millisecond + time.Duration(rng.Int64N(int64(2*time.Second)))
			ep.Rate = 0.05 + 0.15*rng.Float64()
		}
		if ep.At+ep.Duration > d {
			ep.Duration = d - ep.At
		}
		eps = append(eps, ep)
		at += ep.Duration + 300*time.Millisecond + time.Duration(rng.Int64N(int64(1200*time.Millisecond)))
	}
	return eps
}

// The commands each fault targets: the workload's writes and reads.
var (
	writeCommands = bson.A{"insert", "update", "findAndModify", "delete", "commitTransaction"}
	allCommands   = bson.A{"insert", "update", "findAndModify", "delete", "find", "getMore", "commitTransaction"}
)

// failPoints returns the configureFailPoint commands that start and stop
// an episode; a step-down has none.
func failPoints(ep Episode) (on, off bson.D) {
	mode := bson.D{{Key: "activationProbability", Value: ep.Rate}}
	fp := func(name string, data bson.D) (bson.D, bson.D) {
		return bson.D{{Key: "configureFailPoint", Value: name}, {Key: "mode", Value: mode}, {Key: "data", Value: data}},
			bson.D{{Key: "configureFailPoint", Value: name}, {Key: "mode", Value: "off"}}
	}
	switch ep.Kind {
	case FaultReplyLost:
		return fp("onPrimaryTransactionalWrite", bson.D{{Key: "closeConnection", Value: true}})
	case FaultRequestLost:
		return fp("failCommand", bson.D{{Key: "failCommands", Value: writeCommands}, {Key: "closeConnection", Value: true}})
	case FaultReset:
		return fp("failCommand", bson.D{{Key: "failCommands", Value: allCommands}, {Key: "closeConnection", Value: true}})
	case FaultOverload:
		return fp("failCommand", bson.D{{Key: "failCommands", Value: allCommands}, {Key: "errorCode", Value: int32(462)},
			{Key: "errorLabels", Value: bson.A{"RetryableError", "SystemOverloadedError"}}})
	case FaultSlow:
		return fp("failCommand", bson.D{{Key: "failCommands", Value: allCommands}, {Key: "blockConnection", Value: true},
			{Key: "blockTimeMS", Value: int32(ep.BlockMS)}})
	}
	return nil, nil
}

// RouterControl stops and restarts one mongos router, for the
// router-restart fault (an embedded mongosim's *mongosim.Router).
type RouterControl interface {
	Stop() error
	Start() error
}

// admin is the schedule's own view of the deployment: a client for
// replSetStepDown, and one direct connection per member (or per router),
// because fail points are per member (as on mongod) and must be set and
// cleared on all. On a sharded cluster step-downs go to the shards' own
// replica sets in turn, and routers restart in turn; lost commit replies
// are the fault proxy's.
type admin struct {
	rs      *sturdy.Client
	members []*sturdy.Client
	shards  []*sturdy.Client
	routers []RouterControl
	proxy   *faultproxy.Proxy
	turn    map[string]int // the next shard or router by fault kind
}

// connectAdmin connects to uri and directly to every member its hello
// lists, or to every router the URI names, and to each of shardURIs.
func connectAdmin(ctx context.Context, uri string, shardURIs []string) (*admin, error) {
	rs, err := sturdy.Connect(ctx, uri)
	if err != nil {
		return nil, err
	}
	a := &admin{rs: rs, turn: map[string]int{}}
	fail := func(err error) (*admin, error) {
		a.close(context.Background())
		return nil, err
	}
	reply, err := rs.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: int32(1)}})
	if err != nil {
		return fail(fmt.Errorf("hello: %w", err))
	}
	var hello struct {
		Hosts []string `bson:"hosts"`
		Msg   string   `bson:"msg"`
	}
	if err := bson.Unmarshal(reply, &hello); err != nil {
		return fail(fmt.Errorf("hello: %w", err))
	}
	hosts := hello.Hosts
	if hello.Msg == "isdbgrid" { // mongos: fail points go to every router
		o, err := sturdy.ParseURI(uri)
		if err != nil {
			return fail(err)
		}
		hosts = o.Hosts
	}
	for _, h := range hosts {
		c, err := sturdy.Connect(ctx, directURI(uri, h))
		if err != nil {
			return fail(fmt.Errorf("connect to %s: %w", h, err))
		}
		a.members = append(a.members, c)
	}
	if len(a.members) == 0 { // a standalone: fail points go to it
		c, err := sturdy.Connect(ctx, uri)
		if err != nil {
			return fail(err)
		}
		a.members = append(a.members, c)
	}
	for _, u := range shardURIs {
		c, err := sturdy.Connect(ctx, u)
		if err != nil {
			return fail(fmt.Errorf("connect to shard %s: %w", u, err))
		}
		a.shards = append(a.shards, c)
	}
	return a, nil
}

// next returns the index of the next shard or router of fault kind among n.
func (a *admin) next(kind string, n int) int {
	i := a.turn[kind] % n
	a.turn[kind]++
	return i
}

// directURI is uri with its hosts replaced by host and a direct connection.
func directURI(uri, host string) string {
	scheme, rest, _ := strings.Cut(uri, "://")
	if scheme == "mongodb+srv" {
		scheme = "mongodb"
	}
	userinfo := ""
	if at := strings.LastIndex(strings.SplitN(rest, "/", 2)[0], "@"); at >= 0 {
		userinfo, rest = rest[:at+1], rest[at+1:]
	}
	path, query := "", ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		path = rest[i:]
	}
	path, query, _ = strings.Cut(path, "?")
	if path == "" {
		path = "/"
	}
	var keep []string
	for _, kv := range strings.Split(query, "&") {
		k, _, _ := strings.Cut(kv, "=")
		if kv == "" || strings.EqualFold(k, "replicaSet") || strings.EqualFold(k, "directConnection") || strings.EqualFold(k, "srvServiceName") || strings.EqualFold(k, "srvMaxHosts") {
			continue
		}
		keep = append(keep, kv)
	}
	keep = append(keep, "directConnection=true")
	return scheme + "://" + userinfo + host + path + "?" + strings.Join(keep, "&")
}

func (a *admin) close(ctx context.Context) {
	for _, c := range append(a.members, a.shards...) {
		_ = c.Disconnect(ctx)
	}
	_ = a.rs.Disconnect(ctx)
	if a.proxy != nil {
		_ = a.proxy.Close()
		a.proxy = nil
	}
}

// onAll runs cmd on every member; the first error is returned.
func (a *admin) onAll(ctx context.Context, cmd bson.D) error {
	var first error
	for _, c := range a.members {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := c.Database("admin").RunCommand(cctx, cmd)
		cancel()
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}

// runSchedule plays the episodes against the deployment until ctx ends or
// the schedule is over; it reports each episode it started to started.
// Errors of the admin commands are reported to errf and do not stop the
// schedule (a step-down may race an election).
func runSchedule(ctx context.Context, a *admin, start time.Time, eps []Episode, started func(Episode), errf func(error)) {
	wait := func(until time.Time) bool {
		t := time.NewTimer(time.Until(until))
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	for _, ep := range eps {
		if !wait(start.Add(ep.At)) {
			return
		}
		started(ep)
		var err error
		switch ep.Kind {
		case FaultStepDown:
			err = a.stepDown(ctx)
		case FaultRouterRestart:
			err = a.restartRouter(func() { wait(start.Add(ep.At + ep.Duration)) })
		case FaultCommitLost:
			err = a.loseCommits(ep.Rate, func() { wait(start.Add(ep.At + ep.Duration)) })
		default:
			err = a.failPoint(ctx, ep, func() { wait(start.Add(ep.At + ep.Duration)) })
		}
		if err != nil && ctx.Err() == nil {
			errf(fmt.Errorf("%s: %w", ep.Kind, err))
		}
	}
}

// stepDown steps the primary down: the replica set's, or the next shard's.
func (a *admin) stepDown(ctx context.Context) error {
	c := a.rs
	if len(a.shards) > 0 {
		c = a.shards[a.next(FaultStepDown, len(a.shards))]
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := c.Database("admin").RunCommand(cctx, bson.D{{Key: "replSetStepDown", Value: int32(1)}, {Key: "force", Value: true}})
	return err
}

// restartRouter stops the next router until down returns, then starts it.
func (a *admin) restartRouter(down func()) error {
	if len(a.routers) == 0 {
		return errors.New("no router to restart (Options.Routers)")
	}
	r := a.routers[a.next(FaultRouterRestart, len(a.routers))]
	if err := r.Stop(); err != nil {
		return err
	}
	down()
	return r.Start() // even when the run is over
}

// loseCommits makes the fault proxy drop a fraction rate of the
// commitTransaction replies (after the commit ran) until over returns.
func (a *admin) loseCommits(rate float64, over func()) error {
	if a.proxy == nil {
		return errors.New("no fault proxy in front of the deployment")
	}
	err := a.proxy.SetRules([]faultproxy.Rule{{Name: FaultCommitLost, Match: faultproxy.Match{Commands: []string{"commitTransaction"}},
		Action: faultproxy.Action{Kind: faultproxy.DropReply}, Probability: rate}})
	if err != nil {
		return err
	}
	over()
	return a.proxy.SetRules(nil)
}

// failPoint sets the episode's fail point on every member until over
// returns, then turns it off.
func (a *admin) failPoint(ctx context.Context, ep Episode, over func()) error {
	on, off := failPoints(ep)
	err := a.onAll(ctx, on)
	over()
	// Always turn the fail point off, even when the run is over.
	if offErr := a.onAll(context.Background(), off); offErr != nil {
		return errors.Join(err, fmt.Errorf("off: %w", offErr))
	}
	return err
}
