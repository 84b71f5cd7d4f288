package readpref

import (
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
