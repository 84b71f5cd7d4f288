package sturdy

import (
	"strings"
	"testing"
	"time"
)

func TestOptionsValidateAcceptsDefaults(t *testing.T) {
	zero := time.Duration(0)
	ok := []Options{
		{Hosts: []string{"localhost:27017"}},
		{SRVHost: "cluster0.example.com", SRVMaxHosts: 3, SRVServiceName: "mongodb"},
		{Hosts: []string{"a:1"}, Direct: true, MaxPoolSize: -1, MinPoolSize: 100, LocalThreshold: &zero},
		{Hosts: []string{"a:1"}, ReadPreference: &ReadPreference{Mode: SecondaryMode, TagSets: []TagSet{{"dc": "ny"}, {}}, MaxStaleness: 90 * time.Second}},
		{Hosts: []string{"a:1"}, ReadPreference: &ReadPreference{TagSets: []TagSet{{}}}},
		{Hosts: []string{"a:1"}, WriteConcern: &WriteConcern{W: "majority", WTimeout: time.Second}},
		{Hosts: []string{"a:1"}, Auth: &Credential{Username: "u", Password: "p"}},
		{Hosts: []string{"a:1"}, Auth: &Credential{Mechanism: MechanismX509}},
		{Hosts: []string{"a:1"}, Compressors: []string{"zstd", "snappy"}, ZlibLevel: new(int)},
	}
	for i, o := range ok {
		if err := o.validate(); err != nil {
			t.Errorf("case %d: validate() = %v, want nil", i, err)
		}
	}
}

func TestOptionsValidateRejects(t *testing.T) {
	neg := -time.Millisecond
	minusOne, ten := -1, 10
	cases := []struct {
		o    Options
		want string
	}{
		{Options{}, "no hosts"},
		{Options{Hosts: []string{"a:1"}, SRVHost: "x.y.z"}, "mutually exclusive"},
		{Options{Hosts: []string{"a:1", "b:1"}, Direct: true}, "direct connection needs exactly one host"},
		{Options{SRVHost: "x.y.z", Direct: true}, "direct connection cannot use SRVHost"},
		{Options{Hosts: []string{"a:1"}, SRVMaxHosts: 2}, "SRVMaxHosts requires SRVHost"},
		{Options{SRVHost: "x.y.z", SRVMaxHosts: 2, ReplicaSet: "rs"}, "SRVMaxHosts cannot be combined with ReplicaSet"},
		{Options{Hosts: []string{"a:1", "b:1"}, LoadBalanced: true}, "load-balanced mode needs exactly one host"},
		{Options{Hosts: []string{"a:1"}, LoadBalanced: true, ReplicaSet: "rs"}, "load-balanced mode cannot be combined with ReplicaSet"},
		{Options{Hosts: []string{"a:1"}, MinPoolSize: 101}, "MinPoolSize 101 is greater than MaxPoolSize 100"},
		{Options{Hosts: []string{"a:1"}, MinPoolSize: 6, MaxPoolSize: 5}, "greater than MaxPoolSize"},
		{Options{Hosts: []string{"a:1"}, HeartbeatInterval: 100 * time.Millisecond}, "HeartbeatInterval must be at least 500ms"},
		{Options{Hosts: []string{"a:1"}, SocketTimeout: -time.Second}, "SocketTimeout must be non-negative"},
		{Options{Hosts: []string{"a:1"}, LocalThreshold: &neg}, "LocalThreshold must be non-negative"},
		{Options{Hosts: []string{"a:1"}, Compressors: []string{"lz4"}}, `unknown compressor "lz4"`},
		{Options{Hosts: []string{"a:1"}, ZlibLevel: &ten}, "ZlibLevel must be between -1 and 9"},
		{Options{Hosts: []string{"a:1"}, MaxAdaptiveRetries: &minusOne}, "MaxAdaptiveRetries must be non-negative"},
		{Options{Hosts: []string{"a:1"}, ServerMonitoringMode: "push"}, "ServerMonitoringMode"},
		{Options{Hosts: []string{"a:1"}, AppName: strings.Repeat("x", 129)}, "AppName is 129 bytes"},
		{Options{Hosts: []string{"a:1"}, WriteConcern: &WriteConcern{W: -1}}, "w must be non-negative"},
		{Options{Hosts: []string{"a:1"}, WriteConcern: &WriteConcern{W: 0, Journal: uriTestPtr(true)}}, "w: 0 cannot be combined with journal"},
		{Options{Hosts: []string{"a:1"}, WriteConcern: &WriteConcern{W: 1.5}}, "w must be an int or a string"},
		{Options{Hosts: []string{"a:1"}, ReadPreference: &ReadPreference{TagSets: []TagSet{{"dc": "ny"}}}}, "tag sets cannot be used with mode primary"},
		{Options{Hosts: []string{"a:1"}, ReadPreference: &ReadPreference{MaxStaleness: 100 * time.Second}}, "maxStaleness cannot be used with mode primary"},
		{Options{Hosts: []string{"a:1"}, ReadPreference: &ReadPreference{Mode: NearestMode, MaxStaleness: 30 * time.Second}}, "below the minimum 1m30s"},
		{Options{Hosts: []string{"a:1"}, HeartbeatInterval: 100 * time.Second, ReadPreference: &ReadPreference{Mode: NearestMode, MaxStaleness: 100 * time.Second}}, "below the minimum 1m50s"},
		{Options{Hosts: []string{"a:1"}, Auth: &Credential{Password: "p"}}, "needs a username"},
		{Options{Hosts: []string{"a:1"}, Auth: &Credential{Mechanism: MechanismX509, Password: "p", PasswordSet: true}}, "MONGODB-X509 takes no password"},
		{Options{Hosts: []string{"a:1"}, Auth: &Credential{Mechanism: "GSSAPI", Username: "u"}}, `"GSSAPI" is not supported`},
		{Options{Hosts: []string{"a:1"}, Auth: &Credential{Mechanism: MechanismPLAIN, Username: "u"}}, "PLAIN needs a password"},
	}
	for _, c := range cases {
		err := c.o.validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("validate(%+v) = %v, want an error containing %q", c.o, err, c.want)
		}
	}
}

func TestOptionsValidateReportsEveryProblem(t *testing.T) {
	err := Options{MinPoolSize: -1, MaxConnecting: -2}.validate()
	if err == nil {
		t.Fatal("validate() = nil")
	}
	for _, want := range []string{"no hosts", "MinPoolSize must be non-negative", "MaxConnecting must be non-negative"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("validate() = %q, missing %q", err, want)
		}
	}
}

func TestReadMode(t *testing.T) {
	for m := PrimaryMode; m <= NearestMode; m++ {
		got, err := ParseReadMode(strings.ToUpper(m.String()))
		if err != nil || got != m {
			t.Errorf("ParseReadMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	if SecondaryPreferredMode.String() != "secondaryPreferred" {
		t.Errorf("String() = %q", SecondaryPreferredMode.String())
	}
	if _, err := ParseReadMode("fastest"); err == nil {
		t.Error("ParseReadMode(fastest) succeeded")
	}
}

func TestWriteConcernUnacknowledged(t *testing.T) {
	var nilWC *WriteConcern
	if nilWC.Unacknowledged() || (&WriteConcern{W: 1}).Unacknowledged() || (&WriteConcern{W: "majority"}).Unacknowledged() {
		t.Error("acknowledged write concern reported as unacknowledged")
	}
	if !(&WriteConcern{W: 0}).Unacknowledged() {
		t.Error("w: 0 not reported as unacknowledged")
	}
}

func uriTestPtr[T any](v T) *T { return &v }
