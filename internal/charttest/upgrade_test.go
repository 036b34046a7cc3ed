package charttest_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/meridian-mesh/meridian/internal/charttest"
)

// TestGeneratedSecretsKeptAndRenewed installs the chart with helm and upgrades it: the gossip
// key and the webhook's certificate (with its caBundle) stay the same across an upgrade, and a
// certificate that expires within certRenewDays is replaced, caBundle included.
func TestGeneratedSecretsKeptAndRenewed(t *testing.T) {
	f := newFixture(t)
	f.install(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	get := func(name string) map[string][]byte {
		t.Helper()
		return f.secret(ctx, t, name).Data
	}
	caBundle := func() []byte {
		t.Helper()
		m, err := f.env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "linkerd-"+f.ns+"-proxy-injector", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return m.Webhooks[0].ClientConfig.CABundle
	}
	upgrade := func() { f.helm(t, "upgrade", "meridian", charttest.ChartDir(), "-n", f.ns, "-f", f.identity) }
	gossip, tlsData := get("linkerd-dst-gossip-key"), get("linkerd-proxy-injector-k8s-tls")
	if !bytes.Equal(caBundle(), tlsData["ca.crt"]) {
		t.Fatal("the caBundle is not the CA of the webhook's Secret")
	}
	upgrade()
	if !reflect.DeepEqual(get("linkerd-dst-gossip-key"), gossip) || !reflect.DeepEqual(get("linkerd-proxy-injector-k8s-tls"), tlsData) || !bytes.Equal(caBundle(), tlsData["ca.crt"]) {
		t.Fatal("helm upgrade replaced the gossip key or the webhook's certificate")
	}
	// A certificate that expires within certRenewDays (60) is renewed by the next upgrade.
	f.editSecret(ctx, t, "linkerd-proxy-injector-k8s-tls", func(s *corev1.Secret) {
		s.Annotations["meridian.io/not-after"] = fmt.Sprint(time.Now().Add(30 * 24 * time.Hour).Unix())
	})
	upgrade()
	renewed := get("linkerd-proxy-injector-k8s-tls")
	if bytes.Equal(renewed["tls.crt"], tlsData["tls.crt"]) || !bytes.Equal(caBundle(), renewed["ca.crt"]) {
		t.Fatal("an upgrade did not renew a certificate expiring within 60 days together with its caBundle")
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(renewed["ca.crt"])
	blk, _ := pem.Decode(renewed["tls.crt"])
	leaf, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "linkerd-proxy-injector." + f.ns + ".svc"}); err != nil {
		t.Fatalf("the renewed certificate does not verify against its caBundle: %v", err)
	}
	// The injector serves the old certificate until the kubelet updates its Secret volume:
	// the caBundle the API server reads at once trusts it too.
	blk, _ = pem.Decode(tlsData["tls.crt"])
	oldLeaf, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := oldLeaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "linkerd-proxy-injector." + f.ns + ".svc"}); err != nil {
		t.Fatalf("the certificate served until the Secret volume updates does not verify against the renewed caBundle: %v", err)
	}
	if !reflect.DeepEqual(get("linkerd-dst-gossip-key"), gossip) {
		t.Fatal("the renewal replaced the gossip key")
	}
}

// TestAutoscalingKeepsReplicas: an upgrade that turns autoscaling on keeps the StatefulSet's
// current count (the field dropped, Helm's patch would reset the ring to one replica), and one
// that turns it off, or any upgrade that does not set destination.replicas, keeps the count the
// autoscaler (or `kubectl scale`) left; the rendered 1 of before took every replica but one out
// of the ring at once. An explicit destination.replicas still scales.
func TestAutoscalingKeepsReplicas(t *testing.T) {
	f := newFixture(t)
	f.install(t, "--set", "destination.replicas=3")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stsReplicas := func() int32 {
		t.Helper()
		sts, err := f.env.Client.AppsV1().StatefulSets(f.ns).Get(ctx, "linkerd-destination", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return ptr.Deref(sts.Spec.Replicas, 1)
	}
	upgrade := func(set ...string) {
		t.Helper()
		f.helm(t, append([]string{"upgrade", "meridian", charttest.ChartDir(), "-n", f.ns, "-f", f.identity}, set...)...)
	}
	upgrade("--set", "destination.autoscaling.enabled=true,destination.autoscaling.minReplicas=2,destination.resources.requests.cpu=100m")
	if got := stsReplicas(); got != 3 {
		t.Fatalf("after the upgrade to autoscaling the StatefulSet has %d replicas, want the 3 it had", got)
	}
	// The autoscaler scales the ring up (no controller manager runs here: the test does it
	// through the scale subresource, as the HPA controller does).
	if _, err := f.env.Client.AppsV1().StatefulSets(f.ns).UpdateScale(ctx, "linkerd-destination",
		&autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "linkerd-destination", Namespace: f.ns}, Spec: autoscalingv1.ScaleSpec{Replicas: 5}},
		metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	upgrade() // autoscaling back to its default, off; destination.replicas unset
	if got := stsReplicas(); got != 5 {
		t.Fatalf("after the upgrade turning autoscaling off the StatefulSet has %d replicas, want the 5 the autoscaler left", got)
	}
	upgrade("--set", "destination.replicas=2")
	if got := stsReplicas(); got != 2 {
		t.Fatalf("after an upgrade with destination.replicas=2 the StatefulSet has %d replicas, want 2", got)
	}
	upgrade()
	if got := stsReplicas(); got != 2 {
		t.Fatalf("after an upgrade without destination.replicas the StatefulSet has %d replicas, want the 2 it had", got)
	}
}

// objectsOf decodes `meridian install`'s output, without its Namespace (the fixture's).
func objectsOf(t *testing.T, stream string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(stream, "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("install output does not parse: %v", err)
		}
		if len(u.Object) > 0 && u.GetKind() != "Namespace" {
			out = append(out, u)
		}
	}
	return out
}

// TestInstallReadsTheCluster: `meridian install` renders against the cluster it finds, as helm
// install does: run again (to scale, say), it keeps the gossip key and the webhook's
// certificate that the first run put there, and it refuses to generate a second trust anchor
// over a running control plane, which would break every proxy's mTLS, unless told to.
func TestInstallReadsTheCluster(t *testing.T) {
	f := newFixture(t)
	install := func(code int, args ...string) string {
		t.Helper()
		return f.meridian(t, code, append([]string{"install", "--namespace", f.ns, "--kubeconfig", f.kubeconfig}, args...)...)
	}
	first := objectsOf(t, install(0, "-f", f.identity))
	applyAll(t, f, first, false)
	second := objectsOf(t, install(0, "-f", f.identity, "--set", "destination.replicas=3"))
	find := func(objs []*unstructured.Unstructured, kind, name string) map[string]any {
		t.Helper()
		for _, o := range objs {
			if o.GetKind() == kind && o.GetName() == name {
				return o.Object
			}
		}
		t.Fatalf("no %s %s rendered", kind, name)
		return nil
	}
	for _, s := range []string{"linkerd-dst-gossip-key", "linkerd-proxy-injector-k8s-tls"} {
		if !reflect.DeepEqual(find(first, "Secret", s)["data"], find(second, "Secret", s)["data"]) {
			t.Errorf("a second install renders Secret %s anew", s)
		}
	}
	install(1) // no identity values: a new trust anchor over the running control plane
	if out := install(0, "--ignore-cluster"); !strings.Contains(out, "kind: StatefulSet") {
		t.Error("--ignore-cluster did not render")
	}
}
