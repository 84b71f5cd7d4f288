package mongosim

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// StepDown makes the primary step down and the next member (in member
// order, wrapping) win the election at once; in a one-member set the same
// member is re-elected. The term (electionId), setVersion and every
// member's topologyVersion advance, waking awaitable hellos so streaming
// monitors see the change immediately.
func (c *Cluster) StepDown(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.setName == "" {
		return fmt.Errorf("mongosim: StepDown: %w", cmderr.New(codeNoReplicationEnabled, "not running with --replSet"))
	}
	return c.stepDown(-1)
}

// stepDown moves the primary from `from` (or the current primary when -1)
// to the next member.
func (c *Cluster) stepDown(from int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if from >= 0 && from != c.primary {
		return cmderr.New(cmderr.NotWritablePrimary, notPrimaryMessage)
	}
	cur := c.primary
	if cur < 0 {
		cur = 0
	}
	c.primary = (cur + 1) % len(c.members)
	c.term++
	c.setVersion++
	for _, m := range c.members {
		m.bumpTopologyLocked()
	}
	c.stats.stepDowns.Add(1)
	// As mongod, stepping down aborts every transaction in progress.
	c.abortAllTransactions("the primary stepped down")
	return nil
}

// replSetStepDownCmd: {replSetStepDown: secs, secondaryCatchUpPeriodSecs,
// force}. Secondaries are always caught up (the store is shared), so the
// catch-up period is ignored; a one-member set needs force, as in MongoDB.
func replSetStepDownCmd(r *request) (bson.D, error) {
	if r.db != "admin" {
		return nil, cmderr.New(cmderr.Unauthorized, "replSetStepDown may only be run against the admin database.")
	}
	c := r.cluster
	if c.setName == "" {
		return nil, cmderr.New(codeNoReplicationEnabled, "not running with --replSet")
	}
	if v, _ := r.get("replSetStepDown"); v != nil {
		if n, ok := asFloat(v); !ok || n < 0 {
			return nil, cmderr.New(cmderr.BadValue, "replSetStepDown must be a non-negative number of seconds")
		}
	}
	force := false
	if v, ok := r.get("force"); ok {
		force = asBool(v)
	}
	if len(c.Members()) == 1 && !force {
		return nil, cmderr.New(cmderr.ExceededTimeLimit, "No electable secondaries caught up as of %s. Please use the replSetStepDown command with the argument {force: true} to force node to step down.", r.now.UTC().Format("2006-01-02T15:04:05.000Z"))
	}
	if err := c.stepDown(r.member.index); err != nil {
		return nil, err
	}
	return bson.D{{Key: "ok", Value: 1.0}}, nil
}

func replSetGetStatusCmd(r *request) (bson.D, error) {
	c := r.cluster
	if c.setName == "" {
		return nil, cmderr.New(codeNoReplicationEnabled, "not running with --replSet")
	}
	c.mu.Lock()
	primary, term := c.primary, c.term
	members := append([]*Member(nil), c.members...)
	c.mu.Unlock()
	var list bson.A
	myState := int32(2)
	for i, m := range members {
		state, str := int32(2), "SECONDARY"
		if i == primary {
			state, str = 1, "PRIMARY"
		}
		if m == r.member {
			myState = state
		}
		list = append(list, bson.D{
			{Key: "_id", Value: int32(i)},
			{Key: "name", Value: m.addr},
			{Key: "health", Value: 1.0},
			{Key: "state", Value: state},
			{Key: "stateStr", Value: str},
			{Key: "self", Value: m == r.member},
		})
	}
	return bson.D{
		{Key: "set", Value: c.setName},
		{Key: "date", Value: bson.NewDateTimeFromTime(r.now)},
		{Key: "myState", Value: myState},
		{Key: "term", Value: term},
		{Key: "members", Value: list},
		{Key: "ok", Value: 1.0},
	}, nil
}

// replSetFreezeCmd is accepted and has no effect: elections in mongosim
// happen only through step-down.
func replSetFreezeCmd(r *request) (bson.D, error) {
	if r.cluster.setName == "" {
		return nil, cmderr.New(codeNoReplicationEnabled, "not running with --replSet")
	}
	return bson.D{{Key: "ok", Value: 1.0}}, nil
}

func init() {
	register(
		&command{name: "replSetStepDown", run: replSetStepDownCmd},
		&command{name: "replSetGetStatus", run: replSetGetStatusCmd},
		&command{name: "replSetFreeze", run: replSetFreezeCmd},
	)
}
