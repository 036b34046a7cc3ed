package cptls_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/meridian-mesh/meridian/identity"
	"github.com/meridian-mesh/meridian/internal/cptls"
	"github.com/meridian-mesh/meridian/internal/serve"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/internal/tlsid"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, nil)) }

var (
	identityID = identity.ServiceAccountIdentity("linkerd", "linkerd-identity", "linkerd", "cluster.local")
	dstID      = identity.ServiceAccountIdentity("linkerd", "linkerd-destination", "linkerd", "cluster.local")
	webID      = identity.ServiceAccountIdentity("shop", "web", "linkerd", "cluster.local")
)

// mesh is a real identity service serving TLS with its self-issued certificate.
type mesh struct {
	dir, anchors, addr string
	key                []byte
}

func startIdentity(t *testing.T) *mesh {
	t.Helper()
	g, err := identity.GenerateInstall("cluster.local", "linkerd", 24*time.Hour, time.Now(), true)
	if err != nil {
		t.Fatal(err)
	}
	m := &mesh{dir: t.TempDir(), key: g.LocalTokenKey}
	if _, err := g.WriteDir(m.dir, false); err != nil {
		t.Fatal(err)
	}
	m.anchors = filepath.Join(m.dir, identity.FileTrustAnchors)
	cfg := identity.DefaultConfig()
	cfg.IssuerDir, cfg.Tokens, cfg.LocalTokenKey = m.dir, identity.TokensLocal, filepath.Join(m.dir, identity.FileLocalTokenKey)
	log := zaptest.NewLogger(t)
	svc, err := identity.New(context.Background(), cfg, identity.Deps{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := identity.NewServingCert(svc, identityID, log)
	if err != nil {
		t.Fatal(err)
	}
	tcfg := cptls.DefaultConfig()
	tcfg.Name = identityID
	id, err := cptls.NewSelfIssued(tcfg, sc, svc.Issuer().Anchors, log)
	if err != nil {
		t.Fatal(err)
	}
	p := serve.New(log, "127.0.0.1:0")
	gs, err := p.WithGRPCConfig(serve.GRPC{Addr: "127.0.0.1:0", Creds: id.ServerCredentials(false)})
	if err != nil {
		t.Fatal(err)
	}
	svc.Register(gs)
	p.Group.Add("identity", svc)
	p.Group.Add("tls", id)
	if err := p.Listen(); err != nil {
		t.Fatal(err)
	}
	testutil.Go(t, "the identity service", p.Run)
	m.addr = p.Addr().String()
	return m
}

// client returns the TLS identity of ns/sa with the name name, certified by m, running
// until the test ends; mod adjusts its config.
func (m *mesh) client(t *testing.T, ns, sa, name string, mod func(*cptls.Config)) *cptls.Identity {
	t.Helper()
	tok, err := identity.MintLocalTokenPEM(m.key, ns, sa, identity.Audience, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tokFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokFile, tok, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := cptls.DefaultConfig()
	cfg.Name, cfg.IdentityAddr, cfg.IdentityName, cfg.TrustAnchorsFile, cfg.TokenFile = name, m.addr, identityID, m.anchors, tokFile
	cfg.Client.InitialBackoff, cfg.Client.MaxBackoff = 50*time.Millisecond, 200*time.Millisecond
	if mod != nil {
		mod(&cfg)
	}
	id, err := cptls.New(cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(id.Close)
	testutil.Go(t, "the identity client of "+name, id.Run)
	return id
}

// serveHealth serves the gRPC health service with creds until the test ends.
func serveHealth(t *testing.T, creds credentials.TransportCredentials) string {
	t.Helper()
	return testutil.ServeGRPC(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, health.NewServer()) }, grpc.Creds(creds))
}

func callHealth(t *testing.T, addr string, opts ...grpc.DialOption) error {
	t.Helper()
	conn := testutil.DialGRPC(t, addr, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

// TestServerCertificateFromIdentity: a destination's identity certifies through the
// identity service's TLS (verifying its name) and is ready then; its server requires a
// mesh certificate: a plaintext client and a TLS client without a certificate are refused,
// a client with one is served, and a client expecting another name refuses the server.
func TestServerCertificateFromIdentity(t *testing.T) {
	m := startIdentity(t)
	dst := m.client(t, "linkerd", "linkerd-destination", dstID, nil)
	testutil.EventuallyNoError(t, 20*time.Second, "the destination's certificate", dst.Ready)
	if dst.Plaintext() || dst.Name() != dstID || len(dst.Warnings()) != 0 {
		t.Errorf("plaintext %v, name %q, warnings %q", dst.Plaintext(), dst.Name(), dst.Warnings())
	}
	web := m.client(t, "shop", "web", webID, nil)
	testutil.EventuallyNoError(t, 20*time.Second, "web's certificate", web.Ready)

	addr := serveHealth(t, dst.ServerCredentials(true))
	if err := callHealth(t, addr, grpc.WithTransportCredentials(web.ClientCredentials(dstID))); err != nil {
		t.Errorf("a client with a mesh certificate: %v", err)
	}
	if err := callHealth(t, addr); err == nil {
		t.Error("a plaintext client was served")
	}
	if err := callHealth(t, addr, grpc.WithTransportCredentials(web.ClientCredentials(webID))); err == nil {
		t.Error("a client expecting another identity accepted the server")
	}
	// A TLS client that presents no certificate (a proxy before its first) is refused.
	pemData, err := os.ReadFile(m.anchors)
	if err != nil {
		t.Fatal(err)
	}
	roots, err := tlsid.ParseTrustAnchors(pemData)
	if err != nil {
		t.Fatal(err)
	}
	anon, _ := tlsid.New(nil, roots)
	if err := callHealth(t, addr, grpc.WithTransportCredentials(credentials.NewTLS(anon.Client(dstID)))); err == nil {
		t.Error("a TLS client without a certificate was served")
	}
	// ... and served by a server that verifies a certificate only when given (identity's).
	if err := callHealth(t, serveHealth(t, dst.ServerCredentials(false)), grpc.WithTransportCredentials(credentials.NewTLS(anon.Client(dstID)))); err != nil {
		t.Errorf("a TLS client without a certificate, to a server that does not require one: %v", err)
	}
}

// TestWrongIdentityName: a client that expects the identity service under another name never
// gets a certificate, and says what it waits for.
func TestWrongIdentityName(t *testing.T) {
	m := startIdentity(t)
	dst := m.client(t, "linkerd", "linkerd-destination", dstID, func(c *cptls.Config) {
		c.IdentityName = "rogue.linkerd.serviceaccount.identity.linkerd.cluster.local"
	})
	testutil.Never(t, time.Second, "a certificate through a connection to the wrong identity", func() bool { return dst.Ready() == nil })
	if err := dst.Ready(); err == nil || !strings.Contains(err.Error(), "waiting for this server's certificate ("+dstID+") from the identity service at "+m.addr) {
		t.Errorf("Ready = %v", err)
	}
}

func TestPlaintext(t *testing.T) {
	cfg := cptls.DefaultConfig()
	cfg.Plaintext = true
	id, err := cptls.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !id.Plaintext() || id.Ready() != nil || len(id.Warnings()) != 1 || !strings.Contains(id.Warnings()[0], "plaintext (--plaintext)") {
		t.Errorf("plaintext identity: ready %v, warnings %q", id.Ready(), id.Warnings())
	}
	addr := serveHealth(t, id.ServerCredentials(true))
	if err := callHealth(t, addr, grpc.WithTransportCredentials(id.ClientCredentials(dstID))); err != nil {
		t.Errorf("plaintext call: %v", err)
	}
}

func TestConfigNeeds(t *testing.T) {
	cfg := cptls.DefaultConfig()
	cfg.TokenFile = ""
	_, err := cptls.New(cfg, nil)
	if err == nil || !strings.Contains(err.Error(), "this server's identity, the identity service's address, the identity service's identity, the trust anchors file, and the ServiceAccount token file") {
		t.Errorf("New without a config: %v", err)
	}
	if _, err := cptls.NewSelfIssued(cptls.DefaultConfig(), nil, nil, nil); err == nil || !strings.Contains(err.Error(), "needs this server's identity") {
		t.Errorf("NewSelfIssued without a name: %v", err)
	}
	cfg = cptls.DefaultConfig()
	cfg.Name, cfg.IdentityAddr, cfg.IdentityName, cfg.TrustAnchorsFile = dstID, "127.0.0.1:1", identityID, filepath.Join(t.TempDir(), "missing")
	if _, err := cptls.New(cfg, nil); err == nil || !strings.Contains(err.Error(), "read the trust anchors") {
		t.Errorf("New with a missing anchors file: %v", err)
	}
}
