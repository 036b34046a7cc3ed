// Package kubetest starts a real kube-apiserver and etcd (controller-runtime's envtest) for a
// test binary and hands tests a client to it. Every package whose behaviour depends on
// Kubernetes uses it: informers, TokenReview, admission webhooks, CRDs.
//
// The binaries are built from source by `make kube-bin` into .cache/kube/<version>/ (see
// hack/kubetools); KUBEBUILDER_ASSETS overrides the directory. When they are absent the tests
// that need them skip with a message saying how to build them, so `go test ./...` works on a
// bare checkout; `make test` always builds them first.
//
// Test-only: nothing outside _test.go files may import it.
package kubetest
