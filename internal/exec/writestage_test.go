package exec_test

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/blackpipe"
	"github.com/sturdy-go/sturdy/internal/exec"
	"github.com/sturdy-go/sturdy/internal/topology"
	"github.com/sturdy-go/sturdy/readpref"
)

// outAggregate is an aggregate ending in $out, as the root package builds
// it: a write that may follow a read preference.
func outAggregate(rp *readpref.ReadPref) *exec.Operation {
	return &exec.Operation{DB: "db", Command: bson.D{{Key: "aggregate", Value: "c"},
		{Key: "pipeline", Value: bson.A{bson.D{{Key: "$out", Value: "d"}}}}, {Key: "cursor", Value: bson.D{}}},
		Flags: exec.Write | exec.WriteStage, ReadPref: rp}
}

var emptyCursor = bson.D{{Key: "cursor", Value: bson.D{{Key: "id", Value: int64(0)}, {Key: "ns", Value: "db.c"}, {Key: "firstBatch", Value: bson.A{}}}}}

func TestWriteStageAggregateFollowsReadPreferenceOn50(t *testing.T) {
	members := blackpipe.StartReplicaSet(t, "rs0", 2, blackpipe.Options{})
	env := newEnv(t, topology.Options{Hosts: []string{members[0].Addr()}, SetName: "rs0"})
	onPrimary := autoReply(members[0], "aggregate", emptyCursor)
	onSecondary := autoReply(members[1], "aggregate", emptyCursor)

	res, err := env.exec.Execute(ctx10(t), outAggregate(&readpref.ReadPref{Mode: readpref.Secondary}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Server.Addr() != members[1].Addr() || onPrimary.len() != 0 {
		t.Fatalf("$out aggregate with read preference secondary ran on %s, want the secondary %s", res.Server.Addr(), members[1].Addr())
	}
	if got := onSecondary.get(0).Command.Lookup("$readPreference", "mode").StringValue(); got != "secondary" {
		t.Errorf("$readPreference mode %q, want secondary: %v", got, onSecondary.get(0).Command)
	}
	if n := res.Server.OperationCount(); n != 0 {
		t.Errorf("operation count %d after the operation, want 0", n)
	}

	// Without a read preference it is a plain write: the primary, no
	// $readPreference.
	res, err = env.exec.Execute(ctx10(t), outAggregate(nil))
	if err != nil {
		t.Fatal(err)
	}
	if res.Server.Addr() != members[0].Addr() || has(onPrimary.get(0).Command, "$readPreference") {
		t.Errorf("$out aggregate without read preference: server %s, command %v", res.Server.Addr(), onPrimary.get(0).Command)
	}
}

func TestWriteStageAggregateUsesPrimaryBefore50(t *testing.T) {
	// Wire version 12 is MongoDB 4.4, whose secondaries cannot run $out.
	members := blackpipe.StartReplicaSet(t, "rs0", 2, blackpipe.Options{MaxWireVersion: 12})
	env := newEnv(t, topology.Options{Hosts: []string{members[0].Addr()}, SetName: "rs0"})
	onPrimary := autoReply(members[0], "aggregate", emptyCursor)
	onSecondary := autoReply(members[1], "aggregate", emptyCursor)
	// Wait until the secondary is known, or secondaryPreferred would pick
	// the primary anyway.
	sec, err := env.topo.SelectServer(ctx10(t), topology.ReadPrefSelector(readpref.ReadPref{Mode: readpref.Secondary}, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	sec.Dec()

	res, err := env.exec.Execute(ctx10(t), outAggregate(&readpref.ReadPref{Mode: readpref.SecondaryPreferred}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Server.Addr() != members[0].Addr() || onSecondary.len() != 0 {
		t.Fatalf("$out aggregate on a 4.4 replica set ran on %s, want the primary %s", res.Server.Addr(), members[0].Addr())
	}
	if cmd := onPrimary.get(0).Command; has(cmd, "$readPreference") {
		t.Errorf("$out aggregate sent to a pre-5.0 primary carries $readPreference: %v", cmd)
	}
}
