package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"github.com/linkerd/linkerd2-proxy-api/go/inbound"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/meridian-mesh/meridian/identity"
	idclient "github.com/meridian-mesh/meridian/identity/client"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/internal/tlsid"
)

// Identities of the control plane in namespace linkerd, trust domain cluster.local.
var (
	identityID = identity.ServiceAccountIdentity("linkerd", "linkerd-identity", "linkerd", "cluster.local")
	dstID      = identity.ServiceAccountIdentity("linkerd", "linkerd-destination", "linkerd", "cluster.local")
	policyID   = identity.ServiceAccountIdentity("linkerd", "linkerd-policy", "linkerd", "cluster.local")
	rogueID    = identity.ServiceAccountIdentity("linkerd", "rogue", "linkerd", "cluster.local")
)

// cpMesh is a running `meridian identity` (TLS, its self-issued certificate) and what its
// clients need: the trust anchors, and tokens minted with its local key.
type cpMesh struct {
	dir, anchors, addr string
	roots              *x509.CertPool
	key                []byte
}

func startIdentity(t *testing.T) *cpMesh {
	t.Helper()
	m := newCPMesh(t)
	m.run(t)
	return m
}

// newCPMesh makes the identity's issuer and picks its address; run starts it.
func newCPMesh(t *testing.T) *cpMesh {
	t.Helper()
	m := &cpMesh{dir: t.TempDir()}
	issuer := filepath.Join(m.dir, "issuer")
	if code, _, errOut := capture(t, "identity", "init", "--out", issuer, "--local-token-key"); code != 0 {
		t.Fatalf("identity init: %d %s", code, errOut)
	}
	m.anchors = filepath.Join(issuer, identity.FileTrustAnchors)
	pemData, err := os.ReadFile(m.anchors)
	if err != nil {
		t.Fatal(err)
	}
	if m.roots, err = tlsid.ParseTrustAnchors(pemData); err != nil {
		t.Fatal(err)
	}
	if m.key, err = os.ReadFile(filepath.Join(issuer, identity.FileLocalTokenKey)); err != nil {
		t.Fatal(err)
	}
	m.addr = freeAddr(t)
	return m
}

// run starts `meridian identity` at m.addr until the test ends and waits for its /ready.
func (m *cpMesh) run(t *testing.T) {
	t.Helper()
	issuer := filepath.Join(m.dir, "issuer")
	admin := freeAddr(t)
	testutil.Go(t, "meridian identity", func(ctx context.Context) error {
		return runIdentityServer(ctx, []string{"--issuer-dir", issuer, "--tokens", "local", "--local-token-key", filepath.Join(issuer, identity.FileLocalTokenKey),
			"--addr", m.addr, "--admin-addr", admin, "--log-level", "error"})
	})
	waitReady(t, admin)
}

// waitReady waits for the admin port's /ready to answer 200.
func waitReady(t *testing.T, admin string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, admin+"/ready to answer 200", func() bool {
		code, _ := get(t, "http://"+admin+"/ready")
		return code == http.StatusOK
	})
}

// token writes a token of the ServiceAccount ns/sa into a file and returns its path.
func (m *cpMesh) token(t *testing.T, ns, sa string) string {
	t.Helper()
	tok, err := identity.MintLocalTokenPEM(m.key, ns, sa, identity.Audience, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), ns+"."+sa+".token")
	if err := os.WriteFile(p, tok, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// serverArgs are the TLS flags of a control-plane server of ServiceAccount linkerd/sa.
func (m *cpMesh) serverArgs(t *testing.T, sa string) []string {
	return []string{"--identity-addr", m.addr, "--identity-trust-anchors", m.anchors, "--identity-token-file", m.token(t, "linkerd", sa)}
}

// proxyTLS certifies ns/sa as a proxy does (identity/client over TLS to the identity service,
// verifying identityName with no client certificate) and returns its mesh TLS, or the
// error when no certificate came within a few seconds.
func (m *cpMesh) proxyTLS(t *testing.T, ns, sa, identityName string) (*tlsid.Config, error) {
	t.Helper()
	anon, err := tlsid.New(nil, m.roots)
	if err != nil {
		t.Fatal(err)
	}
	conn := testutil.DialGRPC(t, m.addr, grpc.WithTransportCredentials(credentials.NewTLS(anon.Client(identityName, "h2"))))
	cfg := idclient.DefaultConfig()
	cfg.Identity, cfg.TrustAnchors = identity.ServiceAccountIdentity(ns, sa, "linkerd", "cluster.local"), m.roots
	tok, err := os.ReadFile(m.token(t, ns, sa))
	if err != nil {
		t.Fatal(err)
	}
	c, err := idclient.New(cfg, conn, idclient.StaticToken(tok), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	crt, err := c.CertifyOnce(ctx)
	if err != nil {
		return nil, err
	}
	return tlsid.New(staticCert{crt}, m.roots)
}

// webTLS is the mesh TLS of a proxy of shop/web.
func (m *cpMesh) webTLS(t *testing.T) *tlsid.Config {
	t.Helper()
	c, err := m.proxyTLS(t, "shop", "web", identityID)
	if err != nil {
		t.Fatalf("certify shop/web through the identity service's TLS: %v", err)
	}
	return c
}

// TestServersRefuseWithoutTLS: destination and policy refuse to start without TLS
// configuration or --plaintext, saying what to pass, and refuse contradictory flags: usage
// errors (2). A trust anchors file that cannot be read is found when it is read (1).
func TestServersRefuseWithoutTLS(t *testing.T) {
	src := t.TempDir()
	for _, srv := range [][]string{
		{"destination", "--source", "dir:" + src, "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"},
		{"policy", "--source", "dir:" + src, "--grpc-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"},
	} {
		for _, c := range []struct {
			extra []string
			code  int
			want  string
		}{
			{nil, 2, srv[0] + " serves gRPC over mTLS, with a certificate from the identity service: give --identity-trust-anchors FILE"},
			{nil, 2, "or --plaintext for a local mesh or tests"},
			{[]string{"--plaintext", "--identity-addr", "127.0.0.1:8080"}, 2, "choose one"},
			{[]string{"--identity-addr", "127.0.0.1:8080"}, 2, "--identity-addr needs --identity-trust-anchors FILE"},
			{[]string{"--identity-trust-anchors", "x.pem"}, 2, "--identity-trust-anchors needs --identity-addr HOST:PORT"},
			{[]string{"--plaintext", "--local-addr", "0.0.0.0:8086"}, 2, "--local-addr: local address \"0.0.0.0:8086\": the plaintext listener must be on a loopback address"},
			{[]string{"--identity-addr", "127.0.0.1:8080", "--identity-trust-anchors", filepath.Join(src, "missing.pem")}, 1, "read the trust anchors"},
		} {
			code, _, errOut := capture(t, append(append([]string{}, srv...), c.extra...)...)
			if code != c.code || !strings.Contains(errOut, c.want) {
				t.Errorf("%s %v: exit %d, stderr %q; want %d and %q", srv[0], c.extra, code, errOut, c.code, c.want)
			}
		}
	}
	code, _, errOut := capture(t, "identity", "--issuer-dir", src, "--local-addr", "10.0.0.1:8080", "--tokens", "local", "--local-token-key", "k")
	if code != 2 || !strings.Contains(errOut, "must be on a loopback address") {
		t.Errorf("identity --local-addr 10.0.0.1:8080: exit %d, stderr %q", code, errOut)
	}
}

// TestPlaintextIsAWarning: policy and identity with --plaintext list it in /ready's warnings
// (the destination's is checked with its gossip warning).
func TestPlaintextIsAWarning(t *testing.T) {
	dir := t.TempDir()
	if code, _, errOut := capture(t, "identity", "init", "--out", dir, "--local-token-key"); code != 0 {
		t.Fatalf("identity init: %d %s", code, errOut)
	}
	for name, run := range map[string]func(context.Context, []string) error{"policy": runPolicy, "identity": runIdentity} {
		admin := freeAddr(t)
		args := []string{"--admin-addr", admin, "--log-level", "error", "--plaintext"}
		if name == "policy" {
			args = append(args, "--source", "dir:"+t.TempDir(), "--grpc-addr", "127.0.0.1:0")
		} else {
			args = append(args, "--issuer-dir", dir, "--tokens", "local", "--local-token-key", filepath.Join(dir, identity.FileLocalTokenKey), "--addr", "127.0.0.1:0")
		}
		testutil.Go(t, "meridian "+name, func(ctx context.Context) error { return run(ctx, args) })
		waitReady(t, admin)
		if _, body := get(t, "http://"+admin+"/ready"); !strings.Contains(body, "tls: gRPC is served and called in plaintext (--plaintext)") {
			t.Errorf("%s: /ready = %q, want the plaintext warning", name, body)
		}
	}
}

// TestReadyWaitsForTheCertificate: a destination whose identity service is not up yet
// answers /ready 503, saying it waits for its certificate, and 200 once identity has
// certified it.
func TestReadyWaitsForTheCertificate(t *testing.T) {
	m := newCPMesh(t)
	admin := freeAddr(t)
	args := append(m.serverArgs(t, "linkerd-destination"), "--source", "dir:"+t.TempDir(), "--addr", "127.0.0.1:0", "--admin-addr", admin, "--log-level", "error")
	testutil.Go(t, "meridian destination", func(ctx context.Context) error { return runDestination(ctx, args) })
	want := "waiting for this server's certificate (" + dstID + ") from the identity service at " + m.addr
	testutil.Eventually(t, 20*time.Second, "/ready to say what it waits for", func() bool {
		code, body := get(t, "http://"+admin+"/ready")
		return code == http.StatusServiceUnavailable && strings.Contains(body, want)
	})
	m.run(t)
	waitReady(t, admin)
}

// TestIdentityServesTLS: the identity service serves TLS with a certificate of its own
// issuer for linkerd-identity; a proxy's identity client certifies through it verifying that
// name, and is refused when it expects another name or speaks plaintext.
func TestIdentityServesTLS(t *testing.T) {
	m := startIdentity(t)
	m.webTLS(t)
	if _, err := m.proxyTLS(t, "shop", "web", rogueID); err == nil || !strings.Contains(err.Error(), "certificate is valid for "+identityID) {
		t.Errorf("a client expecting the identity service as %s: %v; want a refused certificate", rogueID, err)
	}
	cfg := idclient.DefaultConfig()
	cfg.Identity = identity.ServiceAccountIdentity("shop", "web", "linkerd", "cluster.local")
	tok, _ := os.ReadFile(m.token(t, "shop", "web"))
	c, err := idclient.New(cfg, testutil.DialGRPC(t, m.addr), idclient.StaticToken(tok), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.CertifyOnce(ctx); err == nil {
		t.Error("a plaintext client was certified")
	}
}

// getOnce opens a Get for authority on conn and returns the first update or the error
// within 3 s.
func getOnce(conn *grpc.ClientConn, authority string) (*pb.Update, error) {
	return getWithin(conn, authority, 3*time.Second)
}

// getWithin is getOnce within d.
func getWithin(conn *grpc.ClientConn, authority string, d time.Duration) (*pb.Update, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	s, err := pb.NewDestinationClient(conn).Get(ctx, &pb.GetDestination{Path: authority})
	if err != nil {
		return nil, err
	}
	return s.Recv()
}

func mtls(c *tlsid.Config, peer string) grpc.DialOption {
	return grpc.WithTransportCredentials(credentials.NewTLS(c.Client(peer, "h2")))
}

// TestDestinationAndPolicyServeMTLS: destination and policy get their certificates from
// identity (their /ready waits for it) and serve mTLS under linkerd-destination and
// linkerd-policy (the names the injector gives proxies): a client with a mesh certificate is
// served; a plaintext client, a TLS client without a certificate and one expecting another
// name are not; the destination's --local-addr serves plaintext for tools.
func TestDestinationAndPolicyServeMTLS(t *testing.T) {
	m := startIdentity(t)
	dstAddr, local, polAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	startDestination(t, "../../deploy/examples", append(m.serverArgs(t, "linkerd-destination"), "--addr", dstAddr, "--local-addr", local)...)
	polAdmin := freeAddr(t)
	testutil.Go(t, "meridian policy", func(ctx context.Context) error {
		return runPolicy(ctx, append(m.serverArgs(t, "linkerd-policy"), "--source", "dir:../../deploy/examples",
			"--grpc-addr", polAddr, "--admin-addr", polAdmin, "--log-level", "error"))
	})
	waitReady(t, polAdmin)
	web := m.webTLS(t)
	anon, _ := tlsid.New(nil, m.roots)
	const svc = "web.shop.svc.cluster.local:80"

	if _, err := getOnce(testutil.DialGRPC(t, dstAddr, mtls(web, dstID)), svc); err != nil {
		t.Errorf("destination, a client with a mesh certificate: %v", err)
	}
	if _, err := getOnce(testutil.DialGRPC(t, local), svc); err != nil {
		t.Errorf("destination's --local-addr, plaintext: %v", err)
	}
	code, out, errOut := capture(t, "endpoints", "--addr", local, "--timeout", "5s", svc)
	if code != 0 || !strings.Contains(out, "web-7c9d8f6b5-k2x9p") {
		t.Errorf("meridian endpoints on the local address: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	for name, opt := range map[string]grpc.DialOption{
		"plaintext":                 nil,
		"TLS without a certificate": mtls(anon, dstID),
		"expecting another name":    mtls(web, rogueID),
	} {
		opts := []grpc.DialOption{}
		if opt != nil {
			opts = append(opts, opt)
		}
		if _, err := getOnce(testutil.DialGRPC(t, dstAddr, opts...), svc); err == nil {
			t.Errorf("destination served a client %s", name)
		}
	}

	port := func(opts ...grpc.DialOption) error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := inbound.NewInboundServerPoliciesClient(testutil.DialGRPC(t, polAddr, opts...)).GetPort(ctx,
			&inbound.PortSpec{Workload: `{"ns":"billing","pod":"payments-69c8d7b5f4-2gq9v"}`, Port: 8080})
		return err
	}
	if err := port(mtls(web, policyID)); err != nil {
		t.Errorf("policy, a client with a mesh certificate: %v", err)
	}
	if err := port(); err == nil {
		t.Error("policy served a plaintext client")
	}
	if err := port(mtls(anon, policyID)); err == nil {
		t.Error("policy served a TLS client without a certificate")
	}
	if err := port(mtls(web, dstID)); err == nil {
		t.Errorf("policy proved %s, the destination's identity: the injector's POLICY_SVC_NAME is %s", dstID, policyID)
	}
}

// staticCert serves one certificate.
type staticCert struct{ c *tls.Certificate }

func (s staticCert) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) { return s.c, nil }
func (s staticCert) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return s.c, nil
}
