package session

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/goleak"

	"github.com/sturdy-go/sturdy/mongoerr"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is a settable clock for the pool's expiry rules.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func minutes(n int64) *int64 { return &n }

func TestSessionIDIsUUIDv4Subtype4(t *testing.T) {
	p := NewPool(nil)
	s := p.Get(minutes(30))
	var doc struct {
		ID bson.Binary `bson:"id"`
	}
	if err := bson.Unmarshal(s.ID, &doc); err != nil {
		t.Fatalf("lsid %v does not decode: %v", s.ID, err)
	}
	if doc.ID.Subtype != 4 || len(doc.ID.Data) != 16 {
		t.Fatalf("lsid id is subtype %d len %d, want 4/16", doc.ID.Subtype, len(doc.ID.Data))
	}
	if v := doc.ID.Data[6] >> 4; v != 4 {
		t.Errorf("UUID version %d, want 4", v)
	}
	if variant := doc.ID.Data[8] >> 6; variant != 2 {
		t.Errorf("UUID variant bits %b, want 10", variant)
	}
	if keys, _ := s.ID.Elements(); len(keys) != 1 {
		t.Errorf("lsid has %d fields, want only id", len(keys))
	}
	if !bytes.Equal(s.UUID(), doc.ID.Data) {
		t.Errorf("UUID() = %x, want %x", s.UUID(), doc.ID.Data)
	}
	if other := p.Get(minutes(30)); bytes.Equal(other.UUID(), s.UUID()) {
		t.Error("two new sessions share an id")
	}
}

// Sessions spec prose test: the server session pool is LIFO.
func TestPoolIsLIFO(t *testing.T) {
	p := NewPool(nil)
	a, b := p.Get(minutes(30)), p.Get(minutes(30))
	p.Put(a, minutes(30))
	p.Put(b, minutes(30))
	if got := p.Get(minutes(30)); got != b {
		t.Fatal("first Get after returning a then b did not return b")
	}
	if got := p.Get(minutes(30)); got != a {
		t.Fatal("second Get did not return a")
	}
	if p.Len() != 0 {
		t.Fatalf("pool has %d sessions, want 0", p.Len())
	}
}

func TestPutDiscardsDirtySession(t *testing.T) {
	p := NewPool(nil)
	s := p.Get(minutes(30))
	s.Dirty = true
	p.Put(s, minutes(30))
	if p.Len() != 0 {
		t.Fatal("dirty session was pooled")
	}
	if got := p.Get(minutes(30)); got == s {
		t.Fatal("dirty session was reused")
	}
}

func TestTxnNumberPreservedAcrossReuse(t *testing.T) {
	p := NewPool(nil)
	s := p.Get(minutes(30))
	if n := s.NextTxnNumber(); n != 1 {
		t.Fatalf("first txnNumber %d, want 1", n)
	}
	s.NextTxnNumber()
	p.Put(s, minutes(30))
	again := p.Get(minutes(30))
	if again != s {
		t.Fatal("session not reused")
	}
	if n := again.NextTxnNumber(); n != 3 {
		t.Fatalf("txnNumber after reuse %d, want 3", n)
	}
}

func TestGetDiscardsSessionsAboutToExpire(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_000_000, 0)}
	p := NewPool(clk.now)
	old := p.Get(minutes(30))
	p.Put(old, minutes(30))
	clk.advance(29*time.Minute + time.Second) // 59 s left: too little
	if got := p.Get(minutes(30)); got == old {
		t.Fatal("Get returned a session with less than a minute left")
	}
	fresh := p.Get(minutes(30))
	p.Put(fresh, minutes(30))
	clk.advance(28*time.Minute + 59*time.Second) // 61 s left: fine
	if got := p.Get(minutes(30)); got != fresh {
		t.Fatal("Get discarded a session with more than a minute left")
	}
}

func TestPutPrunesStaleSessionsFromTheBack(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_000_000, 0)}
	p := NewPool(clk.now)
	stale1, stale2 := p.Get(minutes(30)), p.Get(minutes(30))
	p.Put(stale1, minutes(30))
	p.Put(stale2, minutes(30))
	clk.advance(20 * time.Minute)
	recent := p.Get(minutes(30)) // takes stale2 (LIFO)
	if recent != stale2 {
		t.Fatal("unexpected Get order")
	}
	recent.LastUse = clk.now()
	clk.advance(9*time.Minute + 30*time.Second) // stale1 has 30 s left, recent 20.5 min
	p.Put(recent, minutes(30))
	if p.Len() != 1 {
		t.Fatalf("pool has %d sessions, want 1 (stale one pruned)", p.Len())
	}
	// Returning a session that is itself about to expire drops it.
	clk.advance(20 * time.Minute)
	s := p.Get(minutes(30)) // recent now has 30 s left: discarded, new one made
	if s == recent {
		t.Fatal("Get returned an expiring session")
	}
	s.LastUse = clk.now().Add(-29*time.Minute - 30*time.Second)
	p.Put(s, minutes(30))
	if p.Len() != 0 {
		t.Fatal("Put pooled a session with 30 s left")
	}
}

func TestNilTimeoutNeverExpires(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_000_000, 0)}
	p := NewPool(clk.now)
	s := p.Get(nil)
	clk.advance(24 * time.Hour)
	p.Put(s, nil)
	if got := p.Get(nil); got != s {
		t.Fatal("session dropped although no timeout is known")
	}
}

func TestDrainReturnsAllIDsAndEmptiesPool(t *testing.T) {
	p := NewPool(nil)
	a, b, c := p.Get(minutes(30)), p.Get(minutes(30)), p.Get(minutes(30))
	p.Put(a, minutes(30))
	p.Put(b, minutes(30))
	ids := p.Drain()
	if len(ids) != 2 || !bytes.Equal(ids[0], b.ID) || !bytes.Equal(ids[1], a.ID) {
		t.Fatalf("Drain = %v, want [b a]", ids)
	}
	if p.Len() != 0 {
		t.Fatal("pool not empty after Drain")
	}
	// A session checked out during Drain can still be returned.
	p.Put(c, minutes(30))
	if p.Len() != 1 {
		t.Fatal("session returned after Drain was not pooled")
	}
}

func TestClearDropsCheckedOutSessionsOnReturn(t *testing.T) {
	p := NewPool(nil)
	out := p.Get(minutes(30))
	pooled := p.Get(minutes(30))
	p.Put(pooled, minutes(30))
	p.Clear()
	if p.Len() != 0 {
		t.Fatal("Clear left sessions in the pool")
	}
	p.Put(out, minutes(30))
	if p.Len() != 0 {
		t.Fatal("session checked out before Clear rejoined the pool")
	}
}

func TestClientAcquiresLazilyAndEndReturnsToPool(t *testing.T) {
	p := NewPool(nil)
	c := NewClient(p, true)
	if c.Server != nil || c.ID() != nil {
		t.Fatal("server session taken before Acquire")
	}
	s1, err := c.Acquire(minutes(30))
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := c.Acquire(minutes(30))
	if s1 != s2 {
		t.Fatal("Acquire twice gave different server sessions")
	}
	c.End()
	c.End() // idempotent
	if p.Len() != 1 {
		t.Fatalf("pool has %d sessions after End, want 1", p.Len())
	}
	next := NewClient(p, false)
	s3, _ := next.Acquire(minutes(30))
	if s3 != s1 || !bytes.Equal(next.ID(), s1.ID) {
		t.Fatal("next client session did not reuse the returned server session")
	}
}

func TestEndedClientCannotBeUsed(t *testing.T) {
	p := NewPool(nil)
	c := NewClient(p, false)
	c.End()
	if _, err := c.Acquire(minutes(30)); !errors.Is(err, mongoerr.ErrSessionEnded) {
		t.Fatalf("Acquire after End: %v, want mongoerr.ErrSessionEnded", err)
	}
	if err := c.CheckUsable(); !errors.Is(err, mongoerr.ErrSessionEnded) {
		t.Fatalf("CheckUsable after End: %v", err)
	}
	if p.Len() != 0 {
		t.Fatal("ending a session that never acquired one pooled something")
	}
}

func TestDirtyClientSessionDiscardedOnEnd(t *testing.T) {
	p := NewPool(nil)
	c := NewClient(p, false)
	s, _ := c.Acquire(minutes(30))
	c.MarkDirty()
	if !s.Dirty {
		t.Fatal("MarkDirty did not mark the server session")
	}
	c.End()
	if p.Len() != 0 {
		t.Fatal("dirty session returned to the pool")
	}
}

func ct(t, i uint32) bson.Raw {
	b, _ := bson.Marshal(bson.D{{Key: "clusterTime", Value: bson.Timestamp{T: t, I: i}}, {Key: "signature", Value: bson.D{}}})
	return b
}

func TestClusterTimeOnlyAdvances(t *testing.T) {
	c := NewClient(NewPool(nil), false)
	c.AdvanceClusterTime(ct(10, 1))
	c.AdvanceClusterTime(ct(9, 5))
	if !bytes.Equal(c.ClusterTime(), ct(10, 1)) {
		t.Fatalf("cluster time went backwards: %v", c.ClusterTime())
	}
	c.AdvanceClusterTime(ct(10, 2))
	if !bytes.Equal(c.ClusterTime(), ct(10, 2)) {
		t.Fatalf("cluster time did not advance: %v", c.ClusterTime())
	}
	c.AdvanceClusterTime(bson.Raw{5, 0, 0, 0, 0}) // no clusterTime field: ignored
	if !bytes.Equal(c.ClusterTime(), ct(10, 2)) {
		t.Fatal("malformed cluster time replaced a valid one")
	}
	if got := MaxClusterTime(nil, ct(1, 1)); !bytes.Equal(got, ct(1, 1)) {
		t.Fatal("MaxClusterTime(nil, x) != x")
	}
}

func TestPoolConcurrentUse(t *testing.T) {
	p := NewPool(nil)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				s := p.Get(minutes(30))
				s.NextTxnNumber()
				p.Put(s, minutes(30))
			}
		})
	}
	wg.Wait()
	if p.Len() < 1 || p.Len() > 8 {
		t.Fatalf("pool has %d sessions, want between 1 and 8", p.Len())
	}
}
