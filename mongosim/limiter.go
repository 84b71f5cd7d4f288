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

	// The connection establishment bucket and its queue.
	connRate, connBurst, connTokens float64
	connLast                        time.Time
	connDepth, connQueued           int
	// connOff is ingressConnectionEstablishmentRateLimiterEnabled false:
	// the bucket keeps its settings but admits every connection.
	connOff bool
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
	l.connRate = max(o.ConnectionsPerSecond, 0)
	l.connBurst = float64(o.ConnectionBurst)
	if l.connBurst <= 0 {
		l.connBurst = max(1, l.connRate)
	}
	l.connTokens, l.connLast = l.connBurst, l.now()
	l.connDepth = max(o.ConnectionQueueDepth, 0)
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
	return LimiterOptions{RequestsPerSecond: l.rate, Burst: int(l.burst), BaseBackoffMS: l.backoff, MaxConnections: l.maxConns, RejectCost: l.rejectCost,
		ConnectionsPerSecond: l.connRate, ConnectionBurst: int(l.connBurst), ConnectionQueueDepth: l.connDepth}, l.enabled
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

// Connection admission outcomes.
const (
	connAdmitted = iota
	connQueued
	connRejected
)

// admitConn decides for a new connection: admitted (a token was free),
// queued (it must wait for one with waitConnToken), or rejected.
func (l *limiter) admitConn() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.connOff || l.connRate <= 0 {
		return connAdmitted
	}
	if l.takeConnTokenLocked() {
		return connAdmitted
	}
	if l.connQueued < l.connDepth {
		l.connQueued++
		return connQueued
	}
	return connRejected
}

func (l *limiter) takeConnTokenLocked() bool {
	now := l.now()
	if el := now.Sub(l.connLast).Seconds(); el > 0 {
		l.connTokens = min(l.connBurst, l.connTokens+el*l.connRate)
	}
	l.connLast = now
	if l.connTokens < 1 {
		return false
	}
	l.connTokens--
	return true
}

// waitConnToken waits until a queued connection gets its token, or done is
// closed; either way it leaves the queue. It waits in real time, so a test
// of the queue runs on the real clock.
func (l *limiter) waitConnToken(done <-chan struct{}) bool {
	for {
		l.mu.Lock()
		ok := l.connOff || l.connRate <= 0 || l.takeConnTokenLocked()
		var wait time.Duration
		if ok {
			l.connQueued--
		} else {
			wait = time.Duration((1 - l.connTokens) / l.connRate * float64(time.Second))
		}
		l.mu.Unlock()
		if ok {
			return true
		}
		t := time.NewTimer(max(wait, time.Millisecond))
		select {
		case <-done:
			t.Stop()
			l.mu.Lock()
			l.connQueued--
			l.mu.Unlock()
			return false
		case <-t.C:
		}
	}
}

// leaveConnQueue frees the queue slot of a connection that closed before
// it sent anything.
func (l *limiter) leaveConnQueue() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.connQueued = max(0, l.connQueued-1)
}

// setConnEnabled turns the connection establishment bucket on or off
// without losing its settings, and reports whether it was on.
func (l *limiter) setConnEnabled(on bool) (was bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	was = !l.connOff && l.connRate > 0
	l.connOff = !on
	l.connTokens, l.connLast = l.connBurst, l.now()
	return was
}

// connEnabled reports whether the connection establishment bucket acts.
func (l *limiter) connEnabled() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.connOff && l.connRate > 0
}
