// Package event defines the monitoring events a sturdy Client publishes —
// command started/succeeded/failed for every attempt, retries with their
// reason and backoff, connection-pool events, server heartbeats and topology
// changes — and the Monitor that receives them.
//
// Handlers run synchronously on the goroutine that produced the event, so
// they must be quick and must not call back into the client.
package event
