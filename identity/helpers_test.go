package identity_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/identity"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/meridian-mesh/meridian/identity"
	"github.com/meridian-mesh/meridian/internal/grpcserver"
)

const (
	testNS = "emojivoto"
	testSA = "web"
)

var testID = identity.ServiceAccountIdentity(testNS, testSA, "linkerd", "cluster.local")

// pki is a trust anchor and an issuer signed by it, written to dir in the install layout.
type pki struct {
	dir       string
	anchor    *x509.Certificate
	anchorKey crypto.Signer
	anchors   *x509.CertPool
	issuer    *x509.Certificate
	tokenKey  *ecdsa.PrivateKey
}

func newPKI(t testing.TB) *pki {
	t.Helper()
	g, err := identity.GenerateInstall("cluster.local", "linkerd", 365*24*time.Hour, time.Now(), true)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := g.WriteDir(dir, false); err != nil {
		t.Fatal(err)
	}
	p := &pki{dir: dir}
	p.anchor = mustCert(t, g.AnchorsPEM)
	p.anchorKey = mustKey(t, g.AnchorKeyPEM)
	p.anchors = x509.NewCertPool()
	p.anchors.AddCert(p.anchor)
	p.issuer = mustCert(t, g.CertPEM)
	if p.tokenKey, err = identity.ParseLocalTokenKey(g.LocalTokenKey); err != nil {
		t.Fatal(err)
	}
	return p
}

// rotate writes a new issuer signed by the same anchor and returns it.
func (p *pki) rotate(t testing.TB, notAfter time.Time) *x509.Certificate {
	t.Helper()
	crt, key, err := identity.NewCA("identity.linkerd.cluster.local", time.Now().Add(-time.Minute), notAfter, p.anchor, p.anchorKey)
	if err != nil {
		t.Fatal(err)
	}
	p.writeIssuer(t, crt, key)
	return crt
}

func (p *pki) writeIssuer(t testing.TB, crt *x509.Certificate, key crypto.Signer) {
	t.Helper()
	writeAtomic(t, filepath.Join(p.dir, identity.FileIssuerKey), keyPEM(t, key))
	writeAtomic(t, filepath.Join(p.dir, identity.FileIssuerCert), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: crt.Raw}))
}

func writeAtomic(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func keyPEM(t testing.TB, k crypto.Signer) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

func mustCert(t testing.TB, p []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(p)
	if b == nil {
		t.Fatal("no PEM")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustKey(t testing.TB, p []byte) crypto.Signer {
	t.Helper()
	b, _ := pem.Decode(p)
	if b == nil {
		t.Fatal("no PEM")
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return k.(crypto.Signer)
}

// token mints a local token for ns/sa valid for an hour.
func (p *pki) token(t testing.TB, ns, sa string) []byte {
	t.Helper()
	tok, err := identity.MintLocalToken(p.tokenKey, ns, sa, identity.Audience, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

type csrSpec struct {
	cn   string
	dns  []string
	ips  []net.IP
	mail []string
	key  crypto.Signer
}

func makeCSR(t testing.TB, s csrSpec) []byte {
	t.Helper()
	if s.key == nil {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		s.key = k
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: s.cn}, DNSNames: s.dns, IPAddresses: s.ips, EmailAddresses: s.mail,
	}, s.key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// events records events for assertions.
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) Event(typ, reason, msg string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, typ+" "+reason+": "+msg)
}

func (e *events) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.got...)
}

// server is a running identity service on 127.0.0.1 with a connected client.
type server struct {
	svc    *identity.Service
	rpc    pb.IdentityClient
	addr   string
	reg    *prometheus.Registry
	events *events
}

type serverOpts struct {
	cfg      func(*identity.Config)
	source   identity.IssuerSource
	reviewer identity.TokenReviewer
	noLoad   bool
}

// startServer runs the service (gRPC server and reload loop) until the test ends.
func startServer(t testing.TB, p *pki, o serverOpts) *server {
	t.Helper()
	cfg := identity.DefaultConfig()
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	if o.source == nil {
		o.source = &identity.FileSource{IssuerDir: p.dir}
	}
	if o.reviewer == nil {
		o.reviewer = identity.NewLocalReviewer(&p.tokenKey.PublicKey)
	}
	s := &server{reg: prometheus.NewRegistry(), events: &events{}}
	var err error
	s.svc, err = identity.NewService(cfg, o.source, o.reviewer, identity.Options{
		Logger: zaptest.NewLogger(t), Registerer: s.reg, Events: s.events,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !o.noLoad {
		if err := s.svc.Load(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = lis.Addr().String()
	srv := grpcserver.New(s.reg)
	s.svc.Register(srv)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Add(2)
	go func() { defer wg.Done(); errs <- grpcserver.Serve(ctx, srv, lis, time.Second) }()
	go func() { defer wg.Done(); errs <- s.svc.Run(ctx) }()
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	s.rpc = pb.NewIdentityClient(conn)
	t.Cleanup(func() {
		conn.Close()
		cancel()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("identity server did not stop within 10s")
			return
		}
		close(errs)
		for err := range errs {
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("server: %v", err)
			}
		}
	})
	return s
}

func callCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond every 10ms until it holds or the deadline passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
