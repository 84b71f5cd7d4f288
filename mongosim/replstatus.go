package mongosim

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// replState is a consistent copy of the replica-set state.
type replState struct {
	primary    int
	term       int64
	setVersion int32
	members    []*Member
}

func (c *Cluster) replState() replState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return replState{primary: c.primary, term: c.term, setVersion: c.setVersion, members: append([]*Member(nil), c.members...)}
}

// replicaSetID is settings.replicaSetId: fixed for the deployment's life.
func (c *Cluster) replicaSetID() bson.ObjectID {
	return bson.NewObjectIDFromTimestamp(c.started)
}

func requireReplSet(r *request) error {
	if r.cluster.setName == "" {
		return cmderr.New(codeNoReplicationEnabled, "not running with --replSet")
	}
	return nil
}

// replSetGetConfigCmd answers rs.conf(): every member is a voting,
// electable data-bearing member with mongod's defaults.
func replSetGetConfigCmd(r *request) (bson.D, error) {
	if err := adminOnly(r); err != nil {
		return nil, err
	}
	if err := requireReplSet(r); err != nil {
		return nil, err
	}
	c := r.cluster
	st := c.replState()
	members := bson.A{}
	for i, m := range st.members {
		members = append(members, bson.D{
			{Key: "_id", Value: int32(i)},
			{Key: "host", Value: m.addr},
			{Key: "arbiterOnly", Value: false},
			{Key: "buildIndexes", Value: true},
			{Key: "hidden", Value: false},
			{Key: "priority", Value: 1.0},
			{Key: "tags", Value: bson.D{}},
			{Key: "secondaryDelaySecs", Value: int64(0)},
			{Key: "votes", Value: int32(1)},
		})
	}
	cfg := bson.D{
		{Key: "_id", Value: c.setName},
		{Key: "version", Value: st.setVersion},
		{Key: "term", Value: int32(st.term)},
		{Key: "members", Value: members},
		{Key: "protocolVersion", Value: int64(1)},
		{Key: "writeConcernMajorityJournalDefault", Value: true},
		{Key: "settings", Value: bson.D{
			{Key: "chainingAllowed", Value: true},
			{Key: "heartbeatIntervalMillis", Value: int32(2000)},
			{Key: "heartbeatTimeoutSecs", Value: int32(10)},
			{Key: "electionTimeoutMillis", Value: int32(10000)},
			{Key: "catchUpTimeoutMillis", Value: int32(-1)},
			{Key: "catchUpTakeoverDelayMillis", Value: int32(30000)},
			{Key: "getLastErrorModes", Value: bson.D{}},
			{Key: "getLastErrorDefaults", Value: bson.D{{Key: "w", Value: int32(1)}, {Key: "wtimeout", Value: int32(0)}}},
			{Key: "replicaSetId", Value: c.replicaSetID()},
		}},
	}
	reply := bson.D{{Key: "config", Value: cfg}}
	if v, ok := r.get("commitmentStatus"); ok && asBool(v) {
		// Every config is committed at once: the members share one store.
		reply = append(reply, bson.E{Key: "commitmentStatus", Value: true})
	}
	return append(reply, bson.E{Key: "ok", Value: 1.0}), nil
}

func opTimeDoc(ts bson.Timestamp, term int64) bson.D {
	return bson.D{{Key: "ts", Value: ts}, {Key: "t", Value: term}}
}

// replSetGetStatusCmd answers rs.status(). Every member applied every
// write (the store is shared), so all optimes are the latest cluster time.
func replSetGetStatusCmd(r *request) (bson.D, error) {
	if err := adminOnly(r); err != nil {
		return nil, err
	}
	if err := requireReplSet(r); err != nil {
		return nil, err
	}
	v := newReplStatusView(r)
	myState := int32(2)
	list := bson.A{}
	for i, m := range v.st.members {
		self := m == r.member
		if self {
			myState = v.memberState(i)
		}
		list = append(list, v.memberStatus(i, m, self))
	}
	n := int32(len(v.st.members))
	majority := n/2 + 1
	return bson.D{
		{Key: "set", Value: r.cluster.setName},
		{Key: "date", Value: v.now},
		{Key: "myState", Value: myState},
		{Key: "term", Value: v.st.term},
		{Key: "syncSourceHost", Value: ""},
		{Key: "syncSourceId", Value: int32(-1)},
		{Key: "heartbeatIntervalMillis", Value: int64(2000)},
		{Key: "majorityVoteCount", Value: majority},
		{Key: "writeMajorityCount", Value: majority},
		{Key: "votingMembersCount", Value: n},
		{Key: "writableVotingMembersCount", Value: n},
		{Key: "optimes", Value: bson.D{
			{Key: "lastCommittedOpTime", Value: v.opTime},
			{Key: "lastCommittedWallTime", Value: v.wall},
			{Key: "readConcernMajorityOpTime", Value: v.opTime},
			{Key: "appliedOpTime", Value: v.opTime},
			{Key: "durableOpTime", Value: v.opTime},
			{Key: "writtenOpTime", Value: v.opTime},
			{Key: "lastAppliedWallTime", Value: v.wall},
			{Key: "lastDurableWallTime", Value: v.wall},
			{Key: "lastWrittenWallTime", Value: v.wall},
		}},
		{Key: "lastStableRecoveryTimestamp", Value: v.ts},
		{Key: "members", Value: list},
		{Key: "ok", Value: 1.0},
	}, nil
}

// replStatusView is what replSetGetStatus reports, taken once so every
// member's entry shows the same state and times.
type replStatusView struct {
	st      replState
	ts      bson.Timestamp // last applied operation
	opTime  bson.D
	wall    bson.DateTime // wall time of ts
	now     bson.DateTime
	uptime  int64 // seconds
	started time.Time
}

func newReplStatusView(r *request) replStatusView {
	c := r.cluster
	st := c.replState()
	ts := c.data.changes.clusterTime()
	wall := bson.NewDateTimeFromTime(time.Unix(int64(ts.T), 0))
	if ts.T == 0 {
		wall = bson.NewDateTimeFromTime(c.started)
	}
	return replStatusView{st: st, ts: ts, opTime: opTimeDoc(ts, st.term), wall: wall,
		now: bson.NewDateTimeFromTime(r.now), uptime: int64(r.now.Sub(c.started).Seconds()), started: c.started}
}

func (v replStatusView) memberState(i int) int32 {
	if i == v.st.primary {
		return 1
	}
	return 2
}

// memberStatus is member i's entry in members, in mongod's field order: the
// node answering (self) omits the durable and heartbeat fields it reports
// only about the others.
func (v replStatusView) memberStatus(i int, m *Member, self bool) bson.D {
	str := "SECONDARY"
	if i == v.st.primary {
		str = "PRIMARY"
	}
	d := bson.D{
		{Key: "_id", Value: int32(i)},
		{Key: "name", Value: m.addr},
		{Key: "health", Value: 1.0},
		{Key: "state", Value: v.memberState(i)},
		{Key: "stateStr", Value: str},
		{Key: "uptime", Value: v.uptime},
		{Key: "optime", Value: v.opTime},
	}
	if !self {
		d = append(d, bson.E{Key: "optimeDurable", Value: v.opTime})
	}
	d = append(d, bson.E{Key: "optimeDate", Value: v.wall})
	if !self {
		d = append(d, bson.E{Key: "optimeDurableDate", Value: v.wall})
	}
	d = append(d,
		bson.E{Key: "lastAppliedWallTime", Value: v.wall},
		bson.E{Key: "lastDurableWallTime", Value: v.wall},
	)
	if !self {
		d = append(d,
			bson.E{Key: "lastHeartbeat", Value: v.now},
			bson.E{Key: "lastHeartbeatRecv", Value: v.now},
			bson.E{Key: "pingMs", Value: int64(0)},
			bson.E{Key: "lastHeartbeatMessage", Value: ""},
		)
	}
	d = append(d,
		bson.E{Key: "syncSourceHost", Value: ""},
		bson.E{Key: "syncSourceId", Value: int32(-1)},
		bson.E{Key: "infoMessage", Value: ""},
	)
	if i == v.st.primary {
		d = append(d,
			bson.E{Key: "electionTime", Value: bson.Timestamp{T: uint32(v.started.Unix()), I: 1}},
			bson.E{Key: "electionDate", Value: bson.NewDateTimeFromTime(v.started.Truncate(time.Second))},
		)
	}
	d = append(d,
		bson.E{Key: "configVersion", Value: v.st.setVersion},
		bson.E{Key: "configTerm", Value: v.st.term},
	)
	if self {
		d = append(d, bson.E{Key: "self", Value: true}, bson.E{Key: "lastHeartbeatMessage", Value: ""})
	}
	return d
}

// replSetInfo is serverStatus.repl, as hello reports the set.
func replSetInfo(r *request) bson.D {
	c := r.cluster
	st := c.replState()
	hosts := bson.A{}
	for _, m := range st.members {
		hosts = append(hosts, m.addr)
	}
	primary := st.primary >= 0 && st.members[st.primary] == r.member
	d := bson.D{
		{Key: "topologyVersion", Value: r.member.topologyVersionDoc()},
		{Key: "hosts", Value: hosts},
		{Key: "setName", Value: c.setName},
		{Key: "setVersion", Value: st.setVersion},
		{Key: "isWritablePrimary", Value: primary},
		{Key: "secondary", Value: !primary},
	}
	if st.primary >= 0 {
		d = append(d, bson.E{Key: "primary", Value: st.members[st.primary].addr})
	}
	d = append(d, bson.E{Key: "me", Value: r.member.addr})
	if primary {
		d = append(d, bson.E{Key: "electionId", Value: electionID(st.term)})
	}
	ts := c.data.changes.clusterTime()
	d = append(d,
		bson.E{Key: "lastWrite", Value: bson.D{
			{Key: "opTime", Value: opTimeDoc(ts, st.term)},
			{Key: "lastWriteDate", Value: bson.NewDateTimeFromTime(time.Unix(int64(ts.T), 0))},
			{Key: "majorityOpTime", Value: opTimeDoc(ts, st.term)},
			{Key: "majorityWriteDate", Value: bson.NewDateTimeFromTime(time.Unix(int64(ts.T), 0))},
		}},
		bson.E{Key: "rbid", Value: int32(1)},
	)
	return d
}

func init() {
	register(
		&command{name: "replSetGetStatus", run: replSetGetStatusCmd},
		&command{name: "replSetGetConfig", run: replSetGetConfigCmd},
	)
}

// oplogSize is local.oplog.rs's capped size, mongod's 990 MB floor.
const oplogSize = 990 << 20

// initOplog creates local.oplog.rs holding the set's first entry, as
// mongod's replSetInitiate writes it, so tools that read the oplog's
// window (rs.printReplicationInfo()) find a replica set. mongosim does
// not log later writes there (COMPATIBILITY.md).
func (c *Cluster) initOplog() error {
	now := c.now()
	entry := bson.D{
		{Key: "op", Value: "n"},
		{Key: "ns", Value: ""},
		{Key: "o", Value: bson.D{{Key: "msg", Value: "initiating set"}}},
		{Key: "ts", Value: bson.Timestamp{T: uint32(now.Unix()), I: 1}},
		{Key: "t", Value: int64(-1)},
		{Key: "v", Value: int64(2)},
		{Key: "wall", Value: bson.NewDateTimeFromTime(now)},
	}
	if _, _, err := c.data.ensureWith("local", "oplog.rs", func(col *collection) {
		col.capped, col.cappedSize = true, oplogSize
		col.options = bson.D{{Key: "capped", Value: true}, {Key: "size", Value: int64(oplogSize)}}
	}); err != nil {
		return err
	}
	return c.data.write(context.Background(), "local", "oplog.rs", false, func(col *collection) error {
		return col.insert(entry)
	})
}
