package mongosim

import (
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// Multi-document transactions.
//
// Every change to a stored document is stamped with a sequence number from
// the store's txnClock. A transaction's snapshot is the sequence number
// current when it started; it reads private copies of the collections it
// touches ("scratch" collections), each rebuilt as of the snapshot from the
// live collection and its history of prior versions, which the live
// collection keeps only while transactions are open. Writes go to the
// copies; the first write to a document claims it in the live collection
// (first writer wins, as in WiredTiger): a document claimed by another open
// transaction, or changed after the snapshot, is a WriteConflict. Commit
// locks the touched live collections (in name order), takes one sequence
// number and applies the written documents. Nothing is global beyond a
// counter and the list of open transactions, so transactions on different
// documents run in parallel.

// txnClock is the store's commit sequence and its open transactions.
type txnClock struct {
	seq    atomic.Int64
	active atomic.Int64 // len(open), readable without mu
	// started/committed/aborted count transactions for Stats and
	// serverStatus.transactions.
	started, committed, aborted atomic.Int64

	mu   sync.Mutex
	open map[*transaction]struct{}
}

func newTxnClock() *txnClock { return &txnClock{open: map[*transaction]struct{}{}} }

// register opens t and fixes its snapshot. active is raised before the
// sequence is read, so a write stamped after the snapshot always sees an
// open transaction and keeps its prior version.
func (k *txnClock) register(t *transaction) {
	k.mu.Lock()
	k.open[t] = struct{}{}
	k.active.Add(1)
	k.started.Add(1)
	t.snapshot = k.seq.Load()
	k.mu.Unlock()
}

func (k *txnClock) unregister(t *transaction) {
	k.mu.Lock()
	if _, ok := k.open[t]; ok {
		delete(k.open, t)
		k.active.Add(-1)
	}
	k.mu.Unlock()
}

// minSnapshot is the oldest snapshot still open (or the current sequence).
func (k *txnClock) minSnapshot() int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	m := k.seq.Load()
	for t := range k.open {
		if t.snapshot < m {
			m = t.snapshot
		}
	}
	return m
}

func (k *txnClock) openTxns() []*transaction {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]*transaction, 0, len(k.open))
	for t := range k.open {
		out = append(out, t)
	}
	return out
}

// histEntry is a document's version before the write stamped seq (nil: the
// document did not exist).
type histEntry struct {
	seq    int64
	before bson.D
}

type txnPhase int

const (
	txnInProgress txnPhase = iota
	txnCommitted
	txnAborted
	// txnPrepared: prepareTransaction (two-phase commit) checked that the
	// writes apply; only commitTransaction with a commitTimestamp or
	// abortTransaction ends it, never a step-down, a reaper or a conflict.
	txnPrepared
)

// transaction is one multi-document transaction of a session.
type transaction struct {
	parent   *storage // the live store
	view     *storage // the transaction's view: scratch collections
	lsid     []byte
	number   int64
	snapshot int64
	deadline time.Time

	// statements counts the commands run in the transaction (the first
	// one may carry readConcern, later ones not).
	statements int
	colls      map[string]*collection // ns → scratch copy (nil: absent at snapshot)
	created    map[string]bool        // namespaces t created (made live at commit)
	conflict   *cmderr.Error          // set when a write met a conflict

	mu     sync.Mutex // guards phase, reason, held, done
	phase  txnPhase
	reason string // why it was aborted, for error messages
	held   []heldLock
	done   chan struct{}

	// prepareTS is the prepareTimestamp of a prepared transaction;
	// preparedIn the live collections whose readers wait for it.
	prepareTS  bson.Timestamp
	preparedIn []*collection
}

type heldLock struct {
	c     *collection
	idKey string
}

func newTransaction(parent *storage, lsid []byte, number int64, deadline time.Time) *transaction {
	t := &transaction{parent: parent, lsid: lsid, number: number, deadline: deadline,
		colls: map[string]*collection{}, created: map[string]bool{}, done: make(chan struct{})}
	t.view = &storage{now: parent.now, dbs: map[string]*database{}, cursors: parent.cursors, txn: t, scriptsOff: parent.scriptsOff}
	parent.clock.register(t)
	return t
}

func (t *transaction) state() (txnPhase, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.phase, t.reason
}

// abort ends an in-progress transaction, discarding its writes.
func (t *transaction) abort(reason string) bool {
	t.mu.Lock()
	if t.phase != txnInProgress {
		t.mu.Unlock()
		return false
	}
	held := t.endLocked(txnAborted, reason)
	t.mu.Unlock()
	t.release(held)
	return true
}

// endLocked moves t out of progress (t.mu held) and returns the documents
// it claimed, for release once t.mu is unlocked: claim locks a collection
// then t.mu, so t.mu must not be held while locking collections.
func (t *transaction) endLocked(phase txnPhase, reason string) []heldLock {
	t.phase, t.reason = phase, reason
	held := t.held
	t.held = nil
	return held
}

// release frees the documents t claimed and wakes writers waiting for them.
func (t *transaction) release(held []heldLock) {
	if phase, _ := t.state(); phase == txnCommitted {
		t.parent.clock.committed.Add(1)
	} else {
		t.parent.clock.aborted.Add(1)
	}
	for _, h := range held {
		h.c.mu.Lock()
		if h.c.locks[h.idKey] == t {
			delete(h.c.locks, h.idKey)
		}
		h.c.mu.Unlock()
	}
	for _, c := range t.preparedIn {
		c.mu.Lock()
		delete(c.prepared, t)
		c.mu.Unlock()
	}
	t.parent.clock.unregister(t)
	close(t.done)
}

// wait blocks a writer outside the transaction until t ends; past t's
// lifetime the writer aborts it, as mongod's transaction reaper would.
func (t *transaction) wait(ctx context.Context, now func() time.Time) error {
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-t.done:
			return nil
		case <-ctx.Done():
			// maxTimeMS (or the connection) ran out while waiting.
			return cmderr.New(cmderr.MaxTimeMSExpired, "operation exceeded time limit")
		case <-tick.C:
			if !t.deadline.IsZero() && !now().Before(t.deadline) {
				t.abort("exceeded transactionLifetimeLimitSeconds")
			}
		}
	}
}

// forgetIfDone drops an ended transaction's copies of the data (the
// session keeps the transaction only to answer later commands). Only the
// session's own command calls it, so no statement is using them.
func (t *transaction) forgetIfDone() {
	if phase, _ := t.state(); phase == txnCommitted || phase == txnAborted {
		t.colls = nil
	}
}

func nsKey(db, coll string) string { return db + "." + coll }

// collection returns t's copy of db.coll as of its snapshot, making it on
// first use; nil when the collection did not exist.
func (t *transaction) collection(db, coll string) *collection {
	ns := nsKey(db, coll)
	if t.colls == nil {
		t.colls = map[string]*collection{} // forgotten: cannot be reached, but never panic
	}
	if c, ok := t.colls[ns]; ok {
		return c
	}
	var copyOf *collection
	_ = t.parent.read(db, coll, func(base *collection) error {
		if base != nil {
			copyOf = snapshotOf(base, t)
		}
		return nil
	})
	t.colls[ns] = copyOf
	return copyOf
}

// ensure returns t's copy of db.coll, creating an empty one (the live
// collection is created at commit) when it does not exist.
func (t *transaction) ensure(db, coll string) (*collection, bool, error) {
	if c := t.collection(db, coll); c != nil {
		return c, false, nil
	}
	if err := validateNamespace(db, coll); err != nil {
		return nil, false, err
	}
	c := newCollection(db, coll)
	c.txn, c.dirty = t, map[string]bool{}
	t.colls[nsKey(db, coll)] = c
	t.created[nsKey(db, coll)] = true
	return c, true, nil
}

// snapshotOf returns t's copy of base as of t's snapshot; base's read lock
// is held. Without unique secondary indexes the copy starts empty and
// fetches documents as the transaction asks for them by _id (a scan fills
// it whole), so a transaction on a few documents of a large collection
// does not copy it; with them the copy is whole from the start, so unique
// keys are checked against the snapshot.
func snapshotOf(base *collection, t *transaction) *collection {
	c := &collection{db: base.db, name: base.name, uuid: base.uuid, byID: newIDTable(),
		txn: t, base: base, dirty: map[string]bool{}, validator: base.validator, logger: base.logger, view: base.view,
		options: base.options, shardKey: base.shardKey} // options: the default collation
	uniques := false
	for i, ix := range base.indexes {
		uniques = uniques || (i > 0 && ix.unique)
		c.indexes = append(c.indexes, ix.emptyCopy())
	}
	if !uniques {
		c.partial, c.known = true, map[string]bool{}
		return c
	}
	for _, d := range snapshotDocs(base, t.snapshot) {
		c.addRecord(d.idKey, d.doc)
	}
	return c
}

type keyedDoc struct {
	idKey string
	doc   bson.D
}

// snapshotDocs lists base's documents as of sequence at, in natural order
// (documents deleted since at last). base's lock is held.
func snapshotDocs(base *collection, at int64) []keyedDoc {
	older := map[string]bson.D{}
	for k, hs := range base.hist {
		for _, h := range hs {
			if h.seq > at {
				older[k] = h.before
				break
			}
		}
	}
	out := make([]keyedDoc, 0, base.live)
	for _, r := range base.order {
		if r == nil {
			continue
		}
		if doc, ok := older[r.idKey]; ok {
			delete(older, r.idKey)
			if doc != nil {
				out = append(out, keyedDoc{r.idKey, doc})
			}
			continue
		}
		out = append(out, keyedDoc{r.idKey, r.doc})
	}
	rest := make([]string, 0, len(older))
	for k, doc := range older {
		if doc != nil {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	for _, k := range rest {
		out = append(out, keyedDoc{k, older[k]})
	}
	return out
}

// docAt is document idKey of base as of sequence at (nil: absent). base's
// lock is held.
func docAt(base *collection, idKey string, at int64) bson.D {
	for _, h := range base.hist[idKey] {
		if h.seq > at {
			return h.before
		}
	}
	if r := base.byID.get(idKey); r != nil {
		return r.doc
	}
	return nil
}

// addRecord appends a document to a transaction's copy.
func (c *collection) addRecord(idKey string, doc bson.D) *record {
	r := &record{doc: doc, idKey: idKey, pos: len(c.order)}
	c.order = append(c.order, r)
	c.byID.put(r)
	c.live++
	if keys, err := c.indexKeys(doc); err == nil {
		c.addKeys(keys, r)
	}
	return r
}

// fetch brings document idKey into a partial copy.
func (c *collection) fetch(idKey string) {
	if !c.partial || c.known[idKey] {
		return
	}
	c.known[idKey] = true
	c.base.mu.RLock()
	doc := docAt(c.base, idKey, c.txn.snapshot)
	c.base.mu.RUnlock()
	if doc != nil {
		c.addRecord(idKey, doc)
	}
}

// fill completes a partial copy for a scan: the snapshot's documents in
// natural order, the transaction's own versions of those it fetched, then
// the documents it inserted.
func (c *collection) fill() {
	if !c.partial {
		return
	}
	c.partial = false
	c.base.mu.RLock()
	snap := snapshotDocs(c.base, c.txn.snapshot)
	c.base.mu.RUnlock()
	inSnap := make(map[string]bool, len(snap))
	order := make([]*record, 0, len(snap)+len(c.order))
	for _, d := range snap {
		inSnap[d.idKey] = true
		if c.known[d.idKey] {
			if r := c.byID.get(d.idKey); r != nil {
				order = append(order, r)
			}
			continue
		}
		r := &record{doc: d.doc, idKey: d.idKey}
		c.byID.put(r)
		if keys, err := c.indexKeys(d.doc); err == nil {
			c.addKeys(keys, r)
		}
		order = append(order, r)
	}
	for _, r := range c.order {
		if r != nil && !inSnap[r.idKey] {
			order = append(order, r)
		}
	}
	for i, r := range order {
		r.pos = i
	}
	c.order, c.live, c.known = order, len(order), nil
}

// errWriteConflict is mongod's answer to a transaction's write that lost
// the first-writer-wins race.
func errWriteConflict() *cmderr.Error {
	return cmderr.New(cmderr.WriteConflict, "Caused by :: Write conflict during plan execution and yielding is disabled. :: Please retry your operation or multi-document transaction.")
}

// claim makes t the writer of document idKey of scratch collection c.
func (t *transaction) claim(c *collection, idKey string) error {
	if t.conflict != nil {
		return t.conflict
	}
	if _, ok := c.dirty[idKey]; ok {
		return nil
	}
	base := c.base
	if base == nil {
		if base = t.parent.lookup(c.db, c.name); base == nil {
			return nil // created by t; checked again at commit
		}
		c.base = base
	}
	for {
		expired, err := t.tryClaim(base, idKey)
		if expired == nil {
			// A write conflict, or the transaction aborted under the
			// statement (a step-down, killSessions), ends the statement with
			// a command error carrying TransientTransactionError, as on
			// mongod, not a write error the convenient API would not retry.
			if ce, ok := err.(*cmderr.Error); ok && (ce.Code == cmderr.WriteConflict || ce.Code == cmderr.NoSuchTransaction) {
				t.conflict = ce
			}
			return err
		}
		// The holder outlived transactionLifetimeLimitSeconds: mongod's
		// reaper would have aborted it by now.
		expired.abort("exceeded transactionLifetimeLimitSeconds")
	}
}

// tryClaim is one attempt of claim; it returns the holder of the document
// when that holder has expired.
func (t *transaction) tryClaim(base *collection, idKey string) (*transaction, error) {
	base.mu.Lock()
	defer base.mu.Unlock()
	if o := base.locks[idKey]; o != nil && o != t && !o.deadline.IsZero() && !t.parent.now().Before(o.deadline) {
		if phase, _ := o.state(); phase == txnInProgress {
			return o, nil // a prepared holder outlives its lifetime
		}
	}
	return nil, func() error {
		if base.dropped {
			return errWriteConflict()
		}
		if o := base.locks[idKey]; o != nil && o != t {
			return errWriteConflict()
		}
		for _, h := range base.hist[idKey] {
			if h.seq > t.snapshot {
				return errWriteConflict()
			}
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.phase != txnInProgress {
			return cmderr.New(cmderr.NoSuchTransaction, "Transaction with { txnNumber: %d } has been aborted.", t.number)
		}
		if base.locks == nil {
			base.locks = map[string]*transaction{}
		}
		base.locks[idKey] = t
		t.held = append(t.held, heldLock{base, idKey})
		return nil
	}()
}

// docLockedError stops a write outside any transaction at a document an
// open transaction has written; storage.write waits for it and retries.
type docLockedError struct{ owner *transaction }

func (e *docLockedError) Error() string { return "mongosim: document held by an open transaction" }

// docLocked returns the docLockedError in err's chain, nil if there is
// none. It looks only at an error: the target errors.As needs escapes, an
// allocation every write that succeeds is spared.
func docLocked(err error) *docLockedError {
	if err == nil {
		return nil
	}
	var e *docLockedError
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// beforeWrite runs before document idKey of c changes.
func (c *collection) beforeWrite(idKey string, whole bool) error {
	if c.txn != nil {
		if err := c.txn.claim(c, idKey); err != nil {
			return err
		}
		if _, ok := c.dirty[idKey]; !ok || whole {
			c.dirty[idKey] = whole
		}
		return nil
	}
	if o := c.locks[idKey]; o != nil && o != c.committing {
		return &docLockedError{owner: o}
	}
	return nil
}

// afterWrite stamps a change of document idKey, keeping its prior version
// while transactions are open.
func (c *collection) afterWrite(idKey string, before bson.D) {
	c.mutations++
	if c.clock == nil {
		return
	}
	seq := c.commitSeq
	if seq == 0 {
		seq = c.clock.seq.Add(1)
	}
	// The stamp is taken before active is read: see txnClock.register.
	if c.clock.active.Load() == 0 {
		c.hist, c.histN = nil, 0
		return
	}
	if c.hist == nil {
		c.hist = map[string][]histEntry{}
	}
	c.hist[idKey] = append(c.hist[idKey], histEntry{seq: seq, before: before})
	c.histN++
	if c.histN%512 == 0 {
		c.pruneHist(c.clock.minSnapshot())
	}
}

// pruneHist drops versions no open snapshot can need: those replaced at
// or before the oldest snapshot.
func (c *collection) pruneHist(oldest int64) {
	for k, hs := range c.hist {
		i := 0
		for i < len(hs) && hs[i].seq <= oldest {
			i++
		}
		if i == len(hs) {
			delete(c.hist, k)
		} else if i > 0 {
			c.hist[k] = append([]histEntry(nil), hs[i:]...)
		}
	}
}

// commit applies t's writes to the live store atomically: every touched
// collection is locked, the writes get one sequence number, then the locks
// are released. On error t is aborted. A prepared transaction commits
// with commitPrepared.
func (t *transaction) commit() error {
	t.mu.Lock()
	if t.phase != txnInProgress {
		t.mu.Unlock()
		return cmderr.New(cmderr.NoSuchTransaction, "Transaction with { txnNumber: %d } has been aborted.", t.number)
	}
	held, err := t.commitLocked()
	t.mu.Unlock()
	t.release(held)
	return err
}

// commitJob is one collection a commit writes: t's copy and the live one.
type commitJob struct {
	scratch, live *collection
}

// commitLocked applies the writes; t.mu is held, the live collections are
// locked only inside (t's own claims cannot run concurrently: the session
// runs one command at a time).
func (t *transaction) commitLocked() ([]heldLock, error) {
	jobs, err := t.commitPlan(true)
	if err != nil {
		return t.endLocked(txnAborted, "commit failed"), err
	}
	for _, j := range jobs {
		j.live.mu.Lock()
	}
	firstErr := t.checkCommit(jobs)
	if firstErr == nil {
		firstErr = t.applyCommit(jobs)
	}
	for i := len(jobs) - 1; i >= 0; i-- {
		jobs[i].live.mu.Unlock()
	}
	if firstErr != nil {
		return t.endLocked(txnAborted, "commit failed"), firstErr
	}
	return t.endLocked(txnCommitted, ""), nil
}

// commitPlan lists the collections t wrote, in name order (the order
// commits lock them in). With create the collections t created are made
// live, with the indexes built in them; without, they are left out.
func (t *transaction) commitPlan(create bool) ([]commitJob, error) {
	var jobs []commitJob
	nss := make([]string, 0, len(t.colls))
	for ns, c := range t.colls {
		if c != nil && (len(c.dirty) > 0 || t.created[ns]) {
			nss = append(nss, ns)
		}
	}
	sort.Strings(nss)
	for _, ns := range nss {
		sc := t.colls[ns]
		if sc.base != nil && t.parent.lookup(sc.db, sc.name) != sc.base {
			// The collection t read was dropped (or dropped and created
			// again) since: mongod's drop would have conflicted with t.
			return nil, errWriteConflict()
		}
		if !create {
			if live := t.parent.lookup(sc.db, sc.name); live != nil {
				jobs = append(jobs, commitJob{sc, live})
			}
			continue
		}
		live, _, err := t.parent.ensure(sc.db, sc.name)
		if err != nil {
			return nil, err
		}
		if t.created[ns] {
			if err := sc.copyIndexesTo(live); err != nil {
				return nil, err
			}
		}
		jobs = append(jobs, commitJob{sc, live})
	}
	return jobs, nil
}

// copyIndexesTo adds the indexes built inside a transaction (only allowed
// on the collections it created) to the live collection, before its
// documents.
func (c *collection) copyIndexesTo(live *collection) error {
	live.mu.Lock()
	defer live.mu.Unlock()
	for _, ix := range c.indexes[1:] {
		if _, err := live.addIndex(ix.emptyCopy()); err != nil {
			return err
		}
	}
	return nil
}

// checkCommit verifies, with the live collections locked and before
// anything is applied, that t's writes still apply: no collection was
// dropped, no document t did not claim changed since its snapshot, and
// no written document collides on a unique index with one committed
// meanwhile, so a commit applies all or nothing.
func (t *transaction) checkCommit(jobs []commitJob) error {
	for _, j := range jobs {
		if j.live.dropped || (j.scratch.base != nil && j.scratch.base != j.live) {
			return errWriteConflict()
		}
	}
	for _, j := range jobs {
		for k := range j.scratch.dirty {
			// Documents t did not claim (in collections it created)
			// may have been written by others since its snapshot.
			if o := j.live.locks[k]; o != nil && o != t {
				return errWriteConflict()
			}
			for _, h := range j.live.hist[k] {
				if h.seq > t.snapshot {
					return errWriteConflict()
				}
			}
			sr := j.scratch.byID.get(k)
			if sr == nil {
				continue
			}
			keys, err := j.live.indexKeys(sr.doc)
			if err != nil {
				return err
			}
			self := j.live.byID.get(k)
			for _, ik := range keys {
				if other := ik.ix.entries[ik.key]; other != nil && other != self {
					if _, mine := j.scratch.dirty[other.idKey]; !mine {
						return j.live.dupKey(ik.ix, ik.value)
					}
				}
			}
		}
	}
	return nil
}

// applyCommit writes t's documents to the locked live collections under
// one sequence number.
func (t *transaction) applyCommit(jobs []commitJob) error {
	var firstErr error
	seq := t.parent.clock.seq.Add(1)
	for _, j := range jobs {
		j.live.committing, j.live.commitSeq = t, seq
		keys := make([]string, 0, len(j.scratch.dirty))
		for k := range j.scratch.dirty {
			keys = append(keys, k)
		}
		// Apply in the copy's natural order so inserts keep it.
		sort.Slice(keys, func(a, b int) bool { return scratchPos(j.scratch, keys[a]) < scratchPos(j.scratch, keys[b]) })
		for _, k := range keys {
			sr, lr := j.scratch.byID.get(k), j.live.byID.get(k)
			var err error
			switch {
			case sr != nil && lr != nil:
				err = j.live.replace(lr, sr.doc, j.scratch.dirty[k])
			case sr != nil:
				err = j.live.insert(sr.doc)
			case lr != nil:
				err = j.live.remove(lr)
			}
			if err != nil && firstErr == nil {
				firstErr = err
			}
		}
		j.live.committing, j.live.commitSeq = nil, 0
	}
	return firstErr
}

func scratchPos(c *collection, k string) int {
	if r := c.byID.get(k); r != nil {
		return r.pos
	}
	return -1
}
