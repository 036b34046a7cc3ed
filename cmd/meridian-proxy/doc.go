// Command meridian-proxy is Meridian's data plane built alone: the same proxy as `meridian
// proxy` (package proxy, configured by the LINKERD2_PROXY_* environment the injector writes
// or by the same flags), with none of the control plane, the Kubernetes client or Helm
// linked in. A process's resident memory counts the pages of its executable that package
// initialization touches, and the all-in-one binary's initialization touches about 25 MiB
// more of them than this one's (`make bench-proxy` measures both): pods should run this.
//
// Usage: meridian-proxy [proxy] [flags]. It exits 0 when stopped by SIGTERM or SIGINT (or
// for -h), 2 on a bad flag, 1 on any other error.
//
// It imports package proxy (and, through it, the data plane) and nothing of the control
// plane: it must not import `shard/...`, `policy/...`, `identity`, `injector/...`,
// `bench/...`, `internal/kube`, `internal/chart` or `k8s.io/client-go/...`, which would bring
// back the pages it exists to leave out.
package main
