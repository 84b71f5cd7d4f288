package topology

import (
	"bytes"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/event"
	"github.com/sturdy-go/sturdy/internal/mongoerr"
)

// Wire versions this client speaks: MongoDB 4.4 through 8.x.
const (
	MinSupportedWireVersion = 9
	MaxSupportedWireVersion = 25
)

// ServerKind is what a server is, as far as the client can tell.
type ServerKind int

// Server kinds. PossiblePrimary appears only in descriptions built by
// callers (other members name it primary); the monitor never reports it.
const (
	ServerUnknown ServerKind = iota
	Standalone
	Mongos
	RSPrimary
	RSSecondary
	RSArbiter
	RSOther
	RSGhost
	PossiblePrimary
	// LoadBalancer is the one server of a LoadBalanced topology.
	LoadBalancer
)

var serverKindNames = [...]string{"Unknown", "Standalone", "Mongos", "RSPrimary", "RSSecondary", "RSArbiter", "RSOther", "RSGhost", "PossiblePrimary", "LoadBalancer"}

func (k ServerKind) String() string {
	if k >= 0 && int(k) < len(serverKindNames) {
		return serverKindNames[k]
	}
	return "ServerKind(" + strconv.Itoa(int(k)) + ")"
}

// ParseServerKind maps a name from String back to its kind.
func ParseServerKind(s string) (ServerKind, bool) {
	for i, n := range serverKindNames {
		if n == s {
			return ServerKind(i), true
		}
	}
	return ServerUnknown, false
}

// DataBearing reports whether servers of this kind hold data that can be
// read or written.
func (k ServerKind) DataBearing() bool {
	return k == Standalone || k == Mongos || k == RSPrimary || k == RSSecondary || k == LoadBalancer
}

// TopologyVersion orders hello replies and state-change errors from one
// server process.
type TopologyVersion struct {
	ProcessID bson.ObjectID
	Counter   int64
}

// compareTopologyVersion returns -1 when incoming is newer than cur (or the
// two cannot be compared, which counts as newer), 0 when they are equal and
// 1 when cur is newer.
func compareTopologyVersion(cur, incoming *TopologyVersion) int {
	if cur == nil || incoming == nil || cur.ProcessID != incoming.ProcessID {
		return -1
	}
	switch {
	case cur.Counter < incoming.Counter:
		return -1
	case cur.Counter > incoming.Counter:
		return 1
	}
	return 0
}

// ServerDescription is what the client knows of one server. Values are
// immutable once published: slices and maps are never modified in place.
type ServerDescription struct {
	Addr                         string
	Kind                         ServerKind
	RTT                          time.Duration // average round trip time; 0 while Unknown
	MinRTT                       time.Duration // minimum of the last 10 RTT samples; 0 until there are 2
	Err                          error         // why the server is Unknown, if it is
	MinWireVersion               int32
	MaxWireVersion               int32
	Me                           string
	SetName                      string
	Primary                      string
	Hosts, Passives, Arbiters    []string
	Tags                         map[string]string
	SetVersion                   *int64
	ElectionID                   *bson.ObjectID
	LogicalSessionTimeoutMinutes *int64
	TopologyVersion              *TopologyVersion
	LastWriteDate                time.Time
	LastUpdateTime               time.Time
	MaxBSONObjectSize            int32
	MaxMessageSizeBytes          int32
	MaxWriteBatchSize            int32
	Compression                  []string
	HelloOK                      bool
}

// unknownServer is the default description of a server not yet checked or
// whose last check failed.
func unknownServer(addr string, err error) ServerDescription {
	return ServerDescription{Addr: addr, Kind: ServerUnknown, Err: err}
}

// NewServerDescription builds a description from a hello (or legacy
// isMaster) reply. A reply without ok: 1 gives an Unknown server carrying
// the error. Fields of the wrong BSON type are ignored: a server's reply
// never makes this panic.
func NewServerDescription(addr string, hello bson.Raw, rtt time.Duration) ServerDescription {
	sd := ServerDescription{Addr: NormalizeAddr(addr), LastUpdateTime: time.Now()}
	if err := hello.Validate(); err != nil {
		sd.Err = fmt.Errorf("topology: malformed hello reply from %s: %w", addr, err)
		return sd
	}
	if err := mongoerr.FromReply(hello); err != nil {
		sd.Err = err
		return sd
	}
	var (
		writablePrimary, secondary, arbiterOnly, hidden, isReplicaSet bool
		msg                                                           string
	)
	elems, _ := hello.Elements()
	writableSeen := false
	for _, e := range elems {
		v := e.Value()
		switch e.Key() {
		case "isWritablePrimary":
			writablePrimary, writableSeen = asBool(v), true
		case "ismaster":
			if !writableSeen {
				writablePrimary = asBool(v)
			}
		case "secondary":
			secondary = asBool(v)
		case "arbiterOnly":
			arbiterOnly = asBool(v)
		case "hidden":
			hidden = asBool(v)
		case "isreplicaset":
			isReplicaSet = asBool(v)
		case "msg":
			msg, _ = v.StringValueOK()
		case "setName":
			sd.SetName, _ = v.StringValueOK()
		case "me":
			s, _ := v.StringValueOK()
			sd.Me = NormalizeAddr(s)
		case "primary":
			s, _ := v.StringValueOK()
			sd.Primary = NormalizeAddr(s)
		case "hosts":
			sd.Hosts = addrList(v)
		case "passives":
			sd.Passives = addrList(v)
		case "arbiters":
			sd.Arbiters = addrList(v)
		case "tags":
			if doc, ok := v.DocumentOK(); ok {
				sd.Tags = map[string]string{}
				tagElems, _ := doc.Elements()
				for _, te := range tagElems {
					if s, ok := te.Value().StringValueOK(); ok {
						sd.Tags[te.Key()] = s
					}
				}
			}
		case "setVersion":
			if n, ok := v.AsInt64OK(); ok {
				sd.SetVersion = &n
			}
		case "electionId":
			if oid, ok := v.ObjectIDOK(); ok {
				sd.ElectionID = &oid
			}
		case "minWireVersion":
			sd.MinWireVersion = asInt32(v)
		case "maxWireVersion":
			sd.MaxWireVersion = asInt32(v)
		case "logicalSessionTimeoutMinutes":
			if n, ok := v.AsInt64OK(); ok {
				sd.LogicalSessionTimeoutMinutes = &n
			}
		case "topologyVersion":
			sd.TopologyVersion = parseTopologyVersion(v)
		case "lastWrite":
			if doc, ok := v.DocumentOK(); ok {
				if dv, err := doc.LookupErr("lastWriteDate"); err == nil {
					if dt, ok := dv.DateTimeOK(); ok {
						sd.LastWriteDate = time.UnixMilli(dt).UTC()
					}
				}
			}
		case "maxBsonObjectSize":
			sd.MaxBSONObjectSize = asInt32(v)
		case "maxMessageSizeBytes":
			sd.MaxMessageSizeBytes = asInt32(v)
		case "maxWriteBatchSize":
			sd.MaxWriteBatchSize = asInt32(v)
		case "compression":
			sd.Compression = stringList(v)
		case "helloOk":
			sd.HelloOK = asBool(v)
		}
	}
	switch {
	case isReplicaSet:
		sd.Kind = RSGhost
	case sd.SetName != "":
		switch {
		case writablePrimary:
			sd.Kind = RSPrimary
		case hidden:
			sd.Kind = RSOther
		case secondary:
			sd.Kind = RSSecondary
		case arbiterOnly:
			sd.Kind = RSArbiter
		default:
			sd.Kind = RSOther
		}
	case msg == "isdbgrid":
		sd.Kind = Mongos
	default:
		sd.Kind = Standalone
	}
	sd.RTT = rtt
	return sd
}

func asBool(v bson.RawValue) bool {
	if b, ok := v.BooleanOK(); ok {
		return b
	}
	if n, ok := v.AsInt64OK(); ok {
		return n != 0
	}
	return false
}

// asInt32 is a numeric field's value, 0 when it is not a number.
func asInt32(v bson.RawValue) int32 {
	n, _ := v.AsInt64OK()
	return int32(n)
}

func parseTopologyVersion(v bson.RawValue) *TopologyVersion {
	doc, ok := v.DocumentOK()
	if !ok {
		return nil
	}
	// Lookup gives an empty value for an absent field, which no OK accessor
	// accepts.
	oid, ok := doc.Lookup("processId").ObjectIDOK()
	if !ok {
		return nil
	}
	n, ok := doc.Lookup("counter").AsInt64OK()
	if !ok {
		return nil
	}
	return &TopologyVersion{ProcessID: oid, Counter: n}
}

func stringList(v bson.RawValue) []string {
	arr, ok := v.ArrayOK()
	if !ok {
		return nil
	}
	vals, _ := arr.Values()
	out := make([]string, 0, len(vals))
	for _, x := range vals {
		if s, ok := x.StringValueOK(); ok {
			out = append(out, s)
		}
	}
	return out
}

func addrList(v bson.RawValue) []string {
	l := stringList(v)
	for i, s := range l {
		l[i] = NormalizeAddr(s)
	}
	return l
}

// NormalizeAddr lower-cases a host name and adds the default port 27017
// when none is given, so "A" and "a:27017" name the same server.
func NormalizeAddr(addr string) string {
	addr = strings.ToLower(strings.TrimSpace(addr))
	if addr == "" {
		return ""
	}
	if strings.HasSuffix(addr, ".sock") {
		return addr
	}
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	if strings.HasPrefix(addr, "[") && strings.HasSuffix(addr, "]") {
		return addr + ":27017"
	}
	if strings.Count(addr, ":") > 1 { // bare IPv6 literal
		return "[" + addr + "]:27017"
	}
	return addr + ":27017"
}

// Available reports whether the server answered its last check.
func (s ServerDescription) Available() bool {
	return s.Kind != ServerUnknown && s.Kind != PossiblePrimary
}

// SupportsRetryableWrites reports whether writes sent to this server can
// carry a transaction number (seed 002: wire version 6+, sessions on, not a
// standalone).
func (s ServerDescription) SupportsRetryableWrites() bool {
	if s.Kind == LoadBalancer {
		// Its description has no fields: each connection's handshake
		// decides (the executor checks that too).
		return true
	}
	return s.MaxWireVersion >= 6 && s.LogicalSessionTimeoutMinutes != nil &&
		s.Kind != Standalone && s.Kind != ServerUnknown
}

// Equal compares the fields the SDAM spec uses to decide whether a change
// is worth an event; RTT and timestamps are not among them.
func (s ServerDescription) Equal(o ServerDescription) bool {
	return s.Addr == o.Addr && s.Kind == o.Kind && s.MinWireVersion == o.MinWireVersion &&
		s.MaxWireVersion == o.MaxWireVersion && s.Me == o.Me && s.SetName == o.SetName &&
		s.Primary == o.Primary && slices.Equal(s.Hosts, o.Hosts) && slices.Equal(s.Passives, o.Passives) &&
		slices.Equal(s.Arbiters, o.Arbiters) && maps.Equal(s.Tags, o.Tags) &&
		eqPtr(s.SetVersion, o.SetVersion) && eqPtr(s.ElectionID, o.ElectionID) &&
		eqPtr(s.LogicalSessionTimeoutMinutes, o.LogicalSessionTimeoutMinutes) &&
		eqPtr(s.TopologyVersion, o.TopologyVersion) && errString(s.Err) == errString(o.Err)
}

func eqPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// compareElectionID orders ObjectIDs bytewise; nil is less than any id.
func compareElectionID(a, b *bson.ObjectID) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	}
	return bytes.Compare(a[:], b[:])
}

// compareSetVersion orders set versions; nil is less than any version.
func compareSetVersion(a, b *int64) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	case *a < *b:
		return -1
	case *a > *b:
		return 1
	}
	return 0
}

// Event returns the public view of the description.
func (s ServerDescription) Event() event.ServerDescription {
	e := event.ServerDescription{
		Address: s.Addr, Kind: s.Kind.String(), SetName: s.SetName, Hosts: slices.Clone(s.Hosts),
		RTT: s.RTT, Error: s.Err, MaxWireVersion: s.MaxWireVersion,
	}
	if s.TopologyVersion != nil {
		e.TopologyVersion, _ = bson.Marshal(bson.D{
			{Key: "processId", Value: s.TopologyVersion.ProcessID},
			{Key: "counter", Value: s.TopologyVersion.Counter},
		})
	}
	return e
}

func (s ServerDescription) String() string {
	var b strings.Builder
	b.WriteString(s.Addr)
	b.WriteString(" ")
	b.WriteString(s.Kind.String())
	if s.Kind != ServerUnknown {
		fmt.Fprintf(&b, " rtt=%s", s.RTT.Round(time.Microsecond))
	}
	if s.Err != nil {
		fmt.Fprintf(&b, " (%v)", s.Err)
	}
	return b.String()
}
