package connstring

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sturdy-go/sturdy/internal/testsupport"
)

type specHost struct {
	Type string `json:"type"`
	Host string `json:"host"`
	Port *int   `json:"port"`
}

type specAuth struct {
	Username *string `json:"username"`
	Password *string `json:"password"`
	DB       *string `json:"db"`
}

type specCase struct {
	Description string         `json:"description"`
	URI         string         `json:"uri"`
	Valid       bool           `json:"valid"`
	Warning     *bool          `json:"warning"`
	Hosts       []specHost     `json:"hosts"`
	Auth        *specAuth      `json:"auth"`
	Options     map[string]any `json:"options"`
}

func TestSpecJSON(t *testing.T) {
	root := testsupport.SpecDir(t)
	var files []string
	for _, sub := range []string{"connection-string/tests", "uri-options/tests"} {
		m, _ := filepath.Glob(filepath.Join(root, sub, "*.json"))
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Skipf("no connection-string/uri-options spec tests under %q (set SPEC_TESTS)", root)
	}
	sort.Strings(files)
	total := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Tests []specCase `json:"tests"`
		}
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		name := filepath.Base(filepath.Dir(filepath.Dir(f))) + "/" + strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			for _, tc := range doc.Tests {
				total++
				t.Run(tc.Description, func(t *testing.T) { runSpecCase(t, tc) })
			}
		})
	}
	if total < 100 {
		t.Errorf("ran only %d spec cases; expected the full suites", total)
	}
}

func runSpecCase(t *testing.T, tc specCase) {
	cs, err := Parse(tc.URI)
	if !tc.Valid {
		if err == nil {
			t.Fatalf("Parse(%q) succeeded, want an error", tc.URI)
		}
		return
	}
	if err != nil {
		t.Fatalf("Parse(%q): %v", tc.URI, err)
	}
	if tc.Warning != nil {
		if *tc.Warning && len(cs.Warnings) == 0 {
			t.Errorf("Parse(%q): no warning, want one", tc.URI)
		}
		if !*tc.Warning && len(cs.Warnings) > 0 {
			t.Errorf("Parse(%q): unexpected warnings %v", tc.URI, cs.Warnings)
		}
	}
	if tc.Hosts != nil {
		var got []specHost
		for _, h := range cs.Hosts {
			sh := specHost{Type: h.Type.String(), Host: h.Name}
			if h.Port != 0 {
				p := h.Port
				sh.Port = &p
			}
			got = append(got, sh)
		}
		if !reflect.DeepEqual(got, tc.Hosts) {
			t.Errorf("hosts: got %s, want %s", js(got), js(tc.Hosts))
		}
	}
	if a := tc.Auth; a != nil {
		got := specAuth{}
		if cs.HasUsername {
			got.Username = &cs.Username
		}
		if cs.HasPassword {
			got.Password = &cs.Password
		}
		if cs.Database != "" {
			got.DB = &cs.Database
		}
		if !reflect.DeepEqual(got, *a) {
			t.Errorf("auth: got %s, want %s", js(got), js(a))
		}
	}
	for key, want := range tc.Options {
		got, ok := optionValue(cs, strings.ToLower(key))
		if !ok {
			t.Errorf("option %s: not set, want %v", key, want)
			continue
		}
		// Compare in JSON form: numbers as float64, maps and lists generic.
		var norm any
		if err := json.Unmarshal([]byte(js(got)), &norm); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(norm, want) {
			t.Errorf("option %s: got %s, want %s", key, js(got), js(want))
		}
	}
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// optionValue returns an option as the spec tests spell it (milliseconds as
// integers), keyed by lower-cased name.
func optionValue(cs *ConnString, lkey string) (any, bool) {
	if !cs.Has(lkey) {
		return nil, false
	}
	ms := func(d *time.Duration) any { return d.Milliseconds() }
	switch lkey {
	case "appname":
		return cs.AppName, true
	case "authmechanism":
		return cs.AuthMechanism, true
	case "authmechanismproperties":
		return cs.AuthMechanismProperties, true
	case "authsource":
		return cs.AuthSource, true
	case "compressors":
		return cs.Compressors, true
	case "zlibcompressionlevel":
		return *cs.ZlibCompressionLevel, true
	case "connecttimeoutms":
		return ms(cs.ConnectTimeout), true
	case "directconnection":
		return *cs.DirectConnection, true
	case "heartbeatfrequencyms":
		return ms(cs.HeartbeatFrequency), true
	case "journal":
		return *cs.Journal, true
	case "loadbalanced":
		return *cs.LoadBalanced, true
	case "localthresholdms":
		return ms(cs.LocalThreshold), true
	case "maxidletimems":
		return ms(cs.MaxIdleTime), true
	case "maxpoolsize":
		return *cs.MaxPoolSize, true
	case "minpoolsize":
		return *cs.MinPoolSize, true
	case "maxconnecting":
		return *cs.MaxConnecting, true
	case "maxstalenessseconds":
		return *cs.MaxStalenessSeconds, true
	case "readconcernlevel":
		return cs.ReadConcernLevel, true
	case "readpreference":
		if cs.ReadPreference == nil {
			return nil, false
		}
		return cs.ReadPreference.String(), true
	case "readpreferencetags":
		return cs.ReadPreferenceTags, true
	case "replicaset":
		return cs.ReplicaSet, true
	case "retryreads":
		return *cs.RetryReads, true
	case "retrywrites":
		return *cs.RetryWrites, true
	case "servermonitoringmode":
		return cs.ServerMonitoringMode, true
	case "serverselectiontimeoutms":
		return ms(cs.ServerSelectionTimeout), true
	case "serverselectiontryonce":
		return *cs.ServerSelectionTryOnce, true
	case "sockettimeoutms":
		return ms(cs.SocketTimeout), true
	case "srvmaxhosts":
		return *cs.SRVMaxHosts, true
	case "srvservicename":
		return cs.SRVServiceName, true
	case "timeoutms":
		return ms(cs.Timeout), true
	case "tls", "ssl":
		return *cs.TLS, true
	case "tlsallowinvalidcertificates":
		return *cs.TLSAllowInvalidCertificates, true
	case "tlsallowinvalidhostnames":
		return *cs.TLSAllowInvalidHostnames, true
	case "tlscafile":
		return cs.TLSCAFile, true
	case "tlscertificatekeyfile":
		return cs.TLSCertificateKeyFile, true
	case "tlscertificatekeyfilepassword":
		return cs.TLSCertificateKeyFilePassword, true
	case "tlsdisablecertificaterevocationcheck":
		return *cs.TLSDisableCertificateRevocationCheck, true
	case "tlsdisableocspendpointcheck":
		return *cs.TLSDisableOCSPEndpointCheck, true
	case "tlsinsecure":
		return *cs.TLSInsecure, true
	case "w":
		return cs.W, true
	case "wtimeoutms":
		return ms(cs.WTimeout), true
	case "waitqueuetimeoutms":
		return ms(cs.WaitQueueTimeout), true
	case "maxadaptiveretries":
		return *cs.MaxAdaptiveRetries, true
	case "adaptiveretries":
		return *cs.AdaptiveRetries, true
	case "enableoverloadretargeting":
		return *cs.EnableOverloadRetargeting, true
	}
	return nil, false
}
