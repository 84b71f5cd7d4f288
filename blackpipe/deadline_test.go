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
// within the timeout is served. The timeout is wide so that a loaded
// machine's scheduling cannot stretch the short trickle past it.
func TestPartialMessageTimeoutSparesIdleAndSlowClients(t *testing.T) {
	const partial = time.Second
	s := StartWithOptions(t, Options{PartialMessageTimeout: partial})
	rc := dialRaw(t, s.Addr())
	time.Sleep(partial + partial/2) // idle longer than the partial timeout: a duration, not a synchronisation
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

// Activity keeps a connection open past IdleTimeout; silence then closes
// it, no sooner than IdleTimeout after the last request. The pings are 20 ms
// apart, so only a scheduling stall as long as the whole timeout could
// make one late; and the lower bound on the close holds however late the
// machine runs, since the server can only start counting after the last
// ping was sent.
func TestIdleTimeoutDisconnectsQuietClient(t *testing.T) {
	const idle = time.Second
	s := StartWithOptions(t, Options{IdleTimeout: idle})
	rc := dialRaw(t, s.Addr())
	first := time.Now()
	var lastSent time.Time
	for i := int32(1); time.Since(first) < idle+idle/2; i++ {
		lastSent = time.Now()
		rc.send(pingMessage(t, i))
		if _, err := rc.read(); err != nil {
			t.Fatalf("ping %d, %v after the first: %v", i, time.Since(first), err)
		}
		time.Sleep(20 * time.Millisecond) // pacing, far inside the timeout
	}
	waitClosed(t, rc.nc, 30*time.Second)
	if quiet := time.Since(lastSent); quiet < idle {
		t.Errorf("closed %v after the last ping, before the %v idle timeout", quiet, idle)
	}
}
