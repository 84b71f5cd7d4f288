package connstring

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"strings"
)

// Resolver looks up the DNS records of a mongodb+srv name.
// *net.Resolver (and so net.DefaultResolver) satisfies it.
type Resolver interface {
	LookupSRV(ctx context.Context, service, proto, name string) (cname string, addrs []*net.SRV, err error)
	LookupTXT(ctx context.Context, name string) ([]string, error)
}

// Seedlist is what DNS says about a mongodb+srv name.
type Seedlist struct {
	Hosts []Host
	// Options from the TXT record; nil when the record does not set them.
	AuthSource   *string
	ReplicaSet   *string
	LoadBalanced *bool
}

// LookupSeedlist queries the SRV records _<service>._tcp.<srvHost> and the
// TXT record of srvHost. Every SRV target must lie inside srvHost's parent
// domain (or, for names of fewer than three labels, below srvHost itself);
// the TXT record, if any, may only set authSource, replicaSet and
// loadBalanced. When maxHosts > 0 and DNS returns more hosts, a random
// maxHosts of them are kept.
func LookupSeedlist(ctx context.Context, r Resolver, srvHost, service string, maxHosts int) (*Seedlist, error) {
	srvHost = strings.TrimSuffix(strings.ToLower(srvHost), ".")
	if srvHost == "" {
		return nil, &Error{Msg: "empty SRV host name"}
	}
	if service == "" {
		return nil, &Error{Msg: "empty SRV service name"}
	}
	_, records, err := r.LookupSRV(ctx, service, "tcp", srvHost)
	if err != nil {
		return nil, &Error{Msg: fmt.Sprintf("SRV lookup of _%s._tcp.%s failed", service, srvHost), Err: err}
	}
	if len(records) == 0 {
		return nil, &Error{Msg: fmt.Sprintf("no SRV records for _%s._tcp.%s", service, srvHost)}
	}
	sl := &Seedlist{}
	for _, rec := range records {
		if rec == nil {
			continue
		}
		target := strings.TrimSuffix(strings.ToLower(rec.Target), ".")
		if err := checkSRVTarget(srvHost, target); err != nil {
			return nil, err
		}
		if rec.Port == 0 {
			return nil, &Error{Msg: fmt.Sprintf("SRV record %s has port 0", target)}
		}
		h := Host{Type: Hostname, Name: target, Port: int(rec.Port)}
		if ip := net.ParseIP(target); ip != nil && ip.To4() != nil {
			h.Type = IPv4
		}
		sl.Hosts = append(sl.Hosts, h)
	}
	if len(sl.Hosts) == 0 {
		return nil, &Error{Msg: fmt.Sprintf("no SRV records for _%s._tcp.%s", service, srvHost)}
	}

	txts, err := r.LookupTXT(ctx, srvHost)
	var dnsErr *net.DNSError
	switch {
	case err != nil && errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		txts = nil // no TXT record: nothing to apply
	case err != nil:
		return nil, &Error{Msg: "TXT lookup of " + srvHost + " failed", Err: err}
	case len(txts) > 1:
		return nil, &Error{Msg: fmt.Sprintf("%s has %d TXT records; at most one is allowed", srvHost, len(txts))}
	}
	if len(txts) == 1 {
		if err := sl.parseTXT(txts[0]); err != nil {
			return nil, err
		}
	}

	if maxHosts > 0 && len(sl.Hosts) > maxHosts {
		rand.Shuffle(len(sl.Hosts), func(i, j int) { sl.Hosts[i], sl.Hosts[j] = sl.Hosts[j], sl.Hosts[i] })
		sl.Hosts = sl.Hosts[:maxHosts]
	}
	return sl, nil
}

// checkSRVTarget rejects SRV targets outside the SRV name's domain, so a
// DNS answer cannot send the client (and its credentials) elsewhere.
func checkSRVTarget(srvHost, target string) error {
	domain := srvHost
	if strings.Count(srvHost, ".") >= 2 {
		_, domain, _ = strings.Cut(srvHost, ".")
	}
	if target == "" || !strings.HasSuffix(target, "."+domain) {
		return &Error{Msg: fmt.Sprintf("SRV record target %q is not in the domain %q of %q", target, domain, srvHost)}
	}
	return nil
}

func (sl *Seedlist) parseTXT(txt string) error {
	if txt == "" {
		return nil
	}
	for _, part := range strings.Split(txt, "&") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return &Error{Msg: fmt.Sprintf("malformed TXT record option %q", part)}
		}
		value, err := url.PathUnescape(v)
		if err != nil {
			return &Error{Option: k, Msg: fmt.Sprintf("invalid percent-encoding in TXT record option %q", part)}
		}
		switch lowerASCII(k) {
		case "authsource":
			if value == "" {
				return &Error{Option: "authSource", Msg: "empty authSource in TXT record"}
			}
			sl.AuthSource = &value
		case "replicaset":
			sl.ReplicaSet = &value
		case "loadbalanced":
			var b bool
			switch value {
			case "true":
				b = true
			case "false":
			default:
				return &Error{Option: "loadBalanced", Msg: fmt.Sprintf("invalid value for loadBalanced in TXT record: %q", value)}
			}
			sl.LoadBalanced = &b
		default:
			return &Error{Option: k, Msg: fmt.Sprintf("TXT record option %q is not allowed (only authSource, replicaSet, loadBalanced)", k)}
		}
	}
	return nil
}
