package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/sturdy-go/sturdy/faultproxy"
	"github.com/sturdy-go/sturdy/mongosim"
)

func TestProxyFlagParsing(t *testing.T) {
	rulesPath := filepath.Join(t.TempDir(), "rules.json")
	if err := os.WriteFile(rulesPath, []byte(`{"seed": 9, "rules": [{"name": "f", "action": "shed", "times": 2}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	o, _, err := parseProxyArgs([]string{
		"--upstream", "mongodb://user:pw@a.example,b.example:27018/?replicaSet=rs0", "--listen", "0.0.0.0:27100",
		"--rule-command", "update, insert", "--rule-namespace", "app.c", "--rule-app-name", "w", "--rule-connection", "3",
		"--action", "drop-reply", "--probability", "0.2", "--seed", "1", "--times", "5", "--skip", "1",
		"--reply-delay", "20ms", "--rst",
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := faultproxy.Options{
		Upstreams: []string{"a.example:27017", "b.example:27018"},
		Listen:    "0.0.0.0:27100",
		Seed:      1,
		Rules: []faultproxy.Rule{{
			Name:        "command line",
			Match:       faultproxy.Match{Commands: []string{"update", "insert"}, Namespace: "app.c", AppName: "w", ConnectionID: 3},
			Action:      faultproxy.Action{Kind: faultproxy.DropReply, ReplyDelay: 20 * time.Millisecond, RST: true},
			Probability: 0.2, Times: 5, Skip: 1,
		}},
	}
	if !reflect.DeepEqual(o, want) {
		t.Errorf("options\n%+v\nwant\n%+v", o, want)
	}

	o, _, err = parseProxyArgs([]string{"-upstream", "h", "-rules", rulesPath, "-action", "error", "-error-code", "91",
		"-error-code-name", "ShutdownInProgress", "-error-labels", "RetryableWriteError,X"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.Seed != 9 || len(o.Rules) != 2 || o.Rules[0].Name != "f" || o.Upstreams[0] != "h:27017" {
		t.Errorf("rules file then flag rule: %+v", o)
	}
	if e := o.Rules[1].Action.Error; e.Code != 91 || !reflect.DeepEqual(e.Labels, []string{"RetryableWriteError", "X"}) {
		t.Errorf("error rule: %+v", e)
	}

	bad := []struct {
		args []string
		want string
	}{
		{[]string{}, "-upstream is required"},
		{[]string{"-upstream", "postgres://x"}, "only host:port"},
		{[]string{"-upstream", "h", "-times", "3"}, "-times describes the command-line rule, which needs -action"},
		{[]string{"-upstream", "h", "-action", "explode"}, `unknown action "explode"`},
		{[]string{"-upstream", "h", "-action", "delay"}, "needs delay or replyDelay"},
		{[]string{"-upstream", "h", "-action", "shed", "-error-code", "2"}, "-error-* flags need -action error"},
		{[]string{"-upstream", "h", "-action", "reset", "-probability", "2"}, "probability"},
		{[]string{"-upstream", "h", "-rules", filepath.Join(t.TempDir(), "none.json")}, "no such file"},
		{[]string{"-upstream", "h", "-upstream-tls-insecure"}, "needs -upstream-tls"},
		{[]string{"-upstream", "h", "-times", "x"}, "invalid value"},
		{[]string{"-upstream", "h", "extra"}, "unexpected arguments"},
	}
	for _, tc := range bad {
		var stderr bytes.Buffer
		code := run(context.Background(), append([]string{"proxy"}, tc.args...), io.Discard, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
	if code := run(context.Background(), []string{"proxy", "-h"}, io.Discard, io.Discard); code != 0 {
		t.Errorf("-h exited %d", code)
	}
}

// syncBuffer is a bytes.Buffer safe for the proxy's log goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// sturdy proxy in front of mongosim: it prints a connection string, the
// driver works through it, the command-line rule loses one insert's reply
// after the write applied, and it stops cleanly with a summary.
func TestProxyEndToEnd(t *testing.T) {
	sim, err := mongosim.Launch(mongosim.Options{Members: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"proxy", "-upstream", sim.Members()[0].Addr(),
			"-rule-command", "insert", "-action", "drop-reply", "-times", "1", "-seed", "1"}, pw, &stderr)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no connection string: %v; stderr: %s", err, stderr.String())
	}
	go io.Copy(io.Discard, pr)
	uri := strings.TrimSpace(line)
	if !strings.Contains(uri, "replicaSet=rs0") || strings.Count(uri, ",") != 2 {
		t.Fatalf("connection string %q does not name the 3 proxied members", uri)
	}
	for _, m := range sim.Members() {
		if strings.Contains(uri, m.Addr()) {
			t.Fatalf("connection string %q names member %s itself", uri, m.Addr())
		}
	}
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetRetryWrites(false).SetHeartbeatInterval(500 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	opCtx, opCancel := context.WithTimeout(ctx, 10*time.Second)
	defer opCancel()
	coll := client.Database("db").Collection("c")
	if _, err := coll.InsertOne(opCtx, bson.D{{Key: "_id", Value: 1}}); !mongo.IsNetworkError(err) {
		t.Fatalf("first insert: want a network error, got %v", err)
	}
	if _, err := coll.InsertOne(opCtx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatalf("second insert: %v", err)
	}
	if n, err := coll.CountDocuments(opCtx, bson.D{}); err != nil || n != 2 {
		t.Fatalf("count %d, %v: the dropped reply's write should be there", n, err)
	}
	if err := client.Disconnect(opCtx); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("proxy exited %d: %s", code, stderr.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("proxy did not stop")
	}
	out := stderr.String()
	for _, want := range []string{"listening on", "rule 0: \"command line\" drop-reply commands=insert times=1", "command line fired: drop-reply", "command line: matched 2, fired 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr lacks %q:\n%s", want, out)
		}
	}
}

func TestProxyUnreachableUpstream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	if code := run(ctx, []string{"proxy", "-upstream", "127.0.0.1:1"}, io.Discard, &stderr); code != 1 || !strings.Contains(stderr.String(), "no upstream answered") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}
