package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

// TestPprofOnlyWithEnablePprof runs every server command twice, through its run function as
// `meridian <command>` does: without --enable-pprof its admin port answers 404 on
// /debug/pprof/ (and the profile endpoints), with it 200; /metrics and /live answer as
// always.
func TestPprofOnlyWithEnablePprof(t *testing.T) {
	dir := t.TempDir()
	// identity: an issuer and a local token key.
	issuer := filepath.Join(dir, "issuer")
	if code, _, errOut := capture(t, "identity", "init", "--out", issuer, "--local-token-key"); code != 0 {
		t.Fatalf("identity init: %d %s", code, errOut)
	}
	// injector: a serving keypair and a kubeconfig (nothing is asked of the API server
	// until a review arrives).
	cert, key := writeServingCert(t, dir)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	testutil.WriteKubeconfig(t, kubeconfig, kubeServer)
	policyDir := t.TempDir()
	servers := map[string]func(admin string) []string{
		"destination": func(admin string) []string {
			return []string{"destination", "--source", "dir:../../deploy/examples", "--addr", "127.0.0.1:0", "--admin-addr", admin, "--log-level", "error", "--plaintext"}
		},
		"policy": func(admin string) []string {
			return []string{"policy", "--source", "dir:" + policyDir, "--grpc-addr", "127.0.0.1:0", "--admin-addr", admin, "--log-level", "error", "--plaintext"}
		},
		"identity": func(admin string) []string {
			return []string{"identity", "--issuer-dir", issuer, "--tokens", "local", "--local-token-key", filepath.Join(issuer, "token-key.pem"),
				"--addr", "127.0.0.1:0", "--admin-addr", admin, "--log-level", "error"}
		},
		"injector": func(admin string) []string {
			return []string{"injector", "--tls-cert", cert, "--tls-key", key, "--kubeconfig", kubeconfig, "--trust-anchors-configmap", "",
				"--addr", "127.0.0.1:0", "--admin-addr", admin, "--log-level", "error"}
		},
	}
	for name, args := range servers {
		for _, enabled := range []bool{false, true} {
			t.Run(name+map[bool]string{false: "", true: "/enable-pprof"}[enabled], func(t *testing.T) {
				admin := freeAddr(t)
				argv := args(admin)
				if enabled {
					argv = append(argv, "--enable-pprof")
				}
				c := commands[argv[0]]
				testutil.Go(t, "meridian "+name, func(ctx context.Context) error { return c.run(ctx, argv[1:]) })
				base := "http://" + admin
				testutil.Eventually(t, 20*time.Second, "the admin port to answer /live", func() bool {
					code, _ := get(t, base+"/live")
					return code == http.StatusOK
				})
				if code, _ := get(t, base+"/metrics"); code != http.StatusOK {
					t.Errorf("/metrics = %d", code)
				}
				want := http.StatusNotFound
				if enabled {
					want = http.StatusOK
				}
				for _, path := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/heap", "/debug/pprof/symbol"} {
					if code, body := get(t, base+path); code != want {
						t.Errorf("%s = %d %.80q, want %d", path, code, body, want)
					}
				}
			})
		}
	}
}

// writeServingCert writes a self-signed ECDSA keypair for 127.0.0.1 and returns its files.
func writeServingCert(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "injector"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}
