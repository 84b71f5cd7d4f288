// Package bufpool recycles the large byte buffers replies are read into.
//
// A cursor draining a big result reads each batch (hundreds of kilobytes to
// 16 megabytes) into a buffer of its own; allocating a fresh one per batch
// makes the garbage collector run every few batches. Buffers are pooled by
// power-of-two size class, so a buffer handed back serves any later message
// of its class. Only whoever can prove nothing refers into a buffer any
// more may hand it back: everyone else just drops it and the garbage
// collector frees it as before.
package bufpool
