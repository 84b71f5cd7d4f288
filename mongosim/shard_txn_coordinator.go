package mongosim

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
	"github.com/sturdy-go/sturdy/wire"
)

// Two-phase commit, as mongod's transaction coordinator runs it on the
// coordinator shard for a transaction that wrote on several shards:
//
//  1. prepare: prepareTransaction on every participant, each answering a
//     prepareTimestamp (txn_prepare.go);
//  2. decision: commit at the latest prepareTimestamp when every
//     participant prepared, else abort with the first participant's error;
//     the decision is recorded before any participant hears it;
//  3. commitTransaction with the commitTimestamp (or abortTransaction) on
//     every participant, retried until each has it.
//
// A coordination stands for mongod's config.transaction_coordinators
// document: it belongs to the deployment, not to the router that asked for
// the commit, so a router dying mid-commit does not stop it, and when the
// coordinator shard's primary steps down the coordination resumes from its
// recorded step once the shard has a new primary, as the new primary's
// coordinator does. A participant therefore never commits unless every
// participant prepared, and once the decision is commit every participant
// commits. The coordinator reaches the participants through a running
// router's connections (mongosim's shards have no connections of their own
// to each other).

type txnDecision int

const (
	decisionNone txnDecision = iota
	decisionCommit
	decisionAbort
)

// coordination is one transaction's two-phase commit.
type coordination struct {
	ss           *shardSet
	lsid         any
	number       int64
	shard        int   // the coordinator shard
	participants []int // every participant, the coordinator among them

	mu       sync.Mutex
	decision txnDecision
	commitTS bson.Timestamp
	abortErr error  // why it aborted: a participant's error (reply or command error)
	clockOf  bson.D // $clusterTime and operationTime of the last participant's answer
	running  bool
	done     chan struct{} // closed once every participant has the decision
	// interrupted is closed when a run ends because the coordinator's
	// primary stepped down; the next run gets a new channel.
	interrupted chan struct{}
}

// coordStage names the points of a commit a test may interrupt.
type coordStage string

const (
	stagePrepared coordStage = "prepared" // every participant answered prepare; no decision yet
	stageDecided  coordStage = "decided"  // the decision is recorded; no participant has it yet
)

// coordHook, when set (tests), runs at each stage of every coordination
// with the coordinator shard.
type coordHook func(stage coordStage, coordinator *Cluster)

var errCoordinatorMoved = errors.New("mongosim: the coordinator shard's primary changed")

// coordination returns the recorded coordination of (lsid, n), nil if
// there is none.
func (ss *shardSet) coordination(lsid any, n int64) *coordination {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if co := ss.coords[value.Key(lsid)]; co != nil && co.number == n {
		return co
	}
	return nil
}

// coordinateCommit runs (or joins) the two-phase commit of (lsid, n) with
// coordinator shard coord and waits for its outcome.
func (ss *shardSet) coordinateCommit(rq *request, lsid any, n int64, coord int, participants []int) (bson.D, error) {
	ss.mu.Lock()
	key := value.Key(lsid)
	co := ss.coords[key]
	if co == nil || co.number != n {
		co = &coordination{ss: ss, lsid: lsid, number: n, shard: coord, participants: participants,
			done: make(chan struct{}), interrupted: make(chan struct{})}
		if ss.coords == nil {
			ss.coords = map[string]*coordination{}
		}
		ss.coords[key] = co
	}
	ss.mu.Unlock()
	return co.await(rq.ctx)
}

// await makes sure the coordination runs and waits for its outcome, or
// for the interruption of the run it joined.
func (co *coordination) await(ctx context.Context) (bson.D, error) {
	co.mu.Lock()
	if !co.running && !isClosedChan(co.done) {
		co.running = true
		if !co.ss.shards[0].goAsync(co.run) {
			co.running = false
		}
	}
	done, interrupted := co.done, co.interrupted
	co.mu.Unlock()
	select {
	case <-done:
		return co.outcome()
	case <-interrupted:
		return nil, cmderr.New(cmderr.InterruptedDueToReplState,
			"the transaction coordinator's primary stepped down during the commit; the new primary finishes it")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func isClosedChan(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// decided returns the recorded decision.
func (co *coordination) decided() txnDecision {
	co.mu.Lock()
	defer co.mu.Unlock()
	return co.decision
}

func (co *coordination) outcome() (bson.D, error) {
	co.mu.Lock()
	defer co.mu.Unlock()
	if co.decision == decisionAbort {
		return nil, co.abortErr
	}
	// The reply carries the cluster time a participant answered with, as
	// mongos' reply does, so the session's next operation follows it.
	return append(slices.Clone(co.clockOf), bson.E{Key: "ok", Value: 1.0}), nil
}

// run drives the coordination to its end, a run per coordinator primary.
func (co *coordination) run() {
	top, coordShard := co.ss.shards[0], co.ss.shards[co.shard]
	for !top.isClosed() {
		term, ok := coordShard.primaryTerm()
		if !ok {
			sleepCtx(context.Background(), 10*time.Millisecond)
			continue
		}
		err := co.drive(term)
		if err == nil {
			co.mu.Lock()
			co.running = false
			close(co.done)
			co.mu.Unlock()
			return
		}
		if errors.Is(err, errCoordinatorMoved) {
			co.mu.Lock()
			close(co.interrupted)
			co.interrupted = make(chan struct{})
			co.mu.Unlock()
		}
	}
	co.mu.Lock()
	co.running = false
	co.mu.Unlock()
}

// drive runs the steps not yet recorded while the coordinator shard's
// primary stays the one elected in term.
func (co *coordination) drive(term int64) error {
	moved := func() error {
		if now, ok := co.ss.shards[co.shard].primaryTerm(); !ok || now != term {
			return errCoordinatorMoved
		}
		return nil
	}
	if co.decided() == decisionNone {
		ts, abortErr, err := co.prepareAll()
		if err != nil {
			return err
		}
		co.ss.runHook(stagePrepared, co.ss.shards[co.shard])
		if err := moved(); err != nil {
			return err
		}
		co.mu.Lock()
		if abortErr != nil {
			co.decision, co.abortErr = decisionAbort, abortErr
		} else {
			co.decision, co.commitTS = decisionCommit, ts
		}
		co.mu.Unlock()
		co.ss.runHook(stageDecided, co.ss.shards[co.shard])
		if err := moved(); err != nil {
			return err
		}
	}
	return co.deliver()
}

// prepareAll sends prepareTransaction to every participant: the latest
// prepareTimestamp when all prepared, else the first participant's error.
func (co *coordination) prepareAll() (bson.Timestamp, error, error) {
	var latest bson.Timestamp
	for _, s := range co.participants {
		reply, err := co.send(s, txnCommand("prepareTransaction", co.lsid, co.number), false)
		if err != nil {
			var ce *cmderr.Error
			if errors.As(err, &ce) {
				return latest, ce, nil
			}
			return latest, nil, err
		}
		if !replyOK(reply) {
			// Relayed as the participant answered, labels included.
			return latest, &shardError{reply: reply}, nil
		}
		v, _ := lookupD(reply, "prepareTimestamp")
		if ts, ok := v.(bson.Timestamp); ok && latest.Before(ts) {
			latest = ts
		}
	}
	return latest, nil, nil
}

// deliver sends the recorded decision to every participant until each
// has it.
func (co *coordination) deliver() error {
	co.mu.Lock()
	decision, ts := co.decision, co.commitTS
	co.mu.Unlock()
	for _, s := range co.participants {
		cmd := txnCommand("abortTransaction", co.lsid, co.number)
		if decision == decisionCommit {
			cmd = txnCommand("commitTransaction", co.lsid, co.number, bson.E{Key: "commitTimestamp", Value: ts})
		}
		reply, err := co.send(s, cmd, true)
		if err != nil {
			return err
		}
		co.noteClock(reply)
		code, failed := replyCode(reply)
		if failed && !(decision == decisionAbort && code == cmderr.NoSuchTransaction) {
			// A participant refusing the decision is a bug in mongosim,
			// never a normal outcome: say so loudly.
			co.ss.shards[0].logf("mongosim coordinator: participant %s refused the %v decision: %v", co.ss.names[s], decision, reply)
		}
	}
	return nil
}

// send sends cmd to shard s's primary through a running router, retrying
// while the shard has no primary or answers a step-down error: for a
// while when not patient (prepare), else until the deployment closes.
func (co *coordination) send(s int, cmd bson.D, patient bool) (bson.D, error) {
	body, err := bson.Marshal(cmd)
	if err != nil {
		return nil, err
	}
	top, sc := co.ss.shards[0], co.ss.shards[s]
	deadline := time.Now().Add(routerPrimaryWait)
	for !top.isClosed() {
		r, p := co.ss.sender(), sc.Primary()
		if r != nil && p != nil {
			ctx, cancel := context.WithTimeout(context.Background(), routerPrimaryWait)
			reply, err := r.exchange(ctx, p, 1, &wire.Msg{Body: body})
			cancel()
			if code, _ := replyCode(reply); err == nil && !slices.Contains(routerRetryCodes, code) {
				return reply, nil
			}
		}
		if !patient && time.Now().After(deadline) {
			return nil, cmderr.New(cmderr.HostUnreachable, "the coordinator could not reach shard %s to prepare", co.ss.names[s])
		}
		sleepCtx(context.Background(), 10*time.Millisecond)
	}
	return nil, errors.New("mongosim: the deployment closed during the commit")
}

// sender is a running router whose connections the coordinators use.
func (ss *shardSet) sender() *Router {
	for _, r := range ss.shards[0].Routers() {
		if r.running() {
			return r
		}
	}
	return nil
}

func (ss *shardSet) runHook(stage coordStage, coordinator *Cluster) {
	if h := ss.hook.Load(); h != nil {
		(*h)(stage, coordinator)
	}
}

// noteClock keeps a participant reply's cluster time for the outcome.
func (co *coordination) noteClock(reply bson.D) {
	var clock bson.D
	for _, k := range []string{"$clusterTime", "operationTime"} {
		if v, ok := lookupD(reply, k); ok {
			clock = append(clock, bson.E{Key: k, Value: v})
		}
	}
	co.mu.Lock()
	co.clockOf = clock
	co.mu.Unlock()
}

// txnCommand is a transaction command a router or coordinator sends a
// participant itself.
func txnCommand(name string, lsid any, n int64, extra ...bson.E) bson.D {
	d := bson.D{{Key: name, Value: int32(1)}}
	d = append(d, extra...)
	return append(d, bson.E{Key: "lsid", Value: lsid}, bson.E{Key: "txnNumber", Value: n},
		bson.E{Key: "autocommit", Value: false}, bson.E{Key: "$db", Value: "admin"})
}

// primaryTerm is the election term of the set's primary; false while it
// has none.
func (c *Cluster) primaryTerm() (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.term, c.primary >= 0
}
