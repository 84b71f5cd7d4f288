package testhook

import (
	"sync/atomic"
	"time"
)

var minHeartbeat atomic.Int64

// MinHeartbeatInterval is the override of the 500 ms minimum, or 0 for none.
func MinHeartbeatInterval() time.Duration { return time.Duration(minHeartbeat.Load()) }

// SetMinHeartbeatInterval overrides the minimum for clients connected until
// restore is called.
func SetMinHeartbeatInterval(d time.Duration) (restore func()) {
	old := minHeartbeat.Swap(int64(d))
	return func() { minHeartbeat.Store(old) }
}

// SessionDirty reports whether a *sturdy.Session's server session is
// marked dirty (it saw a network error and will be discarded, not pooled).
// Package sturdy sets it at init; it takes any because sturdy imports this
// package. Only tests call it.
var SessionDirty func(session any) bool
