package mongosim

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// The database profiler. With a database's profiling level at 2 every
// operation on it, at 1 those taking at least slowms (sampled at
// sampleRate), and with a filter those whose entry matches it, are recorded
// in the database's system.profile, a capped collection of 1 MiB, as mongod
// does. Entries have mongod's common fields (op, ns, command, nreturned or
// the write counts, errCode/errMsg, responseLength, protocol, millis, ts,
// client, appName, allUsers, user) but no plan or execution statistics.

const profileCollection = "system.profile"

// profileCappedSize is mongod's default size of system.profile.
const profileCappedSize = 1 << 20

// profileOp records r's operation if the profiler wants it.
func (m *Member) profileOp(r *request, reply bson.D, err error, elapsed time.Duration) {
	p := &m.cluster.profile
	if !p.on.Load() || r.db == "local" {
		return
	}
	if errors.Is(err, errReplied) {
		err = nil // the command answered by itself
	}
	entry := profileEntry(r, reply, err, elapsed)
	p.mu.Lock()
	level, slow, rate, match := p.levels[r.db], p.slowMS, p.sampleRate, p.match
	p.mu.Unlock()
	switch {
	case level == 0:
		return
	case match != nil:
		if !match.Match(entry) {
			return
		}
	case level == 1:
		if elapsed.Milliseconds() < int64(slow) || rand.Float64() >= rate {
			return
		}
	}
	s := m.cluster.data
	if _, _, err := s.ensureWith(r.db, profileCollection, func(c *collection) {
		c.capped, c.cappedSize, c.noIDIndex = true, profileCappedSize, true
		c.options = bson.D{{Key: "capped", Value: true}, {Key: "size", Value: int64(profileCappedSize)}}
	}); err != nil {
		return
	}
	_ = s.write(context.Background(), r.db, profileCollection, false, func(c *collection) error {
		if c == nil {
			return nil
		}
		return c.insert(entry)
	})
}

// profileOps maps commands to the profiler's op names.
var profileOps = map[string]string{
	"find": "query", "insert": "insert", "update": "update", "delete": "remove", "getMore": "getmore",
}

func profileEntry(r *request, reply bson.D, err error, elapsed time.Duration) bson.D {
	op := profileOps[r.name]
	if op == "" {
		op = "command"
	}
	ns := r.db + ".$cmd"
	if coll, ok := r.cmd[0].Value.(string); ok && r.name != "getMore" {
		ns = r.db + "." + coll
	} else if coll, ok := lookupD(r.cmd, "collection"); ok && r.name == "getMore" {
		ns = r.db + "." + coll.(string)
	}
	d := bson.D{{Key: "op", Value: op}, {Key: "ns", Value: ns}, {Key: "command", Value: value.CloneDoc(r.cmd)}}
	d = append(d, profileCounts(r.name, reply)...)
	if err != nil {
		code, _ := errorFields(err)
		d = append(d, bson.E{Key: "ok", Value: 0.0}, bson.E{Key: "errMsg", Value: errMessage(err)},
			bson.E{Key: "errName", Value: cmderr.Name(code)}, bson.E{Key: "errCode", Value: code})
	}
	d = append(d,
		bson.E{Key: "numYield", Value: int32(0)},
		bson.E{Key: "responseLength", Value: int32(bsonSize(reply))},
		bson.E{Key: "protocol", Value: "op_msg"},
		bson.E{Key: "millis", Value: int32(elapsed.Milliseconds())},
		bson.E{Key: "ts", Value: bson.NewDateTimeFromTime(time.Now())},
	)
	conn := r.raw.Conn
	host := conn.RemoteAddr().String()
	if i := lastColon(host); i >= 0 {
		host = host[:i]
	}
	d = append(d, bson.E{Key: "client", Value: host})
	if app := conn.AppName(); app != "" {
		d = append(d, bson.E{Key: "appName", Value: app})
	}
	return append(d, bson.E{Key: "allUsers", Value: bson.A{}}, bson.E{Key: "user", Value: ""})
}

// profileCounts are the result counters mongod's entry carries.
func profileCounts(name string, reply bson.D) bson.D {
	n := func(k string) int32 {
		v, _ := lookupD(reply, k)
		i, _ := asInt64(v)
		return int32(i)
	}
	switch name {
	case "find", "aggregate", "getMore":
		cur, _ := lookupD(reply, "cursor")
		cd, _ := cur.(bson.D)
		batch, ok := lookupD(cd, "firstBatch")
		if !ok {
			batch, _ = lookupD(cd, "nextBatch")
		}
		arr, _ := batch.(bson.A)
		id, _ := lookupD(cd, "id")
		exhausted := id == int64(0)
		return bson.D{{Key: "nreturned", Value: int32(len(arr))}, {Key: "cursorExhausted", Value: exhausted}}
	case "insert":
		return bson.D{{Key: "ninserted", Value: n("n")}}
	case "update":
		return bson.D{{Key: "nMatched", Value: n("n")}, {Key: "nModified", Value: n("nModified")}}
	case "delete":
		return bson.D{{Key: "ndeleted", Value: n("n")}}
	}
	return nil
}

func lastColon(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == ':' {
			return i
		}
	}
	return -1
}
