package mongosim

import (
	"sync"
	"time"
)

// limiter holds the ingress request token bucket and the connection cap.
// The bucket refills continuously at rate tokens per second (measured with
// the injectable clock) up to burst; each admitted request takes one token.
type limiter struct {
	mu       sync.Mutex
	now      func() time.Time
	enabled  bool    // ingressRequestRateLimiterEnabled
	rate     float64 // tokens per second; 0 turns the bucket off
	burst    float64
	tokens   float64
	last     time.Time
	backoff  int32 // baseBackoffMS attached to overload errors; 0 = none
	maxConns int
	// rejectCost is the tokens a rejection takes (LimiterOptions.RejectCost).
	rejectCost float64
}

func newLimiter(now func() time.Time, o LimiterOptions) *limiter {
	l := &limiter{now: now, enabled: true}
	l.set(o)
	return l
}

// set replaces the configuration; the bucket starts full.
func (l *limiter) set(o LimiterOptions) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rate = max(o.RequestsPerSecond, 0)
	l.burst = float64(o.Burst)
	l.backoff = o.BaseBackoffMS
	l.maxConns = o.MaxConnections
	l.rejectCost = max(o.RejectCost, 0)
	l.refillConfigLocked()
}

// refillConfigLocked normalises burst and fills the bucket after a change.
func (l *limiter) refillConfigLocked() {
	if l.burst <= 0 {
		l.burst = max(1, l.rate)
	}
	l.tokens = l.burst
	l.last = l.now()
}

// options returns the current configuration.
func (l *limiter) options() (o LimiterOptions, enabled bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return LimiterOptions{RequestsPerSecond: l.rate, Burst: int(l.burst), BaseBackoffMS: l.backoff, MaxConnections: l.maxConns, RejectCost: l.rejectCost}, l.enabled
}

// admit takes a token. on reports whether the bucket is active at all.
func (l *limiter) admit() (admitted, on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.enabled || l.rate <= 0 {
		return true, false
	}
	now := l.now()
	if el := now.Sub(l.last).Seconds(); el > 0 {
		l.tokens = min(l.burst, l.tokens+el*l.rate)
	}
	l.last = now
	if l.tokens < 1 {
		l.tokens = max(l.tokens-l.rejectCost, -l.burst)
		return false, true
	}
	l.tokens--
	return true, true
}

func (l *limiter) baseBackoffMS() int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.backoff
}

func (l *limiter) maxConnections() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.maxConns
}

// setEnabled turns the request bucket on or off without losing its rate.
func (l *limiter) setEnabled(on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.enabled = on
	l.tokens = l.burst
	l.last = l.now()
}

// setRate changes the refill rate.
func (l *limiter) setRate(rate float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rate = max(rate, 0)
	l.refillConfigLocked()
}

// setBurst sets the bucket capacity in tokens.
func (l *limiter) setBurst(tokens float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.burst = tokens
	l.refillConfigLocked()
}

func (l *limiter) setBackoff(ms int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.backoff = ms
}

func (l *limiter) setMaxConnections(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.maxConns = n
}
