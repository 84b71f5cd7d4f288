package mongosim

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// defaultTTLMonitorInterval is mongod's ttlMonitorSleepSecs default.
const defaultTTLMonitorInterval = 60 * time.Second

// startTTLMonitor starts the goroutine that, like mongod's TTL monitor,
// deletes expired documents every interval; Close stops it.
func (c *Cluster) startTTLMonitor(interval time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	c.ttlStop = func() { cancel(); <-done }
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				c.data.expireTTL(ctx)
			}
		}
	}()
}

// ExpireTTL runs one pass of the TTL monitor now, on the deployment's
// clock (Options.Now), and returns how many documents it deleted. Tests
// that advance the clock call it instead of waiting for the monitor.
func (c *Cluster) ExpireTTL(ctx context.Context) int {
	return c.data.expireTTL(ctx)
}

// expireTTL deletes, in every collection with TTL indexes, the documents
// whose indexed date (the earliest, for an array) is at least
// expireAfterSeconds old. Each removal is an ordinary delete, so change
// streams see it as they see mongod's TTL deletes.
func (s *storage) expireTTL(ctx context.Context) int {
	now := s.now()
	deleted := 0
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
