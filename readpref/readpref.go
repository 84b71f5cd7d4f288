package readpref

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Mode says which members of a replica set may serve a read.
type Mode int

// The read preference modes. The zero value is Primary.
const (
	Primary Mode = iota
	PrimaryPreferred
	Secondary
	SecondaryPreferred
	Nearest
)

var modeNames = [...]string{"primary", "primaryPreferred", "secondary", "secondaryPreferred", "nearest"}

// String returns the mode as the server and connection strings spell it,
// e.g. "secondaryPreferred".
func (m Mode) String() string {
	if m.Valid() {
		return modeNames[m]
	}
	return "ReadMode(" + strconv.Itoa(int(m)) + ")"
}

// Valid reports whether m is one of the five modes.
func (m Mode) Valid() bool { return m >= Primary && m <= Nearest }

// ParseMode parses a mode name such as "primaryPreferred", in any ASCII
// case. Unicode case folding (strings.EqualFold) is not used: it would
// accept names no server or driver spells, such as "ſecondary".
func ParseMode(s string) (Mode, bool) {
	for i, n := range modeNames {
		if asciiEqualFold(n, s) {
			return Mode(i), true
		}
	}
	return Primary, false
}

func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if asciiLower(a[i]) != asciiLower(b[i]) {
			return false
		}
	}
	return true
}

func asciiLower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// SmallestMaxStaleness and IdleWritePeriod make the least maxStaleness a
// read preference may ask for (MinMaxStaleness).
const (
	SmallestMaxStaleness = 90 * time.Second
	IdleWritePeriod      = 10 * time.Second
)

// MinMaxStaleness is the least maxStaleness the Server Selection spec
// accepts with the given heartbeat interval: 90 s, or the heartbeat
// interval plus the primary's 10 s idle write period if that is more.
func MinMaxStaleness(heartbeat time.Duration) time.Duration {
	return max(SmallestMaxStaleness, heartbeat+IdleWritePeriod)
}

// TagSet is one set of server tags a read may be routed by; an empty set
// matches every server.
type TagSet map[string]string

// ReadPref routes reads to replica set members. The zero value reads from
// the primary.
type ReadPref struct {
	// Mode selects the eligible members. Default Primary.
	Mode Mode
	// TagSets are tried in order; the first that matches an eligible
	// member wins. Not allowed with Primary. Default nil: any member.
	TagSets []TagSet
	// MaxStaleness excludes secondaries lagging further behind the
	// primary; at least MinMaxStaleness. Not allowed with Primary.
	// Default 0: no limit.
	MaxStaleness time.Duration
}

// Validate checks the rules that do not depend on the deployment: a known
// mode, no negative maxStaleness, and neither tag sets (other than empty
// ones) nor maxStaleness with Primary. The error says which rule; callers
// add their context. The minimum maxStaleness depends on the heartbeat
// interval: see MinMaxStaleness.
func (rp ReadPref) Validate() error {
	if !rp.Mode.Valid() {
		return errors.New("unknown mode " + rp.Mode.String())
	}
	if rp.MaxStaleness < 0 {
		return fmt.Errorf("negative maxStaleness %v", rp.MaxStaleness)
	}
	if rp.Mode == Primary {
		if rp.MaxStaleness > 0 {
			return errors.New("maxStaleness cannot be used with mode primary")
		}
		for _, ts := range rp.TagSets {
			if len(ts) > 0 {
				return errors.New("tag sets cannot be used with mode primary")
			}
		}
	}
	return nil
}
