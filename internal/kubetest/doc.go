// Package kubetest starts a real kube-apiserver and etcd (internal/kubeenv, which the bench
// harness uses too) for a test binary and hands tests a client to it. Every package whose behaviour depends on
// Kubernetes uses it: informers, TokenReview, admission webhooks, CRDs, the Helm chart.
//
// The binaries are built from source by `make kube-bin` (hack/kube-bin.sh, with the wrapper
// module hack/kubetools) into .cache/kube/<KubeVersion>/bin; KUBEBUILDER_ASSETS overrides the
// directory. When they are absent the tests that need them skip with a message saying how to
// build them, so `go test ./...` works on a bare checkout; with MERIDIAN_REQUIRE_KUBE=1 (CI)
// they fail instead. KUBEBUILDER_ATTACH_CONTROL_PLANE_OUTPUT=true shows the servers' logs.
//
// One server is shared by all tests of a test binary (started on first use, stopped by Main);
// tests isolate themselves with Env.Namespace. There is no controller-manager: nothing creates
// default ServiceAccounts (the ServiceAccount admission plugin is off), garbage-collects, or
// finishes deleting namespaces. Env.Restart restarts the API server in place to cut watches.
//
// kubetest owns the server processes and their temporary directories. It is test-only:
// nothing outside _test.go files may import it. Of Meridian's packages it imports
// internal/kubeenv only: it must not import `shard/...`, `cmd/...`, `bench/...`, `proxy/...`,
// `policy/...`, `identity/...`, `injector/...`, `translator/...`, `snapshot/...`, `ring/...` or
// `internal/kube/...`.
package kubetest
