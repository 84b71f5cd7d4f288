package testcert_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/sturdy-go/sturdy/internal/testcert"
)

// handshake runs a TLS handshake against a listener presenting c's
// certificate, with the client dialing addr (so the name it checks is addr's
// host) using cfg.
func handshake(t *testing.T, c *testcert.Cert, host string, cfg *tls.Config) error {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", c.ServerTLS())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = io.Copy(io.Discard, conn) // drives the server side of the handshake
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	conn, err := tls.Dial("tcp", net.JoinHostPort(host, port), cfg)
	if err == nil {
		conn.Close()
	}
	ln.Close()
	<-done
	return err
}

func TestCertificateServesItsHosts(t *testing.T) {
	c := testcert.New(t, "127.0.0.1", "localhost")
	if got := c.Certificate.Leaf.IPAddresses; len(got) != 1 || !got[0].Equal(net.IPv4(127, 0, 0, 1)) {
		t.Errorf("IPAddresses = %v", got)
	}
	if got := c.Certificate.Leaf.DNSNames; len(got) != 1 || got[0] != "localhost" {
		t.Errorf("DNSNames = %v", got)
	}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		if err := handshake(t, c, host, c.ClientTLS()); err != nil {
			t.Errorf("handshake via %s: %v", host, err)
		}
	}
	// Another name does not verify, and an empty pool does not trust it.
	var he x509.HostnameError
	if err := handshake(t, c, "127.0.0.1", &tls.Config{RootCAs: c.Roots, ServerName: "other.example"}); !errors.As(err, &he) {
		t.Errorf("wrong name: %v, want a HostnameError", err)
	}
	var ue x509.UnknownAuthorityError
	if err := handshake(t, c, "127.0.0.1", &tls.Config{RootCAs: x509.NewCertPool()}); !errors.As(err, &ue) {
		t.Errorf("untrusted: %v, want an UnknownAuthorityError", err)
	}
}
