package mongosim

import (
	"errors"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// The router's side of shard key updates (shard_keychange.go): it turns a
// shard's WouldChangeOwningShard into mongos' error, or moves the
// document.

const (
	errMsgKeyUpdateBatch = "Document shard key value updates that cause the doc to move shards must be sent with write batch of size 1"
	errMsgKeyUpdateMulti = "Multi-update operations are not allowed when updating the shard key field."
	errMsgKeyUpdateTxn   = "Must run update to shard key field in a multi-statement transaction or with retryWrites: true."
)

// onlyKeyChanges reports whether every writeError of a reply is
// WouldChangeOwningShard, which does not end a transaction: the router
// goes on to move the document in it.
func onlyKeyChanges(reply bson.D) bool {
	v, _ := lookupD(reply, "writeErrors")
	arr, _ := v.(bson.A)
	for _, x := range arr {
		d, _ := x.(bson.D)
		if c, _ := lookupD(d, "code"); c != int32(codeWouldChangeOwningShard) {
			return false
		}
	}
	return len(arr) > 0
}

// resolveKeyChanges answers each WouldChangeOwningShard writeError of an
// update: mongos' error for a batch, a multi update or a write that is
// neither retryable nor in a transaction, else the document moved.
func (r *Router) resolveKeyChanges(rq *request, sc *shardedColl, ops []wop, res *wresult) error {
	_, retryable := rq.get("txnNumber")
	for k := 0; k < len(res.writeErrors); k++ {
		we := res.writeErrors[k]
		if c, _ := lookupD(we, "code"); c != int32(codeWouldChangeOwningShard) {
			continue
		}
		iv, _ := lookupD(we, "index")
		idx, _ := asInt64(iv)
		multi, _ := lookupD(ops[idx].stmt, "multi")
		var err error
		switch {
		case len(ops) > 1:
			err = cmderr.New(cmderr.InvalidOptions, errMsgKeyUpdateBatch)
		case asBool(multi):
			err = cmderr.New(cmderr.InvalidOptions, errMsgKeyUpdateMulti)
		case !retryable:
			err = cmderr.New(cmderr.IllegalOperation, errMsgKeyUpdateTxn)
		default:
			pre, post := keyChangeImages(we)
			if err = r.moveDocument(rq, sc, pre, post); err == nil {
				res.writeErrors = slices.Delete(res.writeErrors, k, k+1)
				res.n++
				res.nModified++
				k--
				r.cluster.sharding.noteMoved(rq, bson.D{{Key: "n", Value: int32(1)}, {Key: "nModified", Value: int32(1)}, {Key: "ok", Value: 1.0}})
				continue
			}
		}
		res.writeErrors[k] = append(bson.D{{Key: "index", Value: int32(idx)}}, routedErrorFields(err)...)
	}
	return nil
}

// keyChangeImages reads the document before and after the update from a
// WouldChangeOwningShard error.
func keyChangeImages(e bson.D) (pre, post bson.D) {
	info, _ := lookupD(e, "errInfo")
	d, _ := info.(bson.D)
	a, _ := lookupD(d, "preImage")
	b, _ := lookupD(d, "postImage")
	pre, _ = a.(bson.D)
	post, _ = b.(bson.D)
	return pre, post
}

// moveDocument deletes pre from its shard and inserts post on the shard
// its key targets, in the client's transaction, or for a retryable write
// in an internal transaction of its own (committed as any transaction,
// by two-phase commit when the shards differ).
func (r *Router) moveDocument(rq *request, sc *shardedColl, pre, post bson.D) error {
	if pre == nil || post == nil {
		return cmderr.New(codeInternalError, "WouldChangeOwningShard without the document's images")
	}
	if rq.stxn != nil {
		return r.moveSteps(rq, sc, pre, post)
	}
	it := &shardTxn{lsid: bson.D{{Key: "id", Value: newUUID()}}, number: 1, coordinator: -1}
	irq := *rq
	irq.stxn = it
	if err := r.moveSteps(&irq, sc, pre, post); err != nil {
		r.sendAbort(&irq, it)
		return err
	}
	parts, coord := it.snapshot()
	if len(parts) == 1 {
		reply, err := r.shardCmd(&irq, parts[0].shard, txnCommand("commitTransaction", it.lsid, it.number), nil, true, true)
		if err == nil && !replyOK(reply) {
			err = &shardError{reply: reply}
		}
		return err
	}
	shards := make([]int, len(parts))
	for i, p := range parts {
		shards[i] = p.shard
	}
	_, err := r.cluster.sharding.coordinateCommit(&irq, it.lsid, it.number, coord, shards)
	return err
}

// moveSteps runs the delete and the insert of a move as statements of
// rq's transaction.
func (r *Router) moveSteps(rq *request, sc *shardedColl, pre, post bson.D) error {
	from, err := sc.keyOfDoc(pre)
	if err != nil {
		return err
	}
	to, err := sc.keyOfDoc(post)
	if err != nil {
		return err
	}
	id, _ := lookupD(pre, "_id")
	coll := rq.cmd[0].Value
	steps := []struct {
		shard int
		cmd   bson.D
	}{
		{sc.shardFor(from), bson.D{{Key: "delete", Value: coll}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: id}}}, {Key: "limit", Value: int32(1)}}}}, {Key: "$db", Value: rq.db}}},
		{sc.shardFor(to), bson.D{{Key: "insert", Value: coll}, {Key: "documents", Value: bson.A{post}}, {Key: "$db", Value: rq.db}}},
	}
	for _, s := range steps {
		reply, err := r.shardCmd(rq, s.shard, s.cmd, nil, true, false)
		if err != nil {
			return err
		}
		if !replyOK(reply) {
			return &shardError{reply: reply}
		}
		if v, ok := lookupD(reply, "writeErrors"); ok {
			arr, _ := v.(bson.A)
			if len(arr) > 0 {
				d, _ := arr[0].(bson.D)
				code, _ := lookupD(d, "code")
				n, _ := asInt64(code)
				msg, _ := lookupD(d, "errmsg")
				return cmderr.New(int32(n), "Failed to update document's shard key field. There is either an orphan for this document or _id for this collection is not globally unique. :: caused by :: %v", msg)
			}
		}
	}
	return nil
}

// routedErrorFields renders an error of the router's, or a shard's error
// reply, as a writeErrors entry's fields.
func routedErrorFields(err error) bson.D {
	var se *shardError
	if errors.As(err, &se) {
		code, _ := lookupD(se.reply, "code")
		msg, _ := lookupD(se.reply, "errmsg")
		return bson.D{{Key: "code", Value: code}, {Key: "errmsg", Value: msg}}
	}
	_, fields := errorFields(err)
	return fields
}

// famKeyChange answers a findAndModify whose update changes the shard
// key: mongos' error outside a retryable write or transaction, else the
// document moved and the reply findAndModify gives (the document before,
// or after with new: true; a projection is not applied).
func (r *Router) famKeyChange(rq *request, sc *shardedColl, reply bson.D) (bson.D, error) {
	if _, retryable := rq.get("txnNumber"); !retryable {
		return nil, cmderr.New(cmderr.IllegalOperation, errMsgKeyUpdateTxn)
	}
	pre, post := keyChangeImages(reply)
	if err := r.moveDocument(rq, sc, pre, post); err != nil {
		return nil, err
	}
	v := pre
	if n, ok := rq.get("new"); ok && asBool(n) {
		v = post
	}
	out := bson.D{{Key: "lastErrorObject", Value: bson.D{{Key: "n", Value: int32(1)}, {Key: "updatedExisting", Value: true}}},
		{Key: "value", Value: v}, {Key: "ok", Value: 1.0}}
	r.cluster.sharding.noteMoved(rq, out)
	return out, nil
}

// movedWrite is the reply of a retryable write that moved a document, which
// a retry of it (same lsid and txnNumber) gets again, as mongos replays it
// from the write's history: the shard it first ran on no longer holds the
// document to match.
type movedWrite struct {
	number int64
	reply  bson.D
}

// noteMoved records the reply of a retryable write that moved a document.
func (ss *shardSet) noteMoved(rq *request, reply bson.D) {
	lsid, _ := rq.get("lsid")
	n, ok, _ := txnNumberOf(rq)
	if lsid == nil || !ok || rq.stxn != nil {
		return
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.moves == nil {
		ss.moves = map[string]movedWrite{}
	}
	ss.moves[value.Key(lsid)] = movedWrite{number: n, reply: reply}
}

// movedReply is the recorded reply when rq retries a retryable write that
// moved a document.
func (ss *shardSet) movedReply(rq *request) (bson.D, bool) {
	lsid, _ := rq.get("lsid")
	n, ok, _ := txnNumberOf(rq)
	if lsid == nil || !ok || rq.stxn != nil {
		return nil, false
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	m, found := ss.moves[value.Key(lsid)]
	if !found || m.number != n {
		return nil, false
	}
	return slices.Clone(m.reply), true
}
