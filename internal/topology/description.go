package topology

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/event"
	"github.com/sturdy-go/sturdy/mongoerr"
)

// TopologyKind is the shape of the deployment.
type TopologyKind int

// Topology kinds.
const (
	TopologyUnknown TopologyKind = iota
	Single
	ReplicaSetNoPrimary
	ReplicaSetWithPrimary
	Sharded
	// LoadBalanced: one load balancer in front of mongos services
	// (loadBalanced=true); it never changes and is never monitored.
	LoadBalanced
)

var topologyKindNames = [...]string{"Unknown", "Single", "ReplicaSetNoPrimary", "ReplicaSetWithPrimary", "Sharded", "LoadBalanced"}

func (k TopologyKind) String() string {
	if k >= 0 && int(k) < len(topologyKindNames) {
		return topologyKindNames[k]
	}
	return "TopologyKind(" + strconv.Itoa(int(k)) + ")"
}

// ParseTopologyKind maps a name from String back to its kind.
func ParseTopologyKind(s string) (TopologyKind, bool) {
	for i, n := range topologyKindNames {
		if n == s {
			return TopologyKind(i), true
		}
	}
	return TopologyUnknown, false
}

// Description is the client's view of the whole deployment. It is a value:
// updates build a new Description and never modify a published one.
type Description struct {
	Kind                         TopologyKind
	SetName                      string
	Servers                      []ServerDescription // sorted by address
	MaxSetVersion                *int64
	MaxElectionID                *bson.ObjectID
	LogicalSessionTimeoutMinutes *int64
	CompatibilityErr             error // a server speaks no wire version this client does
}

// initialDescription is the description before any server was checked.
func initialDescription(o Options) Description {
	d := Description{Kind: TopologyUnknown, SetName: o.SetName}
	switch {
	case o.Conn.LoadBalanced:
		d.Kind = LoadBalanced
	case o.Direct:
		d.Kind = Single
	case o.SetName != "":
		d.Kind = ReplicaSetNoPrimary
	}
	for _, h := range o.Hosts {
		d = d.withServer(unknownServer(NormalizeAddr(h), nil))
	}
	return d
}

// Server returns the description of the server at addr.
func (d Description) Server(addr string) (ServerDescription, bool) {
	if i := d.index(addr); i >= 0 {
		return d.Servers[i], true
	}
	return ServerDescription{}, false
}

// HasPrimary reports whether a primary is known.
func (d Description) HasPrimary() bool {
	return slices.ContainsFunc(d.Servers, func(s ServerDescription) bool { return s.Kind == RSPrimary })
}

// SupportsSessions reports whether the deployment supports logical
// sessions: every data-bearing server reported a session timeout.
func (d Description) SupportsSessions() bool {
	// A load balancer is not monitored: the services behind it support
	// sessions (the load balancer specification).
	return d.Kind == LoadBalanced || d.LogicalSessionTimeoutMinutes != nil
}

// SupportsRetryableWrites reports whether writes may carry a transaction
// number (Retryable Writes spec): sessions are supported, no data-bearing
// server is a standalone and all speak wire version 6 or later.
func (d Description) SupportsRetryableWrites() bool {
	if !d.SupportsSessions() {
		return false
	}
	for _, s := range d.Servers {
		if s.Kind.DataBearing() && !s.SupportsRetryableWrites() {
			return false
		}
	}
	return true
}

// Event returns the public view of the description.
func (d Description) Event() event.TopologyDescription {
	e := event.TopologyDescription{Kind: d.Kind.String(), SetName: d.SetName}
	for _, s := range d.Servers {
		e.Servers = append(e.Servers, s.Event())
	}
	return e
}

// String summarises the description for error messages.
func (d Description) String() string {
	var b strings.Builder
	b.WriteString(d.Kind.String())
	if d.SetName != "" {
		b.WriteString(" (set " + d.SetName + ")")
	}
	b.WriteString(": [")
	for i, s := range d.Servers {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(s.String())
	}
	b.WriteString("]")
	if d.CompatibilityErr != nil {
		b.WriteString("; " + d.CompatibilityErr.Error())
	}
	return b.String()
}

func (d Description) index(addr string) int {
	i, ok := slices.BinarySearchFunc(d.Servers, addr, func(s ServerDescription, a string) int { return strings.Compare(s.Addr, a) })
	if !ok {
		return -1
	}
	return i
}

// withServer returns d with sd added or replacing the server of the same
// address. The Servers slice is copied, never modified in place.
func (d Description) withServer(sd ServerDescription) Description {
	i, found := slices.BinarySearchFunc(d.Servers, sd.Addr, func(s ServerDescription, a string) int { return strings.Compare(s.Addr, a) })
	servers := slices.Clone(d.Servers)
	if found {
		servers[i] = sd
	} else {
		servers = slices.Insert(servers, i, sd)
	}
	d.Servers = servers
	return d
}

func (d Description) without(addr string) Description {
	i := d.index(addr)
	if i < 0 {
		return d
	}
	d.Servers = slices.Delete(slices.Clone(d.Servers), i, i+1)
	return d
}

func (d Description) contains(addr string) bool { return d.index(addr) >= 0 }

// Apply returns the description that results from the outcome sd of a
// check of one server: the SDAM update rules, without I/O. Outcomes for
// servers no longer in the description, and outcomes older (by
// topologyVersion) than what is known, are ignored.
func (d Description) Apply(o Options, sd ServerDescription) Description {
	sd.Addr = NormalizeAddr(sd.Addr)
	cur, ok := d.Server(sd.Addr)
	if !ok {
		return d
	}
	if compareTopologyVersion(cur.TopologyVersion, sd.TopologyVersion) > 0 {
		return d
	}
	if sd.Kind == ServerUnknown {
		sd.RTT = 0
	}
	d = d.update(o, sd)
	d.LogicalSessionTimeoutMinutes = sessionTimeout(d.Servers)
	d.CompatibilityErr = compatibility(d.Servers)
	return d
}

func (d Description) update(o Options, sd ServerDescription) Description {
	if d.Kind == Single {
		if o.SetName != "" && sd.Kind != ServerUnknown && sd.SetName != o.SetName {
			sd = unknownServer(sd.Addr, fmt.Errorf("server %s reports replica set %q, expected %q", sd.Addr, sd.SetName, o.SetName))
		}
		return d.withServer(sd)
	}
	d = d.withServer(sd)
	switch d.Kind {
	case TopologyUnknown:
		switch sd.Kind {
		case Standalone:
			if len(o.Hosts) == 1 {
				d.Kind = Single
			} else {
				d = d.without(sd.Addr)
			}
		case Mongos:
			d.Kind = Sharded
		case RSPrimary:
			d = d.updateRSFromPrimary(sd)
		case RSSecondary, RSArbiter, RSOther:
			d.Kind = ReplicaSetNoPrimary
			d = d.updateRSWithoutPrimary(sd)
		}
	case Sharded:
		switch sd.Kind {
		case ServerUnknown, Mongos:
		default:
			d = d.without(sd.Addr)
		}
	case ReplicaSetNoPrimary:
		switch sd.Kind {
		case Standalone, Mongos:
			d = d.without(sd.Addr)
		case RSPrimary:
			d = d.updateRSFromPrimary(sd)
		case RSSecondary, RSArbiter, RSOther:
			d = d.updateRSWithoutPrimary(sd)
		}
	case ReplicaSetWithPrimary:
		switch sd.Kind {
		case ServerUnknown, RSGhost:
			d = d.checkIfHasPrimary()
		case Standalone, Mongos:
			d = d.without(sd.Addr).checkIfHasPrimary()
		case RSPrimary:
			d = d.updateRSFromPrimary(sd)
		case RSSecondary, RSArbiter, RSOther:
			d = d.updateRSWithPrimaryFromMember(sd)
		}
	}
	return d
}

func (d Description) addMembers(sd ServerDescription) Description {
	for _, list := range [][]string{sd.Hosts, sd.Passives, sd.Arbiters} {
		for _, a := range list {
			if !d.contains(a) {
				d = d.withServer(unknownServer(a, nil))
			}
		}
	}
	return d
}

// markPossiblePrimary notes that another member names addr as primary. It
// stays unselectable until checked; the mark only says where a primary is
// likely to be.
func (d Description) markPossiblePrimary(addr string) Description {
	if s, ok := d.Server(addr); ok && s.Kind == ServerUnknown {
		s.Kind = PossiblePrimary
		d = d.withServer(s)
	}
	return d
}

func (d Description) updateRSWithoutPrimary(sd ServerDescription) Description {
	if d.SetName == "" {
		d.SetName = sd.SetName
	} else if d.SetName != sd.SetName {
		return d.without(sd.Addr)
	}
	d = d.addMembers(sd)
	if sd.Primary != "" {
		d = d.markPossiblePrimary(sd.Primary)
	}
	if sd.Me != "" && sd.Addr != sd.Me {
		return d.without(sd.Addr)
	}
	return d
}

func (d Description) updateRSWithPrimaryFromMember(sd ServerDescription) Description {
	if d.SetName != sd.SetName {
		return d.without(sd.Addr).checkIfHasPrimary()
	}
	if sd.Me != "" && sd.Addr != sd.Me {
		return d.without(sd.Addr).checkIfHasPrimary()
	}
	if !d.HasPrimary() {
		d.Kind = ReplicaSetNoPrimary
		if sd.Primary != "" {
			d = d.markPossiblePrimary(sd.Primary)
		}
	}
	return d
}

func (d Description) updateRSFromPrimary(sd ServerDescription) Description {
	if d.SetName == "" {
		d.SetName = sd.SetName
	} else if d.SetName != sd.SetName {
		return d.without(sd.Addr).checkIfHasPrimary()
	}
	if sd.MaxWireVersion >= 17 {
		ec := compareElectionID(sd.ElectionID, d.MaxElectionID)
		if ec > 0 || (ec == 0 && compareSetVersion(sd.SetVersion, d.MaxSetVersion) >= 0) {
			d.MaxElectionID = sd.ElectionID
			d.MaxSetVersion = sd.SetVersion
		} else {
			return d.markStale(sd).checkIfHasPrimary()
		}
	} else {
		if sd.SetVersion != nil && sd.ElectionID != nil {
			if d.MaxSetVersion != nil && d.MaxElectionID != nil &&
				(*d.MaxSetVersion > *sd.SetVersion ||
					(*d.MaxSetVersion == *sd.SetVersion && compareElectionID(d.MaxElectionID, sd.ElectionID) > 0)) {
				return d.markStale(sd).checkIfHasPrimary()
			}
			d.MaxElectionID = sd.ElectionID
		}
		if sd.SetVersion != nil && (d.MaxSetVersion == nil || *sd.SetVersion > *d.MaxSetVersion) {
			d.MaxSetVersion = sd.SetVersion
		}
	}
	for _, s := range d.Servers {
		if s.Addr != sd.Addr && s.Kind == RSPrimary {
			d = d.withServer(unknownServer(s.Addr, fmt.Errorf("%s: primary marked stale due to discovery of newer primary %s", s.Addr, sd.Addr)))
		}
	}
	d = d.addMembers(sd)
	for _, s := range slices.Clone(d.Servers) {
		if !slices.Contains(sd.Hosts, s.Addr) && !slices.Contains(sd.Passives, s.Addr) && !slices.Contains(sd.Arbiters, s.Addr) {
			d = d.without(s.Addr)
		}
	}
	return d.checkIfHasPrimary()
}

func (d Description) markStale(sd ServerDescription) Description {
	err := fmt.Errorf("%s: primary marked stale due to electionId/setVersion mismatch, %s is stale compared to %s",
		sd.Addr, versionTuple(sd.ElectionID, sd.SetVersion), versionTuple(d.MaxElectionID, d.MaxSetVersion))
	return d.withServer(unknownServer(sd.Addr, err))
}

func versionTuple(id *bson.ObjectID, v *int64) string {
	es, vs := "null", "null"
	if id != nil {
		es = id.Hex()
	}
	if v != nil {
		vs = strconv.FormatInt(*v, 10)
	}
	return "{electionId: " + es + ", setVersion: " + vs + "}"
}

func (d Description) checkIfHasPrimary() Description {
	if d.HasPrimary() {
		d.Kind = ReplicaSetWithPrimary
	} else {
		d.Kind = ReplicaSetNoPrimary
	}
	return d
}

// sessionTimeout is the smallest session timeout of the data-bearing
// servers, or nil when any of them (or all, by absence) has none.
func sessionTimeout(servers []ServerDescription) *int64 {
	var min *int64
	for _, s := range servers {
		if !s.Kind.DataBearing() {
			continue
		}
		if s.LogicalSessionTimeoutMinutes == nil {
			return nil
		}
		if min == nil || *s.LogicalSessionTimeoutMinutes < *min {
			v := *s.LogicalSessionTimeoutMinutes
			min = &v
		}
	}
	return min
}

func compatibility(servers []ServerDescription) error {
	for _, s := range servers {
		if !s.Available() {
			continue
		}
		if s.MinWireVersion > MaxSupportedWireVersion || s.MaxWireVersion < MinSupportedWireVersion {
			return &mongoerr.IncompatibleError{Addr: s.Addr, MinWireVersion: s.MinWireVersion, MaxWireVersion: s.MaxWireVersion,
				SupportedMin: MinSupportedWireVersion, SupportedMax: MaxSupportedWireVersion}
		}
	}
	return nil
}
