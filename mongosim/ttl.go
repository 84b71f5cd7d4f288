package mongosim

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// defaultTTLMonitorInterval is mongod's ttlMonitorSleepSecs default.
const defaultTTLMonitorInterval = 60 * time.Second

// ttlParams are the TTL monitor's server parameters. wake tells the
// monitor the interval changed, so a shorter one applies at once.
type ttlParams struct {
	interval atomic.Int64 // ttlMonitorSleepSecs, as a time.Duration
	disabled atomic.Bool  // ttlMonitorEnabled false
	wake     chan struct{}
}

// setInterval changes the pass interval and returns the previous one.
func (p *ttlParams) setInterval(d time.Duration) time.Duration {
	was := time.Duration(p.interval.Swap(int64(d)))
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return was
}

// startTTLMonitor starts the goroutine that, like mongod's TTL monitor,
// deletes expired documents every interval (while enabled); Close stops
// it.
func (c *Cluster) startTTLMonitor(interval time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	c.ttlStop = func() { cancel(); <-done }
	c.ttl.interval.Store(int64(interval))
	c.ttl.wake = make(chan struct{}, 1)
	go func() {
		defer close(done)
		last := time.Now()
		t := time.NewTimer(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-c.ttl.wake:
				// The next pass is due interval after the last one.
				t.Reset(max(time.Until(last.Add(time.Duration(c.ttl.interval.Load()))), 0))
			case <-t.C:
				if !c.ttl.disabled.Load() {
					c.data.expireTTL(ctx)
				}
				last = time.Now()
				t.Reset(time.Duration(c.ttl.interval.Load()))
			}
		}
	}()
}

// ExpireTTL runs one pass of the TTL monitor now, on the deployment's
// clock (Options.Now), on every shard, and returns how many documents it
// deleted. Tests that advance the clock call it instead of waiting for the
// monitor.
func (c *Cluster) ExpireTTL(ctx context.Context) int {
	n := 0
	for _, shard := range c.Shards() {
		n += shard.data.expireTTL(ctx)
	}
	return n
}

// expireTTL deletes, in every collection with TTL indexes, the documents
// whose indexed date (the earliest, for an array) is at least
// expireAfterSeconds old. Each removal is an ordinary delete, so change
// streams see it as they see mongod's TTL deletes.
func (s *storage) expireTTL(ctx context.Context) int {
	now := s.now()
	deleted := 0
	s.ttlPasses.Add(1)
	defer func() { s.ttlDeleted.Add(int64(deleted)) }()
	for _, db := range s.databaseNames() {
		for _, name := range s.collectionNames(db) {
			if ctx.Err() != nil {
				return deleted
			}
			_ = s.write(ctx, db, name, false, func(c *collection) error {
				if c == nil {
					return nil
				}
				var ttls []*index
				for _, ix := range c.indexes {
					if ix.ttl {
						ttls = append(ttls, ix)
					}
				}
				if ix := c.collectionTTL(); ix != nil {
					ttls = append(ttls, ix)
				}
				if len(ttls) == 0 {
					return nil
				}
				var expired []*record
				c.each(func(r *record) bool {
					for _, ix := range ttls {
						if ttlExpired(r.doc, ix, now) {
							expired = append(expired, r)
							break
						}
					}
					return true
				})
				for _, r := range expired {
					if err := c.remove(r); err != nil {
						return err
					}
					deleted++
				}
				return nil
			})
		}
	}
	return deleted
}

// ttlMetrics is serverStatus metrics.ttl, summed over the shards.
func (c *Cluster) ttlMetrics() bson.D {
	var passes, deleted int64
	for _, shard := range c.Shards() {
		passes += shard.data.ttlPasses.Load()
		deleted += shard.data.ttlDeleted.Load()
	}
	return bson.D{{Key: "ttl", Value: bson.D{{Key: "deletedDocuments", Value: deleted}, {Key: "passes", Value: passes}}}}
}

// ttlArg validates an expireAfterSeconds value as mongod does: a number,
// not NaN, in [0, 2147483647].
func ttlArg(v any) (int64, error) {
	if !value.IsNumber(v) {
		return 0, cmderr.New(cmderr.TypeMismatch, "TTL index 'expireAfterSeconds' option must be numeric, but received a type of '%s'", value.TypeName(v))
	}
	f, _ := value.ToFloat(v)
	if f != f {
		return 0, cmderr.New(cmderr.InvalidOptions, "TTL index 'expireAfterSeconds' option must not be NaN")
	}
	if f < 0 {
		return 0, cmderr.New(cmderr.InvalidOptions, "TTL index 'expireAfterSeconds' option cannot be less than 0")
	}
	if f > 2147483647 {
		return 0, cmderr.New(cmderr.InvalidOptions, "TTL index 'expireAfterSeconds' option must be within an acceptable range, try a lower number")
	}
	return int64(f), nil
}

// errMessage is err's message without its code.
func errMessage(err error) string {
	var ce *cmderr.Error
	if errors.As(err, &ce) {
		return ce.Message
	}
	return err.Error()
}

// checkTTLSpecs refuses, before any index is built, a TTL index on a
// capped collection and a TTL that differs from the existing index of the
// same name (mongod's IndexOptionsConflict: collMod changes a TTL).
func (c *collection) checkTTLSpecs(specs []*index) error {
	for _, ix := range specs {
		if ix.ttl && c.capped {
			return cmderr.New(cmderr.CannotCreateIndex, "Cannot create TTL index on a capped collection")
		}
		for _, old := range c.indexes {
			if old.name == ix.name && sameKeyPattern(old.key, ix.key) && (old.ttl != ix.ttl || old.ttlSecs != ix.ttlSecs) {
				return cmderr.New(cmderr.IndexOptionsConflict,
					"An equivalent index already exists with the same name but different options. Requested index: %s, existing index: %s",
					shellString(ix.spec), shellString(old.spec))
			}
		}
	}
	return nil
}

// ttlExpired reports whether doc's date under ix is older than ix's TTL.
func ttlExpired(doc bson.D, ix *index, now time.Time) bool {
	var earliest *bson.DateTime
	for _, v := range pathValues(doc, splitPath(ix.fields[0]), nil, true) {
		if d, ok := v.(bson.DateTime); ok && (earliest == nil || d < *earliest) {
			earliest = &d
		}
	}
	if earliest == nil {
		return false // documents without a date never expire
	}
	cutoff := now.Add(-time.Duration(ix.ttlSecs) * time.Second)
	return !earliest.Time().After(cutoff)
}

// collectionTTL is the expiry of a time series or clustered collection
// created with expireAfterSeconds, as an index on the time field (time
// series) or _id (clustered): nil when it has none.
func (c *collection) collectionTTL() *index {
	v, ok := value.Get(c.options, "expireAfterSeconds")
	if !ok || c.view != nil {
		return nil
	}
	n, _ := int64Arg(v)
	field := "_id"
	if c.timeseries {
		field = c.timeField
	}
	return &index{fields: []string{field}, ttl: true, ttlSecs: n}
}
