package mongosim

import (
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// defaultFirstBatch is the server's default first batch size in documents.
const defaultFirstBatch = 101

// maxBatchBytes bounds one batch so the reply stays under 16 MiB plus the
// reply's own framing.
const maxBatchBytes = maxBSONSize

// cursorTable holds the open cursors. A cursor holds its remaining results,
// computed when it was opened (so it reads a snapshot); it is removed when
// exhausted, killed, or when its collection or database is dropped.
type cursorTable struct {
	mu        sync.Mutex
	m         map[int64]*cursor
	lastSweep time.Time
}

// cursorIdleTimeout is the server's default cursorTimeoutMillis: a cursor
// unused for this long is removed (lazily, when another cursor opens).
const cursorIdleTimeout = 10 * time.Minute

type cursor struct {
	id int64
	ns string
	mu sync.Mutex // one getMore at a time
	// items are the remaining results of a command's cursor (reply),
	// each a bson.D or a stored document's encoding (bsond.Doc); docs
	// those of a tailable find's cursor (tailable.go).
	items    bson.A
	docs     []bson.D
	lastUsed atomic.Int64 // unix nanoseconds
	stream   *streamState // set for a change stream (tailable) cursor
	// lazyEnd: like mongod's query and pipeline executors, the cursor
	// learns it is exhausted only when asked for one more document, so a
	// batch that takes exactly the last ones leaves it open and the next
	// getMore answers an empty batch with id 0. Cursors over a queue
	// (listCollections, listIndexes, bulkWrite) and a find whose limit the
	// results reach know their end at once.
	lazyEnd bool
	tail    *tailState // set for a tailable find cursor
	// at is the atClusterTime of a snapshot read, which its getMores
	// report as well.
	at bson.Timestamp
}

// cursorEnd says when a cursor reports its end (see cursor.lazyEnd).
type cursorEnd bool

const (
	endAtOnce cursorEnd = false // queued results: id 0 with the last document
	endLazily cursorEnd = true  // executor results: id 0 on the next getMore
)

// reply builds a command's cursor reply: the first batch of docs, and a
// cursor for the rest unless singleBatch or the end is known. batchSize < 0
// means the default (101 documents).
func (t *cursorTable) reply(r *request, ns string, docs []bson.D, batchSize int, singleBatch bool, end cursorEnd) bson.D {
	return t.replyItems(r, ns, toArray(docs), batchSize, singleBatch, end)
}

// replyItems is reply for results that may be stored documents' encodings
// (bsond.Doc) as well as documents: a find answering with the stored bytes.
// ns is the namespace string as a reply value: a collection's, boxed once
// (collection.nsv), spares a reply the allocation of boxing it.
func (t *cursorTable) replyItems(r *request, ns any, items bson.A, batchSize int, singleBatch bool, end cursorEnd) bson.D {
	if r.cursorNS != "" {
		ns = r.cursorNS
	}
	if batchSize < 0 {
		batchSize = defaultFirstBatch
	}
	first, rest := splitItems(items, batchSize)
	var id int64
	// A batch cut short by the end of the results has seen the end; one
	// filled to batchSize has not, unless the cursor knows it at once.
	if !singleBatch && (len(rest) > 0 || end == endLazily && len(first) == batchSize) {
		c := &cursor{ns: ns.(string), items: rest, lazyEnd: bool(end)}
		if r.rc.level == "snapshot" {
			c.at = r.rc.atClusterTime
		}
		id = t.add(c)
	}
	// The reply and its cursor document in one allocation, the reply with
	// room for the fields decorate adds (the cluster time, ok, ...): it is
	// not copied to grow, and its capacity ends where the cursor's fields
	// begin.
	fields := make(bson.D, 10)
	cur := append(fields[7:7], bson.E{Key: "firstBatch", Value: first}, bson.E{Key: "id", Value: id}, bson.E{Key: "ns", Value: ns})
	return append(fields[:0:7], bson.E{Key: "cursor", Value: cur})
}

// splitBatch takes up to n documents (n == 0 → none; n < 0 → no count
// limit) that fit in maxBatchBytes; the first document always fits.
func splitBatch(docs []bson.D, n int) (batch, rest []bson.D) {
	return splitBy(docs, n, bsonSize)
}

// splitItems is splitBatch for documents and encoded documents.
func splitItems(items bson.A, n int) (batch, rest bson.A) {
	return splitBy(items, n, valueSize)
}

func splitBy[T any](docs []T, n int, size func(T) int) (batch, rest []T) {
	total := 0
	i := 0
	for ; i < len(docs); i++ {
		if n >= 0 && i >= n {
			break
		}
		s := size(docs[i])
		if i > 0 && total+s > maxBatchBytes {
			break
		}
		total += s
	}
	return docs[:i], docs[i:]
}

func toArray(docs []bson.D) bson.A {
	a := make(bson.A, len(docs))
	for i, d := range docs {
		a[i] = d
	}
	return a
}

func (t *cursorTable) open(ns string, docs []bson.D) int64 {
	return t.add(&cursor{ns: ns, docs: docs})
}

// add gives c a fresh non-zero id and registers it (sweeping idle cursors
// first); c is not visible to any client before.
func (t *cursorTable) add(c *cursor) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	if now.Sub(t.lastSweep) > time.Minute {
		t.lastSweep = now
		for id, c := range t.m {
			if now.Sub(time.Unix(0, c.lastUsed.Load())) > cursorIdleTimeout {
				delete(t.m, id)
			}
		}
	}
	for {
		id := rand.Int64()
		if id != 0 && t.m[id] == nil {
			c.id = id
			c.lastUsed.Store(now.UnixNano())
			t.m[id] = c
			return id
		}
	}
}

func (t *cursorTable) get(id int64) *cursor {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[id]
}

func (t *cursorTable) remove(id int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.m[id]
	delete(t.m, id)
	return ok
}

// killNS removes every cursor on namespace ns (drop). A change stream
// outlives its collection: it reports the drop and is then invalidated.
func (t *cursorTable) killNS(ns string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, c := range t.m {
		if c.ns == ns && c.stream == nil {
			delete(t.m, id)
		}
	}
}

func init() {
	register(
		&command{name: "getMore", run: cmdGetMore},
		&command{name: "killCursors", run: cmdKillCursors},
	)
}

func cmdGetMore(r *request) (bson.D, error) {
	a, err := parseGetMore(r)
	if err != nil {
		return nil, err
	}
	c, err := checkOutCursor(r, a)
	if err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	if err := checkGetMoreMaxTime(r, c); err != nil {
		return nil, err
	}
	if err := getMoreFailPoint(r, c); err != nil {
		return nil, err
	}
	if c.stream != nil {
		return streamGetMore(r, c, a.ns, a.batchSize)
	}
	if c.tail != nil {
		return tailGetMore(r, c, a.ns, a.batchSize)
	}
	if !c.at.IsZero() {
		// The dispatcher reports the snapshot's time on the reply.
		r.rc = readConcern{level: "snapshot", atClusterTime: c.at}
	}
	batch, rest := splitItems(c.items, a.batchSize)
	c.items = rest
	outID := a.id
	if len(rest) == 0 && !(c.lazyEnd && len(batch) == a.batchSize) {
		r.cluster.data.cursors.remove(a.id)
		outID = 0
	}
	return bson.D{{Key: "cursor", Value: bson.D{
		{Key: "nextBatch", Value: batch},
		{Key: "id", Value: outID},
		{Key: "ns", Value: a.ns},
	}}}, nil
}

// getMoreArgs are a getMore command's validated fields.
type getMoreArgs struct {
	id        int64
	ns        string
	batchSize int // -1: no limit
}

func parseGetMore(r *request) (getMoreArgs, error) {
	if err := checkFields(r, "collection", "batchSize", "term", "lastKnownCommittedOpTime", "includeQueryStatsMetrics"); err != nil {
		return getMoreArgs{}, err
	}
	v, _ := r.get("getMore")
	id, ok := int64Arg(v)
	if !ok {
		return getMoreArgs{}, cmderr.New(cmderr.TypeMismatch, "Field 'getMore' must be of type long in: %s", shellString(r.cmd))
	}
	cv, ok := r.get("collection")
	coll, isStr := cv.(string)
	if !ok || !isStr {
		return getMoreArgs{}, cmderr.New(cmderr.TypeMismatch, "Field 'collection' must be of type string in: %s", shellString(r.cmd))
	}
	batchSize := -1
	if bv, ok := r.get("batchSize"); ok {
		n, ok := int64Arg(bv)
		if !ok || n < 0 {
			return getMoreArgs{}, cmderr.New(51024, "BSON field 'batchSize' value must be >= 0, actual value '%s'", shellString(bv))
		}
		if n > 0 {
			batchSize = int(n)
		}
	}
	return getMoreArgs{id: id, ns: r.db + "." + coll, batchSize: batchSize}, nil
}

// checkOutCursor finds the cursor and locks it for this getMore; the caller
// unlocks it. A second getMore on a cursor in use fails rather than waits,
// as on mongod.
func checkOutCursor(r *request, a getMoreArgs) (*cursor, error) {
	t := r.cluster.data.cursors
	c := t.get(a.id)
	if c == nil {
		return nil, cmderr.New(cmderr.CursorNotFound, "cursor id %d not found", a.id)
	}
	if c.ns != a.ns {
		return nil, cmderr.New(cmderr.Unauthorized, "Requested getMore on namespace '%s', but cursor belongs to a different namespace %s", a.ns, c.ns)
	}
	if !c.mu.TryLock() {
		return nil, cmderr.New(292, "cursor id %d is already in use", a.id)
	}
	c.lastUsed.Store(time.Now().UnixNano())
	if t.get(a.id) == nil { // killed while we waited
		c.mu.Unlock()
		return nil, cmderr.New(cmderr.CursorNotFound, "cursor id %d not found", a.id)
	}
	return c, nil
}

// getMoreFailPoint answers the error of a failGetMoreAfterCursorCheckout
// failpoint that fires for this getMore, or nil.
func getMoreFailPoint(r *request, c *cursor) error {
	act := r.member.evalGetMoreAfterCheckout(r)
	if act == nil {
		return nil
	}
	r.member.cluster.stats.failPointsFired.Add(1)
	code := act.errorCode
	if code == 0 {
		code = codeInternalError
	}
	e := cmderr.New(code, failGetMoreAfterCursorCheckoutMessage)
	if c.stream != nil && resumableCodes[code] {
		// mongod labels a resumable error of a change stream's
		// getMore (not one set by failCommand, raised before the
		// cursor is known).
		e.Labels = []string{labelResumableChangeStream}
	}
	return e
}

func cmdKillCursors(r *request) (bson.D, error) {
	// A database-level cursor (aggregate: 1, listCollections) lives on
	// db.$cmd.<command>, which killCursors names as mongod accepts.
	coll, _ := r.cmd[0].Value.(string)
	if !strings.HasPrefix(coll, "$cmd.") {
		var err error
		if coll, err = collectionArg(r); err != nil {
			return nil, err
		}
	}
	if err := checkFields(r, "cursors"); err != nil {
		return nil, err
	}
	raw, _ := r.get("cursors")
	ids, ok := raw.(bson.A)
	if !ok {
		return nil, cmderr.New(cmderr.TypeMismatch, "BSON field 'killCursors.cursors' is the wrong type '%s', expected type 'array'", typeNameOf(raw))
	}
	ns := r.db + "." + coll
	t := r.cluster.data.cursors
	killed, notFound := bson.A{}, bson.A{}
	for _, v := range ids {
		id, ok := int64Arg(v)
		if !ok {
			return nil, cmderr.New(cmderr.TypeMismatch, "BSON field 'killCursors.cursors' elements must be longs")
		}
		if c := t.get(id); c != nil && c.ns == ns && t.remove(id) {
			killed = append(killed, id)
		} else {
			notFound = append(notFound, id)
		}
	}
	return bson.D{
		{Key: "cursorsKilled", Value: killed},
		{Key: "cursorsNotFound", Value: notFound},
		{Key: "cursorsAlive", Value: bson.A{}},
		{Key: "cursorsUnknown", Value: bson.A{}},
	}, nil
}
