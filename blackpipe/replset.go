package blackpipe

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// StartReplicaSet starts members servers that describe themselves as the
// replica set name: member 0 is the primary, the others secondaries. Each
// hello answers setName, setVersion, hosts, primary, me, isWritablePrimary,
// secondary and (on the primary) electionId, merged over o.Hello. All
// members close when the test ends. Connect with ReplicaSetURI.
func StartReplicaSet(t testing.TB, name string, members int, o Options) []*Server {
	t.Helper()
	if members < 1 {
		t.Fatalf("blackpipe: StartReplicaSet needs at least one member, got %d", members)
	}
	servers := make([]*Server, members)
	hosts := make(bson.A, members)
	for i := range servers {
		mo := o
		mo.Addr = ""
		mo.Hello = nil // set below, once every address is known
		servers[i] = StartWithOptions(t, mo)
		hosts[i] = servers[i].Addr()
	}
	electionID := bson.NewObjectID()
	for i, s := range servers {
		h := bson.D{
			{Key: "setName", Value: name},
			{Key: "setVersion", Value: int32(1)},
			{Key: "hosts", Value: hosts},
			{Key: "primary", Value: hosts[0]},
			{Key: "me", Value: hosts[i]},
			{Key: "isWritablePrimary", Value: i == 0},
			{Key: "secondary", Value: i != 0},
		}
		if i == 0 {
			h = append(h, bson.E{Key: "electionId", Value: electionID})
		}
		s.setHello(mergeDoc(h, o.Hello))
	}
	return servers
}

// ReplicaSetURI returns a connection string naming every member of a replica
// set started with StartReplicaSet.
func ReplicaSetURI(name string, members []*Server) string {
	u := "mongodb://"
	for i, s := range members {
		if i > 0 {
			u += ","
		}
		u += s.Addr()
	}
	u += "/?replicaSet=" + name
	if len(members) > 0 && members[0].opts.TLS != nil {
		u += "&tls=true"
	}
	return u
}

// setHello replaces the hello fields without bumping the topology version;
// for set-up before clients connect.
func (s *Server) setHello(fields bson.D) {
	s.helloMu.Lock()
	defer s.helloMu.Unlock()
	s.hello = append(bson.D(nil), fields...)
}
