package once

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/adapt"
	"github.com/sturdy-go/sturdy/adapt/mongov2"
	"github.com/sturdy-go/sturdy/internal/testsupport"
	"github.com/sturdy-go/sturdy/mongosim"
)

// action is what the fault injector does to one command.
type action int

const (
	pass        action = iota
	dropRequest        // close the connection instead of sending: never applied
	dropReply          // send, read the server's reply, then close: applied, reply lost
)

var errInjected = errors.New("injected network fault")

// faults injects network faults into the client's connections through
// sturdy.Options.Dialer. decide sees every command the client sends.
type faults struct {
	mu     sync.Mutex
	decide func(name string, cmd bson.Raw) action
	// applied runs after a dropped reply was read (so the server has
	// applied the write) and before the client sees the error.
	applied func(name string, cmd bson.Raw)

	droppedReplies, droppedRequests int
	recorded                        map[bson.ObjectID]bool // tokens step one recorded
}

func (f *faults) set(decide func(string, bson.Raw) action) {
	f.mu.Lock()
	f.decide = decide
	f.mu.Unlock()
}

func (f *faults) counts() (replies, requests int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.droppedReplies, f.droppedRequests
}

func (f *faults) actionFor(msg []byte) (action, string, bson.Raw) {
	body, ok := opMsgBody(msg)
	if !ok {
		return pass, "", nil
	}
	name := ""
	if elems, err := body.Elements(); err == nil && len(elems) > 0 {
		name = elems[0].Key()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.decide == nil {
		return pass, name, body
	}
	a := f.decide(name, body)
	switch a {
	case dropReply:
		f.droppedReplies++
	case dropRequest:
		f.droppedRequests++
	}
	return a, name, body
}

// opMsgBody returns the body (the kind 0 section) of an uncompressed OP_MSG
// with the documents of its kind 1 sections (the statements of a write)
// appended as an array field "$docs"; the test client does not compress.
func opMsgBody(msg []byte) (bson.Raw, bool) {
	const opMsg = 2013
	if len(msg) < 21 || binary.LittleEndian.Uint32(msg[12:]) != opMsg {
		return nil, false
	}
	var body bson.Raw
	var docs bson.A
	for rest := msg[20:]; len(rest) > 0; {
		kind := rest[0]
		rest = rest[1:]
		if len(rest) < 4 {
			return nil, false
		}
		n := int(binary.LittleEndian.Uint32(rest))
		if n < 5 || n > len(rest) {
			return nil, false
		}
		switch kind {
		case 0:
			body = bson.Raw(rest[:n])
		case 1:
			seq := rest[4:n]
			i := bytes.IndexByte(seq, 0)
			if i < 0 {
				return nil, false
			}
			for seq = seq[i+1:]; len(seq) >= 5; {
				m := int(binary.LittleEndian.Uint32(seq))
				if m < 5 || m > len(seq) {
					return nil, false
				}
				docs = append(docs, bson.Raw(seq[:m]))
				seq = seq[m:]
			}
		default:
			return nil, false
		}
		rest = rest[n:]
	}
	if body == nil {
		return nil, false
	}
	if len(docs) == 0 {
		return body, true
	}
	var d bson.D
	if err := bson.Unmarshal(body, &d); err != nil {
		return nil, false
	}
	b, err := bson.Marshal(append(d, bson.E{Key: "$docs", Value: docs}))
	if err != nil {
		return nil, false
	}
	return b, true
}

// hasOperator reports whether any statement of an update command uses op
// (for example "$pull" for step two, "$addToSet" for step one).
func hasOperator(cmd bson.Raw, op string) bool {
	for _, key := range []string{"updates", "$docs"} {
		arr, ok := cmd.Lookup(key).ArrayOK()
		if !ok {
			continue
		}
		vals, _ := arr.Values()
		for _, v := range vals {
			if d, ok := v.DocumentOK(); ok {
				if _, err := d.LookupErr("u", op); err == nil {
					return true
				}
			}
		}
	}
	return false
}

// readMessage reads one whole wire message.
func readMessage(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(binary.LittleEndian.Uint32(hdr[:]))
	if n < 16 || n > 48<<20 {
		return nil, errors.New("bad message length")
	}
	msg := make([]byte, n)
	copy(msg, hdr[:])
	_, err := io.ReadFull(r, msg[4:])
	return msg, err
}

func (f *faults) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &faultConn{Conn: c, f: f}, nil
}

// faultConn applies the injector's decisions. The client writes a request
// and then reads its reply, so one pending decision per connection suffices.
// Replies are read whole, so the injector can see what the server answered.
type faultConn struct {
	net.Conn
	f        *faults
	wbuf     []byte
	rbuf     []byte
	swallow  bool
	lastName string
	lastCmd  bson.Raw
}

func (c *faultConn) Write(p []byte) (int, error) {
	c.wbuf = append(c.wbuf, p...)
	for len(c.wbuf) >= 4 {
		n := int(binary.LittleEndian.Uint32(c.wbuf))
		if n < 16 || len(c.wbuf) < n {
			break
		}
		msg := c.wbuf[:n]
		act, name, cmd := c.f.actionFor(msg)
		if act == dropRequest {
			c.Conn.Close()
			return 0, errInjected
		}
		if _, err := c.Conn.Write(msg); err != nil {
			return 0, err
		}
		c.wbuf = c.wbuf[n:]
		c.swallow, c.lastName, c.lastCmd = act == dropReply, name, append(bson.Raw(nil), cmd...)
	}
	return len(p), nil
}

func (c *faultConn) Read(p []byte) (int, error) {
	if len(c.rbuf) == 0 {
		msg, err := readMessage(c.Conn)
		if err != nil {
			return 0, err
		}
		c.f.observe(c.lastName, c.lastCmd, msg)
		if c.swallow {
			// The server has answered, so the write is applied (or refused);
			// the client never hears of it.
			c.swallow = false
			c.f.mu.Lock()
			hook := c.f.applied
			c.f.mu.Unlock()
			if hook != nil {
				hook(c.lastName, c.lastCmd)
			}
			c.Conn.Close()
			return 0, errInjected
		}
		c.rbuf = msg
	}
	n := copy(p, c.rbuf)
	c.rbuf = c.rbuf[n:]
	return n, nil
}

// observe records the tokens the server accepted in step one: the ground
// truth of which increments were recorded, whoever heard the reply.
func (f *faults) observe(name string, cmd bson.Raw, reply []byte) {
	if name != "update" || !hasOperator(cmd, "$addToSet") {
		return
	}
	body, ok := opMsgBody(reply)
	if !ok {
		return
	}
	if okv, isNum := body.Lookup("ok").AsFloat64OK(); !isNum || okv != 1 {
		return
	}
	if _, err := body.LookupErr("writeErrors"); err == nil {
		return
	}
	tok, ok := stepOneToken(cmd)
	if !ok {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.recorded == nil {
		f.recorded = map[bson.ObjectID]bool{}
	}
	f.recorded[tok] = true
}

// stepOneToken returns the token a step-one update command records.
func stepOneToken(cmd bson.Raw) (bson.ObjectID, bool) {
	for _, key := range []string{"updates", "$docs"} {
		arr, ok := cmd.Lookup(key).ArrayOK()
		if !ok {
			continue
		}
		vals, _ := arr.Values()
		for _, v := range vals {
			if d, ok := v.DocumentOK(); ok {
				if t, err := d.LookupErr("u", "$addToSet", "pending", "t"); err == nil {
					return t.ObjectIDOK()
				}
			}
		}
	}
	return bson.ObjectID{}, false
}

// recordedTokens returns the tokens step one recorded so far.
func (f *faults) recordedTokens() map[bson.ObjectID]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[bson.ObjectID]bool, len(f.recorded))
	for k, v := range f.recorded {
		out[k] = v
	}
	return out
}

// seeded returns a decide function that applies act to the named commands
// with probability p, from a PCG seeded with seed.
func seeded(seed uint64, p float64, act action, names ...string) func(string, bson.Raw) action {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	return func(name string, _ bson.Raw) action {
		for _, n := range names {
			if n == name && rng.Float64() < p {
				return act
			}
		}
		return pass
	}
}

// nth returns a decide function that applies act to the k-th (0-based)
// command named name, counting from now.
func nth(name string, k int, act action) func(string, bson.Raw) action {
	i := 0
	return func(n string, _ bson.Raw) action {
		if n != name {
			return pass
		}
		i++
		if i-1 == k {
			return act
		}
		return pass
	}
}

// env is one test deployment: a mongosim replica set, a sturdy client
// whose connections go through a fault injector, and the collection under
// test, reached through the driver the test runs with.
type env struct {
	sim    *mongosim.Cluster
	client *sturdy.Client
	faults *faults
	// coll is the sturdy collection the tests inspect results with.
	coll *sturdy.Collection
	// target is what once.New is given: coll itself, or the same collection
	// through the official driver and adapt/mongov2 (its connections go
	// through the same fault injector).
	target adapt.Collection
	// retryWrites says whether the client retries writes itself.
	retryWrites bool
	driver      driver
}

// driver names the client a test runs the pattern over.
type driver string

const (
	sturdyDriver   driver = "sturdy"
	officialDriver driver = "official"
)

var drivers = []driver{sturdyDriver, officialDriver}

// dialFunc gives the injector's dial function the official driver's
// ContextDialer method.
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

func (f dialFunc) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return f(ctx, network, addr)
}

func newEnv(t *testing.T, d driver, retryWrites bool) *env {
	t.Helper()
	sim := mongosim.StartWithOptions(t, mongosim.Options{Seed: 7})
	o, err := sturdy.ParseURI(sim.URI())
	if err != nil {
		t.Fatal(err)
	}
	f := &faults{}
	o.Dialer = f.dial
	o.RetryWrites = &retryWrites
	o.ServerSelectionTimeout = 10 * time.Second
	o.HeartbeatInterval = 500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, err := sturdy.ConnectWithOptions(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := client.Disconnect(ctx); err != nil {
			t.Errorf("Disconnect: %v", err)
		}
	})
	e := &env{sim: sim, client: client, faults: f, coll: client.Database("app").Collection("c"), retryWrites: retryWrites, driver: d}
	e.target = e.coll
	if d == officialDriver {
		// The official driver's default server selection timeout (30 s):
		// after a network error it may wait for its streaming hello, up to
		// heartbeatFrequency (10 s), before it sees the server again.
		oc, err := mongo.Connect(options.Client().ApplyURI(sim.URI()).SetDialer(dialFunc(f.dial)).
			SetRetryWrites(retryWrites))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := oc.Disconnect(ctx); err != nil {
				t.Errorf("Disconnect: %v", err)
			}
		})
		e.target = mongov2.Collection(oc.Database("app").Collection("c"))
	}
	return e
}

// eachDriver runs fn once per driver.
func eachDriver(t *testing.T, fn func(t *testing.T, d driver)) {
	for _, d := range drivers {
		t.Run(string(d), func(t *testing.T) { fn(t, d) })
	}
}

// bothRetryModes runs fn for each driver with its retryable writes off and
// on: the patterns must hold without the driver's help.
func bothRetryModes(t *testing.T, fn func(t *testing.T, e *env)) {
	for _, d := range drivers {
		for _, rw := range []bool{false, true} {
			name := string(d) + "/retryWrites=false"
			if rw {
				name = string(d) + "/retryWrites=true"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				fn(t, newEnv(t, d, rw))
			})
		}
	}
}

func testCtx(t *testing.T) context.Context { return testsupport.Context(t, 0) }

func mustNoErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// findDoc returns the document with _id id as bson.M.
func findDoc(t *testing.T, coll *sturdy.Collection, id any) bson.M {
	t.Helper()
	var m bson.M
	mustNoErr(t, coll.FindOne(testCtx(t), bson.D{{Key: "_id", Value: id}}).Decode(&m))
	return m
}

func count(t *testing.T, coll *sturdy.Collection, filter any) int64 {
	t.Helper()
	if filter == nil {
		filter = bson.D{}
	}
	n, err := coll.CountDocuments(testCtx(t), filter)
	mustNoErr(t, err)
	return n
}
