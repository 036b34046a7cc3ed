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

	"github.com/meridian-mesh/meridian/identity"
	"github.com/meridian-mesh/meridian/internal/kubetest"
	"github.com/meridian-mesh/meridian/internal/testutil"
)

const (
	testNS = "emojivoto"
	testSA = "web"
)

var testID = identity.ServiceAccountIdentity(testNS, testSA, "linkerd", "cluster.local")

// TestMain stops the shared API server of the Kubernetes tests, then checks for leaked
// goroutines.
func TestMain(m *testing.M) { os.Exit(testutil.Main(m, kubetest.Main)) }

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

// pemDER returns the DER bytes of the first PEM block in p.
func pemDER(t testing.TB, p []byte) []byte {
	t.Helper()
	b, _ := pem.Decode(p)
	if b == nil {
		t.Fatal("no PEM")
	}
	return b.Bytes
}

func mustCert(t testing.TB, p []byte) *x509.Certificate {
	t.Helper()
	c, err := x509.ParseCertificate(pemDER(t, p))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustKey(t testing.TB, p []byte) crypto.Signer {
	t.Helper()
	k, err := x509.ParsePKCS8PrivateKey(pemDER(t, p))
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
	addr := testutil.ServeGRPC(t, func(srv *grpc.Server) { s.svc.Register(srv) })
	testutil.Go(t, "the identity reload loop", s.svc.Run)
	s.rpc = pb.NewIdentityClient(testutil.DialGRPC(t, addr))
	return s
}

// loadedService is a Service with the issuer of p loaded and the local reviewer, for calling
// its handler without the network.
func loadedService(t testing.TB, p *pki) *identity.Service {
	t.Helper()
	svc, err := identity.NewService(identity.DefaultConfig(), &identity.FileSource{IssuerDir: p.dir}, identity.NewLocalReviewer(&p.tokenKey.PublicKey), identity.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	return svc
}

func callCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// certifyRequest is a request for testID that the service accepts: its token and a fresh CSR.
func certifyRequest(t testing.TB, p *pki) *pb.CertifyRequest {
	t.Helper()
	return &pb.CertifyRequest{Identity: testID, Token: p.token(t, testNS, testSA), CertificateSigningRequest: makeCSR(t, csrSpec{dns: []string{testID}})}
}

// certify sends req to s.
func (s *server) certify(t testing.TB, req *pb.CertifyRequest) (*pb.CertifyResponse, error) {
	t.Helper()
	return s.rpc.Certify(callCtx(t), req)
}

// issue certifies testID on s and returns the response and its parsed leaf.
func issue(t testing.TB, s *server, p *pki) (*pb.CertifyResponse, *x509.Certificate) {
	t.Helper()
	rsp, err := s.certify(t, certifyRequest(t, p))
	if err != nil {
		t.Fatalf("Certify: %v", err)
	}
	leaf, err := x509.ParseCertificate(rsp.GetLeafCertificate())
	if err != nil {
		t.Fatal(err)
	}
	return rsp, leaf
}

// actUntil calls act, and again every second, until cond holds, within the deadline: for
// a change that a watch misses when it lands while the watch is being set up.
func actUntil(t testing.TB, within time.Duration, what string, act func(), cond func() bool) {
	t.Helper()
	var last time.Time
	testutil.Eventually(t, within, what, func() bool {
		if cond() {
			return true
		}
		if time.Since(last) >= time.Second {
			act()
			last = time.Now()
		}
		return false
	})
}
