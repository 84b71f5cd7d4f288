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

// timeline returns the seconds that saw an operation, with faults[i] (the
// cumulative activations sampled at the end of second i) turned into
// activations per second.
func (c *secondCounter) timeline(faults []int64) []faultsSecond {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.secs)
	for n > 0 && c.secs[n-1].ok == 0 && c.secs[n-1].failed == 0 {
		n--
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

// sampleEachSecond reads read() once a second until ctx ends, and once
// more at the end; it returns the readings minus the first (taken at the
// start). A nil read gives none.
func sampleEachSecond(ctx context.Context, read func() int64) []int64 {
	if read == nil {
		return nil
	}
	base := read()
	var out []int64
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return append(out, read()-base)
		case <-t.C:
			out = append(out, read()-base)
		}
	}
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
