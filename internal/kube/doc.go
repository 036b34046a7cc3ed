// Package kube is what every Meridian component shares to talk to the Kubernetes API: one
// way to find the API server (RESTConfig, in controller-runtime's order: --kubeconfig, then
// $KUBECONFIG, then the in-cluster service account, then ~/.kube/config; KubeconfigUsage is
// the help text every command prints for it), the typed and dynamic clients built from it,
// and the informer lag histograms (<resource>_informer_lag_seconds, now minus the newest
// managedFields time of an updated object).
//
// It imports client-go, apimachinery, the Prometheus client, internal/metrics and the standard
// library; it must not import any other Meridian package: `shard/...`, `policy/...`,
// `identity/...`, `injector/...`, `proxy/...`, `ring/...`, `translator/...`, `snapshot/...`,
// `bench/...`, `cmd/...`, `internal/manifest/...`, `internal/serve/...`.
//
// Allowed imports: `std`, `k8s.io/...`, `github.com/prometheus/client_golang/prometheus/...`,
// `internal/metrics`.
package kube
