package mongosim

import (
	"context"
	"fmt"
	"math"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// StepDown makes the primary step down and the next member (in member
// order, wrapping) win the election at once; in a one-member set the same
// member is re-elected. It is a test's forced election: no step-down
// period is imposed and none is honoured. The term (electionId),
// setVersion and every member's topologyVersion advance, waking awaitable
// hellos so streaming monitors see the change immediately.
func (c *Cluster) StepDown(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.setName == "" {
		return fmt.Errorf("mongosim: StepDown: %w", cmderr.New(codeNoReplicationEnabled, "not running with --replSet"))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	cur := c.primary
	if cur < 0 {
		cur = c.lastPrimary
	}
	c.electLocked((cur + 1) % len(c.members))
	c.stats.stepDowns.Add(1)
	// As mongod, stepping down aborts every transaction in progress.
	c.abortAllTransactions("the primary stepped down")
	return nil
}

// electLocked makes member i primary; cluster.mu must be held.
func (c *Cluster) electLocked(i int) {
	c.primary, c.lastPrimary = i, i
	c.term++
	c.setVersion++
	for _, m := range c.members {
		m.bumpTopologyLocked()
	}
}

// electEligibleLocked holds an election among the members not in a
// step-down or freeze period, the first after the last primary in member
// order winning (all are equally caught up: the store is shared). With no
// eligible member the set stays without a primary and the election is
// retried when the first period ends. cluster.mu must be held.
func (c *Cluster) electEligibleLocked() {
	if c.closed || c.primary >= 0 {
		return
	}
	now := c.now()
	n := len(c.members)
	var next time.Time
	for k := 1; k <= n; k++ {
		m := c.members[(c.lastPrimary+k)%n]
		if !now.Before(m.electableAt) {
			c.electLocked(m.index)
			return
		}
		if next.IsZero() || m.electableAt.Before(next) {
			next = m.electableAt
		}
	}
	if c.electTimer != nil {
		c.electTimer.Stop()
	}
	c.electTimer = time.AfterFunc(next.Sub(now), func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.electEligibleLocked()
	})
}

// Defaults and codes of replSetStepDown and replSetFreeze, as in mongod.
const (
	defaultStepDownSecs   = 60
	defaultCatchUpSecs    = 10
	codeNotSecondary      = 95
	notPrimaryStepDownMsg = "not primary so can't step down"
)

// replSetStepDownCmd: {replSetStepDown: stepDownSecs,
// secondaryCatchUpPeriodSecs, force}. Secondaries are always caught up
// (the store is shared), so the catch-up period is only validated; a
// one-member set needs force, as in mongod. As in mongod the member may
// not be elected again for stepDownSecs (0 means 60): an eligible other
// member wins at once; with none (a one-member set, or every other member
// itself stepped down or frozen) the set has no primary until a period
// ends.
func replSetStepDownCmd(r *request) (bson.D, error) {
	if r.db != "admin" {
		return nil, cmderr.New(cmderr.Unauthorized, "replSetStepDown may only be run against the admin database.")
	}
	c := r.cluster
	if c.setName == "" {
		return nil, cmderr.New(codeNoReplicationEnabled, "not running with --replSet")
	}
	secs := float64(defaultStepDownSecs)
	if v, _ := r.get("replSetStepDown"); v != nil {
		n, ok := asFloat(v)
		if !ok || n < 0 {
			return nil, cmderr.New(cmderr.BadValue, "stepdown period must be a positive integer")
		}
		if n > 0 {
			secs = math.Trunc(n)
		}
	}
	force := false
	if v, ok := r.get("force"); ok {
		force = asBool(v)
	}
	catchUp := float64(defaultCatchUpSecs)
	if force {
		catchUp = 0
	}
	if v, ok := r.get("secondaryCatchUpPeriodSecs"); ok {
		n, isNum := asFloat(v)
		if !isNum {
			return nil, typeErr("secondaryCatchUpPeriodSecs", "long", v)
		}
		if n < 0 {
			return nil, cmderr.New(cmderr.BadValue, "secondaryCatchUpPeriodSecs must be positive or absent")
		}
		catchUp = n
	}
	if secs < catchUp {
		return nil, cmderr.New(cmderr.BadValue, "stepdown period must be longer than secondaryCatchUpPeriodSecs")
	}
	if len(c.Members()) == 1 && !force {
		return nil, cmderr.New(cmderr.ExceededTimeLimit, "No electable secondaries caught up as of %s. Please use the replSetStepDown command with the argument {force: true} to force node to step down.", r.now.UTC().Format("2006-01-02T15:04:05.000Z"))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	m := r.member
	if c.primary != m.index {
		return nil, cmderr.New(cmderr.NotWritablePrimary, notPrimaryStepDownMsg)
	}
	m.electableAt = c.now().Add(time.Duration(secs * float64(time.Second)))
	c.primary = -1
	c.stats.stepDowns.Add(1)
	// As mongod, stepping down aborts every transaction in progress.
	c.abortAllTransactions("the primary stepped down")
	for _, mm := range c.members {
		mm.bumpTopologyLocked()
	}
	c.electEligibleLocked()
	return bson.D{{Key: "ok", Value: 1.0}}, nil
}

// replSetFreezeCmd: {replSetFreeze: secs} keeps a secondary from being
// elected for secs seconds; 0 unfreezes it (and, with no primary, lets it
// win at once). A primary answers 95 NotSecondary, as in mongod.
func replSetFreezeCmd(r *request) (bson.D, error) {
	c := r.cluster
	if c.setName == "" {
		return nil, cmderr.New(codeNoReplicationEnabled, "not running with --replSet")
	}
	v, _ := r.get("replSetFreeze")
	secs, ok := asFloat(v)
	if !ok {
		return nil, typeErr("replSetFreeze", "int", v)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m := r.member
	if c.primary == m.index {
		return nil, cmderr.New(codeNotSecondary, "cannot freeze node when primary or running for election. state: Primary")
	}
	reply := bson.D{}
	if secs <= 0 {
		m.electableAt = time.Time{}
		reply = append(reply, bson.E{Key: "info", Value: "unfreezing"})
		c.electEligibleLocked()
	} else {
		m.electableAt = c.now().Add(time.Duration(math.Trunc(secs)) * time.Second)
	}
	return append(reply, bson.E{Key: "ok", Value: 1.0}), nil
}

func init() {
	register(
		&command{name: "replSetStepDown", run: replSetStepDownCmd},
		&command{name: "replSetFreeze", run: replSetFreezeCmd},
	)
}
