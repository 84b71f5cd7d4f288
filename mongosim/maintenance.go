package mongosim

import (
	"context"
	"sync"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/query"
)

// Maintenance commands in mongod 8.0's reply shapes: fsync (with lock, and
// fsyncUnlock), validate and profile. mongosim keeps everything in memory,
// so fsync has nothing to flush and validate finds nothing wrong; what they
// change or report is real: fsync's lock blocks the member's writes until
// as many fsyncUnlocks, validate counts the records and index keys, and
// profile sets what the profiler (profiler.go) records.

func init() {
	register(
		&command{name: "fsync", run: fsyncCmd},
		&command{name: "fsyncUnlock", run: fsyncUnlockCmd},
		&command{name: "validate", run: validateCmd},
		&command{name: "profile", run: profileCmd},
	)
}

const fsyncSeeAlso = "http://dochub.mongodb.org/core/fsynccommand"

// fsyncGate is a member's fsync lock: while count > 0 its writes wait for
// open to be closed.
type fsyncGate struct {
	mu    sync.Mutex
	count int64
	open  chan struct{} // closed when count returns to 0
}

func (g *fsyncGate) lock() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.count == 0 {
		g.open = make(chan struct{})
	}
	g.count++
	return g.count
}

// unlock releases one lock; false when none is held.
func (g *fsyncGate) unlock() (int64, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.count == 0 {
		return 0, false
	}
	g.count--
	if g.count == 0 {
		close(g.open)
	}
	return g.count, true
}

// wait returns once the member is not fsync-locked, or with ctx's end
// (maxTimeMS, the connection closing) as MaxTimeMSExpired, killOp as
// Interrupted.
func (g *fsyncGate) wait(ctx context.Context) error {
	g.mu.Lock()
	open := g.open
	locked := g.count > 0
	g.mu.Unlock()
	if !locked {
		return nil
	}
	select {
	case <-open:
		return nil
	case <-ctx.Done():
		return errWaitEnded(ctx, errMaxTime())
	}
}

func fsyncCmd(r *request) (bson.D, error) {
	if err := adminOnly(r); err != nil {
		return nil, err
	}
	if v, ok := r.get("lock"); !ok || !truthy(v) {
		return bson.D{{Key: "numFiles", Value: int32(1)}, {Key: "ok", Value: 1.0}}, nil
	}
	n := r.member.fsync.lock()
	r.cluster.logf("mongosim %s: locked against writes (fsync lock count %d); fsyncUnlock to unlock", r.member.addr, n)
	return bson.D{
		{Key: "info", Value: "now locked against writes, use db.fsyncUnlock() to unlock"},
		{Key: "lockCount", Value: n},
		{Key: "seeAlso", Value: fsyncSeeAlso},
		{Key: "ok", Value: 1.0},
	}, nil
}

func fsyncUnlockCmd(r *request) (bson.D, error) {
	if err := adminOnly(r); err != nil {
		return nil, err
	}
	n, ok := r.member.fsync.unlock()
	if !ok {
		return nil, cmderr.New(cmderr.IllegalOperation, "fsyncUnlock called when not locked")
	}
	return bson.D{{Key: "info", Value: "fsyncUnlock completed"}, {Key: "lockCount", Value: n}, {Key: "ok", Value: 1.0}}, nil
}

// validateCmd checks a collection: every record and index key is in
// memory and consistent by construction, so the result is valid; nrecords
// and keysPerIndex are counted.
func validateCmd(r *request) (bson.D, error) {
	coll, err := commandArgs(r, "full", "background", "repair", "metadata", "checkBSONConformance",
		"enforceFastCount", "fixMultikey", "collHash", "hashPrefixes", "revealHashedIds")
	if err != nil {
		return nil, err
	}
	if v, ok := r.get("repair"); ok && truthy(v) {
		return nil, cmderr.Unsupported("validate with repair")
	}
	ns := r.db + "." + coll
	var reply bson.D
	err = r.data().read(r.db, coll, func(c *collection) error {
		if c == nil {
			return cmderr.New(cmderr.NamespaceNotFound, "Collection '%s' does not exist to validate.", ns)
		}
		if c.view != nil {
			return errNotCollection(r.db, coll)
		}
		var records int64
		keys := make([]int64, len(c.indexes))
		c.each(func(rec *record) bool {
			records++
			for i, ix := range c.indexes {
				if ks, err := ix.keysOf(rec.doc); err == nil {
					keys[i] += int64(len(ks))
				}
			}
			return true
		})
		perIndex, details := bson.D{}, bson.D{}
		for i, ix := range c.indexes {
			perIndex = append(perIndex, bson.E{Key: ix.name, Value: number(keys[i])})
			details = append(details, bson.E{Key: ix.name, Value: bson.D{{Key: "valid", Value: true}}})
		}
		reply = bson.D{
			{Key: "ns", Value: ns},
			{Key: "uuid", Value: c.uuid},
			{Key: "nInvalidDocuments", Value: int32(0)},
			{Key: "nNonCompliantDocuments", Value: int32(0)},
			{Key: "nrecords", Value: number(records)},
			{Key: "nIndexes", Value: int32(len(c.indexes))},
			{Key: "keysPerIndex", Value: perIndex},
			{Key: "indexDetails", Value: details},
			{Key: "valid", Value: true},
			{Key: "repaired", Value: false},
			{Key: "warnings", Value: bson.A{}},
			{Key: "errors", Value: bson.A{}},
			{Key: "extraIndexEntries", Value: bson.A{}},
			{Key: "missingIndexEntries", Value: bson.A{}},
			{Key: "corruptRecords", Value: bson.A{}},
			{Key: "ok", Value: 1.0},
		}
		return nil
	})
	return reply, err
}

// number is mongod's appendNumber: an int32 when it fits, else an int64.
func number(n int64) any {
	if n == int64(int32(n)) {
		return int32(n)
	}
	return n
}

// profileState is the database profiler's settings: a level per database,
// slowms and sampleRate for the whole server, as on mongod. on is set while
// any database profiles, so other commands pay one atomic load.
type profileState struct {
	mu         sync.Mutex
	levels     map[string]int32
	slowMS     int32
	sampleRate float64
	filter     bson.D
	match      *query.Filter // filter, compiled
	on         atomic.Bool
}

func profileCmd(r *request) (bson.D, error) {
	if err := checkFields(r, "slowms", "sampleRate", "filter"); err != nil {
		return nil, err
	}
	v, _ := r.get("profile")
	level, ok := int64Arg(v)
	if !ok || level < -1 || level > 2 {
		return nil, cmderr.New(cmderr.BadValue, "Invalid profiling level %v", v)
	}
	p := &r.cluster.profile
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.levels == nil {
		p.levels, p.slowMS, p.sampleRate = map[string]int32{}, 100, 1.0
	}
	reply := bson.D{{Key: "was", Value: p.levels[r.db]}, {Key: "slowms", Value: p.slowMS}, {Key: "sampleRate", Value: p.sampleRate}}
	if p.filter != nil {
		reply = append(reply, bson.E{Key: "filter", Value: p.filter})
	}
	if s, ok := r.get("slowms"); ok {
		n, isInt := int64Arg(s)
		if !isInt {
			return nil, typeErr("profile.slowms", "int", s)
		}
		p.slowMS = int32(n)
	}
	if s, ok := r.get("sampleRate"); ok {
		f, isNum := asFloat(s)
		if !isNum || f < 0 || f > 1 {
			return nil, cmderr.New(cmderr.BadValue, "'sampleRate' must be between 0.0 and 1.0 inclusive")
		}
		p.sampleRate = f
	}
	if f, ok := r.get("filter"); ok {
		switch d := f.(type) {
		case bson.D:
			m, err := query.CompileFilter(d)
			if err != nil {
				return nil, err
			}
			p.filter, p.match = d, m
		case string:
			if d != "unset" {
				return nil, cmderr.New(cmderr.BadValue, "'filter' must be an object or the string 'unset'")
			}
			p.filter, p.match = nil, nil
		default:
			return nil, cmderr.New(cmderr.BadValue, "'filter' must be an object or the string 'unset'")
		}
	}
	if level >= 0 {
		p.levels[r.db] = int32(level)
		on := false
		for _, l := range p.levels {
			on = on || l > 0
		}
		p.on.Store(on)
	}
	return append(reply, bson.E{Key: "ok", Value: 1.0}), nil
}
