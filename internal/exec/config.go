package exec

import (
	"github.com/sturdy-go/sturdy/internal/connstring"
	"github.com/sturdy-go/sturdy/internal/session"
	"github.com/sturdy-go/sturdy/internal/topology"
)

// New is the executor a client's settings ask for, running operations on
// topo with sessions from sessions, with the retry defaults of
// connstring.Defaults applied.
func New(topo *topology.Topology, sessions *session.Pool, s connstring.Settings) *Executor {
	return &Executor{
		Topology:                   topo,
		Sessions:                   sessions,
		Monitor:                    s.Monitor,
		Logger:                     s.Logger,
		RetryWrites:                connstring.OrDefault(s.RetryWrites, connstring.Defaults.RetryWrites),
		RetryReads:                 connstring.OrDefault(s.RetryReads, connstring.Defaults.RetryReads),
		MaxAdaptiveRetries:         connstring.OrDefault(s.MaxAdaptiveRetries, connstring.Defaults.MaxAdaptiveRetries),
		BackoffBase:                connstring.Defaults.BackoffBase,
		DisableRetryTokens:         !connstring.OrDefault(s.AdaptiveRetries, connstring.Defaults.AdaptiveRetries),
		DisableOverloadRetargeting: !connstring.OrDefault(s.EnableOverloadRetargeting, connstring.Defaults.EnableOverloadRetargeting),
	}
}
