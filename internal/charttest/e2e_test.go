package charttest_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"github.com/linkerd/linkerd2-proxy-api/go/inbound"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/meridian-mesh/meridian/identity"
	idclient "github.com/meridian-mesh/meridian/identity/client"
	"github.com/meridian-mesh/meridian/internal/charttest"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/internal/tlsid"
)

// webAccount creates a namespace with the ServiceAccount web and returns the namespace and a
// token of web from the TokenRequest API (audience identity.l5d.io, an hour), as the kubelet
// projects one for a proxy.
func webAccount(ctx context.Context, t *testing.T, f *fixture) (ns, token string) {
	t.Helper()
	ns = f.env.Namespace(t, nil)
	if _, err := f.env.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := f.env.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "web", &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{Audiences: []string{identity.Audience}, ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns, tr.Status.Token
}

// certify gets a workload certificate from the running identity, as a proxy does: a
// ServiceAccount token from the TokenRequest API (audience identity.l5d.io), checked by
// identity with a TokenReview under the chart's RBAC, signed with the issuer of its Secret.
func certify(t *testing.T, f *fixture, k *charttest.Kubelet) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns, token := webAccount(ctx, t, f)
	tok, anchors := filepath.Join(f.dir, "web.token"), filepath.Join(f.dir, "anchors.pem")
	cm, err := f.env.Client.CoreV1().ConfigMaps(f.ns).Get(ctx, "linkerd-identity-trust-roots", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tok, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(anchors, []byte(cm.Data["ca-bundle.crt"]), 0o600); err != nil {
		t.Fatal(err)
	}
	pods := k.PodNames("Deployment/linkerd-identity")
	id := "web." + ns + ".serviceaccount.identity." + f.ns + ".cluster.local"
	out := f.meridian(t, 0, "identity", "certify", "--addr", net.JoinHostPort(k.PodIP(pods[0]), "8080"),
		"--identity", id, "--token", tok, "--trust-anchors", anchors, "--timeout", "30s",
		"--identity-svc-name", "linkerd-identity."+f.ns+".serviceaccount.identity."+f.ns+".cluster.local")
	if !strings.Contains(out, "DNS SANs:   "+id) || !strings.Contains(out, "verified against trust anchors: true") {
		t.Fatalf("identity certify printed:\n%s", out)
	}
}

// admit sends an AdmissionReview for a pod of a namespace with linkerd.io/inject: enabled to
// a running injector over TLS, trusting only the caBundle of the MutatingWebhookConfiguration
// and naming the Service as the API server does, and expects the proxy in the patch.
func admit(t *testing.T, f *fixture, k *charttest.Kubelet) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mwc, err := f.env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "linkerd-"+f.ns+"-proxy-injector", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(mwc.Webhooks[0].ClientConfig.CABundle) {
		t.Fatal("no certificate in the webhook's caBundle")
	}
	app := f.env.Namespace(t, nil)
	nsObj, err := f.env.Client.CoreV1().Namespaces().Get(ctx, app, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nsObj.Annotations = map[string]string{"linkerd.io/inject": "enabled"}
	if _, err := f.env.Client.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: app},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
	}
	raw, _ := json.Marshal(&pod)
	review, _ := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: types.UID("1"), Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: app, Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw},
		},
	})
	addr := net.JoinHostPort(k.PodIP(k.PodNames("Deployment/linkerd-proxy-injector")[0]), "8443")
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: roots, ServerName: "linkerd-proxy-injector." + f.ns + ".svc",
	}}}
	resp, err := c.Post("https://"+addr+"/", "application/json", bytes.NewReader(review))
	if err != nil {
		t.Fatalf("POST the AdmissionReview to the injector: %v", err)
	}
	defer resp.Body.Close()
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("decode the answer (%s): %v", resp.Status, err)
	}
	if out.Response == nil || !out.Response.Allowed || !strings.Contains(string(out.Response.Patch), "linkerd-proxy") {
		t.Fatalf("injector answered %+v, want an allowed review whose patch adds linkerd-proxy", out.Response)
	}
}

// signIssuer returns a new issuer (PEM certificate and key) signed by the fixture's trust
// anchor and valid for validity.
func signIssuer(t *testing.T, f *fixture, validity time.Duration) (crtPEM, keyPEM []byte) {
	t.Helper()
	vals := map[string]any{}
	b, err := os.ReadFile(f.identity)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &vals); err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode([]byte(vals["identityTrustAnchorsPEM"].(string)))
	anchor, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := os.ReadFile(f.anchorKey)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ = pem.Decode(kb)
	key, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	crt, ik, err := identity.NewCA("identity."+f.ns+".cluster.local", now.Add(-time.Minute), now.Add(validity), anchor, key.(crypto.Signer))
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(ik)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: crt.Raw}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// otherCA returns a CA certificate unrelated to the chart's, in PEM.
func otherCA(t *testing.T) []byte {
	t.Helper()
	now := time.Now()
	c, _, err := identity.NewCA("not-the-webhook-ca", now.Add(-time.Minute), now.Add(365*24*time.Hour), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

// manifestDocs splits `helm get manifest` output into objects by "Kind/name".
func manifestDocs(t *testing.T, manifest string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, doc := range strings.Split(manifest, "\n---") {
		obj := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("manifest document: %v", err)
		}
		if len(obj) == 0 {
			continue
		}
		out[obj["kind"].(string)+"/"+obj["metadata"].(map[string]any)["name"].(string)] = obj
	}
	return out
}

// controlPlaneMTLS proves the running control plane serves mTLS under the identities the
// injector gives proxies: a workload certificate obtained as a proxy does (a TokenRequest
// token, identity/client over TLS verifying linkerd-identity) is served by a destination
// replica (verified as linkerd-destination) and by policy (as linkerd-policy), and a
// plaintext client is refused by both.
func controlPlaneMTLS(t *testing.T, f *fixture, k *charttest.Kubelet) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns, token := webAccount(ctx, t, f)
	if _, err := f.env.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm, err := f.env.Client.CoreV1().ConfigMaps(f.ns).Get(ctx, "linkerd-identity-trust-roots", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	roots, err := tlsid.ParseTrustAnchors([]byte(cm.Data["ca-bundle.crt"]))
	if err != nil {
		t.Fatal(err)
	}
	cp := func(sa string) string { return identity.ServiceAccountIdentity(f.ns, sa, f.ns, "cluster.local") }
	anon, _ := tlsid.New(nil, roots)
	idAddr := net.JoinHostPort(k.PodIP(k.PodNames("Deployment/linkerd-identity")[0]), "8080")
	conn, err := grpc.NewClient(idAddr, grpc.WithTransportCredentials(credentials.NewTLS(anon.Client(cp("linkerd-identity"), "h2"))))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cfg := idclient.DefaultConfig()
	cfg.Identity, cfg.TrustAnchors = identity.ServiceAccountIdentity(ns, "web", f.ns, "cluster.local"), roots
	c, err := idclient.New(cfg, conn, idclient.StaticToken([]byte(token)), nil)
	if err != nil {
		t.Fatal(err)
	}
	crt, err := c.CertifyOnce(ctx)
	if err != nil {
		t.Fatalf("certify through the identity service's TLS as %s: %v", cp("linkerd-identity"), err)
	}
	web, _ := tlsid.New(fixedCert{crt}, roots)
	call := func(addr string, creds credentials.TransportCredentials, rpc func(context.Context, *grpc.ClientConn) error) error {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			return err
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return rpc(ctx, conn)
	}
	get := func(ctx context.Context, conn *grpc.ClientConn) error {
		s, err := pb.NewDestinationClient(conn).Get(ctx, &pb.GetDestination{Path: "web." + ns + ".svc.cluster.local:80"})
		if err == nil {
			_, err = s.Recv()
		}
		return err
	}
	getPort := func(ctx context.Context, conn *grpc.ClientConn) error {
		_, err := inbound.NewInboundServerPoliciesClient(conn).GetPort(ctx, &inbound.PortSpec{Workload: `{"ns":"` + ns + `","pod":"nothere"}`, Port: 80})
		if status.Code(err) == codes.NotFound {
			return nil // served: no such pod
		}
		return err
	}
	dst := net.JoinHostPort(k.PodIP("linkerd-destination-0"), "8086")
	pol := net.JoinHostPort(k.PodIP(k.PodNames("Deployment/linkerd-policy")[0]), "8090")
	testutil.EventuallyNoError(t, 30*time.Second, "the destination to serve a mesh client", func() error {
		return call(dst, credentials.NewTLS(web.Client(cp("linkerd-destination"), "h2")), get)
	})
	if err := call(pol, credentials.NewTLS(web.Client(cp("linkerd-policy"), "h2")), getPort); err != nil {
		t.Errorf("policy, a mesh client: %v", err)
	}
	for name, addr := range map[string]string{"destination": dst, "policy": pol} {
		rpc := map[string]func(context.Context, *grpc.ClientConn) error{"destination": get, "policy": getPort}[name]
		if err := call(addr, insecure.NewCredentials(), rpc); status.Code(err) != codes.Unavailable {
			t.Errorf("%s, a plaintext client: %v; want Unavailable (refused)", name, err)
		}
	}
}

// fixedCert serves one certificate.
type fixedCert struct{ c *tls.Certificate }

func (f fixedCert) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) { return f.c, nil }
func (f fixedCert) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return f.c, nil
}
