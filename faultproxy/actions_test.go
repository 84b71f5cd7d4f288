package faultproxy_test

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/faultproxy"
	"github.com/sturdy-go/sturdy/mongosim"
)

var insertOnly = faultproxy.Match{Commands: []string{"insert"}}

// actionCase is one action observed from each client.
type actionCase struct {
	name   string
	rule   faultproxy.Rule
	params []string // added to the connection string
	check  func(t *testing.T, c client, sim *mongosim.Cluster, p *faultproxy.Proxy, err error, took time.Duration)
}

func runActionCases(t *testing.T, cases []actionCase) {
	for _, tc := range cases {
		for _, ck := range clientKinds {
			t.Run(tc.name+"/"+ck.name, func(t *testing.T) {
				sim := mongosim.Start(t)
				p := startProxy(t, sim, tc.rule)
				c := ck.connect(t, p.URI(), tc.params...)
				ctx := testCtx(t)
				// A first command so connection set-up is not timed.
				if err := c.find(ctx, "db", "warmup"); err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				err := c.insert(ctx, "db", "c", bson.D{{Key: "_id", Value: 1}})
				tc.check(t, c, sim, p, err, time.Since(start))
			})
		}
	}
}

func fired(t *testing.T, p *faultproxy.Proxy, want int64) {
	t.Helper()
	if got := p.Counts()[0].Fired; got != want {
		t.Errorf("rule fired %d times, want %d", got, want)
	}
}

// neverArrived checks an insert the proxy cut off before the server saw
// it: a network error, and nothing written.
func neverArrived(t *testing.T, c client, sim *mongosim.Cluster, p *faultproxy.Proxy, err error, _ time.Duration) {
	if !c.isNetworkError(err) {
		t.Fatalf("want a network error, got %v", err)
	}
	if n := countDirect(t, sim, "db", "c", nil); n != 0 {
		t.Errorf("server has %d documents, want 0: the request should never have arrived", n)
	}
	fired(t, p, 1)
}

// delayed300ms checks an insert its rule held up by 300ms: it succeeds,
// about that much later.
func delayed300ms(t *testing.T, _ client, _ *mongosim.Cluster, p *faultproxy.Proxy, err error, took time.Duration) {
	if err != nil {
		t.Fatal(err)
	}
	if took < 300*time.Millisecond || took > 5*time.Second {
		t.Errorf("insert took %v, want about 300ms", took)
	}
	fired(t, p, 1)
}

func TestActionsSeenByClients(t *testing.T) {
	runActionCases(t, []actionCase{
		{
			// The server applied the insert, the client only sees the
			// connection close: the ambiguous failure of "How To Write
			// Resilient MongoDB Applications" (A. Jesse Jiryu Davis, 2016).
			name:   "drop-reply",
			rule:   faultproxy.Rule{Match: insertOnly, Action: faultproxy.Action{Kind: faultproxy.DropReply}, Times: 1},
			params: []string{"retryWrites=false"},
			check: func(t *testing.T, c client, sim *mongosim.Cluster, p *faultproxy.Proxy, err error, _ time.Duration) {
				if !c.isNetworkError(err) {
					t.Fatalf("want a network error, got %v", err)
				}
				if n := countDirect(t, sim, "db", "c", nil); n != 1 {
					t.Errorf("server has %d documents, want the 1 the client thinks failed", n)
				}
				fired(t, p, 1)
			},
		},
		{
			// With retryable writes the retry is answered from the
			// server's transaction table: exactly one document, no error.
			name: "drop-reply with retryable writes",
			rule: faultproxy.Rule{Match: insertOnly, Action: faultproxy.Action{Kind: faultproxy.DropReply}, Times: 1},
			check: func(t *testing.T, c client, sim *mongosim.Cluster, p *faultproxy.Proxy, err error, _ time.Duration) {
				if err != nil {
					t.Fatalf("retryable write failed: %v", err)
				}
				if n := countDirect(t, sim, "db", "c", nil); n != 1 {
					t.Errorf("server has %d documents, want 1", n)
				}
				if r := sim.Stats().Replayed; r != 1 {
					t.Errorf("server replayed %d statements, want 1", r)
				}
				fired(t, p, 1)
			},
		},
		{
			name:   "drop-request",
			rule:   faultproxy.Rule{Match: insertOnly, Action: faultproxy.Action{Kind: faultproxy.DropRequest}, Times: 1},
			params: []string{"retryWrites=false"},
			check:  neverArrived,
		},
		{
			name:   "reset",
			rule:   faultproxy.Rule{Match: insertOnly, Action: faultproxy.Action{Kind: faultproxy.Reset}, Times: 1},
			params: []string{"retryWrites=false"},
			check:  neverArrived,
		},
		{
			name:  "delay before forwarding",
			rule:  faultproxy.Rule{Match: insertOnly, Action: faultproxy.Action{Kind: faultproxy.Delay, Delay: 300 * time.Millisecond}},
			check: delayed300ms,
		},
		{
			// The reply is held: the write is applied before the client
			// hears of it, so a client timeout here is ambiguous too.
			name:  "delay before replying",
			rule:  faultproxy.Rule{Match: insertOnly, Action: faultproxy.Action{Kind: faultproxy.Delay, ReplyDelay: 300 * time.Millisecond}},
			check: delayed300ms,
		},
		{
			name: "error with labels",
			rule: faultproxy.Rule{Match: insertOnly, Action: faultproxy.Action{Kind: faultproxy.Error, Error: faultproxy.CommandError{
				Code: 2, CodeName: "BadValue", Message: "injected", Labels: []string{"FaultproxyLabel"},
			}}},
			check: func(t *testing.T, c client, sim *mongosim.Cluster, p *faultproxy.Proxy, err error, _ time.Duration) {
				if c.code(err) != 2 || !c.hasLabel(err, "FaultproxyLabel") {
					t.Fatalf("want code 2 with label FaultproxyLabel, got %v", err)
				}
				if n := countDirect(t, sim, "db", "c", nil); n != 0 {
					t.Errorf("server has %d documents, want 0", n)
				}
				fired(t, p, 1)
			},
		},
		{
			// A retryable error label makes the client retry, and the
			// retry goes through.
			name: "retryable error once",
			rule: faultproxy.Rule{Match: insertOnly, Times: 1, Action: faultproxy.Action{Kind: faultproxy.Error, Error: faultproxy.CommandError{
				Code: 91, CodeName: "ShutdownInProgress", Labels: []string{"RetryableWriteError"},
			}}},
			check: func(t *testing.T, c client, sim *mongosim.Cluster, p *faultproxy.Proxy, err error, _ time.Duration) {
				if err != nil {
					t.Fatalf("retry after RetryableWriteError failed: %v", err)
				}
				if n := countDirect(t, sim, "db", "c", nil); n != 1 {
					t.Errorf("server has %d documents, want 1", n)
				}
				fired(t, p, 1)
			},
		},
		{
			name:   "shed",
			rule:   faultproxy.Rule{Match: insertOnly, Action: faultproxy.Action{Kind: faultproxy.Shed, BaseBackoffMS: 1}},
			params: []string{"retryWrites=false"},
			check: func(t *testing.T, c client, sim *mongosim.Cluster, p *faultproxy.Proxy, err error, _ time.Duration) {
				if c.code(err) != 462 || !c.hasLabel(err, "SystemOverloadedError") || !c.hasLabel(err, "RetryableError") {
					t.Fatalf("want 462 with SystemOverloadedError and RetryableError, got %v", err)
				}
				if n := countDirect(t, sim, "db", "c", nil); n != 0 {
					t.Errorf("server has %d documents, want 0", n)
				}
				if p.Counts()[0].Fired < 1 {
					t.Error("rule never fired")
				}
			},
		},
	})
}

// The sturdy client rides out a short overload (two 462s) with its overload
// retries.
func TestShedRiddenOutBySturdy(t *testing.T) {
	sim := mongosim.Start(t)
	p := startProxy(t, sim, faultproxy.Rule{Match: insertOnly, Times: 2, Action: faultproxy.Action{Kind: faultproxy.Shed, BaseBackoffMS: 1}})
	c := sturdyClient(t, p.URI())
	if _, err := c.Database("db").Collection("c").InsertOne(testCtx(t), bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	fired(t, p, 2)
	if n := countDirect(t, sim, "db", "c", nil); n != 1 {
		t.Errorf("server has %d documents, want 1", n)
	}
}

// reset closes with a TCP RST (the peer reads ECONNRESET); drop-request
// closes with a FIN (the peer reads EOF).
func TestResetIsRST(t *testing.T) {
	sim := mongosim.Start(t)
	ping := faultproxy.Match{Commands: []string{"ping"}}
	for _, tc := range []struct {
		action faultproxy.Action
		rst    bool
	}{
		{faultproxy.Action{Kind: faultproxy.Reset}, true},
		{faultproxy.Action{Kind: faultproxy.DropRequest, RST: true}, true},
		{faultproxy.Action{Kind: faultproxy.DropReply, RST: true}, true},
		{faultproxy.Action{Kind: faultproxy.DropRequest}, false},
		{faultproxy.Action{Kind: faultproxy.DropReply}, false},
	} {
		p := startProxy(t, sim, faultproxy.Rule{Match: ping, Action: tc.action})
		c := dial(t, testCtx(t), p.Addrs()[0])
		send(t, c, 1, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})
		err := expectClosed(t, c)
		if got := errors.Is(err, syscall.ECONNRESET); got != tc.rst {
			t.Errorf("%s rst=%v: read error %v", tc.action.Kind, tc.action.RST, err)
		}
		p.Close()
	}
}
