// Package compute turns a pod, one of its ports and the policy resources of the mesh into the
// inbound policy a proxy enforces on that port: an io.linkerd.proxy.inbound.Server message
// shaped as Linkerd's policy controller shapes it.
//
// It is pure: Inbound is a function of its arguments (no I/O, no goroutines, no clocks, no
// logging), so that every rule can be table-tested and every result is deterministic (lists are
// sorted; a conflict between two Servers is resolved by the oldest creationTimestamp, then
// name, and reported in the Result rather than logged here).
//
// The semantics follow Linkerd's policy controller (linkerd2 policy-controller/k8s/index):
//
//   - A Server in the pod's namespace selects the pod by podSelector and the port by number or
//     by named TCP container port. Without one, the port gets the default policy from the pod
//     annotation config.linkerd.io/default-inbound-policy, else the cluster default. Ports in
//     config.linkerd.io/proxy-require-identity-inbound-ports turn an allow default into its
//     authenticated form; ports in config.linkerd.io/opaque-ports are opaque by default.
//   - Authorizations of a Server: every legacy ServerAuthorization whose server name or
//     selector matches it, every AuthorizationPolicy targeting it (or its Namespace) whose
//     required authentications all resolve (all refs of one policy must hold together: the
//     networks of a NetworkAuthentication AND the identities of a MeshTLSAuthentication or
//     ServiceAccount), plus the authorization implied by the Server's accessPolicy (none for
//     deny). Policies whose references do not resolve are left out, as Linkerd does.
//   - Health probes: for HTTP protocols (detect, HTTP/1, HTTP/2) the server carries Linkerd's
//     default route (prefix "/") and, when the pod has httpGet liveness/readiness/startup
//     probes on that port, a "probe" route matching GET on exactly those paths with an
//     unauthenticated authorization from the probe networks. The proxy adds route
//     authorizations to the server's, so probes pass even when the policy denies everything
//     else, exactly as with Linkerd.
//
// It imports the generated inbound API; it must not import client-go or any other Meridian
// package: `k8s.io/client-go/...`, `github.com/meridian-mesh/meridian/...`.
package compute
