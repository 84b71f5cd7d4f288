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

// TestLayersApplyTheDefaultsTable checks that what each layer builds from
// the client's settings carries the defaults table's values for zero
// options, and the options themselves otherwise.
func TestLayersApplyTheDefaultsTable(t *testing.T) {
	srv := blackpipe.Start(t)
	lt, zl := 5*time.Millisecond, 6
	for _, tc := range []struct {
		name                    string
		o                       Options
		maxPool, maxConnecting  int
		localThreshold          time.Duration
		zlib                    int
		selection, socket, idle time.Duration
	}{
		{"zero", Options{}, 100, 2, 15 * time.Millisecond, -1, 30 * time.Second, 0, 0},
		{"set", Options{MaxPoolSize: -1, MaxConnecting: 3, LocalThreshold: &lt, ZlibLevel: &zl,
			ServerSelectionTimeout: time.Second, SocketTimeout: 2 * time.Second, MaxIdleTime: time.Minute},
			0, 3, lt, 6, time.Second, 2 * time.Second, time.Minute},
	} {
		ctx := testsupport.Context(t, 0)
		o := tc.o
		o.Hosts, o.Direct = []string{srv.Addr()}, true
		c, err := ConnectWithOptions(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		to := c.topo.Options()
		if to.Pool.MaxPoolSize != tc.maxPool || to.Pool.MaxConnecting != tc.maxConnecting || to.Pool.MaxIdleTime != tc.idle {
			t.Errorf("%s: pool max %d, connecting %d, idle %v", tc.name, to.Pool.MaxPoolSize, to.Pool.MaxConnecting, to.Pool.MaxIdleTime)
		}
		if to.Pool.BackgroundInterval != 100*time.Millisecond {
			t.Errorf("%s: pool background interval %v", tc.name, to.Pool.BackgroundInterval)
		}
		if to.LocalThreshold != tc.localThreshold || to.ServerSelectionTimeout != tc.selection || to.SocketTimeout != tc.socket {
			t.Errorf("%s: local threshold %v, selection %v, socket %v", tc.name, to.LocalThreshold, to.ServerSelectionTimeout, to.SocketTimeout)
		}
		if to.Conn.ZlibLevel != tc.zlib || to.Pool.Conn.ZlibLevel != tc.zlib || to.Pool.Conn.SocketTimeout != tc.socket || to.Conn.SocketTimeout != 0 {
			t.Errorf("%s: zlib %d (pool %d), pool socket timeout %v, monitor socket timeout %v",
				tc.name, to.Conn.ZlibLevel, to.Pool.Conn.ZlibLevel, to.Pool.Conn.SocketTimeout, to.Conn.SocketTimeout)
		}
		if err := c.Disconnect(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
