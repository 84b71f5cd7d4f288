package blackpipe

import (
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/wire"
)

// logRecorder collects the server's log lines.
type logRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (l *logRecorder) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, format)
}

func (l *logRecorder) has(sub string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.lines {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// waitClosed reads until the server closes the connection, failing if it
// does not within d.
func waitClosed(t *testing.T, nc net.Conn, d time.Duration) {
	t.Helper()
	start := time.Now()
	_ = nc.SetReadDeadline(start.Add(d))
	buf := make([]byte, 1024)
	for {
		_, err := nc.Read(buf)
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the server kept the connection open for %v", d)
		}
		if !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "reset") {
			t.Fatalf("read: %v", err)
		}
		return
	}
}

func pingMessage(t *testing.T, id int32) []byte {
	t.Helper()
	body, err := bson.Marshal(bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})
	if err != nil {
		t.Fatal(err)
	}
	return wire.AppendMsg(nil, id, 0, &wire.Msg{Body: body})
}

// A client that sends half a message and stalls is disconnected after
// PartialMessageTimeout, and the server says why.
func TestPartialMessageTimeoutDisconnectsStalledClient(t *testing.T) {
	var logs logRecorder
	s := StartWithOptions(t, Options{PartialMessageTimeout: 200 * time.Millisecond, Logf: logs.logf})
	nc, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	msg := pingMessage(t, 1)
	if _, err := nc.Write(msg[:len(msg)/2]); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, nc, 5*time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for !logs.has("read") {
		if time.Now().After(deadline) {
			t.Fatal("the server did not log why it closed the connection")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Without an idle timeout, a connection that is quiet between messages
// stays open well past PartialMessageTimeout, and a message trickled in
// within the timeout is served.
func TestPartialMessageTimeoutSparesIdleAndSlowClients(t *testing.T) {
	s := StartWithOptions(t, Options{PartialMessageTimeout: 300 * time.Millisecond})
	rc := dialRaw(t, s.Addr())
	time.Sleep(600 * time.Millisecond) // idle longer than the partial timeout
	msg := pingMessage(t, 7)
	for i := 0; i < len(msg); i += 8 { // a slow but steady sender
		rc.send(msg[i:min(i+8, len(msg))])
		time.Sleep(5 * time.Millisecond)
	}
	m, err := rc.read()
	if err != nil {
		t.Fatalf("ping after an idle pause: %v", err)
	}
	if m.Header.ResponseTo != 7 {
		t.Errorf("reply to %d, want 7", m.Header.ResponseTo)
	}
}

func TestIdleTimeoutDisconnectsQuietClient(t *testing.T) {
	s := StartWithOptions(t, Options{IdleTimeout: 300 * time.Millisecond})
	rc := dialRaw(t, s.Addr())
	// Activity within the timeout keeps the connection open.
	for i := int32(1); i <= 3; i++ {
		time.Sleep(100 * time.Millisecond)
		rc.send(pingMessage(t, i))
		if _, err := rc.read(); err != nil {
			t.Fatalf("ping %d: %v", i, err)
		}
	}
	// Then silence closes it.
	waitClosed(t, rc.nc, 5*time.Second)
}
