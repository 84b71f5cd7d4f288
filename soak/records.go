package soak

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/sturdy-go/sturdy/once"
)

// The records a run keeps until its checks are one byte per operation: the
// document, field or _id an operation touched follows from its worker and
// its index among the worker's operations of that kind (incDoc, insertID,
// saveOp...), so only the outcome is stored. Latencies go into fixed
// histograms, one per second of the run. Only the register history, which
// the linearizability check needs whole, keeps a record per operation.

// status is how an operation ended.
type status uint8

const (
	stOK status = 1 + iota
	stFailed
	stCut // cut off by the end of the run: neither success nor failure
)

// opLog is one worker's operations of one kind: the status in the low
// nibble, a failed increment's once.Outcome in the high one.
type opLog []byte

func (l *opLog) add(s status, o once.Outcome) { *l = append(*l, byte(s)|byte(o)<<4) }

func (l opLog) status(i int) status { return status(l[i] & 0xf) }

func (l opLog) outcome(i int) once.Outcome { return once.Outcome(l[i] >> 4) }

// cutLast marks the last operation as cut off by the end of the run.
func (l opLog) cutLast() { l[len(l)-1] = l[len(l)-1]&0xf0 | byte(stCut) }

// Where worker g's n-th operation of a kind goes.
func incDoc(g, n int) string   { return fmt.Sprintf("inc/%d/%d", g/incGroup, n/incPerDoc) }
func incField(g, n int) string { return fmt.Sprintf("g%d_%d", g, n%incPerDoc) } // under "m"
func insertID(g, n int) string { return fmt.Sprintf("ins/%d/%d", g, n) }
func saveDoc(g, n int) string  { return fmt.Sprintf("save/%d/%d", g/saveGroup, n/savesPerDoc) }
func saveOp(g, n int) string   { return fmt.Sprintf("g%d_%d", g, n) }

// parsePair parses prefix + a + sep + b with a, b non-negative integers.
func parsePair(s, prefix, sep string) (a, b int, ok bool) {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok {
		return 0, 0, false
	}
	as, bs, ok := strings.Cut(rest, sep)
	if !ok {
		return 0, 0, false
	}
	a, errA := strconv.Atoi(as)
	b, errB := strconv.Atoi(bs)
	return a, b, errA == nil && errB == nil && a >= 0 && b >= 0
}

// bitset marks operations found in the data during a check.
type bitset []uint64

func newBitset(n int) bitset { return make(bitset, (n+63)/64) }

// set sets bit i and reports whether it was set already; i out of range
// is ignored.
func (b bitset) set(i int) (was bool) {
	if i < 0 || i/64 >= len(b) {
		return false
	}
	was = b[i/64]&(1<<(i%64)) != 0
	b[i/64] |= 1 << (i % 64)
	return was
}

func (b bitset) has(i int) bool { return i >= 0 && i/64 < len(b) && b[i/64]&(1<<(i%64)) != 0 }

// latBuckets covers 1 ns to about 18 minutes in steps of 2^(1/8) (9%).
const (
	latPerDoubling = 8
	latBuckets     = 40 * latPerDoubling
)

func latBucket(d time.Duration) int {
	if d <= 1 {
		return 0
	}
	i := int(math.Log2(float64(d)) * latPerDoubling)
	return min(max(i, 0), latBuckets-1)
}

// latValue is the middle of bucket i (geometrically).
func latValue(i int) time.Duration {
	return time.Duration(math.Exp2((float64(i) + 0.5) / latPerDoubling))
}

type histogram [latBuckets]uint32

func (h *histogram) percentileMS(p float64) float64 {
	var total uint64
	for _, c := range h {
		total += uint64(c)
	}
	if total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(p * float64(total)))
	var seen uint64
	for i, c := range h {
		seen += uint64(c)
		if seen >= rank {
			return float64(latValue(i)) / float64(time.Millisecond)
		}
	}
	return float64(latValue(latBuckets-1)) / float64(time.Millisecond)
}

// latencies are the successful operations' latencies: the whole run's
// histogram and one per second, shared by the workers.
type latencies struct {
	mu     sync.Mutex
	all    histogram
	perSec []*histogram
}

func (l *latencies) add(sec int, d time.Duration) {
	b := latBucket(d)
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.perSec) <= sec {
		l.perSec = append(l.perSec, nil)
	}
	if l.perSec[sec] == nil {
		l.perSec[sec] = new(histogram)
	}
	l.all[b]++
	l.perSec[sec][b]++
}

// second returns second sec's histogram, nil if nothing succeeded in it.
func (l *latencies) second(sec int) *histogram {
	l.mu.Lock()
	defer l.mu.Unlock()
	if sec < len(l.perSec) {
		return l.perSec[sec]
	}
	return nil
}

// bytes is the memory the histograms hold.
func (l *latencies) bytes() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := int64(unsafe.Sizeof(histogram{}))
	for _, h := range l.perSec {
		if h != nil {
			n += int64(unsafe.Sizeof(*h))
		}
	}
	return n + int64(cap(l.perSec))*int64(bits.UintSize/8)
}

// recordBytes is the memory worker w's records hold.
func (w *worker) recordBytes() int64 {
	return int64(cap(w.incs)+cap(w.saves)+cap(w.inserts)+cap(w.txns)) + int64(cap(w.regOps))*int64(unsafe.Sizeof(regOp{})) +
		int64(cap(w.finished))*8
}
