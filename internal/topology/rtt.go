package topology

import (
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/internal/conn"
)

// rttAverage is the exponentially weighted moving average of round trip
// times the server selection spec prescribes (alpha 0.2).
type rttAverage struct {
	avg time.Duration
	set bool
}

const rttAlpha = 0.2

// add records a sample and returns the new average. Negative samples (a
// clock step) are ignored.
func (r *rttAverage) add(sample time.Duration) time.Duration {
	if sample < 0 {
		return r.avg
	}
	if !r.set {
		r.avg, r.set = sample, true
		return r.avg
	}
	r.avg = time.Duration(rttAlpha*float64(sample) + (1-rttAlpha)*float64(r.avg))
	return r.avg
}

func (r *rttAverage) reset() { *r = rttAverage{} }

// rttWindow is how many recent samples the minimum RTT is taken over.
const rttWindow = 10

// rttStats holds one server's RTT average and its recent samples. The
// monitor and the RTT monitor both write it, so it has its own lock.
type rttStats struct {
	mu     sync.Mutex
	avg    rttAverage
	recent [rttWindow]time.Duration
	n      int // samples recorded since the last reset
}

func (s *rttStats) add(sample time.Duration) {
	if sample < 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.avg.add(sample)
	s.recent[s.n%rttWindow] = sample
	s.n++
}

func (s *rttStats) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.avg.reset()
	s.n = 0
}

// get returns the average and the minimum over the last rttWindow
// samples; the minimum reads 0 until two samples exist, as the SDAM
// monitoring spec requires.
func (s *rttStats) get() (avg, minRTT time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n < 2 {
		return s.avg.avg, 0
	}
	minRTT = s.recent[0]
	for i := 1; i < min(s.n, rttWindow); i++ {
		minRTT = min(minRTT, s.recent[i])
	}
	return s.avg.avg, minRTT
}

// runRTT measures round trip times with plain hello on a connection of
// its own, every heartbeat interval, while the monitor streams: awaited
// replies say nothing about latency. It publishes no events and never
// changes the topology; failures only drop its connection.
func (m *monitor) runRTT() {
	var c *conn.Conn
	defer func() {
		if c != nil {
			_ = c.Close()
		}
	}()
	timeout := m.connectTimeout()
	legacy := false
	for m.ctx.Err() == nil {
		ctx, cancel := withTimeout(m.ctx, timeout)
		if c == nil || c.Closed() {
			var err error
			if c, err = conn.Dial(ctx, m.s.addr, m.opts); err == nil {
				m.rtt.add(c.HandshakeRTT())
			} else {
				c = nil
			}
		} else {
			name := "hello"
			if legacy {
				name = "isMaster"
			}
			start := time.Now()
			_, err := c.RoundTrip(ctx, "admin", bson.D{{Key: name, Value: int32(1)}, {Key: "helloOk", Value: true}})
			switch {
			case err == nil:
				m.rtt.add(time.Since(start))
			case !legacy && isCommandNotFound(err):
				legacy = true
			default:
				_ = c.Close()
			}
		}
		cancel()
		t := time.NewTimer(m.t.o.HeartbeatInterval)
		select {
		case <-m.ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}
