package client_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"

	"github.com/meridian-mesh/meridian/identity"
	"github.com/meridian-mesh/meridian/identity/client"
	"github.com/meridian-mesh/meridian/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, nil)) }

var webID = identity.ServiceAccountIdentity("emojivoto", "web", "linkerd", "cluster.local")

type mesh struct {
	svc     *identity.Service
	conn    *grpc.ClientConn
	anchors *x509.CertPool
	token   []byte
	dir     string
}

// startMesh runs a real identity server on 127.0.0.1 with a fresh install and the local
// token reviewer; load=false leaves the issuer unloaded until the test calls Load.
func startMesh(t *testing.T, lifetime time.Duration, load bool) *mesh {
	t.Helper()
	g, err := identity.GenerateInstall("cluster.local", "linkerd", 24*time.Hour, time.Now(), true)
	if err != nil {
		t.Fatal(err)
	}
	m := &mesh{dir: t.TempDir(), anchors: x509.NewCertPool()}
	if _, err := g.WriteDir(m.dir, false); err != nil {
		t.Fatal(err)
	}
	m.anchors.AppendCertsFromPEM(g.AnchorsPEM)
	tk, err := identity.ParseLocalTokenKey(g.LocalTokenKey)
	if err != nil {
		t.Fatal(err)
	}
	if m.token, err = identity.MintLocalToken(tk, "emojivoto", "web", identity.Audience, time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	cfg := identity.DefaultConfig()
	cfg.Lifetime, cfg.ClockSkew, cfg.ReloadInterval = lifetime, 0, time.Hour
	m.svc, err = identity.NewService(cfg, &identity.FileSource{IssuerDir: m.dir}, identity.NewLocalReviewer(&tk.PublicKey), identity.Options{Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if load {
		if err := m.svc.Load(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	addr := testutil.ServeGRPC(t, func(srv *grpc.Server) { m.svc.Register(srv) })
	m.conn = testutil.DialGRPC(t, addr)
	return m
}

// newClient is a client for webID trusting m's anchors and talking to m, its config adjusted
// by mod when set.
func newClient(t *testing.T, m *mesh, mod func(*client.Config)) *client.Client {
	t.Helper()
	cfg := client.DefaultConfig()
	cfg.Identity, cfg.TrustAnchors = webID, m.anchors
	if mod != nil {
		mod(&cfg)
	}
	c, err := client.New(cfg, m.conn, client.StaticToken(m.token), zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// runClient runs c until the test ends.
func runClient(t *testing.T, c *client.Client) { testutil.Go(t, "client Run", c.Run) }

// waitReady waits for c's first certificate (Ready is closed then).
func waitReady(t *testing.T, c *client.Client, within time.Duration) {
	t.Helper()
	testutil.Wait(t, within, "a certificate", func() { <-c.Ready() })
}

func isReady(c *client.Client) bool {
	select {
	case <-c.Ready():
		return true
	default:
		return false
	}
}

func TestClientRenewsBeforeExpiry(t *testing.T) {
	m := startMesh(t, 3*time.Second, true)
	c := newClient(t, m, func(cfg *client.Config) {
		cfg.MinRefresh, cfg.InitialBackoff, cfg.MaxBackoff = 100*time.Millisecond, 50*time.Millisecond, 200*time.Millisecond
	})
	runClient(t, c)
	waitReady(t, c, 10*time.Second)

	// Watch the held certificate: each new one must arrive while the previous is still
	// valid, carry the same key, and verify against the anchors.
	type seen struct {
		leaf *x509.Certificate
		at   time.Time
	}
	var got []seen
	testutil.Eventually(t, 20*time.Second, "three certificates", func() bool {
		crt, err := c.GetCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 || !crt.Leaf.Equal(got[len(got)-1].leaf) {
			got = append(got, seen{crt.Leaf, time.Now()})
		}
		return len(got) >= 3
	})
	for i := 1; i < len(got); i++ {
		prev, cur := got[i-1], got[i]
		if !cur.at.Before(prev.leaf.NotAfter) {
			t.Errorf("certificate %d arrived at %v, after the previous expired at %v", i, cur.at, prev.leaf.NotAfter)
		}
		if !c.PublicKey().Equal(cur.leaf.PublicKey) {
			t.Errorf("certificate %d has a different key: renewal must reuse the key", i)
		}
	}
	if !c.PublicKey().Equal(got[0].leaf.PublicKey) {
		t.Error("leaf key is not the client's key")
	}
}

func TestClientRetriesUntilIssuerLoads(t *testing.T) {
	m := startMesh(t, time.Hour, false)
	c := newClient(t, m, func(cfg *client.Config) {
		cfg.InitialBackoff, cfg.MaxBackoff = 20*time.Millisecond, 100*time.Millisecond
	})
	if _, err := c.GetCertificate(nil); err == nil {
		t.Fatal("GetCertificate succeeded before any certificate")
	}
	runClient(t, c)
	testutil.Never(t, 300*time.Millisecond, "ready while the issuer is not loaded", func() bool { return isReady(c) })
	if err := m.svc.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitReady(t, c, 10*time.Second)
}

func TestClientRejectsWrongAnchors(t *testing.T) {
	m := startMesh(t, time.Hour, true)
	other := startMesh(t, time.Hour, true)
	c := newClient(t, m, func(cfg *client.Config) {
		cfg.TrustAnchors, cfg.InitialBackoff, cfg.MaxBackoff = other.anchors, 20*time.Millisecond, 50*time.Millisecond
	})
	runClient(t, c)
	testutil.Never(t, 300*time.Millisecond, "accepting a certificate that does not chain to its trust anchors", func() bool { return isReady(c) })
}

// TestMutualTLSWithClientCertificates runs a TLS 1.3 handshake between two clients'
// certificates through tls.Config getters, each side verifying the other against the anchors.
func TestMutualTLSWithClientCertificates(t *testing.T) {
	m := startMesh(t, time.Hour, true)
	c := newClient(t, m, nil)
	runClient(t, c)
	waitReady(t, c, 10*time.Second)

	lis := testutil.Listen(t)
	srvCfg := &tls.Config{MinVersion: tls.VersionTLS13, GetCertificate: c.GetCertificate, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: m.anchors}
	var wg sync.WaitGroup
	peer := make(chan string, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		conn, err := lis.Accept()
		if err != nil {
			peer <- "accept: " + err.Error()
			return
		}
		defer conn.Close()
		tc := tls.Server(conn, srvCfg)
		_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
		if err := tc.Handshake(); err != nil {
			peer <- "handshake: " + err.Error()
			return
		}
		peer <- tc.ConnectionState().PeerCertificates[0].DNSNames[0]
	}()
	d := &net.Dialer{Timeout: 10 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", lis.Addr().String(), &tls.Config{
		MinVersion: tls.VersionTLS13, ServerName: webID, RootCAs: m.anchors, GetClientCertificate: c.GetClientCertificate,
	})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	conn.Close()
	if p := testutil.Recv(t, peer, 10*time.Second, "the handshake result"); p != webID {
		t.Fatalf("server saw peer %q, want %q", p, webID)
	}
	wg.Wait()
}

func TestRefreshDelay(t *testing.T) {
	cfg := client.DefaultConfig()
	now := time.Unix(1_700_000_000, 0)
	cases := []struct {
		left, want time.Duration
	}{
		{24 * time.Hour, time.Duration(0.7 * float64(24*time.Hour))},
		{100 * time.Second, 70 * time.Second},
		{5 * time.Second, cfg.MinRefresh},
		{-time.Hour, cfg.MinRefresh},
		{100 * 24 * time.Hour, cfg.MaxRefresh},
	}
	for _, tc := range cases {
		if got := client.RefreshDelay(now.Add(tc.left), now, cfg); got != tc.want {
			t.Errorf("RefreshDelay(%v left) = %v, want %v", tc.left, got, tc.want)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	cfg := client.DefaultConfig()
	if _, err := client.New(cfg, nil, client.StaticToken([]byte("x")), nil); err == nil {
		t.Fatal("New accepted an empty identity")
	}
	cfg.Identity = webID
	if _, err := client.New(cfg, nil, nil, nil); err == nil {
		t.Fatal("New accepted a nil token source")
	}
}
