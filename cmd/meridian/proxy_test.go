package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

// localMeshYAML is the README's local mesh: web-0 at webIP (app on :8080) behind Service
// web:80, and the client pod curl-0 at curlIP, both meshed.
func localMeshYAML(webIP, curlIP string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: shop, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints:
- addresses: [%[1]s]
  conditions: {ready: true}
  targetRef: {kind: Pod, namespace: shop, name: web-0}
---
apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: shop, labels: {app: web, linkerd.io/control-plane-ns: linkerd}}
spec:
  serviceAccountName: web
  containers: [{name: web, image: web, ports: [{name: http, containerPort: 8080}]}]
status: {podIP: %[1]s, podIPs: [{ip: %[1]s}]}
---
apiVersion: v1
kind: Pod
metadata: {name: curl-0, namespace: shop, labels: {app: curl, linkerd.io/control-plane-ns: linkerd}}
spec:
  serviceAccountName: curl
  containers: [{name: curl, image: curl}]
status: {podIP: %[2]s, podIPs: [{ip: %[2]s}]}
`, webIP, curlIP)
}

// TestProxyLocalMesh follows the README's recipe "Inbound without iptables, on one machine"
// with the commands themselves (in process): identity init and local tokens, identity,
// destination in transport-header mode, policy, an app, and a `meridian proxy` in front of
// it and one for the client, which uses its outbound as an HTTP proxy (curl -x). The
// proxies start before identity does: /ready says 503 until their first certificate.
func TestProxyLocalMesh(t *testing.T) {
	dir := t.TempDir()
	var b [1]byte
	_, _ = rand.Read(b[:])
	webIP, curlIP := fmt.Sprintf("127.%d.10.1", 100+b[0]%150), fmt.Sprintf("127.%d.20.1", 100+b[0]%150)
	idDir := filepath.Join(dir, "identity")
	if code, out, errOut := capture(t, "identity", "init", "--out", idDir, "--local-token-key"); code != 0 {
		t.Fatalf("identity init = %d: %s %s", code, out, errOut)
	}
	token := func(ns, sa string) string {
		code, out, errOut := capture(t, "identity", "token", "--key", filepath.Join(idDir, "token-key.pem"), "--namespace", ns, "--service-account", sa)
		if code != 0 {
			t.Fatalf("identity token = %d: %s", code, errOut)
		}
		file := filepath.Join(dir, ns+"."+sa+".token")
		if err := os.WriteFile(file, []byte(out), 0o600); err != nil {
			t.Fatal(err)
		}
		return file
	}
	webToken, curlToken := token("shop", "web"), token("shop", "curl")
	anchors, err := os.ReadFile(filepath.Join(idDir, "ca-bundle.crt"))
	if err != nil {
		t.Fatal(err)
	}
	cluster := filepath.Join(dir, "cluster")
	if err := os.Mkdir(cluster, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cluster, "shop.yaml"), []byte(localMeshYAML(webIP, curlIP)), 0o644); err != nil {
		t.Fatal(err)
	}
	identityAddr, dstAddr, policyAddr := freeAddr(t), freeAddr(t), freeAddr(t)

	app := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintf(w, "web-0 saw l5d-client-id: %s\n", r.Header.Get("l5d-client-id"))
	}), ReadHeaderTimeout: 5 * time.Second}
	appLis, err := net.Listen("tcp", webIP+":8080")
	if err != nil {
		t.Fatal(err)
	}
	testutil.Go(t, "web app", func(ctx context.Context) error {
		stop := context.AfterFunc(ctx, func() { _ = app.Close() })
		defer stop()
		if err := app.Serve(appLis); err != http.ErrServerClosed {
			return err
		}
		return nil
	})

	proxy := func(ip, pod, sa, tok string) {
		args := []string{
			"--inbound-listen-addr", ip + ":4143", "--outbound-listen-addr", ip + ":4140", "--admin-listen-addr", ip + ":4191",
			"--destination-svc-addr", dstAddr, "--destination-svc-name", dstID,
			"--policy-svc-addr", policyAddr, "--policy-svc-name", policyID, "--identity-svc-name", identityID,
			"--policy-workload", fmt.Sprintf(`{"ns":"shop","pod":%q}`, pod),
			"--identity-svc-addr", identityAddr, "--identity-trust-anchors", string(anchors), "--identity-token-file", tok,
			"--identity-local-name", sa + ".shop.serviceaccount.identity.linkerd.cluster.local",
			"--shutdown-grace-period", "1s", "--log", "error",
		}
		testutil.Go(t, "meridian proxy "+pod, func(ctx context.Context) error { return runProxy(ctx, args) })
	}
	proxy(webIP, "web-0", "web", webToken)
	proxy(curlIP, "curl-0", "curl", curlToken)
	for _, ip := range []string{webIP, curlIP} {
		testutil.EventuallyNoError(t, 20*time.Second, "the proxy at "+ip+" to say it has no certificate", func() error {
			code, body := get(t, "http://"+ip+":4191/ready")
			if code != http.StatusServiceUnavailable || !strings.Contains(body, "certificate") {
				return fmt.Errorf("/ready = %d %q", code, body)
			}
			return nil
		})
	}

	startLocalControlPlane(t, localControlPlane{idDir: idDir, cluster: cluster, identity: identityAddr, destination: dstAddr, policy: policyAddr},
		func(sa string) string { return token("linkerd", sa) })
	for _, ip := range []string{webIP, curlIP} {
		testutil.Eventually(t, 20*time.Second, "the proxy at "+ip+" to be ready", func() bool {
			code, _ := get(t, "http://"+ip+":4191/ready")
			return code == http.StatusOK
		})
		if code, body := get(t, "http://"+ip+":4191/live"); code != http.StatusOK {
			t.Errorf("/live = %d %q", code, body)
		}
	}

	// curl -x http://<curl ip>:4140 http://web.shop.svc.cluster.local/
	tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: curlIP + ":4140"})}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	resp, err := c.Get("http://web.shop.svc.cluster.local/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := "web-0 saw l5d-client-id: curl.shop.serviceaccount.identity.linkerd.cluster.local\n"; resp.StatusCode != http.StatusOK || string(body) != want {
		t.Fatalf("GET web through the curl proxy = %d %q, want 200 %q", resp.StatusCode, body, want)
	}
	_, metrics := get(t, "http://"+webIP+":4191/metrics")
	want := `client_id="curl.shop.serviceaccount.identity.linkerd.cluster.local",direction="inbound"`
	if !strings.Contains(metrics, "request_total{") || !strings.Contains(metrics, want) || !strings.Contains(metrics, `tls="true"`) {
		t.Errorf("the web proxy's /metrics lacks an inbound request_total with %s and tls=\"true\"", want)
	}
}

// TestProxyConfigErrors: what the proxy needs is named (the variable and its flag), a bad
// value names its variable, a bad flag is a usage error.
func TestProxyConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		code int
		want []string
	}{
		{"nothing configured", nil, nil, 1, []string{"LINKERD2_PROXY_DESTINATION_SVC_ADDR", "--destination-svc-addr", "LINKERD2_PROXY_IDENTITY_SVC_ADDR"}},
		{"bad environment", map[string]string{"LINKERD2_PROXY_INBOUND_PORTS": "80,x"}, nil, 1, []string{"LINKERD2_PROXY_INBOUND_PORTS", `"x" is not a port`}},
		{"bad flag value", nil, []string{"--outbound-connect-timeout", "soon"}, 2, []string{"outbound-connect-timeout", "duration"}},
		{"no trust anchors", nil, []string{"--destination-svc-addr", "127.0.0.1:1", "--identity-svc-addr", "127.0.0.1:1",
			"--identity-local-name", "a.b.serviceaccount.identity.linkerd.cluster.local", "--identity-token-file", "/dev/null",
			"--identity-trust-anchors", "not PEM"}, 1, []string{"TRUST_ANCHORS"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			code, _, errOut := capture(t, append([]string{"proxy"}, tc.args...)...)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr %q", code, tc.code, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr %q lacks %q", errOut, w)
				}
			}
		})
	}
}

// localControlPlane is where TestProxyLocalMesh's control plane runs and what it reads.
type localControlPlane struct{ idDir, cluster, identity, destination, policy string }

// startLocalControlPlane starts identity, destination (transport-header mode) and policy as
// the README's recipe does, destination and policy over mTLS under their Linkerd identities
// (certificates from identity, tokens from token), and waits until both are ready.
func startLocalControlPlane(t *testing.T, cp localControlPlane, token func(sa string) string) {
	t.Helper()
	idDir, cluster, identityAddr, dstAddr, policyAddr := cp.idDir, cp.cluster, cp.identity, cp.destination, cp.policy
	testutil.Go(t, "meridian identity", func(ctx context.Context) error {
		return runIdentity(ctx, []string{"--issuer-dir", idDir, "--tokens", "local", "--local-token-key", filepath.Join(idDir, "token-key.pem"),
			"--addr", identityAddr, "--admin-addr", "127.0.0.1:0", "--log-level", "error"})
	})
	// Destination and policy serve mTLS under their Linkerd identities, with certificates
	// from identity, as the proxies' *_SVC_NAME settings require.
	cpTLS := func(sa string) []string {
		return []string{"--identity-addr", identityAddr, "--identity-trust-anchors", filepath.Join(idDir, "ca-bundle.crt"), "--identity-token-file", token(sa)}
	}
	dstTLS, policyTLS := cpTLS("linkerd-destination"), cpTLS("linkerd-policy")
	dstAdmin, policyAdmin := freeAddr(t), freeAddr(t)
	testutil.Go(t, "meridian destination", func(ctx context.Context) error {
		return runDestination(ctx, append([]string{"--source", "dir:" + cluster, "--outbound-transport-mode", "transport-header",
			"--addr", dstAddr, "--admin-addr", dstAdmin, "--log-level", "error"}, dstTLS...))
	})
	testutil.Go(t, "meridian policy", func(ctx context.Context) error {
		return runPolicy(ctx, append([]string{"--source", "dir:" + cluster, "--grpc-addr", policyAddr, "--admin-addr", policyAdmin, "--log-level", "error"},
			policyTLS...))
	})
	// Ready once their certificates came from identity and their sources are read.
	waitReady(t, dstAdmin)
	waitReady(t, policyAdmin)
}
