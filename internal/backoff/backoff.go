package backoff

import (
	"math"
	"sync/atomic"
	"time"
)

// Defaults of the overload retry policy (Client Backpressure spec, as first
// accepted; docs/retry-policy.md).
const (
	// Base is the backoff before the first retry, before jitter.
	Base = 100 * time.Millisecond
	// Max caps the backoff before jitter.
	Max = 10 * time.Second
	// BucketCapacity is the token bucket's size and initial balance.
	BucketCapacity = 1000.0
	// SuccessDeposit is returned to the bucket by every successful operation.
	SuccessDeposit = 0.1
	// RetryCost is what a retry takes from the bucket; a successful retry
	// returns it (with SuccessDeposit), as does a retry that fails for a
	// reason other than overload.
	RetryCost = 1.0
)

// Delay is jitter × min(Max, base × 2^retry): retry is 0 for the first
// retry, and jitter is clamped to [0, 1]. The caller chooses base (the
// client's configured base or a server's baseBackoffMS); base ≤ 0 means no
// wait.
func Delay(base time.Duration, retry int, jitter float64) time.Duration {
	if base <= 0 {
		return 0
	}
	if retry < 0 {
		retry = 0
	}
	d := Max
	// 2^retry overflows quickly; once the product passes Max it stays there.
	if retry < 62 {
		if b := float64(base) * math.Exp2(float64(retry)); b < float64(Max) {
			d = time.Duration(b)
		}
	}
	switch {
	case jitter <= 0 || math.IsNaN(jitter):
		return 0
	case jitter >= 1:
		return d
	}
	return time.Duration(jitter * float64(d))
}

// milli is the bucket's fixed-point unit: balances are kept in thousandths
// of a token so deposits of 0.1 add up exactly.
const milli = 1000

// TokenBucket is the client-wide retry budget: a retry may run only if it
// can take RetryCost tokens. It is a single atomic counter updated by
// compare-and-swap, so it is safe and cheap under heavy concurrency.
type TokenBucket struct {
	capacity int64 // in milli-tokens
	balance  atomic.Int64
}

// NewTokenBucket returns a full bucket of the given capacity (≤ 0 means
// BucketCapacity).
func NewTokenBucket(capacity float64) *TokenBucket {
	if capacity <= 0 {
		capacity = BucketCapacity
	}
	b := &TokenBucket{capacity: toMilli(capacity)}
	b.balance.Store(b.capacity)
	return b
}

func toMilli(n float64) int64 { return int64(math.Round(n * milli)) }

// Consume takes n tokens if the bucket holds at least n and reports
// whether it did.
func (b *TokenBucket) Consume(n float64) bool {
	m := toMilli(n)
	for {
		cur := b.balance.Load()
		if cur < m {
			return false
		}
		if b.balance.CompareAndSwap(cur, cur-m) {
			return true
		}
	}
}

// Deposit adds n tokens, up to the capacity.
func (b *TokenBucket) Deposit(n float64) {
	m := toMilli(n)
	for {
		cur := b.balance.Load()
		next := min(cur+m, b.capacity)
		if next == cur || b.balance.CompareAndSwap(cur, next) {
			return
		}
	}
}

// Tokens is the current balance.
func (b *TokenBucket) Tokens() float64 { return float64(b.balance.Load()) / milli }

// Capacity is the bucket's size.
func (b *TokenBucket) Capacity() float64 { return float64(b.capacity) / milli }
