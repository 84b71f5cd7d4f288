package topology

import (
	"io"
	"testing"
	"time"

	"github.com/sturdy-go/sturdy/internal/mongoerr"
	"github.com/sturdy-go/sturdy/mongosim"
)

// After an application's network error marks a known server Unknown, the
// monitor checks it at once rather than after minHeartbeatFrequencyMS:
// with both heartbeat intervals at a minute, the server is selectable
// again well within the 10 s the selection allows. Both places the
// monitor can be are covered: waiting for the heartbeat, and in the
// minimum-interval pause that follows a requested check.
func TestApplicationNetworkErrorRediscoversAtOnce(t *testing.T) {
	for _, pausing := range []bool{false, true} {
		name := map[bool]string{false: "monitor waiting", true: "monitor in its minimum pause"}[pausing]
		t.Run(name, func(t *testing.T) {
			cluster := mongosim.StartWithOptions(t, mongosim.Options{})
			topo := connect(t, Options{Hosts: []string{cluster.Members()[0].Addr()},
				HeartbeatInterval: time.Minute, MinHeartbeatInterval: time.Minute})
			primary := selectWrite(t, topo, 10*time.Second)
			if pausing {
				// A requested check now runs at once (the monitor's wait
				// began with its first check) and leaves the monitor in
				// the minimum pause before the next one.
				topo.RequestImmediateCheck()
			}
			for i := 0; i < 3; i++ {
				gen := primary.Pool().Generation()
				primary.ProcessError(&mongoerr.NetworkError{Addr: primary.Addr(), Op: "read", Err: io.EOF}, gen, false)
				if sd := primary.Description(); sd.Kind != ServerUnknown {
					t.Fatalf("after a network error the server is %s", sd.Kind)
				}
				if s := selectWrite(t, topo, 10*time.Second); s != primary {
					t.Fatalf("reselected %s", s.Addr())
				}
			}
		})
	}
}
