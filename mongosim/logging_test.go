package mongosim

import (
	"bytes"
	"encoding/binary"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/wire"
)

// logBuffer collects slog output from the server's goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// text is what the server has logged so far.
func (l *logBuffer) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor polls until the log holds a line containing every part.
func (l *logBuffer) waitFor(t *testing.T, parts ...string) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		lines := strings.Split(l.text(), "\n")
	next:
		for _, line := range lines {
			for _, p := range parts {
				if !strings.Contains(line, p) {
					continue next
				}
			}
			return line
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q in:\n%s", parts, strings.Join(lines, "\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func startLogged(t *testing.T, o Options) (*Cluster, *logBuffer) {
	logs := &logBuffer{}
	o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	return StartWithOptions(t, o), logs
}

// TestDeepNestingGetsAnErrorReply: a command nested deeper than 200 levels
// is answered with mongod's error, the connection stays open, and the
// refusal is logged.
func TestDeepNestingGetsAnErrorReply(t *testing.T) {
	c, logs := startLogged(t, Options{})
	ctx := testCtx(t)
	client := connect(t, c.URI(), options.Client().SetMaxPoolSize(1))
	coll := client.Database("db").Collection("deep")
	_, err := coll.InsertOne(ctx, bson.D{{Key: "x", Value: nested(250)}})
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(cmderr.Overflow) || !se.HasErrorMessage("BSONObj exceeds maximum nested object depth") {
		t.Fatalf("want 15 Overflow, got %T %v", err, err)
	}
	logs.waitFor(t, "level=WARN", "nested too deeply")
	// Same pool of one connection: still open.
	if err := client.Ping(ctx, readpref.Primary()); err != nil {
		t.Fatal(err)
	}
	if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != 0 {
		t.Fatalf("count %d %v", n, err)
	}

	// Over raw TCP, a too-deep OP_MSG with moreToCome gets no reply, and
	// the next request on the connection is answered.
	rc := dialRaw(t, c.Members()[0].Addr())
	body := append([]byte(nil), wireNested(250)...)
	msg := wire.AppendMsg(nil, 1, 0, &wire.Msg{Flags: wire.MoreToCome, Body: body})
	if _, err := rc.nc.Write(msg); err != nil {
		t.Fatal(err)
	}
	reply, err := rc.msg(bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})
	if err != nil || reply.Lookup("ok").Double() != 1 {
		t.Fatalf("ping after a too-deep moreToCome message: %v %v", reply, err)
	}
	// Without moreToCome: the error reply answers that request.
	rc.id++
	if _, err := rc.nc.Write(wire.AppendMsg(nil, rc.id, 0, &wire.Msg{Body: body})); err != nil {
		t.Fatal(err)
	}
	b, err := wire.ReadMessage(rc.nc, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	m, err := wire.Decode(b, 0)
	if err != nil || m.Msg == nil || m.Header.ResponseTo != rc.id {
		t.Fatalf("reply %+v %v", m, err)
	}
	if code := m.Msg.Body.Lookup("code").Int32(); code != cmderr.Overflow {
		t.Fatalf("reply %v", m.Msg.Body)
	}
}

// wireNested is {$db: "db", insert: {a: {a: ...}}} nested depth levels.
func wireNested(depth int) []byte {
	d, _ := bson.Marshal(bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "db"}, {Key: "documents", Value: bson.A{nested(depth)}}})
	return d
}

func TestRefusalsAreLogged(t *testing.T) {
	c, logs := startLogged(t, Options{Auth: AuthOptions{Username: "u", Password: "right"}})
	ctx := testCtx(t)

	// A malformed message: the connection is closed, and the log says why.
	rc := dialRaw(t, c.Members()[0].Addr())
	bad := wire.AppendMsg(nil, 1, 0, &wire.Msg{Body: []byte{5, 0, 0, 0, 0}})
	bad[len(bad)-1] = 7 // the body's terminating NUL
	if _, err := rc.nc.Write(bad); err != nil {
		t.Fatal(err)
	}
	_ = rc.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := wire.ReadMessage(rc.nc, nil, 0); err == nil {
		t.Fatal("a malformed message got a reply")
	}
	logs.waitFor(t, "level=WARN", "malformed request")

	// A message larger than maxMessageSizeBytes.
	rc2 := dialRaw(t, c.Members()[0].Addr())
	hdr := make([]byte, 16)
	binary.LittleEndian.PutUint32(hdr, 64<<20)
	binary.LittleEndian.PutUint32(hdr[12:], uint32(wire.OpMsg))
	if _, err := rc2.nc.Write(hdr); err != nil {
		t.Fatal(err)
	}
	logs.waitFor(t, "level=WARN", "exceeds maximum")

	// A failed authentication, through the official driver.
	client := connect(t, c.URI(), options.Client().SetAuth(options.Credential{Username: "u", Password: "wrong"}))
	if err := client.Ping(ctx, readpref.Primary()); err == nil {
		t.Fatal("ping with a wrong password succeeded")
	}
	logs.waitFor(t, "level=WARN", "refused sasl", "code=18", "Authentication failed.")
}
