package charttest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meridian-mesh/meridian/internal/charttest"
	"github.com/meridian-mesh/meridian/internal/testutil"
)

const destination = "StatefulSet/linkerd-destination"

// createServices creates n Services in a new namespace, for the ring to share out.
func createServices(t *testing.T, f *fixture, n int) {
	t.Helper()
	ns := f.env.Namespace(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := 0; i < n; i++ {
		_, err := f.env.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%d", i)},
			Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": fmt.Sprint(i)}, Ports: []corev1.ServicePort{{Port: 80}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// waitRing waits until every destination replica's /ring lists exactly the StatefulSet's n
// pods, each owning at least one service.
func waitRing(t *testing.T, k *charttest.Kubelet, n int) {
	t.Helper()
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("linkerd-destination-%d", i)
	}
	slices.Sort(want)
	if got := k.PodNames(destination); !slices.Equal(got, want) {
		t.Fatalf("destination pods = %v, want %v", got, want)
	}
	var last string
	defer func() {
		if t.Failed() {
			t.Logf("last ring seen: %s", last)
		}
	}()
	testutil.Eventually(t, 90*time.Second, fmt.Sprintf("a ring of %d replicas", n), func() bool {
		for _, name := range want {
			members, services, total, err := ringOf(k.PodIP(name))
			if err != nil {
				last = name + ": " + err.Error()
				return false
			}
			slices.Sort(members)
			if !slices.Equal(members, want) {
				last = fmt.Sprintf("%s sees %v", name, members)
				return false
			}
			sum := 0
			for m, s := range services {
				if s == 0 {
					last = fmt.Sprintf("%s: %s owns no service of %d", name, m, total)
					return false
				}
				sum += s
			}
			if sum != total {
				last = fmt.Sprintf("%s: owners of %d services sum to %d", name, total, sum)
				return false
			}
		}
		return true
	})
}

// TestStandIn installs the chart with helm, runs it on the stand-in kubelet, and then proves
// it works: every probe answers 200, the replicas form one ring, a proxy's certificate goes
// through, the control plane serves mTLS (internal/cptls) with the certificates its projected
// tokens got it, a pod injected by the injector runs its meridian-proxy until ready, and
// `meridian check` passes; an upgrade to 5 replicas changes only the StatefulSet's count and
// the ring grows to 5; and check fails, saying why, when the issuer is about to expire, when
// the webhook's caBundle does not match, and when a replica stops.
func TestStandIn(t *testing.T) {
	f := newFixture(t)
	createServices(t, f, 40)
	f.install(t, "--set", "destination.replicas=3")
	k := charttest.Start(t, charttest.Config{Env: f.env, Namespace: f.ns, Binary: f.bin})
	k.Sync(t)
	k.WaitReady(t, 2*time.Minute)
	if bad := k.ProbeAll(); len(bad) > 0 {
		t.Fatalf("probes that do not answer 200:\n%s", strings.Join(bad, "\n"))
	}
	waitRing(t, k, 3)
	// Each replica read its StatefulSet's count (its Role allows that get) and waited for it.
	for _, name := range k.PodNames(destination) {
		if log := k.Log(name); !strings.Contains(log, "expecting the StatefulSet's replicas") || !strings.Contains(log, `"expect_replicas":3`) {
			t.Errorf("%s did not read its StatefulSet's 3 replicas; its log:\n%s", name, log)
		}
	}
	certify(t, f, k)
	controlPlaneMTLS(t, f, k)
	injectedProxy(t, f, k)
	if rep, ok := f.check(t); !ok {
		t.Fatalf("meridian check failed: %v", failedChecks(rep))
	}

	t.Run("upgrade to 5 replicas", func(t *testing.T) {
		f.helm(t, "upgrade", "meridian", charttest.ChartDir(), "-n", f.ns, "-f", f.identity, "--set", "destination.replicas=5")
		before := manifestDocs(t, f.helm(t, "get", "manifest", "meridian", "-n", f.ns, "--revision", "1"))
		after := manifestDocs(t, f.helm(t, "get", "manifest", "meridian", "-n", f.ns, "--revision", "2"))
		diffOnlyReplicas(t, before, after, 3, 5)
		k.Sync(t)
		k.WaitReady(t, 2*time.Minute)
		waitRing(t, k, 5)
		if rep, ok := f.check(t); !ok {
			t.Fatalf("meridian check after the upgrade failed: %v", failedChecks(rep))
		}
	})

	t.Run("check fails on an issuer that expires within 60 days", func(t *testing.T) {
		crt, key := signIssuer(t, f, 30*24*time.Hour)
		restore := replaceSecret(t, f, "linkerd-identity-issuer", map[string][]byte{"crt.pem": crt, "key.pem": key})
		defer restore()
		wantOnlyFailure(t, f, "the trust anchors and the issuer are valid", "expires in 29 days")
	})

	t.Run("check fails on a caBundle that does not match", func(t *testing.T) {
		restore := replaceCABundle(t, f, otherCA(t))
		defer restore()
		wantOnlyFailure(t, f, "the webhook's certificate matches its caBundle and is valid", "does not verify against the caBundle")
	})

	t.Run("check fails when a replica stops", func(t *testing.T) {
		k.StopPod(t, "linkerd-destination-4")
		testutil.EventuallyNoError(t, time.Minute, "meridian check sees the stopped replica", func() error {
			rep, ok := f.check(t)
			failed := failedChecks(rep)
			switch {
			case ok:
				return fmt.Errorf("check passed")
			case !strings.Contains(failed["the control-plane pods are ready"], "linkerd-destination: 4 of 5 pods ready"):
				return fmt.Errorf("pods check: %q", failed["the control-plane pods are ready"])
			case !strings.Contains(failed["the destination replicas agree on one ring, and every service has one owner"], "linkerd-destination-4: /ring:"):
				return fmt.Errorf("ring check: %q", failed["the destination replicas agree on one ring, and every service has one owner"])
			}
			return nil
		})
	})
}

// diffOnlyReplicas fails t unless the two releases' manifests hold the same objects, equal but
// for the destination StatefulSet's replicas going from n to m.
func diffOnlyReplicas(t *testing.T, before, after map[string]map[string]any, n, m int) {
	t.Helper()
	if len(before) != len(after) {
		t.Fatalf("the upgrade changed the set of objects: %d before, %d after", len(before), len(after))
	}
	for key, b := range before {
		a, ok := after[key]
		if !ok {
			t.Fatalf("the upgrade removed %s", key)
		}
		if key == destination {
			bs, as := b["spec"].(map[string]any), a["spec"].(map[string]any)
			if bs["replicas"] != float64(n) || as["replicas"] != float64(m) {
				t.Fatalf("StatefulSet replicas went %v -> %v, want %d -> %d", bs["replicas"], as["replicas"], n, m)
			}
			as["replicas"] = bs["replicas"]
		}
		if !reflect.DeepEqual(a, b) {
			bj, _ := json.Marshal(b)
			aj, _ := json.Marshal(a)
			t.Errorf("the upgrade changed %s:\nbefore %s\nafter  %s", key, bj, aj)
		}
	}
}

// wantOnlyFailure waits until check fails the named check with a message containing want,
// and no other check.
func wantOnlyFailure(t *testing.T, f *fixture, name, want string) {
	t.Helper()
	testutil.EventuallyNoError(t, 30*time.Second, "meridian check fails "+name, func() error {
		rep, ok := f.check(t)
		failed := failedChecks(rep)
		if ok || len(failed) != 1 || !strings.Contains(failed[name], want) {
			return fmt.Errorf("failed checks %v, want only %q with %q", failed, name, want)
		}
		return nil
	})
}

// replaceSecret sets a Secret's data and returns a func restoring it.
func replaceSecret(t *testing.T, f *fixture, name string, data map[string][]byte) func() {
	t.Helper()
	return replaceObject(t, f.env.Client.CoreV1().Secrets(f.ns), name, "Secret "+name, func(s *corev1.Secret) func(*corev1.Secret) {
		old := s.Data
		s.Data = data
		return func(s *corev1.Secret) { s.Data = old }
	})
}

// replaceCABundle sets the webhook's caBundle and returns a func restoring it.
func replaceCABundle(t *testing.T, f *fixture, bundle []byte) func() {
	t.Helper()
	mwcs := f.env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	return replaceObject(t, mwcs, "linkerd-"+f.ns+"-proxy-injector", "the caBundle", func(m *admissionregv1.MutatingWebhookConfiguration) func(*admissionregv1.MutatingWebhookConfiguration) {
		old := m.Webhooks[0].ClientConfig.CABundle
		m.Webhooks[0].ClientConfig.CABundle = bundle
		return func(m *admissionregv1.MutatingWebhookConfiguration) { m.Webhooks[0].ClientConfig.CABundle = old }
	})
}
