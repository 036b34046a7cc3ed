package inbound

import (
	"fmt"
	"testing"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/proxy/internal/proxytest"
)

const workload = `{"ns":"shop","pod":"web-0"}`

// meshYAML is the pod web-0 with an HTTP port (a readiness probe on /ready), an opaque
// port and a gRPC port, each behind a deny Server that only the api-gateway
// ServiceAccount is authorized on.
func meshYAML(httpPort, echoPort, grpcPort uint16) string {
	return fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: shop, labels: {app: web}}
spec:
  serviceAccountName: web
  containers:
  - name: web
    image: web:1
    ports:
    - {name: http, containerPort: %[1]d}
    - {name: echo, containerPort: %[2]d}
    - {name: grpc, containerPort: %[3]d}
    readinessProbe: {httpGet: {path: /ready, port: http}}
---
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: web-http, namespace: shop}
spec: {podSelector: {matchLabels: {app: web}}, port: http, proxyProtocol: HTTP/1, accessPolicy: deny}
---
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: web-echo, namespace: shop}
spec: {podSelector: {matchLabels: {app: web}}, port: echo, proxyProtocol: opaque, accessPolicy: deny}
---
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: web-grpc, namespace: shop}
spec: {podSelector: {matchLabels: {app: web}}, port: grpc, proxyProtocol: gRPC, accessPolicy: deny}
---
%s`, httpPort, echoPort, grpcPort, authorize("api-gateway"))
}

// authorize is the AuthorizationPolicy gateway-only allowing ServiceAccount sa on every
// Server of the namespace.
func authorize(sa string) string {
	return fmt.Sprintf(`apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: gateway-only, namespace: shop}
spec:
  targetRef: {kind: Namespace, name: shop}
  requiredAuthenticationRefs:
  - {kind: ServiceAccount, name: %s}
`, sa)
}

// startController runs Meridian's policy service, in process, on loopback with the
// manifests docs.
func startController(t *testing.T, docs ...string) *proxytest.PolicyService {
	t.Helper()
	return proxytest.ServePolicy(t, proxytest.NewPolicyIndex(t, docs...), "127.0.0.1:0")
}

// policyProxy is a proxy for web-0 asking ctl for its policy.
func policyProxy(t *testing.T, pki *testutil.PKI, policyAddr, defaultPolicy string, defaultPort uint16) *proxy {
	t.Helper()
	cfg := Config{Identity: serverID, Workload: workload, DefaultPolicy: defaultPolicy, DefaultPort: defaultPort}
	return startProxy(t, cfg, Deps{TLS: proxytest.TLS(t, pki, serverID), PolicyConn: testutil.DialGRPC(t, policyAddr)})
}
