package faultproxy_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/goleak"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/faultproxy"
	"github.com/sturdy-go/sturdy/internal/testsupport"
	"github.com/sturdy-go/sturdy/mongosim"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testCtx(t *testing.T) context.Context { return testsupport.Context(t, 30*time.Second) }

// logBuf collects the proxy's log lines for failure messages.
type logBuf struct {
	mu    sync.Mutex
	lines []string
}

func (l *logBuf) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// startProxy starts a proxy in front of sim and closes it when the test
// ends, before the simulator.
func startProxy(t *testing.T, sim *mongosim.Cluster, rules ...faultproxy.Rule) *faultproxy.Proxy {
	t.Helper()
	return startProxyWith(t, sim, faultproxy.Options{Rules: rules})
}

func startProxyWith(t *testing.T, sim *mongosim.Cluster, o faultproxy.Options) *faultproxy.Proxy {
	t.Helper()
	if o.Upstreams == nil {
		o.Upstreams = []string{sim.Members()[0].Addr()}
	}
	lb := &logBuf{}
	o.Logf = lb.logf
	p, err := faultproxy.Start(testCtx(t), o)
	if err != nil {
		t.Fatalf("faultproxy.Start: %v", err)
	}
	t.Cleanup(func() {
		p.Close()
		if t.Failed() {
			t.Logf("proxy log:\n%s", lb)
		}
	})
	return p
}

// driver connects the official driver through uri.
func driver(t *testing.T, uri string, params ...string) *mongo.Client {
	t.Helper()
	if len(params) > 0 {
		sep := "?"
		if strings.Contains(uri, "?") {
			sep = "&"
		}
		uri += sep + strings.Join(params, "&")
	}
	c, err := mongo.Connect(options.Client().ApplyURI(uri).
		SetHeartbeatInterval(500 * time.Millisecond).
		SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Disconnect(ctx)
	})
	return c
}

// sturdyClient connects the sturdy client through uri.
func sturdyClient(t *testing.T, uri string, params ...string) *sturdy.Client {
	t.Helper()
	sep := "?"
	if strings.Contains(uri, "?") {
		sep = "&"
	}
	uri += sep + strings.Join(append([]string{"heartbeatFrequencyMS=500", "serverSelectionTimeoutMS=10000"}, params...), "&")
	c, err := sturdy.Connect(testCtx(t), uri)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Disconnect(ctx)
	})
	return c
}

// countDirect counts the documents of db.coll matching filter, straight on
// the simulator (not through the proxy).
func countDirect(t *testing.T, sim *mongosim.Cluster, db, coll string, filter bson.D) int64 {
	t.Helper()
	if filter == nil {
		filter = bson.D{}
	}
	c := driver(t, sim.URI())
	n, err := c.Database(db).Collection(coll).CountDocuments(testCtx(t), filter)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// client is the part of both clients the action tests use.
type client interface {
	insert(ctx context.Context, db, coll string, doc bson.D) error
	find(ctx context.Context, db, coll string) error
	name() string
	isNetworkError(err error) bool
	hasLabel(err error, label string) bool
	code(err error) int32 // 0 when err is not a server error
}

type driverC struct{ c *mongo.Client }

func (d driverC) insert(ctx context.Context, db, coll string, doc bson.D) error {
	_, err := d.c.Database(db).Collection(coll).InsertOne(ctx, doc)
	return err
}

func (d driverC) find(ctx context.Context, db, coll string) error {
	cur, err := d.c.Database(db).Collection(coll).Find(ctx, bson.D{})
	if err != nil {
		return err
	}
	return cur.Close(ctx)
}

func (driverC) name() string { return "driver" }

func (driverC) isNetworkError(err error) bool { return mongo.IsNetworkError(err) }

func (driverC) hasLabel(err error, label string) bool {
	var le mongo.LabeledError
	return errors.As(err, &le) && le.HasErrorLabel(label)
}

func (driverC) code(err error) int32 {
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return ce.Code
	}
	var we mongo.WriteException
	if errors.As(err, &we) && len(we.WriteErrors) > 0 {
		return int32(we.WriteErrors[0].Code)
	}
	return 0
}

type sturdyC struct{ c *sturdy.Client }

func (s sturdyC) insert(ctx context.Context, db, coll string, doc bson.D) error {
	_, err := s.c.Database(db).Collection(coll).InsertOne(ctx, doc)
	return err
}

func (s sturdyC) find(ctx context.Context, db, coll string) error {
	cur, err := s.c.Database(db).Collection(coll).Find(ctx, bson.D{})
	if err != nil {
		return err
	}
	return cur.Close(ctx)
}

func (sturdyC) name() string { return "sturdy" }

func (sturdyC) isNetworkError(err error) bool { return sturdy.IsNetworkError(err) }

func (sturdyC) hasLabel(err error, label string) bool { return sturdy.HasErrorLabel(err, label) }

func (sturdyC) code(err error) int32 {
	var ce *sturdy.CommandError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return 0
}

// clientKinds connect either client through a connection string.
var clientKinds = []struct {
	name    string
	connect func(t *testing.T, uri string, params ...string) client
}{
	{"driver", func(t *testing.T, uri string, params ...string) client { return driverC{driver(t, uri, params...)} }},
	{"sturdy", func(t *testing.T, uri string, params ...string) client {
		return sturdyC{sturdyClient(t, uri, params...)}
	}},
}
