package mongosim

import (
	"hash/maphash"
	"math/bits"
)

// idTable is a collection's _id index: its records by idKey, in an open
// addressing table (linear probing) that keeps each record's hash next to
// it. A Go map[string]*record did the same job at about a third of the
// server's CPU inserting into a collection of a million documents: an
// insert probed it twice (the duplicate check, then the assignment), and
// its growth rehashed every key, reading key bytes scattered over the
// heap. Here an insert hashes its key once, growth moves the stored
// hashes without touching a key, a miss compares no key bytes, and a slot
// holds one pointer for the garbage collector instead of two.
//
// A record is stored under its own idKey. Readers holding the
// collection's read lock may get concurrently; put and del need the write
// lock.
type idTable struct {
	slots []idSlot // len is 0 or a power of two; rec nil marks a free slot
	n     int      // records stored
	// shift makes a hash's top bits its home slot (hash >> shift), so
	// that the slots are in hash order but for probing: growth then
	// writes the new table almost in order instead of at random (each
	// record moved was a cache miss).
	shift uint
}

type idSlot struct {
	hash uint64
	rec  *record
}

// idSeed keys every table's hash: one per process, so that a hash can be
// computed before knowing the table.
var idSeed = maphash.MakeSeed()

func idHash(k string) uint64 { return maphash.String(idSeed, k) }

func newIDTable() *idTable { return &idTable{} }

// get returns the record of idKey k, or nil.
func (t *idTable) get(k string) *record { return t.getHashed(idHash(k), k) }

// getKey is get for a key built in a buffer (on the caller's stack: a
// string of it was an allocation per lookup).
func (t *idTable) getKey(k []byte) *record {
	return t.getHashed(maphash.Bytes(idSeed, k), string(k))
}

// getHashed is get with k's idHash.
func (t *idTable) getHashed(h uint64, k string) *record {
	if t == nil || t.n == 0 {
		return nil
	}
	mask := uint64(len(t.slots) - 1)
	for i := h >> t.shift; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.rec == nil {
			return nil
		}
		if s.hash == h && s.rec.idKey == k {
			return s.rec
		}
	}
}

// put stores r under r.idKey, replacing the record stored there.
func (t *idTable) put(r *record) { t.putHashed(idHash(r.idKey), r) }

// putHashed is put with r.idKey's idHash.
func (t *idTable) putHashed(h uint64, r *record) {
	// Grow at 3/4 full: linear probing stays short below that.
	if 4*(t.n+1) > 3*len(t.slots) {
		t.grow()
	}
	mask := uint64(len(t.slots) - 1)
	for i := h >> t.shift; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.rec == nil {
			*s = idSlot{hash: h, rec: r}
			t.n++
			return
		}
		if s.hash == h && s.rec.idKey == r.idKey {
			s.rec = r
			return
		}
	}
}

// grow doubles the table.
func (t *idTable) grow() { t.resize(max(8, 2*len(t.slots))) }

// shrinkMinSlots is the smallest table del halves when deletes leave it
// an eighth full: a collection emptied of a million documents would
// otherwise keep 32 MiB of slots for as long as it exists. Halving at an
// eighth leaves it a quarter full, far from growing again at 3/4, so a
// table going up and down around one size does not resize back and forth.
const shrinkMinSlots = 1024

// resize moves the records into a new table of size slots (a power of
// two, with room for them), placing each by its stored hash.
func (t *idTable) resize(size int) {
	old := t.slots
	t.slots = make([]idSlot, size)
	t.shift = uint(64 - bits.TrailingZeros(uint(len(t.slots))))
	mask := uint64(len(t.slots) - 1)
	for _, s := range old {
		if s.rec == nil {
			continue
		}
		i := s.hash >> t.shift
		for t.slots[i].rec != nil {
			i = (i + 1) & mask
		}
		t.slots[i] = s
	}
}

// del removes the record of idKey k, if any. The records after it in its
// probe run move back into the hole when their home slot allows, so a
// table needs no tombstones.
func (t *idTable) del(k string) {
	if t.n == 0 {
		return
	}
	h := idHash(k)
	mask := uint64(len(t.slots) - 1)
	i := h >> t.shift
	for {
		s := &t.slots[i]
		if s.rec == nil {
			return
		}
		if s.hash == h && s.rec.idKey == k {
			break
		}
		i = (i + 1) & mask
	}
	for j := (i + 1) & mask; t.slots[j].rec != nil; j = (j + 1) & mask {
		// The record at j may fill the hole at i when i lies between its
		// home slot and j (cyclically): probing from home reaches i first.
		home := t.slots[j].hash >> t.shift
		if (j-home)&mask >= (j-i)&mask {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = idSlot{}
	t.n--
	if len(t.slots) >= shrinkMinSlots && 8*t.n < len(t.slots) {
		t.resize(len(t.slots) / 2)
	}
}

// warm reads the home slot of each key of a batch about to be inserted,
// and the slot four on (the next cache line, where a probe often goes on):
// loads that depend on nothing before them, so the processor overlaps
// their cache misses, and the inserts then find their slots in cache.
// Between one insert's lookup and the next there is too much work for the
// processor to look ahead, so each lookup in a table of a million records
// was a miss waited for alone (16% of the server's CPU inserting
// 1 000-document batches from 32 clients). The sum it returns keeps the
// loads; nothing needs it.
func (t *idTable) warm(todo []pendingInsert) uint64 {
	if len(t.slots) == 0 {
		return 0
	}
	last := uint64(len(t.slots) - 1)
	var sum uint64
	for j := range todo {
		home := todo[j].hash >> t.shift
		sum += t.slots[home].hash + t.slots[min(home+4, last)].hash
	}
	return sum
}
