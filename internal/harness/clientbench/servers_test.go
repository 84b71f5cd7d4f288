package clientbench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/sturdy-go/sturdy/blackpipe"
	"github.com/sturdy-go/sturdy/mongosim"
)

// serveEnv makes the test binary, re-executed, serve instead of testing:
// "canned" or "mongosim". The child prints its connection string on the
// first line of stdout and exits when its stdin closes (the parent is gone).
const serveEnv = "CLIENTBENCH_SERVE"

// Sizes of the canned and preloaded data.
const (
	findDocs    = 1000  // documents findOne picks from, by _id
	updateDocs  = 100   // documents updateOne picks from, by _id
	manyDocs    = 1000  // documents per insertMany
	drainDocs   = 10000 // documents the drain find returns
	firstBatch  = 101   // a server's default first batch
	cannedDB    = "bench"
	cannedCurID = 7
)

// serveChild runs the server named by serveEnv, if any, and reports whether
// it did (then the process must exit).
func serveChild() bool {
	kind := os.Getenv(serveEnv)
	if kind == "" {
		return false
	}
	var (
		uri   string
		close func() error
		err   error
	)
	switch kind {
	case "canned":
		var s *blackpipe.Server
		s, err = startCanned()
		if err == nil {
			uri, close = "mongodb://"+s.Addr()+"/?replicaSet=rs0", s.Close
		}
	case "mongosim":
		var c *mongosim.Cluster
		c, err = mongosim.Launch(mongosim.Options{})
		if err == nil {
			uri, close = c.URI(), c.Close
		}
	default:
		err = fmt.Errorf("unknown %s=%q", serveEnv, kind)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "clientbench server:", err)
		os.Exit(2)
	}
	if path := os.Getenv(serveProfileEnv); path != "" {
		stop, err := startCPUProfile(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "clientbench server:", err)
			os.Exit(2)
		}
		defer stop()
	}
	if path := os.Getenv(serveMutexProfileEnv); path != "" {
		runtime.SetMutexProfileFraction(1)
		defer writeProfile("mutex", path)
	}
	if path := os.Getenv(serveBlockProfileEnv); path != "" {
		runtime.SetBlockProfileRate(int(time.Microsecond))
		defer writeProfile("block", path)
	}
	if path := os.Getenv(serveAllocProfileEnv); path != "" {
		defer writeProfile("allocs", path)
	}
	fmt.Println(uri)
	// Each line on stdin asks for the process's user and system CPU
	// time and heap allocations so far, which BenchmarkSimServer reads as
	// the server's cost.
	in := bufio.NewScanner(os.Stdin)
	allocs := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}}
	for in.Scan() {
		user, sys := cpuTimes()
		metrics.Read(allocs)
		fmt.Println(user.Nanoseconds(), sys.Nanoseconds(), allocs[0].Value.Uint64())
	}
	_ = close()
	return true
}

// serveProfileEnv names a file the server child writes its CPU profile to
// when it exits: go test -bench SimServer with
// CLIENTBENCH_SERVE_CPUPROFILE=/tmp/server.pprof profiles mongosim alone.
const serveProfileEnv = "CLIENTBENCH_SERVE_CPUPROFILE"

// serveMutexProfileEnv and serveBlockProfileEnv name files the server
// child writes its mutex contention and blocking profiles to when it exits
// (every contention event; blocking of 1µs and more): where 32 concurrent
// operations wait inside mongosim.
const (
	serveMutexProfileEnv = "CLIENTBENCH_SERVE_MUTEXPROFILE"
	serveBlockProfileEnv = "CLIENTBENCH_SERVE_BLOCKPROFILE"
)

// serveAllocProfileEnv names a file the server child writes its heap
// allocation profile to when it exits (sampled at the runtime's default
// rate): where the server's per-command allocations come from.
const serveAllocProfileEnv = "CLIENTBENCH_SERVE_ALLOCPROFILE"

func writeProfile(name, path string) {
	f, err := os.Create(path)
	if err == nil {
		err = pprof.Lookup(name).WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "clientbench server:", err)
	}
}

func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}

// child is a server process.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	uri    string
}

// cpuUse is a process's CPU time so far: user (its own code, the Go
// runtime included) and system (the kernel working for it: socket reads
// and writes, scheduling), and the number of heap objects it allocated.
type cpuUse struct {
	user, sys time.Duration
	allocs    uint64
}

func (u cpuUse) total() time.Duration { return u.user + u.sys }

// cpu asks the server process for its CPU time so far.
func (c *child) cpu() (cpuUse, error) {
	childMu.Lock()
	defer childMu.Unlock()
	if _, err := io.WriteString(c.stdin, "\n"); err != nil {
		return cpuUse{}, err
	}
	line, err := c.stdout.ReadString('\n')
	if err != nil {
		return cpuUse{}, err
	}
	var user, sys int64
	var allocs uint64
	if _, err := fmt.Sscan(line, &user, &sys, &allocs); err != nil {
		return cpuUse{}, fmt.Errorf("clientbench: server CPU %q: %w", line, err)
	}
	return cpuUse{time.Duration(user), time.Duration(sys), allocs}, nil
}

// serverCPU is the CPU time so far of the server process of the given kind.
func serverCPU(kind string) (cpuUse, error) {
	childMu.Lock()
	c := children[kind]
	childMu.Unlock()
	if c == nil {
		return cpuUse{}, fmt.Errorf("clientbench: no %s server", kind)
	}
	return c.cpu()
}

var (
	childMu  sync.Mutex
	children = map[string]*child{}
)

// serverURI starts (once) the server process of the given kind and returns
// its connection string.
func serverURI(kind string) (string, error) {
	childMu.Lock()
	defer childMu.Unlock()
	if c := children[kind]; c != nil {
		return c.uri, nil
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), serveEnv+"="+kind)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	out := bufio.NewReader(stdout)
	line, err := out.ReadString('\n')
	if err != nil {
		_ = stdin.Close()
		_ = cmd.Wait()
		return "", fmt.Errorf("clientbench: %s server did not start: %w", kind, err)
	}
	c := &child{cmd: cmd, stdin: stdin, stdout: out, uri: strings.TrimSpace(line)}
	children[kind] = c
	return c.uri, nil
}

// stopServers ends every server process.
func stopServers() {
	childMu.Lock()
	defer childMu.Unlock()
	for kind, c := range children {
		_ = c.stdin.Close()
		done := make(chan struct{})
		go func() { _ = c.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = c.cmd.Process.Kill()
			<-done
		}
		delete(children, kind)
	}
}

// clusterTime is what a replica-set member gossips in every reply.
func appendClusterTime(dst []byte) []byte {
	ts := bson.Timestamp{T: uint32(time.Now().Unix()), I: 1}
	sig := bsoncore.NewDocumentBuilder().
		AppendBinary("hash", 0, make([]byte, 20)).
		AppendInt64("keyId", 0).
		Build()
	ct := bsoncore.NewDocumentBuilder().
		AppendTimestamp("clusterTime", ts.T, ts.I).
		AppendDocument("signature", sig).
		Build()
	dst = bsoncore.AppendDocumentElement(dst, "$clusterTime", ct)
	return bsoncore.AppendTimestampElement(dst, "operationTime", ts.T, ts.I)
}

// reply builds a reply document: ok first (blackpipe looks it up on every
// reply), then the fields, then $clusterTime and operationTime.
func reply(fields func(dst []byte) []byte) bson.Raw {
	idx, dst := bsoncore.AppendDocumentStart(nil)
	dst = bsoncore.AppendDoubleElement(dst, "ok", 1)
	if fields != nil {
		dst = fields(dst)
	}
	dst = appendClusterTime(dst)
	dst, _ = bsoncore.AppendDocumentEnd(dst, idx)
	return bson.Raw(dst)
}

// benchDoc is the small document the benchmarks store and read back.
func benchDoc(i int) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().
		AppendInt32("_id", int32(i)).
		AppendInt32("x", int32(i)).
		AppendString("s", "hello world").
		Build()
}

// cursorReply is {ok, cursor: {<batchKey>: docs[from:to], id, ns}, ...}.
func cursorReply(batchKey, ns string, id int64, from, to int) bson.Raw {
	return reply(func(dst []byte) []byte {
		aidx, arr := bsoncore.AppendArrayStart(nil)
		for i := from; i < to; i++ {
			arr = bsoncore.AppendDocumentElement(arr, fmt.Sprint(i-from), benchDoc(i))
		}
		arr, _ = bsoncore.AppendArrayEnd(arr, aidx)
		cur := bsoncore.NewDocumentBuilder().
			AppendArray(batchKey, arr).
			AppendInt64("id", id).
			AppendString("ns", ns).
			Build()
		return bsoncore.AppendDocumentElement(dst, "cursor", cur)
	})
}

// startCanned starts a blackpipe server that claims to be the primary of a
// one-member replica set and answers the benchmarks' commands with replies
// marshalled here, once:
//
//	insert        {n: <documents sent>}      (1 or 1000: precomputed)
//	update        {n: 1, nModified: 1}
//	find on "one" {cursor: {firstBatch: [doc], id: 0}}
//	find on "drain" the first 101 documents and a cursor id; the getMore
//	              that follows gets the other 9 899 and id 0, as a real
//	              server answers a find of 10 000 small documents.
func startCanned() (*blackpipe.Server, error) {
	n := func(k int32) bson.Raw {
		return reply(func(dst []byte) []byte { return bsoncore.AppendInt32Element(dst, "n", k) })
	}
	var (
		insertOne  = n(1)
		insertMany = n(manyDocs)
		update     = reply(func(dst []byte) []byte {
			dst = bsoncore.AppendInt32Element(dst, "n", 1)
			return bsoncore.AppendInt32Element(dst, "nModified", 1)
		})
		findOne    = cursorReply("firstBatch", cannedDB+".one", 0, 5, 6)
		drainFirst = cursorReply("firstBatch", cannedDB+".drain", cannedCurID, 0, firstBatch)
		drainRest  = cursorReply("nextBatch", cannedDB+".drain", 0, firstBatch, drainDocs)
		killed     = reply(func(dst []byte) []byte {
			ai, a := bsoncore.AppendArrayStart(nil)
			a, _ = bsoncore.AppendArrayEnd(a, ai)
			return bsoncore.AppendArrayElement(dst, "cursorsKilled", a)
		})
	)
	handler := func(r *blackpipe.Request) bool {
		var out bson.Raw
		switch r.Name {
		case "insert":
			out = insertOne
			for _, s := range r.Sequences {
				if len(s.Documents) > 1 {
					out = insertMany
				}
			}
		case "update":
			out = update
		case "find":
			out = findOne
			if coll, _ := r.Command.Lookup("find").StringValueOK(); coll == "drain" {
				out = drainFirst
			}
		case "getMore":
			out = drainRest
		case "killCursors":
			out = killed
		case "drop":
			out = reply(nil)
		default:
			return false
		}
		_ = r.Reply(out)
		return true
	}
	s, err := blackpipe.Listen(blackpipe.Options{Handler: handler})
	if err != nil {
		return nil, err
	}
	s.UpdateHello(bson.D{
		{Key: "setName", Value: "rs0"},
		{Key: "setVersion", Value: int32(1)},
		{Key: "hosts", Value: bson.A{s.Addr()}},
		{Key: "primary", Value: s.Addr()},
		{Key: "me", Value: s.Addr()},
		{Key: "secondary", Value: false},
		{Key: "electionId", Value: bson.NewObjectID()},
	})
	return s, nil
}

// loadSim fills mongosim's collections the read and update benchmarks use.
func loadSim(ctx context.Context, ins func(ctx context.Context, coll string, docs []any) error) error {
	for _, c := range []struct {
		name string
		n    int
	}{{"one", findDocs}, {"update", updateDocs}, {"drain", drainDocs}} {
		docs := make([]any, c.n)
		for i := range docs {
			docs[i] = bson.Raw(benchDoc(i))
		}
		if err := ins(ctx, c.name, docs); err != nil {
			return fmt.Errorf("loading %s: %w", c.name, err)
		}
	}
	return nil
}
