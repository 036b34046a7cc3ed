package testutil

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"testing"
	"time"
)

// TestPKI: a leaf verifies against the anchor through the issuer it carries in its chain,
// and a mutual TLS handshake with StaticCert sees the client's identity; a leaf of another
// PKI does not verify.
func TestPKI(t *testing.T) {
	p := NewPKI(t)
	leaf := p.Leaf(t, "web.shop.serviceaccount.identity.linkerd.cluster.local")
	opts := x509.VerifyOptions{Roots: p.Roots, Intermediates: p.Intermediates, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if _, err := leaf.Leaf.Verify(opts); err != nil {
		t.Fatalf("a leaf does not verify: %v", err)
	}
	if len(leaf.Certificate) != 2 {
		t.Errorf("chain of %d certificates, want the leaf and the issuer", len(leaf.Certificate))
	}
	if _, err := NewPKI(t).Leaf(t, "x").Leaf.Verify(opts); err == nil {
		t.Error("a leaf of another PKI verifies")
	}

	lis := Listen(t)
	seen := make(chan []string, 1)
	ServeConns(t, lis, "the TLS server", func(c net.Conn) {
		tc := tls.Server(c, &tls.Config{GetCertificate: StaticCert{leaf}.GetCertificate, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: p.Roots})
		_ = tc.SetDeadline(time.Now().Add(StopWithin))
		if err := tc.Handshake(); err != nil {
			seen <- []string{err.Error()}
			return
		}
		seen <- tc.ConnectionState().PeerCertificates[0].DNSNames
		_, _ = io.Copy(tc, tc)
	})
	client := p.Leaf(t, "api.shop.serviceaccount.identity.linkerd.cluster.local")
	c, err := tls.Dial("tcp", lis.Addr().String(), &tls.Config{ServerName: leaf.Leaf.DNSNames[0], RootCAs: p.Roots,
		GetClientCertificate: StaticCert{client}.GetClientCertificate})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(StopWithin))
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || line != "ping\n" {
		t.Fatalf("echo: %q, %v", line, err)
	}
	if got := Recv(t, seen, StopWithin, "the server's handshake"); len(got) != 1 || got[0] != client.Leaf.DNSNames[0] {
		t.Errorf("server saw %q", got)
	}
}

// TestServeConnsClosesOpenConnections: the end of the test closes a connection its handler
// still reads from, and waits for the handler.
func TestServeConnsClosesOpenConnections(t *testing.T) {
	r := &recorder{TB: t}
	lis := Listen(t)
	started, returned := make(chan bool, 1), make(chan bool, 1)
	ServeConns(r, lis, "the server", func(c net.Conn) {
		started <- true
		_, _ = c.Read(make([]byte, 1))
		returned <- true
	})
	c, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	Recv(t, started, StopWithin, "the handler to start")
	r.end()
	Recv(t, returned, StopWithin, "the handler")
	if len(r.failures) != 0 {
		t.Errorf("failures: %q", r.failures)
	}
}
