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
	codeChangeStreamHistoryLost   = 286
	codeChangeStreamNeedsRS       = 40573
	codeChangeStreamFatalError    = 280
	codeInvalidResumeToken        = 260
	codeNoMatchingDocument        = 47
	labelNonResumableChangeStream = "NonResumableChangeStreamError"
	labelResumableChangeStream    = "ResumableChangeStreamError"
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
	changeDrop         // a collection dropped (also each one of a dropped database)
	changeRename       // a collection renamed: db.coll → toDB.toColl
	changeDropDatabase // after the drop events of its collections
	changeCreate       // a collection created (showExpandedEvents only)
	// DDL reported only with showExpandedEvents, each with its
	// operationDescription in change.desc.
	changeCreateIndexes
	changeDropIndexes
	changeModify // collMod; change.stateBefore is its stateBeforeChange
	changeShardCollection
)

func (k changeKind) String() string {
	return [...]string{"insert", "update", "replace", "delete", "drop", "rename", "dropDatabase", "create",
		"createIndexes", "dropIndexes", "modify", "shardCollection"}[k]
}

// expandedOnly reports kinds a stream reports only with showExpandedEvents.
func (k changeKind) expandedOnly() bool { return k >= changeCreate }

// ofDocument reports kinds that change one document; the others are DDL.
func (k changeKind) ofDocument() bool { return k <= changeDelete }

// change is one logged write. Stored documents are never mutated in place,
// so before and after are kept by reference; the event document is built
// when a stream reads it.
type change struct {
	seq           uint64
	kind          changeKind
	images        bool // the collection records pre- and post-images (changeStreamPreAndPostImages)
	db, coll      string
	uuid          bson.Binary
	id            any
	before, after bson.D
	ddl           *ddlDetail // nil but for catalog changes (detail)
	at            bson.Timestamp
	wall          time.Time
}

// ddlDetail is what only some catalog changes carry, apart from the
// change itself: the log holds 10 000 changes, nearly all of documents,
// and writing one (~300 bytes with these inline) was most of logging it.
type ddlDetail struct {
	toDB, toColl string // changeRename's target
	view         bson.D // a view's {viewOn, pipeline}: its create and drop carry no collectionUUID
	desc         bson.D // operationDescription of an expanded DDL event
	stateBefore  bson.D // stateBeforeChange of a modify event
}

// noDetail is the detail of a change without any; never written.
var noDetail ddlDetail

// detail is ch's ddlDetail, empty when it has none.
func (ch *change) detail() *ddlDetail {
	if ch.ddl != nil {
		return ch.ddl
	}
	return &noDetail
}

// changeLog is the deployment's history of writes, shared by all members.
type changeLog struct {
	mu  sync.Mutex
	now func() time.Time
	// ring holds the kept changes in ascending seq: kept of them from
	// ring[first] on, wrapping around once the ring is full (at).
	ring   []change
	first  int
	kept   int
	seq    uint64 // last assigned
	lastTS bson.Timestamp
	clock  *logicalClock // the deployment's cluster time; each change takes a tick
	wake   chan struct{} // closed by the next append; nil until head asks for it
}

func newChangeLog(now func() time.Time, clock *logicalClock) *changeLog {
	return &changeLog{now: now, clock: clock}
}

// recordDDL appends a catalog change: drop, rename (to toDB.toColl),
// dropDatabase (coll "") or create. The caller holds the collection's write
// lock, if there is one, so no write of the collection is logged after its
// drop.
func (l *changeLog) recordDDL(kind changeKind, db, coll string, uuid bson.Binary, toDB, toColl string) {
	if l == nil {
		return
	}
	var ddl *ddlDetail
	if toDB != "" || toColl != "" {
		ddl = &ddlDetail{toDB: toDB, toColl: toColl}
	}
	l.append(change{kind: kind, db: db, coll: coll, uuid: uuid, ddl: ddl})
}

// recordExpanded appends a DDL change reported only to streams with
// showExpandedEvents (createIndexes, dropIndexes, modify): its
// operationDescription and, for modify, its stateBeforeChange. The caller
// holds c's write lock.
func (c *collection) recordExpanded(kind changeKind, desc, stateBefore bson.D) {
	if c.changes == nil {
		return
	}
	c.changes.append(change{kind: kind, db: c.db, coll: c.name, uuid: c.uuid, ddl: &ddlDetail{desc: desc, stateBefore: stateBefore}})
}

// recordShardCollection reports a shardCollection to the primary shard's
// streams with showExpandedEvents, as mongod's shardCollection event.
func (s *storage) recordShardCollection(ctx context.Context, db, coll string, key bson.D, unique bool) {
	_ = s.write(ctx, db, coll, false, func(c *collection) error {
		if c != nil {
			c.recordExpanded(changeShardCollection, bson.D{{Key: "shardKey", Value: value.CloneDoc(key)}, {Key: "unique", Value: unique}}, nil)
		}
		return nil
	})
}

func (l *changeLog) append(ch change) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch.wall, ch.at = l.now(), l.clock.tick()
	l.add(ch)
	l.wakeReaders()
}

// add appends ch, stamped, under l.mu.
func (l *changeLog) add(ch change) {
	l.lastTS = ch.at
	l.seq++
	ch.seq = l.seq
	if l.kept == changeLogCap {
		// Forget the older half, as a rolled-over oplog; the next writes
		// reuse its slots. Copying the newer half down instead was 4% of
		// the server's CPU inserting 1 000-document batches.
		l.first = (l.first + changeLogCap/2) % changeLogCap
		l.kept -= changeLogCap / 2
	}
	if len(l.ring) < changeLogCap { // still filling: first is 0
		l.ring = append(l.ring, ch)
	} else {
		*l.at(l.kept) = ch
	}
	l.kept++
}

// at is the i-th oldest kept change, under l.mu.
func (l *changeLog) at(i int) *change {
	j := l.first + i
	if j >= len(l.ring) {
		j -= len(l.ring)
	}
	return &l.ring[j]
}

// wakeReaders wakes the change streams waiting for a change, under l.mu.
func (l *changeLog) wakeReaders() {
	if l.wake != nil {
		// Made only when a change stream waits (head): an insert of
		// 1 000 documents spent 4% of its server CPU making channels
		// nobody waited on.
		close(l.wake)
		l.wake = nil
	}
}

// pendingChange is a write of a collection's documents that waits, with
// the collection's lock held, to be logged with the rest of its batch.
type pendingChange struct {
	kind          changeKind
	before, after bson.D
}

// logChange logs a write of c's documents: at once, or, inside an insert
// batch (beginChangeBatch), when the batch ends.
func (c *collection) logChange(kind changeKind, before, after bson.D) {
	if c.batching {
		c.pending = append(c.pending, pendingChange{kind: kind, before: before, after: after})
		return
	}
	c.changes.recordBatch(c, []pendingChange{{kind: kind, before: before, after: after}})
}

// beginChangeBatch holds back the change log entries of c's writes until
// flushChanges, which the caller runs before releasing c's write lock
// (so the log keeps the collection's commit order). Logging each insert
// of a batch took the log's lock and read the clock twice per document:
// 10% of the server's CPU inserting 1 000-document batches.
func (c *collection) beginChangeBatch() { c.batching = c.changes != nil }

// flushChanges logs the writes held back since beginChangeBatch, in
// order, as recordBatch does.
func (c *collection) flushChanges() {
	c.batching = false
	if len(c.pending) == 0 {
		return
	}
	c.changes.recordBatch(c, c.pending)
	clear(c.pending) // drop the references to documents
	c.pending = c.pending[:0]
}

// recordBatch logs writes of c's documents, in order, under one hold of
// the log's lock: one wall clock reading for all of them (as mongod logs a
// batch of inserts with one wall time) and consecutive cluster times, each
// later than the one before, as one tick each would give. It is called
// with c's write lock held, so the log order is each collection's commit
// order. A nil log (a scratch collection, such as $out's staging copy)
// records nothing.
func (l *changeLog) recordBatch(c *collection, writes []pendingChange) {
	if l == nil || len(writes) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	wall := l.now()
	at := l.clock.tickN(len(writes))
	for i, w := range writes {
		if i > 0 {
			at = nextTick(at)
		}
		doc := w.after
		if doc == nil {
			doc = w.before
		}
		id, _ := value.Get(doc, "_id")
		l.add(change{kind: w.kind, db: c.db, coll: c.name, uuid: c.uuid, id: id, before: w.before, after: w.after,
			images: c.prePostImages, at: at, wall: wall})
	}
	l.wakeReaders()
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
	if l.wake == nil {
		l.wake = make(chan struct{})
	}
	return l.seq, l.wake
}

// after returns up to n changes with seq > pos (n <= 0: all), and whether
// pos is still covered by the retained history.
func (l *changeLog) after(pos uint64, n int) ([]change, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.kept > 0 && pos+1 < l.at(0).seq {
		return nil, false
	}
	i := 0
	if l.kept > 0 {
		i = int(pos + 1 - l.at(0).seq)
	}
	if i < 0 {
		i = 0
	}
	if i >= l.kept {
		return nil, true
	}
	end := l.kept
	if n > 0 && end-i > n {
		end = i + n
	}
	out := make([]change, 0, end-i)
	for ; i < end; i++ {
		out = append(out, *l.at(i))
	}
	return out, true
}

// before returns the position just before the first change at or after
// ts, and false when changes before ts have been dropped from the history
// (so some at or after ts may be lost too).
func (l *changeLog) before(ts bson.Timestamp) (uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.kept {
		if ch := l.at(i); !ch.at.Before(ts) {
			// Timestamps strictly increase: a dropped change is before
			// ch.at, and so before ts unless ts is earlier than ch.
			return ch.seq - 1, i > 0 || ch.seq == 1 || ch.at.Equal(ts)
		}
	}
	return l.seq, true
}

// lookup returns the change with sequence number seq, if still kept.
func (l *changeLog) lookup(seq uint64) (change, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.kept == 0 || seq < l.at(0).seq {
		return change{}, false
	}
	i := int(seq - l.at(0).seq)
	if i >= l.kept {
		return change{}, false
	}
	return *l.at(i), true
}

// resumeToken encodes a log position as {_data: hex}: fixed-width hex, so
// tokens compare in order as strings, as the server's do.
func resumeToken(seq uint64) bson.D {
	return bson.D{{Key: "_data", Value: fmt.Sprintf("82%016X", seq)}}
}

// invalidateToken is the token of the invalidate event that follows change
// seq: it sorts after seq's token and before seq+1's, and is told apart by
// its suffix (mongod marks it fromInvalidate).
func invalidateToken(seq uint64) bson.D {
	return bson.D{{Key: "_data", Value: fmt.Sprintf("82%016X01", seq)}}
}

// parseResumeToken decodes a token made by resumeToken, invalidateToken or
// fragmentToken (fragment > 0).
func parseResumeToken(v any) (seq uint64, fromInvalidate bool, fragment int, err error) {
	d, ok := v.(bson.D)
	if !ok {
		return 0, false, 0, cmderr.New(cmderr.TypeMismatch, "resume token must be an object, got %s", typeNameOf(v))
	}
	data, _ := value.Get(d, "_data")
	s, ok := data.(string)
	bad := cmderr.New(cmderr.BadValue, "invalid resume token: %s", shellString(v))
	switch {
	case ok && len(s) == 20 && strings.HasSuffix(s, "01"):
		s, fromInvalidate = s[:18], true
	case ok && len(s) == 24 && s[18:20] == "02":
		n, err := strconv.ParseUint(s[20:], 16, 16)
		if err != nil || n == 0 {
			return 0, false, 0, bad
		}
		s, fragment = s[:18], int(n)
	}
	if !ok || len(s) != 18 || !strings.HasPrefix(s, "82") {
		return 0, false, 0, bad
	}
	b, err := hex.DecodeString(s[2:])
	if err != nil {
		return 0, false, 0, bad
	}
	for _, x := range b {
		seq = seq<<8 | uint64(x)
	}
	return seq, fromInvalidate, fragment, nil
}

// streamState is the part of a cursor that makes it a change stream.
type streamState struct {
	db, coll     string        // coll "" → whole database; db "" → whole cluster
	fullDocument string        // "default", "updateLookup", "whenAvailable" or "required"
	beforeChange string        // fullDocumentBeforeChange: "off", "whenAvailable" or "required"
	expanded     bool          // showExpandedEvents
	rest         *agg.Pipeline // the stages after $changeStream, or nil
	env          opEnv         // the aggregate's collation (or the collection's default) and let variables, for rest
	pos          uint64        // last change examined
	invalidating *change       // the change that invalidated the stream, before its invalidate event is sent
	closing      bool          // the invalidate event is queued in pending (or was filtered out)
	done         bool          // the invalidate event was sent: the cursor is closed
	split        bool          // $changeStreamSplitLargeEvent: large events come as fragments
	pending      []bson.D      // events (fragments) examined but not yet returned
	skipFrags    int           // resumed from a fragment: the next event's first fragments were sent
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
func cmdChangeStream(r *request, coll string, pipeline bson.A, batchSize int, env opEnv) (bson.D, error) {
	if r.cluster.setName == "" {
		return nil, cmderr.New(codeChangeStreamNeedsRS, "The $changeStream stage is only supported on replica sets")
	}
	if r.rc.level != "" && r.rc.level != "majority" {
		// mongod reads change streams at majority and refuses any other
		// explicit level.
		return nil, cmderr.New(cmderr.InvalidOptions, "Read concern level \"%s\" is not supported for change streams. Only read concern level \"majority\" is supported.", r.rc.level)
	}
	opts, ok := pipeline[0].(bson.D)[0].Value.(bson.D)
	if !ok {
		return nil, cmderr.New(cmderr.TypeMismatch, "the $changeStream stage specification must be an object")
	}
	st := &streamState{db: r.db, coll: coll, fullDocument: "default", beforeChange: "off", env: env}
	start, err := st.parseOptions(r, opts)
	if err != nil {
		return nil, err
	}
	if err := st.compileStages(pipeline[1:]); err != nil {
		return nil, err
	}
	log := r.cluster.data.changes
	if err := st.position(log, start); err != nil {
		return nil, err
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
	var id int64
	if !st.done {
		id = r.cluster.data.cursors.openStream(ns, st)
	}
	return bson.D{{Key: "cursor", Value: bson.D{
		{Key: "firstBatch", Value: toArray(batch)},
		{Key: "postBatchResumeToken", Value: st.token(batch)},
		{Key: "id", Value: id},
		{Key: "ns", Value: ns},
	}}}, nil
}

// streamStart is where a change stream starts: after a resume token
// (resumeAfter or startAfter, named by resumeKey) or at an operation time.
type streamStart struct {
	resume    any
	resumeKey string
	at        *bson.Timestamp
}

// parseOptions reads the $changeStream stage's options into st and the
// stream's start, and checks the namespace it may be opened on.
func (st *streamState) parseOptions(r *request, opts bson.D) (streamStart, error) {
	var allCluster bool
	var start streamStart
	for _, e := range opts {
		switch e.Key {
		case "fullDocument":
			switch e.Value {
			case "default", "updateLookup", "whenAvailable", "required":
				st.fullDocument = e.Value.(string)
			default:
				return start, cmderr.New(cmderr.BadValue, "unknown full document mode: %s", shellString(e.Value))
			}
		case "fullDocumentBeforeChange":
			switch e.Value {
			case "off", "whenAvailable", "required":
				st.beforeChange = e.Value.(string)
			default:
				return start, cmderr.New(cmderr.BadValue, "unknown fullDocumentBeforeChange mode: %s", shellString(e.Value))
			}
		case "allChangesForCluster":
			allCluster = truthy(e.Value)
		case "resumeAfter", "startAfter":
			if start.resume != nil {
				return start, cmderr.New(50865, "Only one type of resume option is allowed, but multiple were found")
			}
			start.resume, start.resumeKey = e.Value, e.Key
		case "startAtOperationTime":
			ts, ok := e.Value.(bson.Timestamp)
			if !ok {
				return start, typeErr("$changeStream.startAtOperationTime", "timestamp", e.Value)
			}
			start.at = &ts
		case "showExpandedEvents":
			st.expanded = truthy(e.Value)
		default:
			return start, cmderr.New(40415, "BSON field '$changeStream.%s' is an unknown field.", e.Key)
		}
	}
	switch {
	case allCluster && (r.db != "admin" || st.coll != ""):
		return start, cmderr.New(cmderr.InvalidOptions, "A $changeStream with 'allChangesForCluster:true' may only be opened on the 'admin' database, and with no collection name")
	case allCluster:
		st.db = ""
	case r.db == "admin" || r.db == "config" || r.db == "local":
		return start, cmderr.New(cmderr.InvalidNamespace, "$changeStream may not be opened on the internal %s database", r.db)
	}
	return start, nil
}

// compileStages compiles the stages after $changeStream (a
// $changeStreamSplitLargeEvent last is the stream's own), refusing another
// $changeStream and the write stages.
func (st *streamState) compileStages(stages bson.A) error {
	for i, s := range stages {
		if d, ok := s.(bson.D); ok && len(d) > 0 && d[0].Key == "$changeStream" {
			return cmderr.New(40602, "$changeStream is only valid as the first stage in a pipeline (found at position %d)", i+1)
		}
	}
	rest, split, err := takeSplitStage(stages)
	if err != nil {
		return err
	}
	st.split = split
	if len(rest) > 0 {
		p, err := agg.Compile(rest)
		if err != nil {
			return err
		}
		if p.HasWriteStage() {
			return cmderr.New(cmderr.IllegalOperation, "$out and $merge are not allowed in a change stream pipeline")
		}
		st.rest = p
	}
	return nil
}

// position places the stream in the change log: at an operation time,
// after a resume token (a split event's remaining fragments first; the
// invalidate again when resuming after the event that invalidated it), or
// at the log's head for a new stream.
func (st *streamState) position(log *changeLog, start streamStart) error {
	if start.resume != nil && start.at != nil {
		return cmderr.New(40674, "Only one type of resume option is allowed, but multiple were found.")
	}
	if start.at != nil {
		pos, ok := log.before(*start.at)
		if !ok {
			return cmderr.New(codeChangeStreamHistoryLost, "Resume of change stream was not possible, as the resume point may no longer be in the oplog.")
		}
		st.pos = pos
	} else if start.resume != nil {
		seq, fromInvalidate, fragment, err := parseResumeToken(start.resume)
		if err != nil {
			return err
		}
		if fromInvalidate && start.resumeKey == "resumeAfter" {
			return cmderr.New(codeInvalidResumeToken, "Attempting to resume a change stream using 'resumeAfter' is not allowed from an invalidate notification.")
		}
		if fragment > 0 && !st.split {
			return cmderr.New(codeChangeStreamFatalError, "Attempting to resume a change stream from a split event fragment, but the pipeline has no %s", splitStageName)
		}
		st.pos = seq
		if fragment > 0 {
			// The rest of that event's fragments come first.
			st.pos, st.skipFrags = seq-1, fragment
		}
		// Resuming after the event that invalidated the stream gives
		// the invalidate event again; startAfter the invalidate starts
		// a new stream after it.
		if ch, ok := log.lookup(seq); ok && !fromInvalidate && st.covers(ch) && st.invalidatedBy(ch) {
			st.invalidating = &ch
		}
	} else {
		st.pos, _ = log.head()
	}
	return nil
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
// (< 0: no count limit) and maxBatchBytes, without waiting. After the
// event that invalidates the stream comes the invalidate event, and then
// nothing: st.done.
func (st *streamState) next(r *request, log *changeLog, batchSize int) ([]bson.D, error) {
	var out []bson.D
	bytes := 0
	for !st.done && (batchSize < 0 || len(out) < batchSize) {
		if len(st.pending) > 0 {
			s := bsonSize(st.pending[0])
			if len(out) > 0 && bytes+s > maxBatchBytes {
				break
			}
			out, bytes, st.pending = append(out, st.pending[0]), bytes+s, st.pending[1:]
			continue
		}
		if st.closing {
			st.done = true
			break
		}
		if err := st.fill(r, log); err != nil {
			return nil, err
		}
		if len(st.pending) == 0 && !st.closing && st.invalidating == nil {
			break // nothing new
		}
	}
	return out, nil
}

// fill examines the changes after the stream's position until one gives
// events (queued in pending) or the log is used up; after an invalidating
// change it queues the invalidate event and marks the stream closing.
func (st *streamState) fill(r *request, log *changeLog) error {
	if ch := st.invalidating; ch != nil {
		ev, keep, err := st.transform(r, bson.D{
			{Key: "_id", Value: invalidateToken(ch.seq)},
			{Key: "operationType", Value: "invalidate"},
			{Key: "clusterTime", Value: ch.at},
			{Key: "wallTime", Value: bson.NewDateTimeFromTime(ch.wall)},
		})
		if err != nil {
			return err
		}
		if keep {
			st.pending = append(st.pending, ev)
		}
		st.invalidating, st.closing = nil, true
		return nil
	}
	for {
		changes, ok := log.after(st.pos, 256)
		if !ok {
			return cmderr.New(codeChangeStreamHistoryLost, "Resume of change stream was not possible, as the resume point may no longer be in the oplog.")
		}
		if len(changes) == 0 {
			return nil
		}
		if err := st.examine(r, changes); err != nil || len(st.pending) > 0 || st.invalidating != nil {
			return err
		}
	}
}

// examine turns changes into the stream's events, stopping after the
// first that gives events or invalidates the stream.
func (st *streamState) examine(r *request, changes []change) error {
	for _, ch := range changes {
		st.pos = ch.seq
		if !st.covers(ch) {
			continue
		}
		ev, err := st.event(r.cluster.data, ch)
		if err != nil {
			return err
		}
		ev, keep, err := st.transform(r, ev)
		if err != nil {
			return err
		}
		if keep {
			frags, err := splitLargeEvent(ev, ch.seq, st.split)
			if err != nil {
				return err
			}
			if st.skipFrags > 0 {
				frags = frags[min(st.skipFrags, len(frags)):]
				st.skipFrags = 0
			}
			st.pending = append(st.pending, frags...)
		}
		if st.invalidatedBy(ch) {
			st.invalidating = &ch
		}
		if len(st.pending) > 0 || st.invalidating != nil {
			return nil
		}
	}
	return nil
}

// transform runs the stream's own stages on an event; keep is false when
// they filtered it out. As mongod, an event whose _id (its resume token)
// the stages changed is a fatal error: the stream could not be resumed.
func (st *streamState) transform(r *request, ev bson.D) (bson.D, bool, error) {
	if st.rest == nil {
		return ev, true, nil
	}
	res, err := st.rest.Run(r.ctx, []bson.D{ev}, agg.Env{DB: r.db, Catalog: catalog{s: r.cluster.data}, Now: r.now, Vars: st.env.variables(), Collator: st.env.collator()})
	if err != nil {
		return nil, false, err
	}
	if len(res) == 0 {
		return nil, false, nil
	}
	want, _ := value.Get(ev, "_id")
	if got, ok := value.Get(res[0], "_id"); !ok || value.Key(got) != value.Key(want) {
		e := cmderr.New(codeChangeStreamFatalError, "Encountered an event whose _id field, which contains the resume token, was modified by the pipeline. Modifying the _id field of an event makes it impossible to resume the stream from that point. Only transformations that retain the unmodified _id field are allowed.")
		e.Labels = []string{labelNonResumableChangeStream}
		return nil, false, e
	}
	return res[0], true, nil
}

// covers reports whether a change is in the stream's namespace. A rename
// is in the namespaces of its source and its target.
func (st *streamState) covers(ch change) bool {
	if (ch.kind.expandedOnly() || ch.detail().view != nil) && !st.expanded {
		return false
	}
	internal := func(db string) bool { return db == "admin" || db == "config" || db == "local" }
	if ch.kind == changeDropDatabase {
		switch {
		case st.db == "":
			return !internal(ch.db)
		case st.coll == "":
			return ch.db == st.db
		}
		return false
	}
	in := func(db, coll string) bool {
		if strings.HasPrefix(coll, "system.") {
			return false
		}
		switch {
		case st.db == "":
			return !internal(db)
		case st.coll == "":
			return db == st.db
		}
		return db == st.db && coll == st.coll
	}
	if ch.kind == changeRename && in(ch.detail().toDB, ch.detail().toColl) {
		return true
	}
	return in(ch.db, ch.coll)
}

// invalidatedBy reports whether a change the stream covers ends it: a
// collection's drop or rename ends a stream on the collection, a
// database's drop a stream on the database; a cluster stream never ends.
func (st *streamState) invalidatedBy(ch change) bool {
	switch {
	case st.db == "":
		return false
	case st.coll == "":
		return ch.kind == changeDropDatabase
	}
	return ch.kind == changeDrop || ch.kind == changeRename
}

// event builds the change event document.
func (st *streamState) event(s *storage, ch change) (bson.D, error) {
	ev := bson.D{
		{Key: "_id", Value: resumeToken(ch.seq)},
		{Key: "operationType", Value: ch.kind.String()},
		{Key: "clusterTime", Value: ch.at},
		{Key: "wallTime", Value: bson.NewDateTimeFromTime(ch.wall)},
	}
	if st.expanded && ch.kind != changeDropDatabase && ch.detail().view == nil {
		ev = append(ev, bson.E{Key: "collectionUUID", Value: ch.uuid})
	}
	if !ch.kind.ofDocument() {
		return st.ddlEvent(ev, ch), nil
	}
	if ch.kind == changeInsert || ch.kind == changeReplace || ch.kind == changeUpdate {
		full, include, err := st.fullDocumentOf(s, ch)
		if err != nil {
			return nil, err
		}
		if include {
			ev = append(ev, bson.E{Key: "fullDocument", Value: full})
		}
	}
	ev = append(ev,
		bson.E{Key: "ns", Value: bson.D{{Key: "db", Value: ch.db}, {Key: "coll", Value: ch.coll}}},
		bson.E{Key: "documentKey", Value: bson.D{{Key: "_id", Value: value.Clone(ch.id)}}},
	)
	if ch.kind == changeUpdate {
		ev = append(ev, bson.E{Key: "updateDescription", Value: updateDescription(ch.before, ch.after, st.expanded)})
	}
	if ch.kind != changeInsert && st.beforeChange != "off" {
		var pre any
		if ch.images {
			pre = value.CloneDoc(ch.before)
		} else if st.beforeChange == "required" {
			return nil, cmderr.New(codeNoMatchingDocument, "Change stream was configured to require a pre-image for all update, delete and replace events, but the pre-image was not found for event: %s", shellString(resumeToken(ch.seq)))
		}
		ev = append(ev, bson.E{Key: "fullDocumentBeforeChange", Value: pre})
	}
	return ev, nil
}

// ddlEvent completes the event of a database or collection change (not
// of a document) after its common fields ev.
func (st *streamState) ddlEvent(ev bson.D, ch change) bson.D {
	ns := bson.D{{Key: "db", Value: ch.db}, {Key: "coll", Value: ch.coll}}
	switch ch.kind {
	case changeDropDatabase:
		return append(ev, bson.E{Key: "ns", Value: bson.D{{Key: "db", Value: ch.db}}})
	case changeCreateIndexes, changeDropIndexes, changeModify, changeShardCollection:
		ev = append(ev, bson.E{Key: "ns", Value: ns}, bson.E{Key: "operationDescription", Value: value.CloneDoc(ch.detail().desc)})
		if ch.detail().stateBefore != nil {
			ev = append(ev, bson.E{Key: "stateBeforeChange", Value: value.CloneDoc(ch.detail().stateBefore)})
		}
		return ev
	}
	ev = append(ev, bson.E{Key: "ns", Value: ns})
	switch {
	case ch.kind == changeRename:
		to := bson.D{{Key: "db", Value: ch.detail().toDB}, {Key: "coll", Value: ch.detail().toColl}}
		ev = append(ev, bson.E{Key: "to", Value: to})
		if st.expanded {
			ev = append(ev, bson.E{Key: "operationDescription", Value: bson.D{{Key: "to", Value: to}}})
		}
	case ch.kind == changeCreate && ch.detail().view != nil:
		ev = append(ev, bson.E{Key: "operationDescription", Value: value.CloneDoc(ch.detail().view)})
	case ch.kind == changeCreate:
		ev = append(ev, bson.E{Key: "operationDescription", Value: bson.D{{Key: "idIndex", Value: value.CloneDoc(idIndex().spec)}}})
	}
	return ev
}

// fullDocumentOf is the fullDocument of an insert, replace or update
// event, and whether the event has one: an update's only with a
// fullDocument option other than default.
func (st *streamState) fullDocumentOf(s *storage, ch change) (doc any, include bool, err error) {
	if ch.kind != changeUpdate {
		return value.CloneDoc(ch.after), true, nil
	}
	switch st.fullDocument {
	case "updateLookup":
		var cur any // null when the document is gone
		_ = s.read(ch.db, ch.coll, func(c *collection) error {
			if c != nil {
				if rec := c.byID.get(c.idKeyOf(ch.id)); rec != nil {
					cur = value.CloneDoc(rec.doc)
				}
			}
			return nil
		})
		return cur, true, nil
	case "whenAvailable", "required":
		if ch.images {
			return value.CloneDoc(ch.after), true, nil
		}
		if st.fullDocument == "required" {
			return nil, false, cmderr.New(codeNoMatchingDocument, "Change stream was configured to require a post-image for all update, delete and replace events, but the post-image was not found for event: %s", shellString(resumeToken(ch.seq)))
		}
		return nil, true, nil
	}
	return nil, false, nil
}

// updateDescription is the difference between two versions of a document
// as mongod reports it: a changed field inside a subdocument at its dotted
// path, a changed or appended array element as "arr.N", a shrunk array in
// truncatedArrays, and a value whose type changed whole. With expanded
// (showExpandedEvents), disambiguatedPaths spells out each path that has a
// numeric field name or a field name with a dot, array indexes as ints.
func updateDescription(before, after bson.D, expanded bool) bson.D {
	var d updateDiff
	d.updated, d.removed, d.truncated = bson.D{}, bson.A{}, bson.A{}
	d.disambiguated = bson.D{}
	d.doc("", nil, before, after)
	out := bson.D{
		{Key: "updatedFields", Value: d.updated},
		{Key: "removedFields", Value: d.removed},
		{Key: "truncatedArrays", Value: d.truncated},
	}
	if expanded {
		out = append(out, bson.E{Key: "disambiguatedPaths", Value: d.disambiguated})
	}
	return out
}

type updateDiff struct {
	updated       bson.D
	removed       bson.A
	truncated     bson.A
	disambiguated bson.D
}

// note records path's components in disambiguatedPaths when it is
// ambiguous: a field name that is a number or holds a dot.
func (d *updateDiff) note(path string, comps []any) {
	for _, c := range comps {
		s, ok := c.(string)
		if ok && (strings.Contains(s, ".") || isDigits(s)) {
			d.disambiguated = append(d.disambiguated, bson.E{Key: path, Value: bson.A(append([]any(nil), comps...))})
			return
		}
	}
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// with returns comps plus c, never sharing the backing array.
func with(comps []any, c any) []any {
	return append(append(make([]any, 0, len(comps)+1), comps...), c)
}

func (d *updateDiff) doc(prefix string, comps []any, before, after bson.D) {
	for _, e := range before {
		if _, ok := value.Get(after, e.Key); !ok {
			d.removed = append(d.removed, prefix+e.Key)
			d.note(prefix+e.Key, with(comps, e.Key))
		}
	}
	for _, e := range after {
		old, ok := value.Get(before, e.Key)
		if !ok {
			d.updated = append(d.updated, bson.E{Key: prefix + e.Key, Value: value.Clone(e.Value)})
			d.note(prefix+e.Key, with(comps, e.Key))
			continue
		}
		d.value(prefix+e.Key, with(comps, e.Key), old, e.Value)
	}
}

// value reports the change of one field or element at path.
func (d *updateDiff) value(path string, comps []any, old, cur any) {
	if sameStored(old, cur) {
		return
	}
	switch c := cur.(type) {
	case bson.D:
		if o, ok := old.(bson.D); ok {
			d.doc(path+".", comps, o, c)
			return
		}
	case bson.A:
		if o, ok := old.(bson.A); ok {
			if len(c) < len(o) {
				d.truncated = append(d.truncated, bson.D{{Key: "field", Value: path}, {Key: "newSize", Value: int32(len(c))}})
				d.note(path, comps)
			}
			for i, x := range c {
				p := path + "." + strconv.Itoa(i)
				if i >= len(o) {
					d.updated = append(d.updated, bson.E{Key: p, Value: value.Clone(x)})
					d.note(p, with(comps, int32(i)))
					continue
				}
				d.value(p, with(comps, int32(i)), o[i], x)
			}
			return
		}
	}
	d.updated = append(d.updated, bson.E{Key: path, Value: value.Clone(cur)})
	d.note(path, comps)
}

// sameStored is equality that also tells apart numeric types (1 and 1.0),
// as a stored document does.
func sameStored(a, b any) bool {
	return value.Key(a) == value.Key(b) && bsonTypeName(a) == bsonTypeName(b)
}

// resumableCodes are the errors after which a driver may resume a change
// stream: mongod's retriable, network and need-retargeting error
// categories, RetryChangeStream and FailedToSatisfyReadPreference.
var resumableCodes = map[int32]bool{
	6: true, 7: true, 9001: true, 89: true, 91: true, 133: true, 150: true, 189: true,
	234: true, 262: true, 10107: true, 11600: true, 11602: true, 13388: true, 13435: true, 13436: true, 63: true,
}

// streamGetMore answers a getMore on a change stream cursor: the events
// after its position, waiting for one until maxTimeMS (default 1s) passes
// or the connection or server closes. A cursor killed meanwhile is
// noticed at the next write or when the wait ends.
func streamGetMore(r *request, c *cursor, ns string, batchSize int) (bson.D, error) {
	st := c.stream
	log := r.cluster.data.changes
	ctx, cancel := awaitContext(r)
	defer cancel()
	var batch []bson.D
	for {
		_, wake := log.head()
		var err error
		if batch, err = st.next(r, log, batchSize); err != nil {
			return nil, err
		}
		if len(batch) > 0 || st.done || r.cluster.data.cursors.get(c.id) == nil {
			break
		}
		select {
		case <-wake:
			continue
		case <-ctx.Done():
		}
		break
	}
	id := c.id
	if st.done { // invalidated: the cursor is closed
		r.cluster.data.cursors.remove(c.id)
		id = 0
	}
	return bson.D{{Key: "cursor", Value: bson.D{
		{Key: "nextBatch", Value: toArray(batch)},
		{Key: "postBatchResumeToken", Value: st.token(batch)},
		{Key: "id", Value: id},
		{Key: "ns", Value: ns},
	}}}, nil
}
