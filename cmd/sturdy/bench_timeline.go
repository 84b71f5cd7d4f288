package main

import (
	"context"
	"io"
	"os"
	"slices"
	"sync"
	"time"
)

// secondCounter collects a closed-loop run second by second: successes,
// failures and the latencies of successes, for the pages' timelines.
type secondCounter struct {
	mu   sync.Mutex
	secs []secondBucket
}

type secondBucket struct {
	ok, failed int64
	lat        []time.Duration
}

func newSecondCounter(n int) *secondCounter { return &secondCounter{secs: make([]secondBucket, n)} }

// add records an operation that ended at since-start at, taking took.
func (c *secondCounter) add(at, took time.Duration, ok bool) {
	i := int(at / time.Second)
	c.mu.Lock()
	defer c.mu.Unlock()
	if i >= len(c.secs) {
		c.secs = append(c.secs, make([]secondBucket, i+1-len(c.secs))...)
	}
	if ok {
		c.secs[i].ok++
		c.secs[i].lat = append(c.secs[i].lat, took)
	} else {
		c.secs[i].failed++
	}
}

// timeline returns the seconds up to the last that saw an operation or a
// fault, with faults[i] (the
// cumulative activations sampled at the end of second i) turned into
// activations per second.
func (c *secondCounter) timeline(faults []int64) []faultsSecond {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.secs)
	for n > 0 && c.secs[n-1].ok == 0 && c.secs[n-1].failed == 0 {
		n--
	}
	if len(faults) > n { // faults fired in a second no operation ended in
		c.secs = append(c.secs, make([]secondBucket, max(0, len(faults)-len(c.secs)))...)
		n = len(faults)
	}
	out := make([]faultsSecond, n)
	for i := range out {
		b := &c.secs[i]
		slices.Sort(b.lat)
		out[i] = faultsSecond{Succeeded: b.ok, Failed: b.failed, P99ms: percentileMS(b.lat, 0.99)}
		if i < len(faults) {
			out[i].Faults = faults[i]
			if i > 0 {
				out[i].Faults -= faults[i-1]
			}
		}
	}
	return out
}

// sampler reads a cumulative count once a second, for a timeline.
type sampler struct {
	read     func() int64 // nil: nothing to sample
	base     int64
	readings []int64 // cumulative since base, at the end of each second
	done     chan struct{}
}

// startSampler takes the first reading now and the others once a second
// until ctx ends.
func startSampler(ctx context.Context, read func() int64) *sampler {
	s := &sampler{read: read, done: make(chan struct{})}
	if read == nil {
		close(s.done)
		return s
	}
	s.base = read()
	go func() {
		defer close(s.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				s.readings = append(s.readings, s.read()-s.base)
			}
		}
	}()
	return s
}

// finish waits for the sampler to stop and takes the last reading, which
// counts what operations still running at the end added.
func (s *sampler) finish() []int64 {
	<-s.done
	if s.read == nil {
		return nil
	}
	return append(s.readings, s.read()-s.base)
}

// writeHTMLFile writes a page to file with write; an empty file name writes
// nothing.
func writeHTMLFile(file string, write func(io.Writer) error) error {
	if file == "" {
		return nil
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
