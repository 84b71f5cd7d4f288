package mongosim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/wire"
)

// Round trips from a router to a shard: to its primary for writes, else
// to the member the client's read preference selects, retried on a new
// primary as mongos retries.

// shardError carries a shard's error reply, relayed to the client as is.
type shardError struct{ reply bson.D }

func (e *shardError) Error() string {
	v, _ := lookupD(e.reply, "errmsg")
	return fmt.Sprintf("shard error: %v", v)
}

// shardCmd sends cmd to shard i: to its primary for writes, else as the
// client's read preference selects. Reads and retryable writes are retried
// on a new primary as forward does. The reply is returned even when it is
// an error reply; err is a connection failure already turned into the
// error mongos reports.
func (r *Router) shardCmd(rq *request, i int, cmd bson.D, seqs []wire.DocumentSequence, write, retry bool) (bson.D, error) {
	body, err := bson.Marshal(cmd)
	if err != nil {
		return nil, cmderr.New(cmderr.BadValue, "%v", err)
	}
	return r.shardRaw(rq, i, body, seqs, write, retry)
}

func (r *Router) shardRaw(rq *request, i int, body bson.Raw, seqs []wire.DocumentSequence, write, retry bool) (bson.D, error) {
	sc := r.cluster.sharding.shards[i]
	if rq.stxn != nil && !isTxnControl(rq.name) {
		var err error
		if body, err = rq.stxn.statementFor(i, body); err != nil {
			return nil, err
		}
		retry = false // a statement in a transaction is not retried alone
	}
	var (
		reply   bson.D
		lastErr error
	)
	for attempt := 1; attempt <= routerShardAttempts; attempt++ {
		reply, lastErr = r.shardTrip(rq, sc, body, seqs, write)
		if lastErr == nil {
			code, _ := replyCode(reply)
			if !retry || !slices.Contains(routerRetryCodes, code) || attempt == routerShardAttempts {
				break
			}
		} else if !retry || rq.ctx.Err() != nil {
			break
		}
		if !awaitShardPrimary(rq.ctx, sc) {
			break
		}
	}
	if lastErr != nil {
		if rq.ctx.Err() != nil {
			return nil, rq.ctx.Err()
		}
		if errors.Is(lastErr, errNoTarget) {
			return nil, &cmderr.Error{Code: codeFailedToSatisfyReadPreference, Name: "FailedToSatisfyReadPreference",
				Message: fmt.Sprintf("Could not find host matching read preference for set %s", sc.setName)}
		}
		return nil, cmderr.New(cmderr.HostUnreachable, "Connection to shard %s failed: %v", r.cluster.sharding.names[i], lastErr)
	}
	return deleteField(reply, "topologyVersion"), nil
}

func awaitShardPrimary(ctx context.Context, sc *Cluster) bool {
	deadline := time.Now().Add(routerPrimaryWait)
	for {
		if sc.Primary() != nil {
			return true
		}
		if time.Now().After(deadline) || !sleepCtx(ctx, 10*time.Millisecond) {
			return false
		}
	}
}

// shardTarget picks the member of shard sc for rq as mongos does from its
// $readPreference: the primary for mode primary (the default) and for
// every write, a secondary for secondary, either for the preferred modes
// and nearest.
func (r *Router) shardTarget(rq *request, sc *Cluster, write bool) *Member {
	mode := "primary"
	if rp, ok := rq.get("$readPreference"); ok {
		if d, ok := rp.(bson.D); ok {
			if m, ok := lookupD(d, "mode"); ok {
				mode, _ = m.(string)
			}
		}
	}
	primary := sc.Primary()
	if write || mode == "primary" {
		return primary
	}
	var secondaries []*Member
	for _, m := range sc.Members() {
		if m != primary {
			secondaries = append(secondaries, m)
		}
	}
	pick := func() *Member {
		if len(secondaries) == 0 {
			return nil
		}
		return secondaries[int(r.commands.Load())%len(secondaries)]
	}
	switch mode {
	case "primaryPreferred":
		if primary != nil {
			return primary
		}
		return pick()
	case "secondary":
		return pick()
	default:
		if m := pick(); m != nil {
			return m
		}
		return primary
	}
}

func (r *Router) shardTrip(rq *request, sc *Cluster, body bson.Raw, seqs []wire.DocumentSequence, write bool) (bson.D, error) {
	p := r.shardTarget(rq, sc, write)
	if p == nil {
		return nil, errNoTarget
	}
	return r.exchange(rq.ctx, p, rq.raw.RequestID, &wire.Msg{Body: body, Sequences: seqs})
}

func readShardReply(nc net.Conn) (bson.D, error) {
	raw, err := wire.ReadMessage(nc, nil, 0)
	if err != nil {
		return nil, err
	}
	m, err := wire.Decode(raw, 0)
	if err != nil || m.Msg == nil {
		return nil, fmt.Errorf("bad reply from the shard: %v", err)
	}
	var reply bson.D
	if err := bson.Unmarshal(m.Msg.Body, &reply); err != nil {
		return nil, fmt.Errorf("bad reply from the shard: %w", err)
	}
	return reply, nil
}

// forEachShard sends cmd to each of shards in turn and returns the
// replies; the first error reply ends it as a shardError.
func (r *Router) forEachShard(rq *request, shards []int, cmd bson.D, write, retry bool) ([]bson.D, error) {
	replies := make([]bson.D, 0, len(shards))
	for _, i := range shards {
		reply, err := r.shardCmd(rq, i, cmd, nil, write, retry)
		if err != nil {
			return nil, err
		}
		if !replyOK(reply) {
			return nil, &shardError{reply: reply}
		}
		replies = append(replies, reply)
	}
	return replies, nil
}

func allShards(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}
