package sturdy

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/blackpipe"
	"github.com/sturdy-go/sturdy/internal/testsupport"
)

// TestConnectTimeoutReachesLowerLayersLiterally checks that the root
// resolves connectTimeoutMS once: absent it is the 10 s default, and 0 is
// handed down as 0 ("no timeout" for conn and the monitors), with no
// stand-in value, while the client still connects and runs commands.
func TestConnectTimeoutReachesLowerLayersLiterally(t *testing.T) {
	srv := blackpipe.Start(t)
	for _, tc := range []struct {
		query string
		want  time.Duration
	}{
		{"", 10 * time.Second},
		{"connectTimeoutMS=0", 0},
		{"connectTimeoutMS=1500", 1500 * time.Millisecond},
	} {
		ctx := testsupport.Context(t, 0)
		c, err := Connect(ctx, "mongodb://"+srv.Addr()+"/?directConnection=true&"+tc.query)
		if err != nil {
			t.Fatal(err)
		}
		to := c.topo.Options()
		if to.Conn.DialTimeout != tc.want || to.Pool.Conn.DialTimeout != tc.want {
			t.Errorf("%q: dial timeout %v (pool %v), want %v", tc.query, to.Conn.DialTimeout, to.Pool.Conn.DialTimeout, tc.want)
		}
		if to.HeartbeatInterval != 10*time.Second || to.MinHeartbeatInterval != 500*time.Millisecond || to.ServerSelectionTimeout != 30*time.Second {
			t.Errorf("%q: heartbeat %v, min %v, selection %v; want the defaults", tc.query, to.HeartbeatInterval, to.MinHeartbeatInterval, to.ServerSelectionTimeout)
		}
		if _, err := c.Database("admin").RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}); err != nil {
			t.Errorf("%q: ping: %v", tc.query, err)
		}
		if err := c.Disconnect(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
