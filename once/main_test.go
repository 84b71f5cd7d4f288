package once

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sturdy-go/sturdy/internal/testhook"
)

func TestMain(m *testing.M) {
	// Every injected network error makes the client rediscover the server;
	// at the SDAM minimum of 500 ms per re-check the fault tests would
	// spend most of their time waiting.
	testhook.SetMinHeartbeatInterval(5 * time.Millisecond)
	goleak.VerifyTestMain(m)
}
