package faultproxy_test

import (
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/faultproxy"
	"github.com/sturdy-go/sturdy/mongosim"
)

var badValue = faultproxy.Action{Kind: faultproxy.Error, Error: faultproxy.CommandError{Code: 2, CodeName: "BadValue"}}

// Rules pick their victims by appName, namespace and command, as seen by
// real clients.
func TestMatchingThroughClients(t *testing.T) {
	for _, ck := range clientKinds {
		t.Run(ck.name, func(t *testing.T) {
			sim := mongosim.Start(t)
			p := startProxy(t, sim)
			victim := ck.connect(t, p.URI(), "appName=victim")
			bystander := ck.connect(t, p.URI(), "appName=bystander")
			ctx := testCtx(t)
			doc := bson.D{{Key: "x", Value: 1}}

			if err := p.SetRules([]faultproxy.Rule{{Match: faultproxy.Match{AppName: "victim"}, Action: badValue}}); err != nil {
				t.Fatal(err)
			}
			if err := victim.insert(ctx, "db", "c", doc); victim.code(err) != 2 {
				t.Errorf("appName rule: victim got %v", err)
			}
			if err := bystander.insert(ctx, "db", "c", doc); err != nil {
				t.Errorf("appName rule: bystander got %v", err)
			}

			if err := p.SetRules([]faultproxy.Rule{{Match: faultproxy.Match{Namespace: "db.hot"}, Action: badValue}}); err != nil {
				t.Fatal(err)
			}
			if err := victim.insert(ctx, "db", "hot", doc); victim.code(err) != 2 {
				t.Errorf("namespace rule: db.hot got %v", err)
			}
			if err := victim.insert(ctx, "db", "cold", doc); err != nil {
				t.Errorf("namespace rule: db.cold got %v", err)
			}
			if err := victim.find(ctx, "db", "hot"); victim.code(err) != 2 {
				t.Errorf("namespace rule: find on db.hot got %v", err)
			}

			if err := p.SetRules([]faultproxy.Rule{{Match: faultproxy.Match{Namespace: "db2"}, Action: badValue}}); err != nil {
				t.Fatal(err)
			}
			if err := victim.insert(ctx, "db2", "any", doc); victim.code(err) != 2 {
				t.Errorf("database rule: db2.any got %v", err)
			}
			if err := victim.insert(ctx, "db", "any", doc); err != nil {
				t.Errorf("database rule: db.any got %v", err)
			}

			if err := p.SetRules([]faultproxy.Rule{{Match: faultproxy.Match{Commands: []string{"FIND"}}, Action: badValue}}); err != nil {
				t.Fatal(err)
			}
			if err := victim.find(ctx, "db", "c"); victim.code(err) != 2 {
				t.Errorf("command rule: find got %v", err)
			}
			if err := victim.insert(ctx, "db", "c", doc); err != nil {
				t.Errorf("command rule: insert got %v", err)
			}
			if c := p.Counts(); len(c) != 1 || c[0].Fired != 1 || c[0].Matched != 1 {
				t.Errorf("counts after SetRules: %+v", c)
			}
		})
	}
}

// ConnectionID selects one client connection.
func TestMatchConnectionID(t *testing.T) {
	sim := mongosim.Start(t)
	p := startProxy(t, sim)
	ctx := testCtx(t)
	a := dial(t, ctx, p.Addrs()[0]) // connection 1
	b := dial(t, ctx, p.Addrs()[0]) // connection 2
	ping := bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}
	send(t, a, 1, ping) // make sure both are accepted, in order
	if _, err := recv(a); err != nil {
		t.Fatal(err)
	}
	send(t, b, 1, ping)
	if _, err := recv(b); err != nil {
		t.Fatal(err)
	}
	if err := p.SetRules([]faultproxy.Rule{{Match: faultproxy.Match{ConnectionID: 2}, Action: badValue}}); err != nil {
		t.Fatal(err)
	}
	send(t, a, 2, ping)
	ra, err := recv(a)
	if err != nil {
		t.Fatal(err)
	}
	send(t, b, 2, ping)
	rb, err := recv(b)
	if err != nil {
		t.Fatal(err)
	}
	if ra.Msg.Body.Lookup("ok").AsFloat64() != 1 || rb.Msg.Body.Lookup("code").AsInt64() != 2 {
		t.Errorf("connection 1 got %v, connection 2 got %v", ra.Msg.Body, rb.Msg.Body)
	}
}

// The same seed fails the same requests on every run, seen from a client
// issuing the same sequence of commands.
func TestSeededRunsRepeat(t *testing.T) {
	run := func(seed int64) []int {
		sim := mongosim.Start(t)
		p := startProxyWith(t, sim, faultproxy.Options{Seed: seed, Rules: []faultproxy.Rule{{
			Match: faultproxy.Match{Commands: []string{"find"}}, Action: badValue,
			Probability: 0.3, Skip: 2, Times: 6,
		}}})
		c := driver(t, p.URI(), "retryReads=false")
		var failed []int
		for i := range 40 {
			if err := (driverC{c}).find(testCtx(t), "db", "c"); err != nil {
				if (driverC{}).code(err) != 2 {
					t.Fatalf("find %d: %v", i, err)
				}
				failed = append(failed, i)
			}
		}
		return failed
	}
	a, b := run(3), run(3)
	if !slices.Equal(a, b) {
		t.Fatalf("seed 3 failed %v, then %v", a, b)
	}
	if len(a) == 0 || len(a) > 6 || a[0] < 2 {
		t.Errorf("skip 2 times 6 p 0.3 failed finds %v", a)
	}
	if c := run(4); slices.Equal(a, c) {
		t.Errorf("seeds 3 and 4 failed the same finds %v", a)
	}
}
