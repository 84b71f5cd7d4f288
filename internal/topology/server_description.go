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
	"github.com/sturdy-go/sturdy/internal/conn"
	"github.com/sturdy-go/sturdy/mongoerr"
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
type TopologyVersion = conn.TopologyVersion

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
	Addr           string
	Kind           ServerKind
	RTT            time.Duration // average round trip time; 0 while Unknown
	MinRTT         time.Duration // minimum of the last 10 RTT samples; 0 until there are 2
	Err            error         // why the server is Unknown, if it is
	LastUpdateTime time.Time
	// Description is the server's last hello reply as conn parsed it, its
	// addresses normalised and without the raw reply; zero while the server
	// is Unknown (but for a TopologyVersion an error carried).
	conn.Description
}

// unknownServer is the default description of a server not yet checked or
// whose last check failed.
func unknownServer(addr string, err error) ServerDescription {
	return ServerDescription{Addr: addr, Kind: ServerUnknown, Err: err}
}

// NewServerDescription builds a description from a hello (or legacy
// isMaster) reply. A reply without ok: 1 gives an Unknown server carrying
// the error, as does a malformed one. Fields of the wrong BSON type are
// ignored (conn.ParseDescription): a server's reply never makes this panic.
func NewServerDescription(addr string, hello bson.Raw, rtt time.Duration) ServerDescription {
	d, err := conn.ParseDescription(hello)
	if err != nil {
		sd := unknownServer(NormalizeAddr(addr), fmt.Errorf("malformed hello reply from %s: %w", addr, err))
		sd.LastUpdateTime = time.Now()
		return sd
	}
	if err := mongoerr.FromReply(hello); err != nil {
		sd := unknownServer(NormalizeAddr(addr), err)
		sd.LastUpdateTime = time.Now()
		return sd
	}
	return fromHello(addr, d, rtt)
}

// fromHello builds the description of a server whose hello reply (ok: 1)
// conn parsed: SDAM's server kind, the RTT, and addresses normalised so
// that they compare equal however the server spelled them.
func fromHello(addr string, d conn.Description, rtt time.Duration) ServerDescription {
	d.Raw = nil // a description lives as long as the server's; the reply need not
	d.Me, d.Primary = NormalizeAddr(d.Me), NormalizeAddr(d.Primary)
	d.Hosts, d.Passives, d.Arbiters = normalizeAddrs(d.Hosts), normalizeAddrs(d.Passives), normalizeAddrs(d.Arbiters)
	return ServerDescription{Addr: NormalizeAddr(addr), Kind: serverKind(d), RTT: rtt, LastUpdateTime: time.Now(), Description: d}
}

// serverKind is the SDAM server type a hello reply describes.
func serverKind(d conn.Description) ServerKind {
	switch {
	case d.IsReplicaSet:
		return RSGhost
	case d.SetName != "":
		switch {
		case d.IsWritablePrimary:
			return RSPrimary
		case d.Hidden:
			return RSOther
		case d.Secondary:
			return RSSecondary
		case d.ArbiterOnly:
			return RSArbiter
		}
		return RSOther
	case d.IsMongos():
		return Mongos
	}
	return Standalone
}

// normalizeAddrs returns a normalised copy of addrs.
func normalizeAddrs(addrs []string) []string {
	if addrs == nil {
		return nil
	}
	out := make([]string, len(addrs))
	for i, s := range addrs {
		out[i] = NormalizeAddr(s)
	}
	return out
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
// carry a transaction number (Retryable Writes spec: wire version 6+,
// sessions on, not a standalone).
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
