package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// runningSim is a `sturdy sim` started by a test.
type runningSim struct {
	uri    string
	cancel context.CancelFunc
	done   chan int
}

// startSim runs `sturdy sim args...` with stderr and returns once it has
// printed its connection string. stop ends it and returns its exit code.
func startSim(t *testing.T, stderr io.Writer, args ...string) *runningSim {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	pr, pw := io.Pipe()
	s := &runningSim{cancel: cancel, done: make(chan int, 1)}
	go func() {
		s.done <- run(ctx, append([]string{"sim"}, args...), pw, stderr)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, pr)
	s.uri = strings.TrimSpace(line)
	return s
}

// stop cancels the sim and waits for it to exit.
func (s *runningSim) stop(t *testing.T) int {
	t.Helper()
	s.cancel()
	select {
	case code := <-s.done:
		return code
	case <-time.After(5 * time.Second):
		t.Fatal("sim did not stop")
	}
	return -1
}

// sturdy sim prints a connection string a real driver can use, and stops
// cleanly when its context ends.
func TestSimServesAndStops(t *testing.T) {
	sim := startSim(t, io.Discard, "-port", "0", "-members", "3")
	uri := sim.uri
	if !strings.Contains(uri, "replicaSet=rs0") || strings.Count(uri, ",") != 2 {
		t.Fatalf("connection string %q does not name a 3-member set", uri)
	}
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetHeartbeatInterval(500 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	opCtx, opCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer opCancel()
	coll := client.Database("db").Collection("c")
	if _, err := coll.InsertOne(opCtx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if n, err := coll.CountDocuments(opCtx, bson.D{}); err != nil || n != 1 {
		t.Fatalf("count %d, %v", n, err)
	}
	if err := client.Disconnect(opCtx); err != nil {
		t.Fatal(err)
	}
	if code := sim.stop(t); code != 0 {
		t.Fatalf("sim exited %d", code)
	}
}

// With -exit-on-eof the sim stops when its stdin closes: a parent that dies
// (even by SIGKILL) closes the pipe and leaves no sim behind.
func TestSimExitsOnStdinEOF(t *testing.T) {
	pr, pw := io.Pipe()
	old := simStdin
	simStdin = pr
	defer func() { simStdin = old }()
	outR, outW := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(context.Background(), []string{"sim", "-port", "0", "-exit-on-eof"}, outW, io.Discard)
		outW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "mongodb://") {
		t.Fatalf("no connection string: %q, %v", line, err)
	}
	go io.Copy(io.Discard, outR)
	select {
	case code := <-done:
		t.Fatalf("sim exited (%d) while stdin was open", code)
	case <-time.After(200 * time.Millisecond):
	}
	pw.Close()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("sim exited %d", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("sim did not stop when stdin closed")
	}
}

func TestSimRejectsBadFlags(t *testing.T) {
	if code := run(context.Background(), []string{"sim", "-user", "u"}, io.Discard, io.Discard); code != 2 {
		t.Errorf("-user without -password exited %d", code)
	}
	if code := run(context.Background(), []string{"sim", "-members", "x"}, io.Discard, io.Discard); code != 2 {
		t.Errorf("bad -members exited %d", code)
	}
}

// syncBuf is a bytes.Buffer safe for the server's goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// sturdy sim logs what it refuses to stderr: here a malformed message.
func TestSimLogsRefusalsToStderr(t *testing.T) {
	stderr := &syncBuf{}
	sim := startSim(t, stderr, "-port", "0")
	host := strings.TrimPrefix(sim.uri, "mongodb://")
	host = host[:strings.Index(host, "/")]
	nc, err := net.DialTimeout("tcp", host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// A 21-byte OP_MSG whose body claims 100 bytes.
	msg := []byte{21, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0xdd, 0x07, 0, 0, 0, 0, 0, 0, 0}
	if _, err := nc.Write(msg); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := nc.Read(make([]byte, 1)); err == nil {
		t.Fatal("the malformed message got a reply")
	}
	nc.Close()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(stderr.String(), "malformed request") {
		if time.Now().After(deadline) {
			t.Fatalf("stderr lacks the refusal:\n%s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	sim.stop(t)
}

// sturdy sim --routers prints a mongos connection string: the driver sees a
// sharded cluster of that many routers.
func TestSimRouters(t *testing.T) {
	sim := startSim(t, io.Discard, "-port", "0", "-routers", "2")
	uri := sim.uri
	if strings.Contains(uri, "replicaSet") || strings.Count(uri, ",") != 1 {
		t.Fatalf("connection string %q does not name two routers", uri)
	}
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetHeartbeatInterval(500 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	opCtx, opCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer opCancel()
	var hello bson.M
	if err := client.Database("admin").RunCommand(opCtx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		t.Fatal(err)
	}
	if hello["msg"] != "isdbgrid" {
		t.Fatalf("hello through the URI = %v, want a mongos", hello)
	}
	if err := client.Disconnect(opCtx); err != nil {
		t.Fatal(err)
	}
	if code := sim.stop(t); code != 0 {
		t.Fatalf("sim exited %d", code)
	}
}

// sturdy sim --shards 2 starts a sharded cluster behind two routers (the
// default with --shards alone) and names each shard's replica set on
// stderr; a hashed collection's documents land on both shards.
func TestSimShards(t *testing.T) {
	var stderr syncBuffer
	sim := startSim(t, &stderr, "-port", "0", "-shards", "2")
	if strings.Contains(sim.uri, "replicaSet") || strings.Count(sim.uri, ",") != 1 {
		t.Fatalf("connection string %q does not name two routers", sim.uri)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client, err := mongo.Connect(options.Client().ApplyURI(sim.uri).SetHeartbeatInterval(500 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	var shards struct {
		Shards []bson.M `bson:"shards"`
	}
	if err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "listShards", Value: 1}}).Decode(&shards); err != nil || len(shards.Shards) != 2 {
		t.Fatalf("listShards = %v, %v", shards, err)
	}
	if err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "shardCollection", Value: "db.c"}, {Key: "key", Value: bson.D{{Key: "k", Value: "hashed"}}}}).Err(); err != nil {
		t.Fatal(err)
	}
	var docs []any
	for i := 0; i < 50; i++ {
		docs = append(docs, bson.D{{Key: "k", Value: i}})
	}
	if _, err := client.Database("db").Collection("c").InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	// stderr lists "shardN: <replica-set URI>" right after the URI is
	// printed; count each shard's share through its own members.
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(stderr.String(), "shard1: "); {
		if time.Now().After(deadline) {
			t.Fatalf("stderr names no shards:\n%s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	var total int64
	for i := 0; i < 2; i++ {
		prefix := "shard" + string(rune('0'+i)) + ": "
		var uri string
		for _, line := range strings.Split(stderr.String(), "\n") {
			if strings.HasPrefix(line, prefix) {
				uri = strings.TrimPrefix(line, prefix)
			}
		}
		if !strings.Contains(uri, "replicaSet=") {
			t.Fatalf("stderr names no replica set for shard %d:\n%s", i, stderr.String())
		}
		direct, err := mongo.Connect(options.Client().ApplyURI(uri).SetHeartbeatInterval(500 * time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		n, err := direct.Database("db").Collection("c").CountDocuments(ctx, bson.D{})
		_ = direct.Disconnect(ctx)
		if err != nil || n == 0 {
			t.Fatalf("shard %d holds %d documents (%v)", i, n, err)
		}
		total += n
	}
	if total != 50 {
		t.Fatalf("shards hold %d documents, want 50", total)
	}
	// Disconnect before the sim stops, or the driver waits out its
	// monitors' timeouts.
	if err := client.Disconnect(ctx); err != nil {
		t.Fatal(err)
	}
	if code := sim.stop(t); code != 0 {
		t.Fatalf("sim exited %d", code)
	}
}

// sturdy sim --load-balanced prints the balancer's loadBalanced=true
// connection string; the official driver runs through it in load-balanced
// mode.
func TestSimLoadBalanced(t *testing.T) {
	sim := startSim(t, io.Discard, "-port", "0", "-load-balanced")
	uri := sim.uri
	if !strings.HasSuffix(uri, "/?loadBalanced=true") || strings.Contains(uri, ",") {
		t.Fatalf("connection string %q does not name one load balancer", uri)
	}
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	opCtx, opCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer opCancel()
	if _, err := client.Database("lb").Collection("c").InsertOne(opCtx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := client.Disconnect(opCtx); err != nil {
		t.Fatal(err)
	}
	if code := sim.stop(t); code != 0 {
		t.Fatalf("sim exited %d", code)
	}
}

// -ttl-interval sets how often the TTL monitor runs: a document already
// past its TTL disappears within a few passes.
func TestSimTTLInterval(t *testing.T) {
	sim := startSim(t, io.Discard, "-port", "0", "-ttl-interval", "20ms")
	defer sim.stop(t)
	client, err := mongo.Connect(options.Client().ApplyURI(sim.uri).SetHeartbeatInterval(500 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	defer client.Disconnect(ctx)
	coll := client.Database("db").Collection("sessions")
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "at", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "at", Value: time.Now().Add(-time.Minute)}}); err != nil {
		t.Fatal(err)
	}
	for {
		n, err := coll.CountDocuments(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if ctx.Err() != nil {
			t.Fatal("the expired document was not deleted")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
