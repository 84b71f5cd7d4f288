package sturdy

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/sturdy-go/sturdy/internal/connstring"
)

// URIError is a connection string ParseURI rejects. Option names the
// offending option ("" for a syntax error).
type URIError = connstring.Error

// ParseURI parses a mongodb:// or mongodb+srv:// connection string into
// Options. It is stricter than the connection string specification asks:
// an option with an invalid value is an error naming the option, not a
// warning, so a typo cannot silently fall back to a default. Unknown options
// are tolerated and listed in Options.Warnings.
//
// TLS is on when tls=true (or ssl=true), for mongodb+srv unless tls=false,
// and when tlsCAFile or tlsCertificateKeyFile is given without tls=false.
// tlsInsecure and tlsAllowInvalidCertificates disable certificate
// verification (and with it hostname verification); tlsAllowInvalidHostnames
// keeps verifying the chain but not the name. Go performs no OCSP or CRL
// checks, so tlsDisableOCSPEndpointCheck and
// tlsDisableCertificateRevocationCheck change nothing.
//
// The SRV name of a mongodb+srv URI is kept in SRVHost; Connect resolves it.
func ParseURI(uri string) (Options, error) {
	cs, err := connstring.Parse(uri)
	if err != nil {
		return Options{}, err
	}
	var o Options
	for _, w := range cs.Warnings {
		if w.Kind == connstring.InvalidValue {
			return Options{}, &URIError{Option: w.Option, Msg: w.Msg}
		}
		o.Warnings = append(o.Warnings, w.Error())
	}
	if err := o.fromConnString(cs); err != nil {
		return Options{}, err
	}
	if err := o.validate(); err != nil {
		return Options{}, err
	}
	return o, nil
}

func (o *Options) fromConnString(cs *connstring.ConnString) error {
	if cs.ProxyHost != "" {
		return uriError("proxyHost", "SOCKS5 proxy options (proxyHost, ...) are not supported; use Options.Dialer")
	}
	o.topologyFrom(cs)
	if err := o.tlsFrom(cs); err != nil {
		return err
	}
	if err := o.credentialFrom(cs); err != nil {
		return err
	}
	o.AppName = cs.AppName
	o.poolFrom(cs)
	o.timeoutsFrom(cs)
	o.writeConcernFrom(cs)
	if err := o.readPreferenceFrom(cs); err != nil {
		return err
	}
	o.ReadConcernLevel = cs.ReadConcernLevel
	o.compressionFrom(cs)
	o.retriesFrom(cs)
	o.warningsFrom(cs)
	return nil
}

func uriError(option, format string, args ...any) error {
	return &URIError{Option: option, Msg: fmt.Sprintf(format, args...)}
}

// topologyFrom takes the hosts and how to treat them.
func (o *Options) topologyFrom(cs *connstring.ConnString) {
	if cs.IsSRV() {
		o.SRVHost = cs.SRVHost
		o.SRVServiceName = cs.SRVServiceName
	}
	for _, h := range cs.Hosts {
		o.Hosts = append(o.Hosts, h.Address())
	}
	if cs.SRVMaxHosts != nil {
		o.SRVMaxHosts = *cs.SRVMaxHosts
	}
	o.ReplicaSet = cs.ReplicaSet
	o.Direct = cs.DirectConnection != nil && *cs.DirectConnection
	if cs.LoadBalanced != nil {
		o.LoadBalanced = *cs.LoadBalanced
		o.uri.loadBalanced = true
	}
	o.ServerMonitoringMode = cs.ServerMonitoringMode
}

func (o *Options) tlsFrom(cs *connstring.ConnString) error {
	if cs.TLSEnabled() {
		cfg, err := tlsConfig(cs)
		if err != nil {
			return err
		}
		o.TLS = cfg
		return nil
	}
	if cs.TLSCAFile != "" || cs.TLSCertificateKeyFile != "" || isTrue(cs.TLSInsecure) ||
		isTrue(cs.TLSAllowInvalidCertificates) || isTrue(cs.TLSAllowInvalidHostnames) {
		return uriError("tls", "TLS options are given but tls=false")
	}
	return nil
}

func (o *Options) poolFrom(cs *connstring.ConnString) {
	if cs.MaxPoolSize != nil {
		o.MaxPoolSize = *cs.MaxPoolSize
		if o.MaxPoolSize == 0 { // maxPoolSize=0 means no limit
			o.MaxPoolSize = -1
		}
	}
	setInt(&o.MinPoolSize, cs.MinPoolSize)
	setInt(&o.MaxConnecting, cs.MaxConnecting)
	setDuration(&o.MaxIdleTime, cs.MaxIdleTime)
}

// timeoutsFrom maps the URI's 0 ("none") to Options' negative value, since
// a zero Options field stands for the default.
func (o *Options) timeoutsFrom(cs *connstring.ConnString) {
	if cs.ConnectTimeout != nil {
		o.ConnectTimeout = *cs.ConnectTimeout
		if o.ConnectTimeout == 0 { // connectTimeoutMS=0 means no timeout
			o.ConnectTimeout = -1
		}
	}
	setDuration(&o.SocketTimeout, cs.SocketTimeout)
	setDuration(&o.ServerSelectionTimeout, cs.ServerSelectionTimeout)
	setDuration(&o.HeartbeatInterval, cs.HeartbeatFrequency)
	if cs.LocalThreshold != nil {
		d := *cs.LocalThreshold
		o.LocalThreshold = &d
	}
	setDuration(&o.Timeout, cs.Timeout)
	if cs.Timeout != nil && *cs.Timeout == 0 {
		o.Timeout = -1 // timeoutMS=0: set, without a limit
	}
}

func (o *Options) writeConcernFrom(cs *connstring.ConnString) {
	if cs.W == nil && cs.WTimeout == nil && cs.Journal == nil {
		return
	}
	wc := &WriteConcern{W: cs.W}
	setDuration(&wc.WTimeout, cs.WTimeout)
	if cs.Journal != nil {
		j := *cs.Journal
		wc.Journal = &j
	}
	o.WriteConcern = wc
}

func (o *Options) readPreferenceFrom(cs *connstring.ConnString) error {
	if cs.ReadPreference == nil && len(cs.ReadPreferenceTags) == 0 && cs.MaxStalenessSeconds == nil {
		return nil
	}
	rp := &ReadPreference{}
	if cs.ReadPreference != nil {
		rp.Mode = *cs.ReadPreference
	}
	for _, tags := range cs.ReadPreferenceTags {
		ts := TagSet{}
		for k, v := range tags {
			ts[k] = v
		}
		rp.TagSets = append(rp.TagSets, ts)
	}
	if s := cs.MaxStalenessSeconds; s != nil && *s > 0 {
		rp.MaxStaleness = time.Duration(*s) * time.Second
	}
	o.ReadPreference = rp
	return nil
}

func (o *Options) compressionFrom(cs *connstring.ConnString) {
	o.Compressors = append([]string(nil), cs.Compressors...)
	if cs.ZlibCompressionLevel != nil {
		l := *cs.ZlibCompressionLevel
		o.ZlibLevel = &l
	}
}

func (o *Options) retriesFrom(cs *connstring.ConnString) {
	o.RetryWrites = copyBool(cs.RetryWrites)
	o.RetryReads = copyBool(cs.RetryReads)
	if cs.MaxAdaptiveRetries != nil {
		n := *cs.MaxAdaptiveRetries
		o.MaxAdaptiveRetries = &n
	}
	o.AdaptiveRetries = copyBool(cs.AdaptiveRetries)
	o.EnableOverloadRetargeting = copyBool(cs.EnableOverloadRetargeting)
}

// warningsFrom notes the options that are parsed but do not apply.
func (o *Options) warningsFrom(cs *connstring.ConnString) {
	if cs.ServerSelectionTryOnce != nil {
		o.Warnings = append(o.Warnings, "sturdy: serverSelectionTryOnce ignored: it applies to single-threaded drivers only")
	}
	if cs.WaitQueueTimeout != nil {
		o.Warnings = append(o.Warnings, "sturdy: waitQueueTimeoutMS ignored: bound the wait with the operation's context or timeoutMS")
	}
}

// credentialFrom builds the credential, applying the auth specification's
// default source for the mechanism.
func (o *Options) credentialFrom(cs *connstring.ConnString) error {
	if !cs.HasUsername && cs.AuthMechanism == "" {
		return nil // an auth database or authSource alone does not ask for authentication
	}
	c := &Credential{
		Mechanism:   cs.AuthMechanism,
		Username:    cs.Username,
		Password:    cs.Password,
		PasswordSet: cs.HasPassword,
	}
	if len(cs.AuthMechanismProperties) > 0 {
		c.MechanismProperties = make(map[string]string, len(cs.AuthMechanismProperties))
		for k, v := range cs.AuthMechanismProperties {
			c.MechanismProperties[k] = v
		}
	}
	switch {
	case cs.Has("authSource"):
		c.Source = cs.AuthSource
		o.uri.authSource = true
	case c.Mechanism == MechanismX509 || c.Mechanism == "GSSAPI" || c.Mechanism == "MONGODB-AWS" || c.Mechanism == "MONGODB-OIDC":
		c.Source = "$external"
	case cs.Database != "":
		c.Source = cs.Database
	case c.Mechanism == MechanismPLAIN:
		c.Source = "$external"
	default:
		c.Source = "admin"
	}
	o.uri.defaultedSource = !o.uri.authSource
	o.Auth = c
	return nil
}

func setInt(dst *int, v *int) {
	if v != nil {
		*dst = *v
	}
}

func setDuration(dst *time.Duration, v *time.Duration) {
	if v != nil {
		*dst = *v
	}
}

func isTrue(b *bool) bool { return b != nil && *b }

func copyBool(b *bool) *bool {
	if b == nil {
		return nil
	}
	v := *b
	return &v
}

// tlsConfig builds the TLS configuration the tls* options describe.
func tlsConfig(cs *connstring.ConnString) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if cs.TLSCAFile != "" {
		pemData, err := os.ReadFile(cs.TLSCAFile)
		if err != nil {
			return nil, &URIError{Option: "tlsCAFile", Msg: "cannot read tlsCAFile", Err: err}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemData) {
			return nil, &URIError{Option: "tlsCAFile", Msg: fmt.Sprintf("tlsCAFile %q contains no PEM certificates", cs.TLSCAFile)}
		}
		cfg.RootCAs = pool
	}
	if cs.TLSCertificateKeyFile != "" {
		cert, err := loadCertificateKeyFile(cs.TLSCertificateKeyFile, cs.TLSCertificateKeyFilePassword)
		if err != nil {
			return nil, &URIError{Option: "tlsCertificateKeyFile", Msg: fmt.Sprintf("cannot load tlsCertificateKeyFile %q", cs.TLSCertificateKeyFile), Err: err}
		}
		cfg.Certificates = []tls.Certificate{cert}
	} else if cs.TLSCertificateKeyFilePassword != "" {
		return nil, &URIError{Option: "tlsCertificateKeyFilePassword", Msg: "tlsCertificateKeyFilePassword needs tlsCertificateKeyFile"}
	}
	switch {
	case isTrue(cs.TLSInsecure) || isTrue(cs.TLSAllowInvalidCertificates):
		cfg.InsecureSkipVerify = true
	case isTrue(cs.TLSAllowInvalidHostnames):
		// Skip Go's combined chain+name check and verify the chain alone.
		cfg.InsecureSkipVerify = true
		roots := cfg.RootCAs
		cfg.VerifyConnection = func(st tls.ConnectionState) error {
			return verifyChainOnly(st, roots)
		}
	}
	return cfg, nil
}

// verifyChainOnly verifies the peer's certificate chain against roots (nil:
// the system pool) without checking the host name.
func verifyChainOnly(st tls.ConnectionState, roots *x509.CertPool) error {
	if len(st.PeerCertificates) == 0 {
		return errors.New("sturdy: server presented no TLS certificate")
	}
	opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
	for _, c := range st.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	_, err := st.PeerCertificates[0].Verify(opts)
	return err
}

// loadCertificateKeyFile reads a PEM file holding the client certificate
// (and its chain) and the private key. An encrypted key is decrypted with
// password; only the legacy PEM encryption (RFC 1423) is supported.
func loadCertificateKeyFile(path, password string) (tls.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return tls.Certificate{}, err
	}
	var certPEM, keyPEM []byte
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		switch {
		case block.Type == "CERTIFICATE":
			certPEM = append(certPEM, pem.EncodeToMemory(block)...)
		case block.Type == "ENCRYPTED PRIVATE KEY":
			return tls.Certificate{}, errors.New("encrypted PKCS #8 private keys are not supported; use an unencrypted key or legacy PEM encryption")
		case len(block.Type) >= 11 && block.Type[len(block.Type)-11:] == "PRIVATE KEY":
			// Deprecated in crypto/x509, but legacy PEM encryption is what
			// tlsCertificateKeyFilePassword exists for.
			//lint:ignore SA1019 legacy PEM encryption is what tlsCertificateKeyFilePassword decrypts.
			if x509.IsEncryptedPEMBlock(block) {
				if password == "" {
					return tls.Certificate{}, errors.New("the private key is encrypted: set tlsCertificateKeyFilePassword")
				}
				//lint:ignore SA1019 as above.
				der, err := x509.DecryptPEMBlock(block, []byte(password))
				if err != nil {
					return tls.Certificate{}, fmt.Errorf("decrypting the private key: %w", err)
				}
				if !isPrivateKey(der) {
					// The padding check misses about one wrong password
					// in 256: the "decrypted" bytes are then garbage.
					return tls.Certificate{}, fmt.Errorf("decrypting the private key: the result is not a key: %w", x509.IncorrectPasswordError)
				}
				block = &pem.Block{Type: block.Type, Bytes: der}
			}
			keyPEM = pem.EncodeToMemory(block)
		}
	}
	if certPEM == nil {
		return tls.Certificate{}, errors.New("no CERTIFICATE block")
	}
	if keyPEM == nil {
		return tls.Certificate{}, errors.New("no PRIVATE KEY block")
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

// isPrivateKey reports whether der parses as a private key in one of the
// encodings tls.X509KeyPair reads.
func isPrivateKey(der []byte) bool {
	if _, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return true
	}
	if _, err := x509.ParsePKCS8PrivateKey(der); err == nil {
		return true
	}
	_, err := x509.ParseECPrivateKey(der)
	return err == nil
}

// resolveSRV returns a copy of o whose Hosts are the seeds the SRV records of
// o.SRVHost name (SRVHost cleared), with the TXT record's authSource,
// replicaSet and loadBalanced applied where the configuration did not set
// them. Options without SRVHost are returned unchanged. Connect calls it.
func (o Options) resolveSRV(ctx context.Context) (Options, error) {
	if o.SRVHost == "" {
		return o, nil
	}
	var r connstring.Resolver = net.DefaultResolver
	if o.Resolver != nil {
		r = o.Resolver
	}
	return o.resolveSRVWith(ctx, r)
}

func (o Options) resolveSRVWith(ctx context.Context, r connstring.Resolver) (Options, error) {
	if o.SRVHost == "" {
		return o, nil
	}
	sl, err := connstring.LookupSeedlist(ctx, r, o.SRVHost, cmp.Or(o.SRVServiceName, connstring.Defaults.SRVServiceName), o.SRVMaxHosts)
	if err != nil {
		return Options{}, err
	}
	o.Hosts = make([]string, 0, len(sl.Hosts))
	for _, h := range sl.Hosts {
		o.Hosts = append(o.Hosts, h.Address())
	}
	o.SRVHost, o.SRVServiceName, o.SRVMaxHosts = "", "", 0
	if sl.ReplicaSet != nil && o.ReplicaSet == "" {
		o.ReplicaSet = *sl.ReplicaSet
	}
	if sl.LoadBalanced != nil && !o.uri.loadBalanced && !o.LoadBalanced {
		o.LoadBalanced = *sl.LoadBalanced
	}
	// A source the URI named explicitly, or one set by hand in Options,
	// wins over the TXT record; a defaulted one does not.
	if sl.AuthSource != nil && o.Auth != nil && !o.uri.authSource && (o.Auth.Source == "" || o.uri.defaultedSource) {
		c := *o.Auth
		c.Source = *sl.AuthSource
		o.Auth = &c
	}
	if err := o.validate(); err != nil {
		return Options{}, err
	}
	return o, nil
}
