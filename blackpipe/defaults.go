package blackpipe

import (
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/wire"
)

// Limits the default hello reply advertises.
const (
	MaxBSONObjectSize   = 16 * 1024 * 1024
	MaxMessageSizeBytes = wire.DefaultMaxMessageSize
	MaxWriteBatchSize   = 100_000
)

// ServerVersion is the version buildInfo reports.
const ServerVersion = "8.0.0"

func isHello(name string) bool {
	return name == "hello" || strings.EqualFold(name, "isMaster")
}

// defaultRespond answers the commands every client sends on its own
// (handshake, monitoring, ping, endSessions) so tests only script the
// commands they care about.
func (s *Server) defaultRespond(r *Request) bool {
	switch {
	case isHello(r.Name):
		s.respondHello(r)
		return true
	case r.OpCode != wire.OpMsg:
		return false
	case r.Name == "buildInfo" || r.Name == "buildinfo":
		_ = r.Reply(bson.D{
			{Key: "version", Value: ServerVersion},
			{Key: "gitVersion", Value: "blackpipe"},
			{Key: "versionArray", Value: bson.A{int32(8), int32(0), int32(0), int32(0)}},
			{Key: "bits", Value: int32(64)},
			{Key: "maxBsonObjectSize", Value: int32(MaxBSONObjectSize)},
			{Key: "ok", Value: 1.0},
		})
		return true
	case r.Name == "ping", r.Name == "endSessions":
		_ = r.Reply(bson.D{{Key: "ok", Value: 1.0}})
		return true
	}
	return false
}

// respondHello answers a hello, waiting first if it is an awaitable hello
// whose topologyVersion is current (a streaming monitor's check), so that
// monitors poll at their heartbeat pace instead of spinning.
func (s *Server) respondHello(r *Request) {
	_, counter, changed := s.helloState()
	if wait, ok := awaitTime(r, s.processID, counter); ok {
		wait = min(wait, s.opts.MaxAwaitTime)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-changed:
		case <-r.Context().Done():
			t.Stop()
			return // the reader notices the closed connection
		}
		t.Stop()
	}
	_ = r.Reply(s.HelloReply(r))
}

// awaitTime returns how long an awaitable hello should wait: only when it
// carries maxAwaitTimeMS and our current topologyVersion.
func awaitTime(r *Request, pid bson.ObjectID, counter int64) (time.Duration, bool) {
	mv, err := r.Command.LookupErr("maxAwaitTimeMS")
	if err != nil {
		return 0, false
	}
	ms, ok := mv.AsInt64OK()
	if !ok || ms <= 0 {
		return 0, false
	}
	tv, err := r.Command.LookupErr("topologyVersion")
	if err != nil {
		return 0, false
	}
	doc, ok := tv.DocumentOK()
	if !ok {
		return 0, false
	}
	p, err := doc.LookupErr("processId")
	if err != nil {
		return 0, false
	}
	if oid, ok := p.ObjectIDOK(); !ok || oid != pid {
		return 0, false
	}
	c, err := doc.LookupErr("counter")
	if err != nil {
		return 0, false
	}
	if n, ok := c.AsInt64OK(); !ok || n != counter {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}

// HelloReply builds the server's hello reply to r: the built-in fields,
// compression negotiation, then Options.Hello (and UpdateHello) merged over
// them. "isWritablePrimary" or "ismaster" given in Options.Hello decides
// writability; the reply names it as the request's command expects.
func (s *Server) HelloReply(r *Request) bson.D {
	extra, counter, _ := s.helloState()
	writable := true
	rest := extra[:0:0]
	for _, e := range extra {
		if e.Key == "isWritablePrimary" || e.Key == "ismaster" {
			if b, ok := e.Value.(bool); ok {
				writable = b
			}
			continue
		}
		rest = append(rest, e)
	}
	legacy := r.Name != "hello"
	d := bson.D{}
	if v, err := r.Command.LookupErr("helloOk"); err == nil && isTrue(v) {
		d = append(d, bson.E{Key: "helloOk", Value: true})
	}
	if legacy {
		d = append(d, bson.E{Key: "ismaster", Value: writable})
	} else {
		d = append(d, bson.E{Key: "isWritablePrimary", Value: writable})
	}
	d = append(d,
		bson.E{Key: "topologyVersion", Value: bson.D{
			{Key: "processId", Value: s.processID},
			{Key: "counter", Value: counter},
		}},
		bson.E{Key: "maxBsonObjectSize", Value: int32(MaxBSONObjectSize)},
		bson.E{Key: "maxMessageSizeBytes", Value: int32(MaxMessageSizeBytes)},
		bson.E{Key: "maxWriteBatchSize", Value: int32(MaxWriteBatchSize)},
		bson.E{Key: "localTime", Value: bson.NewDateTimeFromTime(time.Now())},
		bson.E{Key: "logicalSessionTimeoutMinutes", Value: int32(30)},
		bson.E{Key: "connectionId", Value: int32(r.Conn.id)},
		bson.E{Key: "minWireVersion", Value: int32(0)},
		bson.E{Key: "maxWireVersion", Value: s.opts.MaxWireVersion},
		bson.E{Key: "readOnly", Value: false},
	)
	if c := s.negotiateCompression(r); c != "" {
		d = append(d, bson.E{Key: "compression", Value: bson.A{c}})
	}
	d = mergeDoc(d, rest)
	return mergeDoc(d, bson.D{{Key: "ok", Value: 1.0}})
}

// negotiateCompression returns the first compressor in the client's list that
// this server accepts, or "".
func (s *Server) negotiateCompression(r *Request) string {
	v, err := r.Command.LookupErr("compression")
	if err != nil {
		return ""
	}
	arr, ok := v.ArrayOK()
	if !ok {
		return ""
	}
	vals, err := arr.Values()
	if err != nil {
		return ""
	}
	for _, cv := range vals {
		name, ok := cv.StringValueOK()
		if !ok {
			continue
		}
		if _, known := wire.CompressorByName(name); !known {
			continue
		}
		for _, ours := range s.opts.Compressors {
			if ours == name {
				return name
			}
		}
	}
	return ""
}

func isTrue(v bson.RawValue) bool {
	if b, ok := v.BooleanOK(); ok {
		return b
	}
	n, ok := v.AsInt64OK()
	return ok && n != 0
}
