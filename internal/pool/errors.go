package pool

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"slices"

	"github.com/sturdy-go/sturdy/mongoerr"
)

// ErrPoolClosed is returned by CheckOut once the pool has been closed.
var ErrPoolClosed = errors.New("attempted to check out a connection from a closed connection pool")

// addBackpressureLabels marks a network error met while connecting or during
// the hello handshake as a possible sign of server overload
// (SystemOverloadedError and RetryableError), so that SDAM does not clear the
// pool for it. Errors that overload cannot cause (DNS failures, certificate
// problems) and errors after the hello (authentication) are left alone.
func addBackpressureLabels(err error) error {
	var ne *mongoerr.NetworkError
	if !errors.As(err, &ne) || (ne.Op != "dial" && ne.Op != "handshake") {
		return err
	}
	var cmdErr *mongoerr.CommandError
	if errors.As(err, &cmdErr) {
		return err // the server answered: not overload of the connection kind
	}
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	if errors.As(err, &dnsErr) || errors.As(err, &certErr) || errors.As(err, &unknownAuthority) ||
		errors.As(err, &hostname) || errors.As(err, &invalid) {
		return err
	}
	for _, l := range []string{mongoerr.LabelSystemOverloaded, mongoerr.LabelRetryable} {
		if !slices.Contains(ne.Labels, l) {
			ne.Labels = append(ne.Labels, l)
		}
	}
	return err
}
