// Package charttest runs the Helm chart's workloads against the real API server of
// internal/kubetest without a container runtime: a stand-in for the controllers, the kubelet
// and the cluster DNS, so that tests prove the chart's flags, ports, mounts and RBAC fit the
// meridian binary.
//
// Kubelet.Sync does, for each Deployment and StatefulSet in its namespace, what the
// controllers and a kubelet would: it creates the pods (StatefulSet pods named <name>-<i>,
// with their hostname and subdomain), gives each a pod IP of its own on the loopback network
// (127.A.B.x: every 127/8 address works on Linux without setup), fills the downward API, mounts
// Secrets, ConfigMaps, projected ServiceAccount tokens (from the TokenRequest API, bound to the
// pod) and the kube-api-access volume at their mountPaths, and starts each container's command
// and args as a process of the built meridian binary (or, for an injected pod's linkerd-proxy
// container whose command is meridian-proxy, of the built meridian-proxy: control-plane pods
// run meridian only), with KUBERNETES_SERVICE_HOST/PORT
// pointing at the API server, so that the process authenticates as its ServiceAccount and RBAC
// applies. It runs each process as the pod's runAsUser/runAsGroup/fsGroup in a private mount
// namespace (re-executing the test binary as a small init, see Main) whose /etc/resolv.conf
// names the stand-in DNS, which answers <svc>.<ns>.svc.<domain> from Services and the ready
// pods they select, as CoreDNS does from EndpointSlices. It probes every readiness and
// liveness probe of the spec and writes the pods' Ready conditions.
//
// It needs root (mount namespaces, credentials, DNS on port 53) and Linux. Processes bind
// loopback addresses only, die with the test binary (Pdeathsig) and are stopped at cleanup;
// every wait has a deadline. It is test-only: nothing outside _test.go files may import it. It
// must not import the servers: `shard/...`, `policy/...`, `identity/...`, `injector/...`,
// `proxy/...`, `bench/...` or `cmd/...` (it runs them as processes).
package charttest
