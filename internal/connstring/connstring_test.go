package connstring

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sturdy-go/sturdy/readpref"
)

func mustParse(t *testing.T, uri string) *ConnString {
	t.Helper()
	cs, err := Parse(uri)
	if err != nil {
		t.Fatalf("Parse(%q): %v", uri, err)
	}
	return cs
}

func warningsOf(cs *ConnString, kind WarningKind) []Warning {
	var out []Warning
	for _, w := range cs.Warnings {
		if w.Kind == kind {
			out = append(out, w)
		}
	}
	return out
}

func TestHostsAndAddresses(t *testing.T) {
	cs := mustParse(t, "mongodb://u%40x:p%3Aw@Example.COM,10.0.0.1:27018,[::1]:27019,[fe80::1],%2Ftmp%2Fm.sock/db%3F?appName=a")
	want := []string{"example.com:27017", "10.0.0.1:27018", "[::1]:27019", "[fe80::1]:27017", "/tmp/m.sock"}
	var got []string
	for _, h := range cs.Hosts {
		got = append(got, h.Address())
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("addresses = %v, want %v", got, want)
	}
	types := []HostType{Hostname, IPv4, IPLiteral, IPLiteral, UnixSocket}
	for i, h := range cs.Hosts {
		if h.Type != types[i] {
			t.Errorf("host %d type = %v, want %v", i, h.Type, types[i])
		}
	}
	if cs.Username != "u@x" || cs.Password != "p:w" || !cs.HasPassword {
		t.Errorf("userinfo = %q %q %v", cs.Username, cs.Password, cs.HasPassword)
	}
	if cs.Database != "db?" {
		t.Errorf("database = %q, want %q", cs.Database, "db?")
	}
	if cs.AppName != "a" {
		t.Errorf("appName = %q", cs.AppName)
	}
}

func TestInvalidValueWarningNamesOption(t *testing.T) {
	cs := mustParse(t, "mongodb://h/?maxPoolSize=abc&heartbeatFrequencyMS=100&w=-1&readPreference=fastest")
	if cs.MaxPoolSize != nil || cs.HeartbeatFrequency != nil || cs.W != nil || cs.ReadPreference != nil {
		t.Errorf("invalid values were applied: %+v", cs)
	}
	inv := warningsOf(cs, InvalidValue)
	if len(inv) != 4 {
		t.Fatalf("invalid-value warnings = %v, want 4", inv)
	}
	want := `connection string: invalid value for maxPoolSize: "abc" (must be a non-negative integer)`
	if inv[0].Error() != want || inv[0].Option != "maxPoolSize" || inv[0].Value != "abc" {
		t.Errorf("warning = %q (%+v), want %q", inv[0].Error(), inv[0], want)
	}
	if inv[1].Option != "heartbeatFrequencyMS" || !strings.Contains(inv[1].Msg, "at least 500") {
		t.Errorf("heartbeat warning = %+v", inv[1])
	}
	if cs.Has("maxPoolSize") {
		t.Error("Has(maxPoolSize) is true for an ignored value")
	}
}

func TestUnknownRepeatedDeprecatedAndEmpty(t *testing.T) {
	cs := mustParse(t, "mongodb://h/?connectMS=5&MAXPOOLSIZE=5&maxPoolSize=7&wtimeout=100&journal=1&minPoolSize=&readPreferenceTags=dc:ny,rack:1&readPreferenceTags=&readPreference=secondary")
	if u := warningsOf(cs, UnknownOption); len(u) != 1 || u[0].Option != "connectMS" || !strings.Contains(u[0].Error(), `"connectMS"`) {
		t.Errorf("unknown-option warnings = %v", u)
	}
	if *cs.MaxPoolSize != 7 || len(warningsOf(cs, RepeatedOption)) != 1 {
		t.Errorf("maxPoolSize = %d, repeated warnings %v", *cs.MaxPoolSize, warningsOf(cs, RepeatedOption))
	}
	if cs.WTimeout == nil || *cs.WTimeout != 100*time.Millisecond || len(warningsOf(cs, DeprecatedOption)) != 1 {
		t.Errorf("wtimeout alias: %v %v", cs.WTimeout, cs.Warnings)
	}
	if cs.Journal == nil || !*cs.Journal || len(warningsOf(cs, DeprecatedValue)) != 1 {
		t.Errorf("journal=1: %v %v", cs.Journal, cs.Warnings)
	}
	if cs.MinPoolSize != nil || len(warningsOf(cs, EmptyValue)) != 1 {
		t.Errorf("empty minPoolSize: %v %v", cs.MinPoolSize, cs.Warnings)
	}
	wantTags := []map[string]string{{"dc": "ny", "rack": "1"}, {}}
	if !reflect.DeepEqual(cs.ReadPreferenceTags, wantTags) {
		t.Errorf("tags = %v, want %v", cs.ReadPreferenceTags, wantTags)
	}
}

func TestWTimeoutReplacementWins(t *testing.T) {
	cs := mustParse(t, "mongodb://h/?wtimeout=100&wTimeoutMS=200")
	if *cs.WTimeout != 200*time.Millisecond {
		t.Errorf("wTimeoutMS = %v, want 200ms", *cs.WTimeout)
	}
}

func TestValues(t *testing.T) {
	cs := mustParse(t, "mongodb://h/?w=majority&compressors=zstd,lz4,zlib&readPreference=SECONDARYPREFERRED&maxStalenessSeconds=120"+
		"&authMechanismProperties=TOKEN_RESOURCE:mongodb://x%2Cy,ENVIRONMENT:azure&tls=true&ssl=true&maxAdaptiveRetries=3&adaptiveRetries=false"+
		"&enableOverloadRetargeting=true&retryWrites=false&connectTimeoutMS=0&wTimeoutMS=9999999999")
	if cs.W != "majority" {
		t.Errorf("w = %v", cs.W)
	}
	if !reflect.DeepEqual(cs.Compressors, []string{"zstd", "zlib"}) || len(warningsOf(cs, UnsupportedValue)) != 1 {
		t.Errorf("compressors = %v, warnings %v", cs.Compressors, cs.Warnings)
	}
	if cs.ReadPreference == nil || *cs.ReadPreference != readpref.SecondaryPreferred || *cs.MaxStalenessSeconds != 120 {
		t.Errorf("read preference = %q %v", cs.ReadPreference, cs.MaxStalenessSeconds)
	}
	if got := cs.AuthMechanismProperties["TOKEN_RESOURCE"]; got != "mongodb://x,y" {
		t.Errorf("TOKEN_RESOURCE = %q", got)
	}
	if !cs.TLSEnabled() || *cs.MaxAdaptiveRetries != 3 || *cs.AdaptiveRetries || !*cs.EnableOverloadRetargeting || *cs.RetryWrites {
		t.Errorf("bools/ints wrong: %+v", cs)
	}
	if *cs.ConnectTimeout != 0 || *cs.WTimeout != 9999999999*time.Millisecond {
		t.Errorf("durations: %v %v", *cs.ConnectTimeout, *cs.WTimeout)
	}
	if len(cs.Warnings) != 1 {
		t.Errorf("warnings = %v, want only the lz4 one", cs.Warnings)
	}
}

func TestErrors(t *testing.T) {
	cases := []struct {
		uri, option, contains string
	}{
		{"mongodb://h/?tls=true&ssl=false", "ssl", "conflicting TLS"},
		{"mongodb://h/?tlsInsecure=true&tlsAllowInvalidCertificates=false", "tlsAllowInvalidCertificates", "cannot both"},
		{"mongodb://h/?tlsInsecure=true&tlsAllowInvalidHostnames=true", "tlsAllowInvalidHostnames", "cannot both"},
		{"mongodb://a,b/?directConnection=true", "directConnection", "exactly one host"},
		{"mongodb+srv://a.b.c/?directConnection=true", "directConnection", "mongodb+srv"},
		{"mongodb://h/?minPoolSize=10&maxPoolSize=5", "minPoolSize", "greater than maxPoolSize"},
		{"mongodb://h/?w=0&journal=true", "journal", "w=0"},
		{"mongodb://h/?readPreferenceTags=dc:ny", "readPreferenceTags", "primary"},
		{"mongodb://h/?readPreference=primary&maxStalenessSeconds=120", "maxStalenessSeconds", "primary"},
		{"mongodb://h/?authMechanism=SCRAM-SHA-256", "authMechanism", "needs a username"},
		{"mongodb://u:p@h/?authMechanism=MONGODB-X509", "authMechanism", "no password"},
		{"mongodb://h/?srvMaxHosts=1", "srvMaxHosts", "mongodb+srv"},
		{"mongodb://h/?proxyHost=a&proxyHost=b", "proxyHost", "2 times"},
		{"mongodb://h/?appName=%zz", "appName", "percent-encoding"},
		{"mongodb://h/db$x", "", "prohibited"},
		{"mongodb://h:0", "", "invalid port"},
		{"mongodb://fe80::1", "", "IPv6 literals"},
		{"mongodb://%2Ftmp%2Fmongo", "", ".sock"},
		{"mongodb://h,/", "", "empty host"},
	}
	for _, c := range cases {
		_, err := Parse(c.uri)
		var ce *Error
		if !errors.As(err, &ce) {
			t.Errorf("Parse(%q) = %v, want *Error", c.uri, err)
			continue
		}
		if ce.Option != c.option || !strings.Contains(err.Error(), c.contains) || !strings.HasPrefix(err.Error(), "connection string: ") {
			t.Errorf("Parse(%q) = %q (option %q), want option %q and %q", c.uri, err, ce.Option, c.option, c.contains)
		}
	}
}

func TestTLSEnabled(t *testing.T) {
	cases := map[string]bool{
		"mongodb://h":                             false,
		"mongodb://h/?tlsCAFile=ca.pem":           true,
		"mongodb://h/?tlsAllowInvalidHostnames=1": false,
		"mongodb+srv://a.b.c":                     true,
		"mongodb+srv://a.b.c/?tls=false":          false,
		"mongodb://h/?ssl=true":                   true,
	}
	for uri, want := range cases {
		if got := mustParse(t, uri).TLSEnabled(); got != want {
			t.Errorf("TLSEnabled(%q) = %v, want %v", uri, got, want)
		}
	}
}

func TestSRVParse(t *testing.T) {
	cs := mustParse(t, "mongodb+srv://user:pw@Cluster0.Example.com/?srvServiceName=custom&srvMaxHosts=2")
	if !cs.IsSRV() || cs.SRVHost != "cluster0.example.com" || len(cs.Hosts) != 0 {
		t.Errorf("srv = %v %q %v", cs.IsSRV(), cs.SRVHost, cs.Hosts)
	}
	if cs.SRVServiceName != "custom" || *cs.SRVMaxHosts != 2 {
		t.Errorf("srv options = %q %v", cs.SRVServiceName, cs.SRVMaxHosts)
	}
	for _, bad := range []string{"mongodb+srv://[::1]", "mongodb+srv://%2Ftmp%2Fa.sock", "mongodb+srv://10.0.0.1"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
	cs = mustParse(t, "mongodb+srv://a.b.c/?srvServiceName=bad--name")
	if cs.SRVServiceName != "" || len(warningsOf(cs, InvalidValue)) != 1 {
		t.Errorf("invalid service name accepted: %q %v", cs.SRVServiceName, cs.Warnings)
	}
}
