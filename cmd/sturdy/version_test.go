package main

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// sturdy version prints what scripts/release stamps with -ldflags.
func TestVersionPrintsStampedValues(t *testing.T) {
	oldV, oldC := version, commit
	version, commit = "v1.2.3", "abc123"
	defer func() { version, commit = oldV, oldC }()
	var out strings.Builder
	if code := run(context.Background(), []string{"version"}, &out, io.Discard); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !strings.HasPrefix(out.String(), "sturdy v1.2.3 (commit abc123, go") {
		t.Fatalf("version output %q", out.String())
	}
}

// An unstamped build still says something: the build info's version or
// "(devel)", and a commit or "unknown".
func TestVersionUnstamped(t *testing.T) {
	v, c := buildVersion()
	if v == "" || c == "" {
		t.Fatalf("buildVersion() = %q, %q", v, c)
	}
}

// -json prints one JSON ready line whose addresses a driver can use: the
// primary it names answers hello as the writable primary.
func TestSimJSONReadyLine(t *testing.T) {
	sim := startSim(t, io.Discard, "-port", "0", "-members", "3", "-json")
	var ready simReady
	if err := json.Unmarshal([]byte(sim.uri), &ready); err != nil {
		t.Fatalf("ready line %q: %v", sim.uri, err)
	}
	if ready.ReplicaSet != "rs0" || len(ready.Members) != 3 || ready.Primary != ready.Members[0] || ready.PID == 0 {
		t.Fatalf("ready line %+v", ready)
	}
	if !strings.HasPrefix(ready.URI, "mongodb://"+ready.Members[0]+",") {
		t.Fatalf("uri %q does not list the members", ready.URI)
	}
	client, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + ready.Primary + "/?directConnection=true"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var hello bson.M
	if err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		t.Fatal(err)
	}
	if hello["isWritablePrimary"] != true || hello["setName"] != "rs0" {
		t.Fatalf("hello from the named primary: %v", hello)
	}
	if err := client.Disconnect(ctx); err != nil {
		t.Fatal(err)
	}
	sim.stop(t)
}
