// Package kube is what every Meridian component shares to talk to the Kubernetes API: one
// way to find the API server (RESTConfig, in controller-runtime's order: --kubeconfig, then
// $KUBECONFIG, then the in-cluster service account, then ~/.kube/config; KubeconfigUsage is
// the help text every command prints for it), the typed and dynamic clients built from it,
// and the informer lag histograms (<resource>_informer_lag_seconds, now minus the newest
// managedFields time of an updated object).
//
// It imports client-go, apimachinery, the Prometheus client and the standard library; it must
// not import any other Meridian package: `github.com/meridian-mesh/meridian/...`.
package kube
