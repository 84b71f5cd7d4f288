package connstring

import (
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sturdy-go/sturdy/readpref"
)

// valueKind is the data type of an option's value.
type valueKind int

const (
	kindString valueKind = iota
	kindInt              // empty value: ignored
	kindBool             // empty value: ignored
	kindList             // repeated keys accumulate
)

type optionDef struct {
	name string // canonical spelling
	kind valueKind
	// apply sets the option from its decoded value (raw: as written, for
	// values that are split before decoding). It returns the rule the value
	// broke, or "" on success.
	apply func(cs *ConnString, value, raw string) string
}

// options maps lower-cased keys to their definitions. Filled by init,
// because the apply funcs refer back to helpers that use the table.
var options map[string]optionDef

// deprecatedAliases maps old lower-cased keys to their replacements.
var deprecatedAliases = map[string]string{"wtimeout": "wtimeoutms"}

func intOpt(name string, lo, hi int64, rule string, dst func(*ConnString) **int) optionDef {
	return optionDef{name: name, kind: kindInt, apply: func(cs *ConnString, v, _ string) string {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < lo || n > hi {
			return rule
		}
		i := int(n)
		*dst(cs) = &i
		return ""
	}}
}

// msOpt is an integer number of milliseconds of at least lo (64-bit when
// wide, else 32-bit).
func msOpt(name string, lo int64, wide bool, rule string, dst func(*ConnString) **time.Duration) optionDef {
	bits := 32
	if wide {
		bits = 64
	}
	return optionDef{name: name, kind: kindInt, apply: func(cs *ConnString, v, _ string) string {
		n, err := strconv.ParseInt(v, 10, bits)
		if err != nil || n < lo || n > math.MaxInt64/int64(time.Millisecond) {
			return rule
		}
		d := time.Duration(n) * time.Millisecond
		*dst(cs) = &d
		return ""
	}}
}

func boolOpt(name string, dst func(*ConnString) **bool) optionDef {
	return optionDef{name: name, kind: kindBool, apply: func(cs *ConnString, v, _ string) string {
		b, ok := cs.parseBool(name, v)
		if !ok {
			return `must be "true" or "false"`
		}
		*dst(cs) = &b
		return ""
	}}
}

func stringOpt(name string, dst func(*ConnString) *string) optionDef {
	return optionDef{name: name, kind: kindString, apply: func(cs *ConnString, v, _ string) string {
		*dst(cs) = v
		return ""
	}}
}

// enumOpt accepts one of the given values (ignoring case) and stores its
// canonical spelling.
func enumOpt(name string, values []string, dst func(*ConnString) *string) optionDef {
	rule := "must be one of " + strings.Join(values, ", ")
	return optionDef{name: name, kind: kindString, apply: func(cs *ConnString, v, _ string) string {
		for _, c := range values {
			if strings.EqualFold(c, v) {
				*dst(cs) = c
				return ""
			}
		}
		return rule
	}}
}

// readPreferenceRule lists readpref's mode names.
var readPreferenceRule = func() string {
	var names []string
	for m := readpref.Primary; m.Valid(); m++ {
		names = append(names, m.String())
	}
	return "must be one of " + strings.Join(names, ", ")
}()

const (
	ruleNonNeg   = "must be a non-negative integer"
	rulePositive = "must be a positive integer"
)

// SupportedCompressors are the compressor names kept from "compressors".
var SupportedCompressors = []string{"zstd", "zlib", "snappy"}

// AuthMechanisms are the authentication mechanism names the auth
// specification defines; others are rejected.
var AuthMechanisms = []string{"SCRAM-SHA-1", "SCRAM-SHA-256", "MONGODB-X509", "PLAIN", "GSSAPI", "MONGODB-AWS", "MONGODB-OIDC"}

func init() {
	defs := []optionDef{
		{name: "appName", apply: func(cs *ConnString, v, _ string) string {
			// Its length limit (Defaults.MaxAppNameBytes) is checked by the client.
			cs.AppName = v
			return ""
		}},
		{name: "authMechanism", apply: func(cs *ConnString, v, _ string) string {
			for _, m := range AuthMechanisms {
				if strings.EqualFold(m, v) {
					cs.AuthMechanism = m
					return ""
				}
			}
			return "must be one of " + strings.Join(AuthMechanisms, ", ")
		}},
		{name: "authMechanismProperties", apply: func(cs *ConnString, _, raw string) string {
			m, ok := parseKeyValues(raw, false)
			if !ok {
				return "must be comma-separated key:value pairs"
			}
			cs.AuthMechanismProperties = m
			return ""
		}},
		{name: "authSource", apply: func(cs *ConnString, v, _ string) string {
			if v == "" {
				return "must not be empty"
			}
			cs.AuthSource = v
			return ""
		}},
		{name: "compressors", apply: func(cs *ConnString, _, raw string) string {
			cs.Compressors = cs.Compressors[:0]
			for _, part := range strings.Split(raw, ",") {
				name, err := url.PathUnescape(strings.TrimSpace(part))
				if err != nil {
					return "must be a comma-separated list of compressor names"
				}
				name = strings.ToLower(name)
				if !contains(SupportedCompressors, name) {
					cs.warn(UnsupportedValue, "compressors", name,
						fmt.Sprintf("unsupported compressor %q ignored (supported: %s)", name, strings.Join(SupportedCompressors, ", ")))
					continue
				}
				if !contains(cs.Compressors, name) {
					cs.Compressors = append(cs.Compressors, name)
				}
			}
			return ""
		}},
		intOpt("zlibCompressionLevel", -1, 9, "must be an integer from -1 to 9", func(cs *ConnString) **int { return &cs.ZlibCompressionLevel }),
		msOpt("connectTimeoutMS", 0, false, ruleNonNeg, func(cs *ConnString) **time.Duration { return &cs.ConnectTimeout }),
		boolOpt("directConnection", func(cs *ConnString) **bool { return &cs.DirectConnection }),
		msOpt("heartbeatFrequencyMS", 500, false, "must be an integer of at least 500", func(cs *ConnString) **time.Duration { return &cs.HeartbeatFrequency }),
		boolOpt("journal", func(cs *ConnString) **bool { return &cs.Journal }),
		boolOpt("loadBalanced", func(cs *ConnString) **bool { return &cs.LoadBalanced }),
		msOpt("localThresholdMS", 0, false, ruleNonNeg, func(cs *ConnString) **time.Duration { return &cs.LocalThreshold }),
		msOpt("maxIdleTimeMS", 0, false, ruleNonNeg, func(cs *ConnString) **time.Duration { return &cs.MaxIdleTime }),
		intOpt("maxPoolSize", 0, math.MaxInt32, ruleNonNeg, func(cs *ConnString) **int { return &cs.MaxPoolSize }),
		intOpt("minPoolSize", 0, math.MaxInt32, ruleNonNeg, func(cs *ConnString) **int { return &cs.MinPoolSize }),
		intOpt("maxConnecting", 1, math.MaxInt32, rulePositive, func(cs *ConnString) **int { return &cs.MaxConnecting }),
		{name: "maxStalenessSeconds", kind: kindInt, apply: func(cs *ConnString, v, _ string) string {
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n == 0 || n < -1 {
				return "must be -1 (no maximum) or a positive integer"
			}
			i := int(n)
			cs.MaxStalenessSeconds = &i
			return ""
		}},
		stringOpt("proxyHost", func(cs *ConnString) *string { return &cs.ProxyHost }),
		intOpt("proxyPort", 0, 65535, "must be an integer from 0 to 65535", func(cs *ConnString) **int { return &cs.ProxyPort }),
		stringOpt("proxyUsername", func(cs *ConnString) *string { return &cs.ProxyUsername }),
		stringOpt("proxyPassword", func(cs *ConnString) *string { return &cs.ProxyPassword }),
		stringOpt("readConcernLevel", func(cs *ConnString) *string { return &cs.ReadConcernLevel }),
		{name: "readPreference", kind: kindString, apply: func(cs *ConnString, v, _ string) string {
			m, ok := readpref.ParseMode(v)
			if !ok {
				return readPreferenceRule
			}
			cs.ReadPreference = &m
			return ""
		}},
		{name: "readPreferenceTags", kind: kindList, apply: func(cs *ConnString, _, raw string) string {
			m, ok := parseKeyValues(raw, true)
			if !ok {
				return "must be comma-separated key:value pairs, or empty"
			}
			cs.ReadPreferenceTags = append(cs.ReadPreferenceTags, m)
			return ""
		}},
		stringOpt("replicaSet", func(cs *ConnString) *string { return &cs.ReplicaSet }),
		boolOpt("retryReads", func(cs *ConnString) **bool { return &cs.RetryReads }),
		boolOpt("retryWrites", func(cs *ConnString) **bool { return &cs.RetryWrites }),
		enumOpt("serverMonitoringMode", []string{"stream", "poll", "auto"}, func(cs *ConnString) *string { return &cs.ServerMonitoringMode }),
		msOpt("serverSelectionTimeoutMS", 1, false, rulePositive, func(cs *ConnString) **time.Duration { return &cs.ServerSelectionTimeout }),
		boolOpt("serverSelectionTryOnce", func(cs *ConnString) **bool { return &cs.ServerSelectionTryOnce }),
		msOpt("socketTimeoutMS", 0, false, ruleNonNeg, func(cs *ConnString) **time.Duration { return &cs.SocketTimeout }),
		intOpt("srvMaxHosts", 0, math.MaxInt32, ruleNonNeg, func(cs *ConnString) **int { return &cs.SRVMaxHosts }),
		{name: "srvServiceName", apply: func(cs *ConnString, v, _ string) string {
			if !validServiceName(v) {
				return "must be an RFC 6335 service name: 1 to 15 letters, digits and inner hyphens, with a letter"
			}
			cs.SRVServiceName = v
			return ""
		}},
		msOpt("timeoutMS", 0, false, ruleNonNeg, func(cs *ConnString) **time.Duration { return &cs.Timeout }),
		// tls and ssl are handled together in parseOptions.
		{name: "tls", kind: kindBool},
		{name: "ssl", kind: kindBool},
		boolOpt("tlsAllowInvalidCertificates", func(cs *ConnString) **bool { return &cs.TLSAllowInvalidCertificates }),
		boolOpt("tlsAllowInvalidHostnames", func(cs *ConnString) **bool { return &cs.TLSAllowInvalidHostnames }),
		stringOpt("tlsCAFile", func(cs *ConnString) *string { return &cs.TLSCAFile }),
		stringOpt("tlsCertificateKeyFile", func(cs *ConnString) *string { return &cs.TLSCertificateKeyFile }),
		stringOpt("tlsCertificateKeyFilePassword", func(cs *ConnString) *string { return &cs.TLSCertificateKeyFilePassword }),
		boolOpt("tlsDisableCertificateRevocationCheck", func(cs *ConnString) **bool { return &cs.TLSDisableCertificateRevocationCheck }),
		boolOpt("tlsDisableOCSPEndpointCheck", func(cs *ConnString) **bool { return &cs.TLSDisableOCSPEndpointCheck }),
		boolOpt("tlsInsecure", func(cs *ConnString) **bool { return &cs.TLSInsecure }),
		{name: "w", apply: func(cs *ConnString, v, _ string) string {
			if v == "" {
				return "must be a non-negative integer or a string"
			}
			if n, err := strconv.ParseInt(v, 10, 32); err == nil {
				if n < 0 {
					return "must be a non-negative integer or a string"
				}
				cs.W = int(n)
				return ""
			}
			cs.W = v
			return ""
		}},
		msOpt("wTimeoutMS", 0, true, ruleNonNeg, func(cs *ConnString) **time.Duration { return &cs.WTimeout }),
		msOpt("waitQueueTimeoutMS", 1, false, rulePositive, func(cs *ConnString) **time.Duration { return &cs.WaitQueueTimeout }),
		intOpt("maxAdaptiveRetries", 0, math.MaxInt32, ruleNonNeg, func(cs *ConnString) **int { return &cs.MaxAdaptiveRetries }),
		boolOpt("adaptiveRetries", func(cs *ConnString) **bool { return &cs.AdaptiveRetries }),
		boolOpt("enableOverloadRetargeting", func(cs *ConnString) **bool { return &cs.EnableOverloadRetargeting }),
	}
	options = make(map[string]optionDef, len(defs))
	for _, d := range defs {
		options[lowerASCII(d.name)] = d
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// parseKeyValues parses "k1:v1,k2:v2" (split before decoding, so encoded
// commas and colons survive). The value is everything after the first colon.
// With allowEmpty an empty string is an empty map.
func parseKeyValues(raw string, allowEmpty bool) (map[string]string, bool) {
	m := map[string]string{}
	if raw == "" {
		return m, allowEmpty
	}
	for _, pair := range strings.Split(raw, ",") {
		k, v, ok := strings.Cut(pair, ":")
		if !ok {
			return nil, false
		}
		dk, err1 := url.PathUnescape(k)
		dv, err2 := url.PathUnescape(v)
		if err1 != nil || err2 != nil || dk == "" {
			return nil, false
		}
		m[dk] = dv
	}
	return m, true
}

// validServiceName applies RFC 6335 section 5.1.
func validServiceName(s string) bool {
	if len(s) < 1 || len(s) > 15 || s[0] == '-' || s[len(s)-1] == '-' || strings.Contains(s, "--") {
		return false
	}
	letter := false
	for _, c := range []byte(s) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
			letter = true
		case '0' <= c && c <= '9', c == '-':
		default:
			return false
		}
	}
	return letter
}

// parseBool accepts "true"/"false" and, with a deprecation warning, the
// legacy spellings the spec recommends tolerating.
func (cs *ConnString) parseBool(option, v string) (value, ok bool) {
	switch lowerASCII(v) {
	case "true":
		return true, true
	case "false":
		return false, true
	case "1", "yes", "y", "t":
		value = true
	case "0", "-1", "no", "n", "f":
		value = false
	default:
		return false, false
	}
	cs.warn(DeprecatedValue, option, v,
		fmt.Sprintf("deprecated boolean value for %s: %q, use %s=%t", option, v, option, value))
	return value, true
}

func (cs *ConnString) warn(kind WarningKind, option, value, msg string) {
	cs.Warnings = append(cs.Warnings, Warning{Kind: kind, Option: option, Value: value, Msg: msg})
}

func (cs *ConnString) invalid(option, value, rule string) {
	cs.warn(InvalidValue, option, value, fmt.Sprintf("invalid value for %s: %q (%s)", option, value, rule))
}

// pair is one key=value of the query, as written and decoded.
type pair struct {
	key, lkey  string // decoded key, and lower-cased
	raw, value string // value as written, and decoded
}

// proxyKeys may not be repeated (the SOCKS5 specification says so).
var proxyKeys = []string{"proxyhost", "proxyport", "proxyusername", "proxypassword"}

func (cs *ConnString) parseOptions(query string) error {
	if query == "" {
		return nil
	}
	var order []string
	byKey := map[string][]pair{}
	for _, part := range strings.Split(query, "&") {
		if part == "" {
			continue
		}
		k, raw, ok := strings.Cut(part, "=")
		if !ok {
			return syntaxErr("option %q has no value: options are key=value pairs separated by \"&\"", k)
		}
		key, err := url.PathUnescape(k)
		if err != nil {
			return syntaxErr("invalid percent-encoding in option name %q", k)
		}
		value, err := url.PathUnescape(raw)
		if err != nil {
			return &Error{Option: key, Msg: fmt.Sprintf("invalid percent-encoding in the value of %s: %q", key, raw)}
		}
		p := pair{key: key, lkey: lowerASCII(key), raw: raw, value: value}
		if _, seen := byKey[p.lkey]; !seen {
			order = append(order, p.lkey)
		}
		byKey[p.lkey] = append(byKey[p.lkey], p)
		cs.present[p.lkey] = true
	}

	for _, lkey := range order {
		pairs := byKey[lkey]
		if canon, ok := deprecatedAliases[lkey]; ok {
			old := pairs[0].key
			if _, replaced := byKey[canon]; replaced {
				cs.warn(DeprecatedOption, old, pairs[0].value,
					fmt.Sprintf("deprecated option %s ignored: %s is also given", old, options[canon].name))
				continue
			}
			cs.warn(DeprecatedOption, old, pairs[0].value,
				fmt.Sprintf("deprecated option %s: use %s", old, options[canon].name))
			lkey = canon
			cs.present[canon] = true
		}
		def, known := options[lkey]
		if !known {
			cs.warn(UnknownOption, pairs[0].key, pairs[0].value,
				fmt.Sprintf("unsupported option %q ignored", pairs[0].key))
			continue
		}
		switch {
		case lkey == "tls" || lkey == "ssl":
			continue // below, together
		case contains(proxyKeys, lkey) && len(pairs) > 1:
			return &Error{Option: def.name, Msg: fmt.Sprintf("%s is given %d times", def.name, len(pairs))}
		case def.kind == kindList:
			for _, p := range pairs {
				cs.applyOne(lkey, def, p)
			}
			continue
		case len(pairs) > 1:
			last := pairs[len(pairs)-1]
			cs.warn(RepeatedOption, def.name, last.value,
				fmt.Sprintf("%s is given %d times; using the last value %q", def.name, len(pairs), last.value))
		}
		cs.applyOne(lkey, def, pairs[len(pairs)-1])
	}
	return cs.applyTLS(append(byKey["tls"], byKey["ssl"]...))
}

func (cs *ConnString) applyOne(lkey string, def optionDef, p pair) {
	if p.value == "" && (def.kind == kindInt || def.kind == kindBool) {
		cs.warn(EmptyValue, def.name, "", fmt.Sprintf("empty value for %s ignored", def.name))
		return
	}
	if rule := def.apply(cs, p.value, p.raw); rule != "" {
		cs.invalid(def.name, p.value, rule)
		return
	}
	cs.set[lkey] = true
}

// applyTLS sets TLS from every tls and ssl given, which must agree.
func (cs *ConnString) applyTLS(pairs []pair) error {
	var first *pair
	for i := range pairs {
		p := &pairs[i]
		name := options[p.lkey].name
		if p.value == "" {
			cs.warn(EmptyValue, name, "", fmt.Sprintf("empty value for %s ignored", name))
			continue
		}
		b, ok := cs.parseBool(name, p.value)
		if !ok {
			cs.invalid(name, p.value, `must be "true" or "false"`)
			continue
		}
		if first != nil && *cs.TLS != b {
			return &Error{Option: name, Msg: fmt.Sprintf("conflicting TLS settings: %s=%s and %s=%s",
				options[first.lkey].name, first.value, name, p.value)}
		}
		first = p
		cs.TLS = &b
		cs.set["tls"] = true
	}
	return nil
}

// validate applies the rules that involve several options or the hosts,
// returning the first broken one.
func (cs *ConnString) validate() error {
	for _, check := range []func() error{
		cs.validateTLS, cs.validateTopology, cs.validateProxy, cs.validateReadPreference, cs.validateCombinations,
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// optionErr is a rule broken by option.
func optionErr(option, format string, args ...any) error {
	return &Error{Option: option, Msg: fmt.Sprintf(format, args...)}
}

// tlsConflicts are TLS options that relax or disable the same checks: they
// may not be mixed, whatever their values.
var tlsConflicts = [][2]string{
	{"tlsInsecure", "tlsAllowInvalidCertificates"},
	{"tlsInsecure", "tlsAllowInvalidHostnames"},
	{"tlsInsecure", "tlsDisableOCSPEndpointCheck"},
	{"tlsInsecure", "tlsDisableCertificateRevocationCheck"},
	{"tlsAllowInvalidCertificates", "tlsDisableOCSPEndpointCheck"},
	{"tlsAllowInvalidCertificates", "tlsDisableCertificateRevocationCheck"},
	{"tlsDisableOCSPEndpointCheck", "tlsDisableCertificateRevocationCheck"},
}

func (cs *ConnString) validateTLS() error {
	for _, c := range tlsConflicts {
		if cs.present[lowerASCII(c[0])] && cs.present[lowerASCII(c[1])] {
			return optionErr(c[1], "%s and %s cannot both be given", c[0], c[1])
		}
	}
	return nil
}

// validateTopology checks the hosts against directConnection, loadBalanced
// and the SRV options.
func (cs *ConnString) validateTopology() error {
	direct := cs.DirectConnection != nil && *cs.DirectConnection
	if direct && len(cs.Hosts) > 1 {
		return optionErr("directConnection", "directConnection=true needs exactly one host, got %d", len(cs.Hosts))
	}
	if direct && cs.IsSRV() {
		return optionErr("directConnection", "directConnection=true cannot be used with mongodb+srv")
	}
	if cs.LoadBalanced != nil && *cs.LoadBalanced {
		if err := cs.validateLoadBalanced(); err != nil {
			return err
		}
	}
	if !cs.IsSRV() {
		for _, k := range []string{"srvServiceName", "srvMaxHosts"} {
			if cs.present[lowerASCII(k)] {
				return optionErr(k, "%s requires a mongodb+srv URI", k)
			}
		}
	}
	if cs.SRVMaxHosts != nil && *cs.SRVMaxHosts > 0 && cs.ReplicaSet != "" {
		return optionErr("srvMaxHosts", "srvMaxHosts cannot be combined with replicaSet")
	}
	return nil
}

func (cs *ConnString) validateProxy() error {
	if cs.ProxyHost == "" {
		for _, k := range []string{"proxyPort", "proxyUsername", "proxyPassword"} {
			if cs.present[lowerASCII(k)] {
				return optionErr(k, "%s requires proxyHost", k)
			}
		}
	}
	if cs.present["proxyusername"] != cs.present["proxypassword"] {
		return optionErr("proxyUsername", "proxyUsername and proxyPassword must be given together")
	}
	return nil
}

func (cs *ConnString) validateReadPreference() error {
	if cs.ReadPreference != nil && *cs.ReadPreference != readpref.Primary {
		return nil
	}
	for _, tags := range cs.ReadPreferenceTags {
		if len(tags) > 0 {
			return optionErr("readPreferenceTags", "readPreferenceTags cannot be used with read preference primary")
		}
	}
	if cs.MaxStalenessSeconds != nil && *cs.MaxStalenessSeconds > 0 {
		return optionErr("maxStalenessSeconds", "maxStalenessSeconds cannot be used with read preference primary")
	}
	return nil
}

// validateCombinations checks the write concern, pool and authentication
// options that contradict each other.
func (cs *ConnString) validateCombinations() error {
	if w, ok := cs.W.(int); ok && w == 0 && cs.Journal != nil && *cs.Journal {
		return optionErr("journal", "journal=true cannot be combined with w=0")
	}
	if cs.MinPoolSize != nil && cs.MaxPoolSize != nil && *cs.MaxPoolSize > 0 && *cs.MinPoolSize > *cs.MaxPoolSize {
		return optionErr("minPoolSize", "minPoolSize (%d) is greater than maxPoolSize (%d)", *cs.MinPoolSize, *cs.MaxPoolSize)
	}
	if cs.AuthMechanism == "MONGODB-X509" && cs.HasPassword {
		return optionErr("authMechanism", "MONGODB-X509 takes no password")
	}
	if cs.AuthMechanism != "" && cs.AuthMechanism != "MONGODB-X509" && cs.AuthMechanism != "MONGODB-AWS" &&
		cs.AuthMechanism != "MONGODB-OIDC" && (!cs.HasUsername || cs.Username == "") {
		return optionErr("authMechanism", "authMechanism %s needs a username", cs.AuthMechanism)
	}
	return nil
}

// validateLoadBalanced applies the load balancer specification's rules.
func (cs *ConnString) validateLoadBalanced() error {
	switch {
	case len(cs.Hosts) > 1:
		return optionErr("loadBalanced", "loadBalanced=true needs exactly one host, got %d", len(cs.Hosts))
	case cs.DirectConnection != nil && *cs.DirectConnection:
		return optionErr("loadBalanced", "loadBalanced=true cannot be combined with directConnection=true")
	case cs.ReplicaSet != "":
		return optionErr("loadBalanced", "loadBalanced=true cannot be combined with replicaSet")
	case cs.SRVMaxHosts != nil && *cs.SRVMaxHosts > 0:
		return optionErr("loadBalanced", "loadBalanced=true cannot be combined with srvMaxHosts")
	}
	return nil
}
