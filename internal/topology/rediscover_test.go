package topology

import (
	"io"
	"sync"
	"testing"
	"time"

	"github.com/sturdy-go/sturdy/event"
	"github.com/sturdy-go/sturdy/mongoerr"
	"github.com/sturdy-go/sturdy/mongosim"
)

// After an application's error marks a known server Unknown — a network
// error, or a state change newer than what is known — the monitor checks
// it at once rather than after minHeartbeatFrequencyMS: with both
// heartbeat intervals at a minute, the server is selectable again well
// within the 10 s the selection allows. Both places the monitor can be
// are covered: waiting for the heartbeat, and in the minimum-interval
// pause that follows a requested check.
func TestApplicationErrorRediscoversAtOnce(t *testing.T) {
	errs := map[string]func(addr string) error{
		"network error": func(addr string) error {
			return &mongoerr.NetworkError{Addr: addr, Op: "read", Err: io.EOF}
		},
		// Without a topologyVersion the error is newer than any known.
		"not writable primary": func(string) error {
			return &mongoerr.CommandError{Code: 10107, Name: "NotWritablePrimary", Message: "not primary"}
		},
	}
	for kind, newErr := range errs {
		for _, pausing := range []bool{false, true} {
			name := kind + map[bool]string{false: ", monitor waiting", true: ", monitor in its minimum pause"}[pausing]
			t.Run(name, func(t *testing.T) {
				cluster := mongosim.StartWithOptions(t, mongosim.Options{})
				var mu sync.Mutex
				unknown := 0
				topo := connect(t, Options{Hosts: []string{cluster.Members()[0].Addr()},
					HeartbeatInterval: time.Minute, MinHeartbeatInterval: time.Minute,
					Monitor: &event.Monitor{ServerDescriptionChanged: func(e *event.ServerDescriptionChangedEvent) {
						if e.New.Kind == "Unknown" && e.Previous.Kind != "Unknown" {
							mu.Lock()
							unknown++
							mu.Unlock()
						}
					}}})
				primary := selectWrite(t, topo, 10*time.Second)
				if pausing {
					// A requested check now runs at once (the monitor's
					// wait began with its first check) and leaves the
					// monitor in the minimum pause before the next one.
					topo.RequestImmediateCheck()
				}
				for i := 0; i < 3; i++ {
					gen := primary.Pool().Generation()
					primary.ProcessError(newErr(primary.Addr()), gen, false)
					// A check already under way may bring the server back
					// at once; the event says the error marked it Unknown.
					waitFor(t, 10*time.Second, "the server marked Unknown", func() bool {
						mu.Lock()
						defer mu.Unlock()
						return unknown == i+1
					})
					if s := selectWrite(t, topo, 10*time.Second); s != primary {
						t.Fatalf("reselected %s", s.Addr())
					}
				}
			})
		}
	}
}
