package bufpool

import "testing"

func TestGetSizes(t *testing.T) {
	for _, tc := range []struct{ n, wantCap int }{
		{Min - 1, 0}, {0, 0}, {Max + 1, 0},
		{Min, Min}, {Min + 1, 2 * Min}, {400_000, 512 << 10}, {1 << 20, 1 << 20}, {1<<20 + 1, 2 << 20},
	} {
		b := Get(tc.n)
		if tc.wantCap == 0 {
			if b != nil {
				t.Errorf("Get(%d) = buffer of cap %d, want nil (not pooled)", tc.n, cap(*b))
			}
			continue
		}
		if b == nil || len(*b) != tc.n || cap(*b) != tc.wantCap {
			t.Fatalf("Get(%d): want len %d cap %d, got %v", tc.n, tc.n, tc.wantCap, b)
		}
		Put(b)
	}
}

func TestPutReuses(t *testing.T) {
	// sync.Pool may drop anything at any time (and does so at random under
	// -race), so reuse is only observed, not required, across tries.
	for range 100 {
		b := Get(100_000)
		(*b)[0] = 42
		Put(b)
		c := Get(70_000) // same 128 KiB class
		if len(*c) != 70_000 || cap(*c) != 128<<10 {
			t.Fatalf("Get(70000): len %d cap %d", len(*c), cap(*c))
		}
		if c == b {
			return
		}
		Put(c)
	}
	t.Fatal("a buffer handed back was never reused by its class")
}

func TestTryGetNeverAllocates(t *testing.T) {
	const n = 5 << 20 // a class no other test uses
	for _, size := range []int{10, Max + 1} {
		if b := TryGet(size); b != nil {
			t.Fatalf("TryGet(%d) = buffer of cap %d, want nil (not pooled)", size, cap(*b))
		}
	}
	if b := TryGet(n); b != nil {
		t.Fatalf("TryGet(%d) on an empty class = buffer of cap %d", n, cap(*b))
	}
	for range 100 {
		b := Get(n)
		Put(b)
		if c := TryGet(n); c != nil {
			if c != b || len(*c) != n {
				t.Fatalf("TryGet(%d) = a buffer of len %d never handed back", n, len(*c))
			}
			return
		}
	}
	t.Fatal("TryGet never returned a buffer handed back to its class")
}

func TestPutIgnoresForeignBuffers(t *testing.T) {
	Put(nil)
	odd := make([]byte, 3*Min) // not a power of two: not from Get
	Put(&odd)
	small := make([]byte, 10)
	Put(&small)
	for range 10 {
		if b := Get(3 * Min); cap(*b) != 4*Min {
			t.Fatalf("Get(3*Min) after Put of a foreign buffer: cap %d", cap(*b))
		}
	}
}
