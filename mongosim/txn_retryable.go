package mongosim

import (
	"context"
	"encoding/hex"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// txnTable is the retryable-write transaction table: per logical session
// the latest txnNumber and the results of the statements it executed. It is
// owned by the Cluster, so it survives connection loss and step-downs as the
// replicated config.transactions collection does.
type txnTable struct {
	mu       sync.Mutex
	sessions map[string]*sessionTxn // key: lsid.id bytes
}

// sessionTxn is one session's record. sem serialises commands that use the
// session concurrently (a retry racing the original attempt).
type sessionTxn struct {
	sem       chan struct{}
	id        []byte
	txnNumber int64
	started   bool
	stmts     stmtTable
	txn       *transaction // the multi-document transaction of txnNumber, if any
}

// txnContext is one command's hold on its session's record.
type txnContext struct {
	sess      *sessionTxn
	txnNumber int64
	replayed  int
	executed  int // statements run (not replayed) by this command
}

func newTxnTable() *txnTable { return &txnTable{sessions: make(map[string]*sessionTxn)} }

// begin acquires the session for a command with txnNumber n: a newer n
// starts a new transaction (forgetting the old statements), the same n
// continues it (so executed statements replay), an older n is
// TransactionTooOld. The caller must release the context.
func (t *txnTable) begin(ctx context.Context, lsid []byte, n int64) (txnContext, error) {
	s, err := t.acquire(ctx, lsid)
	if err != nil {
		return txnContext{}, err
	}
	switch {
	case s.started && n < s.txnNumber:
		latest := s.txnNumber
		<-s.sem
		return txnContext{}, cmderr.New(cmderr.TransactionTooOld,
			"Retryable write with txnNumber %d is prohibited on session %s because a newer retryable write with txnNumber %d has already started on this session.",
			n, uuidString(lsid), latest)
	case s.started && n == s.txnNumber && s.txn != nil:
		<-s.sem
		return txnContext{}, cmderr.New(cmderr.IncompleteTransactionHist,
			"Cannot retry a retryable write that has been converted into a transaction")
	case s.txn != nil && n > s.txnNumber && s.txn.isPrepared():
		<-s.sem
		return txnContext{}, errPrepared(s.txnNumber)
	case !s.started || n > s.txnNumber:
		if s.txn != nil {
			s.txn.abort("a newer retryable write started on the session")
			s.txn = nil
		}
		s.started = true
		s.txnNumber = n
		s.stmts.reset()
	}
	return txnContext{sess: s, txnNumber: n}, nil
}

// acquire takes the session's record for one command; the caller releases
// it (<-s.sem).
func (t *txnTable) acquire(ctx context.Context, lsid []byte) (*sessionTxn, error) {
	t.mu.Lock()
	s := t.sessions[string(lsid)]
	if s == nil {
		s = &sessionTxn{sem: make(chan struct{}, 1), id: lsid}
		t.sessions[string(lsid)] = s
	}
	t.mu.Unlock()
	if ctx.Err() == nil {
		// A session nobody else is using, the usual case: taken without
		// ctx.Done, which would make the request's context watch its
		// parent (opContext).
		select {
		case s.sem <- struct{}{}:
			return s, nil
		default:
		}
	}
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, errWaitEnded(ctx, cmderr.New(cmderr.MaxTimeMSExpired, "operation exceeded time limit waiting for session %s", hex.EncodeToString(lsid)))
	}
	return s, nil
}

// release lets the next command use the session.
func (tc *txnContext) release() { <-tc.sess.sem }

// stmt runs statement i at most once per transaction: a recorded result is
// replayed, otherwise run executes and a successful result is recorded.
func (tc *txnContext) stmt(i int, run func() (stmtResult, error)) (stmtResult, error) {
	if res, ok := tc.replay(i); ok {
		return res, nil
	}
	res, err := run()
	if err != nil {
		return res, err
	}
	tc.record(i, res)
	return res, nil
}

// replay returns statement i's recorded result, if it ran; a nil tc (no
// retryable write) has none.
func (tc *txnContext) replay(i int) (stmtResult, bool) {
	if tc == nil {
		return stmtResult{}, false
	}
	res, ok := tc.sess.stmts.get(i)
	if ok {
		tc.replayed++
	}
	return res, ok
}

// record keeps statement i's successful result for a retry to replay.
func (tc *txnContext) record(i int, res stmtResult) {
	if tc == nil {
		return
	}
	tc.executed++
	tc.sess.stmts.put(i, res)
}

// stmtTable is a session's executed statements of its current txnNumber:
// statement ids are positions in a batch (0, 1, 2, …), so they index a
// slice; any other id (a router's stmtIds may be anything) goes to a map.
// A map keyed by id was 6% of the server's CPU inserting 1 000-document
// batches (a lookup and an assignment per document).
type stmtTable struct {
	dense  []stmtSlot
	sparse map[int]stmtResult
}

type stmtSlot struct {
	res stmtResult
	ok  bool
}

// maxDenseStmt bounds the slice: an id past it (or past twice the slice
// and a batch's worth) goes to the map, so a stray large id costs no
// memory.
const maxDenseStmt = 100000

func (t *stmtTable) get(i int) (stmtResult, bool) {
	if i >= 0 && i < len(t.dense) && t.dense[i].ok {
		return t.dense[i].res, true
	}
	res, ok := t.sparse[i] // also ids put before the slice reached them
	return res, ok
}

func (t *stmtTable) put(i int, res stmtResult) {
	if i >= 0 && i < maxDenseStmt && i < 2*len(t.dense)+1024 {
		if i >= len(t.dense) {
			t.dense = append(t.dense, make([]stmtSlot, i+1-len(t.dense))...)
		}
		t.dense[i] = stmtSlot{res: res, ok: true}
		return
	}
	if t.sparse == nil {
		t.sparse = map[int]stmtResult{}
	}
	t.sparse[i] = res
}

// reset forgets every statement, keeping the slice a large batch grew.
func (t *stmtTable) reset() {
	clear(t.dense)
	t.dense = t.dense[:0]
	clear(t.sparse)
}

// txnNumberOf returns the command's txnNumber, which must be a long.
func txnNumberOf(r *request) (int64, bool, error) {
	v, ok := r.get("txnNumber")
	if !ok {
		return 0, false, nil
	}
	n, isLong := v.(int64)
	if !isLong {
		return 0, false, typeErr("OperationSessionInfo.txnNumber", "long", v)
	}
	if n < 0 {
		return 0, false, cmderr.New(cmderr.BadValue, "TxnNumber cannot be negative")
	}
	return n, true, nil
}

// lsidOf returns lsid.id, which must be a UUID.
func lsidOf(r *request) ([]byte, error) {
	v, ok := r.get("lsid")
	if !ok {
		return nil, cmderr.New(cmderr.InvalidOptions, "Transaction number requires a session ID to also be specified")
	}
	d, ok := v.(bson.D)
	if !ok {
		return nil, typeErr("OperationSessionInfo.lsid", "object", v)
	}
	id, ok := lookupD(d, "id")
	if !ok {
		return nil, cmderr.New(cmderr.NoSuchKey, "BSON field 'OperationSessionInfo.lsid.id' is missing but a required field")
	}
	b, ok := id.(bson.Binary)
	if !ok || b.Subtype != bson.TypeBinaryUUID || len(b.Data) != 16 {
		return nil, cmderr.New(cmderr.BadValue, "lsid.id must be a UUID (binary subtype 4)")
	}
	return b.Data, nil
}

func uuidString(b []byte) string {
	if len(b) != 16 {
		return hex.EncodeToString(b)
	}
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
