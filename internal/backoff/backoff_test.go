package backoff

import (
	"sync"
	"testing"
	"time"
)

func TestDelaySchedule(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		base   time.Duration
		retry  int
		jitter float64
		want   time.Duration
	}{
		{Base, 0, 0.5, 50 * ms},
		{Base, 1, 0.5, 100 * ms},
		{Base, 2, 0.5, 200 * ms},
		{Base, 3, 0.5, 400 * ms},
		{Base, 4, 0.5, 800 * ms},
		{Base, 0, 1, 100 * ms},
		{Base, 7, 1, 10 * time.Second}, // 12.8 s capped
		{Base, 200, 0.5, 5 * time.Second},
		{50 * ms, 0, 1, 50 * ms},
		{50 * ms, 1, 1, 100 * ms},
		{Base, 3, 0, 0},
		{Base, 3, -1, 0},
		{Base, 0, 2, 100 * ms},
		{Base, -3, 1, 100 * ms},
	}
	for _, c := range cases {
		if got := Delay(c.base, c.retry, c.jitter); got != c.want {
			t.Errorf("Delay(%v, %d, %v) = %v, want %v", c.base, c.retry, c.jitter, got, c.want)
		}
	}
}

func TestTokenBucketAccounting(t *testing.T) {
	b := NewTokenBucket(0)
	if b.Tokens() != 1000 || b.Capacity() != 1000 {
		t.Fatalf("new bucket %v/%v", b.Tokens(), b.Capacity())
	}
	b.Deposit(SuccessDeposit) // full: stays at capacity
	if b.Tokens() != 1000 {
		t.Fatalf("deposit over capacity: %v", b.Tokens())
	}
	if !b.Consume(1) || b.Tokens() != 999 {
		t.Fatalf("after consume: %v", b.Tokens())
	}
	for range 5 {
		b.Deposit(0.1)
	}
	if b.Tokens() != 999.5 {
		t.Fatalf("0.1 deposits do not add up exactly: %v", b.Tokens())
	}
	small := NewTokenBucket(2)
	//lint:ignore SA4000 Consume changes the bucket: the same call three times is the test.
	if !small.Consume(1) || !small.Consume(1) || small.Consume(1) {
		t.Fatal("a bucket of 2 must grant exactly two retries")
	}
	small.Deposit(0.5)
	if small.Consume(1) {
		t.Fatal("granted a retry with half a token")
	}
	small.Deposit(0.5)
	if !small.Consume(1) {
		t.Fatal("refused a retry with a whole token")
	}
}

func TestTokenBucketConcurrent(t *testing.T) {
	b := NewTokenBucket(100)
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted := 0
	for range 50 {
		wg.Go(func() {
			for range 10 {
				if b.Consume(1) {
					mu.Lock()
					granted++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if granted != 100 || b.Tokens() != 0 {
		t.Fatalf("granted %d, left %v; want exactly 100 grants and 0 left", granted, b.Tokens())
	}
	for range 50 {
		wg.Go(func() {
			for range 100 {
				b.Deposit(0.1)
			}
		})
	}
	wg.Wait()
	if b.Tokens() != 100 {
		t.Fatalf("after 500 tokens of deposits into a bucket of 100: %v", b.Tokens())
	}
}
