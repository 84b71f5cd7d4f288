// Package backoff holds the arithmetic of the client's overload retry policy
// (Client Backpressure spec,
// https://github.com/mongodb/specifications/blob/master/source/client-backpressure/client-backpressure.md):
// the exponential backoff with jitter and the client-wide retry token bucket.
// It has no I/O and no clock, so the executor can inject both and tests can
// check exact schedules.
package backoff
