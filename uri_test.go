package sturdy

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sturdy-go/sturdy/internal/testsupport"
)

func TestParseURIMapsEveryOption(t *testing.T) {
	o, err := ParseURI("mongodb://alice:s%40cret@h1,h2:27018/app?replicaSet=rs0&appName=demo" +
		"&maxPoolSize=50&minPoolSize=5&maxConnecting=3&maxIdleTimeMS=60000&connectTimeoutMS=2000&socketTimeoutMS=3000" +
		"&serverSelectionTimeoutMS=4000&heartbeatFrequencyMS=5000&localThresholdMS=0&timeoutMS=7000&serverMonitoringMode=poll" +
		"&w=majority&wTimeoutMS=800&journal=true&readPreference=secondaryPreferred&readPreferenceTags=dc:ny,rack:1" +
		"&readPreferenceTags=&maxStalenessSeconds=120&readConcernLevel=majority&compressors=zstd,zlib&zlibCompressionLevel=6" +
		"&retryWrites=false&retryReads=false&maxAdaptiveRetries=2&adaptiveRetries=false&enableOverloadRetargeting=false")
	if err != nil {
		t.Fatal(err)
	}
	zero := time.Duration(0)
	want := Options{
		Hosts:                  []string{"h1:27017", "h2:27018"},
		ReplicaSet:             "rs0",
		Auth:                   &Credential{Username: "alice", Password: "s@cret", PasswordSet: true, Source: "app"},
		AppName:                "demo",
		MaxPoolSize:            50,
		MinPoolSize:            5,
		MaxConnecting:          3,
		MaxIdleTime:            time.Minute,
		ConnectTimeout:         2 * time.Second,
		SocketTimeout:          3 * time.Second,
		ServerSelectionTimeout: 4 * time.Second,
		HeartbeatInterval:      5 * time.Second,
		LocalThreshold:         &zero,
		Timeout:                7 * time.Second,
		ServerMonitoringMode:   "poll",
		WriteConcern:           &WriteConcern{W: "majority", WTimeout: 800 * time.Millisecond, Journal: uriTestPtr(true)},
		ReadPreference: &ReadPreference{Mode: SecondaryPreferredMode, TagSets: []TagSet{{"dc": "ny", "rack": "1"}, {}},
			MaxStaleness: 2 * time.Minute},
		ReadConcernLevel:          "majority",
		Compressors:               []string{"zstd", "zlib"},
		ZlibLevel:                 uriTestPtr(6),
		RetryWrites:               uriTestPtr(false),
		RetryReads:                uriTestPtr(false),
		MaxAdaptiveRetries:        uriTestPtr(2),
		AdaptiveRetries:           uriTestPtr(false),
		EnableOverloadRetargeting: uriTestPtr(false),
		uri:                       uriExplicit{defaultedSource: true},
	}
	if !reflect.DeepEqual(o, want) {
		t.Errorf("ParseURI =\n%+v\nwant\n%+v", o, want)
	}
}

func TestParseURIDefaultsStayZero(t *testing.T) {
	o, err := ParseURI("mongodb://localhost")
	if err != nil {
		t.Fatal(err)
	}
	want := Options{Hosts: []string{"localhost:27017"}}
	if !reflect.DeepEqual(o, want) {
		t.Errorf("ParseURI = %+v, want %+v", o, want)
	}
}

func TestParseURISpecialZeros(t *testing.T) {
	o, err := ParseURI("mongodb://h/?maxPoolSize=0&connectTimeoutMS=0&w=0&maxStalenessSeconds=-1&readPreference=nearest")
	if err != nil {
		t.Fatal(err)
	}
	if o.MaxPoolSize != -1 || o.ConnectTimeout != -1 {
		t.Errorf("maxPoolSize=0 → %d, connectTimeoutMS=0 → %v; want -1 (unlimited / none)", o.MaxPoolSize, o.ConnectTimeout)
	}
	if !o.WriteConcern.Unacknowledged() || o.ReadPreference.MaxStaleness != 0 || o.ReadPreference.Mode != NearestMode {
		t.Errorf("w=0 / maxStalenessSeconds=-1: %+v %+v", o.WriteConcern, o.ReadPreference)
	}
}

func TestParseURIInvalidValueIsAnErrorNamingTheOption(t *testing.T) {
	_, err := ParseURI("mongodb://h/?maxPoolSize=abc")
	var ue *URIError
	if !errors.As(err, &ue) || ue.Option != "maxPoolSize" {
		t.Fatalf("err = %v, want *URIError for maxPoolSize", err)
	}
	if want := `connection string: invalid value for maxPoolSize: "abc" (must be a non-negative integer)`; err.Error() != want {
		t.Errorf("err = %q, want %q", err, want)
	}
	for uri, option := range map[string]string{
		"mongodb://h/?heartbeatFrequencyMS=499":       "heartbeatFrequencyMS",
		"mongodb://h/?maxAdaptiveRetries=-5":          "maxAdaptiveRetries",
		"mongodb://h/?enableOverloadRetargeting=nope": "enableOverloadRetargeting",
		"mongodb://h/?adaptiveRetries=2":              "adaptiveRetries",
		"mongodb://h/?readPreference=fastest":         "readPreference",
		"mongodb://h/?zlibCompressionLevel=10":        "zlibCompressionLevel",
	} {
		_, err := ParseURI(uri)
		if !errors.As(err, &ue) || ue.Option != option || !strings.Contains(err.Error(), option) {
			t.Errorf("ParseURI(%q) = %v, want an error naming %s", uri, err, option)
		}
	}
}

func TestParseURIWarnings(t *testing.T) {
	o, err := ParseURI("mongodb://h/?connectMS=5&journal=yes&serverSelectionTryOnce=false&compressors=lz4,zlib")
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(o.Warnings, "\n")
	for _, want := range []string{`unsupported option "connectMS"`, "deprecated boolean value for journal", "serverSelectionTryOnce ignored", `unsupported compressor "lz4"`} {
		if !strings.Contains(joined, want) {
			t.Errorf("warnings %q lack %q", o.Warnings, want)
		}
	}
	if !reflect.DeepEqual(o.Compressors, []string{"zlib"}) {
		t.Errorf("compressors = %v", o.Compressors)
	}
}

func TestParseURIErrors(t *testing.T) {
	for uri, want := range map[string]string{
		"mongodb://a,b/?directConnection=true":                           "directConnection=true needs exactly one host",
		"mongodb://h/?minPoolSize=10&maxPoolSize=5":                      "minPoolSize (10) is greater than maxPoolSize (5)",
		"mongodb://h/?minPoolSize=101":                                   "MinPoolSize 101 is greater than MaxPoolSize 100",
		"mongodb://h/?tlsInsecure=true&tlsAllowInvalidCertificates=true": "tlsInsecure and tlsAllowInvalidCertificates cannot both be given",
		"mongodb://h/?tls=false&tlsCAFile=/x.pem":                        "TLS options are given but tls=false",
		"mongodb://h/?proxyHost=p":                                       "proxy options",
		"mongodb://u@h/?authMechanism=GSSAPI":                            `"GSSAPI" is not supported`,
		"mongodb://h/?tls=true&tlsCAFile=/nonexistent":                   "cannot read tlsCAFile",
		"mongodb://h/?maxStalenessSeconds=30&readPreference=secondary":   "below the minimum",
		"mongodb://h:99999":                                              "invalid port",
		"postgres://h":                                                   "unsupported scheme",
	} {
		_, err := ParseURI(uri)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseURI(%q) = %v, want an error containing %q", uri, err, want)
		}
	}
}

func TestParseURICredentials(t *testing.T) {
	cases := []struct {
		uri  string
		want *Credential
	}{
		{"mongodb://h/db?authSource=x", nil},
		{"mongodb://u:p@h", &Credential{Username: "u", Password: "p", PasswordSet: true, Source: "admin"}},
		{"mongodb://u@h/db", &Credential{Username: "u", Source: "db"}},
		{"mongodb://u:p@h/db?authSource=other&authMechanism=scram-sha-256",
			&Credential{Mechanism: MechanismSCRAMSHA256, Username: "u", Password: "p", PasswordSet: true, Source: "other"}},
		{"mongodb://h/db?authMechanism=MONGODB-X509", &Credential{Mechanism: MechanismX509, Source: "$external"}},
		{"mongodb://CN%3Dme@h/?authMechanism=MONGODB-X509", &Credential{Mechanism: MechanismX509, Username: "CN=me", Source: "$external"}},
		{"mongodb://u:p@h/?authMechanism=PLAIN", &Credential{Mechanism: MechanismPLAIN, Username: "u", Password: "p", PasswordSet: true, Source: "$external"}},
		{"mongodb://u:p@h/ldap?authMechanism=PLAIN", &Credential{Mechanism: MechanismPLAIN, Username: "u", Password: "p", PasswordSet: true, Source: "ldap"}},
	}
	for _, c := range cases {
		o, err := ParseURI(c.uri)
		if err != nil {
			t.Errorf("ParseURI(%q): %v", c.uri, err)
			continue
		}
		if !reflect.DeepEqual(o.Auth, c.want) {
			t.Errorf("ParseURI(%q).Auth = %+v, want %+v", c.uri, o.Auth, c.want)
		}
	}
}

// uriTestDNS is a DNS stub for SRV resolution.
type uriTestDNS struct {
	srv []*net.SRV
	txt []string
}

func (d uriTestDNS) LookupSRV(_ context.Context, service, proto, name string) (string, []*net.SRV, error) {
	if service != "mongodb" || proto != "tcp" || name != "cluster0.example.com" {
		return "", nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
	}
	return "", d.srv, nil
}

func (d uriTestDNS) LookupTXT(context.Context, string) ([]string, error) {
	if d.txt == nil {
		return nil, &net.DNSError{Err: "no such host", IsNotFound: true}
	}
	return d.txt, nil
}

func TestParseURISRVAndResolve(t *testing.T) {
	o, err := ParseURI("mongodb+srv://u:p@cluster0.example.com/mydb?retryWrites=true")
	if err != nil {
		t.Fatal(err)
	}
	if o.SRVHost != "cluster0.example.com" || len(o.Hosts) != 0 || o.TLS == nil || o.TLS.InsecureSkipVerify {
		t.Fatalf("srv options: host %q hosts %v tls %+v", o.SRVHost, o.Hosts, o.TLS)
	}
	dns := uriTestDNS{
		srv: []*net.SRV{{Target: "a.example.com.", Port: 27017}, {Target: "b.example.com.", Port: 27018}},
		txt: []string{"authSource=txtdb&replicaSet=rs9"},
	}
	r, err := o.resolveSRVWith(context.Background(), dns)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.Hosts, []string{"a.example.com:27017", "b.example.com:27018"}) || r.SRVHost != "" {
		t.Errorf("resolved hosts = %v (SRVHost %q)", r.Hosts, r.SRVHost)
	}
	if r.ReplicaSet != "rs9" || r.Auth.Source != "txtdb" {
		t.Errorf("TXT options: replicaSet %q source %q", r.ReplicaSet, r.Auth.Source)
	}
	if o.Auth.Source != "mydb" {
		t.Errorf("resolveSRVWith modified the original credential: %q", o.Auth.Source)
	}

	// An explicit authSource and replicaSet win over the TXT record.
	o, err = ParseURI("mongodb+srv://u:p@cluster0.example.com/?authSource=uri&replicaSet=uriRS")
	if err != nil {
		t.Fatal(err)
	}
	r, err = o.resolveSRVWith(context.Background(), dns)
	if err != nil {
		t.Fatal(err)
	}
	if r.ReplicaSet != "uriRS" || r.Auth.Source != "uri" {
		t.Errorf("URI options overridden by TXT: replicaSet %q source %q", r.ReplicaSet, r.Auth.Source)
	}

	// TXT loadBalanced=true with two SRV hosts is invalid.
	o, _ = ParseURI("mongodb+srv://cluster0.example.com")
	dns.txt = []string{"loadBalanced=true"}
	if _, err := o.resolveSRVWith(context.Background(), dns); err == nil || !strings.Contains(err.Error(), "load-balanced") {
		t.Errorf("loadBalanced with two hosts: err = %v", err)
	}
	// ...but the URI's loadBalanced=false wins.
	o, _ = ParseURI("mongodb+srv://cluster0.example.com/?loadBalanced=false")
	if r, err := o.resolveSRVWith(context.Background(), dns); err != nil || r.LoadBalanced {
		t.Errorf("URI loadBalanced=false: %v %v", r.LoadBalanced, err)
	}
	// A target outside the domain is refused.
	dns = uriTestDNS{srv: []*net.SRV{{Target: "evil.org.", Port: 27017}}}
	if _, err := o.resolveSRVWith(context.Background(), dns); err == nil {
		t.Error("target outside the SRV domain accepted")
	}
	// Options without SRVHost are returned unchanged.
	plain := Options{Hosts: []string{"x:1"}}
	if r, err := plain.resolveSRV(context.Background()); err != nil || !reflect.DeepEqual(r, plain) {
		t.Errorf("resolveSRV without SRVHost = %+v, %v", r, err)
	}
}

func TestParseURITLSFlags(t *testing.T) {
	for uri, insecure := range map[string]bool{
		"mongodb://h/?tls=true":                                  false,
		"mongodb://h/?ssl=true&tlsInsecure=true":                 true,
		"mongodb://h/?tls=true&tlsAllowInvalidCertificates=true": true,
	} {
		o, err := ParseURI(uri)
		if err != nil {
			t.Fatalf("ParseURI(%q): %v", uri, err)
		}
		if o.TLS == nil || o.TLS.InsecureSkipVerify != insecure || o.TLS.MinVersion != tls.VersionTLS12 {
			t.Errorf("ParseURI(%q).TLS = %+v", uri, o.TLS)
		}
	}
	o, err := ParseURI("mongodb+srv://cluster0.example.com/?tls=false")
	if err != nil || o.TLS != nil {
		t.Errorf("mongodb+srv with tls=false: TLS %+v, err %v", o.TLS, err)
	}
}

// uriTestPKI is a CA, a server certificate for "db.example.test" and a
// client certificate, written as PEM files.
type uriTestPKI struct {
	caFile, clientFile, encClientFile string
	server                            tls.Certificate
}

func newURITestPKI(t *testing.T) uriTestPKI {
	t.Helper()
	dir := t.TempDir()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey := newKey()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sturdy test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, cn string, usage x509.ExtKeyUsage, dns []string) ([]byte, *ecdsa.PrivateKey) {
		k := newKey()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn}, DNSNames: dns,
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, k
	}
	pemOf := func(typ string, b []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}) }
	keyDER := func(k *ecdsa.PrivateKey) []byte {
		b, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	write := func(name string, parts ...[]byte) string {
		p := filepath.Join(dir, name)
		var all []byte
		for _, b := range parts {
			all = append(all, b...)
		}
		if err := os.WriteFile(p, all, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var pki uriTestPKI
	pki.caFile = write("ca.pem", pemOf("CERTIFICATE", caDER))

	srvDER, srvKey := issue(2, "db", x509.ExtKeyUsageServerAuth, []string{"db.example.test"})
	pki.server, err = tls.X509KeyPair(pemOf("CERTIFICATE", srvDER), pemOf("EC PRIVATE KEY", keyDER(srvKey)))
	if err != nil {
		t.Fatal(err)
	}
	cliDER, cliKey := issue(3, "client", x509.ExtKeyUsageClientAuth, nil)
	pki.clientFile = write("client.pem", pemOf("CERTIFICATE", cliDER), pemOf("EC PRIVATE KEY", keyDER(cliKey)))
	// Legacy PEM encryption (deprecated in crypto/x509) is what
	// tlsCertificateKeyFilePassword decrypts.
	//lint:ignore SA1019 the test needs a legacy-encrypted key.
	enc, err := x509.EncryptPEMBlock(rand.Reader, "EC PRIVATE KEY", keyDER(cliKey), []byte("s3cret"), x509.PEMCipherAES256)
	if err != nil {
		t.Fatal(err)
	}
	pki.encClientFile = write("client-enc.pem", pemOf("CERTIFICATE", cliDER), pem.EncodeToMemory(enc))
	return pki
}

// handshake runs a TLS handshake against a loopback server presenting the
// test server certificate (and requiring a client certificate signed by the
// test CA when requireClient) and dialled as serverName.
func handshake(t *testing.T, pki uriTestPKI, cfg *tls.Config, serverName string, requireClient bool) error {
	t.Helper()
	caPool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(pki.caFile)
	caPool.AppendCertsFromPEM(caPEM)
	srvCfg := &tls.Config{Certificates: []tls.Certificate{pki.server}}
	if requireClient {
		srvCfg.ClientAuth, srvCfg.ClientCAs = tls.RequireAndVerifyClientCert, caPool
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srvCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_ = c.(*tls.Conn).Handshake()
		_ = c.Close()
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cc := cfg.Clone()
	cc.ServerName = serverName
	conn := tls.Client(raw, cc)
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	err = conn.Handshake()
	if err == nil && requireClient {
		// TLS 1.3 reports a rejected client certificate on the first read.
		_, err = conn.Read(make([]byte, 1))
		if errors.Is(err, os.ErrDeadlineExceeded) || err != nil && strings.Contains(err.Error(), "EOF") {
			err = nil
		}
	}
	conn.Close()
	<-done
	return err
}

func TestParseURITLSHandshakes(t *testing.T) {
	pki := newURITestPKI(t)
	ca := url.QueryEscape(pki.caFile)
	parse := func(query string) *tls.Config {
		t.Helper()
		o, err := ParseURI("mongodb://db.example.test/?" + query)
		if err != nil {
			t.Fatalf("ParseURI(%q): %v", query, err)
		}
		return o.TLS
	}

	// tlsCAFile alone turns TLS on and trusts the test CA.
	cfg := parse("tlsCAFile=" + ca)
	if err := handshake(t, pki, cfg, "db.example.test", false); err != nil {
		t.Errorf("valid certificate and name: %v", err)
	}
	if err := handshake(t, pki, cfg, "other.example.test", false); err == nil {
		t.Error("wrong host name accepted without tlsAllowInvalidHostnames")
	}
	// tlsAllowInvalidHostnames still verifies the chain.
	cfg = parse("tlsCAFile=" + ca + "&tlsAllowInvalidHostnames=true")
	if err := handshake(t, pki, cfg, "other.example.test", false); err != nil {
		t.Errorf("tlsAllowInvalidHostnames with a wrong name: %v", err)
	}
	if err := handshake(t, pki, parse("tls=true&tlsAllowInvalidHostnames=true"), "db.example.test", false); err == nil {
		t.Error("tlsAllowInvalidHostnames accepted a certificate from an untrusted CA")
	}
	// Without the CA the certificate is refused, unless tlsInsecure.
	if err := handshake(t, pki, parse("tls=true"), "db.example.test", false); err == nil {
		t.Error("untrusted CA accepted")
	}
	if err := handshake(t, pki, parse("tls=true&tlsInsecure=true"), "other", false); err != nil {
		t.Errorf("tlsInsecure: %v", err)
	}

	// Client certificates, plain and with a legacy-encrypted key.
	cfg = parse("tlsCAFile=" + ca + "&tlsCertificateKeyFile=" + url.QueryEscape(pki.clientFile))
	if len(cfg.Certificates) != 1 {
		t.Fatalf("client certificates = %d", len(cfg.Certificates))
	}
	if err := handshake(t, pki, cfg, "db.example.test", true); err != nil {
		t.Errorf("client certificate: %v", err)
	}
	if err := handshake(t, pki, parse("tlsCAFile="+ca), "db.example.test", true); err == nil {
		t.Error("handshake without a client certificate succeeded against a server requiring one")
	}
	cfg = parse("tlsCAFile=" + ca + "&tlsCertificateKeyFile=" + url.QueryEscape(pki.encClientFile) + "&tlsCertificateKeyFilePassword=s3cret")
	if err := handshake(t, pki, cfg, "db.example.test", true); err != nil {
		t.Errorf("encrypted client key: %v", err)
	}
	for query, want := range map[string]string{
		"tlsCertificateKeyFile=" + url.QueryEscape(pki.encClientFile):                                        "tlsCertificateKeyFilePassword",
		"tlsCertificateKeyFile=" + url.QueryEscape(pki.encClientFile) + "&tlsCertificateKeyFilePassword=bad": "decrypting",
		"tlsCertificateKeyFile=" + url.QueryEscape(pki.caFile):                                               "no PRIVATE KEY",
		"tls=true&tlsCAFile=" + url.QueryEscape(pki.clientFile+".missing"):                                   "cannot read tlsCAFile",
	} {
		_, err := ParseURI("mongodb://h/?" + query)
		var ue *URIError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseURI(%q) = %v, want a URIError containing %q", query, err, want)
		}
	}
}

// A wrong password for a legacy-encrypted key is reported as one even when
// it gets past the decryption's padding check (about one wrong password in
// 256), instead of as a key that does not parse. The test looks for such a
// password, so it exercises that case on every run.
func TestParseURIWrongKeyPasswordPastPadding(t *testing.T) {
	pki := newURITestPKI(t)
	data, err := os.ReadFile(pki.encClientFile)
	if err != nil {
		t.Fatal(err)
	}
	var enc *pem.Block
	for rest := data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if strings.HasSuffix(b.Type, "PRIVATE KEY") {
			enc = b
		}
	}
	if enc == nil {
		t.Fatal("no key block in the encrypted key file")
	}
	wrong := ""
	for i := 0; i < 100000 && wrong == ""; i++ {
		p := "wrong" + strconv.Itoa(i)
		//lint:ignore SA1019 the test decrypts a legacy-encrypted key.
		if _, err := x509.DecryptPEMBlock(enc, []byte(p)); err == nil {
			wrong = p
		}
	}
	if wrong == "" {
		t.Fatal("no wrong password got past the padding check in 100 000 tries")
	}
	_, err = ParseURI("mongodb://h/?tlsCertificateKeyFile=" + url.QueryEscape(pki.encClientFile) + "&tlsCertificateKeyFilePassword=" + wrong)
	var ue *URIError
	if !errors.As(err, &ue) || !errors.Is(err, x509.IncorrectPasswordError) || !strings.Contains(err.Error(), "decrypting") {
		t.Fatalf("password %q: %v, want a URIError for an incorrect password", wrong, err)
	}
}

// Every URI the specification calls invalid is also refused by ParseURI.
func TestParseURIRejectsSpecInvalidURIs(t *testing.T) {
	dir := testsupport.SpecDir(t)
	files, _ := filepath.Glob(filepath.Join(dir, "connection-string", "tests", "invalid-uris.json"))
	if len(files) == 0 {
		t.Skipf("connection-string spec tests not found under %q (set SPEC_TESTS)", dir)
	}
	cases := connstringSpecURIs(t, files[0])
	for _, uri := range cases {
		if _, err := ParseURI(uri); err == nil {
			t.Errorf("ParseURI(%q) succeeded", uri)
		}
	}
}

func connstringSpecURIs(t *testing.T, file string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tests []struct {
			URI string `json:"uri"`
		} `json:"tests"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range doc.Tests {
		out = append(out, c.URI)
	}
	if len(out) == 0 {
		t.Fatalf("%s has no tests", file)
	}
	return out
}
