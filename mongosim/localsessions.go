package mongosim

import (
	"bytes"
	"crypto/sha256"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// localSessions is each member's logical session cache as $listLocalSessions
// reports it: every lsid a command carried, with when it was last used.
// endSessions removes entries, as mongod's cache does on its next refresh.
// (The retryable-write table is separate and outlives endSessions.)
type localSessions struct {
	mu   sync.Mutex
	used map[sessionID]time.Time
}

// sessionID is an lsid.id, a UUID: as an array, a session's every command
// records its use without allocating a key.
type sessionID [16]byte

func newLocalSessions() *localSessions { return &localSessions{used: make(map[sessionID]time.Time)} }

// touch records a command's lsid; commands without one are ignored.
func (l *localSessions) touch(r *request) {
	if _, ok := r.get("lsid"); !ok {
		return
	}
	id, err := lsidOf(r)
	if err != nil {
		return
	}
	l.mu.Lock()
	l.used[sessionID(id)] = r.now // lsidOf checked it is 16 bytes
	l.mu.Unlock()
}

// end forgets the sessions an endSessions command names.
func (l *localSessions) end(ids bson.A) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, v := range ids {
		d, ok := v.(bson.D)
		if !ok {
			continue
		}
		if id, ok := lookupD(d, "id"); ok {
			if b, ok := id.(bson.Binary); ok && len(b.Data) == len(sessionID{}) {
				delete(l.used, sessionID(b.Data))
			}
		}
	}
}

// list returns the $listLocalSessions documents. Users are not tracked
// (one user at most), so every session carries the uid of the empty user
// name, as an unauthenticated mongod reports.
func (l *localSessions) list() []bson.D {
	uid := sha256.Sum256(nil)
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]bson.D, 0, len(l.used))
	for id, last := range l.used {
		out = append(out, bson.D{
			{Key: "_id", Value: bson.D{
				{Key: "id", Value: bson.Binary{Subtype: bson.TypeBinaryUUID, Data: bytes.Clone(id[:])}},
				{Key: "uid", Value: bson.Binary{Data: uid[:]}},
			}},
			{Key: "lastUse", Value: bson.NewDateTimeFromTime(last)},
		})
	}
	return out
}

// listLocalSessionsInput validates a leading $listLocalSessions stage and
// returns the documents it produces.
func listLocalSessionsInput(r *request, stage any) ([]bson.D, error) {
	spec, ok := stage.(bson.D)
	if !ok {
		return nil, cmderr.New(cmderr.TypeMismatch, "$listLocalSessions must be an object")
	}
	for _, e := range spec {
		switch e.Key {
		case "allUsers":
		case "users":
			if a, ok := e.Value.(bson.A); !ok || len(a) > 0 {
				return nil, cmderr.Unsupported("$listLocalSessions with a users list")
			}
		default:
			return nil, cmderr.New(40415, "BSON field '$listLocalSessions.%s' is an unknown field.", e.Key)
		}
	}
	return r.member.localSessions.list(), nil
}
