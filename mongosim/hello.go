package mongosim

import (
	"encoding/binary"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/wire"
)

// Limits advertised in hello.
const (
	maxBSONObjectSize   = 16 * 1024 * 1024
	maxMessageSizeBytes = 48_000_000
	maxWriteBatchSize   = 100_000
	maxWireVersion      = 25
	sessionTimeoutMins  = 30
)

// helloCmd answers hello, isMaster and the legacy OP_QUERY isMaster.
//
// An awaitable hello (topologyVersion + maxAwaitTimeMS, as a streaming
// monitor sends it) naming this member's current topologyVersion waits
// until the topology changes or maxAwaitTimeMS passes; one naming another
// process or an older counter is answered at once. With the OP_MSG
// exhaustAllowed flag the reply carries moreToCome and the member keeps
// answering on the same connection, each reply again awaiting a change, until
// the connection closes. The wait runs on its own goroutine so that the
// connection's reader notices a client hanging up (mongod does the same).
func helloCmd(r *request) (bson.D, error) {
	m := r.member
	aw, awaitable, err := parseAwait(r)
	if err != nil {
		return nil, err
	}
	exhaust := r.raw.OpCode == wire.OpMsg && r.raw.Flags&wire.ExhaustAllowed != 0
	if exhaust && !awaitable {
		return nil, cmderr.New(codeExhaustNeedsMaxAwait, "An isMaster or hello request with exhaust must specify 'maxAwaitTimeMS'")
	}
	if !awaitable {
		return m.helloReply(r), nil
	}
	counter, _ := m.topologyVersion()
	if aw.pid == m.processID && aw.counter > counter {
		return nil, cmderr.New(codeTopologyVersionAhead,
			"Received a topology version with the same process ID and a higher counter than the current topology version")
	}
	if err := r.awaitLater(m.cluster, exhaust, func() { m.awaitHello(r, aw) }); err != nil {
		return nil, err
	}
	return nil, errReplied
}

// awaitLater runs wait, which answers an awaitable hello, off the
// connection's reader: with exhaust its replies stream, else the
// connection is watched so that a hang-up ends the wait. The wait
// outlives the request (and its maxTimeMS context): it ends with the
// connection.
func (r *request) awaitLater(c *Cluster, exhaust bool, wait func()) error {
	if exhaust {
		st, err := r.raw.Stream()
		if err != nil {
			return err
		}
		r.stream = st
	} else {
		r.raw.WatchClose()
	}
	r.ctx = r.raw.Context()
	if !c.goAsync(wait) {
		_ = r.hangup() // the cluster is closing
	}
	return nil
}

// awaitArgs are the awaitable-hello fields of a request.
type awaitArgs struct {
	pid      bson.ObjectID
	counter  int64
	maxAwait time.Duration
}

// Codes of mongod's awaitable hello checks.
const (
	codeAwaitFieldsPaired    = 31368
	codeNegativeTVCounter    = 31372
	codeTopologyVersionAhead = 31382
	codeExhaustNeedsMaxAwait = 51756
	codeExpectedObject       = 10065
	codeIDLMissingField      = 40414
	codeIDLUnknownField      = 40415
	codeIDLComparison        = 51024
)

// parseAwait validates topologyVersion and maxAwaitTimeMS as mongod's
// hello parser does (its IDL context is "hello" for every alias); ok is
// false when the request has neither.
func parseAwait(r *request) (aw awaitArgs, ok bool, err error) {
	tvV, hasTV := r.get("topologyVersion")
	mv, hasMax := r.get("maxAwaitTimeMS")
	if hasTV {
		tv, isDoc := tvV.(bson.D)
		if !isDoc {
			return aw, false, cmderr.New(codeExpectedObject, "invalid parameter: expected an object (topologyVersion)")
		}
		var hasPID, hasCounter bool
		for _, e := range tv {
			switch e.Key {
			case "processId":
				oid, isOID := e.Value.(bson.ObjectID)
				if !isOID {
					return aw, false, typeErr("hello.topologyVersion.processId", "objectId", e.Value)
				}
				aw.pid, hasPID = oid, true
			case "counter":
				n, isLong := e.Value.(int64)
				if !isLong {
					return aw, false, typeErr("hello.topologyVersion.counter", "long", e.Value)
				}
				aw.counter, hasCounter = n, true
			default:
				return aw, false, cmderr.New(codeIDLUnknownField, "BSON field 'hello.topologyVersion.%s' is an unknown field.", e.Key)
			}
		}
		if !hasPID {
			return aw, false, cmderr.New(codeIDLMissingField, "BSON field 'hello.topologyVersion.processId' is missing but a required field")
		}
		if !hasCounter {
			return aw, false, cmderr.New(codeIDLMissingField, "BSON field 'hello.topologyVersion.counter' is missing but a required field")
		}
	}
	if hasMax {
		ms, isNum := asInt64(mv)
		if !isNum {
			return aw, false, typeErr("hello.maxAwaitTimeMS", "long", mv)
		}
		if ms < 0 {
			return aw, false, cmderr.New(codeIDLComparison, "BSON field 'maxAwaitTimeMS' value must be >= 0, actual value '%d'", ms)
		}
		aw.maxAwait = time.Duration(ms) * time.Millisecond
	}
	switch {
	case hasTV && !hasMax:
		return aw, false, cmderr.New(codeAwaitFieldsPaired, "A request with a 'topologyVersion' must include 'maxAwaitTimeMS'")
	case hasMax && !hasTV:
		return aw, false, cmderr.New(codeAwaitFieldsPaired, "A request with 'maxAwaitTimeMS' must include a 'topologyVersion'")
	case !hasTV:
		return aw, false, nil
	}
	if aw.counter < 0 {
		return aw, false, cmderr.New(codeNegativeTVCounter, "topologyVersion must have a non-negative counter")
	}
	return aw, true, nil
}

// awaitHello answers an awaitable hello, and for an exhaust stream every
// further reply, until the connection or the cluster closes. Each streamed
// reply after the first is a new invocation of hello, as in mongod: a
// failCommand fail point naming hello applies to it, and an error reply
// ends the stream.
func (m *Member) awaitHello(r *request, aw awaitArgs) {
	st := &m.cluster.stats
	st.awaiting.Add(1)
	defer st.awaiting.Add(-1)
	done := r.raw.Context().Done()
	for first := true; ; first = false {
		if !first {
			var out outcome
			if _, answered := m.applyFailCommand(r, &out); answered {
				return
			}
		}
		counter, changed := m.topologyVersion()
		if aw.pid == m.processID && aw.counter == counter && aw.maxAwait > 0 {
			t := time.NewTimer(aw.maxAwait)
			select {
			case <-t.C:
			case <-changed:
			case <-done:
				t.Stop()
				return
			}
			t.Stop()
		}
		reply := m.helloReply(r)
		if err := r.send(reply); err != nil || r.stream == nil {
			return
		}
		st.streamed.Add(1)
		// The next invocation awaits a change from what this reply said.
		aw.pid = m.processID
		if tv, ok := lookupD(reply, "topologyVersion"); ok {
			c, _ := lookupD(tv.(bson.D), "counter")
			aw.counter, _ = c.(int64)
		}
	}
}

func (m *Member) helloReply(r *request) bson.D {
	c := m.cluster
	c.mu.Lock()
	counter := m.tvCounter
	primaryIdx, term, setVersion := c.primary, c.term, c.setVersion
	hosts := make(bson.A, 0, len(c.members))
	for _, mm := range c.members {
		hosts = append(hosts, mm.addr)
	}
	var primaryAddr string
	if primaryIdx >= 0 && primaryIdx < len(c.members) {
		primaryAddr = c.members[primaryIdx].addr
	}
	c.mu.Unlock()

	isPrimary := primaryIdx == m.index
	legacy := r.raw.Name != "hello"
	d := bson.D{}
	if v, ok := r.get("helloOk"); ok && asBool(v) {
		d = append(d, bson.E{Key: "helloOk", Value: true})
	}
	d = append(d, bson.E{Key: "topologyVersion", Value: bson.D{
		{Key: "processId", Value: m.processID},
		{Key: "counter", Value: counter},
	}})
	if c.setName != "" {
		d = append(d,
			bson.E{Key: "hosts", Value: hosts},
			bson.E{Key: "setName", Value: c.setName},
			bson.E{Key: "setVersion", Value: setVersion},
		)
	}
	if legacy {
		d = append(d, bson.E{Key: "ismaster", Value: isPrimary})
	} else {
		d = append(d, bson.E{Key: "isWritablePrimary", Value: isPrimary})
	}
	now := c.now()
	if c.setName != "" {
		d = append(d, bson.E{Key: "secondary", Value: !isPrimary})
		if primaryAddr != "" {
			d = append(d, bson.E{Key: "primary", Value: primaryAddr})
		}
		d = append(d, bson.E{Key: "me", Value: m.addr})
		if isPrimary {
			d = append(d, bson.E{Key: "electionId", Value: electionID(term)})
		}
		opTime := bson.D{
			{Key: "ts", Value: bson.Timestamp{T: uint32(now.Unix()), I: 1}},
			{Key: "t", Value: term},
		}
		d = append(d, bson.E{Key: "lastWrite", Value: bson.D{
			{Key: "opTime", Value: opTime},
			{Key: "lastWriteDate", Value: bson.NewDateTimeFromTime(now.Truncate(time.Second))},
			{Key: "majorityOpTime", Value: opTime},
			{Key: "majorityWriteDate", Value: bson.NewDateTimeFromTime(now.Truncate(time.Second))},
		}})
	}
	d = append(d,
		bson.E{Key: "maxBsonObjectSize", Value: int32(maxBSONObjectSize)},
		bson.E{Key: "maxMessageSizeBytes", Value: int32(maxMessageSizeBytes)},
		bson.E{Key: "maxWriteBatchSize", Value: c.maxWriteBatch()},
		bson.E{Key: "localTime", Value: bson.NewDateTimeFromTime(now)},
	)
	// Standalone servers support sessions too (not retryable writes or
	// transactions: txnNumber answers 20 there).
	d = append(d, bson.E{Key: "logicalSessionTimeoutMinutes", Value: int32(sessionTimeoutMins)})
	d = append(d,
		bson.E{Key: "connectionId", Value: int32(r.raw.Conn.ID())},
		bson.E{Key: "minWireVersion", Value: int32(0)},
		bson.E{Key: "maxWireVersion", Value: int32(maxWireVersion)},
		bson.E{Key: "readOnly", Value: false},
	)
	return c.helloHandshake(r, d)
}

// helloHandshake ends a member's or a router's hello reply d with what the
// connection handshake negotiates: compression, the user's SASL mechanisms
// and a speculative authentication's first reply.
func (c *Cluster) helloHandshake(r *request, d bson.D) bson.D {
	if comp := negotiateCompression(r, c.opts.Compressors); comp != "" {
		d = append(d, bson.E{Key: "compression", Value: bson.A{comp}})
	}
	if c.auth != nil {
		if v, ok := r.get("saslSupportedMechs"); ok {
			if s, ok := v.(string); ok {
				if mechs := c.auth.supportedMechs(s); mechs != nil {
					d = append(d, bson.E{Key: "saslSupportedMechs", Value: mechs})
				}
			}
		}
		if v, ok := r.get("speculativeAuthenticate"); ok {
			if sd, ok := v.(bson.D); ok {
				if reply := c.auth.speculative(r, sd); reply != nil {
					d = append(d, bson.E{Key: "speculativeAuthenticate", Value: reply})
				}
			}
		}
	}
	return append(d, bson.E{Key: "ok", Value: 1.0})
}

// electionID is a primary's electionId: 0x7fffffff followed by the term,
// as a MongoDB 4.4+ replica set reports it.
func electionID(term int64) bson.ObjectID {
	var id bson.ObjectID
	binary.BigEndian.PutUint32(id[0:4], 0x7fffffff)
	binary.BigEndian.PutUint64(id[4:12], uint64(term))
	return id
}

// negotiateCompression returns the first compressor in the client's list
// that the server accepts, or "".
func negotiateCompression(r *request, ours []string) string {
	v, ok := r.get("compression")
	if !ok {
		return ""
	}
	arr, ok := v.(bson.A)
	if !ok {
		return ""
	}
	for _, cv := range arr {
		name, ok := cv.(string)
		if !ok {
			continue
		}
		if _, known := wire.CompressorByName(name); !known {
			continue
		}
		for _, o := range ours {
			if o == name {
				return name
			}
		}
	}
	return ""
}

func init() {
	for _, name := range []string{"hello", "isMaster", "ismaster"} {
		register(&command{name: name, run: helloCmd, noAuth: true, exempt: true})
	}
}

// maxWriteBatch is the maxWriteBatchSize hello advertises.
func (c *Cluster) maxWriteBatch() int32 {
	if n := c.opts.MaxWriteBatchSize; n > 0 {
		return int32(min(n, maxWriteBatchSize))
	}
	return maxWriteBatchSize
}
