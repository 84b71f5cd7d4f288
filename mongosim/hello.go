package mongosim

import (
	"encoding/binary"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

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

// helloCmd answers hello, isMaster and the legacy OP_QUERY isMaster. An
// awaitable hello (topologyVersion + maxAwaitTimeMS, as sent by streaming
// monitors) whose topologyVersion is current waits until this member's
// topology changes, maxAwaitTimeMS passes, or the connection closes.
func helloCmd(r *request) (bson.D, error) {
	m := r.member
	counter, changed := m.topologyVersion()
	if wait, ok := awaitTime(r, m.processID, counter); ok {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-changed:
		case <-r.raw.Context().Done():
			t.Stop()
			return nil, errReplied // connection closed: nobody to answer
		}
		t.Stop()
	}
	return m.helloReply(r), nil
}

// awaitTime reports how long an awaitable hello waits: only when it names
// this process's current topologyVersion.
func awaitTime(r *request, pid bson.ObjectID, counter int64) (time.Duration, bool) {
	mv, ok := r.get("maxAwaitTimeMS")
	if !ok {
		return 0, false
	}
	ms, ok := asInt64(mv)
	if !ok || ms <= 0 {
		return 0, false
	}
	tvV, ok := r.get("topologyVersion")
	if !ok {
		return 0, false
	}
	tv, ok := tvV.(bson.D)
	if !ok {
		return 0, false
	}
	p, _ := lookupD(tv, "processId")
	if oid, ok := p.(bson.ObjectID); !ok || oid != pid {
		return 0, false
	}
	cv, _ := lookupD(tv, "counter")
	if n, ok := asInt64(cv); !ok || n != counter {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
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
		bson.E{Key: "maxWriteBatchSize", Value: int32(maxWriteBatchSize)},
		bson.E{Key: "localTime", Value: bson.NewDateTimeFromTime(now)},
	)
	if c.setName != "" {
		d = append(d, bson.E{Key: "logicalSessionTimeoutMinutes", Value: int32(sessionTimeoutMins)})
	}
	d = append(d,
		bson.E{Key: "connectionId", Value: int32(r.raw.Conn.ID())},
		bson.E{Key: "minWireVersion", Value: int32(0)},
		bson.E{Key: "maxWireVersion", Value: int32(maxWireVersion)},
		bson.E{Key: "readOnly", Value: false},
	)
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
