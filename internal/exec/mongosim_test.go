package exec_test

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/internal/exec"
	"github.com/sturdy-go/sturdy/internal/topology"
	"github.com/sturdy-go/sturdy/mongoerr"
	"github.com/sturdy-go/sturdy/mongosim"
)

func TestInsertThenFindOnMongosim(t *testing.T) {
	cluster := mongosim.Start(t)
	env := newEnv(t, topology.Options{Hosts: []string{cluster.Members()[0].Addr()}, SetName: "rs0"})
	ctx := ctx10(t)
	ins := &exec.Operation{DB: "shop", Command: bson.D{{Key: "insert", Value: "items"},
		{Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}, {Key: "name", Value: "pen"}}, bson.D{{Key: "_id", Value: 2}, {Key: "name", Value: "ink"}}}}},
		Flags: exec.Write | exec.RetryableWrite}
	res, err := env.exec.Execute(ctx, ins)
	if err != nil {
		t.Fatal(err)
	}
	if n := res.Reply.Lookup("n").AsInt64(); n != 2 {
		t.Fatalf("insert reply %v", res.Reply)
	}
	res, err = env.exec.Execute(ctx, &exec.Operation{DB: "shop", Command: bson.D{{Key: "find", Value: "items"},
		{Key: "filter", Value: bson.D{{Key: "name", Value: "ink"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	batch, _ := res.Reply.Lookup("cursor", "firstBatch").Array().Values()
	if len(batch) != 1 || batch[0].Document().Lookup("_id").AsInt64() != 2 {
		t.Fatalf("find reply %v", res.Reply)
	}
	// The same insert again is a duplicate key, surfaced as a write exception.
	_, err = env.exec.Execute(ctx, ins)
	if !mongoerr.IsDuplicateKey(err) {
		t.Fatalf("duplicate insert: %v, want a duplicate-key error", err)
	}
	if env.sessions.Len() != 1 {
		t.Errorf("session pool has %d sessions, want 1 reused throughout", env.sessions.Len())
	}
}
