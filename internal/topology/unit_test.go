package topology

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/internal/conn"
	"github.com/sturdy-go/sturdy/mongoerr"
	"github.com/sturdy-go/sturdy/readpref"
)

func TestNormalizeAddr(t *testing.T) {
	for in, want := range map[string]string{
		"A":               "a:27017",
		"Host.Example:1":  "host.example:1",
		"[::1]":           "[::1]:27017",
		"[::1]:27018":     "[::1]:27018",
		"::1":             "[::1]:27017",
		"/tmp/mongo.sock": "/tmp/mongo.sock",
	} {
		if got := NormalizeAddr(in); got != want {
			t.Errorf("NormalizeAddr(%q) = %q, want %q", in, got, want)
		}
	}
}

func hello(t *testing.T, d bson.D) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestServerKinds(t *testing.T) {
	ok := bson.E{Key: "ok", Value: 1}
	set := bson.E{Key: "setName", Value: "rs"}
	cases := []struct {
		name  string
		reply bson.D
		want  ServerKind
	}{
		{"standalone", bson.D{ok, {Key: "isWritablePrimary", Value: true}}, Standalone},
		{"mongos", bson.D{ok, {Key: "isWritablePrimary", Value: true}, {Key: "msg", Value: "isdbgrid"}}, Mongos},
		{"primary legacy", bson.D{ok, {Key: "ismaster", Value: true}, set}, RSPrimary},
		{"secondary", bson.D{ok, {Key: "secondary", Value: true}, set}, RSSecondary},
		{"hidden secondary", bson.D{ok, {Key: "secondary", Value: true}, {Key: "hidden", Value: true}, set}, RSOther},
		{"arbiter", bson.D{ok, {Key: "arbiterOnly", Value: true}, set}, RSArbiter},
		{"recovering", bson.D{ok, set}, RSOther},
		{"ghost", bson.D{ok, {Key: "isreplicaset", Value: true}}, RSGhost},
		{"not ok", bson.D{{Key: "ok", Value: 0}, {Key: "errmsg", Value: "no"}}, ServerUnknown},
		{"wrong types", bson.D{ok, {Key: "isWritablePrimary", Value: "yes"}, {Key: "hosts", Value: 3}, {Key: "setName", Value: 1}, {Key: "electionId", Value: "x"}, {Key: "topologyVersion", Value: bson.D{{Key: "processId", Value: 1}}}}, Standalone},
	}
	for _, c := range cases {
		sd := NewServerDescription("A:1", hello(t, c.reply), time.Millisecond)
		if sd.Kind != c.want {
			t.Errorf("%s: kind %s, want %s", c.name, sd.Kind, c.want)
		}
		if sd.Addr != "a:1" {
			t.Errorf("%s: address %q not normalized", c.name, sd.Addr)
		}
	}
	if sd := NewServerDescription("a:1", bson.Raw{1, 2, 3}, 0); sd.Kind != ServerUnknown || sd.Err == nil {
		t.Errorf("malformed reply gave %s, %v", sd.Kind, sd.Err)
	}
}

func FuzzNewServerDescription(f *testing.F) {
	// The one fuzz target over hello parsing: conn.ParseDescription (which
	// the handshake uses too), the server kind, and the SDAM state machine.
	for _, d := range []bson.D{
		{{Key: "ok", Value: 1}, {Key: "setName", Value: "rs"}, {Key: "hosts", Value: bson.A{"a:1"}}},
		{{Key: "ok", Value: 1}, {Key: "isWritablePrimary", Value: true}, {Key: "ismaster", Value: false}, {Key: "setName", Value: "rs"}},
		{{Key: "ok", Value: 1}, {Key: "secondary", Value: 0.5}, {Key: "setName", Value: "rs"}, {Key: "maxWireVersion", Value: 1e300}},
		{{Key: "ok", Value: 1}, {Key: "maxWireVersion", Value: int64(1<<32 + 25)}, {Key: "logicalSessionTimeoutMinutes", Value: int64(1 << 40)}},
	} {
		seed, _ := bson.Marshal(d)
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sd := NewServerDescription("a:1", b, 0)
		d, _ := New(withTestDefaults(Options{Hosts: []string{"a:1"}}))
		_ = d.desc.Apply(d.o, sd)
		_ = d.Disconnect(context.Background())
	})
}

func TestClassifyStateChange(t *testing.T) {
	cases := []struct {
		reply              bson.D
		change, isShutdown bool
	}{
		{bson.D{{Key: "ok", Value: 0}, {Key: "code", Value: 91}, {Key: "errmsg", Value: "x"}}, true, true},
		{bson.D{{Key: "ok", Value: 0}, {Key: "code", Value: 189}}, true, false},
		{bson.D{{Key: "ok", Value: 0}, {Key: "code", Value: 2}, {Key: "errmsg", Value: "not master"}}, false, false},
		{bson.D{{Key: "ok", Value: 0}, {Key: "errmsg", Value: "not master"}}, true, false},
		{bson.D{{Key: "ok", Value: 0}, {Key: "errmsg", Value: "node is recovering"}}, true, false},
		{bson.D{{Key: "ok", Value: 1}, {Key: "writeConcernError", Value: bson.D{{Key: "code", Value: 11600}, {Key: "errmsg", Value: "shutdown"}}}}, true, true},
		{bson.D{{Key: "ok", Value: 1}, {Key: "writeErrors", Value: bson.A{bson.D{{Key: "index", Value: 0}, {Key: "code", Value: 10107}}}}}, false, false},
	}
	for i, c := range cases {
		err := mongoerr.FromReply(hello(t, c.reply))
		sc, ok := classifyStateChange(err)
		if ok != c.change || sc.shutdown != c.isShutdown {
			t.Errorf("case %d: state change %v shutdown %v, want %v %v", i, ok, sc.shutdown, c.change, c.isShutdown)
		}
	}
}

func TestReadPrefValidation(t *testing.T) {
	d := Description{Kind: ReplicaSetWithPrimary}
	bad := []readpref.ReadPref{
		{Mode: readpref.Primary, TagSets: []readpref.TagSet{{"dc": "ny"}}},
		{Mode: readpref.Primary, MaxStaleness: 120 * time.Second},
		{Mode: readpref.Secondary, MaxStaleness: 60 * time.Second}, // below 90 s
		{Mode: readpref.Nearest, MaxStaleness: -time.Second},       // negative
		{Mode: readpref.Mode(42)},                                  // unknown mode
	}
	for _, rp := range bad {
		var rpe *mongoerr.ReadPrefError
		if _, err := ReadPrefSelector(rp, 10*time.Second).Select(d, nil); !errors.As(err, &rpe) {
			t.Errorf("%+v: got %v, want a ReadPrefError", rp, err)
		}
	}
	// Below heartbeat + 10 s.
	var rpe *mongoerr.ReadPrefError
	if _, err := ReadPrefSelector(readpref.ReadPref{Mode: readpref.Secondary, MaxStaleness: 100 * time.Second}, 95*time.Second).Select(d, nil); !errors.As(err, &rpe) {
		t.Errorf("maxStaleness below heartbeat+10s accepted: %v", err)
	}
	// Primary with the default empty tag set is fine.
	if _, err := ReadPrefSelector(readpref.ReadPref{TagSets: []readpref.TagSet{{}}}, 0).Select(d, nil); err != nil {
		t.Errorf("primary with [{}] rejected: %v", err)
	}
}

func TestMaxStalenessFilters(t *testing.T) {
	now := time.Now()
	p := ServerDescription{Addr: "p:1", Kind: RSPrimary, LastUpdateTime: now, Description: conn.Description{LastWriteDate: now}}
	fresh := ServerDescription{Addr: "f:1", Kind: RSSecondary, LastUpdateTime: now, Description: conn.Description{LastWriteDate: now.Add(-5 * time.Second)}}
	stale := ServerDescription{Addr: "s:1", Kind: RSSecondary, LastUpdateTime: now, Description: conn.Description{LastWriteDate: now.Add(-200 * time.Second)}}
	sel := ReadPrefSelector(readpref.ReadPref{Mode: readpref.Secondary, MaxStaleness: 90 * time.Second}, 10*time.Second)

	d := Description{Kind: ReplicaSetWithPrimary}.withServer(p).withServer(fresh).withServer(stale)
	got, err := sel.Select(d, d.Servers)
	if err != nil || len(got) != 1 || got[0].Addr != "f:1" {
		t.Fatalf("with primary: %v %v, want only f:1", addrs(got), err)
	}
	d = Description{Kind: ReplicaSetNoPrimary}.withServer(fresh).withServer(stale)
	got, err = sel.Select(d, d.Servers)
	if err != nil || len(got) != 1 || got[0].Addr != "f:1" {
		t.Fatalf("without primary: %v %v, want only f:1", addrs(got), err)
	}
	// secondaryPreferred falls back to the primary when every secondary is too stale.
	d = Description{Kind: ReplicaSetWithPrimary}.withServer(p).withServer(stale)
	got, _ = ReadPrefSelector(readpref.ReadPref{Mode: readpref.SecondaryPreferred, MaxStaleness: 90 * time.Second}, 10*time.Second).Select(d, d.Servers)
	if len(got) != 1 || got[0].Addr != "p:1" {
		t.Fatalf("secondaryPreferred fallback: %v, want p:1", addrs(got))
	}
}

func TestPickTwoChoicesPrefersIdle(t *testing.T) {
	w := []ServerDescription{{Addr: "a:1"}, {Addr: "b:1"}}
	ops := map[string]int64{"a:1": 3, "b:1": 0}
	r := rand.New(rand.NewPCG(1, 1))
	for range 100 {
		if p := pickTwoChoices(w, func(a string) int64 { return ops[a] }, r); p.Addr != "b:1" {
			t.Fatalf("picked busier %s", p.Addr)
		}
	}
}

func TestLogicalSessionTimeoutIsMinimum(t *testing.T) {
	o := Options{Hosts: []string{"a:1", "b:1"}, SetName: "rs"}.normalized()
	d := initialDescription(o)
	mk := func(addr string, primary bool, lstm int) ServerDescription {
		return NewServerDescription(addr, hello(t, bson.D{{Key: "ok", Value: 1}, {Key: "setName", Value: "rs"},
			{Key: "isWritablePrimary", Value: primary}, {Key: "secondary", Value: !primary},
			{Key: "hosts", Value: bson.A{"a:1", "b:1"}}, {Key: "maxWireVersion", Value: 21},
			{Key: "logicalSessionTimeoutMinutes", Value: lstm}}), 0)
	}
	d = d.Apply(o, mk("a:1", true, 30))
	d = d.Apply(o, mk("b:1", false, 10))
	if d.LogicalSessionTimeoutMinutes == nil || *d.LogicalSessionTimeoutMinutes != 10 {
		t.Fatalf("session timeout %v, want 10", fmtPtr(d.LogicalSessionTimeoutMinutes))
	}
	if !d.SupportsRetryableWrites() {
		t.Fatal("replica set of 5.0+ members should support retryable writes")
	}
}

func TestIncompatibleWireVersionIsPublicError(t *testing.T) {
	for _, c := range []struct {
		min, max int32
		want     string
	}{
		{MaxSupportedWireVersion + 1, MaxSupportedWireVersion + 3, "server at a:1 requires wire version 26, but this version of sturdy only supports up to 25"},
		{0, MinSupportedWireVersion - 1, "server at a:1 reports wire version 8, but this version of sturdy requires at least 9 (MongoDB 4.4)"},
	} {
		err := compatibility([]ServerDescription{{Addr: "a:1", Kind: Standalone, Description: conn.Description{MinWireVersion: c.min, MaxWireVersion: c.max}}})
		var ie *mongoerr.IncompatibleError
		if !errors.As(err, &ie) || ie.Addr != "a:1" || err.Error() != c.want {
			t.Errorf("wire %d..%d: got %v, want a *mongoerr.IncompatibleError %q", c.min, c.max, err, c.want)
		}
	}
	if err := compatibility([]ServerDescription{{Addr: "a:1", Kind: Standalone, Description: conn.Description{MaxWireVersion: MaxSupportedWireVersion}}}); err != nil {
		t.Errorf("compatible server: %v", err)
	}
}
