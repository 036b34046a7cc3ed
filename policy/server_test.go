package policy

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/linkerd/linkerd2-proxy-api/go/inbound"
	"github.com/meridian-mesh/meridian/policy/api"
	"github.com/meridian-mesh/meridian/policy/compute"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestGetPortSeedExample(t *testing.T) {
	env, ctx := startSeeded(t)
	for _, workload := range []string{`{"ns":"shop","pod":"web-0"}`, "shop:web-0"} {
		got, err := env.client.GetPort(ctx, &inbound.PortSpec{Workload: workload, Port: 8080})
		if err != nil {
			t.Fatalf("GetPort(%s): %v", workload, err)
		}
		if got.GetLabels()["name"] != "web-http" || got.GetLabels()["kind"] != "server" || got.GetProtocol().GetHttp1() == nil {
			t.Errorf("server = %v", got)
		}
		if ids := identities(got); !slices.Equal(ids, []string{"web-from-gateway=" + gatewayID}) {
			t.Errorf("authorizations = %v", ids)
		}
		routes := got.GetProtocol().GetHttp1().GetRoutes()
		if len(routes) != 2 || routes[1].GetMetadata().GetDefault() != "probe" || len(routes[1].GetRules()[0].GetMatches()) != 2 {
			t.Errorf("routes = %v", routes)
		}
	}
	// The pod's other port has no Server: the cluster default.
	got, err := env.client.GetPort(ctx, &inbound.PortSpec{Workload: "shop:web-0", Port: 9000})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetLabels()["kind"] != "default" || got.GetLabels()["name"] != "all-unauthenticated" || got.GetProtocol().GetDetect() == nil {
		t.Errorf("default server = %v", got)
	}
	// The annotation sets the gateway's default.
	got, err = env.client.GetPort(ctx, &inbound.PortSpec{Workload: "shop:api-gateway-0", Port: 8080})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetLabels()["name"] != "cluster-authenticated" {
		t.Errorf("annotated default = %v", got.GetLabels())
	}
}

func TestBadRequests(t *testing.T) {
	env, ctx := startSeeded(t)
	cases := []struct {
		workload string
		port     uint32
		code     codes.Code
		msg      string
	}{
		{"", 8080, codes.InvalidArgument, "invalid workload"},
		{"shop", 8080, codes.InvalidArgument, "invalid workload"},
		{"{bad json", 8080, codes.InvalidArgument, "invalid workload"},
		{`{"ns":"shop"}`, 8080, codes.InvalidArgument, "exactly one of"},
		{`{"ns":"shop","nonsense":"x"}`, 8080, codes.InvalidArgument, "exactly one of"},
		{"Shop:web-0", 8080, codes.InvalidArgument, "namespace"},
		{"shop:", 8080, codes.InvalidArgument, "name"},
		{"shop:web-0", 0, codes.InvalidArgument, "invalid port 0"},
		{"shop:web-0", 70000, codes.InvalidArgument, "invalid port 70000"},
		{"shop:web-9", 8080, codes.NotFound, "pod web-9 not found in namespace shop"},
		{"bank:web-0", 8080, codes.NotFound, "not found"},
		{`{"ns":"shop","external_workload":"vm-1"}`, 8080, codes.NotFound, "external workload shop/vm-1"},
	}
	for _, tc := range cases {
		spec := &inbound.PortSpec{Workload: tc.workload, Port: tc.port}
		_, err := env.client.GetPort(ctx, spec)
		if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.msg) {
			t.Errorf("GetPort(%q, %d) = %v, want %v containing %q", tc.workload, tc.port, err, tc.code, tc.msg)
		}
		stream, err := env.client.WatchPort(ctx, spec)
		if err == nil {
			_, err = stream.Recv()
		}
		if status.Code(err) != tc.code {
			t.Errorf("WatchPort(%q, %d) = %v, want %v", tc.workload, tc.port, err, tc.code)
		}
	}
}

// TestWatchPort: the first message is the current policy; a policy change is sent; changes
// that do not alter the policy send nothing (they are recomputed and suppressed); deleting
// the pod ends the stream.
func TestWatchPort(t *testing.T) {
	env, ctx := startSeeded(t)
	stream, err := env.client.WatchPort(ctx, &inbound.PortSpec{Workload: `{"ns":"shop","pod":"web-0"}`, Port: 8080})
	if err != nil {
		t.Fatal(err)
	}
	first := recv(t, stream)
	if ids := identities(first); !slices.Equal(ids, []string{"web-from-gateway=" + gatewayID}) {
		t.Fatalf("first = %v", ids)
	}
	eventually(t, "the watch to register", func() bool { return counterValue(t, env.metrics.watches) == 1 })

	// Irrelevant changes: another namespace's Server, a non-selecting Server and a policy for
	// another Server in the same namespace, a pod label nobody selects on, another pod.
	suppressed := counterValue(t, env.metrics.suppressed)
	for _, r := range manifests(t, `
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: web-http, namespace: bank}
spec: {podSelector: {matchLabels: {app: web}}, port: http}`, `
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: api-http, namespace: shop}
spec: {podSelector: {matchLabels: {app: api}}, port: http}`, `
apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: api-open, namespace: shop}
spec:
  targetRef: {group: policy.linkerd.io, kind: Server, name: api-http}
  requiredAuthenticationRefs: []`,
		strings.Replace(readTestdata(t, "pods.yaml"), "labels: {app: web}", "labels: {app: web, version: v2}", 1)) {
		env.idx.Apply(r)
	}
	eventually(t, "the irrelevant changes to be recomputed", func() bool {
		return counterValue(t, env.metrics.suppressed) > suppressed
	})

	// A relevant change: the policy now requires a MeshTLSAuthentication instead.
	for _, r := range manifests(t, `
apiVersion: policy.linkerd.io/v1alpha1
kind: MeshTLSAuthentication
metadata: {name: ops, namespace: shop}
spec: {identityRefs: [{kind: ServiceAccount, name: ops}]}`, `
apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: web-from-gateway, namespace: shop}
spec:
  targetRef: {group: policy.linkerd.io, kind: Server, name: web-http}
  requiredAuthenticationRefs:
  - {group: policy.linkerd.io, kind: MeshTLSAuthentication, name: ops}`) {
		env.idx.Apply(r)
	}
	// The next message must be the new policy: nothing was sent for the irrelevant changes.
	next := recv(t, stream)
	if ids := identities(next); !slices.Equal(ids, []string{"web-from-gateway=ops.shop.serviceaccount.identity.linkerd.cluster.local"}) {
		t.Fatalf("after the change = %v", ids)
	}

	// Deleting the Server falls back to the pod's default policy.
	env.idx.Delete(api.KindServer, compute.Key{Namespace: "shop", Name: "web-http"})
	next = recv(t, stream)
	if next.GetLabels()["kind"] != "default" {
		t.Fatalf("after deleting the Server = %v", next.GetLabels())
	}

	// Deleting the pod ends the stream with OK.
	env.idx.Delete(api.KindPod, compute.Key{Namespace: "shop", Name: "web-0"})
	done := make(chan error, 1)
	go func() {
		_, err := stream.Recv()
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, io.EOF) {
			t.Fatalf("after pod deletion: %v, want EOF", err)
		}
	case <-ctx.Done():
		t.Fatal("stream did not end after pod deletion")
	}
	eventually(t, "the watch to unregister", func() bool { return counterValue(t, env.metrics.watches) == 0 })
}

// TestWatchPortCoalesces: many changes while a stream is not reading fold into few
// recomputations, and the stream ends up with the latest policy.
func TestWatchPortCoalesces(t *testing.T) {
	env, ctx := startSeeded(t)
	stream, err := env.client.WatchPort(ctx, &inbound.PortSpec{Workload: "shop:web-0", Port: 8080})
	if err != nil {
		t.Fatal(err)
	}
	recv(t, stream)
	eventually(t, "the watch to register", func() bool { return counterValue(t, env.metrics.watches) == 1 })
	const n = 200
	for i := range n {
		sa := "sa-" + strings.Repeat("x", i%7) + string(rune('a'+i%26))
		if i == n-1 {
			sa = "final"
		}
		env.idx.Apply(manifests(t, `
apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: web-from-gateway, namespace: shop}
spec:
  targetRef: {group: policy.linkerd.io, kind: Server, name: web-http}
  requiredAuthenticationRefs: [{kind: ServiceAccount, name: `+sa+`}]`)[0])
	}
	want := "web-from-gateway=final.shop.serviceaccount.identity.linkerd.cluster.local"
	received := 0
	for {
		m := recv(t, stream)
		received++
		if ids := identities(m); len(ids) == 1 && ids[0] == want {
			break
		}
		if received > n {
			t.Fatal("never received the final policy")
		}
	}
	if c := counterValue(t, env.metrics.coalesced); c == 0 {
		t.Logf("no coalescing happened this run (%d messages for %d changes)", received, n)
	}
}
