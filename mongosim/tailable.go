package mongosim

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/query"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// Tailable cursors: a find with tailable: true on a capped collection
// stays open when it runs out of documents; each getMore returns the
// matching documents inserted since, waiting for them (awaitData) up to
// maxTimeMS.

// tailState is the part of a cursor that makes it tailable.
type tailState struct {
	db, coll string
	f        *query.Filter
	proj     *query.Projection
	await    bool
	last     uint64 // insertion number of the last document examined
}

// tailableFind opens a tailable find: the matching documents in natural
// order, then a cursor that stays open.
func tailableFind(r *request, coll string, f *query.Filter, proj *query.Projection, hasSort bool, batchSize int, singleBatch bool) (bson.D, error) {
	ts := &tailState{db: r.db, coll: coll, f: f, proj: proj}
	if v, ok := r.get("awaitData"); ok {
		ts.await = truthy(v)
	}
	if hasSort {
		return nil, cmderr.New(cmderr.BadValue, "error processing query: tailable cursors may only be sorted by {$natural: 1}")
	}
	var capped, empty bool
	_ = r.cluster.data.read(r.db, coll, func(c *collection) error {
		capped = c != nil && c.capped
		empty = c == nil || c.live == 0
		return nil
	})
	if !capped {
		return nil, cmderr.New(cmderr.BadValue, "error processing query: ns=%s.%s: tailable cursor requested on non capped collection", r.db, coll)
	}
	docs, err := r.cluster.data.tail(ts)
	if err != nil {
		return nil, err
	}
	if batchSize < 0 {
		batchSize = defaultFirstBatch
	}
	first, rest := splitBatch(docs, batchSize)
	ns := r.db + "." + coll
	var id int64
	// As mongod, a tailable cursor on an empty collection is dead: it has
	// no position to resume from.
	if !singleBatch && !empty {
		t := r.cluster.data.cursors
		id = t.open(ns, rest)
		t.mu.Lock()
		t.m[id].tail = ts
		t.mu.Unlock()
	}
	return bson.D{{Key: "cursor", Value: bson.D{
		{Key: "firstBatch", Value: toArray(first)},
		{Key: "id", Value: id},
		{Key: "ns", Value: ns},
	}}}, nil
}

// awaitContext bounds an awaitData getMore's wait for new data. As on
// mongod, getMore's maxTimeMS is that await time (default 1s; 0: no wait),
// counted from when the getMore starts waiting, so after a failCommand
// block rather than from its arrival.
func awaitContext(r *request) (context.Context, context.CancelFunc) {
	limit, _ := maxTimeArg(r) // validated on arrival
	if _, ok := r.get("maxTimeMS"); !ok {
		limit = defaultAwait
	}
	ctx, cancel := context.WithTimeout(r.raw.Context(), limit)
	// killOp ends the wait too (r.ctx's own deadline does not).
	stop := context.AfterFunc(r.ctx, func() {
		if r.killed() {
			cancel()
		}
	})
	return ctx, func() { stop(); cancel() }
}

// checkGetMoreMaxTime refuses maxTimeMS on a getMore of a cursor that is
// not awaitData, as mongod does: only an awaitData cursor has an await time
// for it to set.
func checkGetMoreMaxTime(r *request, c *cursor) error {
	if _, ok := r.get("maxTimeMS"); !ok || c.stream != nil || c.tail != nil && c.tail.await {
		return nil
	}
	return cmderr.New(cmderr.BadValue, "cannot set maxTimeMS on getMore command for a non-awaitData cursor")
}

// tail returns the matching documents inserted after ts.last and moves
// ts.last to the newest insertion.
func (s *storage) tail(ts *tailState) ([]bson.D, error) {
	var out []bson.D
	err := s.read(ts.db, ts.coll, func(c *collection) error {
		if c == nil {
			return cmderr.New(cmderr.CursorNotFound, "collection %s.%s dropped: tailable cursor killed", ts.db, ts.coll)
		}
		held := ts.last == 0
		for _, rec := range c.order {
			if rec != nil && rec.seq == ts.last {
				held = true
			}
			if rec == nil || rec.seq <= ts.last {
				continue
			}
			ok, err := ts.f.MatchErr(rec.doc)
			if err != nil {
				return err
			}
			if ok {
				d := value.CloneDoc(rec.doc)
				if ts.proj != nil {
					d = ts.proj.Apply(d)
				}
				out = append(out, d)
			}
		}
		if !held {
			// The document the cursor stands on was evicted (or deleted):
			// mongod's collection scan cannot restore its position.
			return cmderr.New(cmderr.CappedPositionLost, "CollectionScan died due to position in capped collection being deleted. Last seen record id: RecordId(%d)", ts.last)
		}
		ts.last = c.inserted
		return nil
	})
	return out, err
}

// tailGetMore answers a getMore on a tailable cursor: what is left of
// its results, else new documents, waiting for them with awaitData until
// maxTimeMS (default 1s) passes. The cursor stays open on an empty batch.
func tailGetMore(r *request, c *cursor, ns string, batchSize int) (bson.D, error) {
	ts := c.tail
	if len(c.docs) == 0 {
		ctx, cancel := awaitContext(r)
		defer cancel()
		for {
			_, wake := r.cluster.data.changes.head() // closed by the next write
			docs, err := r.cluster.data.tail(ts)
			if err != nil {
				r.cluster.data.cursors.remove(c.id)
				return nil, err
			}
			c.docs = docs
			if len(docs) > 0 || !ts.await {
				break
			}
			select {
			case <-wake:
				continue
			case <-ctx.Done():
			}
			break
		}
	}
	batch, rest := splitBatch(c.docs, batchSize)
	c.docs = rest
	return bson.D{{Key: "cursor", Value: bson.D{
		{Key: "nextBatch", Value: toArray(batch)},
		{Key: "id", Value: c.id},
		{Key: "ns", Value: ns},
	}}}, nil
}
