package mongosim

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/agg"
	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// Change streams: every insert, update, replace and delete is appended to
// an in-memory change log (the deployment's oplog, as far as change streams
// are concerned); an aggregate with a leading $changeStream opens a tailable
// cursor whose getMore returns the events after its position, waiting up to
// maxTimeMS (the driver's maxAwaitTimeMS) for new ones.

// Error codes used by change streams.
const (
	codeChangeStreamHistoryLost = 286
	codeChangeStreamNeedsRS     = 40573
)

// changeLogCap bounds the retained history. Resuming from a token older
// than what is kept answers ChangeStreamHistoryLost, as a rolled-over oplog
// does.
const changeLogCap = 10000

// defaultAwait is how long a getMore on a change stream waits for events
// when the driver sends no maxTimeMS (mongod's awaitData default).
const defaultAwait = time.Second

type changeKind uint8

const (
	changeInsert changeKind = iota
	changeUpdate
	changeReplace
	changeDelete
)

func (k changeKind) String() string {
	return [...]string{"insert", "update", "replace", "delete"}[k]
}

// change is one logged write. Stored documents are never mutated in place,
// so before and after are kept by reference; the event document is built
// when a stream reads it.
type change struct {
	seq           uint64
	kind          changeKind
	db, coll      string
	id            any
	before, after bson.D
	at            bson.Timestamp
	wall          time.Time
}

// changeLog is the deployment's history of writes, shared by all members.
type changeLog struct {
	mu      sync.Mutex
	now     func() time.Time
	changes []change // ascending seq; changes[0].seq is the oldest kept
	seq     uint64   // last assigned
	lastTS  bson.Timestamp
	wake    chan struct{} // closed and replaced on every append
}

func newChangeLog(now func() time.Time) *changeLog {
	return &changeLog{now: now, wake: make(chan struct{})}
}

// record appends a write. It is called with the collection's write lock
// held, so the log order is each collection's commit order. A nil log (a
// scratch collection, such as $out's staging copy) records nothing.
func (l *changeLog) record(kind changeKind, c *collection, before, after bson.D) {
	if l == nil {
		return
	}
	doc := after
	if doc == nil {
		doc = before
	}
	id, _ := value.Get(doc, "_id")
	l.mu.Lock()
	defer l.mu.Unlock()
	wall := l.now()
	ts := bson.Timestamp{T: uint32(wall.Unix())}
	if ts.T <= l.lastTS.T {
		ts = bson.Timestamp{T: l.lastTS.T, I: l.lastTS.I + 1}
	}
	l.lastTS = ts
	l.seq++
	l.changes = append(l.changes, change{seq: l.seq, kind: kind, db: c.db, coll: c.name, id: id, before: before, after: after, at: ts, wall: wall})
	if len(l.changes) > changeLogCap {
		l.changes = append([]change(nil), l.changes[len(l.changes)-changeLogCap/2:]...)
	}
	close(l.wake)
	l.wake = make(chan struct{})
}

// clusterTime is the deployment's logical time: the timestamp of the last
// write, or the clock's when nothing was written yet.
func (l *changeLog) clusterTime() bson.Timestamp {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lastTS.T == 0 {
		return bson.Timestamp{T: uint32(l.now().Unix()), I: 0}
	}
	return l.lastTS
}

// head returns the last sequence number and the channel closed by the next
// append.
func (l *changeLog) head() (uint64, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seq, l.wake
}

// after returns up to n changes with seq > pos (n <= 0: all), and whether
// pos is still covered by the retained history.
func (l *changeLog) after(pos uint64, n int) ([]change, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.changes) > 0 && pos+1 < l.changes[0].seq {
		return nil, false
	}
	i := 0
	if len(l.changes) > 0 {
		i = int(pos + 1 - l.changes[0].seq)
	}
	if i < 0 {
		i = 0
	}
	if i >= len(l.changes) {
		return nil, true
	}
	out := l.changes[i:]
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	return append([]change(nil), out...), true
}

// before returns the position just before the first change at or after
// ts, and false when changes before ts have been dropped from the history
// (so some at or after ts may be lost too).
func (l *changeLog) before(ts bson.Timestamp) (uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, ch := range l.changes {
		if !ch.at.Before(ts) {
			// Timestamps strictly increase: a dropped change is before
			// ch.at, and so before ts unless ts is earlier than ch.
			return ch.seq - 1, i > 0 || ch.seq == 1 || ch.at.Equal(ts)
		}
	}
	return l.seq, true
}

// resumeToken encodes a log position as {_data: hex}: fixed-width hex, so
// tokens compare in order as strings, as the server's do.
func resumeToken(seq uint64) bson.D {
	return bson.D{{Key: "_data", Value: fmt.Sprintf("82%016X", seq)}}
}

// parseResumeToken decodes a token made by resumeToken.
func parseResumeToken(v any) (uint64, error) {
	d, ok := v.(bson.D)
	if !ok {
		return 0, cmderr.New(cmderr.TypeMismatch, "resume token must be an object, got %s", typeNameOf(v))
	}
	data, _ := value.Get(d, "_data")
	s, ok := data.(string)
	if !ok || len(s) != 18 || !strings.HasPrefix(s, "82") {
		return 0, cmderr.New(cmderr.BadValue, "invalid resume token: %s", shellString(v))
	}
	b, err := hex.DecodeString(s[2:])
	if err != nil {
		return 0, cmderr.New(cmderr.BadValue, "invalid resume token: %s", shellString(v))
	}
	var seq uint64
	for _, x := range b {
		seq = seq<<8 | uint64(x)
	}
	return seq, nil
}

// streamState is the part of a cursor that makes it a change stream.
type streamState struct {
	db, coll     string // coll "" → whole database; db "" → whole cluster
	updateLookup bool
	rest         *agg.Pipeline // the stages after $changeStream, or nil
	pos          uint64        // last change examined
}

// isChangeStream reports whether a pipeline starts with $changeStream.
func isChangeStream(pipeline bson.A) bool {
	if len(pipeline) == 0 {
		return false
	}
	d, ok := pipeline[0].(bson.D)
	return ok && len(d) > 0 && d[0].Key == "$changeStream"
}

// cmdChangeStream opens a change stream: coll is the aggregate's collection
// ("" for aggregate: 1).
func cmdChangeStream(r *request, coll string, pipeline bson.A, batchSize int) (bson.D, error) {
	if r.cluster.setName == "" {
		return nil, cmderr.New(codeChangeStreamNeedsRS, "The $changeStream stage is only supported on replica sets")
	}
	opts, ok := pipeline[0].(bson.D)[0].Value.(bson.D)
	if !ok {
		return nil, cmderr.New(cmderr.TypeMismatch, "the $changeStream stage specification must be an object")
	}
	st := &streamState{db: r.db, coll: coll}
	var allCluster bool
	var resume any
	var startAt *bson.Timestamp
	for _, e := range opts {
		switch e.Key {
		case "fullDocument":
			switch e.Value {
			case "default":
			case "updateLookup":
				st.updateLookup = true
			default:
				return nil, cmderr.Unsupported(fmt.Sprintf("$changeStream fullDocument %s", shellString(e.Value)))
			}
		case "fullDocumentBeforeChange":
			if e.Value != "off" {
				return nil, cmderr.Unsupported("$changeStream fullDocumentBeforeChange (pre-images)")
			}
		case "allChangesForCluster":
			allCluster = truthy(e.Value)
		case "resumeAfter", "startAfter":
			if resume != nil {
				return nil, cmderr.New(50865, "Only one type of resume option is allowed, but multiple were found")
			}
			resume = e.Value
		case "startAtOperationTime":
			ts, ok := e.Value.(bson.Timestamp)
			if !ok {
				return nil, typeErr("$changeStream.startAtOperationTime", "timestamp", e.Value)
			}
			startAt = &ts
		case "showExpandedEvents":
			if truthy(e.Value) {
				return nil, cmderr.Unsupported("$changeStream showExpandedEvents")
			}
		default:
			return nil, cmderr.New(40415, "BSON field '$changeStream.%s' is an unknown field.", e.Key)
		}
	}
	switch {
	case allCluster && (r.db != "admin" || coll != ""):
		return nil, cmderr.New(cmderr.InvalidOptions, "A $changeStream with 'allChangesForCluster:true' may only be opened on the 'admin' database, and with no collection name")
	case allCluster:
		st.db = ""
	case r.db == "admin" || r.db == "config" || r.db == "local":
		return nil, cmderr.New(cmderr.InvalidNamespace, "$changeStream may not be opened on the internal %s database", r.db)
	}
	for i, s := range pipeline[1:] {
		if d, ok := s.(bson.D); ok && len(d) > 0 && d[0].Key == "$changeStream" {
			return nil, cmderr.New(40602, "$changeStream is only valid as the first stage in a pipeline (found at position %d)", i+1)
		}
	}
	if len(pipeline) > 1 {
		p, err := agg.Compile(pipeline[1:])
		if err != nil {
			return nil, err
		}
		if p.HasWriteStage() {
			return nil, cmderr.New(cmderr.IllegalOperation, "$out and $merge are not allowed in a change stream pipeline")
		}
		st.rest = p
	}
	if resume != nil && startAt != nil {
		return nil, cmderr.New(40674, "Only one type of resume option is allowed, but multiple were found.")
	}
	log := r.cluster.data.changes
	if startAt != nil {
		pos, ok := log.before(*startAt)
		if !ok {
			return nil, cmderr.New(codeChangeStreamHistoryLost, "Resume of change stream was not possible, as the resume point may no longer be in the oplog.")
		}
		st.pos = pos
	} else if resume != nil {
		seq, err := parseResumeToken(resume)
		if err != nil {
			return nil, err
		}
		st.pos = seq
	} else {
		st.pos, _ = log.head()
	}
	// The first batch has what is already there (after a resume); a new
	// stream answers at once with an empty batch.
	batch, err := st.next(r, log, batchSize)
	if err != nil {
		return nil, err
	}
	ns := r.db + "." + coll
	if coll == "" {
		ns = r.db + ".$cmd.aggregate"
	}
	id := r.cluster.data.cursors.openStream(ns, st)
	return bson.D{{Key: "cursor", Value: bson.D{
		{Key: "firstBatch", Value: toArray(batch)},
		{Key: "postBatchResumeToken", Value: st.token(batch)},
		{Key: "id", Value: id},
		{Key: "ns", Value: ns},
	}}}, nil
}

// openStream registers a change stream cursor.
func (t *cursorTable) openStream(ns string, st *streamState) int64 {
	id := t.open(ns, nil)
	t.mu.Lock()
	t.m[id].stream = st
	t.mu.Unlock()
	return id
}

// token is the postBatchResumeToken after batch: the last event's, or the
// stream's position when the batch is empty.
func (st *streamState) token(batch []bson.D) bson.D {
	if len(batch) > 0 {
		if id, ok := value.Get(batch[len(batch)-1], "_id"); ok {
			if d, ok := id.(bson.D); ok {
				return d
			}
		}
	}
	return resumeToken(st.pos)
}

// next takes the events after the stream's position, up to batchSize
// (< 0: no count limit), without waiting.
func (st *streamState) next(r *request, log *changeLog, batchSize int) ([]bson.D, error) {
	var out []bson.D
	for batchSize < 0 || len(out) < batchSize {
		changes, ok := log.after(st.pos, 256)
		if !ok {
			return nil, cmderr.New(codeChangeStreamHistoryLost, "Resume of change stream was not possible, as the resume point may no longer be in the oplog.")
		}
		if len(changes) == 0 {
			break
		}
		for _, ch := range changes {
			if batchSize >= 0 && len(out) >= batchSize {
				break
			}
			st.pos = ch.seq
			if !st.covers(ch) {
				continue
			}
			ev := st.event(r.cluster.data, ch)
			if st.rest != nil {
				res, err := st.rest.Run(r.ctx, []bson.D{ev}, agg.Env{DB: r.db, Catalog: catalog{r.cluster.data}, Now: r.now})
				if err != nil {
					return nil, err
				}
				if len(res) == 0 {
					continue
				}
				ev = res[0]
			}
			out = append(out, ev)
		}
	}
	return out, nil
}

// covers reports whether a change is in the stream's namespace.
func (st *streamState) covers(ch change) bool {
	if strings.HasPrefix(ch.coll, "system.") {
		return false
	}
	switch {
	case st.db == "":
		return ch.db != "admin" && ch.db != "config" && ch.db != "local"
	case st.coll == "":
		return ch.db == st.db
	}
	return ch.db == st.db && ch.coll == st.coll
}

// event builds the change event document.
func (st *streamState) event(s *storage, ch change) bson.D {
	ev := bson.D{
		{Key: "_id", Value: resumeToken(ch.seq)},
		{Key: "operationType", Value: ch.kind.String()},
		{Key: "clusterTime", Value: ch.at},
		{Key: "wallTime", Value: bson.NewDateTimeFromTime(ch.wall)},
	}
	switch ch.kind {
	case changeInsert, changeReplace:
		ev = append(ev, bson.E{Key: "fullDocument", Value: value.CloneDoc(ch.after)})
	case changeUpdate:
		if st.updateLookup {
			var cur any // null when the document is gone
			_ = s.read(ch.db, ch.coll, func(c *collection) error {
				if c != nil {
					if rec := c.byID[keyOf(ch.id)]; rec != nil {
						cur = value.CloneDoc(rec.doc)
					}
				}
				return nil
			})
			ev = append(ev, bson.E{Key: "fullDocument", Value: cur})
		}
	}
	ev = append(ev,
		bson.E{Key: "ns", Value: bson.D{{Key: "db", Value: ch.db}, {Key: "coll", Value: ch.coll}}},
		bson.E{Key: "documentKey", Value: bson.D{{Key: "_id", Value: value.Clone(ch.id)}}},
	)
	if ch.kind == changeUpdate {
		ev = append(ev, bson.E{Key: "updateDescription", Value: updateDescription(ch.before, ch.after)})
	}
	return ev
}

// updateDescription is the difference between two versions of a document
// as mongod reports it: a changed field inside a subdocument at its dotted
// path, a changed or appended array element as "arr.N", a shrunk array in
// truncatedArrays, and a value whose type changed whole.
func updateDescription(before, after bson.D) bson.D {
	var d updateDiff
	d.updated, d.removed, d.truncated = bson.D{}, bson.A{}, bson.A{}
	d.doc("", before, after)
	return bson.D{
		{Key: "updatedFields", Value: d.updated},
		{Key: "removedFields", Value: d.removed},
		{Key: "truncatedArrays", Value: d.truncated},
	}
}

type updateDiff struct {
	updated   bson.D
	removed   bson.A
	truncated bson.A
}

func (d *updateDiff) doc(prefix string, before, after bson.D) {
	for _, e := range before {
		if _, ok := value.Get(after, e.Key); !ok {
			d.removed = append(d.removed, prefix+e.Key)
		}
	}
	for _, e := range after {
		old, ok := value.Get(before, e.Key)
		if !ok {
			d.updated = append(d.updated, bson.E{Key: prefix + e.Key, Value: value.Clone(e.Value)})
			continue
		}
		d.value(prefix+e.Key, old, e.Value)
	}
}

// value reports the change of one field or element at path.
func (d *updateDiff) value(path string, old, cur any) {
	if sameStored(old, cur) {
		return
	}
	switch c := cur.(type) {
	case bson.D:
		if o, ok := old.(bson.D); ok {
			d.doc(path+".", o, c)
			return
		}
	case bson.A:
		if o, ok := old.(bson.A); ok {
			if len(c) < len(o) {
				d.truncated = append(d.truncated, bson.D{{Key: "field", Value: path}, {Key: "newSize", Value: int32(len(c))}})
			}
			for i, x := range c {
				p := path + "." + strconv.Itoa(i)
				if i >= len(o) {
					d.updated = append(d.updated, bson.E{Key: p, Value: value.Clone(x)})
					continue
				}
				d.value(p, o[i], x)
			}
			return
		}
	}
	d.updated = append(d.updated, bson.E{Key: path, Value: value.Clone(cur)})
}

// sameStored is equality that also tells apart numeric types (1 and 1.0),
// as a stored document does.
func sameStored(a, b any) bool {
	return keyOf(a) == keyOf(b) && bsonTypeName(a) == bsonTypeName(b)
}

// streamGetMore answers a getMore on a change stream cursor: the events
// after its position, waiting for one until maxTimeMS (default 1s) passes
// or the connection or server closes. A cursor killed meanwhile is
// noticed at the next write or when the wait ends.
func streamGetMore(r *request, c *cursor, ns string, batchSize int) (bson.D, error) {
	st := c.stream
	log := r.cluster.data.changes
	ctx := r.ctx
	if _, ok := r.get("maxTimeMS"); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultAwait)
		defer cancel()
	}
	var batch []bson.D
	for {
		_, wake := log.head()
		var err error
		if batch, err = st.next(r, log, batchSize); err != nil {
			return nil, err
		}
		if len(batch) > 0 || r.cluster.data.cursors.get(c.id) == nil {
			break
		}
		select {
		case <-wake:
			continue
		case <-ctx.Done():
		}
		break
	}
	return bson.D{{Key: "cursor", Value: bson.D{
		{Key: "nextBatch", Value: toArray(batch)},
		{Key: "postBatchResumeToken", Value: st.token(batch)},
		{Key: "id", Value: c.id},
		{Key: "ns", Value: ns},
	}}}, nil
}
