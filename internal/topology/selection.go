package topology

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/sturdy-go/sturdy/mongoerr"
	"github.com/sturdy-go/sturdy/readpref"
)

// Selector picks the servers suitable for an operation from candidates,
// which are servers of d (some may have been left out because they are
// deprioritized). The latency window is applied afterwards by the caller.
type Selector interface {
	Select(d Description, candidates []ServerDescription) ([]ServerDescription, error)
}

// WriteSelector selects servers that accept writes.
func WriteSelector() Selector { return writeSelector{} }

type writeSelector struct{}

func (writeSelector) String() string { return "writable server" }

// acceptsWrites is writeSelector's test for one server of a topology of
// kind tk.
func acceptsWrites(tk TopologyKind, sd ServerDescription) bool {
	switch tk {
	case Single:
		return sd.Available()
	case Sharded:
		return sd.Kind == Mongos
	case LoadBalanced:
		return sd.Kind == LoadBalancer
	case ReplicaSetWithPrimary:
		return sd.Kind == RSPrimary
	}
	return false
}

func (writeSelector) Select(d Description, candidates []ServerDescription) ([]ServerDescription, error) {
	switch d.Kind {
	case Single, Sharded, ReplicaSetWithPrimary, LoadBalanced:
		return filter(candidates, func(sd ServerDescription) bool { return acceptsWrites(d.Kind, sd) }), nil
	}
	return nil, nil
}

// ReadPrefSelector selects servers for a read with the given preference.
// heartbeat is the heartbeat interval, used to validate and compute
// staleness; it is taken literally (the topology's own is always set).
func ReadPrefSelector(rp readpref.ReadPref, heartbeat time.Duration) Selector {
	return readPrefSelector{rp: rp, heartbeat: heartbeat}
}

type readPrefSelector struct {
	rp        readpref.ReadPref
	heartbeat time.Duration
}

func (s readPrefSelector) String() string {
	str := "server for read preference " + s.rp.Mode.String()
	if len(s.rp.TagSets) > 0 {
		str += fmt.Sprintf(" with tag sets %v", s.rp.TagSets)
	}
	if s.rp.MaxStaleness > 0 {
		str += " and maxStaleness " + s.rp.MaxStaleness.String()
	}
	return str
}

func (s readPrefSelector) Select(d Description, candidates []ServerDescription) ([]ServerDescription, error) {
	if err := s.rp.Validate(); err != nil {
		return nil, &mongoerr.ReadPrefError{Reason: err.Error()}
	}
	switch d.Kind {
	case Single:
		return filter(candidates, ServerDescription.Available), nil
	case Sharded:
		return ofKind(candidates, Mongos), nil
	case LoadBalanced:
		// The load balancer is always selected; the read preference
		// goes to the mongos behind it as $readPreference.
		return ofKind(candidates, LoadBalancer), nil
	case ReplicaSetNoPrimary, ReplicaSetWithPrimary:
	default:
		return nil, nil
	}
	if s.rp.MaxStaleness > 0 {
		if least := readpref.MinMaxStaleness(s.heartbeat); s.rp.MaxStaleness < least {
			return nil, &mongoerr.ReadPrefError{Reason: fmt.Sprintf("maxStaleness %v is below the minimum %v", s.rp.MaxStaleness, least)}
		}
	}
	primaries := ofKind(candidates, RSPrimary)
	switch s.rp.Mode {
	case readpref.Primary:
		return primaries, nil
	case readpref.PrimaryPreferred:
		if len(primaries) > 0 {
			return primaries, nil
		}
		return s.eligible(d, ofKind(candidates, RSSecondary)), nil
	case readpref.Secondary:
		return s.eligible(d, ofKind(candidates, RSSecondary)), nil
	case readpref.SecondaryPreferred:
		if sec := s.eligible(d, ofKind(candidates, RSSecondary)); len(sec) > 0 {
			return sec, nil
		}
		return primaries, nil
	case readpref.Nearest:
		return s.eligible(d, filter(candidates, func(sd ServerDescription) bool {
			return sd.Kind == RSPrimary || sd.Kind == RSSecondary
		})), nil
	}
	return nil, nil
}

// eligible applies maxStaleness and then the tag sets.
func (s readPrefSelector) eligible(d Description, servers []ServerDescription) []ServerDescription {
	if s.rp.MaxStaleness > 0 {
		servers = filter(servers, func(sd ServerDescription) bool {
			return staleness(d, sd, s.heartbeat) <= s.rp.MaxStaleness
		})
	}
	if len(s.rp.TagSets) == 0 {
		return servers
	}
	for _, ts := range s.rp.TagSets {
		if m := filter(servers, func(sd ServerDescription) bool { return tagsMatch(ts, sd.Tags) }); len(m) > 0 {
			return m
		}
	}
	return nil
}

func tagsMatch(want, have map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

// staleness estimates how far a secondary lags, per the max-staleness spec.
func staleness(d Description, sd ServerDescription, heartbeat time.Duration) time.Duration {
	if sd.Kind != RSSecondary {
		return 0
	}
	if d.Kind == ReplicaSetWithPrimary {
		for _, p := range d.Servers {
			if p.Kind == RSPrimary {
				return sd.LastUpdateTime.Sub(sd.LastWriteDate) - p.LastUpdateTime.Sub(p.LastWriteDate) + heartbeat
			}
		}
	}
	var maxWrite time.Time
	for _, x := range d.Servers {
		if x.Kind == RSSecondary && x.LastWriteDate.After(maxWrite) {
			maxWrite = x.LastWriteDate
		}
	}
	return maxWrite.Sub(sd.LastWriteDate) + heartbeat
}

func filter(servers []ServerDescription, keep func(ServerDescription) bool) []ServerDescription {
	var out []ServerDescription
	for _, s := range servers {
		if keep(s) {
			out = append(out, s)
		}
	}
	return out
}

func ofKind(servers []ServerDescription, k ServerKind) []ServerDescription {
	return filter(servers, func(s ServerDescription) bool { return s.Kind == k })
}

// suitable runs sel over d's servers minus the deprioritized ones; when
// that leaves nothing it runs it again over all servers, so deprioritized
// servers are used only when no other suitable server remains.
func suitable(d Description, sel Selector, deprioritized []string) ([]ServerDescription, error) {
	if len(deprioritized) > 0 {
		rest := filter(d.Servers, func(s ServerDescription) bool {
			return !slices.Contains(deprioritized, s.Addr)
		})
		if len(rest) < len(d.Servers) {
			out, err := sel.Select(d, rest)
			if err != nil || len(out) > 0 {
				return out, err
			}
		}
	}
	return sel.Select(d, d.Servers)
}

// inLatencyWindow keeps the servers whose RTT is within threshold of the
// fastest one.
func inLatencyWindow(servers []ServerDescription, threshold time.Duration) []ServerDescription {
	if len(servers) <= 1 {
		return servers
	}
	fastest := servers[0].RTT
	for _, s := range servers[1:] {
		fastest = min(fastest, s.RTT)
	}
	return filter(servers, func(s ServerDescription) bool { return s.RTT <= fastest+threshold })
}

// pickTwoChoices picks two distinct servers at random and returns the one
// with fewer operations in progress ("power of two choices").
func pickTwoChoices(window []ServerDescription, opCount func(addr string) int64, r *rand.Rand) ServerDescription {
	if len(window) == 1 {
		return window[0]
	}
	i := r.IntN(len(window))
	j := r.IntN(len(window) - 1)
	if j >= i {
		j++
	}
	a, b := window[i], window[j]
	if opCount(b.Addr) < opCount(a.Addr) {
		return b
	}
	return a
}

// selectorName describes what sel wants, for errors.
func selectorName(sel Selector) string {
	if s, ok := sel.(fmt.Stringer); ok {
		return s.String()
	}
	return "suitable server"
}
