package sturdy

import (
	"time"

	"github.com/sturdy-go/sturdy/internal/exec"
	"github.com/sturdy-go/sturdy/internal/testhook"
)

// ExecutorOf gives the retry tests the client's executor, to inject the
// backoff clock and jitter and to read the retry token bucket.
func ExecutorOf(c *Client) *exec.Executor { return c.exec }

// SetMinHeartbeatIntervalForTest shortens the minimum time between server
// checks for clients connected until restore is called.
func SetMinHeartbeatIntervalForTest(d time.Duration) (restore func()) {
	return testhook.SetMinHeartbeatInterval(d)
}

// CursorHoldsPooledBuffer reports whether the cursor's current batch lies
// in a pooled reply buffer it will recycle once the batch is consumed.
func CursorHoldsPooledBuffer(c *Cursor) bool { return c.buf != nil }
