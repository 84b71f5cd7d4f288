package mongosim

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/query"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// Read and write concern, checked as mongod 8.0 checks them. Replication is
// instant (one shared store), so every satisfiable write concern is
// satisfied at once and every member has applied every write: w up to the
// number of members, "majority" and j succeed without waiting (wtimeout
// never expires), afterClusterTime never waits.

// maxWriteConcernW is mongod's limit on a numeric w (the most voting
// members a replica set can have).
const maxWriteConcernW = 50

// writeConcern is a parsed writeConcern argument.
type writeConcern struct {
	given    bool
	w        any // int64 or string; nil when absent
	j        *bool
	fsync    bool
	wtimeout int64
}

// parseWriteConcern reads the command's writeConcern and refuses what mongod
// refuses before running the command.
func parseWriteConcern(r *request) (writeConcern, error) {
	var wc writeConcern
	v, ok := r.get("writeConcern")
	if !ok {
		return wc, nil
	}
	d, ok := v.(bson.D)
	if !ok {
		return wc, typeErr("writeConcern", "object", v)
	}
	wc.given = true
	for _, e := range d {
		switch e.Key {
		case "w":
			// As mongod's deserializeWriteConcernW: numbers are truncated
			// to integers, null means the default.
			switch w := e.Value.(type) {
			case string:
				wc.w = w
			case bson.D:
				return wc, cmderr.Unsupported("writeConcern w as a tag set")
			case nil, bson.Null, bson.Undefined:
			default:
				f, ok := asFloat(w)
				if !ok {
					return wc, cmderr.New(cmderr.FailedToParse, "w has to be a number, string, or object; found: %s", bsonTypeName(w))
				}
				if math.IsNaN(f) {
					return wc, cmderr.New(cmderr.FailedToParse, "w cannot be NaN")
				}
				n := int64(f)
				if n < 0 || n > maxWriteConcernW {
					return wc, cmderr.New(cmderr.FailedToParse, "w has to be a non-negative number and not greater than %d; found: %d", maxWriteConcernW, n)
				}
				wc.w = n
			}
		case "j":
			b := asBool(e.Value)
			wc.j = &b
		case "fsync":
			wc.fsync = asBool(e.Value)
		case "wtimeout":
			// Non-numbers count as 0, as in mongod.
			if f, ok := asFloat(e.Value); ok {
				if f > math.MaxInt32 {
					return wc, cmderr.New(cmderr.FailedToParse, "wtimeout must be a 32-bit integer")
				}
				wc.wtimeout = int64(f)
			}
		case "getLastError", "provenance", "wOpTime", "wElectionId":
			// Accepted and ignored by mongod as well.
		default:
			return wc, cmderr.New(40415, "BSON field 'writeConcern.%s' is an unknown field.", e.Key)
		}
	}
	if wc.fsync && wc.j != nil && *wc.j {
		return wc, cmderr.New(cmderr.FailedToParse, "fsync and j options cannot be used together")
	}
	if r.cluster.setName == "" {
		// A standalone refuses what only a replica set could satisfy.
		switch w := wc.w.(type) {
		case int64:
			if w > 1 {
				return wc, cmderr.New(cmderr.BadValue, "cannot use 'w' > 1 when a host is not replicated")
			}
		case string:
			if w != "majority" {
				return wc, cmderr.New(cmderr.BadValue, "cannot use non-majority 'w' mode %s when a host is not a member of a replica set", w)
			}
		}
	}
	return wc, nil
}

// satisfy is the wait for replication after the write: on a replica set,
// the writeConcernError mongod adds when the concern cannot be met, or nil.
func (wc writeConcern) satisfy(c *Cluster) bson.D {
	if !wc.given || c.setName == "" {
		return nil
	}
	var code int32
	var msg string
	switch w := wc.w.(type) {
	case int64:
		if int(w) > len(c.Members()) {
			code, msg = cmderr.UnsatisfiableWriteConcern, "Not enough data-bearing nodes"
		}
	case string:
		if w != "majority" {
			code, msg = cmderr.UnknownReplWriteConcern, fmt.Sprintf("No write concern mode named '%s' found in replica set configuration", w)
		}
	}
	if code == 0 {
		return nil
	}
	return bson.D{
		{Key: "code", Value: code},
		{Key: "codeName", Value: cmderr.Name(code)},
		{Key: "errmsg", Value: msg},
		{Key: "errInfo", Value: bson.D{{Key: "writeConcern", Value: wc.doc()}}},
	}
}

// doc renders the concern as mongod reports it in errInfo.
func (wc writeConcern) doc() bson.D {
	var d bson.D
	switch w := wc.w.(type) {
	case int64:
		d = append(d, bson.E{Key: "w", Value: int32(w)})
	case string:
		d = append(d, bson.E{Key: "w", Value: w})
	default:
		d = append(d, bson.E{Key: "w", Value: int32(1)})
	}
	if wc.j != nil {
		d = append(d, bson.E{Key: "j", Value: *wc.j})
	}
	if wc.fsync {
		d = append(d, bson.E{Key: "fsync", Value: true})
	}
	return append(d,
		bson.E{Key: "wtimeout", Value: int32(wc.wtimeout)},
		bson.E{Key: "provenance", Value: "clientSupplied"})
}

// takesWriteConcern reports whether the command accepts a writeConcern:
// the writes (DDL included) and aggregate with $out or $merge.
func takesWriteConcern(cmd *command, r *request) bool {
	return cmd.write || cmd.name == "aggregate" && hasWriteStage(r) || cmd.name == "mapReduce" && mapReduceWrites(r)
}

// mapReduceWrites reports a mapReduce whose output goes to a collection.
func mapReduceWrites(r *request) bool {
	out, ok := r.get("out")
	if d, isDoc := out.(bson.D); isDoc && len(d) > 0 && d[0].Key == "inline" {
		return false
	}
	return ok
}

// readConcern is a parsed readConcern argument.
type readConcern struct {
	level            string // "" when absent
	afterClusterTime bson.Timestamp
	atClusterTime    bson.Timestamp
}

var readConcernLevels = []string{"local", "majority", "linearizable", "available", "snapshot"}

// snapshotCommands may read with level snapshot outside a transaction
// (mongod 5.0+).
var snapshotCommands = []string{"find", "aggregate", "distinct", "getMore"}

// parseReadConcern validates the command's readConcern as mongod does.
func parseReadConcern(r *request, cmd *command) (readConcern, error) {
	v, ok := r.get("readConcern")
	if !ok {
		return readConcern{}, nil
	}
	d, ok := v.(bson.D)
	if !ok {
		return readConcern{}, typeErr("readConcern", "object", v)
	}
	a, err := readConcernFields(d)
	if err != nil {
		return a.rc, err
	}
	if err := a.checkFor(r, cmd); err != nil {
		return a.rc, err
	}
	return a.atTimes(r)
}

// readConcernArg is a readConcern document's fields, read before the
// checks that depend on the command and the node.
type readConcernArg struct {
	rc              readConcern
	hasAfter, hasAt bool // afterClusterTime, atClusterTime given
}

// level is the read concern level in effect: local when none is given.
func (a readConcernArg) level() string {
	if a.rc.level == "" {
		return "local"
	}
	return a.rc.level
}

func readConcernFields(d bson.D) (readConcernArg, error) {
	var a readConcernArg
	for _, e := range d {
		switch e.Key {
		case "level":
			s, ok := e.Value.(string)
			if !ok {
				return a, typeErr("readConcern.level", "string", e.Value)
			}
			if !slices.Contains(readConcernLevels, s) {
				return a, cmderr.New(cmderr.BadValue, "Enumeration value '%s' for field 'readConcern.level' is not a valid value.", s)
			}
			a.rc.level = s
		case "afterClusterTime", "atClusterTime":
			ts, ok := e.Value.(bson.Timestamp)
			if !ok {
				return a, typeErr("readConcern."+e.Key, "timestamp", e.Value)
			}
			if ts.IsZero() {
				return a, cmderr.New(cmderr.InvalidOptions, "%s cannot be a null timestamp", e.Key)
			}
			if e.Key == "afterClusterTime" {
				a.rc.afterClusterTime, a.hasAfter = ts, true
			} else {
				a.rc.atClusterTime, a.hasAt = ts, true
			}
		case "afterOpTime":
			return a, cmderr.Unsupported("readConcern afterOpTime")
		case "provenance", "$_allowTransactionTableSnapshot", "$_waitLastStableRecoveryTimestamp":
			// Internal fields mongod accepts; nothing to do here.
		default:
			return a, cmderr.New(40415, "BSON field 'readConcern.%s' is an unknown field.", e.Key)
		}
	}
	return a, nil
}

// checkFor refuses combinations of fields, and levels the command or the
// node cannot serve.
func (a readConcernArg) checkFor(r *request, cmd *command) error {
	level := a.level()
	switch {
	case a.hasAfter && a.hasAt:
		return cmderr.New(cmderr.InvalidOptions, "Specifying a timestamp for readConcern snapshot in a causally consistent session is not allowed. See https://www.mongodb.com/docs/manual/core/read-isolation-consistency-recency/#causal-consistency")
	case a.hasAt && level != "snapshot":
		return cmderr.New(cmderr.InvalidOptions, "atClusterTime field can be set only if level is snapshot")
	case a.hasAfter && level != "local" && level != "majority" && level != "snapshot":
		return cmderr.New(cmderr.InvalidOptions, "afterClusterTime field can be set only if level is local, majority, or snapshot")
	}
	if r.cluster.setName == "" && (level == "linearizable" || level == "snapshot" || a.hasAfter || a.hasAt) {
		return cmderr.New(cmderr.NotAReplicaSet, "node needs to be a replica set member to use read concern")
	}
	if a.rc.level != "" && a.rc.level != "local" && cmd.write {
		return cmderr.New(cmderr.InvalidOptions, "Command %s does not support { readConcern: { level: \"%s\" } }", cmd.name, a.rc.level)
	}
	if level == "snapshot" && !slices.Contains(snapshotCommands, cmd.name) {
		return cmderr.New(cmderr.InvalidOptions, "Command %s does not support { readConcern: { level: \"snapshot\" } }", cmd.name)
	}
	if level == "linearizable" && !r.member.IsPrimary() {
		return cmderr.New(cmderr.NotWritablePrimary, "cannot satisfy linearizable read concern on non-primary node")
	}
	return nil
}

// atTimes checks the given cluster times against the node's clock and
// pins a snapshot read to a point in time.
func (a readConcernArg) atTimes(r *request) (readConcern, error) {
	rc := a.rc
	now := r.cluster.data.clusterClock.current()
	if a.hasAfter && now.Before(rc.afterClusterTime) {
		return rc, cmderr.New(cmderr.InvalidOptions, "readConcern afterClusterTime value must not be greater than the current clusterTime. Requested clusterTime: %s; current clusterTime: %s", tsString(rc.afterClusterTime), tsString(now))
	}
	if a.hasAt && now.Before(rc.atClusterTime) {
		return rc, cmderr.New(cmderr.InvalidOptions, "readConcern atClusterTime value must not be greater than the current clusterTime. Requested clusterTime: %s; current clusterTime: %s", tsString(rc.atClusterTime), tsString(now))
	}
	if a.level() == "snapshot" && !a.hasAt {
		// A snapshot read without atClusterTime reads at the latest
		// point (afterClusterTime, if given, is not later: checked above).
		rc.atClusterTime = now
	}
	return rc, nil
}

func tsString(ts bson.Timestamp) string { return fmt.Sprintf("Timestamp(%d, %d)", ts.T, ts.I) }

// snapshotAt returns the documents of db.coll matching f as they were at
// cluster time at: the current documents with every logged change after
// at undone, newest first. History older than the retained change log
// answers SnapshotTooOld.
func (s *storage) snapshotAt(db, coll string, f *query.Filter, hint any, at bson.Timestamp) ([]bson.D, error) {
	var out []bson.D
	err := s.read(db, coll, func(c *collection) error {
		if c != nil {
			if err := checkHint(c, hint); err != nil {
				return err
			}
		}
		// Changes to c are logged under c's write lock, which our read
		// lock excludes: the log and the documents agree.
		l := s.changes
		l.mu.Lock()
		var undo []change
		oldestKept := true
		if l.kept > 0 && l.at(0).seq > 1 && at.Before(l.at(0).at) {
			oldestKept = false
		}
		for i := l.kept - 1; i >= 0 && at.Before(l.at(i).at); i-- {
			if ch := l.at(i); ch.db == db && ch.coll == coll {
				undo = append(undo, *ch)
			}
		}
		l.mu.Unlock()
		if !oldestKept {
			return cmderr.New(cmderr.SnapshotTooOld, "Read timestamp %s is older than the oldest available timestamp.", tsString(at))
		}
		if ddl := s.lastDDL(db); at.Before(ddl) {
			// Creating, dropping, renaming or replacing ($out) a
			// collection is not in the change log.
			return cmderr.New(cmderr.SnapshotUnavailable, "Unable to read from a snapshot due to pending collection catalog changes; please retry the operation. Snapshot timestamp is %s. Collection minimum timestamp is %s", tsString(at), tsString(ddl))
		}
		var docs []bson.D
		pos := map[string]int{}
		if c != nil {
			for _, rec := range c.order {
				if rec != nil {
					pos[rec.idKey] = len(docs)
					docs = append(docs, rec.doc)
				}
			}
		}
		for _, ch := range undo {
			k := value.Key(ch.id)
			if c != nil {
				k = c.idKeyOf(ch.id)
			}
			i, present := pos[k]
			switch {
			case ch.before == nil && present: // an insert: remove it
				docs[i] = nil
				delete(pos, k)
			case ch.before != nil && present:
				docs[i] = ch.before
			case ch.before != nil: // a delete: restore it
				pos[k] = len(docs)
				docs = append(docs, ch.before)
			}
		}
		for _, d := range docs {
			if d == nil {
				continue
			}
			ok, err := f.MatchErr(d)
			if err != nil {
				return err
			}
			if ok {
				out = append(out, value.CloneDoc(d))
			}
		}
		return nil
	})
	return out, err
}

// withAtClusterTime reports the point a snapshot read read at: in the
// cursor document of a cursor reply, else at the top level (distinct).
func withAtClusterTime(reply bson.D, at bson.Timestamp) bson.D {
	for i := range reply {
		if reply[i].Key == "cursor" {
			if cur, ok := reply[i].Value.(bson.D); ok {
				reply[i].Value = append(slices.Clone(cur), bson.E{Key: "atClusterTime", Value: at})
				return reply
			}
		}
	}
	return setField(reply, "atClusterTime", at)
}

// markDDL records that the catalog of each database changed at ts.
func (s *storage) markDDL(dbs []string, ts bson.Timestamp) {
	s.ddlMu.Lock()
	defer s.ddlMu.Unlock()
	for _, db := range dbs {
		s.ddlAt[db] = ts
	}
}

// lastDDL is the time of the last catalog change that may affect db.
func (s *storage) lastDDL(db string) bson.Timestamp {
	s.ddlMu.Lock()
	defer s.ddlMu.Unlock()
	t, all := s.ddlAt[db], s.ddlAt["*"]
	if t.Before(all) {
		return all
	}
	return t
}

// ddlDatabases names the databases a DDL command changes: its own, both
// sides of a renameCollection, every one for $out (which may name another).
func ddlDatabases(r *request) []string {
	switch r.name {
	case "renameCollection":
		var dbs []string
		for _, k := range []string{"renameCollection", "to"} {
			if v, ok := r.get(k); ok {
				if s, ok := v.(string); ok {
					db, _, _ := strings.Cut(s, ".")
					dbs = append(dbs, db)
				}
			}
		}
		return dbs
	case "aggregate":
		return []string{"*"}
	}
	return []string{r.db}
}

// hasOutStage reports an aggregate whose pipeline has a $out stage.
func hasOutStage(r *request) bool { return lastStageIs(r, "$out") }

// hasWriteStage reports an aggregate ending in $out or $merge.
func hasWriteStage(r *request) bool { return lastStageIs(r, "$out") || lastStageIs(r, "$merge") }

func lastStageIs(r *request, name string) bool {
	v, _ := r.get("pipeline")
	stages, _ := v.(bson.A)
	if len(stages) == 0 {
		return false
	}
	d, ok := stages[len(stages)-1].(bson.D)
	return ok && len(d) > 0 && d[0].Key == name
}
