package sturdy_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/sturdy-go/sturdy/blackpipe"
	"github.com/sturdy-go/sturdy/wire"
)

// serverMonitoringMode in the URI reaches the monitors: the default (auto,
// off FaaS) streams with an exhaustAllowed awaitable hello; poll never does.
func TestServerMonitoringModeFromURI(t *testing.T) {
	for _, k := range []string{"AWS_EXECUTION_ENV", "AWS_LAMBDA_RUNTIME_API", "FUNCTIONS_WORKER_RUNTIME", "K_SERVICE", "FUNCTION_NAME", "VERCEL"} {
		t.Setenv(k, "")
	}
	for _, tc := range []struct {
		opt    string
		stream bool
	}{{"", true}, {"&serverMonitoringMode=stream", true}, {"&serverMonitoringMode=poll", false}} {
		t.Run("mode"+tc.opt, func(t *testing.T) {
			srv := blackpipe.Start(t)
			var exhaust, plain atomic.Int64
			srv.Autorespond(blackpipe.Command("hello"), func(r *blackpipe.Request) bool {
				if r.Flags&wire.ExhaustAllowed != 0 {
					exhaust.Add(1)
				} else if _, err := r.Command.LookupErr("client"); err != nil {
					plain.Add(1) // a check after the handshake
				}
				return false
			})
			connect(t, srv.URI()+"&heartbeatFrequencyMS=500"+tc.opt, nil)
			deadline := time.Now().Add(10 * time.Second)
			// Streaming shows at the first check after the handshake;
			// polling needs two plain checks to show it never streams.
			for exhaust.Load() == 0 && plain.Load() < 2 {
				if time.Now().After(deadline) {
					t.Fatalf("no monitoring checks after the handshake (exhaust %d, plain %d)", exhaust.Load(), plain.Load())
				}
				time.Sleep(10 * time.Millisecond)
			}
			if got := exhaust.Load() > 0; got != tc.stream {
				t.Fatalf("%d exhaustAllowed hellos, streaming want %v", exhaust.Load(), tc.stream)
			}
		})
	}
}
