// Package demo is `meridian demo` (what `make run` starts): the whole mesh on one machine,
// with traffic flowing and a live view of it.
//
// It reads the example cluster (a directory of Kubernetes YAML, deploy/examples) and runs,
// each as a real process of the meridian binary on a loopback address of its own:
//
//   - the control plane: three destination replicas in a ring (redirect mode, a gossip key,
//     the transport-header mode a machine without iptables needs), the identity service (a
//     trust anchor and issuer generated into the cache directory on first run and reused
//     after, local ServiceAccount tokens) and the policy controller, all reading the example
//     directory; their gRPC is mTLS as in a cluster (identity's certificate from its issuer,
//     the others' from identity with tokens of linkerd-destination and linkerd-policy), and
//     each replica also serves plaintext on <its ip>:8087 for `meridian endpoints`;
//   - for every ready pod of the example cluster with a loopback IPv4 address: the pod's
//     application (`meridian demo app`: an HTTP echo, a gRPC service, or a line-echo TCP
//     "database", chosen by the container port) and, for a meshed pod, a `meridian proxy`
//     with the pod's identity, inbound on <pod ip>:4143;
//   - the traffic generator (`meridian demo traffic`, the container of the loadgen pod),
//     calling the services through its pod's proxy at a modest rate.
//
// In front of the replicas the demo itself plays the Service linkerd-dst: a TCP forwarder
// to the live replicas, which is where proxies first ask (a redirect then sends them to each
// service's owner). The demo's own Destination client is mTLS too, with a certificate of the
// ServiceAccount linkerd/meridian-demo (internal/cptls). Every second it scrapes the replicas' /ring, the proxies', apps' and
// generator's /metrics, and follows the services through the Destination API; the view
// (view.go) shows the ring, the services with their owners and endpoints, the routes with
// their rates, success, latency and mTLS identities, and the policy decisions.
//
// Files by concept: proc.go (supervision of the child processes, which internal/child runs:
// their own process group, killed with the demo by the kernel through Pdeathsig on Linux),
// setup.go (the cache: identity, gossip key, tokens), cluster.go (reading the example cluster),
// plan.go (what runs, with which arguments and environment: pure), forward.go (the
// linkerd-dst forwarder), app.go and traffic.go (the processes `meridian demo app` and
// `meridian demo traffic`), metrics.go (Prometheus text into series), model.go (scrapes into
// what the view shows: pure), view.go (rendering: pure), watch.go (scraping, and the
// services through the Destination API), mesh.go (starting it all, each round), live.go (the
// live view and its keys), actions.go (what keys and the script do: kill, restart, the deny
// policy), once.go and oncetls.go (`--once`: a scripted run with checks), keys_*.go (the
// terminal's keys).
//
// It owns every child process it starts (stopped within a bound when its context ends,
// killed by the kernel when it dies), the forwarder and every goroutine it starts; all of
// them are waited for.
//
// Like bench it is a harness that composes the whole system, so it may import the servers'
// packages for their pure helpers (ring.Build, identity.GenerateInstall) and the proxy's
// discovery client; it runs the servers themselves only as processes. It must not import
// `cmd/...`, `bench/...`, `internal/testutil`, `internal/kubetest` or `internal/charttest`.
// Nothing imports it but cmd/meridian.
package demo
