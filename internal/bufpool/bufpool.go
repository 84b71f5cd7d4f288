package bufpool

import (
	"math/bits"
	"sync"
)

// Size classes: powers of two from 1<<minShift to 1<<maxShift bytes, the
// largest holding a message of the server's default maximum size (48 MB).
// Smaller messages are cheap to allocate and are not pooled.
const (
	minShift = 14 // 16 KiB
	maxShift = 26 // 64 MiB
)

// Min and Max bound the lengths Get serves from the pool.
const (
	Min = 1 << minShift
	Max = 1 << maxShift
)

var classes [maxShift - minShift + 1]sync.Pool

// class is the index of the smallest class holding n bytes, for
// Min <= n <= Max.
func class(n int) int {
	return bits.Len(uint(n-1)) - minShift
}

// Get returns a buffer of length n whose capacity is n's size class, or nil
// when n is outside [Min, Max]. Its contents are not zeroed: the caller
// overwrites all n bytes. Hand it back with Put.
func Get(n int) *[]byte {
	if n < Min || n > Max {
		return nil
	}
	c := class(n)
	if p, ok := classes[c].Get().(*[]byte); ok {
		*p = (*p)[:n]
		return p
	}
	b := make([]byte, n, 1<<(c+minShift))
	return &b
}

// TryGet is Get without the allocation: it returns a buffer only when the
// pool holds one of n's size class, else nil. A reader that must not
// allocate n bytes on the strength of a message header alone can still
// read into a buffer recycled earlier.
func TryGet(n int) *[]byte {
	if n < Min || n > Max {
		return nil
	}
	p, _ := classes[class(n)].Get().(*[]byte)
	if p != nil {
		*p = (*p)[:n]
	}
	return p
}

// Put hands b, from Get, back for reuse. The caller must hold no reference
// into it (nor let anyone else): its bytes will be overwritten. Put(nil)
// does nothing.
func Put(b *[]byte) {
	if b == nil {
		return
	}
	n := cap(*b)
	if n < Min || n > Max || n&(n-1) != 0 {
		return // not from Get
	}
	classes[class(n)].Put(b)
}
