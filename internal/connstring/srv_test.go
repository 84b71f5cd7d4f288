package connstring

import (
	"cmp"
	"context"
	"errors"
	"net"
	"sort"
	"strings"
	"testing"
)

// fakeDNS is a DNS stub: SRV answers keyed by "_service._proto.name" and
// TXT answers keyed by name.
type fakeDNS struct {
	srv     map[string][]*net.SRV
	txt     map[string][]string
	txtErr  error
	queries []string
}

func (f *fakeDNS) LookupSRV(_ context.Context, service, proto, name string) (string, []*net.SRV, error) {
	q := "_" + service + "._" + proto + "." + name
	f.queries = append(f.queries, "SRV "+q)
	recs, ok := f.srv[q]
	if !ok {
		return "", nil, &net.DNSError{Err: "no such host", Name: q, IsNotFound: true}
	}
	return q, recs, nil
}

func (f *fakeDNS) LookupTXT(_ context.Context, name string) ([]string, error) {
	f.queries = append(f.queries, "TXT "+name)
	if f.txtErr != nil {
		return nil, f.txtErr
	}
	recs, ok := f.txt[name]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
	}
	return recs, nil
}

var _ Resolver = net.DefaultResolver

func srvRecs(targets ...string) []*net.SRV {
	var out []*net.SRV
	for i, t := range targets {
		out = append(out, &net.SRV{Target: t, Port: uint16(27017 + i)})
	}
	return out
}

func addresses(hs []Host) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.Address())
	}
	return out
}

func TestResolveAppliesSRVAndTXT(t *testing.T) {
	dns := &fakeDNS{
		srv: map[string][]*net.SRV{"_mongodb._tcp.cluster0.example.com": srvRecs("a.example.com.", "B.Example.com.")},
		txt: map[string][]string{"cluster0.example.com": {"authSource=thisDB&replicaSet=repl0"}},
	}
	cs := mustParse(t, "mongodb+srv://u:p@cluster0.example.com/")
	if err := Resolve(context.Background(), cs, dns); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(addresses(cs.Hosts), ","); got != "a.example.com:27017,b.example.com:27018" {
		t.Errorf("hosts = %s", got)
	}
	if cs.AuthSource != "thisDB" || cs.ReplicaSet != "repl0" || !cs.Has("replicaSet") {
		t.Errorf("TXT options not applied: %q %q", cs.AuthSource, cs.ReplicaSet)
	}
	if !cs.TLSEnabled() {
		t.Error("TLS should default to on for mongodb+srv")
	}
}

func TestResolveURIOptionsOverrideTXT(t *testing.T) {
	dns := &fakeDNS{
		srv: map[string][]*net.SRV{"_custom._tcp.cluster0.example.com": srvRecs("a.example.com")},
		txt: map[string][]string{"cluster0.example.com": {"authSource=txtDB&replicaSet=txtRS&loadBalanced=false"}},
	}
	cs := mustParse(t, "mongodb+srv://cluster0.example.com/?srvServiceName=custom&authSource=uriDB&replicaSet=uriRS")
	if err := Resolve(context.Background(), cs, dns); err != nil {
		t.Fatal(err)
	}
	if cs.AuthSource != "uriDB" || cs.ReplicaSet != "uriRS" || cs.LoadBalanced == nil || *cs.LoadBalanced {
		t.Errorf("got authSource %q replicaSet %q loadBalanced %v", cs.AuthSource, cs.ReplicaSet, cs.LoadBalanced)
	}
	if dns.queries[0] != "SRV _custom._tcp.cluster0.example.com" {
		t.Errorf("queries = %v", dns.queries)
	}
}

func TestResolveSRVMaxHosts(t *testing.T) {
	targets := []string{"a.example.com", "b.example.com", "c.example.com", "d.example.com"}
	dns := &fakeDNS{srv: map[string][]*net.SRV{"_mongodb._tcp.x.example.com": srvRecs(targets...)}}
	seen := map[string]bool{}
	for range 50 {
		cs := mustParse(t, "mongodb+srv://x.example.com/?srvMaxHosts=2")
		if err := Resolve(context.Background(), cs, dns); err != nil {
			t.Fatal(err)
		}
		if len(cs.Hosts) != 2 || cs.Hosts[0] == cs.Hosts[1] {
			t.Fatalf("hosts = %v, want 2 distinct", cs.Hosts)
		}
		for _, h := range cs.Hosts {
			seen[h.Name] = true
		}
	}
	if len(seen) < 3 {
		t.Errorf("srvMaxHosts picked from only %v in 50 runs; want a random choice", seen)
	}
	// The stub's records must not have been reordered or truncated.
	if len(dns.srv["_mongodb._tcp.x.example.com"]) != 4 {
		t.Error("LookupSeedlist modified the resolver's records")
	}
}

func TestResolveRejects(t *testing.T) {
	cases := []struct {
		name, uri string
		dns       *fakeDNS
		contains  string
	}{
		{"target outside domain", "mongodb+srv://c.example.com",
			&fakeDNS{srv: map[string][]*net.SRV{"_mongodb._tcp.c.example.com": srvRecs("a.evil.com")}}, "not in the domain"},
		{"suffix without dot", "mongodb+srv://c.example.com",
			&fakeDNS{srv: map[string][]*net.SRV{"_mongodb._tcp.c.example.com": srvRecs("aexample.com")}}, "not in the domain"},
		{"short name needs deeper target", "mongodb+srv://example.com",
			&fakeDNS{srv: map[string][]*net.SRV{"_mongodb._tcp.example.com": srvRecs("example.com")}}, "not in the domain"},
		{"no records", "mongodb+srv://c.example.com",
			&fakeDNS{srv: map[string][]*net.SRV{"_mongodb._tcp.c.example.com": nil}}, "no SRV records"},
		{"lookup fails", "mongodb+srv://c.example.com", &fakeDNS{}, "SRV lookup"},
		{"two TXT records", "mongodb+srv://c.example.com",
			&fakeDNS{srv: map[string][]*net.SRV{"_mongodb._tcp.c.example.com": srvRecs("a.example.com")},
				txt: map[string][]string{"c.example.com": {"replicaSet=a", "authSource=b"}}}, "TXT records"},
		{"TXT option not allowed", "mongodb+srv://c.example.com",
			&fakeDNS{srv: map[string][]*net.SRV{"_mongodb._tcp.c.example.com": srvRecs("a.example.com")},
				txt: map[string][]string{"c.example.com": {"ssl=false"}}}, "not allowed"},
		{"TXT loadBalanced with several hosts", "mongodb+srv://c.example.com",
			&fakeDNS{srv: map[string][]*net.SRV{"_mongodb._tcp.c.example.com": srvRecs("a.example.com", "b.example.com")},
				txt: map[string][]string{"c.example.com": {"loadBalanced=true"}}}, "exactly one host"},
		{"TXT replicaSet with srvMaxHosts", "mongodb+srv://c.example.com/?srvMaxHosts=1",
			&fakeDNS{srv: map[string][]*net.SRV{"_mongodb._tcp.c.example.com": srvRecs("a.example.com")},
				txt: map[string][]string{"c.example.com": {"replicaSet=rs"}}}, "srvMaxHosts"},
		{"TXT lookup error", "mongodb+srv://c.example.com",
			&fakeDNS{srv: map[string][]*net.SRV{"_mongodb._tcp.c.example.com": srvRecs("a.example.com")},
				txtErr: errors.New("server misbehaving")}, "TXT lookup"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cs := mustParse(t, c.uri)
			err := Resolve(context.Background(), cs, c.dns)
			var ce *Error
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.contains) {
				t.Fatalf("Resolve = %v, want *Error containing %q", err, c.contains)
			}
		})
	}
}

func TestResolveShortNames(t *testing.T) {
	dns := &fakeDNS{srv: map[string][]*net.SRV{
		"_mongodb._tcp.localhost":   srvRecs("db1.localhost", "db2.localhost."),
		"_mongodb._tcp.example.com": srvRecs("x.y.example.com"),
	}}
	for _, uri := range []string{"mongodb+srv://localhost", "mongodb+srv://example.com"} {
		cs := mustParse(t, uri)
		if err := Resolve(context.Background(), cs, dns); err != nil {
			t.Errorf("Resolve(%q): %v", uri, err)
		}
	}
	sl, err := LookupSeedlist(context.Background(), dns, "localhost.", "mongodb", 0)
	if err != nil {
		t.Fatal(err)
	}
	got := addresses(sl.Hosts)
	sort.Strings(got)
	if strings.Join(got, ",") != "db1.localhost:27017,db2.localhost:27018" {
		t.Errorf("hosts = %v", got)
	}
}

func TestResolveNonSRVIsNoop(t *testing.T) {
	cs := mustParse(t, "mongodb://a,b")
	dns := &fakeDNS{}
	if err := Resolve(context.Background(), cs, dns); err != nil || len(dns.queries) != 0 || len(cs.Hosts) != 2 {
		t.Errorf("Resolve on mongodb:// = %v, queries %v", err, dns.queries)
	}
}

// Resolve, for the SRV tests, fills in cs.Hosts of a mongodb+srv ConnString from DNS and applies
// the TXT record's options that the URI did not set itself. It does nothing
// for mongodb:// URIs.
func Resolve(ctx context.Context, cs *ConnString, r Resolver) error {
	if !cs.IsSRV() {
		return nil
	}
	maxHosts := 0
	if cs.SRVMaxHosts != nil {
		maxHosts = *cs.SRVMaxHosts
	}
	service := cmp.Or(cs.SRVServiceName, Defaults.SRVServiceName)
	sl, err := LookupSeedlist(ctx, r, cs.SRVHost, service, maxHosts)
	if err != nil {
		return err
	}
	if cs.set == nil {
		cs.set = map[string]bool{}
	}
	if sl.AuthSource != nil && !cs.Has("authSource") {
		cs.AuthSource = *sl.AuthSource
		cs.set["authsource"] = true
	}
	if sl.ReplicaSet != nil && !cs.Has("replicaSet") {
		cs.ReplicaSet = *sl.ReplicaSet
		cs.set["replicaset"] = true
	}
	if sl.LoadBalanced != nil && !cs.Has("loadBalanced") {
		cs.LoadBalanced = sl.LoadBalanced
		cs.set["loadbalanced"] = true
	}
	cs.Hosts = sl.Hosts
	if cs.SRVMaxHosts != nil && *cs.SRVMaxHosts > 0 && cs.ReplicaSet != "" {
		return &Error{Option: "srvMaxHosts", Msg: "srvMaxHosts cannot be combined with replicaSet (from the TXT record)"}
	}
	if cs.LoadBalanced != nil && *cs.LoadBalanced {
		return cs.validateLoadBalanced()
	}
	return nil
}
